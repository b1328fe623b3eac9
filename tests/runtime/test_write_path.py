"""The write path: replay at once, batching, responses released when durable, linger and
batch size, reads of durable state, deferred responses, validators, loading and closing."""
import msgpack
import pytest

from runtime.codec import Record
from runtime.coordinator import CoordinatorRuntime, CoordinatorState, Result, RuntimeConfig
from runtime.errors import Errors, KafkaError
from runtime.log import FileLog, LogConfig
from runtime.testing import ShardHarness

from .kv_shard import KvKey, KvShard, KvValue
from .logutil import values


def runtime_for(tmp_path, config=None, shard=KvShard) -> CoordinatorRuntime:
    directory = str(tmp_path / "kv")
    rt = CoordinatorRuntime("__kv-0", 0, shard, lambda: FileLog(directory, LogConfig(fsync=False)), config)
    rt.load_all(0)
    return rt


def put(key, value, expires_at=-1):
    return lambda s, now: s.put(key, value, now, expires_at)


def durable_values(rt):
    return values(rt.log.read())


def test_records_are_replayed_at_once_and_seen_by_the_next_operation(tmp_path):
    rt = runtime_for(tmp_path)
    first = rt.write(put("a", 1), 0)
    assert rt.shard.data == {"a": 1} and rt.pending_records == 1
    second = rt.write(lambda s, now: s.get("a"), 0)
    assert not first.done and not second.done
    assert rt.log.end_offset == 0 and durable_values(rt) == []
    rt.flush(0)
    assert (first.result(), second.result()) == ("put a", 1)


def test_operations_share_one_batch_with_consecutive_offsets(tmp_path):
    rt = runtime_for(tmp_path)
    pending = [rt.write(put(k, v), 0) for k, v in (("a", 1), ("b", 2))]
    pending.append(rt.write(lambda s, now: s.put_many({"c": 3, "d": 4}), 0))
    assert rt.pending_records == 4 and rt.shard.offsets == [0, 1, 2, 3]
    rt.flush(7)
    (batch,) = rt.log.read()
    assert (batch.base_offset, batch.count, batch.timestamp) == (0, 4, 7)
    assert [p.result() for p in pending] == ["put a", "put b", 2]
    rt.write(put("e", 5), 8)
    rt.flush(8)
    assert [b.base_offset for b in rt.log.read()] == [0, 4] and rt.shard.offsets[-1] == 4


def test_a_response_is_released_only_when_its_batch_is_durable(tmp_path):
    rt = runtime_for(tmp_path)
    pending = rt.write(put("a", 1), 0)
    released = []
    pending.add_done_callback(released.append)
    assert not pending.done and released == []
    with pytest.raises(RuntimeError):
        pending.result()
    rt.flush(0)
    assert pending.done and released == [pending] and pending.result() == "put a"
    late = []
    pending.add_done_callback(late.append)
    assert late == [pending]


def test_linger_deadline(tmp_path):
    rt = runtime_for(tmp_path, {"append.linger.ms": 5})
    assert rt.flush_deadline() is None and rt.next_deadline() is None
    pending = rt.write(put("a", 1), 100)
    rt.write(put("b", 2), 103)  # joins the batch; the deadline stays at the first write's
    assert rt.flush_deadline() == 105 and rt.next_deadline() == 105
    rt.write(lambda s, now: s.expire_later("a", 102), 103)
    assert rt.next_deadline() == 102
    rt.poll(101)
    assert not pending.done
    rt.poll(104)  # the expiry timer fired; the batch still lingers
    assert not pending.done and rt.shard.data == {"b": 2} and rt.pending_records == 3
    rt.poll(105)
    assert pending.done and rt.flush_deadline() is None and durable_values(rt) == [1, 2, None]


def test_zero_linger_flushes_on_the_next_poll(tmp_path):
    rt = runtime_for(tmp_path, {"append.linger.ms": 0})
    pending = rt.write(put("a", 1), 100)
    assert rt.flush_deadline() == 100
    rt.poll(100)
    assert pending.done


