"""Fakes for the shell: a disk that is slow, for tests and benchmarks of the actors."""
from __future__ import annotations

import time

from runtime.log import OsIO


class SlowFsyncIO(OsIO):
    """A disk whose every fsync takes `log.io.fsync.delay.ms` longer (default 50): a busy or
    slow disk. The coordinator logs go on it with {"log.io.class": "actors.testing.SlowFsyncIO"};
    `log.io.slow.logs` (names, comma-separated) keeps the others on the plain disk."""

    def __init__(self, config: dict | None = None, log_name: str | None = None) -> None:
        config = config or {}
        slow = config.get("log.io.slow.logs")
        on = not slow or log_name in {name.strip() for name in slow.split(",")}
        self.delay_s = int(config.get("log.io.fsync.delay.ms", 50)) / 1000 if on else 0.0

    def fsync(self, fd: int) -> None:
        if self.delay_s:
            time.sleep(self.delay_s)
        super().fsync(fd)
