"""Swapping closed segments for a compacted replacement while the writer appends."""
import os

import msgpack
import pytest

from runtime.codec import unpack
from runtime.coordinator import CoordinatorContext, CoordinatorRuntime, replay_batch
from runtime.log import (ATTR_COMPACTED, MANIFEST, FileLog, LogConfig, SegmentInfo, compacted_file_name, encode_batch,
                         read_manifest)
from runtime.log_compaction import CompactionInProgress, compaction_lock, encode_compacted_payload, swap_segments
from runtime.log_read import read_batches

from runtime.timer import CoordinatorTimer

from .kv_shard import KvShard
from .logutil import append_kv, file_bytes


def compact(directory: str, closed: list[SegmentInfo]) -> SegmentInfo:
    """Keep the newest record of each key in `closed`, at its original offset, in one
    ATTR_COMPACTED batch; write the replacement under its final name (not yet swapped in)."""
    base, end = closed[0].base_offset, closed[-1].end_offset
    newest = {}
    for batch in read_batches(directory, base, end):
        for i, entry in enumerate(unpack(batch.payload)):
            newest[tuple(entry[2])] = (batch.base_offset + i, entry)
    kept = sorted(newest.values(), key=lambda t: t[0])
    deltas = [offset - base for offset, _ in kept]
    payload = encode_compacted_payload(deltas, [entry for _, entry in kept])
    data = encode_batch(base, payload, deltas[-1] + 1, 0, ATTR_COMPACTED)
    name = compacted_file_name(base, end)
    with open(os.path.join(directory, name), "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    return SegmentInfo(name, base, end, 0, len(data))


def kv_log(tmp_path, segments: int) -> FileLog:
    """A log where the same 4 keys are written over and over (k0..k3, values = offsets)."""
    log = FileLog(str(tmp_path / "log"), LogConfig(segment_bytes=300))
    while len(log.manifest.segments) < segments:
        log.append(msgpack.packb([[900, 0, [f"k{(log.end_offset + i) % 4}"], [log.end_offset + i]]
                                  for i in range(2)]), 2, 0)
    log.flush()
    return log


def load_state(directory: str):
    """Replay the folder as a reader does (the writer may be live: a reader takes no lock)."""
    shard = KvShard(CoordinatorContext("__kv-0", 0, CoordinatorTimer()))
    for batch in read_batches(directory):
        replay_batch(shard.replay, batch, "__kv-0")
    return shard.data, shard.offsets


def test_swap_while_the_writer_appends(tmp_path):
    log = kv_log(tmp_path, 4)
    directory = log.directory
    closed = log.manifest.segments[:-1]
    with compaction_lock(directory):
        replacement = compact(directory, closed)
        # The writer is not held up: it appends and flushes while the compaction runs.
        append_kv(log, 1)
        log.flush()
        full_data, full_offsets = load_state(directory)
        swap_segments(directory, [s.file for s in closed], [replacement])
    assert not any(os.path.exists(os.path.join(directory, s.file)) for s in closed)
    # Replaying the compacted log gives the same state as replaying the full one, and
    # the records kept their offsets.
    data, offsets = load_state(directory)
    assert data == full_data
    kept = list(range(closed[-1].end_offset - 4, closed[-1].end_offset))
    assert offsets == kept + full_offsets[closed[-1].end_offset:]
    # The writer's reads find the new segments without being told.
    append_kv(log, 2)
    log.flush()
    batches = log.read(0)
    assert batches[0].attributes & ATTR_COMPACTED and batches[0].base_offset == 0
    assert list(unpack(batches[0].payload)[0]) == kept  # offset deltas from base offset 0
    assert batches[-1].next_offset == log.end_offset
    # The writer rolls on top of the swapped manifest.
    while len(log.manifest.segments) < 3:
        append_kv(log, 2)
    log.flush()
    manifest = read_manifest(directory)
    assert manifest.segments[0].file == replacement.file
    assert [s.file for s in manifest.segments] == [s.file for s in log.manifest.segments]
    end = log.end_offset
    log.close()
    reopened = FileLog(directory, LogConfig(segment_bytes=300))
    assert reopened.end_offset == end and reopened.recovered == []


def test_swap_refuses_a_replacement_that_does_not_match(tmp_path):
    log = kv_log(tmp_path, 4)
    closed = log.manifest.segments[:-1]
    with compaction_lock(log.directory):
        replacement = compact(log.directory, closed[:2])
        with pytest.raises(ValueError, match="same offsets"):
            swap_segments(log.directory, [s.file for s in closed], [replacement])
        with pytest.raises(ValueError, match="closed"):
            swap_segments(log.directory, [s.file for s in log.manifest.segments[-2:]], [replacement])
        with pytest.raises(ValueError, match="no longer"):
            swap_segments(log.directory, ["00000000000000099999.log"], [replacement])
    assert [s.file for s in read_manifest(log.directory).segments] == [s.file for s in log.manifest.segments]


def test_compaction_lock_refuses_a_second_compaction(tmp_path):
    directory = str(tmp_path)
    with compaction_lock(directory):
        with pytest.raises(CompactionInProgress):
            with compaction_lock(directory):
                pass
    with compaction_lock(directory):
        pass


def test_opening_during_a_compaction_leaves_its_files_alone(tmp_path):
    log = kv_log(tmp_path, 3)
    closed = log.manifest.segments[:-1]
    log.close()
    with compaction_lock(log.directory):
        replacement = compact(log.directory, closed)
        FileLog(log.directory, LogConfig(segment_bytes=300)).close()
        assert os.path.exists(os.path.join(log.directory, replacement.file))
    # A compaction that died before its swap leaves a file that the next open removes.
    FileLog(log.directory, LogConfig(segment_bytes=300)).close()
    assert not os.path.exists(os.path.join(log.directory, replacement.file))


@pytest.mark.parametrize("crash", ["before unlinking the originals", "manifest lost too"])
def test_leftovers_of_a_swap_are_cleaned_on_open(tmp_path, crash):
    log = kv_log(tmp_path, 4)
    directory = log.directory
    closed = log.manifest.segments[:-1]
    active = log.manifest.segments[-1]
    data, _ = load_state(directory)
    originals = {s.file: file_bytes(os.path.join(directory, s.file)) for s in closed}
    with compaction_lock(directory):
        replacement = compact(directory, closed)
        swap_segments(directory, [s.file for s in closed], [replacement])
    # Put the originals back, as if the swap crashed after the manifest rename.
    for name, content in originals.items():
        with open(os.path.join(directory, name), "wb") as f:
            f.write(content)
    if crash == "manifest lost too":
        os.unlink(os.path.join(directory, MANIFEST))
    log.close()
    reopened = FileLog(directory, LogConfig(segment_bytes=300))
    assert [s.file for s in reopened.manifest.segments] == [replacement.file, active.file]
    assert [(s.base_offset, s.end_offset) for s in reopened.manifest.segments] == [
        (replacement.base_offset, replacement.end_offset), (active.base_offset, None)]
    assert not any(os.path.exists(os.path.join(directory, name)) for name in originals)
    reopened.close()
    assert load_state(directory)[0] == data


def test_a_rebuilt_manifest_after_compacting_everything_starts_a_fresh_active_segment(tmp_path):
    log = kv_log(tmp_path, 3)
    directory = log.directory
    closed = log.manifest.segments[:-1]
    active = log.manifest.segments[-1]
    log.close()
    with compaction_lock(directory):
        replacement = compact(directory, closed)
        swap_segments(directory, [s.file for s in closed], [replacement])
    os.unlink(os.path.join(directory, active.file))
    os.unlink(os.path.join(directory, MANIFEST))
    reopened = FileLog(directory, LogConfig(segment_bytes=300))
    assert [(s.file, s.end_offset) for s in reopened.manifest.segments] == [
        (replacement.file, replacement.end_offset), (active.file, None)]
    assert reopened.end_offset == replacement.end_offset


def test_retention_after_a_swap_checks_the_manifest_on_disk(tmp_path):
    log = kv_log(tmp_path, 4)
    closed = log.manifest.segments[:-1]
    with compaction_lock(log.directory):
        replacement = compact(log.directory, closed[:2])
        swap_segments(log.directory, [s.file for s in closed[:2]], [replacement])
    # The writer still has the old names; deleting them is refused and changes nothing.
    with pytest.raises(ValueError):
        log.delete_segments([closed[0].file])
    log.delete_segments([replacement.file])
    assert log.log_start_offset == closed[2].base_offset
    assert [s.file for s in read_manifest(log.directory).segments] == [s.file for s in closed[2:]] + [
        log.active_segment.file]
    append_kv(log, 1)
    log.flush()
    assert log.active_segment.size == os.path.getsize(os.path.join(log.directory, log.active_segment.file))


def test_a_paused_load_is_not_disturbed_by_a_swap(tmp_path):
    log = kv_log(tmp_path, 5)
    directory = log.directory
    full = load_state(directory)
    closed = log.manifest.segments[:-1]
    log.close()
    runtime = CoordinatorRuntime("__kv-0", 0, KvShard, lambda: FileLog(directory, LogConfig(segment_bytes=300)))
    steps = runtime.load(0, progress_every=1)
    next(steps)
    with compaction_lock(directory):
        swap_segments(directory, [s.file for s in closed], [compact(directory, closed)])
    list(steps)
    # The load read the snapshot it started from: every record once, in order.
    assert (runtime.shard.data, runtime.shard.offsets) == full
    runtime.close()
    data, offsets = load_state(directory)
    assert data == full[0] and len(offsets) < len(full[1])
