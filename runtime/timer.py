"""Keyed timers, as Kafka's CoordinatorTimer: data, not threads.

A timer is an operation to run at a deadline, stored under a key. Scheduling a key that is
already scheduled replaces it; a cancelled or replaced timer never fires. The owner asks for
`next_deadline()` and calls `pop_expired(now_ms)`; nothing here reads a clock.
"""
from __future__ import annotations

import heapq
import itertools
from typing import Any, Callable


class CoordinatorTimer:
    def __init__(self) -> None:
        self._timers: dict[str, tuple[int, int, Callable[[int], Any]]] = {}
        self._heap: list[tuple[int, int, str]] = []
        self._seq = itertools.count()

    def schedule(self, key: str, deadline_ms: int, operation: Callable[[int], Any]) -> None:
        seq = next(self._seq)
        self._timers[key] = (deadline_ms, seq, operation)
        heapq.heappush(self._heap, (deadline_ms, seq, key))

    def cancel(self, key: str) -> None:
        self._timers.pop(key, None)

    def is_scheduled(self, key: str) -> bool:
        return key in self._timers

    def deadline(self, key: str) -> int | None:
        t = self._timers.get(key)
        return t[0] if t else None

    def __len__(self) -> int:
        return len(self._timers)

    def next_deadline(self) -> int | None:
        heap = self._heap
        while heap:
            deadline, seq, key = heap[0]
            live = self._timers.get(key)
            if live is not None and live[1] == seq:
                return deadline
            heapq.heappop(heap)  # cancelled or replaced
        return None

    def pop_expired(self, now_ms: int) -> list[tuple[str, Callable[[int], Any]]]:
        """Remove and return the timers due at now_ms, earliest first."""
        due = []
        heap = self._heap
        while heap and heap[0][0] <= now_ms:
            _, seq, key = heapq.heappop(heap)
            live = self._timers.get(key)
            if live is not None and live[1] == seq:
                del self._timers[key]
                due.append((key, live[2]))
        return due

    def clear(self) -> None:
        self._timers.clear()
        self._heap.clear()


class ManualClock:
    """A clock for tests: time moves only when told to."""

    def __init__(self, now_ms: int = 0) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms

    def advance(self, ms: int) -> int:
        if ms < 0:
            raise ValueError("time does not go backwards")
        self.now_ms += ms
        return self.now_ms
