"""The write path when the owner does the I/O (owner_writes, as the actor's shard host): the
runtime hands out one batch at a time and takes "durable" or "failed" back, as Kafka's
CoordinatorRuntime hands its batches to the partition writer and completes its deferred
events when the high watermark passes them. Records replayed while a batch is out go to the
next one; a response without records waits for the records it may have seen (those of its
key and those of no key); a failed batch fails every write it covered, and every write
computed on top of it, and reverts the shard."""
import pytest

from runtime.coordinator import CoordinatorRuntime, CoordinatorState, write_batch
from runtime.errors import Errors
from runtime.log import FileLog, LogConfig, LogWriteError
from runtime.testing import FaultyIO

from .kv_shard import KvShard
from .logutil import values


def owner_runtime(tmp_path, io=None, config=None) -> CoordinatorRuntime:
    directory = str(tmp_path / "kv")
    rt = CoordinatorRuntime("__kv-0", 0, KvShard,
                            lambda: FileLog(directory, LogConfig(fsync=True), io=io or FaultyIO()),
                            {"append.linger.ms": 5, **(config or {})}, owner_writes=True)
    rt.load_all(0)
    return rt


def put(key, value):
    return lambda s, now: s.put(key, value, now)


def get(key):
    return lambda s, now: s.get(key)


def test_one_batch_is_out_at_a_time_and_later_records_go_to_the_next(tmp_path):
    rt = owner_runtime(tmp_path)
    first = rt.write(put("a", 1), 0)
    rt.poll(10)  # the runtime never writes on its own
    assert rt.log.end_offset == 0 and not first.done
    assert rt.take_batch(4) is None  # lingering
    out = rt.take_batch(5)
    assert (out.base_offset, out.count, out.timestamp) == (0, 1, 5) and rt.writing
    second = rt.write(put("b", 2), 6)
    third = rt.write(put("c", 3), 6)
    assert rt.shard.offsets == [0, 1, 2] and rt.pending_records == 3
    assert rt.take_batch(100) is None and rt.flush_deadline() is None  # one at a time
    write_batch(rt.log, out)
    assert not first.done  # durable, but the owner has not said so yet
    rt.batch_durable(out, 20)
    assert first.result() == "put a" and not second.done and rt.last_committed_offset == 1
    assert rt.flush_deadline() == 11  # the next batch lingers from its first record
    nxt = rt.take_batch(20)
    assert (nxt.base_offset, nxt.count) == (1, 2)
    write_batch(rt.log, nxt)
    rt.batch_durable(nxt, 21)
    assert (second.result(), third.result()) == ("put b", "put c") and rt.pending_records == 0
    assert values(rt.log.read()) == [1, 2, 3]


def test_full_batches_wait_their_turn_in_order(tmp_path):
    rt = owner_runtime(tmp_path, config={"append.max.batch.bytes": 10})  # one record fills a batch
    pending = [rt.write(put(k, v), 0) for k, v in (("a", 1), ("b", 2), ("c", 3))]
    assert rt.flush_deadline() == 0  # full batches are due at once, linger or not
    for base in range(3):
        out = rt.take_batch(0)
        assert (out.base_offset, out.count) == (base, 1) and rt.take_batch(0) is None
        write_batch(rt.log, out)
        rt.batch_durable(out, 0)
        assert [p.done for p in pending] == [i <= base for i in range(3)]
    assert values(rt.log.read()) == [1, 2, 3]


def test_an_answer_without_records_waits_only_for_what_it_may_have_seen(tmp_path):
    rt = owner_runtime(tmp_path)
    rt.write(put("a", 1), 0, key="a")
    rt.write(put("b", 2), 0, key="b")
    out = rt.take_batch(0, force=True)
    commit = rt.write(put("b", 3), 1, key="b")  # in the next batch
    other = rt.write(lambda s, now: s.expire_later("x", 99), 1, key="x")
    same = rt.write(get("b"), 1, key="b")
    unkeyed = rt.write(get("a"), 1)
    assert other.done and other.result() == "scheduled"  # nothing of "x" is pending
    assert not same.done and not unkeyed.done
    write_batch(rt.log, out)
    rt.batch_durable(out, 2)
    assert not same.done and not unkeyed.done  # both may have seen the commit still pending
    nxt = rt.take_batch(10)
    write_batch(rt.log, nxt)
    rt.batch_durable(nxt, 10)
    assert (same.result(), unkeyed.result(), commit.result()) == (3, 1, "put b")


