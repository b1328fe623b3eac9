"""The producer's batches and their sequence numbers, sans I/O (Kafka's RecordAccumulator,
with the Sender's retry decisions and the per-partition sequences Kafka keeps in its
TransactionManager).

Records go into their partition's open batch. A batch is sealed when it is full or has
waited ``linger_ms``, queued behind its partition's earlier batches, and drained for sending
in order, at most ``max_in_flight`` per partition. With idempotence a batch gets its producer
id, epoch and base sequence when it is first drained and keeps them on every retry, so the
leader recognises a retried batch as the one it already has. Times come in as arguments
(milliseconds of a monotonic clock); the caller does the sends and reports each answer to
`on_response`, which says whether the batch is done, failed, or queued again.

Ray may deliver one caller's calls to an actor out of order. A batch that overtook an
unacknowledged one of its partition and was refused OUT_OF_ORDER_SEQUENCE_NUMBER goes again
at once, behind it. A leader accepts any first sequence from a producer it does not know, so
until a partition's first batch is acknowledged the next one waits (except where every
transaction starts at sequence 0, transactions version 2).
"""
from __future__ import annotations

import enum
import itertools
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable

from runtime.errors import Errors, KafkaError
from runtime.topics.producer_state import increment_sequence

__all__ = ["ProducerBatch", "Outcome", "RecordAccumulator", "backoff_ms"]

# Errors a batch is sent again after, besides Kafka's retriable ones: a coordinator moving
# (the producer id call) and a leader's storage failing (it restarts and reloads).
_ALSO_RETRIABLE = frozenset({Errors.COORDINATOR_NOT_AVAILABLE, Errors.KAFKA_STORAGE_ERROR})


def backoff_ms(attempts: int, initial_ms: int, max_ms: int) -> float:
    """Kafka's exponential backoff: retry.backoff.ms doubling up to retry.backoff.max.ms."""
    return min(initial_ms * (2 ** attempts), max_ms)


@dataclass(eq=False)
class ProducerBatch:
    topic: str
    partition: int
    created_ms: float
    entries: list = field(default_factory=list)
    bytes: int = 0
    max_timestamp: int = -1
    deadline_ms: float = 0.0
    attempts: int = 0
    retry_at_ms: float = 0.0
    sealed: int = -1  # the order batches were sealed in, across partitions (-1: still open)
    # Idempotence: fixed at the first drain, kept on every retry.
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int | None = None
    overtaking: bool = False  # sent while an earlier batch of its partition was unacknowledged
    result: Any = None  # the caller's handle on the batch's outcome (its records' futures)
    base_offset: int = -1  # once acknowledged
    error: KafkaError | None = None  # once failed for good

    @property
    def tp(self) -> tuple[str, int]:
        return (self.topic, self.partition)

    @property
    def is_sealed(self) -> bool:
        return self.sealed >= 0


class Outcome(enum.Enum):
    ACKNOWLEDGED = "acknowledged"  # batch.base_offset is set (-1 for an acknowledged duplicate)
    RETRY = "retry"                # queued again; it keeps its sequence
    FAILED = "failed"              # batch.error is set; nothing more is done with it


