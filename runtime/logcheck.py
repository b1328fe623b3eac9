"""What an operator sees of a log folder: every problem that would make the writer refuse to
open it, or that it would repair (``verify_log``), and its batches and records
(``dump_log``, like kafka-dump-log.sh). Both only read: they take no lock and write nothing,
so they can look at a live log.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Iterator

from .codec import as_dict, decode_entries, unpack
from .errors import CorruptRecordError
from .logformat import (COMPACTED_RE, MANIFEST, SEGMENT_RE, Batch, BadBatch, Manifest, SegmentInfo,
                        check_segment_batches, parse_batch, read_manifest, rebuild_manifest, valid_batch_after)
from .topics import data
from .topics.internal import is_internal

ERROR, WARNING = "error", "warning"


@dataclass(frozen=True)
class Problem:
    severity: str  # ERROR: the writer refuses to open the log; WARNING: it repairs it on open
    file: str
    message: str
    byte: int | None = None
    offset: int | None = None

    def __str__(self) -> str:
        where = ", ".join(p for p in (self.file, f"byte {self.byte}" if self.byte is not None else "",
                                      f"offset {self.offset}" if self.offset is not None else "") if p)
        return f"{self.severity}: {where}: {self.message}"


def _manifest(directory: str, problems: list[Problem]) -> Manifest:
    try:
        manifest = read_manifest(directory)
    except (ValueError, KeyError, TypeError) as e:
        problems.append(Problem(WARNING, MANIFEST, f"unreadable ({e}); the writer rebuilds it from the segments"))
        return rebuild_manifest(directory)
    if manifest is None:
        problems.append(Problem(WARNING, MANIFEST, "missing; the writer rebuilds it from the segments"))
        return rebuild_manifest(directory)
    return manifest


def _read(directory: str, seg: SegmentInfo) -> bytes | None:
    try:
        with open(os.path.join(directory, seg.file), "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


def _scan(data: bytes) -> tuple[list[tuple[int, Batch]], int, str | None]:
    """(position, batch) of the whole batches from the start, where they stop, and why."""
    out, pos, mv = [], 0, memoryview(data)
    while pos < len(data):
        try:
            b = parse_batch(mv, pos)
        except BadBatch as e:
            return out, pos, str(e)
        out.append((pos, b))
        pos += b.size
    return out, pos, None


def verify_log(directory: str) -> list[Problem]:
    """Every problem of the folder, in segment order. No ERROR means the writer opens it;
    WARNINGs are what it repairs on the way (a torn tail cut, a manifest rebuilt, strays
    removed)."""
    problems: list[Problem] = []
    manifest = _manifest(directory, problems)
    segments = manifest.segments
    listed = {s.file for s in segments}
    for name in sorted(os.listdir(directory)):
        if (SEGMENT_RE.match(name) or COMPACTED_RE.match(name)) and name not in listed:
            problems.append(Problem(WARNING, name, "not in the manifest (left by an interrupted roll or "
                                                   "compaction); the writer deletes it"))
    for i, seg in enumerate(segments):
        active = i == len(segments) - 1
        if not active and seg.end_offset != segments[i + 1].base_offset:
            problems.append(Problem(ERROR, seg.file, f"ends at {seg.end_offset} but the next segment starts at "
                                                     f"{segments[i + 1].base_offset}", offset=seg.end_offset))
        raw = _read(directory, seg)
        if raw is None:
            problems.append(Problem(ERROR, seg.file, "in the manifest but not on disk", offset=seg.base_offset))
            continue
        if not active and len(raw) != seg.size:
            problems.append(Problem(ERROR, seg.file, f"{len(raw)} bytes, the manifest says {seg.size}",
                                    offset=seg.base_offset))
        batches, stop, why = _scan(raw)
        expected = seg.base_offset
        for pos, b in batches:
            if not b.is_compacted and b.base_offset != expected or b.base_offset < expected:
                problems.append(Problem(ERROR, seg.file, f"batch starts at offset {b.base_offset}, expected "
                                                         f"{expected}", byte=pos, offset=expected))
            expected = b.next_offset
        if why is not None:
            after = valid_batch_after(raw, stop, expected)
            if active and after is None:
                problems.append(Problem(WARNING, seg.file, f"torn tail of {len(raw) - stop} bytes ({why}); the "
                                                           f"writer cuts it", byte=stop, offset=expected))
            else:
                tail = f"a valid batch follows at byte {after}" if after is not None else "in a closed segment"
                problems.append(Problem(ERROR, seg.file, f"corrupt batch ({why}), {tail}", byte=stop, offset=expected))
        elif not active:
            try:
                check_segment_batches([b for _, b in batches], seg, seg.file)
            except CorruptRecordError as e:
                problems.append(Problem(ERROR, seg.file, str(e), offset=e.offset))
    return problems


def dump_log(directory: str, records: bool = False) -> Iterator[dict[str, Any]]:
    """One dict per batch of every segment, in order, with its records if asked; a batch
    that does not parse ends its segment's dump with one dict that says why."""
    internal = is_internal(os.path.basename(os.path.normpath(directory)))
    for seg in _manifest(directory, []).segments:
        raw = _read(directory, seg)
        if raw is None:
            yield {"segment": seg.file, "error": "in the manifest but not on disk"}
            continue
        batches, stop, why = _scan(raw)
        for pos, b in batches:
            row = {"segment": seg.file, "position": pos, "base_offset": b.base_offset, "last_offset": b.last_offset,
                   "count": b.count, "size": b.size, "crc_valid": True, "timestamp": b.timestamp,
                   "producer_id": b.producer_id, "producer_epoch": b.producer_epoch,
                   "base_sequence": b.base_sequence, "is_transactional": b.is_transactional,
                   "is_control": b.is_control, "is_compacted": b.is_compacted}
            if records:
                row["records"] = _records(b, internal)
            yield row
        if why is not None:
            yield {"segment": seg.file, "position": stop, "crc_valid": False, "error": why,
                   "bytes_left": len(raw) - stop}


def _records(batch: Batch, internal: bool) -> list[dict[str, Any]]:
    try:
        if batch.is_control:
            commit, coordinator_epoch = data.decode_control(batch.payload)
            return [{"offset": batch.base_offset, "control": "COMMIT" if commit else "ABORT",
                     "coordinator_epoch": coordinator_epoch}]
        if not internal:
            return [r._asdict() for r in data.decode_entries(batch.payload, batch.base_offset)]
        payload = unpack(batch.payload)
        if batch.is_compacted:
            deltas, entries = payload
            offsets = [batch.base_offset + d for d in deltas]
        else:
            entries, offsets = payload, range(batch.base_offset, batch.base_offset + len(payload))
        return [{"offset": offset, "type": type(r.key).__name__, "key": as_dict(r.key), "value": as_dict(r.value)}
                for offset, r in zip(offsets, decode_entries(entries, 0))]
    except Exception as e:  # the dump goes on: one undecodable batch is itself a finding
        return [{"offset": batch.base_offset, "error": f"undecodable: {e}"}]