def test_a_keyed_answer_waits_for_records_written_under_no_key(tmp_path):
    rt = owner_runtime(tmp_path)
    rt.write(put("a", 1), 0)  # no key: anything may rest on it
    out = rt.take_batch(0, force=True)
    waiting = rt.write(lambda s, now: s.expire_later("x", 99), 0, key="x")
    assert not waiting.done
    write_batch(rt.log, out)
    rt.batch_durable(out, 1)
    assert waiting.result() == "scheduled"


def test_a_failed_batch_fails_what_it_covered_and_what_was_computed_on_top(tmp_path):
    io = FaultyIO()
    rt = owner_runtime(tmp_path, io)
    rt.write(put("a", 1), 0)
    rt.flush(0)  # flush() still writes at once, on the caller's thread
    assert rt.pending_records == 0 and values(rt.log.read()) == [1]
    covered = [rt.write(put("b", 2), 1, key="b"), rt.write(get("a"), 1)]
    out = rt.take_batch(1, force=True)
    later = [rt.write(put("c", 3), 2, key="c"), rt.write(get("b"), 2, key="b")]
    assert not any(p.done for p in covered + later)
    io.fail_ops = {"fsync"}
    with pytest.raises(LogWriteError):
        write_batch(rt.log, out)
    assert rt.log.unsettled  # the disk refused the cut as well: nobody is answered yet
    io.fail_ops = set()
    rt.batch_failed(out, LogWriteError(5, "fsync"), 3)
    for p in covered + later:
        assert p.error.error is Errors.NOT_COORDINATOR and p.error.retriable
    assert rt.state is CoordinatorState.ACTIVE and rt.shard.data == {"a": 1}
    assert rt.pending_records == 0 and values(rt.log.read()) == [1] and rt.log.offline is None
    assert rt.write(put("d", 4), 4).done is False


def test_a_failed_batch_is_answered_only_once_its_records_are_off_the_file(tmp_path):
    io = FaultyIO()
    rt = owner_runtime(tmp_path, io)
    covered = rt.write(put("a", 1), 0)
    out = rt.take_batch(0, force=True)
    later = rt.write(put("b", 2), 0)
    io.fail_ops = {"fsync", "truncate", "open"}  # nothing works: the log cannot even be reopened
    with pytest.raises(LogWriteError):
        write_batch(rt.log, out)
    rt.batch_failed(out, LogWriteError(5, "fsync"), 1)
    assert later.error.error is Errors.NOT_COORDINATOR  # none of its records reached the log
    assert not covered.done and rt.state is CoordinatorState.FAILED
    io.fail_ops = set()
    rt.load_all(2)  # the owner tries again: the cut is made first
    assert covered.error.error is Errors.NOT_COORDINATOR and values(rt.log.read()) == []


def test_a_revert_while_a_batch_is_out_waits_for_its_outcome(tmp_path):
    rt = owner_runtime(tmp_path)
    durable = rt.write(put("a", 1), 0)
    out = rt.take_batch(0, force=True)
    behind = rt.write(put("b", 2), 0)
    rt.shard.replay = lambda offset, record: 1 / 0  # a broken replay handler
    bad = rt.write(put("c", 3), 0)
    assert bad.error.error is Errors.UNKNOWN_SERVER_ERROR and behind.error.error is Errors.NOT_COORDINATOR
    assert rt.state is CoordinatorState.FAILED and not durable.done
    with pytest.raises(RuntimeError):
        rt.load_all(0)  # the log is the writer's until the outcome is known
    with pytest.raises(RuntimeError):
        rt.close()
    write_batch(rt.log, out)
    rt.batch_durable(out, 1)
    assert durable.result() == "put a"
    assert rt.state is CoordinatorState.ACTIVE and rt.shard.data == {"a": 1}  # reloaded
    rt.close()


def test_reads_go_through_write_when_the_owner_writes(tmp_path):
    rt = owner_runtime(tmp_path)
    assert rt.read(lambda s: dict(s.data), 0) == {}  # nothing pending: read at once
    rt.write(put("a", 1), 0)
    with pytest.raises(RuntimeError):
        rt.read(lambda s: dict(s.data), 0)  # it would have to write, on this thread