def test_a_full_batch_is_flushed_at_once(tmp_path):
    # Each record below packs to 16 bytes ([900, 0, ["key-N"], [N, "", -1]]).
    assert len(msgpack.packb([900, 0, ["key-0"], [0, "", -1]])) == 16
    rt = runtime_for(tmp_path, {"append.max.batch.bytes": 60})
    many = lambda n, start: lambda s, now: s.put_many({f"key-{i}": i for i in range(start, start + n)})  # noqa: E731
    small = rt.write(many(1, 0), 0)
    big = rt.write(many(3, 1), 0)
    # 16 + 48 would overflow the batch: the pending batch was flushed first, alone.
    assert small.done and not big.done
    assert [b.count for b in rt.log.read()] == [1]
    last = rt.write(many(1, 4), 0)
    assert big.done and not last.done
    # A result that fills a batch by itself is flushed with its write.
    huge = rt.write(many(4, 5), 0)
    assert last.done and huge.done
    assert [b.count for b in rt.log.read()] == [1, 3, 1, 4]
    assert rt.shard.offsets == list(range(9))


def test_read_sees_durable_state_and_flushes_first(tmp_path):
    rt = runtime_for(tmp_path)
    pending = rt.write(put("a", 1), 0)
    assert rt.read(lambda s: dict(s.data), 0) == {"a": 1}
    assert pending.done and durable_values(rt) == [1]


def test_an_operation_without_records_waits_for_the_pending_batch(tmp_path):
    rt = runtime_for(tmp_path)
    rt.write(put("a", 1), 0)
    rt.flush(0)
    alone = rt.write(lambda s, now: s.get("a"), 0)
    assert alone.done and alone.result() == 1  # nothing pending: released at once
    rt.write(put("a", 2), 0)
    behind = rt.write(lambda s, now: s.get("a"), 0)
    assert not behind.done
    rt.flush(0)
    assert behind.result() == 2


def test_deferred_responses_and_completions(tmp_path):
    h = ShardHarness(str(tmp_path), KvShard, config={"append.linger.ms": 5})  # the tombstone lingers
    h.call(put("a", 1, expires_at=50))
    waiting = h.write(lambda s, now: s.wait_for_expiry("a"))
    assert not waiting.done and h.runtime.deferred_keys == [("wait", "a")]
    h.advance(49)
    assert not waiting.done
    h.runtime.poll(50)  # the expiry runs and completes the wait, behind its tombstone
    assert not waiting.done and h.runtime.pending_records == 1
    h.runtime.flush(50)
    assert waiting.result() == "a expired" and h.runtime.deferred_keys == []
    assert h.reload().data == {}


def test_a_completion_can_be_an_error_or_none(tmp_path):
    h = ShardHarness(str(tmp_path), KvShard)
    waiting = h.write(lambda s, now: s.wait_for_expiry("x"))
    assert h.call(lambda s, now: s.fail_wait("x")) == "failed"
    with pytest.raises(KafkaError) as info:
        waiting.result()
    assert info.value.error is Errors.REBALANCE_IN_PROGRESS
    waiting = h.write(lambda s, now: s.wait_for_expiry("y"))
    h.call(lambda s, now: Result([], "done", [(("wait", "y"), None), (("wait", "nobody"), 1)]))
    assert waiting.done and waiting.result() is None


def test_a_newer_deferred_request_supersedes_the_older(tmp_path):
    h = ShardHarness(str(tmp_path), KvShard)
    old = h.write(lambda s, now: s.wait_for_expiry("x"))
    new = h.write(lambda s, now: s.wait_for_expiry("x"))
    assert old.done and old.error.error is Errors.UNKNOWN_SERVER_ERROR
    assert not new.done


def test_a_validator_that_raises_leaves_nothing_behind(tmp_path):
    rt = runtime_for(tmp_path)
    rt.write(put("a", 1), 0)
    for bad in (put("", 1), lambda s, now: s.delete("missing")):
        with pytest.raises(KafkaError):
            rt.write(bad, 0)
    with pytest.raises(TypeError):  # a record that cannot be encoded is refused before replay
        rt.write(lambda s, now: Result([Record(KvKey("b"), "not a KvValue")]), 0)
    assert rt.shard.data == {"a": 1} and rt.pending_records == 1 and rt.shard.offsets == [0]
    rt.flush(0)
    assert durable_values(rt) == [1]


