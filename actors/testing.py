"""Fakes for the shell: a disk that is slow, for tests and benchmarks of the actors."""
from __future__ import annotations

import time

from runtime.log import OsIO


class SlowFsyncIO(OsIO):
    """A disk whose every fsync takes `log.io.fsync.delay.ms` longer (default 50): a busy or
    slow disk. The coordinator logs go on it with {"log.io.class": "actors.testing:SlowFsyncIO"}."""

    def __init__(self, config: dict | None = None) -> None:
        self.delay_s = int((config or {}).get("log.io.fsync.delay.ms", 50)) / 1000

    def fsync(self, fd: int) -> None:
        time.sleep(self.delay_s)
        super().fsync(fd)
