"""A disk for the soak (`log.io.class`): some fsyncs are slow and some fail (EIO), at random
rates from the cluster config, once the soak has armed them (the file `soak.faults.file`
names, plus ".armed", exists: the deployment starts on a sound disk). A failed fsync takes
the log offline; the actor reopens and checks it (the logs fail closed). Each fault is
appended to the file `soak.faults.file` names (kind, time.monotonic(), log), so that the
soak, in another process, can count them and place them in a violation's story."""
from __future__ import annotations

import errno
import os
import random
import time

from runtime.log import OsIO


class ChaosIO(OsIO):
    def __init__(self, config: dict, log_name: str | None = None) -> None:
        self.slow_rate = float(config.get("soak.fsync.slow.rate", 0))
        self.slow_s = int(config.get("soak.fsync.slow.ms", 0)) / 1000
        self.fail_rate = float(config.get("soak.fsync.fail.rate", 0))
        self.faults_file = config.get("soak.faults.file")
        self.log_name = log_name
        self.rng = random.Random()

    def _record(self, kind: str) -> None:
        if self.faults_file:
            with open(self.faults_file, "a") as f:
                f.write(f"{kind} {time.monotonic():.3f} {self.log_name}\n")

    def fsync(self, fd: int) -> None:
        if not (self.faults_file and os.path.exists(self.faults_file + ".armed")):
            return super().fsync(fd)
        roll = self.rng.random()
        if roll < self.fail_rate:
            self._record("fsync_failed")
            raise OSError(errno.EIO, "Input/output error (fsync, injected)")
        if roll < self.fail_rate + self.slow_rate:
            self._record("fsync_slow")
            time.sleep(self.slow_s)  # a slow disk: the actor's flush waits
        super().fsync(fd)
