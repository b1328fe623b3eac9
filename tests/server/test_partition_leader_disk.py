"""The partition leader on a failing disk (issue 15, finding 1): group commit never
acknowledges a produce whose flush failed, acknowledges one the log made durable before it
failed, gives no offset to two batches that were both acknowledged, and the producer state
and transaction markers follow. A partition host (the actor class) leading the partition
runs on an asyncio loop of its own, without Ray, over real files and a FaultyIO."""
import asyncio
import dataclasses
import functools
import os
import time

import pytest

from actors.server import partition_leader
from runtime.errors import Errors
from runtime.messages.topics import READ_COMMITTED, FetchRequest, ProduceRequest
from runtime.messages.txn import WritableTxnMarker, WritableTxnMarkerTopic, WriteTxnMarkersRequest
from runtime.log_sync import SYNCFS_AT
from runtime.testing import FaultyIO
from runtime.topics.data import decode_entries, encode_records
from runtime.topics.partition import PartitionLog
from tests.helpers import host_of

STORAGE_ERROR = Errors.KAFKA_STORAGE_ERROR.code


@pytest.fixture
def disk(tmp_path, monkeypatch):
    """(a leader factory, the FaultyIO under its log)."""
    io = FaultyIO()
    monkeypatch.setattr(partition_leader, "PartitionLog", functools.partial(PartitionLog, io=io))
    monkeypatch.setattr(partition_leader, "OPEN_RETRY_S", 0.02)
    # Small segments: a produce of BIG bytes does not fit behind another, so it rolls.
    return lambda: host_of(str(tmp_path), [("t", 0, "t-id", {"segment.bytes": 250})]), io


def part(host, topic: str = "t", partition: int = 0):
    """The host's leader of the partition (its log and internals)."""
    return host._leaders[(topic, partition)]


BIG = b"x" * 200


def produce(value: bytes, pid: int = -1, seq: int = -1, txn: bool = False) -> ProduceRequest:
    return ProduceRequest("t", 0, encode_records([(0, None, value, [])]), 1, 0, producer_id=pid,
                          producer_epoch=0 if pid >= 0 else -1, base_sequence=seq, is_transactional=txn)


async def values(leader, isolation_level=0) -> list[bytes]:
    response = await leader.fetch(FetchRequest("t", 0, 0, max_wait_ms=0, isolation_level=isolation_level))
    assert response.error_code == 0, response
    return [r.value for b in response.batches if not b.is_control for r in decode_entries(b.records, b.base_offset)]


async def eventually(predicate, timeout_s=10.0):
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.01)


async def roll_fails_behind(leader, io, first: ProduceRequest, fail: str):
    """Start `first` (appended, its flush not yet run) and, in the same turn, a BIG produce
    whose roll must first flush `first`: that fsync fails. Returns the two tasks."""
    if fail == "once":
        io.fail_nth = 1  # `first` is written, then the roll's fsync of it fails
    else:
        io.fail_ops = {"fsync"}
    a = asyncio.ensure_future(first)
    b = asyncio.ensure_future(leader.produce(produce(BIG)))
    await asyncio.wait([b])
    return a, b


@pytest.mark.parametrize("fail", ["once", "until repaired"])
def test_a_produce_whose_flush_failed_in_another_produces_roll_is_not_acknowledged(disk, fail):
    make, io = disk

    async def scenario():
        leader = make()
        assert (await leader.produce(produce(b"first"))).base_offset == 0
        a, b = await roll_fails_behind(leader, io, leader.produce(produce(b"A")), fail)
        assert b.result().error_code == STORAGE_ERROR
        if fail == "until repaired":
            # A's bytes could not be cut durably: it gets no answer yet, and the partition
            # answers KAFKA_STORAGE_ERROR while the leader keeps trying to reopen the log.
            await eventually(lambda: io.ops.count("fsync") >= 4)
            assert not a.done()
            assert (await leader.produce(produce(b"refused"))).error_code == STORAGE_ERROR
            assert (await leader.partition_status("t", 0))["state"] == "offline"
            io.fail_ops = set()
        response = await asyncio.wait_for(a, 10)
        assert response.error_code == STORAGE_ERROR  # never an acknowledgement
        await eventually(lambda: not part(leader)._plog.offline)
        c = await leader.produce(produce(b"C"))
        assert c.error_code == 0 and c.base_offset == 1  # A's offset: A is not in the log
        assert await values(leader) == [b"first", b"C"]
        assert (await leader.partition_status("t", 0))["high_watermark"] == 2

    asyncio.run(scenario())


