"""Faults against the real files: a full disk, failing fsync and truncate, a timer that fires
during a failed flush, an unknown record type in the log, a corrupt closed segment."""
import errno
import os

import msgpack
import pytest

from runtime.coordinator import CoordinatorRuntime, CoordinatorState
from runtime.errors import CorruptRecordError, Errors, KafkaError
from runtime.log import FileLog
from runtime.testing import FaultyIO, ShardHarness

from .kv_shard import KvShard, expiry_key
from .logutil import append_kv, flip_byte, values


def put(key, value, expires_at=-1):
    return lambda s, now: s.put(key, value, now, expires_at)


def harness(tmp_path, **kw) -> ShardHarness:
    return ShardHarness(str(tmp_path / "kv"), KvShard, auto_flush=False, **kw)


def segment_sizes(h: ShardHarness) -> list[int]:
    return [os.path.getsize(os.path.join(h.directory, s.file)) for s in h.runtime.log.manifest.segments]


def durable(h: ShardHarness):
    """Two acknowledged writes, then a snapshot of the state, the files and the log."""
    h.call(put("a", 1))
    h.call(put("b", 2, expires_at=500))
    return h.shard.state(), segment_sizes(h), h.runtime.log.end_offset


def assert_failed_retriably(*pending):
    for p in pending:
        assert p.done and p.error.error is Errors.NOT_COORDINATOR and p.error.retriable


class FullOnceIO(FaultyIO):
    """A disk that refuses the next write (or fsync) and then works again."""

    def __init__(self) -> None:
        super().__init__()
        self.fail_next = False
        self.fail_next_fsync = False

    def write(self, fd: int, data: bytes) -> int:
        if self.fail_next:
            self.fail_next = False
            raise OSError(errno.ENOSPC, "No space left on device")
        return super().write(fd, data)

    def fsync(self, fd: int) -> None:
        if self.fail_next_fsync:
            self.fail_next_fsync = False
            raise OSError(errno.EIO, "Input/output error")
        super().fsync(fd)


def test_a_write_that_fails_half_way(tmp_path):
    h = harness(tmp_path)
    state, sizes, end = durable(h)
    pending = [h.write(put("c", 3)), h.write(lambda s, now: s.delete("a")), h.write(lambda s, now: s.get("b"))]
    waiting = h.write(lambda s, now: s.wait_for_expiry("b"))
    h.io.fail_after_bytes = 20  # the disk fills up 20 bytes into the batch
    h.runtime.flush(0)
    assert_failed_retriably(*pending, waiting)
    # Memory is back at the last durable point, the file holds no partial bytes.
    assert h.runtime.state is CoordinatorState.ACTIVE
    assert h.shard.state() == state and h.runtime.pending_records == 0
    assert segment_sizes(h) == sizes and h.runtime.log.end_offset == end
    assert h.shard.context.timer.deadline(expiry_key("b")) == 500
    # The disk is still full: the next write fails the same way, and changes nothing.
    again = h.write(put("d", 4))
    h.runtime.flush(0)
    assert_failed_retriably(again)
    assert h.shard.state() == state
    # Space is freed: writes go on, and a restart finds every acknowledged record.
    h.io.fail_after_bytes = None
    assert h.call(put("e", 5)) == "put e"
    assert h.reload().state() == ({"a": 1, "b": 2, "e": 5}, {"b": 500})


def test_a_failed_fsync_takes_the_log_offline_until_the_reload_reopens_it(tmp_path):
    h = harness(tmp_path, fsync=True, io=FullOnceIO())
    state, sizes, _ = durable(h)
    pending = h.write(put("c", 3))
    h.io.fail_next_fsync = True  # one fsync fails; the disk works again at once
    old_log = h.runtime.log
    h.runtime.flush(0)
    # The batch was cut off the file before its response was failed; the reload reopened
    # (and checked) the folder.
    assert_failed_retriably(pending)
    assert h.runtime.log is old_log and old_log.offline is None
    assert h.runtime.state is CoordinatorState.ACTIVE
    assert h.shard.state() == state and segment_sizes(h) == sizes
    h.call(put("d", 4))
    assert h.reload().data == {"a": 1, "b": 2, "d": 4}


