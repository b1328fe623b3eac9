"""Flushes of FileLogs that run off their writers' threads (FileLog.sync_point, then
`sync_all` on any thread, then FileLog.synced): a partition host's group commit makes the
logs of many partitions durable at once."""
from __future__ import annotations

import errno
import os
from dataclasses import dataclass

from .logformat import OsIO

__all__ = ["SYNCFS_AT", "SyncPoint", "sync_all"]


@dataclass
class SyncPoint:
    """A flush of a FileLog up to ``offset`` that runs off the writer's thread (FileLog.sync_point)."""
    io: OsIO
    fd: int
    offset: int
    opened: int
    error: OSError | None = None

    def sync(self) -> None:
        """The fsync, on any thread; its error is kept for FileLog.synced."""
        try:
            self.io.fsync(self.fd)
        except OSError as e:
            self.error = e
        finally:
            os.close(self.fd)


# From this many sync points on one filesystem, one syncfs(2) replaces their fsyncs: a
# journal commit for all, not one per file (1,000 files: 10-25 ms, against 200-350 ms of
# fsyncs, on this project's test machine). Below it, fsyncs do not wait on unrelated
# dirty data of the filesystem.
SYNCFS_AT = 16


def sync_all(points: list[SyncPoint]) -> None:
    """Run the fsyncs of many logs' sync points (on any thread). A syncfs error does not
    name the file that failed, so it is every point's of that filesystem."""
    by_device: dict[int, list[SyncPoint]] = {}
    for point in points:
        try:
            by_device.setdefault(os.fstat(point.fd).st_dev, []).append(point)
        except OSError as e:
            point.error = e
            os.close(point.fd)
    for group in by_device.values():
        if len(group) >= SYNCFS_AT and _syncfs(group):
            continue
        for point in group:
            point.sync()


def _syncfs(group: list[SyncPoint]) -> bool:
    """One syncfs for the points of one filesystem; False where there is none (ENOSYS)."""
    try:
        group[0].io.syncfs(group[0].fd)
        error = None
    except OSError as e:
        if e.errno == errno.ENOSYS:
            return False
        error = e
    for point in group:
        point.error = error
        os.close(point.fd)
    return True