def test_an_idempotent_producers_retries_after_the_failure_land_exactly_once(disk):
    make, io = disk

    async def scenario():
        leader = make()
        assert (await leader.produce(produce(b"0", pid=7, seq=0))).error_code == 0
        a, b = await roll_fails_behind(leader, io, leader.produce(produce(b"1", pid=7, seq=1)), "once")
        assert (await a).error_code == STORAGE_ERROR and b.result().error_code == STORAGE_ERROR
        await eventually(lambda: not part(leader)._plog.offline)
        # The producer state forgot the lost batch: its retry is appended, not called a
        # duplicate of a batch that is not there; a second retry is a duplicate.
        retry = await leader.produce(produce(b"1", pid=7, seq=1))
        assert (retry.error_code, retry.base_offset) == (0, 1)
        again = await leader.produce(produce(b"1", pid=7, seq=1))
        assert (again.error_code, again.base_offset) == (0, 1)
        assert (await leader.produce(produce(b"2", pid=7, seq=2))).base_offset == 2
        assert await values(leader) == [b"0", b"1", b"2"]

    asyncio.run(scenario())


def test_a_transaction_marker_whose_flush_failed_is_not_acknowledged_and_the_transaction_stays_open(disk):
    make, io = disk
    commit = WriteTxnMarkersRequest((WritableTxnMarker(9, 0, True, (WritableTxnMarkerTopic("t", (0,)),)),))

    async def coordinator_agrees(request):
        return None  # the verify-only AddPartitionsToTxn: the partition is in the transaction

    async def scenario():
        leader = make()
        await leader.ready()
        part(leader)._verify = coordinator_agrees
        assert (await leader.produce(produce(b"in txn", pid=9, seq=0, txn=True))).error_code == 0
        marker, b = await roll_fails_behind(leader, io, leader.write_txn_markers(commit), "once")
        result = (await marker).markers[0].topics[0].partitions[0]
        assert result.error_code == STORAGE_ERROR
        await eventually(lambda: not part(leader)._plog.offline)
        assert part(leader)._plog.last_stable_offset == 0  # the transaction is still open
        assert await values(leader, READ_COMMITTED) == []
        # The coordinator's retry of the marker commits it.
        result = (await leader.write_txn_markers(commit)).markers[0].topics[0].partitions[0]
        assert result.error_code == 0
        assert await values(leader, READ_COMMITTED) == [b"in txn"]

    asyncio.run(scenario())


def test_a_log_that_failed_to_open_is_retried(disk, tmp_path):
    make, io = disk

    async def scenario():
        io.fail_ops = {"open"}
        leader = make()
        assert (await leader.produce(produce(b"x"))).error_code == STORAGE_ERROR
        io.fail_ops = set()
        await eventually(lambda: time.monotonic() >= part(leader)._retry_open_at)
        response = await leader.produce(produce(b"x"))
        assert (response.error_code, response.base_offset) == (0, 0)

    asyncio.run(scenario())


