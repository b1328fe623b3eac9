"""The in-flight records of a share partition: the record-state table, InFlightState and
InFlightBatch (Kafka's classes of the same names).

A batch of offsets fetched together shares one InFlightState until some of its offsets have
to differ (a partial acknowledgement, a partial re-acquisition); from then on it keeps one
InFlightState per offset. A state change that must be persisted first is *begun*: the new
state shows at once, the old one is kept aside, and the change is later committed or rolled
back. A record with a change under way is neither acquired nor acknowledged again.
"""
from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass

from ..errors import Errors, KafkaError
from ..messages.share import NO_ACQUISITION
from ..share_state.records import RecordState

__all__ = ["EMPTY_MEMBER_ID", "TRANSITIONS", "TERMINAL", "InFlightState", "InFlightBatch", "GapWindow", "LockTimer"]

AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = (
    RecordState.AVAILABLE, RecordState.ACQUIRED, RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)

# The holder of a record that nobody holds.
EMPTY_MEMBER_ID = ""

# Kafka's legal moves of a record: a record is acquired from AVAILABLE, and an acquired record
# is released, acknowledged or archived (RecordState.validateTransition). An available record
# is archived when it left the log (the log start offset passed it, compaction removed it),
# which Kafka does with InFlightState.archive().
TRANSITIONS: dict[RecordState, frozenset[RecordState]] = {
    AVAILABLE: frozenset({ACQUIRED, ARCHIVED}),
    ACQUIRED: frozenset({AVAILABLE, ACKNOWLEDGED, ARCHIVED}),
    ACKNOWLEDGED: frozenset(),
    ARCHIVED: frozenset(),
}

TERMINAL = frozenset({ACKNOWLEDGED, ARCHIVED})


class InFlightState:
    """The state of one batch of offsets, or of one offset, with its holder and lock deadline."""

    __slots__ = ("first_offset", "last_offset", "state", "delivery_count", "member_id", "deadline_ms",
                 "acquisition_id", "_before")

    def __init__(self, first_offset: int, last_offset: int, state: RecordState, delivery_count: int,
                 member_id: str = EMPTY_MEMBER_ID, deadline_ms: int | None = None,
                 acquisition_id: int = NO_ACQUISITION) -> None:
        self.first_offset = first_offset
        self.last_offset = last_offset
        self.state = state
        self.delivery_count = delivery_count
        self.member_id = member_id
        self.deadline_ms = deadline_ms  # when the acquisition lock expires, while ACQUIRED
        # The delivery, while ACQUIRED: only an acknowledgement naming it applies.
        self.acquisition_id = acquisition_id
        self._before: tuple | None = None  # (state, delivery_count, member_id, deadline_ms, acquisition_id)

    @property
    def ongoing(self) -> bool:
        """A change of this state awaits its write to the share coordinator."""
        return self._before is not None

    def _transition(self, to: RecordState) -> None:
        if to not in TRANSITIONS[self.state]:
            raise KafkaError(Errors.INVALID_RECORD_STATE,
                             f"offsets {self.first_offset}-{self.last_offset} cannot move from {self.state.name} to {to.name}")
        self.state = to

    def move(self, to: RecordState, delivery_delta: int, member_id: str, max_delivery_count: int,
             acquisition_id: int = NO_ACQUISITION) -> None:
        """Kafka's tryUpdateState. Releasing a record that has used up its deliveries archives it
        instead, except when the delivery is being given back (delta -1: the records were never
        handed to the consumer). `acquisition_id` names the delivery a move to ACQUIRED makes."""
        if to is AVAILABLE and delivery_delta >= 0 and self.delivery_count >= max_delivery_count:
            to = ARCHIVED
        self._transition(to)
        if to is not ARCHIVED:
            self.delivery_count += delivery_delta
        self.member_id = member_id
        self.deadline_ms = None
        self.acquisition_id = acquisition_id if to is ACQUIRED else NO_ACQUISITION

    def begin(self, to: RecordState, delivery_delta: int, member_id: str, max_delivery_count: int) -> None:
        """Move now, keeping the old state aside until commit() or rollback()."""
        before = (self.state, self.delivery_count, self.member_id, self.deadline_ms, self.acquisition_id)
        self.move(to, delivery_delta, member_id, max_delivery_count)
        self._before = before

    def commit(self) -> None:
        self._before = None

    def persisted(self) -> tuple[RecordState, int]:
        """(state, delivery count) as the share coordinator should hold them: a change under
        way does not count yet, and an acquisition is never persisted (the delivery under way
        is not counted, as after a restart)."""
        state, count = (self.state, self.delivery_count) if self._before is None else self._before[:2]
        return (AVAILABLE, count - 1) if state is ACQUIRED else (state, count)

    def rollback(self) -> None:
        self.state, self.delivery_count, self.member_id, self.deadline_ms, self.acquisition_id = self._before
        self._before = None

    def __repr__(self) -> str:
        return (f"InFlightState({self.first_offset}-{self.last_offset} {self.state.name} x{self.delivery_count}"
                f" {self.member_id!r} #{self.acquisition_id} lock={self.deadline_ms}"
                f"{' ongoing' if self.ongoing else ''})")


