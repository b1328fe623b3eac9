"""The parts of the bridge that need no Spark: finding logs, refusing work before a job
starts, the compacted segment format as the runtime loads it, and the state digest."""
from __future__ import annotations

import os
import sys

import msgpack
import pytest

from runtime.codec import Record, encode_record
from runtime.log import ATTR_COMPACTED, FileLog, LogConfig, SegmentInfo, read_manifest, scan_batches
from runtime.log_compaction import CompactionInProgress, compaction_lock, swap_segments
from runtime.testing import ShardHarness
from spark_bridge.cli import ProgressBar
from spark_bridge.compaction import SegmentWriter, compact_log, load_shard, state_differences, state_digest
from spark_bridge.loader import find_logs
from tests.runtime.kv_shard import KvKey, KvShard, KvValue

LOG = "__kv-0"
T0 = 1_700_000_000_000


def test_find_logs_in_a_data_dir_and_a_log_folder(tmp_path):
    FileLog(str(tmp_path / "__consumer_offsets-3")).close()
    FileLog(str(tmp_path / "orders-12")).close()
    os.makedirs(tmp_path / "not-a-log")
    logs = find_logs(str(tmp_path))
    assert [(log.name, log.topic, log.partition, log.internal) for log in logs] == [
        ("__consumer_offsets-3", "__consumer_offsets", 3, True), ("orders-12", "orders", 12, False)]
    assert find_logs(str(tmp_path / "orders-12")) == logs[1:]


def test_compaction_refuses_before_any_job(tmp_path):
    h = ShardHarness(str(tmp_path / LOG), KvShard, name=LOG, now_ms=T0)
    h.call(lambda s, now: s.put("a", 1, now))
    result = compact_log(None, str(tmp_path / LOG))
    assert (result.status, result.reason) == ("nothing to do", "no closed segments")
    assert str(result) == f"{LOG}: nothing to do (no closed segments)"

    with compaction_lock(str(tmp_path / LOG)), pytest.raises(CompactionInProgress, match="already running"):
        compact_log(None, str(tmp_path / LOG))
    FileLog(str(tmp_path / "orders-0")).close()
    with pytest.raises(ValueError, match="holds topic data"):
        compact_log(None, str(tmp_path / "orders-0"))
    with pytest.raises(FileNotFoundError, match="is not a log folder"):
        compact_log(None, str(tmp_path))


def test_a_compacted_segment_keeps_offsets_and_batch_timestamps(tmp_path):
    directory = str(tmp_path / LOG)
    log = FileLog(directory, LogConfig(fsync=False))
    original = [Record(KvKey(f"k{i}"), KvValue(i)) for i in range(20)]
    log.append(msgpack.packb([encode_record(r) for r in original], use_bin_type=True), 20, T0)
    log.roll()
    log.close()

    writer = SegmentWriter(directory, 0, 20)
    pack = msgpack.Packer(use_bin_type=True).pack
    for offset, ts, key, value in [(3, T0, "a", 1), (7, T0, "b", 2), (8, T0 + 5, "a", None), (19, T0 + 5, "c", 3)]:
        record = Record(KvKey(key), None if value is None else KvValue(value))
        writer.add(offset, ts, pack(encode_record(record)), value is None)
    out = writer.finish()
    assert (out["file"], out["records"], out["batches"], out["tombstones"], out["max_timestamp"]) == (
        "00000000000000000000-00000000000000000020.compacted.log", 4, 2, 1, T0 + 5)
    assert not os.path.exists(os.path.join(directory, out["file"] + ".tmp"))
    with open(os.path.join(directory, out["file"]), "rb") as f:
        batches, _ = scan_batches(f.read(), strict=True)
    # A new batch where the timestamp changes; a batch's count spans its offsets.
    assert [(b.base_offset, b.count, b.timestamp, b.attributes) for b in batches] == [
        (3, 5, T0, ATTR_COMPACTED), (8, 12, T0 + 5, ATTR_COMPACTED)]

    swap_segments(directory, [read_manifest(directory).segments[0].file],
                  [SegmentInfo(out["file"], 0, 20, out["max_timestamp"], out["size"])])
    shard = load_shard(directory, KvShard)[0]
    assert (shard.offsets, shard.data) == ([3, 7, 8, 19], {"b": 2, "c": 3})


class Node:
    def __init__(self, **kw):
        self.__dict__.update(kw)


def test_state_digest_sees_state_not_history():
    a = Node(table={"x": 1, "y": {2, 1}}, items=[1, 2], offsets=[0, 1, 2])
    b = Node(table={"y": {1, 2}, "x": 1}, items=[1, 2], offsets=[5])
    a.parent = a  # a back reference does not loop
    b.parent = b
    assert state_digest(a, ("offsets",)) == state_digest(b, ("offsets",))
    assert state_digest(a) != state_digest(b)
    b.items.reverse()
    assert state_differences(a, b, ("offsets",)) == [".items[0]: 1 != 2", ".items[1]: 2 != 1"]


def test_progress_bar_lines(capsys):
    bar = ProgressBar(4, width=8, stream=sys.stdout)
    bar.update("__x-0: written", 1)
    bar.update("__x-0: swapped", 3)
    bar.close()
    lines = capsys.readouterr().out.splitlines()
    assert [line[:14] for line in lines] == ["[##......] 1/4", "[########] 4/4"] and lines[1].endswith("swapped")


def test_the_share_state_summary_replays_as_the_share_coordinator_does():
    """spark_bridge.analytics used to merge ShareUpdates with a copy of its own: it took an
    update's leader epoch -1 ("not given") as the epoch, and dropped an update that came
    before any snapshot."""
    from runtime.codec import as_dict
    from runtime.coordinator import CoordinatorContext
    from runtime.share_state.coordinator import ShareCoordinatorShard
    from runtime.share_state.records import (PersisterStateBatch, ShareSnapshotValue, ShareUpdateValue,
                                       share_snapshot_record, share_update_record)
    from runtime.timer import CoordinatorTimer
    from spark_bridge.analytics import share_partition_summary

    def batch(first, last, state, count):
        return PersisterStateBatch(first, last, state, count)

    runs = {
        "snapshot then updates": [
            share_snapshot_record("g", "t", 0, ShareSnapshotValue(0, 1, 3, 10, 0, 0, 0, (batch(10, 19, 0, 1),))),
            share_update_record("g", "t", 0, ShareUpdateValue(0, -1, -1, -1, (batch(12, 13, 2, 1),))),
            share_update_record("g", "t", 0, ShareUpdateValue(0, 4, 14, 2, (batch(15, 15, 4, 2),)))],
        "an update with no snapshot": [
            share_update_record("g", "t", 0, ShareUpdateValue(0, 2, 5, -1, (batch(5, 6, 2, 1),)))],
    }
    for name, records in runs.items():
        shard = ShareCoordinatorShard(CoordinatorContext("__share_group_state-0", 0, CoordinatorTimer()))
        for offset, r in enumerate(records):
            shard.replay(offset, r)
        loaded = shard.states[("g", "t", 0)]
        summary = share_partition_summary({"group_id": "g"}, [
            (offset, type(r.key).__name__.removesuffix("Key"), as_dict(r.value)) for offset, r in enumerate(records)])
        assert (summary["leader_epoch"], summary["start_offset"], summary["state_epoch"]) == (
            loaded.leader_epoch, loaded.start_offset, loaded.state_epoch), name
        assert summary["in_flight"] == sum(b.last_offset - b.first_offset + 1 for b in loaded.state_batches), name