def test_a_disk_that_keeps_failing_leaves_the_coordinator_unavailable_until_it_works(tmp_path):
    h = harness(tmp_path, fsync=True)
    state, sizes, _ = durable(h)
    pending = h.write(put("c", 3))
    h.io.fail_fsync = True
    h.runtime.flush(0)
    # The batch's bytes are cut, but the cut could not be made durable: no answer yet.
    assert not pending.done and h.runtime.log.unsettled
    assert h.runtime.state is CoordinatorState.FAILED
    with pytest.raises(KafkaError) as info:
        h.runtime.write(put("d", 4), 0)
    assert info.value.error is Errors.COORDINATOR_NOT_AVAILABLE and info.value.retriable
    with pytest.raises(OSError):
        h.runtime.load_all(0)  # the owner's retry, while the disk still fails
    assert not pending.done
    h.io.fail_fsync = False
    h.runtime.load_all(0)
    assert_failed_retriably(pending)
    assert h.shard.state() == state and segment_sizes(h) == sizes
    h.call(put("d", 4))
    assert h.reload().data == {"a": 1, "b": 2, "d": 4}


def test_a_failed_write_that_cannot_be_cut_back_is_answered_once_the_reopen_cuts_it(tmp_path):
    h = harness(tmp_path)
    state, sizes, end = durable(h)
    pending = h.write(put("c", 3))
    h.io.fail_after_bytes = 20
    h.io.fail_truncate = True  # the partial bytes cannot be cut back by the writer
    h.runtime.flush(0)
    assert not pending.done and h.runtime.log.offline and h.runtime.state is CoordinatorState.FAILED
    h.io.fail_after_bytes = None
    h.io.fail_truncate = False
    h.runtime.load_all(0)
    assert_failed_retriably(pending)
    # The reopened log cut the torn tail; memory is at the durable point.
    assert segment_sizes(h) == sizes and h.runtime.log.end_offset == end
    assert h.runtime.state is CoordinatorState.ACTIVE and h.shard.state() == state
    h.call(put("d", 4))
    assert h.reload().data == {"a": 1, "b": 2, "d": 4}


def test_a_write_answered_with_an_error_never_comes_back_after_a_double_fault(tmp_path):
    """Issue 15, finding 4: the fsync fails, then the truncate that would undo the batch
    fails too, so a whole, valid batch that was never acknowledged stays in the file."""
    h = harness(tmp_path, fsync=True)
    durable(h)
    pending = h.write(put("c", 3))
    h.io.fail_fsync = True
    h.io.fail_truncate = True
    h.runtime.flush(0)
    # Nobody is told the write failed while it could still be found whole.
    assert not pending.done and h.runtime.state is CoordinatorState.FAILED
    for attempt in range(2):
        with pytest.raises(OSError):
            h.runtime.load_all(0)
        assert not pending.done
    h.io.fail_fsync = h.io.fail_truncate = False
    h.runtime.load_all(0)
    assert_failed_retriably(pending)
    assert h.shard.data == {"a": 1, "b": 2}
    # Across reloads and restarts, the failed write stays gone; the client's retry applies once.
    assert h.call(put("c", 30)) == "put c"
    assert h.reload().data == {"a": 1, "b": 2, "c": 30}
    assert h.reload().data == {"a": 1, "b": 2, "c": 30}


def test_a_timer_that_fires_while_a_batch_is_pending_and_the_flush_fails(tmp_path):
    h = harness(tmp_path, config={"append.linger.ms": 1000})
    h.call(put("a", 1, expires_at=50))
    waiting = h.write(lambda s, now: s.wait_for_expiry("a"))
    pending = h.write(put("b", 2))
    h.runtime.poll(50)  # the expiry fires: a's tombstone joins b's pending batch
    assert h.shard.data == {"b": 2} and not h.shard.context.timer.is_scheduled(expiry_key("a"))
    h.io.fail_after_bytes = 0
    h.runtime.flush(50)
    assert_failed_retriably(pending, waiting)
    # The timer's effect is reverted and on_loaded scheduled the expiry again.
    assert h.shard.data == {"a": 1} and h.shard.loaded_at == 50
    assert h.shard.context.timer.deadline(expiry_key("a")) == 50
    h.io.fail_after_bytes = None
    h.runtime.poll(50)
    h.runtime.flush(50)
    assert h.shard.data == {} and h.reload().data == {}


