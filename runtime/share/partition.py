"""SharePartition: the state of one share group on one topic partition (KIP-932), sans I/O.

It follows Kafka's SharePartition (core/.../server/share/SharePartition.java): a cache of
in-flight batches keyed by first offset, between the share-partition start offset (SPSO)
and end offset; records are acquired by one member at a time under an acquisition lock, and
acknowledged, released, rejected or renewed by their holder.

What differs is the plumbing. Nothing here waits, reads a clock or calls the share
coordinator:
- Every change that must be durable is *begun* in memory and handed back as a
  `PendingShareWrite` (the content of a WriteShareGroupState request). The caller sends it and
  then calls `commit(pending)` when the share coordinator accepted it, or `rollback(pending)`
  when it did not, which puts every touched record back as it was. Only a settled write (or a
  move of the log start offset) moves the start offset and shrinks the cache.
- Acquisition locks are deadlines kept on the records. The caller asks `next_deadline()` and
  calls `expire(now_ms)` when it is due. As in Kafka, an expiry is not undone when its write
  fails: the records are released (or archived at the delivery limit) at once, the write only
  records that. If it fails, its records ride along with every later write (as the share
  coordinator should hold them then) until one is accepted, and `unwritten_write()` makes a
  write of them alone, so that the share coordinator catches up and a reload never finds a
  delivery count that lags. A rolled-back acknowledgement keeps its old deadline, so a
  lock that ran out while the write was under way is due at once.
- Acquisition itself is not persisted, as in Kafka: after a restart the persisted state has
  every unacknowledged record AVAILABLE again.
- An acknowledgement names the delivery it is for (the acquisition id the fetch handed out),
  not only offsets: Kafka's acknowledgements name offsets, so a late acknowledgement of an
  earlier delivery would apply to a later one the same member holds.
"""
from __future__ import annotations

import bisect
import enum
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Sequence

from ..errors import Errors, KafkaError, raise_if
from ..group.configs import parse_share_auto_offset_reset
from ..messages.share import (BATCH_OPTIMIZED, NO_ACQUISITION, RECORD_LIMIT, AcknowledgementBatch, AcknowledgeType,
                              AcquiredRecords)
from ..messages.share_state import (UNINITIALIZED_START_OFFSET, ReadShareGroupStateRequest, ReadStateData,
                                    ReadStatePartitionData, WriteShareGroupStateRequest, WriteStateData,
                                    WriteStatePartitionData)
from ..messages.topics import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from .inflight import EMPTY_MEMBER_ID, TERMINAL, GapWindow, InFlightBatch, InFlightState, LockTimer
from ..share_state.records import PersisterStateBatch, RecordState

__all__ = ["SharePartition", "SharePartitionState", "PendingShareWrite", "ShareAcquiredRecords",
           "LATEST_TIMESTAMP", "EARLIEST_TIMESTAMP", "UNINITIALIZED_START_OFFSET"]

AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = (
    RecordState.AVAILABLE, RecordState.ACQUIRED, RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


DEFAULTS = {
    "group.share.partition.max.record.locks": 2000,
    "group.share.delivery.count.limit": 5,
    "group.share.record.lock.duration.ms": 30000,
    "share.auto.offset.reset": "latest",
    "share.isolation.level": "read_uncommitted",
}

# What each acknowledge type makes of an acquired record (RENEW keeps it acquired).
_ACK_TO_STATE = {
    AcknowledgeType.GAP: ARCHIVED,
    AcknowledgeType.ACCEPT: ACKNOWLEDGED,
    AcknowledgeType.RELEASE: AVAILABLE,
    AcknowledgeType.REJECT: ARCHIVED,
}
_ACK_TYPES = frozenset(int(t) for t in AcknowledgeType)


class SharePartitionState(enum.Enum):
    EMPTY = "Empty"  # created, waiting for the share coordinator's read
    ACTIVE = "Active"
    FAILED = "Failed"  # the read failed or was invalid; a new SharePartition must be made
    FENCED = "Fenced"  # a write was fenced: another leader or state epoch owns the state


_PARTITION_TRANSITIONS = {
    SharePartitionState.EMPTY: frozenset({SharePartitionState.ACTIVE, SharePartitionState.FAILED}),
    SharePartitionState.ACTIVE: frozenset({SharePartitionState.FENCED}),
    SharePartitionState.FAILED: frozenset(),
    SharePartitionState.FENCED: frozenset(),
}


@dataclass(frozen=True)
class ShareAcquiredRecords:
    """What one acquisition gave a member: the records, how many, the acquisition id that names
    this delivery of them, and when their acquisition lock runs out."""
    acquired_records: tuple[AcquiredRecords, ...] = ()
    count: int = 0
    acquisition_id: int = NO_ACQUISITION
    lock_deadline_ms: int | None = None


@dataclass(eq=False)
class PendingShareWrite:
    """A WriteShareGroupState for one share partition, begun in memory and not yet durable."""
    group_id: str
    topic_id: str
    partition: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int
    state_batches: tuple[PersisterStateBatch, ...]
    _changes: tuple[InFlightState, ...] = field(default=(), repr=False)
    _owner: Any = field(default=None, repr=False)
    _begun_at: int = field(default=0, repr=False)  # the owner's count of failed expiry writes then
    done: bool = False
    # A lock expiry: the change already stands in memory, whatever the write's fate.
    final: bool = False

    def request(self) -> WriteShareGroupStateRequest:
        partition = WriteStatePartitionData(self.partition, self.state_epoch, self.leader_epoch, self.start_offset,
                                            self.delivery_complete_count, self.state_batches)
        return WriteShareGroupStateRequest(self.group_id, (WriteStateData(self.topic_id, (partition,)),))


def _span(batch: Any) -> tuple[int, int]:
    """A fetched log batch as (base_offset, last_offset): a pair, or anything with those fields."""
    if isinstance(batch, tuple):
        return batch
    return batch.base_offset, batch.last_offset


def _persister_error(error_code: int, message: str | None) -> KafkaError:
    """A share coordinator error as the share partition reports it (Kafka's
    fetchPersisterError): a fenced epoch means another leader owns the state."""
    error = Errors.for_code(error_code)
    if error in (Errors.NOT_COORDINATOR, Errors.COORDINATOR_LOAD_IN_PROGRESS):
        error = Errors.COORDINATOR_NOT_AVAILABLE
    elif error in (Errors.FENCED_LEADER_EPOCH, Errors.FENCED_STATE_EPOCH):
        error = Errors.NOT_LEADER_OR_FOLLOWER
    return KafkaError(error, message)


class SharePartition:
    def __init__(self, group_id: str, topic_id: str, partition: int, config: dict | None = None, *,
                 leader_epoch: int = 0) -> None:
        self.group_id = group_id
        self.topic_id = topic_id
        self.partition = partition
        self.leader_epoch = leader_epoch
        # Kafka's dotted names; share.* group configs may be altered while the partition lives.
        self.config = dict(config or {})
        self.state = SharePartitionState.EMPTY
        self.state_epoch = 0
        self.start_offset = 0
        self.end_offset = 0
        self._keys: list[int] = []  # first offsets of the cached batches, ascending
        self._cache: dict[int, InFlightBatch] = {}
        self._find_next_fetch_offset = False
        self._gap_window: GapWindow | None = None
        self._locks = LockTimer()
        self._acquisitions = 0  # made by this instance; the low half of an acquisition id
        # The member epoch each live acquisition was made in, where the member said.
        self._acquisition_epochs: dict[int, int] = {}
        # Offsets whose lock expiry the share coordinator did not take: {offset: (number of the
        # failure, state, delivery count written)}. Every write carries them until one that
        # began after that failure is accepted.
        self._unwritten: dict[int, tuple[int, RecordState, int]] = {}
        self._expiry_failures = 0

    # ---- configuration ----

    def _conf(self, name: str) -> Any:
        return self.config.get(name, DEFAULTS[name])

    @property
    def max_in_flight_records(self) -> int:
        return int(self._conf("group.share.partition.max.record.locks"))

    @property
    def max_delivery_count(self) -> int:
        return int(self._conf("group.share.delivery.count.limit"))

    @property
    def record_lock_duration_ms(self) -> int:
        """The group's share.record.lock.duration.ms if set, else the broker default."""
        value = self.config.get("share.record.lock.duration.ms")
        return int(value if value is not None else self._conf("group.share.record.lock.duration.ms"))

    @property
    def read_committed(self) -> bool:
        return str(self._conf("share.isolation.level")).lower() == "read_committed"

    def reset_timestamp(self, now_ms: int) -> int:
        """The ListOffsets timestamp whose offset starts a share partition with no persisted
        state (share.auto.offset.reset): LATEST_TIMESTAMP, EARLIEST_TIMESTAMP, or for
        by_duration:<ISO-8601 duration> the time that long before now_ms."""
        try:
            strategy, back_ms = parse_share_auto_offset_reset(str(self._conf("share.auto.offset.reset")))
        except ValueError as e:
            raise KafkaError(Errors.INVALID_CONFIG, str(e)) from None
        if strategy == "latest":
            return LATEST_TIMESTAMP
        if strategy == "earliest":
            return EARLIEST_TIMESTAMP
        return now_ms - back_ms

    # ---- lifecycle ----

    def _transition(self, to: SharePartitionState) -> None:
        if to not in _PARTITION_TRANSITIONS[self.state]:
            raise KafkaError(Errors.INVALID_REQUEST, f"share partition cannot go from {self.state.name} to {to.name}")
        self.state = to

    def _require_active(self) -> None:
        if self.state is SharePartitionState.ACTIVE:
            return
        if self.state is SharePartitionState.FAILED:
            raise KafkaError(Errors.UNKNOWN_SERVER_ERROR, f"share partition {self._name()} failed to load")
        raise KafkaError(Errors.LEADER_NOT_AVAILABLE, f"share partition {self._name()} is {self.state.name.lower()}")

    def _name(self) -> str:
        return f"{self.group_id}-{self.topic_id}-{self.partition}"

    def read_request(self) -> ReadShareGroupStateRequest:
        """The share coordinator read that initialize() wants the answer of."""
        partition = ReadStatePartitionData(self.partition, self.leader_epoch)
        return ReadShareGroupStateRequest(self.group_id, (ReadStateData(self.topic_id, (partition,)),))

    def fence(self) -> None:
        """The share coordinator answered a write with a fenced epoch: stop serving."""
        self._transition(SharePartitionState.FENCED)

    def initialize(self, read_result: Any, now_ms: int, reset_offset: int | None = None) -> None:
        """Load from the share coordinator's read: `read_result` has start_offset, state_epoch,
        state_batches (PersisterStateBatch-like) and optionally error_code / error_message. A
        share partition never written to (start offset -1) starts at `reset_offset`, the offset
        the caller found for `reset_timestamp(now_ms)`."""
        if self.state is not SharePartitionState.EMPTY:
            self._require_active()
            return
        try:
            self._load(read_result, reset_offset)
        except KafkaError:
            self._transition(SharePartitionState.FAILED)
            raise
        self._transition(SharePartitionState.ACTIVE)

    def _load(self, read_result: Any, reset_offset: int | None) -> None:
        error_code = getattr(read_result, "error_code", 0)
        if error_code:
            raise _persister_error(error_code, getattr(read_result, "error_message", None))
        start = read_result.start_offset
        if start == UNINITIALIZED_START_OFFSET:
            if reset_offset is None:
                raise ValueError("no persisted state: pass the offset found for reset_timestamp(now_ms)")
            start = reset_offset
        batches = sorted(read_result.state_batches, key=lambda b: b.first_offset)
        gap_start = -1
        previous_last = start - 1
        for b in batches:
            raise_if(b.first_offset < start or b.first_offset <= previous_last or b.last_offset < b.first_offset,
                     Errors.UNKNOWN_SERVER_ERROR,
                     f"share partition {self._name()}: invalid persisted batch {tuple(b)} (start offset {start})")
            if gap_start == -1 and b.first_offset > previous_last + 1:
                gap_start = previous_last + 1
            previous_last = b.last_offset
        self.state_epoch = read_result.state_epoch
        self.start_offset = start
        for b in batches:
            # Nobody holds a record after a load: a persisted ACQUIRED is AVAILABLE again.
            state = RecordState(b.delivery_state)
            if state is ACQUIRED:
                state = AVAILABLE
            self._insert(InFlightBatch(InFlightState(b.first_offset, b.last_offset, state, b.delivery_count)))
        if self._keys:
            self._find_next_fetch_offset = True
            self.end_offset = self._cache[self._keys[-1]].last_offset
            if gap_start != -1:
                self._gap_window = GapWindow(self.end_offset, gap_start)
            self._advance_start_offset()
        else:
            self.end_offset = start

    # ---- cache helpers ----

    def _insert(self, batch: InFlightBatch) -> None:
        bisect.insort(self._keys, batch.first_offset)
        self._cache[batch.first_offset] = batch

    def _floor_index(self, offset: int) -> int:
        """Index in _keys of the last batch starting at or before offset, or -1."""
        return bisect.bisect_right(self._keys, offset) - 1

    def _batches_between(self, first: int, last: int) -> list[InFlightBatch]:
        """Cached batches whose first offset lies in [first, last]."""
        lo = bisect.bisect_left(self._keys, first)
        hi = bisect.bisect_right(self._keys, last)
        return [self._cache[k] for k in self._keys[lo:hi]]

    def _new_acquisition_id(self) -> int:
        """A delivery's name: this instance's leader epoch above the count of its acquisitions,
        so that no acquisition of any instance, before or after a reload, has the same."""
        self._acquisitions += 1
        return (self.leader_epoch << 32) | self._acquisitions

    def _lock(self, state: InFlightState, now_ms: int) -> None:
        state.deadline_ms = now_ms + self.record_lock_duration_ms
        self._locks.add(state)

    def _split(self, batch: InFlightBatch) -> None:
        for state in batch.split():
            if state.deadline_ms is not None:
                self._locks.add(state)

    def _gap_window_active(self) -> bool:
        return self._gap_window is not None and self._gap_window.end_offset == self.end_offset

    def _update_gap_window(self, offset: int) -> None:
        window = self._gap_window
        if window is None:
            return
        if window.end_offset == self.end_offset and offset <= window.end_offset:
            window.gap_start_offset = offset
        else:
            self._gap_window = None

    # ---- views ----

    @property
    def in_flight_records(self) -> int:
        return self.end_offset - self.start_offset + 1 if self._keys else 0

    def cached_batches(self) -> list[InFlightBatch]:
        return [self._cache[k] for k in self._keys]

    def record_states(self) -> dict[int, tuple[RecordState, int, str, int | None]]:
        """Every cached offset at or after the start offset: (state, delivery count, holder, lock deadline)."""
        out = {}
        for batch in self.cached_batches():
            for s in batch.states():
                for o in range(max(s.first_offset, self.start_offset), s.last_offset + 1):
                    out[o] = (s.state, s.delivery_count, s.member_id, s.deadline_ms)
        return out

    def acquisition_of(self, offset: int) -> int:
        """The acquisition id of the delivery that holds `offset`, or NO_ACQUISITION."""
        i = self._floor_index(offset)
        if i < 0 or self._cache[self._keys[i]].last_offset < offset:
            return NO_ACQUISITION
        return self._cache[self._keys[i]].state_at(offset).acquisition_id

    # ---- fetching ----

    def next_fetch_offset(self) -> int:
        """The offset the next log read for this share partition starts at: the first
        re-available record, an unfetched gap left by a restart, or the end offset + 1."""
        keys = self._keys
        fresh = not keys or self.start_offset > self._cache[keys[-1]].last_offset
        if not self._find_next_fetch_offset:
            return self.end_offset if fresh else self.end_offset + 1
        if fresh:
            self._find_next_fetch_offset = False
            return self.end_offset
        gap_active = self._gap_window_active()
        gap_start = self._gap_window.gap_start_offset if gap_active else -1
        for k in keys:
            batch = self._cache[k]
            if gap_active:
                if batch.first_offset > gap_start:
                    return gap_start
                # A gap already fetched past must not pull the fetch back (natural gaps stay).
                gap_start = max(batch.last_offset + 1, gap_start)
            for s in batch.states():
                if s.state is AVAILABLE and not s.ongoing:
                    return s.first_offset
        self._find_next_fetch_offset = False
        return self.end_offset + 1

    def can_acquire_records(self) -> bool:
        """Whether a log read could give anything to acquire (Kafka's canAcquireRecords)."""
        if self.next_fetch_offset() != self.end_offset + 1:
            return True
        return self.in_flight_records < self.max_in_flight_records

    def _acquire_limits(self, fetch_offset: int, max_records: int, last_offset: int) -> tuple[int, int]:
        """(max records, last offset) to acquire within group.share.partition.max.record.locks."""
        limit = min(max_records, self.max_in_flight_records - self.in_flight_records)
        if limit <= 0 and fetch_offset <= self.end_offset:
            # At the lock limit, only records already in flight (re-available ones) may go out.
            return min(max_records, self.end_offset - fetch_offset + 1), min(last_offset, self.end_offset)
        return limit, last_offset

    def acquire(self, member_id: str, fetched_batches: Sequence[Any], max_records: int, now_ms: int, *,
                batch_size: int | None = None, share_acquire_mode: int = BATCH_OPTIMIZED,
                fetch_offset: int | None = None, last_stable_offset: int | None = None,
                aborted: Iterable[tuple[int, int]] = (), member_epoch: int = -1) -> ShareAcquiredRecords:
        """Acquire for member_id the records of a log read: `fetched_batches` are the log
        batches read from `fetch_offset` (default next_fetch_offset()), as (base_offset,
        last_offset) pairs. In batch-optimized mode whole log batches are acquired, so
        max_records may be exceeded to keep batch boundaries, and new records are cut into
        in-flight batches of about batch_size; in record-limit mode max_records is a hard limit.
        Records delivered often go out in ever smaller groups, and a record's last delivery
        goes alone. Under share.isolation.level=read_committed the read stops before
        `last_stable_offset`, and `aborted` lists (first, last) offset ranges of aborted
        transactional batches, which are archived instead of delivered. `member_epoch` is the
        member's, if known: release_member at an older epoch leaves these records alone."""
        self._require_active()
        raise_if(not member_id, Errors.INVALID_REQUEST, "a share fetch needs a member id")
        spans = [_span(b) for b in fetched_batches]
        if self.read_committed and last_stable_offset is not None:
            spans = [(b, min(last, last_stable_offset - 1)) for b, last in spans if b < last_stable_offset]
        if max_records <= 0 or not spans:
            return ShareAcquiredRecords()
        if fetch_offset is None:
            fetch_offset = self.next_fetch_offset()
        limit, last_to_acquire = self._acquire_limits(fetch_offset, max_records, spans[-1][1])
        if limit <= 0:
            return ShareAcquiredRecords()
        record_limit = share_acquire_mode == RECORD_LIMIT
        first_base = spans[0][0]
        if fetch_offset < first_base and self._keys:
            # Nothing in the log between the fetch offset and the first batch read any more
            # (compaction): archive what the cache still has there so the start offset moves on.
            self._archive(fetch_offset, first_base - 1, AVAILABLE)
            self._find_next_fetch_offset = True
        base = first_base
        i = self._floor_index(base)
        if i < 0:
            base = max(base, self.start_offset)
        elif self._cache[self._keys[i]].last_offset >= base:
            # The read starts inside a cached batch: work on the cached batch boundaries.
            base = self._keys[i]

        acquisition_id = self._new_acquisition_id()
        if member_epoch >= 0:
            self._acquisition_epochs[acquisition_id] = member_epoch

        def new(first: int, last: int) -> None:
            nonlocal count
            got, n = self._acquire_new(member_id, acquisition_id, spans, first, last, batch_size, limit - count,
                                       record_limit, now_ms)
            result.extend(got)
            count += n

        result: list[AcquiredRecords] = []
        count = 0
        overlap = self._batches_between(base, last_to_acquire)
        if not overlap:
            new(base, last_to_acquire)
            return self._finish(member_id, acquisition_id, result, count, aborted, now_ms)
        gap_start = base
        for batch in overlap:
            if count >= limit:
                break
            if self._gap_window_active():
                if gap_start < batch.first_offset:
                    new(gap_start, batch.first_offset - 1)
                gap_start = batch.last_offset + 1
                if count >= limit:
                    break
            throttled = self._delivered_often(batch, first_base, last_to_acquire)
            if throttled and count:
                limit = count  # these records wait for a fetch of their own
                break
            whole = batch.first_offset >= first_base and batch.last_offset <= last_to_acquire
            if (throttled or not whole or batch.offset_states is not None
                    or (record_limit and batch.last_offset - batch.first_offset + 1 > limit - count)):
                if batch.offset_states is None:
                    if batch.batch_state.state is not AVAILABLE or batch.batch_state.ongoing:
                        continue
                    self._split(batch)
                n = self._acquire_offsets(member_id, acquisition_id, batch, first_base, last_to_acquire, limit - count,
                                          result, now_ms)
                count += n
                if throttled and n:
                    limit = count
                    break
                continue
            state = batch.batch_state
            if state.state is not AVAILABLE or state.ongoing:
                continue
            state.move(ACQUIRED, 1, member_id, self.max_delivery_count, acquisition_id)
            self._lock(state, now_ms)
            result.append(AcquiredRecords(batch.first_offset, batch.last_offset, state.delivery_count))
            count += batch.last_offset - batch.first_offset + 1
        if count < limit and overlap[-1].last_offset < last_to_acquire:
            new(overlap[-1].last_offset + 1, last_to_acquire)
        if result:
            self._update_gap_window(result[-1].last_offset + 1)
        return self._finish(member_id, acquisition_id, result, count, aborted, now_ms)

    def _delivered_often(self, batch: InFlightBatch, first: int, last: int) -> bool:
        """Whether available records of the batch in [first, last] have been delivered so
        often (half the delivery limit, at least 2) that they go out in smaller groups."""
        threshold = max(2, -(-self.max_delivery_count // 2))
        if batch.offset_states is None:
            s = batch.batch_state
            return s.state is AVAILABLE and not s.ongoing and s.delivery_count >= threshold
        return any(s.state is AVAILABLE and not s.ongoing and s.delivery_count >= threshold
                   for o, s in batch.offset_states.items() if first <= o <= last)

    def _acquire_offsets(self, member_id: str, acquisition_id: int, batch: InFlightBatch, first: int, last: int,
                         limit: int, result: list[AcquiredRecords], now_ms: int) -> int:
        """Acquire the available offsets of a per-offset batch within [first, last]; contiguous
        offsets with the same delivery count go out as one range. A record on its last delivery
        goes alone, so that a record that breaks its consumer does not take others with it; and
        from half the delivery limit on, each further delivery halves the group size."""
        max_count = self.max_delivery_count
        threshold = max(2, -(-max_count // 2))
        group = None
        count = 0
        for offset in range(max(batch.first_offset, first), min(batch.last_offset, last) + 1):
            if count >= limit:
                break
            state = batch.offset_states[offset]
            if state.state is not AVAILABLE or state.ongoing:
                continue
            if max_count > 2 and state.delivery_count == max_count - 1 and count:
                break
            if group is None and state.delivery_count >= threshold:
                group = max(1, len(batch.offset_states) >> (state.delivery_count - threshold + 1))
            state.move(ACQUIRED, 1, member_id, max_count, acquisition_id)
            self._lock(state, now_ms)
            prev = result[-1] if result else None
            if prev and prev.last_offset == offset - 1 and prev.delivery_count == state.delivery_count:
                result[-1] = replace(prev, last_offset=offset)
            else:
                result.append(AcquiredRecords(offset, offset, state.delivery_count))
            count += 1
            if (max_count > 2 and state.delivery_count == max_count) or count == group:
                break
        return count

    def _acquire_new(self, member_id: str, acquisition_id: int, spans: list[tuple[int, int]], first: int, last: int,
                     batch_size: int | None, limit: int, record_limit: bool,
                     now_ms: int) -> tuple[list[AcquiredRecords], int]:
        """Acquire offsets [first, last] that are not in the cache yet, as new batches of about
        batch_size records cut at log batch boundaries."""
        if not self._keys and self.end_offset > first:
            # The cache was emptied past the start of this log batch: resume at the end offset.
            first = self.end_offset
        first = max(first, spans[0][0])
        if first > last:
            return [], 0
        last_acquired = last
        if limit < last - first + 1:
            wanted = first + limit - 1
            if record_limit:
                last_acquired = wanted
            else:
                # Keep whole log batches: end with the batch holding the limit-th record.
                last_acquired = next((l for b, l in spans if b <= wanted <= l), wanted)
                if self._gap_window_active() and last_acquired > last:
                    last_acquired = last
        ranges = []
        current = first
        if batch_size and not record_limit and last_acquired - first + 1 > batch_size:
            for b, _ in spans:
                if b > last_acquired:
                    break
                if b - current >= batch_size:
                    ranges.append((current, b - 1))
                    current = b
        ranges.append((current, last_acquired))
        acquired = []
        for lo, hi in ranges:
            state = InFlightState(lo, hi, ACQUIRED, 1, member_id, acquisition_id=acquisition_id)
            self._lock(state, now_ms)
            self._insert(InFlightBatch(state))
            acquired.append(AcquiredRecords(lo, hi, 1))
        if self._keys[0] == first:
            self.start_offset = first
        if last_acquired > self.end_offset:
            self.end_offset = last_acquired
        self._update_gap_window(last_acquired + 1)
        return acquired, last_acquired - first + 1

    def _finish(self, member_id: str, acquisition_id: int, acquired: list[AcquiredRecords], count: int,
                aborted: Iterable[tuple[int, int]], now_ms: int) -> ShareAcquiredRecords:
        if not acquired:
            return ShareAcquiredRecords()
        deadline = now_ms + self.record_lock_duration_ms
        aborted = sorted(aborted)
        if not (self.read_committed and aborted):
            return ShareAcquiredRecords(tuple(acquired), count, acquisition_id, deadline)
        # Aborted transactional records are archived straight away (in memory, as Kafka does:
        # a restart re-reads and re-archives them) and never reach the consumer.
        for lo, hi in aborted:
            self._archive(lo, hi, ACQUIRED, member_id)
        kept = []
        for r in acquired:
            pieces = [(r.first_offset, r.last_offset)]
            for lo, hi in aborted:
                pieces = [p for a, b in pieces for p in ((a, min(b, lo - 1)), (max(a, hi + 1), b)) if p[0] <= p[1]]
            kept += [AcquiredRecords(a, b, r.delivery_count) for a, b in pieces]
        self._advance_start_offset()
        if not kept:
            return ShareAcquiredRecords()
        return ShareAcquiredRecords(tuple(kept), sum(r.last_offset - r.first_offset + 1 for r in kept),
                                    acquisition_id, deadline)

    # ---- acknowledging ----

    def acknowledge(self, member_id: str, batches: Sequence[AcknowledgementBatch], now_ms: int) -> PendingShareWrite:
        """Apply member_id's acknowledgements. Either every batch is valid and all of them take
        effect (RENEW at once, the rest as a pending write), or a KafkaError is raised
        (INVALID_REQUEST for a malformed batch, INVALID_RECORD_STATE for records the member
        does not hold in the delivery the batch names, or that are not in flight) and nothing
        changes."""
        self._require_active()
        plan = self._plan_acknowledgements(member_id, batches)
        changes = []
        limit = self.max_delivery_count
        for batch, offset, ack_type in plan:
            if offset is not None and batch.offset_states is None:
                self._split(batch)
            state = batch.state_at(offset) if offset is not None else batch.batch_state
            if ack_type == AcknowledgeType.RENEW:
                self._lock(state, now_ms)
            else:
                state.begin(_ACK_TO_STATE[ack_type], 0, EMPTY_MEMBER_ID, limit)
                changes.append(state)
        return self._pending(changes)

    def _plan_acknowledgements(self, member_id: str, batches: Sequence[AcknowledgementBatch]) -> list:
        """Validate everything first; returns (batch, offset or None for the whole batch, type)."""
        previous_last = None
        for b in batches:
            types = b.acknowledge_types
            raise_if(b.first_offset > b.last_offset, Errors.INVALID_REQUEST,
                     f"acknowledgement batch {b.first_offset}-{b.last_offset}: first offset after last")
            raise_if(previous_last is not None and b.first_offset <= previous_last, Errors.INVALID_REQUEST,
                     "acknowledgement batches overlap or are out of order")
            raise_if(len(types) not in (1, b.last_offset - b.first_offset + 1), Errors.INVALID_REQUEST,
                     f"acknowledgement batch {b.first_offset}-{b.last_offset} has {len(types)} acknowledge types")
            bad = [t for t in types if t not in _ACK_TYPES]
            raise_if(bool(bad), Errors.INVALID_REQUEST, f"invalid acknowledge type {bad[0] if bad else ''}")
            previous_last = b.last_offset
        plan = []
        for b in batches:
            # One type per offset, all the same, is one type for the whole batch.
            per_offset = len(set(b.acknowledge_types)) > 1
            found = self._batches_for_acknowledgement(b)
            raise_if(b.last_offset < self.start_offset and AcknowledgeType.RENEW in b.acknowledge_types,
                     Errors.INVALID_RECORD_STATE, f"offsets {b.first_offset}-{b.last_offset} are no longer acquired")
            # A batch across the start offset acknowledges what is cached from there on (what
            # lies before is settled), as in Kafka. One wholly below it is checked like any
            # other: records are cached there only while held since the log start passed them.
            floor = self.start_offset if b.last_offset >= self.start_offset else b.first_offset
            for batch in found:
                if batch.last_offset < max(b.first_offset, floor):
                    continue
                first = max(b.first_offset, batch.first_offset, floor)
                last = min(b.last_offset, batch.last_offset)
                if batch.offset_states is None:
                    self._check_holder(member_id, b.acquisition_id, batch.batch_state)
                    if (not per_offset and b.first_offset <= batch.first_offset and batch.last_offset <= b.last_offset
                            and batch.first_offset >= floor):
                        plan.append((batch, None, b.acknowledge_types[0]))
                        continue
                else:
                    for offset in range(first, last + 1):
                        self._check_holder(member_id, b.acquisition_id, batch.offset_states[offset])
                for offset in range(first, last + 1):
                    ack_type = b.acknowledge_types[offset - b.first_offset] if per_offset else b.acknowledge_types[0]
                    plan.append((batch, offset, ack_type))
        return plan

    def _check_holder(self, member_id: str, acquisition_id: int, state: InFlightState) -> None:
        where = f"offsets {state.first_offset}-{state.last_offset}"
        raise_if(state.state is not ACQUIRED, Errors.INVALID_RECORD_STATE,
                 f"{where} are {state.state.name}, not acquired")
        raise_if(state.ongoing, Errors.INVALID_RECORD_STATE, f"{where} have a state change under way")
        raise_if(state.member_id != member_id, Errors.INVALID_RECORD_STATE,
                 f"{where} are not held by member {member_id}")
        # The same member may hold the same offsets again, in a later delivery: an
        # acknowledgement of the earlier one (late, or repeated) must not apply to it.
        raise_if(state.acquisition_id != acquisition_id, Errors.INVALID_RECORD_STATE,
                 f"{where} are held in acquisition {state.acquisition_id}, not {acquisition_id}")

    def _batches_for_acknowledgement(self, b: AcknowledgementBatch) -> list[InFlightBatch]:
        i = self._floor_index(b.first_offset)
        if i < 0 and b.first_offset < self.start_offset <= b.last_offset:
            # The start offset moved into the batch: what is cached from there is acknowledged.
            i = self._floor_index(self.start_offset)
        # Kafka's "batch record not found": settled and gone from the cache, or never delivered.
        raise_if(i < 0, Errors.INVALID_RECORD_STATE,
                 f"offsets {b.first_offset}-{b.last_offset} are not in flight (start offset {self.start_offset})")
        hi = bisect.bisect_right(self._keys, b.last_offset)
        found = [self._cache[k] for k in self._keys[i:hi]]
        raise_if(found[-1].last_offset < b.first_offset, Errors.INVALID_REQUEST,
                 f"offset {b.first_offset} is past the acquired records")
        raise_if(b.last_offset > found[-1].last_offset, Errors.INVALID_REQUEST,
                 f"offset {b.last_offset} is past the acquired records")
        return found

    # ---- releasing and lock expiry ----

    def release_member(self, member_id: str, now_ms: int, member_epoch: int | None = None) -> PendingShareWrite | None:
        """A member left or was fenced (at `member_epoch`, if given): what it still holds becomes
        AVAILABLE again. As in Kafka, the delivery is given back (the records count as not
        delivered). What the same member id acquired at a newer member epoch (it joined again
        before this reached here) stays held."""
        live = {s.acquisition_id for b in self.cached_batches() for s in b.states() if s.state is ACQUIRED}
        epochs = self._acquisition_epochs = {a: e for a, e in self._acquisition_epochs.items() if a in live}
        return self._give_back(lambda s: s.member_id == member_id and (
            member_epoch is None or epochs.get(s.acquisition_id, -1) <= member_epoch))

    def release_acquisition(self, acquisition_id: int) -> PendingShareWrite | None:
        """The answer that would have handed these records out never left (its caller gave
        up on it): they are AVAILABLE again, their delivery given back."""
        return self._give_back(lambda s: s.acquisition_id == acquisition_id)

    def _give_back(self, held) -> PendingShareWrite | None:
        self._require_active()
        changes = []
        for batch in self.cached_batches():
            for s in batch.states():
                if s.state is ACQUIRED and not s.ongoing and held(s):
                    s.begin(AVAILABLE, -1, EMPTY_MEMBER_ID, self.max_delivery_count)
                    changes.append(s)
        return self._pending(changes) if changes else None

    @property
    def owes_writes(self) -> bool:
        """Lock expiries the share coordinator has not taken wait for a write."""
        return bool(self._unwritten)

    def next_deadline(self) -> int | None:
        """When the earliest acquisition lock expires, or None."""
        return self._locks.next_deadline()

    def expire(self, now_ms: int) -> PendingShareWrite | None:
        """Release every record whose acquisition lock expired at now_ms: AVAILABLE for another
        delivery, or ARCHIVED at the delivery count limit or when the log start offset passed
        it. As in Kafka (releaseAcquisitionLockOnTimeout), the release stands whether or not
        its write succeeds: the next member may take the records at once, and the holder's
        late acknowledgement is refused. The write comes back `final`."""
        if self.state is not SharePartitionState.ACTIVE:
            return None
        changes = self._locks.pop_expired(now_ms)
        if not changes:
            return None
        for state in changes:
            state.move(ARCHIVED if state.last_offset < self.start_offset else AVAILABLE, 0, EMPTY_MEMBER_ID,
                       self.max_delivery_count)
            if state.state is AVAILABLE:
                self._find_next_fetch_offset = True
        pending = self._pending(changes, final=True)
        if self._keys and self._keys[0] < self.start_offset:
            # A batch across the start offset: what lies below it is archived (Kafka splits
            # the batch first; the share coordinator drops the part below the start offset).
            self._archive(self._keys[0], self.start_offset - 1, AVAILABLE)
        # As in Kafka, the start offset moves when the write is settled, either way.
        return pending

    # ---- persisting ----

    def unwritten_write(self) -> PendingShareWrite | None:
        """A write of the lock expiries the share coordinator did not take, if any are left
        (the caller sends it when no other write has carried them for a while)."""
        if self.state is not SharePartitionState.ACTIVE:
            return None
        return self._pending([]) if self._unwritten else None

    def _pending(self, changes: list[InFlightState], final: bool = False) -> PendingShareWrite:
        entries = [(s.first_offset, s.last_offset, s.state, s.delivery_count) for s in changes]
        if self._unwritten:
            # As the share coordinator should hold them now: still cached, as they are now;
            # gone from the cache (settled, below the start offset), as the failed write had them.
            changed = {o for s in changes for o in range(s.first_offset, s.last_offset + 1)}
            for o, (_, state, count) in self._unwritten.items():
                if o in changed:
                    continue
                i = self._floor_index(o)
                if i >= 0 and self._cache[self._keys[i]].last_offset >= o:
                    state, count = self._cache[self._keys[i]].state_at(o).persisted()
                entries.append((o, o, state, count))
        # Neighbouring changes with the same outcome go out as one state batch.
        batches: list[PersisterStateBatch] = []
        run = None  # [first, last, state, count]
        for first, last, state, count in sorted(entries, key=lambda e: e[0]):
            if run and run[1] + 1 == first and run[2] == state and run[3] == count:
                run[1] = last
                continue
            if run:
                batches.append(PersisterStateBatch(run[0], run[1], int(run[2]), run[3]))
            run = [first, last, state, count]
        if run:
            batches.append(PersisterStateBatch(run[0], run[1], int(run[2]), run[3]))
        own = () if final else tuple(changes)
        return PendingShareWrite(self.group_id, self.topic_id, self.partition, self.state_epoch, self.leader_epoch,
                                 self.start_offset, self._delivery_complete_count(own), tuple(batches),
                                 own, self, final=final, _begun_at=self._expiry_failures)

    def _delivery_complete_count(self, own: tuple[InFlightState, ...]) -> int:
        """The settled records at or after the start offset that a write begun now may claim:
        those whose settling is durable, and its own changes (not another write's under way,
        which may yet be rolled back)."""
        mine = {id(s) for s in own}
        count = 0
        for batch in self.cached_batches():
            for s in batch.states():
                if s.last_offset < self.start_offset:
                    continue
                state = s.state if not s.ongoing or id(s) in mine else s.persisted()[0]
                if state in TERMINAL:
                    count += s.last_offset - max(s.first_offset, self.start_offset) + 1
        return count

    def _settle(self, pending: PendingShareWrite) -> None:
        if pending._owner is not self or pending.done:
            raise ValueError("not a pending write of this share partition, or already settled")
        pending.done = True

    def commit(self, pending: PendingShareWrite) -> None:
        """The share coordinator accepted the write: the changes stand, and so do the failed
        expiries it carried (unless one failed again since it was begun)."""
        self._settle(pending)
        if self._unwritten:
            for b in pending.state_batches:
                for o in range(b.first_offset, b.last_offset + 1):
                    if self._unwritten.get(o, (pending._begun_at + 1,))[0] <= pending._begun_at:
                        del self._unwritten[o]
        for state in pending._changes:
            state.commit()
            if state.state is AVAILABLE:
                self._find_next_fetch_offset = True
        self._advance_start_offset()

    def complete_write(self, pending: PendingShareWrite, error_code: int,
                       error_message: str | None = None) -> KafkaError | None:
        """Settle a write by the share coordinator's answer for this partition: commit on
        success; otherwise roll back and return the error to answer with. A fenced epoch means
        another leader or a re-initialisation owns the state, so this partition stops serving
        (Kafka answers NOT_LEADER_OR_FOLLOWER, and the client finds the new leader)."""
        if error_code == Errors.NONE.code:
            self.commit(pending)
            return None
        self.rollback(pending)
        error = _persister_error(error_code, error_message)
        if error.error is Errors.NOT_LEADER_OR_FOLLOWER and self.state is SharePartitionState.ACTIVE:
            self.fence()
        return error

    def rollback(self, pending: PendingShareWrite) -> None:
        """The write failed: every record it began to change is back as it was, holder and lock
        included. A lock expiry is not undone (Kafka's behaviour): its records ride along with
        the writes that follow until one is accepted."""
        self._settle(pending)
        if pending.final:
            self._expiry_failures += 1
            for b in pending.state_batches:
                for o in range(b.first_offset, b.last_offset + 1):
                    self._unwritten[o] = (self._expiry_failures, RecordState(b.delivery_state), b.delivery_count)
        for state in pending._changes:
            state.rollback()
            if state.state is ACQUIRED and state.deadline_ms is not None:
                self._locks.add(state)
            elif state.state is AVAILABLE:
                self._find_next_fetch_offset = True
        if pending.final:
            self._advance_start_offset()

    # ---- start offset ----

    def update_log_start_offset(self, log_start_offset: int) -> None:
        """The log start offset moved past the start offset (retention, deleted records): the
        available records below it are archived and the start offset becomes the log start
        offset, as in Kafka's updateCacheAndOffsets. It does not skip on past settled records
        or gaps there; that waits for the next change, and records still held below it hold
        it back until they are settled (they are archived when their lock expires or their
        member leaves). Nothing is written now; the next write carries the new start offset."""
        self._require_active()
        if log_start_offset <= self.start_offset:
            return
        self._archive(self.start_offset, log_start_offset - 1, AVAILABLE)
        self.start_offset = log_start_offset
        if self.end_offset < log_start_offset:
            self.end_offset = log_start_offset
        self._find_next_fetch_offset = True
        # The batches wholly settled below the new start offset are of no more use.
        keys, cache = self._keys, self._cache
        drop = 0
        for k in keys:
            batch = cache[k]
            if batch.last_offset >= log_start_offset or not _settled(batch):
                break
            drop += 1
        for k in keys[:drop]:
            del cache[k]
        del keys[:drop]

    def _archive(self, first: int, last: int, state: RecordState, member_id: str | None = None) -> None:
        """Archive the settled records in [first, last] that are in `state` (and held by
        member_id, if given): they left the log, or belong to an aborted transaction."""
        def wanted(s: InFlightState) -> bool:
            return s.state is state and not s.ongoing and (member_id is None or s.member_id == member_id)

        i = max(self._floor_index(first), 0)
        for batch in [self._cache[k] for k in self._keys[i:]]:
            if batch.first_offset > last:
                break
            if batch.last_offset < first:
                continue
            if batch.offset_states is None:
                if not wanted(batch.batch_state):
                    continue
                if not (first <= batch.first_offset and batch.last_offset <= last):
                    self._split(batch)
            for s in list(batch.states()):
                if first <= s.first_offset and s.last_offset <= last and wanted(s):
                    s.move(ARCHIVED, 0, EMPTY_MEMBER_ID, self.max_delivery_count)

    def _advance_start_offset(self) -> None:
        """Kafka's maybeUpdateCachedStateAndOffsets. Once the record at the start offset is
        settled (ACKNOWLEDGED or ARCHIVED, no write under way), the start offset moves past
        the settled records at the front of the cache, jumping the gaps in the log between
        batches but not the unfetched gap a restart left; the batches wholly settled before it
        leave the cache. Any record not settled there stops it, even one below the start
        offset (held since the log start offset passed it). Unlike Kafka's, the start offset
        never moves back."""
        keys, cache = self._keys, self._cache
        if keys and keys[0] < self.start_offset:
            # Released below the start offset (a member left): nobody gets them any more.
            self._archive(keys[0], self.start_offset - 1, AVAILABLE)
        if not keys or not self._can_move_start_offset():
            return
        last = self._last_offset_settled()
        if last is None:
            return
        if last == cache[keys[-1]].last_offset:
            cache.clear()
            keys.clear()
            self.start_offset = max(self.start_offset, last + 1)
            self.end_offset = self.start_offset
            return
        i = self._floor_index(last)
        batch = cache[keys[i]]
        if last == batch.last_offset:
            position = keys[i + 1]
            if self._gap_window_active():
                position = min(position, self._gap_window.gap_start_offset)
            drop = i + 1
        else:
            position = last + 1
            drop = i
        self.start_offset = max(self.start_offset, position)
        for k in keys[:drop]:
            del cache[k]
        del keys[:drop]

    def _can_move_start_offset(self) -> bool:
        """Kafka's canMoveStartOffset: the record at the start offset is settled. A start
        offset before every cached batch, or in the unfetched gap a restart left, cannot move."""
        i = self._floor_index(self.start_offset)
        if i < 0:
            return False
        batch = self._cache[self._keys[i]]
        if batch.last_offset < self.start_offset:  # between cached batches, or past them
            return not (self._gap_window_active() and self._gap_window.gap_start_offset <= self.start_offset)
        state = batch.state_at(self.start_offset)
        return not state.ongoing and state.state in TERMINAL

    def _last_offset_settled(self) -> int | None:
        """Kafka's findLastOffsetAcknowledged: the last offset of the run of settled records
        from the front of the cache, up to the unfetched gap a restart left; None if the first
        cached record is not settled."""
        gap_start = self._gap_window.gap_start_offset if self._gap_window_active() else None
        last = None
        for k in self._keys:
            batch = self._cache[k]
            if gap_start is not None and batch.last_offset >= gap_start:
                return last
            for s in batch.states():
                if s.ongoing or s.state not in TERMINAL:
                    return last
                last = s.last_offset
        return last


def _settled(batch: InFlightBatch) -> bool:
    return all(not s.ongoing and s.state in TERMINAL for s in batch.states())
