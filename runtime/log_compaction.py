"""What a compaction (spark_bridge.compaction) needs of a log folder beside its writer: the
compaction lock, the compacted batches' payload, and the atomic swap of closed segments for
compacted ones."""
from __future__ import annotations

import os

import msgpack

from .logformat import COMPACTION_LOCK, OS_IO, FileLock, Manifest, OsIO, SegmentInfo, update_manifest

__all__ = ["CompactionInProgress", "compaction_lock", "encode_compacted_payload", "swap_segments"]


class CompactionInProgress(Exception):
    """Another compaction holds this log."""


def compaction_lock(directory: str) -> FileLock:
    """Held for the whole of a compaction; a second one gets CompactionInProgress."""

    class _Held(FileLock):
        def __enter__(self):
            try:
                return super().__enter__()
            except BlockingIOError:
                raise CompactionInProgress(f"a compaction of {directory} is already running") from None

    return _Held(os.path.join(directory, COMPACTION_LOCK), blocking=False)


def encode_compacted_payload(offset_deltas: list[int], entries: list) -> bytes:
    """The payload of an ATTR_COMPACTED batch."""
    return msgpack.packb([offset_deltas, entries], use_bin_type=True)


def swap_segments(directory: str, replaced: list[str], replacement: list[SegmentInfo], io: OsIO = OS_IO) -> Manifest:
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

    manifest = update_manifest(directory, change, io)
    for f in replaced:
        if f not in {s.file for s in replacement}:
            try:
                io.unlink(os.path.join(directory, f))
            except OSError:
                pass  # no longer listed: the writer's next open removes it
    return manifest
