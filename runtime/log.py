"""The segmented, append-only log that holds every coordinator's state and every topic
partition's data.

On disk a log is a folder of segment files plus a manifest:

* a segment is a run of framed batches; its file is named by the base offset of its first
  batch (``00000000000000000000.log``), or, for the output of a compaction that replaced the
  closed segments covering offsets [base, end), ``<base>-<end>.compacted.log``;
* a batch is ``BATCH_HEADER`` (length, CRC32, base offset, timestamp, record count,
  attributes, producer id, producer epoch, base sequence) then a msgpack payload. The length
  counts the bytes after itself; the CRC covers everything after the CRC field;
* ``manifest.json`` lists the live segments in offset order. The last one is the active
  segment that the writer appends to; the others are closed and never change. Every update
  of the manifest is a read-modify-write under an exclusive lock on ``.manifest.lock``, then
  an atomic rename, so a compaction in another process can swap segments while the writer
  keeps appending.

The writer tracks two positions: ``end_offset`` (the next offset it will assign) and
``durable_offset`` (everything below it is flushed by the flush policy). On open, a torn or
corrupt tail of the active segment (a crash mid-write) is cut off at the last whole batch.
"""
from __future__ import annotations

import bisect
import errno
import fcntl
import json
import os
import re
import struct
import zlib
from dataclasses import dataclass, field
from typing import Iterator

import msgpack

from .errors import CorruptRecordError

BATCH_HEADER = struct.Struct(">IIqqiHqhi")
HEADER_SIZE = BATCH_HEADER.size  # 44
_AFTER_LENGTH = struct.Struct(">I")
# The bytes covered by the CRC start right after the CRC field.
_CRC_START = 8

ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
# A compacted batch: offsets have gaps, and the payload is [offset_deltas, entries].
ATTR_COMPACTED = 0x40

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1

MANIFEST = "manifest.json"
MANIFEST_LOCK = ".manifest.lock"
COMPACTION_LOCK = ".compaction.lock"
_SEGMENT_RE = re.compile(r"^(\d{20})\.log$")
_COMPACTED_RE = re.compile(r"^(\d{20})-(\d{20})\.compacted\.log$")


class LogWriteError(OSError):
    """The log could not append or flush. Nothing past ``durable_offset`` may be trusted."""


@dataclass(frozen=True, slots=True)
class Batch:
    base_offset: int
    timestamp: int
    count: int
    attributes: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    payload: bytes
    size: int  # framed size on disk

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.count - 1

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.count

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)


def encode_batch(base_offset: int, payload: bytes, count: int, timestamp: int, attributes: int = 0,
                 producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH,
                 base_sequence: int = NO_SEQUENCE) -> bytes:
    header = bytearray(BATCH_HEADER.pack(0, 0, base_offset, timestamp, count, attributes,
                                         producer_id, producer_epoch, base_sequence))
    crc = zlib.crc32(payload, zlib.crc32(memoryview(header)[_CRC_START:]))
    struct.pack_into(">II", header, 0, HEADER_SIZE - 4 + len(payload), crc)
    return bytes(header) + payload


class _TornTail(Exception):
    """The bytes at this position are not a whole, valid batch."""


def _parse_batch(buf: bytes | memoryview, pos: int) -> Batch:
    if len(buf) - pos < HEADER_SIZE:
        raise _TornTail("short header")
    (length, crc, base, ts, count, attrs, pid, pepoch, bseq) = BATCH_HEADER.unpack_from(buf, pos)
    end = pos + 4 + length
    if length < HEADER_SIZE - 4 or count < 0 or end > len(buf):
        raise _TornTail("length past the end")
    if zlib.crc32(buf[pos + _CRC_START:end]) != crc:
        raise _TornTail("crc mismatch")
    return Batch(base, ts, count, attrs, pid, pepoch, bseq, bytes(buf[pos + HEADER_SIZE:end]), end - pos)


def scan_batches(data: bytes, *, strict: bool, name: str = "",
                 base_offset: int | None = None) -> tuple[list[Batch], int]:
    """Parse the whole batches in ``data``. Returns (batches, bytes consumed). With
    ``strict`` a bad batch raises CorruptRecordError naming the segment and the offset where
    it should start (``base_offset`` is that of the first batch in ``data``); without it,
    parsing stops there (a torn tail)."""
    batches = []
    pos = 0
    mv = memoryview(data)
    while pos < len(data):
        try:
            b = _parse_batch(mv, pos)
        except _TornTail as e:
            if strict:
                after = batches[-1].next_offset if batches else base_offset
                raise CorruptRecordError(f"corrupt batch at byte {pos} of segment {name}: {e}",
                                         log=name, offset=after) from None
            break
        batches.append(b)
        pos += b.size
    return batches, pos


