"""The segmented state log, against real files."""
import json
import os

import pytest

from runtime.codec import decode_records
from runtime.errors import CorruptRecordError
from runtime.log import HEADER_SIZE, MANIFEST, FileLog, LogConfig, LogWriteError, read_manifest, segment_file_name
from runtime.log_read import read_batches
from runtime.log_sync import SYNCFS_AT, sync_all
from runtime.testing import FaultyIO

from .logutil import append_kv, cut_file, file_bytes, flip_byte, log_with_segments, segment_path, values


def open_log(tmp_path, **config):
    return FileLog(str(tmp_path / "log"), LogConfig(**config))


def test_append_read_and_durable_offset(tmp_path):
    log = open_log(tmp_path)
    assert (log.end_offset, log.durable_offset, log.log_start_offset) == (0, 0, 0)
    assert append_kv(log, 2, timestamp=100) == 0
    assert append_kv(log, 3, timestamp=101) == 2
    # Appended but not flushed: not durable, not readable by default.
    assert (log.end_offset, log.durable_offset) == (5, 0)
    assert log.read() == []
    assert [b.base_offset for b in log.read(upto=log.end_offset)] == [0, 2]
    log.flush()
    assert log.durable_offset == 5
    batches = log.read()
    assert [(b.base_offset, b.count, b.timestamp, b.last_offset, b.next_offset) for b in batches] == [
        (0, 2, 100, 1, 2), (2, 3, 101, 4, 5)]
    assert values(batches) == [0, 1, 2, 3, 4]
    assert [r.key.key for r in decode_records(batches[1].payload, 2)] == ["k2", "k3", "k4"]


def test_read_from_any_offset(tmp_path):
    log = open_log(tmp_path, segment_bytes=200)
    for n in (2, 3, 1, 4, 2, 1, 3):
        append_kv(log, n)
    log.flush()
    assert len(log.manifest.segments) > 2
    for start in range(log.end_offset):
        batches = log.read(start)
        # The batch holding `start` comes first, whole.
        assert batches[0].base_offset <= start <= batches[0].last_offset
        assert batches[-1].next_offset == log.end_offset
        assert [b.base_offset for b in read_batches(log.directory, start)] == [b.base_offset for b in batches]
    assert log.read(log.end_offset) == []
    assert [b.base_offset for b in log.read(2, upto=6)] == [2, 5]


def test_read_max_bytes_returns_at_least_one_batch(tmp_path):
    log = open_log(tmp_path)
    for _ in range(4):
        append_kv(log, 3)
    log.flush()
    size = len(log.read()[0].payload)
    assert [b.base_offset for b in log.read(0, max_bytes=1)] == [0]
    assert [b.base_offset for b in log.read(0, max_bytes=2 * size)] == [0, 3]
    assert [b.base_offset for b in log.read(4, max_bytes=2 * size + 1)] == [3, 6]
    assert [b.base_offset for b in read_batches(log.directory, 4, max_bytes=2 * size)] == [3, 6]
    # Kafka's minOneMessage off (a Fetch whose other partitions took its max bytes): only what fits.
    assert log.read(0, max_bytes=size - 1, min_one=False) == []
    assert [b.base_offset for b in log.read(0, max_bytes=size, min_one=False)] == [0]


def test_read_max_offsets_stops_before_reading_what_is_not_needed(tmp_path):
    log = open_log(tmp_path, segment_bytes=200)
    for _ in range(6):
        append_kv(log, 3)
    log.flush()
    assert len(log.manifest.segments) > 1
    assert [b.base_offset for b in log.read(0, max_offsets=1)] == [0]
    assert [b.base_offset for b in log.read(0, max_offsets=3)] == [0]
    assert [b.base_offset for b in log.read(0, max_offsets=4)] == [0, 3]
    # From the middle of a batch, the offsets are counted from the one asked for.
    assert [b.base_offset for b in log.read(2, max_offsets=1)] == [0]
    assert [b.base_offset for b in log.read(2, max_offsets=2)] == [0, 3]
    assert [b.base_offset for b in log.read(4, max_offsets=6)] == [3, 6, 9]
    # Damage in a batch past the limit is not read, so it does not fail the read; a read
    # that reaches it does.
    last = segment_path(log, len(log.manifest.segments) - 1)
    flip_byte(last, os.path.getsize(last) - 1)
    assert [b.base_offset for b in log.read(0, max_offsets=4)] == [0, 3]
    with pytest.raises(CorruptRecordError):
        log.read(0)


