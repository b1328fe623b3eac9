"""The log fails closed (issue 15): damage that is not a torn tail is refused, an I/O error
takes the log offline, external damage is found on open, and one writer holds a folder.

Every test works on real files; faults are injected through FaultyIO or made by editing the
bytes, as a failing disk or an operator would."""
import os

import pytest

from runtime.errors import CorruptRecordError
from runtime.log import FileLog, LogConfig, LogLockedError, LogWriteError, read_manifest
from runtime.log_read import read_batches
from runtime.testing import FaultyIO

from .logutil import append_kv, cut_file, file_bytes, log_with_segments, segment_path, values


def open_log(directory, io=None, **config):
    return FileLog(str(directory), LogConfig(**config), io=io)


def active_with_batches(tmp_path, sizes=(2, 1, 3, 2, 1)):
    """A closed log whose active segment holds batches of these record counts; returns
    (path, [(first byte, end byte, base offset)] of each batch)."""
    log = open_log(tmp_path / "log")
    spans = []
    for n in sizes:
        start = log.active_segment.size
        base = append_kv(log, n)
        spans.append((start, log.active_segment.size, base))
    log.flush()
    path = segment_path(log, 0)
    log.close()
    return path, spans


def reopen_outcome(tmp_path, path, original: bytes):
    """Open after damage: ('refused', error) or ('opened', values read back). The file
    is restored afterwards."""
    try:
        log = open_log(tmp_path / "log")
    except CorruptRecordError as e:
        result = ("refused", e)
    else:
        result = ("opened", values(log.read()))
        log.close()
    with open(path, "wb") as f:
        f.write(original)
    return result


# ---------------------------------------------------------------------- damage on open

@pytest.mark.parametrize("damage", ["flip", "zero"])
def test_damage_followed_by_a_valid_batch_is_refused_at_every_byte(tmp_path, damage):
    """Finding 3: one corrupt batch in the middle of the active segment used to cut every
    valid batch after it. Now every byte of every batch but the last is tried."""
    path, spans = active_with_batches(tmp_path)
    original = file_bytes(path)
    last_start = spans[-1][0]
    everything = list(range(spans[-1][2] + 1))
    for pos in range(last_start):
        with open(path, "r+b") as f:
            f.seek(pos)
            old = f.read(4 if damage == "zero" else 1)
            f.seek(pos)
            f.write(bytes(len(old)) if damage == "zero" else bytes([old[0] ^ 0x01]))
        outcome, detail = reopen_outcome(tmp_path, path, original)
        if damage == "zero" and old == bytes(len(old)):
            assert (outcome, detail) == ("opened", everything), pos  # zeros over zeros change nothing
            continue
        assert outcome == "refused", f"damage at byte {pos} was not refused"
        first = max(s for s, _, _ in spans if s <= pos)
        batch_base = next(b for s, _, b in spans if s == first)
        assert os.path.basename(path) in str(detail) and f"byte {first}" in str(detail)
        assert detail.offset == batch_base
        assert file_bytes(path) == original  # nothing was cut


def test_a_torn_tail_is_still_cut_at_every_byte(tmp_path):
    """Cutting the file anywhere, flipping or zeroing anywhere in its last batch: nothing
    valid follows, so this is a torn write and the whole batches before it are kept."""
    path, spans = active_with_batches(tmp_path)
    original = file_bytes(path)
    ends = [0] + [end for _, end, _ in spans]
    for size in range(len(original)):
        cut_file(path, size)
        whole = max(i for i, end in enumerate(ends) if end <= size)  # batches wholly before the cut
        expected_end = spans[whole][2] if whole < len(spans) else spans[-1][2] + 1
        outcome, read_back = reopen_outcome(tmp_path, path, original)
        assert outcome == "opened" and read_back == list(range(expected_end)), size
    last_start, end, last_base = spans[-1]
    for pos in range(last_start, end):
        for change in (lambda b: bytes([b[0] ^ 0x01]), lambda b: b"\x00"):
            with open(path, "r+b") as f:
                f.seek(pos)
                old = f.read(1)
                f.seek(pos)
                f.write(change(old))
            outcome, read_back = reopen_outcome(tmp_path, path, original)
            assert outcome == "opened", pos
            assert read_back in (list(range(last_base)), list(range(last_base + 1))), pos


def test_a_zero_filled_tail_is_cut(tmp_path):
    path, spans = active_with_batches(tmp_path)
    with open(path, "ab") as f:
        f.write(bytes(4096))  # a crash after the file grew but before its pages were written
    log = open_log(tmp_path / "log")
    assert values(log.read()) == list(range(spans[-1][2] + 1))
    assert os.path.getsize(path) == spans[-1][1] and "torn tail of 4096 bytes" in log.recovered[0]
    log.close()