@pytest.mark.parametrize("failing", ["open", "fsync_dir"])
def test_a_produce_made_durable_by_a_roll_that_then_failed_is_acknowledged(disk, failing):
    """A produce waiting for the flush is made durable by another produce's roll (it flushes
    first), whose next step fails: the first is in the log after the reopen, so it is
    answered as written, at its offset, and the next produce takes the following one."""
    make, io = disk

    async def scenario():
        leader = make()
        assert (await leader.produce(produce(b"first"))).base_offset == 0
        a = asyncio.ensure_future(leader.produce(produce(b"A")))
        await asyncio.sleep(0)  # A appended, its flush not yet run
        io.fail_ops = {failing}
        b = await leader.produce(produce(BIG))
        assert b.error_code == STORAGE_ERROR
        assert failing in io.ops[-3:]  # the roll failed after its flush (fsync) went through
        io.fail_ops = set()
        answer = await asyncio.wait_for(a, 10)
        assert (answer.error_code, answer.base_offset) == (0, 1)
        await eventually(lambda: not part(leader)._plog.offline)
        c = await leader.produce(produce(b"C"))
        assert (c.error_code, c.base_offset) == (0, 2)
        assert await values(leader) == [b"first", b"A", b"C"]

    asyncio.run(scenario())


def test_a_corrupt_closed_segment_fails_its_partitions_fetch_only(tmp_path):
    """A closed segment's batch that fails its check on read: CORRUPT_MESSAGE for that
    partition, as Kafka answers, and the other partitions of the same Fetch are read."""
    async def scenario():
        host = host_of(str(tmp_path), [("t", p, "t-id", {"segment.bytes": 250}) for p in range(2)])
        await host.ready()
        for value in (BIG, BIG, BIG):
            for p in range(2):
                request = dataclasses.replace(produce(value), partition=p)
                assert (await host.produce(request)).error_code == 0
        closed = part(host, "t", 0)._plog.log.manifest.segments[0]
        with open(os.path.join(str(tmp_path), "t-0", closed.file), "r+b") as f:
            f.seek(closed.size - 5)
            f.write(b"\xff")
        bad, good = await host.fetch_many([FetchRequest("t", p, 0, max_wait_ms=0) for p in range(2)], 0, 1)
        assert bad.error_code == Errors.CORRUPT_MESSAGE.code and closed.file in bad.error_message
        assert good.error_code == 0 and len(good.batches) >= 1

    asyncio.run(scenario())


def test_a_wide_flush_pass_that_fails_acknowledges_none_of_its_partitions(tmp_path, monkeypatch):
    """Produces to many partitions in one turn share one flush pass, made durable by one
    syncfs; when it fails, no partition's produce is acknowledged and none is in the log
    after the reopen, and the next produces land at the same offsets."""
    io = FaultyIO()
    monkeypatch.setattr(partition_leader, "PartitionLog", functools.partial(PartitionLog, io=io))
    monkeypatch.setattr(partition_leader, "OPEN_RETRY_S", 0.02)
    wide = SYNCFS_AT + 4

    def to(p: int, value: bytes) -> ProduceRequest:
        return dataclasses.replace(produce(value), partition=p)

    async def scenario():
        host = host_of(str(tmp_path), [("t", p, "t-id", {}) for p in range(wide)])
        await host.ready()
        assert all(r.error_code == 0 for r in await asyncio.gather(*[host.produce(to(p, b"a")) for p in range(wide)]))
        io.ops.clear()
        io.fail_nth = wide  # after each partition's write, the pass's one syncfs
        failed = await asyncio.gather(*[host.produce(to(p, b"lost")) for p in range(wide)])
        assert [r.error_code for r in failed] == [STORAGE_ERROR] * wide
        assert io.ops[:wide + 1] == ["write"] * wide + ["fsync"]
        await eventually(lambda: not any(part(host, "t", p)._plog.offline for p in range(wide)))
        again = await asyncio.gather(*[host.produce(to(p, b"b")) for p in range(wide)])
        assert [(r.error_code, r.base_offset) for r in again] == [(0, 1)] * wide
        for p in range(wide):
            response = await host.fetch(FetchRequest("t", p, 0, max_wait_ms=0))
            assert [r.value for b in response.batches for r in decode_entries(b.records, b.base_offset)] == [b"a", b"b"]

    asyncio.run(scenario())