def test_segments_roll_by_size_and_closed_segments_do_not_change(tmp_path):
    log = open_log(tmp_path, segment_bytes=400)
    append_kv(log, 3)
    log.flush()
    first = segment_path(log, 0)
    while len(log.manifest.segments) < 3:
        append_kv(log, 3)
    log.flush()
    segments = log.manifest.segments
    assert [s.file for s in segments] == [segment_file_name(s.base_offset) for s in segments]
    assert all(s.end_offset == nxt.base_offset for s, nxt in zip(segments, segments[1:]))
    assert segments[-1].end_offset is None
    assert all(s.size <= 400 for s in segments[:-1])
    closed = {s.file: file_bytes(os.path.join(log.directory, s.file)) for s in segments[:-1]}
    for _ in range(10):
        append_kv(log, 3)
    log.flush()
    assert all(file_bytes(os.path.join(log.directory, f)) == data for f, data in closed.items())
    assert file_bytes(first) == closed[os.path.basename(first)]
    assert values(log.read()) == list(range(log.end_offset))
    # The manifest on disk says the same thing as the writer.
    on_disk = read_manifest(log.directory)
    assert [s.file for s in on_disk.segments] == [s.file for s in log.manifest.segments]


def test_a_batch_bigger_than_a_segment_gets_a_segment_of_its_own(tmp_path):
    log = open_log(tmp_path, segment_bytes=100)
    append_kv(log, 1)
    append_kv(log, 20)
    append_kv(log, 1)
    log.flush()
    assert [s.base_offset for s in log.manifest.segments] == [0, 1, 21]
    assert values(log.read()) == list(range(22))


def test_reopen_keeps_everything(tmp_path):
    log = open_log(tmp_path, segment_bytes=400)
    for _ in range(12):
        append_kv(log, 2)
    log.flush()
    before = (log.end_offset, [s.file for s in log.manifest.segments])
    log.close()
    log = open_log(tmp_path, segment_bytes=400)
    assert (log.end_offset, [s.file for s in log.manifest.segments]) == before
    assert log.durable_offset == log.end_offset and log.recovered == []
    append_kv(log, 1)
    log.flush()
    assert values(log.read()) == list(range(25))


@pytest.mark.parametrize("damage", ["cut mid-batch", "cut mid-header", "flip payload", "flip length", "garbage"])
def test_a_torn_or_corrupt_tail_is_cut_on_open(tmp_path, damage):
    log = open_log(tmp_path)
    for n in (2, 3, 4):
        append_kv(log, n)
    log.flush()
    path = segment_path(log, 0)
    last = log.read(5)[0]
    last_pos = os.path.getsize(path) - last.size
    log.close()
    if damage == "cut mid-batch":
        cut_file(path, last_pos + last.size - 3)
    elif damage == "cut mid-header":
        cut_file(path, last_pos + 10)
    elif damage == "flip payload":
        flip_byte(path, last_pos + HEADER_SIZE + 5)
    elif damage == "flip length":
        flip_byte(path, last_pos + 1)
    else:
        with open(path, "ab") as f:
            f.write(b"\x00\x00\x00\x07garbage")
    log = open_log(tmp_path)
    expected_end = 9 if damage == "garbage" else 5
    assert (log.end_offset, log.durable_offset) == (expected_end, expected_end)
    assert values(log.read()) == list(range(expected_end))
    assert len(log.recovered) == 1 and "torn tail" in log.recovered[0]
    assert os.path.getsize(path) == (last_pos + last.size if damage == "garbage" else last_pos)
    # The writer goes on from the cut.
    append_kv(log, 1)
    log.flush()
    log.close()
    assert values(open_log(tmp_path).read()) == list(range(expected_end + 1))