@dataclass
class SegmentInfo:
    file: str
    base_offset: int
    end_offset: int | None = None  # exclusive; None while active
    max_timestamp: int = -1
    size: int = 0

    def to_json(self) -> dict:
        return {"file": self.file, "base_offset": self.base_offset, "end_offset": self.end_offset,
                "max_timestamp": self.max_timestamp, "size": self.size}

    @classmethod
    def from_json(cls, d: dict) -> "SegmentInfo":
        return cls(d["file"], d["base_offset"], d.get("end_offset"), d.get("max_timestamp", -1), d.get("size", 0))


@dataclass
class Manifest:
    segments: list[SegmentInfo] = field(default_factory=list)
    log_start_offset: int = 0

    def to_json(self) -> dict:
        return {"version": 1, "log_start_offset": self.log_start_offset,
                "segments": [s.to_json() for s in self.segments]}

    @classmethod
    def from_json(cls, d: dict) -> "Manifest":
        return cls([SegmentInfo.from_json(s) for s in d["segments"]], d.get("log_start_offset", 0))


def segment_file_name(base_offset: int) -> str:
    return f"{base_offset:020d}.log"


def compacted_file_name(base_offset: int, end_offset: int) -> str:
    return f"{base_offset:020d}-{end_offset:020d}.compacted.log"


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class _FileLock:
    def __init__(self, path: str, blocking: bool = True) -> None:
        self.path = path
        self.blocking = blocking
        self.fd = -1

    def __enter__(self) -> "_FileLock":
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | (0 if self.blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            os.close(self.fd)
            self.fd = -1
            raise
        return self

    def __exit__(self, *exc) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)


def read_manifest(directory: str) -> Manifest | None:
    try:
        with open(os.path.join(directory, MANIFEST), "rb") as f:
            return Manifest.from_json(json.loads(f.read()))
    except FileNotFoundError:
        return None


def _write_manifest(directory: str, manifest: Manifest) -> None:
    tmp = os.path.join(directory, MANIFEST + ".tmp")
    with open(tmp, "wb") as f:
        f.write(json.dumps(manifest.to_json(), indent=1).encode())
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, os.path.join(directory, MANIFEST))
    _fsync_dir(directory)


def rebuild_manifest(directory: str) -> Manifest:
    """Recover a missing manifest from the segment files. A compacted segment supersedes
    the originals inside its range (leftovers of a swap that crashed before deleting them);
    where compacted ranges overlap, the wider one, written later, wins."""
    originals, compacted = [], []
    for name in os.listdir(directory):
        if m := _SEGMENT_RE.match(name):
            originals.append((int(m.group(1)), name))
        elif m := _COMPACTED_RE.match(name):
            compacted.append((int(m.group(1)), int(m.group(2)), name))
    chosen: list[tuple[int, int, str]] = []
    for base, end, name in sorted(compacted, key=lambda c: (c[0] - c[1], c[0])):
        if all(end <= b or base >= e for b, e, _ in chosen):
            chosen.append((base, end, name))
    segments = [SegmentInfo(name, base, end) for base, end, name in chosen]
    for base, name in originals:
        if not any(b <= base < e for b, e, _ in chosen):
            segments.append(SegmentInfo(name, base))
    segments.sort(key=lambda s: s.base_offset)
    for seg, nxt in zip(segments, segments[1:]):
        if seg.end_offset is None:
            seg.end_offset = nxt.base_offset
    for seg in segments:
        seg.size = os.path.getsize(os.path.join(directory, seg.file))
    if segments and segments[-1].end_offset is not None:
        # The newest segment is a compacted one: start a fresh active segment after it.
        segments.append(SegmentInfo(segment_file_name(segments[-1].end_offset), segments[-1].end_offset))
    start = segments[0].base_offset if segments else 0
    return Manifest(segments, start)