def test_a_missing_active_segment_is_an_error(tmp_path):
    """Finding 5: it used to be recreated empty, losing every batch in it."""
    log = log_with_segments(tmp_path / "log", 2, 300)
    active = log.active_segment.file
    log.close()
    os.unlink(os.path.join(log.directory, active))
    with pytest.raises(CorruptRecordError, match=f"active segment {active} is in the manifest but not on disk"):
        open_log(tmp_path / "log", segment_bytes=300)
    assert not os.path.exists(os.path.join(log.directory, active))  # not recreated


@pytest.mark.parametrize("damage", ["cut at a batch boundary", "cut to nothing", "grown", "missing",
                                    "first batch renumbered"])
def test_a_damaged_closed_segment_is_found_on_open(tmp_path, damage):
    """Finding 5: a closed segment cut exactly at a batch boundary used to leave a silent hole."""
    log = log_with_segments(tmp_path / "log", 3, 300)
    seg = log.manifest.segments[1]
    path = os.path.join(log.directory, seg.file)
    batches = list(read_batches(log.directory, seg.base_offset, seg.end_offset))
    log.close()
    if damage == "cut at a batch boundary":
        cut_file(path, seg.size - batches[-1].size)
        match = f"segment {seg.file} has {seg.size - batches[-1].size} bytes but the manifest says {seg.size}"
    elif damage == "cut to nothing":
        cut_file(path, 0)
        match = "but the manifest says"
    elif damage == "grown":
        with open(path, "ab") as f:
            f.write(file_bytes(path)[:batches[0].size])
        match = "but the manifest says"
    elif damage == "missing":
        os.unlink(path)
        match = f"segment {seg.file} is in the manifest but not on disk"
    else:
        data = bytearray(file_bytes(path))
        data[8:16] = (seg.base_offset + 1).to_bytes(8, "big")
        with open(path, "wb") as f:
            f.write(data)
        match = f"starts at offset {seg.base_offset + 1} but the manifest says {seg.base_offset}"
    with pytest.raises(CorruptRecordError, match=match) as info:
        open_log(tmp_path / "log", segment_bytes=300)
    assert info.value.log == "log"


def test_a_closed_segment_cut_at_a_boundary_behind_a_stale_manifest_size_is_found_when_read(tmp_path):
    """The size in the manifest agrees (the manifest was edited too), but the offsets do not:
    the batch-by-batch check of a closed segment's first read finds the hole."""
    log = log_with_segments(tmp_path / "log", 3, 300)
    seg = log.manifest.segments[1]
    path = os.path.join(log.directory, seg.file)
    last = list(read_batches(log.directory, seg.base_offset, seg.end_offset))[-1]
    log.close()
    cut_file(path, seg.size - last.size)
    manifest = read_manifest(log.directory)
    manifest.segments[1].size -= last.size
    import json
    with open(os.path.join(log.directory, "manifest.json"), "w") as f:
        json.dump(manifest.to_json(), f)
    log = open_log(tmp_path / "log", segment_bytes=300)
    for read in (lambda: log.read(0), lambda: list(read_batches(log.directory, 0))):
        with pytest.raises(CorruptRecordError, match=f"segment {seg.file} holds offsets") as info:
            read()
        assert info.value.offset == seg.base_offset
    log.close()


# ---------------------------------------------------------------------- one writer

def test_a_second_writer_is_refused_and_readers_take_no_lock(tmp_path):
    """Finding 6."""
    log = open_log(tmp_path / "log")
    append_kv(log, 2)
    log.flush()
    manifest_before = file_bytes(os.path.join(log.directory, "manifest.json"))
    with pytest.raises(LogLockedError, match="another writer is using the log folder"):
        open_log(tmp_path / "log")
    # The refused writer changed nothing; a reader reads while the writer holds the lock.
    assert file_bytes(os.path.join(log.directory, "manifest.json")) == manifest_before
    assert values(read_batches(log.directory)) == [0, 1]
    append_kv(log, 1)
    log.flush()
    assert values(read_batches(log.directory)) == [0, 1, 2]
    log.close()
    second = open_log(tmp_path / "log")  # once the first has closed, a new writer may open
    assert values(second.read()) == [0, 1, 2]
    second.close()


# ---------------------------------------------------------------------- going offline

def test_a_roll_whose_directory_fsync_failed_leaves_the_log_offline_until_reopened(tmp_path):
    """Finding 2: the manifest rename succeeded, the directory fsync did not. The writer
    used to append to a segment the manifest on disk already called closed."""
    io = FaultyIO()
    log = open_log(tmp_path / "log", io=io, segment_bytes=200)
    append_kv(log, 3)
    log.flush()
    acknowledged = log.end_offset
    io.fail_ops = {"fsync_dir"}
    with pytest.raises(LogWriteError, match="roll"):
        while len(log.manifest.segments) < 2:
            append_kv(log, 3)
            log.flush()
            acknowledged = log.end_offset
    assert log.offline and not log.unsettled
    with pytest.raises(LogWriteError, match="offline"):
        append_kv(log, 1)
    io.fail_ops = set()
    log.reopen()
    # Memory and disk agree again: the manifest on disk named the new active segment.
    assert [s.file for s in read_manifest(log.directory).segments] == [s.file for s in log.manifest.segments]
    assert log.end_offset == acknowledged
    for _ in range(6):
        append_kv(log, 3)
        log.flush()
    end = log.end_offset
    files = [s.file for s in log.manifest.segments]
    log.close()
    log = open_log(tmp_path / "log", segment_bytes=200)
    assert log.end_offset == end and [s.file for s in log.manifest.segments] == files
    assert len(set(files)) == len(files)
    assert values(log.read()) == list(range(end))
    log.close()


