"""Calling actors the way Kafka clients call brokers: retriable failures (actor death or
restart, NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS, and the
response's own retriable error codes, or its partitions' ones) are retried with exponential
backoff until a deadline. `Retry` decides around each attempt; `call` and `call_async` are
only its two loops, one that blocks and one that awaits.

Two rules for every call made here, because an actor's event loop also runs its timers and
heartbeats:
- Looking an actor up (`ray.get_actor`) asks Ray's control service (GCS) and blocks its thread
  until it answers, so on an event loop it is done on a lookup thread (`ActorDirectory.lookup`).
- A call the caller gives up on (its timeout, or the caller's own cancellation) is cancelled
  on the actor (`await_ref`): Ray drops it if it has not started, and cancels an async actor's
  coroutine (asyncio.CancelledError there) if it has. Only that call is cancelled, not the
  calls it made (recursive=False): work the callee shares between callers (a load, a listing)
  or runs on its own must not end with one caller's call; the calls the cancelled coroutine
  was awaiting are cancelled by its own `await_ref`s."""
from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import inspect
import logging
import os
import threading
import time
from typing import Any, Awaitable, Callable, Iterator

import ray

from runtime.errors import Errors, KafkaError

from .errors import RETRIABLE_COORDINATOR_ERRORS, to_kafka_error

log = logging.getLogger(__name__)


class Backoff:
    """Kafka's exponential backoff (retry.backoff.ms doubling up to retry.backoff.max.ms)."""

    def __init__(self, initial_ms: int = 100, max_ms: int = 1000) -> None:
        self.initial_ms = initial_ms
        self.max_ms = max_ms
        self.attempts = 0

    def next_s(self) -> float:
        delay = min(self.initial_ms * (2 ** self.attempts), self.max_ms)
        self.attempts += 1
        return delay / 1000


class Retry:
    """The decisions of one retried call, apart from its I/O (the loops of `call` and
    `call_async` only send, wait and sleep): Kafka's exponential backoff until a deadline.
    A response is final unless its error code is in `retry_on`, or, with `per_partition`,
    the code of any partition (group, topic) it answers for is; then the whole request is
    sent again, and at the deadline the caller gets the response as it is, each partition
    with its error. A failed call (actor death, NOT_COORDINATOR...) is retried while its
    error is retriable; at the deadline it ends in REQUEST_TIMED_OUT."""

    def __init__(self, method: str, timeout_s: float, retry_on: frozenset = RETRIABLE_COORDINATOR_ERRORS,
                 per_partition: bool = False, backoff: Backoff | None = None,
                 on_failure: Callable[[], None] | None = None) -> None:
        self.method = method
        self.timeout_s = timeout_s
        self.retry_on = retry_on
        self.per_partition = per_partition
        self.deadline = time.monotonic() + timeout_s
        self.backoff = backoff or Backoff()
        self.on_failure = on_failure
        self.response: Any = None
        self.pause: float | None = None

    @contextlib.contextmanager
    def attempt(self) -> Iterator["Retry"]:
        """Around one send, which puts its answer in `response`. Afterwards `pause` is None
        when the call is over (its answer is `response`), else the seconds to wait before
        sending again; a failure that ends the call comes out of here as a KafkaError."""
        self.response, self.pause = None, None
        try:
            yield self
        except Exception as e:
            if self.on_failure is not None:
                self.on_failure()
            self.pause = self.after_failure(e)
        else:
            self.pause = self.after_response(self.response)

    def remaining_s(self) -> float:
        """How long the next attempt may wait for its answer."""
        return max(self.deadline - time.monotonic(), 0.001)

    def after_response(self, response: Any) -> float | None:
        """None: `response` is the answer; else the seconds to wait before sending again."""
        code = getattr(response, "error_code", 0)
        if code:
            error = Errors.for_code(code)
            if error in self.retry_on:
                return self._pause(KafkaError(error, getattr(response, "error_message", None)))
            return None
        if self.per_partition:
            retriable = next((c for c in error_codes(response) if Errors.for_code(c) in self.retry_on), None)
            if retriable is not None:
                pause = self.backoff.next_s()
                return pause if time.monotonic() + pause <= self.deadline else None
        return None

    def after_failure(self, exc: BaseException) -> float:
        """The seconds to wait before sending again; raises the KafkaError that ends the call."""
        if type(exc) is TimeoutError:  # asyncio's wait_for: Ray's own timeouts are RayErrors
            error = KafkaError(Errors.REQUEST_TIMED_OUT, f"{self.method} timed out")
        else:
            error = to_kafka_error(exc)
        if not (error.retriable or error.error in self.retry_on):
            raise error from exc
        return self._pause(error)

    def _pause(self, error: KafkaError) -> float:
        pause = self.backoff.next_s()
        if time.monotonic() + pause > self.deadline:
            raise KafkaError(Errors.REQUEST_TIMED_OUT,
                             f"{self.method} did not succeed within {self.timeout_s}s: {error}")
        return pause


