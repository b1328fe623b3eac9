"""Test fixtures for shards: a harness with a manual clock, and a faulty disk.

The harness runs a shard through the real CoordinatorRuntime over a real log folder, so the
tests see exactly what an actor would: records replayed, batches flushed, timers fired in
order, and the same state after a reload.
"""
from __future__ import annotations

import errno
import os
from typing import Any, Callable

from .codec import Record
from .coordinator import CoordinatorContext, CoordinatorRuntime, PendingWrite, Result, replay_batch
from .log import FileLog, LogConfig, OsIO
from .log_read import read_batches
from .timer import ManualClock


class FaultyIO(OsIO):
    """A disk that fails. After ``fail_after_bytes`` more bytes a write stores what fits and
    then fails with ENOSPC; ``fail_fsync`` and ``fail_truncate`` make every fsync or
    truncate fail; ``fail_ops`` names operations (open, write, fsync, truncate, replace,
    unlink, fsync_dir) that fail every time; ``fail_nth = n`` fails the n-th operation
    from now (0: the next one), once. ``ops`` records every operation made."""

    def __init__(self) -> None:
        self.fail_after_bytes: int | None = None
        self.fail_fsync = False
        self.fail_truncate = False
        self.fail_ops: set[str] = set()
        self.fail_nth: int | None = None
        self.ops: list[str] = []

    def _check(self, op: str) -> None:
        self.ops.append(op)
        fail = op in self.fail_ops
        if self.fail_nth is not None:
            fail = fail or self.fail_nth == 0
            self.fail_nth = None if self.fail_nth == 0 else self.fail_nth - 1
        if fail:
            raise OSError(errno.EIO, f"Input/output error ({op})")

    def open(self, path: str, flags: int, mode: int = 0o644) -> int:
        self._check("open")
        return super().open(path, flags, mode)

    def write(self, fd: int, data: bytes) -> int:
        self._check("write")
        if self.fail_after_bytes is not None:
            room = self.fail_after_bytes
            if room < len(data):
                if room > 0:
                    super().write(fd, data[:room])
                self.fail_after_bytes = 0
                raise OSError(errno.ENOSPC, "No space left on device")
            self.fail_after_bytes -= len(data)
        return super().write(fd, data)

    def fsync(self, fd: int) -> None:
        if self.fail_fsync:
            raise OSError(errno.EIO, "Input/output error")
        self._check("fsync")
        super().fsync(fd)

    def syncfs(self, fd: int) -> None:
        if self.fail_fsync:
            raise OSError(errno.EIO, "Input/output error")
        self._check("fsync")
        super().syncfs(fd)

    def truncate(self, fd: int, size: int) -> None:
        if self.fail_truncate:
            raise OSError(errno.EIO, "Input/output error")
        self._check("truncate")
        super().truncate(fd, size)

    def replace(self, src: str, dst: str) -> None:
        self._check("replace")
        super().replace(src, dst)

    def unlink(self, path: str) -> None:
        self._check("unlink")
        super().unlink(path)

    def fsync_dir(self, path: str) -> None:
        self._check("fsync_dir")
        fd = os.open(path, os.O_RDONLY)
        try:
            super().fsync(fd)
        finally:
            os.close(fd)


class ShardHarness:
    """Drives one shard with a manual clock. ``write`` flushes at once unless
    ``auto_flush=False``; ``advance(ms)`` fires the timers that come due, in order."""

    def __init__(self, directory: str, shard_factory: Callable[[CoordinatorContext], Any], *,
                 config: dict | None = None, name: str = "__test-0", partition: int = 0,
                 now_ms: int = 0, fsync: bool = False, io: OsIO | None = None, auto_flush: bool = True) -> None:
        self.directory = directory
        self.clock = ManualClock(now_ms)
        self.io = io or FaultyIO()
        self.auto_flush = auto_flush
        self._log_config = LogConfig(segment_bytes=int((config or {}).get("segment.bytes", 1 << 20)), fsync=fsync)
        self.runtime = CoordinatorRuntime(name, partition, shard_factory,
                                          lambda: FileLog(directory, self._log_config, io=self.io, name=name),
                                          config)
        self.runtime.load_all(self.clock())

    @property
    def shard(self) -> Any:
        return self.runtime.shard

    def write(self, operation: Callable[[Any, int], Result]) -> PendingWrite:
        pending = self.runtime.write(operation, self.clock())
        if self.auto_flush:
            self.runtime.flush(self.clock())
        return pending

    def call(self, operation: Callable[[Any, int], Result]) -> Any:
        """Write, flush, and return the response (raising its error)."""
        pending = self.runtime.write(operation, self.clock())
        self.runtime.flush(self.clock())
        return pending.result()

    def read(self, operation: Callable[[Any], Any]) -> Any:
        return self.runtime.read(operation, self.clock())

    def advance(self, ms: int) -> None:
        """Move time forward, firing each timer at its own deadline."""
        target = self.clock.now_ms + ms
        while True:
            deadline = self.runtime.next_deadline()
            if deadline is None or deadline > target:
                break
            self.clock.now_ms = max(self.clock.now_ms, deadline)
            self.runtime.poll(self.clock())
            if self.auto_flush:
                self.runtime.flush(self.clock())
        self.clock.now_ms = target
        self.runtime.poll(self.clock())

    def records(self, from_offset: int = 0) -> list[tuple[int, Record]]:
        """(offset, record) of every durable record at or after ``from_offset``: exactly
        what a reload replays. Take ``end_offset`` before an operation and compare
        ``records(end)`` afterwards with the records it should have written."""
        out: list[tuple[int, Record]] = []
        for batch in read_batches(self.directory, from_offset, self.runtime.log.durable_offset):
            replay_batch(lambda offset, record: out.append((offset, record)), batch, self.runtime.name)
        return [(offset, record) for offset, record in out if offset >= from_offset]

    @property
    def end_offset(self) -> int:
        """The offset the next record will get (durable or not)."""
        return self.runtime.log.end_offset + self.runtime.pending_records

    def reload(self) -> Any:
        """Close the runtime and load a fresh one from the same folder (a restart)."""
        self.runtime.close()
        self.runtime = CoordinatorRuntime(self.runtime.name, self.runtime.partition, self.runtime._shard_factory,
                                          self.runtime._open_log, self.runtime.config)
        self.runtime.load_all(self.clock())
        return self.shard
