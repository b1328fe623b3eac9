"""Helpers for the log tests: batches of KvShard records and byte surgery on segment files."""
from __future__ import annotations

import os

from runtime.codec import Record, decode_records, encode_records
from runtime.log import FileLog, LogConfig

from .kv_shard import KvKey, KvValue


def kv_records(start: int, n: int) -> list[Record]:
    return [Record(KvKey(f"k{i}"), KvValue(i)) for i in range(start, start + n)]


def append_kv(log: FileLog, n: int, timestamp: int = 0) -> int:
    """Append a batch of n records whose values are their offsets; returns its base offset."""
    start = log.end_offset
    return log.append(encode_records(kv_records(start, n)), n, timestamp)


def log_with_segments(directory, segments: int, segment_bytes: int) -> FileLog:
    """A flushed log of this many segments, of batches of three records."""
    log = FileLog(str(directory), LogConfig(segment_bytes=segment_bytes))
    while len(log.manifest.segments) < segments:
        append_kv(log, 3)
    log.flush()
    return log


def values(batches) -> list[int]:
    """The record values in these (uncompacted) batches, in order; None for a tombstone."""
    return [None if r.value is None else r.value.value
            for b in batches for r in decode_records(b.payload, b.base_offset)]


def segment_path(log: FileLog, i: int) -> str:
    return os.path.join(log.directory, log.manifest.segments[i].file)


def file_bytes(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def flip_byte(path: str, position: int) -> None:
    with open(path, "r+b") as f:
        f.seek(position)
        b = f.read(1)
        f.seek(position)
        f.write(bytes([b[0] ^ 0x40]))


def cut_file(path: str, size: int) -> None:
    with open(path, "r+b") as f:
        f.truncate(size)