def error_codes(response: Any) -> Iterator[int]:
    """Every error code a response carries below its own: those of the partitions, groups or
    topics it answers for (fields named error_code or partition_error_code, in nested
    dataclasses and tuples of them)."""
    for f in dataclasses.fields(response):
        value = getattr(response, f.name)
        if f.name in ("error_code", "partition_error_code"):
            if value:
                yield value
        elif isinstance(value, tuple):
            if value and dataclasses.is_dataclass(value[0]):
                for item in value:
                    yield from error_codes(item)
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            yield from error_codes(value)


def call(get_handle: Callable[[], Any], method: str, *args, timeout_s: float = 30.0,
         on_failure: Callable[[], None] | None = None, retry_on: frozenset = RETRIABLE_COORDINATOR_ERRORS,
         per_partition: bool = False) -> Any:
    """Blocking call with retries (see Retry). ``get_handle`` may look the actor up again
    after ``on_failure`` dropped a cached handle."""
    retry = Retry(method, timeout_s, retry_on, per_partition, on_failure=on_failure)
    while True:
        with retry.attempt():
            ref = getattr(get_handle(), method).remote(*args)
            try:
                retry.response = ray.get(ref, timeout=retry.remaining_s())
            except ray.exceptions.GetTimeoutError:
                cancel(ref)
                raise
        if retry.pause is None:
            return retry.response
        time.sleep(retry.pause)


def cancel(ref: Any) -> None:
    """Cancel the actor call behind `ref`, which nobody waits for any more (see the module's
    doc). Does not block: Ray sends the cancellation in the background, and it does nothing
    to a call that is over."""
    if not isinstance(ref, ray.ObjectRef):
        return  # a test's stand-in
    try:
        ray.cancel(ref, recursive=False)
    except Exception as e:  # Ray is shutting down, or the actor is gone: nothing runs on
        log.debug("cancelling a call: %s", e)


async def await_ref(ref: Any, timeout_s: float | None) -> Any:
    """The answer of one actor call, within `timeout_s` (None: no limit) else TimeoutError,
    as asyncio.wait_for; the call is cancelled on the actor when the caller gives up on it,
    at the timeout or when the caller is cancelled."""
    try:
        return await asyncio.wait_for(ref, timeout_s)
    except (asyncio.TimeoutError, asyncio.CancelledError):
        cancel(ref)
        raise


async def _handle(get_handle: Callable[[], Any]) -> Any:
    """`get_handle`'s handle; it may return an awaitable (ActorDirectory.lookup)."""
    handle = get_handle()
    return await handle if inspect.isawaitable(handle) else handle


class ActorNotFound(KafkaError):
    """No actor has the name (yet, or any more); its error is COORDINATOR_NOT_AVAILABLE, as
    Kafka answers for a coordinator that is not there."""


