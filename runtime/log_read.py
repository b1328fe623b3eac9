"""Reading a log folder from any process, beside its writer (a coordinator's load, Spark's
loader, a test's check): one consistent snapshot of the segments one manifest lists."""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Iterator

from .errors import CorruptRecordError
from .logformat import (MANIFEST_LOCK, Batch, FileLock, SegmentInfo, check_segment_batches, read_manifest,
                        rebuild_manifest, scan_batches)

if TYPE_CHECKING:
    from .log import FileLog

__all__ = ["read_batches"]


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
    with FileLock(os.path.join(directory, MANIFEST_LOCK)):
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
        if not is_active:
            check_segment_batches(batches, seg, seg.file)
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