@pytest.mark.parametrize("where", ["first batch", "later batch"])
def test_corruption_in_a_closed_segment_raises_naming_file_and_offset(tmp_path, where):
    log = log_with_segments(tmp_path / "log", 3, 400)
    seg = log.manifest.segments[1]
    path = os.path.join(log.directory, seg.file)
    batches = list(read_batches(log.directory, seg.base_offset, seg.end_offset))
    if where == "first batch":
        flip_byte(path, HEADER_SIZE + 2)
        offset = seg.base_offset
    else:
        flip_byte(path, batches[0].size + HEADER_SIZE + 2)
        offset = batches[1].base_offset
    for read in (lambda: log.read(0), lambda: list(read_batches(log.directory, 0))):
        with pytest.raises(CorruptRecordError) as info:
            read()
        assert seg.file in str(info.value) and info.value.offset == offset
    # The head segment is still readable on its own; opening is not blocked (only the
    # active segment is checked on open).
    assert values(log.read(0, upto=seg.base_offset)) == list(range(seg.base_offset))
    log.close()
    open_log(tmp_path, segment_bytes=400).close()


@pytest.mark.parametrize("damage, note", [("missing", "manifest missing"), ("torn", "manifest unreadable")])
def test_a_missing_or_unreadable_manifest_is_rebuilt(tmp_path, damage, note):
    log = open_log(tmp_path, segment_bytes=400)
    for _ in range(15):
        append_kv(log, 2)
    log.flush()
    files = [s.file for s in log.manifest.segments]
    log.close()
    path = os.path.join(log.directory, MANIFEST)
    if damage == "missing":
        os.unlink(path)
    else:
        with open(path, "wb") as f:
            f.write(b'{"segments": [{"fi')
    log = open_log(tmp_path, segment_bytes=400)
    assert [s.file for s in log.manifest.segments] == files
    assert len(log.recovered) == 1 and log.recovered[0].startswith(note)
    assert log.recovered[0].endswith(": rebuilt from the segment files")
    assert values(log.read()) == list(range(30))
    assert read_manifest(log.directory).segments[-1].file == files[-1]


def test_flush_without_fsync_still_advances_the_durable_offset(tmp_path):
    io = FaultyIO()
    log = FileLog(str(tmp_path / "log"), LogConfig(fsync=False), io=io)
    io.fail_fsync = True  # proves no fsync is made
    append_kv(log, 2)
    log.flush()
    assert log.durable_offset == 2


def test_delete_segments_advances_the_log_start_offset(tmp_path):
    log = open_log(tmp_path, segment_bytes=400)
    while len(log.manifest.segments) < 4:
        append_kv(log, 3)
    log.flush()
    segments = log.manifest.segments
    with pytest.raises(ValueError):
        log.delete_segments([segments[1].file])  # not at the head
    with pytest.raises(ValueError):
        log.delete_segments([s.file for s in segments])  # includes the active segment
    log.delete_segments([segments[0].file, segments[1].file])
    start = segments[2].base_offset
    assert log.log_start_offset == start
    assert not os.path.exists(os.path.join(log.directory, segments[0].file))
    assert log.read(0)[0].base_offset == start
    assert values(log.read()) == list(range(start, log.end_offset))
    end = log.end_offset
    log.close()
    log = open_log(tmp_path, segment_bytes=400)
    assert (log.log_start_offset, log.end_offset) == (start, end)
    with open(os.path.join(log.directory, MANIFEST)) as f:
        assert json.load(f)["log_start_offset"] == start