async def call_async(get_handle: Callable[[], Any], method: str, *args, timeout_s: float = 30.0,
                     on_failure: Callable[[], None] | None = None,
                     retry_on: frozenset = RETRIABLE_COORDINATOR_ERRORS, per_partition: bool = False,
                     on_missing: Callable[[], Awaitable[None]] | None = None) -> Any:
    """The same, for callers inside async actors (`get_handle` may return an awaitable, as
    ActorDirectory.lookup does); an attempt given up on is cancelled on the actor
    (`await_ref`). `on_missing` (re)creates an actor that is created on demand, when no actor
    has its name."""
    retry = Retry(method, timeout_s, retry_on, per_partition, on_failure=on_failure)
    while True:
        with retry.attempt():
            try:
                handle = await asyncio.wait_for(_handle(get_handle), retry.remaining_s())
            except ActorNotFound:
                if on_missing is None:
                    raise
                await on_missing()
                handle = await asyncio.wait_for(_handle(get_handle), retry.remaining_s())
            retry.response = await await_ref(getattr(handle, method).remote(*args), retry.remaining_s())
        if retry.pause is None:
            return retry.response
        await asyncio.sleep(retry.pause)


# ray.get_actor blocks its thread until Ray's control service answers: lookups made from an
# event loop wait on these threads instead (a few: each name is looked up once at a time).
_LOOKUP_THREADS = 4
_lookup_pool: concurrent.futures.ThreadPoolExecutor | None = None
_lookup_pool_lock = threading.Lock()


def _lookup_threads() -> concurrent.futures.ThreadPoolExecutor:
    global _lookup_pool
    with _lookup_pool_lock:
        if _lookup_pool is None:
            _lookup_pool = concurrent.futures.ThreadPoolExecutor(_LOOKUP_THREADS, thread_name_prefix="shoal-lookup")
        return _lookup_pool


def _forget_lookup_threads() -> None:
    global _lookup_pool
    _lookup_pool = None  # a forked child has the pool but not its threads


os.register_at_fork(after_in_child=_forget_lookup_threads)