class FragileShard(KvShard):
    """Its replay fails on a negative value, as a buggy replay handler would."""

    def replay(self, offset, record):
        if record.value is not None and record.value.value < 0:
            self.data["half"] = 1  # half-applied before failing
            raise RuntimeError("negative")
        super().replay(offset, record)


def test_a_failing_replay_reverts_to_the_durable_state(tmp_path):
    rt = runtime_for(tmp_path, shard=FragileShard)
    rt.write(put("a", 1), 0)
    rt.flush(0)
    other = rt.write(put("b", 2), 0)
    bad = rt.write(lambda s, now: s.put_many({"c": 3, "d": -1}), 0)
    assert bad.error.error is Errors.UNKNOWN_SERVER_ERROR
    assert other.error.error is Errors.NOT_COORDINATOR and other.error.retriable
    assert rt.state is CoordinatorState.ACTIVE and rt.shard.data == {"a": 1}
    assert rt.pending_records == 0 and durable_values(rt) == [1]


def test_reload_gives_the_same_state(tmp_path):
    h = ShardHarness(str(tmp_path), KvShard, config={"segment.bytes": 200})
    for i in range(30):
        h.call(put(f"k{i % 7}", i, expires_at=1000 + i if i % 3 else -1))
    h.call(lambda s, now: s.delete("k3"))
    before = h.shard.state()
    timers = {k: h.shard.context.timer.deadline(f"expire-{k}") for k in h.shard.data}
    assert len(h.runtime.log.manifest.segments) > 2
    shard = h.reload()
    assert shard.state() == before and shard.loaded_at == 0
    assert {k: shard.context.timer.deadline(f"expire-{k}") for k in shard.data} == timers


def unloaded_runtime(tmp_path, records: int) -> CoordinatorRuntime:
    """A runtime, not loaded yet, over a log of `records` single-record batches."""
    h = ShardHarness(str(tmp_path), KvShard)
    for i in range(records):
        h.call(put(f"k{i}", i))
    h.runtime.close()
    return CoordinatorRuntime("__test-0", 0, KvShard, h.runtime._open_log)


def test_loading_step_by_step_answers_load_in_progress(tmp_path):
    rt = unloaded_runtime(tmp_path, 5)
    with pytest.raises(KafkaError) as info:
        rt.write(put("x", 1), 0)
    assert info.value.error is Errors.NOT_COORDINATOR  # not loaded yet
    steps = rt.load(10, progress_every=2)
    progress = next(steps)
    assert rt.state is CoordinatorState.LOADING
    assert (progress.batches, progress.records, progress.done) == (2, 2, False)
    assert 0 < progress.bytes < progress.total_bytes
    for op in (lambda: rt.write(put("x", 1), 10), lambda: rt.read(lambda s: s.data, 10)):
        with pytest.raises(KafkaError) as info:
            op()
        assert info.value.error is Errors.COORDINATOR_LOAD_IN_PROGRESS and info.value.retriable
    rt.poll(10)  # timers do not run while loading
    rest = list(steps)
    assert [p.batches for p in rest] == [4, 5] and rest[-1].done
    assert rest[-1].records == 5 and rest[-1].bytes == rest[-1].total_bytes
    assert rt.state is CoordinatorState.ACTIVE and rt.shard.loaded_at == 10
    assert rt.read(lambda s: s.data, 10) == {f"k{i}": i for i in range(5)}


