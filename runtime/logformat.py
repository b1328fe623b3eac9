"""What a log folder holds on disk: framed batches, segment files and the manifest, and the
small set of file operations that change them.

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

Every operation that changes a file goes through an ``OsIO``, so that tests can fail any
one of them (runtime.testing.FaultyIO).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import errno
import fcntl
import json
import os
import re
import struct
import zlib
from dataclasses import dataclass, field

from .errors import CorruptRecordError

BATCH_HEADER = struct.Struct(">IIqqiHqhi")
HEADER_SIZE = BATCH_HEADER.size  # 44
# The bytes covered by the CRC start right after the CRC field.
_CRC_START = 8
_LENGTH_CRC_BASE = struct.Struct(">IIq")

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
# Kafka's name for the file a log directory's single writer holds locked.
WRITER_LOCK = ".lock"
SEGMENT_RE = re.compile(r"^(\d{20})\.log$")
COMPACTED_RE = re.compile(r"^(\d{20})-(\d{20})\.compacted\.log$")


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

    @property
    def is_compacted(self) -> bool:
        return bool(self.attributes & ATTR_COMPACTED)


def encode_batch(base_offset: int, payload: bytes, count: int, timestamp: int, attributes: int = 0,
                 producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH,
                 base_sequence: int = NO_SEQUENCE) -> bytes:
    header = bytearray(BATCH_HEADER.pack(0, 0, base_offset, timestamp, count, attributes,
                                         producer_id, producer_epoch, base_sequence))
    crc = zlib.crc32(payload, zlib.crc32(memoryview(header)[_CRC_START:]))
    struct.pack_into(">II", header, 0, HEADER_SIZE - 4 + len(payload), crc)
    return bytes(header) + payload


class BadBatch(Exception):
    """The bytes at this position are not a whole, valid batch."""


def parse_batch(buf: bytes | memoryview, pos: int) -> Batch:
    if len(buf) - pos < HEADER_SIZE:
        raise BadBatch("short header")
    (length, crc, base, ts, count, attrs, pid, pepoch, bseq) = BATCH_HEADER.unpack_from(buf, pos)
    end = pos + 4 + length
    if length < HEADER_SIZE - 4 or count < 0 or end > len(buf):
        raise BadBatch("length past the end")
    if zlib.crc32(buf[pos + _CRC_START:end]) != crc:
        raise BadBatch("crc mismatch")
    return Batch(base, ts, count, attrs, pid, pepoch, bseq, bytes(buf[pos + HEADER_SIZE:end]), end - pos)


def scan_batches(data: bytes, *, strict: bool, name: str = "",
                 base_offset: int | None = None) -> tuple[list[Batch], int]:
    """Parse the whole batches in ``data``. Returns (batches, bytes consumed). With
    ``strict`` a bad batch raises CorruptRecordError naming the segment and the offset where
    it should start (``base_offset`` is that of the first batch in ``data``); without it,
    parsing stops there (a torn tail, or damage that the caller must tell from one)."""
    batches = []
    pos = 0
    mv = memoryview(data)
    while pos < len(data):
        try:
            b = parse_batch(mv, pos)
        except BadBatch as e:
            if strict:
                after = batches[-1].next_offset if batches else base_offset
                raise CorruptRecordError(f"corrupt batch at byte {pos} of segment {name}: {e}",
                                         log=name, offset=after) from None
            break
        batches.append(b)
        pos += b.size
    return batches, pos


def valid_batch_after(data: bytes, start: int, expected_offset: int) -> int | None:
    """The byte position of the first whole, valid batch after ``start`` that could follow
    the batches before it (its base offset at least ``expected_offset`` and at most one
    record per byte past it), or None. Damage with a valid batch after it is not a torn
    tail: the writer never appends past bytes it has not written whole."""
    mv = memoryview(data)
    for pos in range(start + 1, len(data) - HEADER_SIZE + 1):
        length, _, base = _LENGTH_CRC_BASE.unpack_from(data, pos)
        if not expected_offset <= base <= expected_offset + (pos - start) or pos + 4 + length > len(data):
            continue
        try:
            parse_batch(mv, pos)
        except BadBatch:
            continue
        return pos
    return None


def check_segment_batches(batches: list[Batch], seg: "SegmentInfo", name: str) -> None:
    """A closed segment's batches must cover what the manifest says it covers: a segment
    cut at a batch boundary is whole batch by batch, but leaves a hole."""
    if seg.end_offset is None:
        return
    compacted = seg.file.endswith(".compacted.log")
    first = batches[0].base_offset if batches else None
    last = batches[-1].next_offset if batches else None
    if compacted:
        # A compaction keeps a subset of the offsets: its batches lie inside the range.
        ok = not batches or (first >= seg.base_offset and last <= seg.end_offset)
    else:
        ok = first == seg.base_offset and last == seg.end_offset
    if not ok:
        raise CorruptRecordError(f"segment {seg.file} holds offsets [{first}, {last}) but the manifest says "
                                 f"[{seg.base_offset}, {seg.end_offset})", log=name,
                                 offset=seg.base_offset if first is None else min(first, seg.base_offset))


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


def is_log_dir(path: str) -> bool:
    names = os.listdir(path)
    return MANIFEST in names or any(SEGMENT_RE.match(n) or COMPACTED_RE.match(n) for n in names)


def log_dirs(path: str) -> list[str]:
    """The log folders at ``path``: the folder itself if it is a log, else every log folder in it."""
    path = os.path.abspath(path)
    if not os.path.isdir(path):
        raise FileNotFoundError(f"no log or data directory at {path}")
    if is_log_dir(path):
        return [path]
    return [d for d in sorted(os.path.join(path, n) for n in os.listdir(path)) if os.path.isdir(d) and is_log_dir(d)]


def segment_file_name(base_offset: int) -> str:
    return f"{base_offset:020d}.log"


def compacted_file_name(base_offset: int, end_offset: int) -> str:
    return f"{base_offset:020d}-{end_offset:020d}.compacted.log"


class OsIO:
    """The system calls that change a log folder; tests substitute a faulty disk."""

    def open(self, path: str, flags: int, mode: int = 0o644) -> int:
        return os.open(path, flags, mode)

    def write(self, fd: int, data: bytes) -> int:
        return os.write(fd, data)

    def fsync(self, fd: int) -> None:
        os.fsync(fd)

    def syncfs(self, fd: int) -> None:
        """syncfs(2): everything written on fd's filesystem durable, with one journal
        commit. Linux only (OSError ENOSYS elsewhere); reports writeback errors since 5.8."""
        if _syncfs is None:
            raise OSError(errno.ENOSYS, "syncfs is not available here")
        if _syncfs(fd) != 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code))

    def truncate(self, fd: int, size: int) -> None:
        os.ftruncate(fd, size)

    def replace(self, src: str, dst: str) -> None:
        os.replace(src, dst)

    def unlink(self, path: str) -> None:
        os.unlink(path)

    def fsync_dir(self, path: str) -> None:
        fd = os.open(path, os.O_RDONLY)
        try:
            self.fsync(fd)
        finally:
            os.close(fd)


def _libc_syncfs():
    try:
        return ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True).syncfs
    except (OSError, AttributeError, TypeError):
        return None


_syncfs = _libc_syncfs()
OS_IO = OsIO()


class FileLock:
    """An flock on a file of the folder, held from ``__enter__`` (or ``acquire``) to release."""

    def __init__(self, path: str, blocking: bool = True) -> None:
        self.path = path
        self.blocking = blocking
        self.fd = -1

    def acquire(self) -> "FileLock":
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if self.blocking else fcntl.LOCK_NB))
        except BaseException:
            os.close(fd)
            raise
        self.fd = fd
        return self

    def release(self) -> None:
        if self.fd >= 0:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> "FileLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def read_manifest(directory: str) -> Manifest | None:
    try:
        with open(os.path.join(directory, MANIFEST), "rb") as f:
            return Manifest.from_json(json.loads(f.read()))
    except FileNotFoundError:
        return None


def write_manifest(directory: str, manifest: Manifest, io: OsIO = OS_IO) -> None:
    tmp = os.path.join(directory, MANIFEST + ".tmp")
    fd = io.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        data = json.dumps(manifest.to_json(), indent=1).encode()
        written = 0
        while written < len(data):
            written += io.write(fd, data[written:])
        io.fsync(fd)
    finally:
        os.close(fd)
    io.replace(tmp, os.path.join(directory, MANIFEST))
    io.fsync_dir(directory)


def rebuild_manifest(directory: str) -> Manifest:
    """Recover a missing manifest from the segment files. A compacted segment supersedes
    the originals inside its range (leftovers of a swap that crashed before deleting them);
    where compacted ranges overlap, the wider one, written later, wins."""
    originals, compacted = [], []
    for name in os.listdir(directory):
        if m := SEGMENT_RE.match(name):
            originals.append((int(m.group(1)), name))
        elif m := COMPACTED_RE.match(name):
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


def update_manifest(directory: str, change, io: OsIO = OS_IO) -> Manifest:
    """Read-modify-write the manifest under its lock. Returns the new manifest."""
    with FileLock(os.path.join(directory, MANIFEST_LOCK)):
        manifest = read_manifest(directory) or rebuild_manifest(directory)
        change(manifest)
        write_manifest(directory, manifest, io)
        return manifest