def test_a_failed_write_leaves_no_partial_bytes(tmp_path):
    io = FaultyIO()
    log = FileLog(str(tmp_path / "log"), LogConfig(), io=io)
    append_kv(log, 2)
    log.flush()
    size = os.path.getsize(segment_path(log, 0))
    io.fail_after_bytes = 10
    with pytest.raises(LogWriteError):
        append_kv(log, 3)
    assert os.path.getsize(segment_path(log, 0)) == size
    assert (log.end_offset, log.durable_offset, log.offline) == (2, 2, None)
    io.fail_after_bytes = None
    append_kv(log, 1)
    log.flush()
    assert values(log.read()) == [0, 1, 2]


def test_a_writer_that_cannot_cut_back_refuses_to_go_on(tmp_path):
    io = FaultyIO()
    log = FileLog(str(tmp_path / "log"), LogConfig(), io=io)
    append_kv(log, 2)
    log.flush()
    io.fail_after_bytes = 10
    io.fail_truncate = True
    with pytest.raises(LogWriteError):
        append_kv(log, 3)
    assert log.offline and log.unsettled
    io.fail_after_bytes = None
    io.fail_truncate = False
    with pytest.raises(LogWriteError, match="offline until it is reopened"):
        append_kv(log, 1)
    log.close()
    log = FileLog(str(tmp_path / "log"), LogConfig(), io=io)  # the torn tail is cut on open
    assert log.end_offset == 2 and len(log.recovered) == 1
    assert values(log.read()) == [0, 1]


def test_a_failed_fsync_drops_what_was_not_durable(tmp_path):
    io = FaultyIO()
    log = FileLog(str(tmp_path / "log"), LogConfig(fsync=True), io=io)
    append_kv(log, 2)
    log.flush()
    size = os.path.getsize(segment_path(log, 0))
    append_kv(log, 3)
    io.fail_fsync = True
    with pytest.raises(LogWriteError):
        log.flush()
    assert (log.end_offset, log.durable_offset) == (2, 2)
    assert os.path.getsize(segment_path(log, 0)) == size


def test_a_segment_missing_from_disk_is_a_clear_error(tmp_path):
    log = open_log(tmp_path, segment_bytes=400)
    while len(log.manifest.segments) < 3:
        append_kv(log, 2)
    log.flush()
    lost = log.manifest.segments[1]
    os.unlink(os.path.join(log.directory, lost.file))
    with pytest.raises(CorruptRecordError, match="not on disk") as info:
        list(read_batches(log.directory))
    assert info.value.offset == lost.base_offset and info.value.log == "log"


def test_log_config_from_kafka_names():
    assert LogConfig.from_config(None) == LogConfig(100 * 1024 * 1024, True)
    config = {"offsets.topic.segment.bytes": "1000", "log.flush.fsync": "false", "segment.bytes": 5}
    assert LogConfig.from_config(config, "offsets.topic.") == LogConfig(1000, False)
    assert LogConfig.from_config({"log.flush.fsync": "TRUE"}).fsync is True
    assert LogConfig.from_config({"log.flush.fsync": 0}).fsync is False


def test_open_removes_files_the_manifest_does_not_list(tmp_path):
    log = open_log(tmp_path)
    append_kv(log, 2)
    log.flush()
    log.close()
    strays = [segment_file_name(500), "manifest.json.tmp", "00000000000000000000-00000000000000000002.compacted.log"]
    for name in strays:
        with open(os.path.join(log.directory, name), "wb") as f:
            f.write(b"left by a crash")
    log = open_log(tmp_path)
    assert [name for name in strays if os.path.exists(os.path.join(log.directory, name))] == []
    assert values(log.read()) == [0, 1]


