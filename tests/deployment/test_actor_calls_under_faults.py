"""Calls between actors under faults (actors.retry): a slow lookup in Ray's control service
(GCS) must not stall the caller's event loop, and a call its caller gave up on (a timeout,
or the caller's own cancellation) must not run on at the callee."""
import ast
import asyncio
import pathlib
import threading
import time

import pytest
import ray

from actors.clients.network_thread import NetworkThread, result_within
from actors.retry import ActorDirectory
from runtime.errors import Errors, KafkaError
from tests.conftest import wait_until

NAMESPACE = "test-actor-calls-under-faults"
ROOT = pathlib.Path(__file__).resolve().parents[2]


@ray.remote(num_cpus=0)
class Callee:
    """Answers `ping` at once; `slow` waits a minute, noting when it starts and whether it
    was cancelled."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    async def ping(self) -> str:
        return "pong"

    async def slow(self, tag: str) -> str:
        self.events.append(("started", tag))
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            self.events.append(("cancelled", tag))
            raise
        self.events.append(("finished", tag))
        return tag

    async def seen(self) -> list:
        return list(self.events)


@ray.remote(num_cpus=0)
class Caller:
    """An async actor that calls others through an ActorDirectory, with a switch that makes
    ray.get_actor slow in its own process (Ray's control service answering slowly)."""

    def __init__(self) -> None:
        self.directory = ActorDirectory(NAMESPACE)
        self.lookups = 0
        self.looking = 0  # lookups under way
        self._count = threading.Lock()
        self._real_get_actor = ray.get_actor

    async def slow_lookups(self, delay_s: float) -> None:
        def get_actor(*args, **kwargs):
            with self._count:
                self.lookups += 1
                self.looking += 1
            try:
                time.sleep(delay_s)
                return self._real_get_actor(*args, **kwargs)
            finally:
                with self._count:
                    self.looking -= 1
        ray.get_actor = get_actor if delay_s else self._real_get_actor
        self.directory.clear()
        self.lookups = 0

    async def call(self, name: str, method: str, *args, timeout_s: float = 30.0):
        return await self.directory.call_async(name, method, *args, timeout_s=timeout_s)

    async def calls(self, name: str, method: str, n: int) -> list:
        return await asyncio.gather(*(self.call(name, method) for _ in range(n)))

    async def ping(self) -> dict:
        return {"looking": self.looking, "lookups": self.lookups}


@pytest.fixture(scope="module")
def actors(ray_session):
    callee = Callee.options(name="callee", namespace=NAMESPACE).remote()
    caller = Caller.options(name="caller", namespace=NAMESPACE).remote()
    ray.get([callee.ping.remote(), caller.ping.remote()], timeout=60)
    yield callee, caller
    for a in (callee, caller):
        ray.kill(a, no_restart=True)


def _answer_within(ref, timeout_s: float):
    try:
        return ray.get(ref, timeout=timeout_s)
    except ray.exceptions.GetTimeoutError:
        return None


def test_a_slow_lookup_leaves_the_callers_loop_serving_other_calls(actors):
    _, caller = actors
    ray.get(caller.slow_lookups.remote(4.0), timeout=10)
    try:
        calls = caller.calls.remote("callee", "ping", 5)
        # Answered within 0.5 s while the lookup (4 s) is still under way.
        wait_until(lambda: (_answer_within(caller.ping.remote(), 0.5) or {}).get("looking"),
                   timeout_s=3.5, message="a call answered while the lookup is under way")
        assert ray.get(calls, timeout=30) == ["pong"] * 5
        # The five callers waited for one lookup, whose handle is kept for the next call.
        assert ray.get(caller.ping.remote(), timeout=10)["lookups"] == 1
        assert ray.get(caller.call.remote("callee", "ping"), timeout=10) == "pong"
        assert ray.get(caller.ping.remote(), timeout=10)["lookups"] == 1
    finally:
        ray.get(caller.slow_lookups.remote(0), timeout=30)


def test_a_call_that_times_out_at_the_caller_is_cancelled_at_the_callee(actors):
    callee, caller = actors
    with pytest.raises(KafkaError) as e:
        ray.get(caller.call.remote("callee", "slow", "timed-out", timeout_s=0.5), timeout=30)
    assert e.value.error is Errors.REQUEST_TIMED_OUT
    wait_until(lambda: ("cancelled", "timed-out") in ray.get(callee.seen.remote(), timeout=10), timeout_s=10,
               message="the timed-out call cancelled on the callee")


def test_a_call_whose_caller_is_cancelled_is_cancelled_at_the_callee(actors):
    """The share consumer's network thread: a user call that times out cancels its
    coroutine, and with it the actor call the coroutine was waiting for."""
    callee, _ = actors
    directory = ActorDirectory(NAMESPACE)
    with pytest.raises(KafkaError) as e:
        result_within(NetworkThread.instance().submit(directory.call_async("callee", "slow", "abandoned")), 1.0)
    assert e.value.error is Errors.REQUEST_TIMED_OUT
    wait_until(lambda: ("cancelled", "abandoned") in ray.get(callee.seen.remote(), timeout=10), timeout_s=10,
               message="the abandoned call cancelled on the callee")


def test_a_blocking_call_that_times_out_is_cancelled_at_the_callee(actors):
    callee, _ = actors
    with pytest.raises(KafkaError) as e:
        ActorDirectory(NAMESPACE).call("callee", "slow", "blocking", timeout_s=0.5)
    assert e.value.error is Errors.REQUEST_TIMED_OUT
    wait_until(lambda: ("cancelled", "blocking") in ray.get(callee.seen.remote(), timeout=10), timeout_s=10,
               message="the timed-out blocking call cancelled on the callee")


def test_a_single_send_that_times_out_is_cancelled_at_the_callee(actors):
    callee, _ = actors
    directory = ActorDirectory(NAMESPACE)

    async def send():
        return await directory.send("callee", "slow", "sent", timeout_s=0.5)
    with pytest.raises(asyncio.TimeoutError):
        asyncio.run(send())
    wait_until(lambda: ("cancelled", "sent") in ray.get(callee.seen.remote(), timeout=10), timeout_s=10,
               message="the timed-out send cancelled on the callee")


class FakeRay:
    """ray.get_actor of this process, answered by the test: `release` lets the lookups under
    way answer; names in `missing` are not found."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        self.missing: set[str] = set()
        self.release = threading.Event()

    def get_actor(self, name, namespace=None):
        self.asked.append(name)
        self.release.wait(10)
        if name in self.missing:
            raise ValueError(f"Failed to look up actor with name '{name}'")
        return f"handle of {name} #{len(self.asked)}"


@pytest.fixture
def fake_ray(monkeypatch):
    fake = FakeRay()
    monkeypatch.setattr(ray, "get_actor", fake.get_actor)
    return fake


def test_lookups_of_a_name_under_way_are_shared_and_their_answer_cached(fake_ray):
    directory = ActorDirectory(NAMESPACE)

    async def scenario():
        waiting = [asyncio.ensure_future(directory.lookup("a")) for _ in range(3)]
        await asyncio.sleep(0.05)
        fake_ray.release.set()
        handles = await asyncio.gather(*waiting)
        return handles, await directory.lookup("a"), await directory.lookup("a", fresh=True)
    handles, cached, fresh = asyncio.run(scenario())
    assert handles == ["handle of a #1"] * 3 and cached == "handle of a #1"
    assert fresh == "handle of a #2" and fake_ray.asked == ["a", "a"]


def test_a_missing_actor_is_not_cached_and_a_lookup_forgotten_midway_is_not_cached(fake_ray):
    directory = ActorDirectory(NAMESPACE)
    fake_ray.missing.add("gone")

    async def scenario():
        fake_ray.release.set()
        for _ in range(2):
            with pytest.raises(KafkaError) as e:
                await directory.lookup("gone")
            assert e.value.error is Errors.COORDINATOR_NOT_AVAILABLE
        fake_ray.release.clear()
        midway = asyncio.ensure_future(directory.lookup("b"))
        await asyncio.sleep(0.05)
        directory.forget("b")  # a call through an older handle failed meanwhile
        fake_ray.release.set()
        await midway
        return await directory.lookup("b")
    assert asyncio.run(scenario()) == "handle of b #4"
    assert fake_ray.asked == ["gone", "gone", "b", "b"]


def blocking_lookups_in_coroutines() -> set[tuple[str, str]]:
    """(file, coroutine) of every `ray.get_actor`, `ray.get` or `ray.wait`, and every
    synchronous ActorDirectory.get, written inside an `async def` under actors/ (not a `get`
    on what an await gave, such as the dict `await directory.send(...)` answers)."""
    found = set()
    for path in sorted((ROOT / "actors").rglob("*.py")):
        for fn in ast.walk(ast.parse(path.read_text())):
            if not isinstance(fn, ast.AsyncFunctionDef):
                continue
            for node in ast.walk(fn):
                if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                    continue
                owner, attr = ast.unparse(node.func.value), node.func.attr
                if (owner, attr) in {("ray", "get_actor"), ("ray", "get"), ("ray", "wait")} or (
                        attr == "get" and not isinstance(node.func.value, ast.Await)
                        and ("directory" in owner.lower() or owner.endswith("_actors"))) or (
                        attr == "_actor" and owner == "self"):
                    found.add((str(path.relative_to(ROOT)), fn.name))
    return found


def test_no_coroutine_under_actors_looks_an_actor_up_on_its_event_loop():
    assert blocking_lookups_in_coroutines() == set()
