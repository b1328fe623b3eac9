"""Idle expiry for an actor whose state lives elsewhere (a SharePartition's is with the share
coordinator): after `idle_ms` with no call and nothing under way, it goes away, writing
nothing, and the next caller brings up a new one."""
from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Callable

from runtime.errors import Errors, KafkaError

__all__ = ["IdleExpiry"]


class IdleExpiry:
    def __init__(self, idle_ms: int, busy: Callable[[], bool], exit_: Callable[[], None]) -> None:
        """`busy`: whether work is under way besides calls (timers, writes, acquired records);
        `exit_` ends the actor. `idle_ms` <= 0 never expires."""
        self.idle_ms = idle_ms
        self._busy, self._exit = busy, exit_
        self._calls = 0
        self._last_call = time.monotonic()
        self._watch: asyncio.Task | None = None
        self.exiting = False

    @contextlib.contextmanager
    def call(self):
        """A call that may change or read the state: the actor is not idle meanwhile. Once it
        is exiting, calls get COORDINATOR_NOT_AVAILABLE: the caller finds the next one."""
        if self.exiting:
            raise KafkaError(Errors.COORDINATOR_NOT_AVAILABLE, "going away idle")
        self._calls += 1
        self._last_call = time.monotonic()
        if self._watch is None and self.idle_ms > 0:
            self._watch = asyncio.get_running_loop().create_task(self._loop())
        try:
            yield
        finally:
            self._calls -= 1
            self._last_call = time.monotonic()

    def _idle(self) -> bool:
        return (self._calls == 0 and not self._busy()
                and time.monotonic() - self._last_call >= self.idle_ms / 1000)

    async def _loop(self) -> None:
        idle_s = self.idle_ms / 1000
        while True:
            # Until idle_ms after the last call; while something is under way, look every second.
            await asyncio.sleep(max(self._last_call + idle_s - time.monotonic(), min(idle_s, 1.0)))
            if self._idle():
                # Checked and done in one step of the event loop, so no call slips in.
                self.exiting = True
                self._exit()
                return