class InFlightBatch:
    """Offsets first_offset..last_offset of the cache: one shared state, or one per offset."""

    __slots__ = ("first_offset", "last_offset", "batch_state", "offset_states")

    def __init__(self, state: InFlightState) -> None:
        self.first_offset = state.first_offset
        self.last_offset = state.last_offset
        self.batch_state: InFlightState | None = state
        self.offset_states: dict[int, InFlightState] | None = None

    def states(self):
        """The states of the batch, in offset order."""
        if self.offset_states is None:
            return (self.batch_state,)
        return self.offset_states.values()

    def state_at(self, offset: int) -> InFlightState:
        return self.batch_state if self.offset_states is None else self.offset_states[offset]

    def split(self) -> list[InFlightState]:
        """Track every offset on its own from now on (Kafka's maybeInitializeOffsetStateUpdate).
        The shared state must have no change under way. Returns the new states."""
        shared = self.batch_state
        assert shared is not None and not shared.ongoing
        states = [InFlightState(o, o, shared.state, shared.delivery_count, shared.member_id, shared.deadline_ms,
                                shared.acquisition_id) for o in range(self.first_offset, self.last_offset + 1)]
        self.offset_states = {s.first_offset: s for s in states}
        # The shared state is retired: its lock deadline must not fire any more.
        shared.deadline_ms = None
        self.batch_state = None
        return states

    def __repr__(self) -> str:
        return f"InFlightBatch({self.first_offset}-{self.last_offset} {list(self.states())})"


@dataclass
class GapWindow:
    """Offsets after a persisted state read that may hold records neither the share
    coordinator nor the cache knows about (they were acquired and never acknowledged before a
    restart). While the cache's end offset is still `end_offset`, fetching goes back to
    `gap_start_offset` first; once the end offset moves on, every gap has been fetched."""
    end_offset: int
    gap_start_offset: int


class LockTimer:
    """The acquisition locks as data: a heap of (deadline, seq, state). An entry is stale, and
    skipped, once its state moved on (acknowledged, released, renewed to a new deadline, split
    into offsets) or has a change under way; rolling a change back adds the state again."""

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, InFlightState]] = []
        self._seq = itertools.count()

    def add(self, state: InFlightState) -> None:
        heapq.heappush(self._heap, (state.deadline_ms, next(self._seq), state))

    @staticmethod
    def _live(deadline: int, state: InFlightState) -> bool:
        return state.deadline_ms == deadline and state.state is ACQUIRED and not state.ongoing

    def next_deadline(self) -> int | None:
        heap = self._heap
        while heap and not self._live(heap[0][0], heap[0][2]):
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def pop_expired(self, now_ms: int) -> list[InFlightState]:
        """The states whose lock expired at now_ms, earliest first."""
        due: dict[int, InFlightState] = {}  # a state may be in the heap twice (renewed in the same ms)
        heap = self._heap
        while heap and heap[0][0] <= now_ms:
            deadline, _, state = heapq.heappop(heap)
            if self._live(deadline, state):
                due[id(state)] = state
        return list(due.values())