def operations_of(work) -> list[str]:
    """The file operations `work` makes on a healthy disk."""
    io = FaultyIO()
    work(io, ack=lambda *_: None)
    return io.ops


def appends_flushes_and_rolls(tmp_path):
    directory = tmp_path / "log"

    def work(io, ack):
        log = open_log(directory, io=io, segment_bytes=250)
        try:
            for i in range(12):
                base = log.end_offset
                try:
                    append_kv(log, 1 + i % 3)
                    if i % 2:
                        log.flush()
                        ack(base, log.end_offset)
                except LogWriteError:
                    if log.offline:
                        log.reopen()
            log.flush()
        finally:
            log.close()
    return work


def test_an_error_at_each_file_operation_loses_nothing_acknowledged(tmp_path):
    """An error injected at every file operation of appends, flushes, rolls and manifest
    updates in turn: afterwards the log opens, is whole, and holds every record whose flush
    returned, exactly once and in order; the records after them are those later appended."""
    work = appends_flushes_and_rolls(tmp_path)
    healthy = len(operations_of(work))
    for n in range(healthy):
        for name in os.listdir(tmp_path / "log"):
            os.unlink(tmp_path / "log" / name)
        io = FaultyIO()
        io.fail_nth = n
        acked: list[tuple[int, int]] = []
        try:
            work(io, ack=lambda first, end: acked.append((first, end)))
        except (LogWriteError, OSError):
            pass  # the reopen itself, or the final flush, met the fault
        log = open_log(tmp_path / "log")
        read_back = values(log.read())
        log.close()
        assert read_back == list(range(len(read_back))), n  # offsets dense, each value its offset
        assert all(end <= len(read_back) for _, end in acked), n


def test_a_failed_flush_fails_every_append_it_covered_and_a_roll_cannot_hide_it(tmp_path):
    """Finding 1, at the log: A appended, B's roll fails on A's fsync. Nothing past the
    durable offset survives, and the next flush does not report A as durable."""
    io = FaultyIO()
    log = open_log(tmp_path / "log", io=io, segment_bytes=120, fsync=True)
    append_kv(log, 1)
    log.flush()
    a = append_kv(log, 1)
    io.fail_nth = 0  # the roll's flush: the fsync of A
    with pytest.raises(LogWriteError):
        append_kv(log, 1)  # B does not fit: roll
    assert log.offline and log.end_offset == log.durable_offset == a
    with pytest.raises(LogWriteError):
        log.flush()  # never a clean return while the disk has failed
    log.reopen()
    assert log.end_offset == a
    c = append_kv(log, 1)
    log.flush()
    assert c == a and values(log.read()) == [0, 1]
    log.close()


def test_an_error_at_each_step_of_a_compaction_swap_keeps_the_log_whole(tmp_path):
    """A swap that fails at any file operation leaves either the old segments or the
    replacement in the manifest, never a mix; the live writer goes on, and a reopen reads
    every record the writer had flushed."""
    from .test_log_compaction import compact, kv_log, load_state
    from runtime.log_compaction import compaction_lock, swap_segments

    probe = FaultyIO()
    log = kv_log(tmp_path / "probe", 4)
    closed = log.manifest.segments[:-1]
    with compaction_lock(log.directory):
        swap_segments(log.directory, [s.file for s in closed], [compact(log.directory, closed)], probe)
    log.close()
    for n in range(len(probe.ops)):
        case = tmp_path / f"case{n}"
        log = kv_log(case, 4)
        directory = log.directory
        state = load_state(directory)
        closed = log.manifest.segments[:-1]
        io = FaultyIO()
        io.fail_nth = n
        with compaction_lock(directory):
            replacement = compact(directory, closed)
            try:
                swap_segments(directory, [s.file for s in closed], [replacement], io)
            except OSError:
                pass
        listed = [s.file for s in read_manifest(directory).segments[:-1]]
        assert listed in ([s.file for s in closed], [replacement.file]), n
        assert load_state(directory)[0] == state[0]
        append_kv(log, 1)
        log.flush()
        end = log.end_offset
        log.close()
        log = open_log(case / "log", segment_bytes=300)
        assert log.end_offset == end
        log.close()
