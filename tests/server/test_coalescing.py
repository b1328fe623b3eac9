"""The gathering logic of request coalescing (actors/server/coalescing.py), without Ray: a
fake `send` records each batch and answers it when the test says so."""

import asyncio

import pytest

from actors.server.coalescing import Coalescer
from runtime.errors import Errors, KafkaError


class FakeActor:
    """Records every batched call; each waits until the test releases it."""

    def __init__(self) -> None:
        self.batches: list[tuple[str, str, list]] = []
        self.release: list[asyncio.Future] = []

    async def send(self, name, method, calls):
        self.batches.append((name, method, list(calls)))
        gate = asyncio.get_running_loop().create_future()
        self.release.append(gate)
        fail = await gate
        if fail:
            raise fail
        # Each call keeps its own answer; a negative argument stands for a call that fails.
        return [KafkaError(Errors.UNKNOWN_MEMBER_ID) if args[0] < 0 else ("ok", args[0]) for args in calls]


async def _until(predicate):
    for _ in range(1000):
        if predicate():
            return
        await asyncio.sleep(0)
    raise AssertionError("never happened")


def test_calls_of_one_turn_go_as_one_batch_and_keep_their_answers():
    async def main():
        actor = FakeActor()
        c = Coalescer(actor.send)
        calls = [asyncio.ensure_future(c.call("a", "heartbeat", i)) for i in (1, 2, -3, 4)]
        await _until(lambda: actor.batches)
        assert actor.batches == [("a", "heartbeat", [(1,), (2,), (-3,), (4,)])]
        actor.release[0].set_result(None)
        results = await asyncio.gather(*calls, return_exceptions=True)
        assert results[0] == ("ok", 1) and results[1] == ("ok", 2) and results[3] == ("ok", 4)
        assert isinstance(results[2], KafkaError) and results[2].error is Errors.UNKNOWN_MEMBER_ID
    asyncio.run(main())


def test_calls_arriving_while_a_batch_is_out_leave_together_when_it_returns():
    async def main():
        actor = FakeActor()
        c = Coalescer(actor.send)
        first = asyncio.ensure_future(c.call("a", "heartbeat", 1))
        await _until(lambda: actor.batches)
        later = [asyncio.ensure_future(c.call("a", "heartbeat", i)) for i in (2, 3)]
        for _ in range(20):
            await asyncio.sleep(0)
        assert len(actor.batches) == 1  # nothing leaves while the first batch is out
        actor.release[0].set_result(None)
        assert await first == ("ok", 1)
        await _until(lambda: len(actor.batches) == 2)
        assert actor.batches[1] == ("a", "heartbeat", [(2,), (3,)])
        actor.release[1].set_result(None)
        assert await asyncio.gather(*later) == [("ok", 2), ("ok", 3)]
    asyncio.run(main())


def test_keys_are_gathered_apart():
    async def main():
        actor = FakeActor()
        c = Coalescer(actor.send)
        calls = [asyncio.ensure_future(c.call(name, method, 1))
                 for name, method in (("a", "heartbeat"), ("b", "heartbeat"), ("a", "offset_commit"))]
        await _until(lambda: len(actor.batches) == 3)
        assert sorted(b[:2] for b in actor.batches) == [("a", "heartbeat"), ("a", "offset_commit"),
                                                         ("b", "heartbeat")]
        for gate in actor.release:
            gate.set_result(None)
        assert await asyncio.gather(*calls) == [("ok", 1)] * 3
    asyncio.run(main())


def test_a_failed_batch_fails_each_of_its_calls_and_the_next_batch_still_goes():
    async def main():
        actor = FakeActor()
        c = Coalescer(actor.send)
        calls = [asyncio.ensure_future(c.call("a", "heartbeat", i)) for i in (1, 2)]
        await _until(lambda: actor.batches)
        later = asyncio.ensure_future(c.call("a", "heartbeat", 3))
        actor.release[0].set_result(KafkaError(Errors.COORDINATOR_NOT_AVAILABLE))
        for call in calls:
            with pytest.raises(KafkaError) as e:
                await call
            assert e.value.error is Errors.COORDINATOR_NOT_AVAILABLE
        await _until(lambda: len(actor.batches) == 2)
        actor.release[1].set_result(None)
        assert await later == ("ok", 3)
    asyncio.run(main())


