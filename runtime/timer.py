"""Keyed timers, as Kafka's CoordinatorTimer: data, not threads.

A timer is an operation to run at a deadline, stored under a key. Scheduling a key that is
already scheduled replaces it; a cancelled or replaced timer never fires. The owner asks for
`next_deadline()` and calls `pop_expired(now_ms)`; nothing here reads a clock.
"""
from __future__ import annotations

import heapq
from typing import Any, Callable, Iterator


class CoordinatorTimer:
    def __init__(self) -> None:
        self._timers: dict[str, tuple[int, int, Callable[[int], Any]]] = {}
        self._heap: list[tuple[int, int, str]] = []
        # Never reset, not even by clear(): a stale heap entry must never match a live timer.
        self._seq = 0

    def schedule(self, key: str, deadline_ms: int, operation: Callable[[int], Any]) -> None:
        seq = self._seq
        self._seq += 1
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

    def expire(self, now_ms: int) -> Iterator[tuple[str, Callable[[int], Any]]]:
        """Yield the timers due at now_ms, earliest first, each removed as it is yielded.
        Liveness is checked at each step, so a timer that an earlier one cancelled or
        rescheduled does not fire; timers scheduled during the iteration wait for the next
        call. The caller may stop early: the timers it did not reach stay scheduled."""
        heap = self._heap
        due = []
        while heap and heap[0][0] <= now_ms:
            due.append(heapq.heappop(heap))
        i = 0
        try:
            while i < len(due):
                _, seq, key = due[i]
                i += 1
                live = self._timers.get(key)
                if live is not None and live[1] == seq:
                    del self._timers[key]
                    yield key, live[2]
        finally:
            for entry in due[i:]:
                heapq.heappush(heap, entry)

    def pop_expired(self, now_ms: int) -> list[tuple[str, Callable[[int], Any]]]:
        """Remove and return the timers due at now_ms, earliest first. Prefer `expire` when
        running them: an operation may cancel a timer that is already in this list."""
        return list(self.expire(now_ms))

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