def test_timers_of_the_old_shard_do_not_run_after_a_revert(tmp_path):
    # Every write is flushed at once (tiny batches), so the first timer's flush fails while
    # the second timer of the same round is still to run.
    h = harness(tmp_path, config={"append.max.batch.bytes": 1}, io=FullOnceIO())
    h.call(put("a", 1, expires_at=50))
    h.call(put("b", 2, expires_at=50))
    h.io.fail_next = True
    h.runtime.poll(60)
    assert h.shard.data == {"a": 1, "b": 2}
    timer = h.shard.context.timer
    assert (timer.deadline(expiry_key("a")), timer.deadline(expiry_key("b"))) == (50, 50)
    h.runtime.poll(60)
    assert h.shard.data == {} and h.reload().data == {}


def test_an_operation_whose_batch_overflowed_into_a_failed_flush_is_not_applied(tmp_path):
    h = harness(tmp_path, config={"append.max.batch.bytes": 20}, io=FullOnceIO())
    h.call(put("a", 1))
    first = h.write(put("b", 2))
    h.io.fail_next = True
    # This result does not fit behind b: b's batch is flushed first, and fails. The result
    # was computed from state that was just reverted, so it must not be applied.
    second = h.write(lambda s, now: s.put_many({"c": 3, "d": 4}))
    assert_failed_retriably(first, second)
    assert h.shard.data == {"a": 1} and h.runtime.pending_records == 0


def test_a_record_of_unknown_type_in_the_log_fails_the_load(tmp_path):
    directory = str(tmp_path / "kv")
    log = FileLog(directory)
    append_kv(log, 3)
    log.append(msgpack.packb([[900, 0, ["x"], [1]], [977, 0, ["k"], [1]]]), 2, 0)
    log.flush()
    log.close()
    with pytest.raises(CorruptRecordError) as info:
        ShardHarness(directory, KvShard)
    assert "unknown record type 977" in str(info.value)
    assert (info.value.log, info.value.offset) == ("__test-0", 4)
    rt = CoordinatorRuntime("__test-0", 0, KvShard, lambda: FileLog(directory))
    with pytest.raises(CorruptRecordError):
        rt.load_all(0)
    assert rt.state is CoordinatorState.FAILED and rt.shard is None
    with pytest.raises(KafkaError) as err:
        rt.write(put("a", 1), 0)
    assert err.value.error is Errors.COORDINATOR_NOT_AVAILABLE


def test_a_corrupt_closed_segment_fails_the_load_naming_file_and_offset(tmp_path):
    h = harness(tmp_path, config={"segment.bytes": 200})
    for i in range(20):
        h.call(put(f"k{i}", i))
    seg = h.runtime.log.manifest.segments[1]
    h.runtime.close()
    flip_byte(os.path.join(h.directory, seg.file), 50)
    with pytest.raises(CorruptRecordError) as info:
        h.reload()
    assert seg.file in str(info.value) and info.value.offset == seg.base_offset


def test_a_torn_tail_is_cut_at_load_and_nothing_acknowledged_is_lost(tmp_path):
    h = harness(tmp_path)
    for i in range(5):
        h.call(put(f"k{i}", i))
    path = os.path.join(h.directory, h.runtime.log.active_segment.file)
    h.runtime.close()
    with open(path, "ab") as f:
        f.write(b"\x00\x00\x01\x00half a batch")
    assert h.reload().data == {f"k{i}": i for i in range(5)}
    assert values(h.runtime.log.read()) == list(range(5))
    assert any("torn tail" in line for line in h.runtime.log.recovered)
