"""When a group's rebalance began, and how long the ones that ended took: soft state behind
the rebalance-duration metric (not persisted, not replayed; a reload starts it afresh)."""
from __future__ import annotations

__all__ = ["RebalanceClock"]

# Durations nobody has taken yet are kept up to this many per group: the metrics exporter
# takes them every `metrics.export.interval.ms`, and a group must not grow without bound
# when it does not run.
MAX_KEPT = 64


class RebalanceClock:
    __slots__ = ("started_ms", "_durations_ms")

    def __init__(self) -> None:
        self.started_ms: int | None = None
        self._durations_ms: list[int] = []

    def start(self, now_ms: int) -> None:
        """A rebalance begins, unless one is already under way (it goes on)."""
        if self.started_ms is None:
            self.started_ms = now_ms

    def settle(self, now_ms: int) -> None:
        """The group is stable again: the rebalance under way, if any, is over."""
        if self.started_ms is not None:
            self._durations_ms.append(max(0, now_ms - self.started_ms))
            del self._durations_ms[:-MAX_KEPT]
            self.started_ms = None

    def abandon(self) -> None:
        """The group emptied or died mid-rebalance: no duration to report."""
        self.started_ms = None

    def take(self) -> list[int]:
        """The durations of the rebalances that ended since the last call."""
        taken, self._durations_ms = self._durations_ms, []
        return taken