class RecordAccumulator:
    def __init__(self, *, batch_size: int = 16384, linger_ms: float = 5, max_in_flight: int = 5,
                 delivery_timeout_ms: float = 120000, retry_backoff_ms: int = 100, retry_backoff_max_ms: int = 1000,
                 idempotent: bool = False, first_batch_alone: bool = False, track_new_partitions: bool = False):
        self.batch_size = batch_size
        self.linger_ms = linger_ms
        self.max_in_flight = max(1, max_in_flight)
        self.delivery_timeout_ms = delivery_timeout_ms
        self._backoff = (retry_backoff_ms, retry_backoff_max_ms)
        self.idempotent = idempotent
        # An idempotent partition sends one batch until its first is acknowledged (see above).
        self._first_batch_alone = idempotent and first_batch_alone
        self._track_new = track_new_partitions
        self._open: dict[tuple[str, int], ProducerBatch] = {}
        self._queued: dict[tuple[str, int], deque[ProducerBatch]] = {}
        self._in_flight: dict[tuple[str, int], list[ProducerBatch]] = {}  # drained, not answered
        self._new_partitions: set[tuple[str, int]] = set()
        self._sealed_order = itertools.count()
        # Sequencing: the next sequence of each partition, the partitions with a batch
        # acknowledged since the numbering began, and the (id, epoch) they count for.
        self._next_sequence: dict[tuple[str, int], int] = {}
        self._sequence_started: set[tuple[str, int]] = set()
        self.sequences_for: tuple[int, int] | None = None

    # ------------------------------------------------------------------ the user's side

    def append(self, topic: str, partition: int, entry: bytes, timestamp: int,
               now_ms: float) -> tuple[ProducerBatch, int, bool]:
        """Add one encoded record; returns its batch, its index there, and whether the batch
        is new (the caller gives it a `result`)."""
        tp = (topic, partition)
        batch = self._open.get(tp)
        if batch is not None and batch.bytes + len(entry) > max(self.batch_size, len(entry)):
            self._seal(tp)
            batch = None
        new = batch is None
        if new:
            batch = self._open[tp] = ProducerBatch(topic, partition, now_ms)
            if self._track_new:
                self._new_partitions.add(tp)
        index = len(batch.entries)
        batch.entries.append(entry)
        batch.bytes += len(entry)
        batch.max_timestamp = max(batch.max_timestamp, timestamp)
        if batch.bytes >= self.batch_size:
            self._seal(tp)
        return batch, index, new

    def seal_all(self) -> None:
        """Close every open batch: a flush sends them without waiting for the linger."""
        for tp in list(self._open):
            self._seal(tp)

    def take_new_partitions(self) -> set[tuple[str, int]]:
        """The partitions a batch was opened for since the last call: a transaction adds them
        while the batch fills, so the round trip does not delay its send."""
        new, self._new_partitions = self._new_partitions, set()
        return new

    def has_incomplete(self) -> bool:
        """Whether a record is neither acknowledged nor failed yet."""
        return bool(self._open) or any(self._queued.values()) or any(self._in_flight.values())

    def is_idle(self) -> bool:
        return not self._open and not any(self._queued.values())

    def _seal(self, tp: tuple[str, int]) -> None:
        batch = self._open.pop(tp)
        batch.deadline_ms = batch.created_ms + self.delivery_timeout_ms
        batch.sealed = next(self._sealed_order)
        self._queued.setdefault(tp, deque()).append(batch)

    # ------------------------------------------------------------------ the sender's side

    def seal_lingered(self, now_ms: float) -> None:
        # Open batches are kept oldest first (each is added when it is started): the sender
        # looks at those whose linger is over, not at every partition.
        while self._open:
            tp, batch = next(iter(self._open.items()))
            if now_ms - batch.created_ms < self.linger_ms:
                return
            self._seal(tp)

    def next_wake_ms(self, now_ms: float) -> float | None:
        """When a linger or a retry backoff ends next (None: nothing waits for time)."""
        oldest = next(iter(self._open.values()), None)
        times = [] if oldest is None else [oldest.created_ms + self.linger_ms]
        times += [b.retry_at_ms for q in self._queued.values() for b in q]
        return min(times, default=None)

    def open_batch_could_go(self) -> bool:
        """Whether some open batch would be drained as soon as it is sealed."""
        return any(len(self._in_flight.get(tp, ())) < self._limit(tp) for tp in self._open)

    def _room(self, tp: tuple[str, int]) -> int:
        """How many more batches of the partition may go now: none while a retry of it is in
        flight (see _drain_queued)."""
        in_flight = self._in_flight.get(tp, ())
        if self.idempotent and any(b.attempts for b in in_flight):
            return 0
        return self._limit(tp) - len(in_flight)

    def _limit(self, tp: tuple[str, int]) -> int:
        if self._first_batch_alone and tp not in self._sequence_started:
            return 1
        return self.max_in_flight

    def drain(self, now_ms: float, node_of: Callable[[tuple[str, int]], Hashable] | None = None
              ) -> list[ProducerBatch]:
        """The batches to send now, in order per partition; a batch waiting for its retry
        holds back the ones behind it. They count as in flight until `on_response`.

        With `node_of` (a partition's leader, to which its batches go in one request), a
        request that goes takes along the open batches of its node's other partitions, full
        and lingered or not, as Kafka's drain does: the partitions of one node do not each
        wait out a linger of their own and make a request of their own."""
        # Only partitions with queued batches are kept in _queued: the sender's work follows
        # what is ready, not how many partitions the producer writes to.
        for tp in [tp for tp, queue in self._queued.items() if not queue]:
            del self._queued[tp]
        ready = self._drain_queued(list(self._queued), now_ms)
        if ready and node_of is not None and self._open:
            nodes = {node_of(b.tp) for b in ready}
            riders = [tp for tp in self._open if not self._queued.get(tp) and node_of(tp) in nodes
                      and self._room(tp) > 0]
            for tp in riders:
                self._seal(tp)
            ready += self._drain_queued(riders, now_ms)
        return ready

    def _drain_queued(self, partitions: list[tuple[str, int]], now_ms: float) -> list[ProducerBatch]:
        ready = []
        for tp in partitions:
            queue = self._queued[tp]
            in_flight = self._in_flight.setdefault(tp, [])
            room = self._room(tp)
            while queue and room > 0 and queue[0].retry_at_ms <= now_ms:
                batch = queue.popleft()
                in_flight.append(batch)
                ready.append(batch)
                room -= 1
                if self.idempotent and batch.attempts:
                    # A retry goes alone: the leader may have it already (its answer was
                    # lost) and knows it again only among its last five batches, so later
                    # ones must not overtake it (Kafka's ordered connection gives this).
                    break
        return ready

    def has_numbered_unacknowledged(self) -> bool:
        """Whether a batch numbered with the current producer id may still be in the air: a
        new id or epoch must wait until none is."""
        return any(b.base_sequence is not None for batches in (*self._in_flight.values(), *self._queued.values())
                   for b in batches)

    def number(self, batches: list[ProducerBatch], producer_id: int, producer_epoch: int) -> None:
        """Give drained first-time batches the producer id and their partition's next
        sequences. A new id or epoch starts every partition at 0 again."""
        if (producer_id, producer_epoch) != self.sequences_for:
            self._next_sequence.clear()
            self._sequence_started.clear()
            self.sequences_for = (producer_id, producer_epoch)
        for b in batches:
            if b.base_sequence is None:
                b.producer_id, b.producer_epoch = producer_id, producer_epoch
                b.base_sequence = self._next_sequence.get(b.tp, 0)
                self._next_sequence[b.tp] = increment_sequence(b.base_sequence, len(b.entries))

    def sending(self, batch: ProducerBatch) -> None:
        """Called as the batch goes out: note whether it overtakes an unacknowledged one."""
        batch.overtaking = self._earlier_unacknowledged(batch)

    def leader_lost(self, tp: tuple[str, int]) -> None:
        """The partition's leader died: a restarted one may have lost every batch of ours,
        so the partition sends one batch at a time again until one is acknowledged."""
        self._sequence_started.discard(tp)

    def on_response(self, batch: ProducerBatch, error: KafkaError | None, base_offset: int,
                    now_ms: float) -> Outcome:
        """Take the leader's answer for a drained batch (or the error of getting none)."""
        in_flight = self._in_flight[batch.tp]
        in_flight.remove(batch)
        if not in_flight:
            del self._in_flight[batch.tp]
        if error is None or error.error is Errors.DUPLICATE_SEQUENCE_NUMBER:
            # A duplicate is in the log already (Kafka's producer takes it as success,
            # without the offsets).
            if batch.base_sequence is not None and (batch.producer_id, batch.producer_epoch) == self.sequences_for:
                self._sequence_started.add(batch.tp)
            batch.base_offset = base_offset if error is None else -1
            return Outcome.ACKNOWLEDGED
        if self._can_retry(batch, error) and now_ms < batch.deadline_ms:
            overtook = error.error is Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
            delay = 0 if overtook else backoff_ms(batch.attempts, *self._backoff)
            batch.attempts += 1
            batch.retry_at_ms = now_ms + delay  # an overtaking batch goes again at once, behind the earlier one
            queue = self._queued.setdefault(batch.tp, deque())
            queue.append(batch)
            self._queued[batch.tp] = deque(sorted(queue, key=lambda b: b.sealed))  # in their order
            return Outcome.RETRY
        if error.error is Errors.UNKNOWN_PRODUCER_ID:
            # The leader has no state for this producer: it takes sequence 0 next (Kafka's
            # resetSequenceForPartition).
            self._next_sequence.pop(batch.tp, None)
            self._sequence_started.discard(batch.tp)
        return self.fail(batch, error)

    def fail(self, batch: ProducerBatch, error: KafkaError) -> Outcome:
        """Fail a batch for good (one that could not be prepared, or was refused)."""
        in_flight = self._in_flight.get(batch.tp, [])
        if batch in in_flight:
            in_flight.remove(batch)
        batch.error = error
        return Outcome.FAILED

    def _can_retry(self, batch: ProducerBatch, error: KafkaError) -> bool:
        if error.error is Errors.OUT_OF_ORDER_SEQUENCE_NUMBER:
            # Not a gap when the batch overtook an unacknowledged one: it goes again behind
            # it. Otherwise an earlier batch failed for good and left a gap.
            return batch.overtaking or self._earlier_unacknowledged(batch)
        return error.retriable or error.error in _ALSO_RETRIABLE

    def _earlier_unacknowledged(self, batch: ProducerBatch) -> bool:
        earlier = (*self._in_flight.get(batch.tp, ()), *self._queued.get(batch.tp, ()))
        return any(b.sealed < batch.sealed for b in earlier)