def test_batches_are_capped():
    async def main():
        actor = FakeActor()
        c = Coalescer(actor.send, max_batch=2)
        calls = [asyncio.ensure_future(c.call("a", "heartbeat", i)) for i in range(5)]
        await _until(lambda: actor.batches)
        for n in (1, 2, 3):
            await _until(lambda: len(actor.batches) == n)
            actor.release[n - 1].set_result(None)
        assert [len(b[2]) for b in actor.batches] == [2, 2, 1]
        assert await asyncio.gather(*calls) == [("ok", i) for i in range(5)]
    asyncio.run(main())


def test_batches_are_capped_by_size_and_a_call_larger_than_the_cap_goes_alone():
    async def main():
        actor = FakeActor()
        c = Coalescer(actor.send, size=lambda args: args[0], max_size=10)
        sizes = [4, 4, 4, 30, 1, 2, 3]
        calls = [asyncio.ensure_future(c.call("a", "produce", n)) for n in sizes]
        for n in (1, 2, 3, 4):
            await _until(lambda: len(actor.batches) == n)
            actor.release[n - 1].set_result(None)
        assert [[args[0] for args in b[2]] for b in actor.batches] == [[4, 4], [4], [30], [1, 2, 3]]
        assert await asyncio.gather(*calls) == [("ok", n) for n in sizes]
    asyncio.run(main())


def test_two_batches_in_flight_never_hold_calls_of_one_order_at_once():
    """As the gateway's produce line: a partition's calls stay in order across batches that
    Ray may start in any order; other partitions' calls do not wait behind them."""
    async def main():
        actor = FakeActor()
        c = Coalescer(actor.send, max_in_flight=2, order=lambda args: args[0] % 10)
        first = [asyncio.ensure_future(c.call("h", "produce", n)) for n in (1, 2)]
        await _until(lambda: len(actor.batches) == 1)
        second = [asyncio.ensure_future(c.call("h", "produce", n)) for n in (11, 3, 21)]
        await _until(lambda: len(actor.batches) == 2)
        assert [args for args, in actor.batches[1][2]] == [3]  # 11 and 21 wait for the batch holding 1
        third = [asyncio.ensure_future(c.call("h", "produce", n)) for n in (4,)]
        for _ in range(20):
            await asyncio.sleep(0)
        assert len(actor.batches) == 2  # two out: 4 gathers
        actor.release[1].set_result(None)
        await _until(lambda: len(actor.batches) == 3)
        assert [args for args, in actor.batches[2][2]] == [4]  # 11 and 21 still held
        actor.release[0].set_result(None)
        await _until(lambda: len(actor.batches) == 4)
        assert [args for args, in actor.batches[3][2]] == [11, 21]
        actor.release[2].set_result(None)
        actor.release[3].set_result(None)
        assert await asyncio.gather(*first, *second, *third) == [("ok", n) for n in (1, 2, 11, 3, 21, 4)]
    asyncio.run(main())


def test_several_in_flight_need_an_order():
    with pytest.raises(ValueError):
        Coalescer(FakeActor().send, max_in_flight=2)


def test_a_caller_that_went_away_does_not_disturb_the_others():
    async def main():
        actor = FakeActor()
        c = Coalescer(actor.send)
        gone = asyncio.ensure_future(c.call("a", "heartbeat", 1))
        stays = asyncio.ensure_future(c.call("a", "heartbeat", 2))
        await _until(lambda: actor.batches)
        gone.cancel()
        actor.release[0].set_result(None)
        assert await stays == ("ok", 2)
    asyncio.run(main())


def test_unordered_calls_leave_at_the_end_of_their_turn_while_a_batch_is_out():
    async def main():
        actor = FakeActor()
        c = Coalescer(actor.send, max_in_flight=None)
        first = asyncio.ensure_future(c.call("a", "fetch", 1))
        await _until(lambda: actor.batches)
        later = [asyncio.ensure_future(c.call("a", "fetch", i)) for i in (2, 3)]
        await _until(lambda: len(actor.batches) == 2)  # not held back by the first
        assert actor.batches[1] == ("a", "fetch", [(2,), (3,)])
        actor.release[1].set_result(None)
        assert await asyncio.gather(*later) == [("ok", 2), ("ok", 3)]
        assert not first.done()
        actor.release[0].set_result(None)
        assert await first == ("ok", 1)
    asyncio.run(main())