class OsIO:
    """The system calls the writer makes; tests substitute a faulty one (a full disk)."""

    def write(self, fd: int, data: bytes) -> int:
        return os.write(fd, data)

    def fsync(self, fd: int) -> None:
        os.fsync(fd)

    def truncate(self, fd: int, size: int) -> None:
        os.ftruncate(fd, size)


@dataclass(frozen=True)
class LogConfig:
    segment_bytes: int = 100 * 1024 * 1024  # Kafka's offsets.topic.segment.bytes
    fsync: bool = True  # fsync every flush; off leaves durability to the page cache

    @classmethod
    def from_config(cls, config: dict | None, prefix: str = "") -> "LogConfig":
        config = config or {}
        return cls(int(config.get(prefix + "segment.bytes", cls.segment_bytes)),
                   _as_bool(config.get("log.flush.fsync", cls.fsync)))


def _as_bool(v) -> bool:
    if isinstance(v, str):
        return v.strip().lower() in ("1", "true", "yes", "on")
    return bool(v)


class FileLog:
    """The single writer of one log folder."""

    def __init__(self, directory: str, config: LogConfig | None = None, *, io: OsIO | None = None,
                 name: str | None = None) -> None:
        self.directory = directory
        self.config = config or LogConfig()
        self.name = name or os.path.basename(os.path.normpath(directory))
        self._io = io or OsIO()
        self._fd = -1
        self._failed: str | None = None
        # (base_offset, position, size) of every batch in the active segment: reads find
        # their batches by bisection, truncation finds its byte position.
        self._active_index: list[tuple[int, int, int]] = []
        self._active_size = 0
        self._index: dict[str, list[tuple[int, int, int]]] = {}
        self.recovered: list[str] = []  # what open had to repair, for the operator's log
        os.makedirs(directory, exist_ok=True)
        self._open()

    # ------------------------------------------------------------------ opening

    def _open(self) -> None:
        with _FileLock(os.path.join(self.directory, MANIFEST_LOCK)):
            try:
                manifest = read_manifest(self.directory)
                problem = "manifest missing"
            except (ValueError, KeyError, TypeError) as e:
                manifest = None
                problem = f"manifest unreadable ({e})"
            if manifest is None:
                if any(_SEGMENT_RE.match(n) or _COMPACTED_RE.match(n) for n in os.listdir(self.directory)):
                    self.recovered.append(f"{problem}: rebuilt from the segment files")
                manifest = rebuild_manifest(self.directory)
            if not manifest.segments:
                manifest.segments.append(SegmentInfo(segment_file_name(0), 0))
            self._remove_strays(manifest)
            active = manifest.segments[-1]
            path = os.path.join(self.directory, active.file)
            self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
            with open(path, "rb") as f:
                data = f.read()
            batches, good = scan_batches(data, strict=False, name=active.file)
            if good < len(data):
                self.recovered.append(
                    f"{active.file}: cut a torn or corrupt tail of {len(data) - good} bytes at byte {good}")
                os.ftruncate(self._fd, good)
                os.fsync(self._fd)
            pos = 0
            expected = active.base_offset
            for b in batches:
                # Whole batches with the wrong offsets are not a torn write but a folder
                # whose files and manifest disagree: refuse rather than guess.
                if b.base_offset != expected:
                    self.close()
                    raise CorruptRecordError(f"batch at byte {pos} of segment {active.file} starts at offset "
                                             f"{b.base_offset}, expected {expected}", log=self.name, offset=expected)
                expected = b.next_offset
                self._active_index.append((b.base_offset, pos, b.size))
                pos += b.size
                active.max_timestamp = max(active.max_timestamp, b.timestamp)
            self._active_size = good
            active.size = good
            _write_manifest(self.directory, manifest)
        self.manifest = manifest
        self.end_offset = batches[-1].next_offset if batches else active.base_offset
        self.durable_offset = self.end_offset

    def _remove_strays(self, manifest: Manifest) -> None:
        """Delete segment files the manifest no longer lists (left by a swap that crashed
        before its cleanup) and temporary files, unless a compaction is running now."""
        try:
            with _FileLock(os.path.join(self.directory, COMPACTION_LOCK), blocking=False):
                live = {s.file for s in manifest.segments}
                for name in os.listdir(self.directory):
                    stray = (_SEGMENT_RE.match(name) or _COMPACTED_RE.match(name)) and name not in live
                    if stray or name.endswith(".tmp"):
                        os.unlink(os.path.join(self.directory, name))
        except BlockingIOError:
            pass

    # ------------------------------------------------------------------ writing

    @property
    def active_segment(self) -> SegmentInfo:
        return self.manifest.segments[-1]

    @property
    def failed(self) -> bool:
        """The writer could not cut back a failed write: it refuses to go on until reopened."""
        return self._failed is not None

    @property
    def log_start_offset(self) -> int:
        return self.manifest.log_start_offset

    def _raise_if_failed(self) -> None:
        if self._failed:
            raise LogWriteError(errno.EIO, f"log {self.name} failed earlier and must be reopened: {self._failed}")

    def append(self, payload: bytes, count: int, timestamp: int, *, attributes: int = 0,
               producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH,
               base_sequence: int = NO_SEQUENCE) -> int:
        """Write one batch (not yet flushed) and return its base offset. On failure the
        partial bytes are cut off and the log is as before."""
        self._raise_if_failed()
        if count <= 0:
            raise ValueError("a batch holds at least one record")
        base = self.end_offset
        data = encode_batch(base, payload, count, timestamp, attributes, producer_id, producer_epoch, base_sequence)
        if self._active_size > 0 and self._active_size + len(data) > self.config.segment_bytes:
            try:
                self.roll()
            except LogWriteError:
                raise
            except OSError as e:
                raise LogWriteError(e.errno or errno.EIO, f"roll of {self.name} failed: {e}") from e
        pos = self._active_size
        try:
            written = 0
            while written < len(data):
                written += self._io.write(self._fd, data[written:])
        except OSError as e:
            self._cut_back(pos, e)
            raise LogWriteError(e.errno or errno.EIO, f"append to {self.name} failed: {e}") from e
        self._active_index.append((base, pos, len(data)))
        self._active_size += len(data)
        seg = self.active_segment
        seg.size = self._active_size
        seg.max_timestamp = max(seg.max_timestamp, timestamp)
        self.end_offset = base + count
        return base

    def flush(self) -> None:
        """Make everything appended durable (fsync, per the flush policy)."""
        self._raise_if_failed()
        if self.durable_offset == self.end_offset:
            return
        if self.config.fsync:
            try:
                self._io.fsync(self._fd)
            except OSError as e:
                # After a failed fsync the page cache cannot be trusted: drop what was
                # not durable so that nothing unacknowledged is read back later.
                self.truncate_to(self.durable_offset)
                raise LogWriteError(e.errno or errno.EIO, f"flush of {self.name} failed: {e}") from e
        self.durable_offset = self.end_offset

    def truncate_to(self, offset: int) -> None:
        """Drop every batch at or after ``offset`` (which must start a batch in the active
        segment). Used to take back appends that never became durable."""
        if offset >= self.end_offset:
            return
        idx = self._active_index
        i = bisect.bisect_left(idx, (offset,))
        if i == len(idx) or idx[i][0] != offset:
            raise ValueError(f"offset {offset} does not start a batch in the active segment of {self.name}")
        self._cut_back(idx[i][1], None)
        del idx[i:]
        self.end_offset = offset
        self.durable_offset = min(self.durable_offset, offset)

    def _cut_back(self, pos: int, cause: OSError | None) -> None:
        try:
            self._io.truncate(self._fd, pos)
            self._active_size = pos
            self.active_segment.size = pos
        except OSError as e:
            self._failed = f"could not cut back to byte {pos}: {e} (after {cause})"
            raise LogWriteError(e.errno or errno.EIO, self._failed) from e

    def roll(self) -> None:
        """Close the active segment and start a new one at ``end_offset``."""
        self._raise_if_failed()
        # A closed segment is never written again: make it whole on disk whatever the policy.
        self.flush()
        os.fsync(self._fd)
        new = SegmentInfo(segment_file_name(self.end_offset), self.end_offset)
        fd = os.open(os.path.join(self.directory, new.file), os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        closing = self.active_segment
        closing.end_offset = self.end_offset

        def add(m: Manifest) -> None:
            m.segments[-1] = closing
            m.segments.append(new)

        try:
            self.manifest = update_manifest(self.directory, add)
        except BaseException:
            closing.end_offset = None
            os.close(fd)
            raise
        os.close(self._fd)
        self._fd = fd
        self._active_index = []
        self._active_size = 0

    def delete_segments(self, files: list[str]) -> None:
        """Retention: delete closed segments at the head of the log; the log start offset
        moves to the first remaining segment."""
        def drop(m: Manifest) -> None:
            # Checked against the manifest on disk: a compaction may have swapped segments.
            head = m.segments[:len(files)]
            if [s.file for s in head] != list(files) or any(s.end_offset is None for s in head):
                raise ValueError("only closed segments at the head of the log can be deleted")
            del m.segments[:len(files)]
            m.log_start_offset = max(m.log_start_offset, m.segments[0].base_offset)

        active = self.active_segment
        self.manifest = update_manifest(self.directory, drop)
        self.manifest.segments[-1] = active  # the writer's own record of its active segment
        for f in files:
            self._index.pop(f, None)
            try:
                os.unlink(os.path.join(self.directory, f))
            except FileNotFoundError:
                pass

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    # ------------------------------------------------------------------ reading

    def read(self, from_offset: int = 0, upto: int | None = None, max_bytes: int | None = None) -> list[Batch]:
        """Batches holding offsets in [from_offset, upto) (``upto`` defaults to the durable
        offset). The first batch is returned whole even if it starts before from_offset.
        Stops before max_bytes of payload is passed, but returns at least one batch."""
        upto = self.durable_offset if upto is None else upto
        for attempt in range(2):
            try:
                return self._read_indexed(from_offset, upto, max_bytes)
            except FileNotFoundError:
                if attempt:
                    raise
                # A compaction swapped closed segments: take its manifest and go on.
                fresh = read_manifest(self.directory)
                if fresh is not None:
                    self.manifest.segments[:-1] = fresh.segments[:-1]
                    self.manifest.log_start_offset = fresh.log_start_offset
                self._index.clear()
        return []

    def _segment_index(self, i: int) -> list[tuple[int, int, int]]:
        """(base_offset, position, size) of each batch in segment i."""
        seg = self.manifest.segments[i]
        if i == len(self.manifest.segments) - 1:
            return self._active_index
        cached = self._index.get(seg.file)
        if cached is None:
            with open(os.path.join(self.directory, seg.file), "rb") as f:
                batches, _ = scan_batches(f.read(), strict=True, name=seg.file, base_offset=seg.base_offset)
            pos = 0
            cached = []
            for b in batches:
                cached.append((b.base_offset, pos, b.size))
                pos += b.size
            self._index[seg.file] = cached
        return cached

    def _read_indexed(self, from_offset: int, upto: int, max_bytes: int | None) -> list[Batch]:
        segments = self.manifest.segments
        bases = [s.base_offset for s in segments]
        i = max(bisect.bisect_right(bases, from_offset) - 1, 0)
        out: list[Batch] = []
        budget = max_bytes
        while i < len(segments) and segments[i].base_offset < upto:
            idx = self._segment_index(i)
            j = max(bisect.bisect_right(idx, (from_offset, 1 << 62, 0)) - 1, 0)
            k = j
            while k < len(idx) and idx[k][0] < upto:
                size = idx[k][2] - HEADER_SIZE
                if budget is not None and (out or k > j) and size > budget:
                    break
                if budget is not None:
                    budget -= size
                k += 1
            if k > j:
                start, stop = idx[j][1], idx[k - 1][1] + idx[k - 1][2]
                fd = self._fd if i == len(segments) - 1 else None
                if fd is not None:
                    data = os.pread(fd, stop - start, start)
                else:
                    with open(os.path.join(self.directory, segments[i].file), "rb") as f:
                        f.seek(start)
                        data = f.read(stop - start)
                batches, _ = scan_batches(data, strict=True, name=segments[i].file, base_offset=idx[j][0])
                out.extend(b for b in batches if b.last_offset >= from_offset)
            if k < len(idx):  # stopped by upto or by the byte budget
                break
            i += 1
        return out


def update_manifest(directory: str, change) -> Manifest:
    """Read-modify-write the manifest under its lock. Returns the new manifest."""
    with _FileLock(os.path.join(directory, MANIFEST_LOCK)):
        manifest = read_manifest(directory) or rebuild_manifest(directory)
        change(manifest)
        _write_manifest(directory, manifest)
        return manifest


def read_batches(directory: str, from_offset: int = 0, upto: int | None = None, max_bytes: int | None = None,
                 *, writer: FileLog | None = None) -> Iterator[Batch]:
    """Read a log folder from any process. Closed segments must be whole (corruption raises
    CorruptRecordError naming the file and offset); the active segment may end in a torn
    tail, which is where reading stops.

    The reader sees one consistent snapshot: the files one manifest lists are opened
    together under the manifest lock, so a compaction that swaps them while the reader is
    paused (a load between two steps) changes nothing for it; POSIX keeps an unlinked file
    readable through an open descriptor."""
    files = _open_snapshot(directory, from_offset, upto, writer)
    try:
        yield from _read_segments(files, from_offset, upto, max_bytes)
    finally:
        for _, f, _ in files:
            f.close()


def _open_snapshot(directory: str, from_offset: int, upto: int | None,
                   writer: FileLog | None) -> list[tuple[SegmentInfo, object, bool]]:
    """(segment, open file, is active) for the segments holding [from_offset, upto)."""
    with _FileLock(os.path.join(directory, MANIFEST_LOCK)):
        manifest = read_manifest(directory) or rebuild_manifest(directory)
        if writer is not None:
            # The writer knows its active segment best; the closed ones come from the disk.
            writer.manifest.segments[:-1] = manifest.segments[:-1]
            writer.manifest.log_start_offset = manifest.log_start_offset
            manifest = writer.manifest
        segments = manifest.segments
        files = []
        try:
            for i, seg in enumerate(segments):
                nxt = segments[i + 1].base_offset if i + 1 < len(segments) else None
                if nxt is not None and nxt <= from_offset:
                    continue
                if upto is not None and seg.base_offset >= upto:
                    break
                try:
                    f = open(os.path.join(directory, seg.file), "rb")
                except FileNotFoundError:
                    raise CorruptRecordError(f"segment {seg.file} is in the manifest but not on disk",
                                             log=os.path.basename(os.path.normpath(directory)),
                                             offset=seg.base_offset) from None
                files.append((seg, f, i == len(segments) - 1))
        except BaseException:
            for _, f, _ in files:
                f.close()
            raise
    return files


def _read_segments(files: list, from_offset: int, upto: int | None, max_bytes: int | None) -> Iterator[Batch]:
    budget = max_bytes
    first = True
    for seg, f, is_active in files:
        batches, _ = scan_batches(f.read(), strict=not is_active, name=seg.file, base_offset=seg.base_offset)
        for b in batches:
            if b.last_offset < from_offset:
                continue
            if upto is not None and b.base_offset >= upto:
                return
            if budget is not None and not first and len(b.payload) > budget:
                return
            first = False
            yield b
            if budget is not None:
                budget -= len(b.payload)


class CompactionInProgress(Exception):
    """Another compaction holds this log."""


def compaction_lock(directory: str) -> _FileLock:
    """Held for the whole of a compaction; a second one gets CompactionInProgress."""

    class _Held(_FileLock):
        def __enter__(self):
            try:
                return super().__enter__()
            except BlockingIOError:
                raise CompactionInProgress(f"a compaction of {directory} is already running") from None

    return _Held(os.path.join(directory, COMPACTION_LOCK), blocking=False)


def encode_compacted_payload(offset_deltas: list[int], entries: list) -> bytes:
    """The payload of an ATTR_COMPACTED batch."""
    return msgpack.packb([offset_deltas, entries], use_bin_type=True)


def swap_segments(directory: str, replaced: list[str], replacement: list[SegmentInfo]) -> Manifest:
    """Atomically replace a run of closed segments by compacted ones that cover the same
    offsets (their files already written and fsynced under their final names). The
    writer's active segment is never touched."""
    def change(m: Manifest) -> None:
        files = [s.file for s in m.segments]
        try:
            i = files.index(replaced[0])
        except ValueError:
            raise ValueError(f"segment {replaced[0]} is no longer in the manifest") from None
        run = m.segments[i:i + len(replaced)]
        if [s.file for s in run] != list(replaced) or any(s.end_offset is None for s in run):
            raise ValueError("only a contiguous run of closed segments can be replaced")
        if replacement and (replacement[0].base_offset != run[0].base_offset
                            or replacement[-1].end_offset != run[-1].end_offset):
            raise ValueError("the replacement must cover the same offsets")
        m.segments[i:i + len(replaced)] = replacement

    manifest = update_manifest(directory, change)
    for f in replaced:
        if f not in {s.file for s in replacement}:
            try:
                os.unlink(os.path.join(directory, f))
            except FileNotFoundError:
                pass
    return manifest