def test_an_active_segment_whose_offsets_disagree_with_the_manifest_is_refused(tmp_path):
    log = open_log(tmp_path)
    append_kv(log, 2)
    log.flush()
    log.close()
    manifest = read_manifest(log.directory)
    manifest.segments[0].base_offset = 10
    with open(os.path.join(log.directory, MANIFEST), "w") as f:
        json.dump(manifest.to_json(), f)
    with pytest.raises(CorruptRecordError, match="starts at offset 0, expected 10") as info:
        open_log(tmp_path)
    assert info.value.offset == 10


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_an_idle_log_parks_its_active_segment_and_the_next_append_opens_it_again(tmp_path):
    log = open_log(tmp_path, segment_bytes=200)
    append_kv(log, 2)
    assert not log.park(), "an append waiting for its flush keeps the descriptor it will fsync"
    log.flush()
    before = open_descriptors()
    assert log.park() and log.parked and not log.closed
    assert open_descriptors() == before - 1
    assert values(log.read()) == [0, 1], "reads open the file as they do closed segments'"
    assert open_descriptors() == before - 1
    for _ in range(6):  # appends open the segment again, and roll past it
        append_kv(log, 3)
    log.flush()
    assert not log.parked and len(log.manifest.segments) > 1
    assert values(log.read()) == list(range(20))
    log.close()
    assert values(open_log(tmp_path).read()) == list(range(20))


def test_a_parked_log_that_cannot_open_its_segment_fails_that_append_only(tmp_path):
    io = FaultyIO()
    log = FileLog(str(tmp_path / "log"), LogConfig(), io=io)
    append_kv(log, 2)
    log.flush()
    assert log.park()
    io.fail_ops = {"open"}  # as out of descriptors
    with pytest.raises(LogWriteError, match="again"):
        append_kv(log, 1)
    assert (log.end_offset, log.durable_offset, log.offline, log.parked) == (2, 2, None, True)
    io.fail_ops = set()
    append_kv(log, 1)
    log.flush()
    assert values(log.read()) == [0, 1, 2]


def test_a_parked_log_goes_offline_cleanly_when_a_manifest_update_fails(tmp_path):
    io = FaultyIO()
    log = FileLog(str(tmp_path / "log"), LogConfig(segment_bytes=200), io=io)
    while len(log.manifest.segments) < 3:
        append_kv(log, 3)
    log.flush()
    assert log.park()
    io.fail_ops = {"replace"}
    with pytest.raises(LogWriteError):
        log.advance_log_start_offset(3)
    assert log.offline and not log.unsettled
    io.fail_ops = set()
    log.reopen()
    assert not log.parked and values(log.read())[:3] == [0, 1, 2]


def test_many_logs_sync_points_are_made_durable_by_one_syncfs_and_its_error_is_each_ones(tmp_path):
    io = FaultyIO()
    logs = [FileLog(str(tmp_path / f"log{i}"), LogConfig(), io=io) for i in range(SYNCFS_AT)]
    for log in logs:
        append_kv(log, 2)
    points = [log.sync_point() for log in logs]
    io.ops.clear()
    sync_all(points)
    assert io.ops == ["fsync"], "one syncfs, not an fsync per log"
    for log, point in zip(logs, points):
        log.synced(point)
        assert log.durable_offset == 2
    for log in logs:
        append_kv(log, 1)
    points = [log.sync_point() for log in logs]
    io.fail_fsync = True
    sync_all(points)
    io.fail_fsync = False
    for log, point in zip(logs, points):
        with pytest.raises(LogWriteError):
            log.synced(point)
        assert log.offline and log.durable_offset == 2
        log.reopen()
        assert values(log.read()) == [0, 1]
        log.close()


def test_a_few_sync_points_are_fsynced_one_by_one(tmp_path):
    io = FaultyIO()
    logs = [FileLog(str(tmp_path / f"log{i}"), LogConfig(), io=io) for i in range(3)]
    for log in logs:
        append_kv(log, 1)
    points = [log.sync_point() for log in logs]
    io.fail_nth = 1  # the second log's fsync only
    sync_all(points)
    assert [p.error is not None for p in points] == [False, True, False]
    for log in logs:
        log.close()