def test_close_fails_pending_and_deferred_with_not_coordinator(tmp_path):
    h = ShardHarness(str(tmp_path), KvShard, auto_flush=False)
    h.write(put("a", 1))
    h.runtime.flush(0)
    pending = h.write(put("b", 2))
    waiting = h.write(lambda s, now: s.wait_for_expiry("a"))
    h.write(lambda s, now: s.expire_later("a", 10))
    h.runtime.close()
    for p in (pending, waiting):
        assert p.error.error is Errors.NOT_COORDINATOR
    assert h.runtime.state is CoordinatorState.CLOSED and h.runtime.next_deadline() is None
    with pytest.raises(KafkaError) as info:
        h.runtime.write(put("c", 3), 0)
    assert info.value.error is Errors.NOT_COORDINATOR
    assert h.reload().data == {"a": 1}  # the unflushed batch was never written


def test_close_while_loading_stops_the_load(tmp_path):
    rt = unloaded_runtime(tmp_path, 4)
    steps = rt.load(0, progress_every=1)
    next(steps)
    rt.close()
    assert list(steps) == [] and rt.state is CoordinatorState.CLOSED and rt.shard is None


def test_a_second_load_supersedes_a_paused_one(tmp_path):
    rt = unloaded_runtime(tmp_path, 4)
    rt.load_all(0)
    stale = rt.load(0, progress_every=1)
    next(stale)
    progress = rt.load_all(5)
    assert progress.records == 4 and rt.state is CoordinatorState.ACTIVE
    assert list(stale) == [] and rt.state is CoordinatorState.ACTIVE
    paused = rt.load(0, progress_every=1)
    next(paused)
    rt.load_all(6)
    paused.close()  # abandoned: leaves the newer load's result alone
    assert rt.state is CoordinatorState.ACTIVE and rt.shard.loaded_at == 6


def test_a_failing_callback_does_not_hold_up_the_batch(tmp_path):
    rt = runtime_for(tmp_path)
    first = rt.write(put("a", 1), 0)
    second = rt.write(put("b", 2), 0)
    first.add_done_callback(lambda p: 1 / 0)
    rt.flush(0)
    assert first.done and second.done and second.result() == "put b"


def test_an_empty_log_loads_at_once_and_unloading_tells_the_shard(tmp_path):
    rt = CoordinatorRuntime("__kv-0", 0, KvShard, lambda: FileLog(str(tmp_path / "kv"), LogConfig(fsync=False)))
    (progress,) = list(rt.load(3))
    assert (progress.batches, progress.records, progress.bytes, progress.done) == (0, 0, 0, True)
    shard = rt.shard
    assert shard.loaded_at == 3 and not shard.unloaded
    rt.close()
    assert shard.unloaded and rt.log.closed


def test_adaptive_linger_flushes_on_the_next_poll_and_is_the_default(tmp_path):
    rt = runtime_for(tmp_path, {})
    assert rt.settings.linger_ms == -1
    first = rt.write(put("a", 1), 100)
    second = rt.write(put("b", 2), 100)  # queued before the owner's poll: the same batch
    assert rt.flush_deadline() == 100 and not first.done
    rt.poll(100)
    assert first.done and second.done and durable_values(rt) == [1, 2]


def test_runtime_config_from_kafka_names():
    assert RuntimeConfig.from_config(None) == RuntimeConfig(-1, 1024 * 1024)
    with pytest.raises(KafkaError) as e:
        RuntimeConfig.from_config({"append.linger.ms": -2})
    assert e.value.error is Errors.INVALID_CONFIG
    assert RuntimeConfig.from_config({"append.linger.ms": "0", "append.max.batch.bytes": 512}) == RuntimeConfig(0, 512)


def test_the_harness_shows_the_exact_records_written(tmp_path):
    h = ShardHarness(str(tmp_path), KvShard)
    h.call(put("a", 1))
    start = h.end_offset
    h.call(lambda s, now: s.put_many({"b": 2, "c": 3}))
    h.call(lambda s, now: s.delete("a"))
    assert h.records(start) == [(1, Record(KvKey("b"), KvValue(2))), (2, Record(KvKey("c"), KvValue(3))),
                                (3, Record(KvKey("a")))]
    assert [offset for offset, _ in h.records()] == [0, 1, 2, 3]
    pending = h.runtime.write(put("d", 4), 0)
    assert h.end_offset == 5 and len(h.records()) == 4 and not pending.done