class ActorDirectory:
    """The named actors of one namespace as one process reaches them: each looked up once,
    dropped from the cache when a call through it fails (so that a restarted or re-created
    actor is found again), and the ones this process created kept for good, because a
    non-detached actor ends when its owner drops its last handle, even while Ray restarts it.

    On an event loop, find actors with `lookup` (or call them with `call_async` or `send`),
    never with `get`, which blocks while Ray's control service answers."""

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        self._cache: dict[str, Any] = {}
        self._kept: dict[str, Any] = {}
        self._lookups: dict[str, concurrent.futures.Future] = {}  # name -> its lookup under way
        self._lock = threading.Lock()

    def _look_up(self, name: str) -> Any:
        """Ask Ray (blocks until its control service answers)."""
        try:
            return ray.get_actor(name, namespace=self.namespace)
        except ValueError:
            raise ActorNotFound(Errors.COORDINATOR_NOT_AVAILABLE, f"no actor {name} in {self.namespace}") from None

    def get(self, name: str) -> Any:
        """The actor's handle, looked up on this thread if not cached: for threads that may
        block (the user's, the CLI's), not for event loops."""
        with self._lock:
            handle = self._cache.get(name)
        if handle is None:
            handle = self._look_up(name)
            with self._lock:
                self._cache[name] = handle
        return handle

    async def lookup(self, name: str, fresh: bool = False) -> Any:
        """The actor's handle, for callers on an event loop: from the cache, else looked up
        on a lookup thread while the loop goes on (one lookup of a name at a time, shared by
        every caller waiting for it). `fresh`: ask Ray even if a handle is cached (whether
        the actor runs now). Raises ActorNotFound."""
        with self._lock:
            if fresh:
                self._cache.pop(name, None)
                self._lookups.pop(name, None)
            handle = self._cache.get(name)
            if handle is not None:
                return handle
            lookup = self._lookups.get(name)
            started = lookup is None
            if started:
                lookup = self._lookups[name] = _lookup_threads().submit(self._look_up, name)
        if started:  # outside the lock: a lookup done already calls back on this thread
            lookup.add_done_callback(lambda done: self._looked_up(name, done))
        # A caller that gives up leaves the lookup to the others.
        return await asyncio.shield(asyncio.wrap_future(lookup))

    def _looked_up(self, name: str, lookup: concurrent.futures.Future) -> None:
        with self._lock:
            if self._lookups.get(name) is not lookup:
                return  # forgotten meanwhile: its answer may be older than the forgetting
            del self._lookups[name]
            if lookup.exception() is None:
                self._cache[name] = lookup.result()

    async def create(self, name: str, make: Callable[[], Any]) -> Any:
        """`make()`, which creates the actor named `name` (or, with Ray's get_if_exists, gets
        the one running under the name), on a lookup thread: it asks Ray's control service,
        as a lookup does. Its handle is kept (`keep`), even when the caller gave up meanwhile."""
        def made() -> Any:
            handle = make()
            self.keep(name, handle)
            return handle
        return await asyncio.shield(asyncio.wrap_future(_lookup_threads().submit(made)))

    def keep(self, name: str, handle: Any) -> None:
        """A handle of an actor this process created."""
        with self._lock:
            self._cache[name] = handle
            self._kept[name] = handle

    def forget(self, name: str) -> None:
        with self._lock:
            self._cache.pop(name, None)
            self._lookups.pop(name, None)

    def kill(self, name: str, wait_s: float = 10.0) -> None:
        """End the named actor for good (no restart) and wait until its name is free, so that
        a successor made at once is not handed the ending one; for a thread that may block."""
        with self._lock:
            for known in (self._cache, self._kept, self._lookups):
                known.pop(name, None)
        try:
            ray.kill(ray.get_actor(name, namespace=self.namespace), no_restart=True)
        except ValueError:
            return  # gone already
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            try:
                ray.get_actor(name, namespace=self.namespace)
            except ValueError:
                return
            time.sleep(0.05)

    def clear(self) -> None:
        with self._lock:
            self._cache.clear()
            self._kept.clear()
            self._lookups.clear()

    def call(self, name: str, method: str, *args, timeout_s: float = 30.0,
             retry_on: frozenset = RETRIABLE_COORDINATOR_ERRORS, per_partition: bool = False) -> Any:
        return call(lambda: self.get(name), method, *args, timeout_s=timeout_s,
                    on_failure=lambda: self.forget(name), retry_on=retry_on, per_partition=per_partition)

    async def call_async(self, name: str, method: str, *args, timeout_s: float = 30.0,
                         retry_on: frozenset = RETRIABLE_COORDINATOR_ERRORS, per_partition: bool = False,
                         on_missing: Callable[[], Awaitable[None]] | None = None) -> Any:
        return await call_async(lambda: self.lookup(name), method, *args, timeout_s=timeout_s,
                                on_failure=lambda: self.forget(name), retry_on=retry_on, per_partition=per_partition,
                                on_missing=on_missing)

    async def send(self, name: str, method: str, *args, timeout_s: float | None = 30.0, fresh: bool = False) -> Any:
        """One call of `method` on the actor, not retried: looked up as by `lookup`, its
        answer awaited as by `await_ref` (cancelled on the actor when given up on), and the
        handle forgotten when the call fails. Raises what failed as it is: ActorNotFound,
        TimeoutError after `timeout_s` (the lookup's time included), or Ray's error."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        handle = await asyncio.wait_for(self.lookup(name, fresh), timeout_s)
        try:
            return await await_ref(getattr(handle, method).remote(*args),
                                   None if deadline is None else max(deadline - time.monotonic(), 0.001))
        except Exception:
            self.forget(name)
            raise
