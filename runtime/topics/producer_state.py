"""Idempotence and transaction state of one topic partition, on its leader (Kafka's
ProducerStateManager, ProducerStateEntry and ProducerAppendInfo).

For every producer id the partition remembers its epoch, the offsets and sequences of its
last few batches (to recognise a retried batch), and the first offset of its ongoing
transaction. From that follow the last stable offset (read_committed fetches stop there) and
the index of aborted transactions (read_committed consumers drop their records).

Appending is split in two, so that nothing changes unless the append happens:
`validate_append` checks a batch and returns either the original offsets of a duplicate (do
not append again) or a `ProducerAppend` to pass to `apply` once the batch is in the log.
Control markers go the same way with `validate_control_marker` and `apply_control_marker`.

A transactional batch that does not continue the producer's ongoing transaction here must
carry the guard of a verification (KIP-890 part 1): the leader takes it from
`verification_guard`, asks the transaction coordinator whether the partition is in the
transaction, and appends with it. Any append or marker of the producer drops the guard, so a
verification answered after an abort marker cannot open a hanging transaction.

A finished transaction stays unstable until the high watermark passes its marker (Kafka's
unreplicated transactions), so the last stable offset never moves backwards and
read_committed never sees a transaction before its marker is durable.

The state is rebuilt from the partition's batches with `load` (their headers carry the
producer id, epoch, base sequence and the TRANSACTIONAL and CONTROL attributes), optionally on
top of a `snapshot()`, which is plain data.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Iterable, NamedTuple

from ..errors import Errors, raise_if
from ..log import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE, Batch
from .data import decode_control

__all__ = ["ProducerStateManager", "ProducerStateEntry", "BatchMetadata", "ProducerAppend", "DuplicateBatch",
           "AbortedTxn", "CompletedTxn", "VerificationState", "NUM_BATCHES_TO_RETAIN", "PRODUCER_ID_EXPIRATION_MS"]

NUM_BATCHES_TO_RETAIN = 5  # Kafka's window for recognising retried batches (max.in.flight 5)
PRODUCER_ID_EXPIRATION_MS = 86400000  # producer.id.expiration.ms
_INT_MAX = 2**31 - 1


def increment_sequence(sequence: int, increment: int) -> int:
    """Sequences wrap from Integer.MAX_VALUE to 0, as Kafka's DefaultRecordBatch."""
    if sequence > _INT_MAX - increment:
        return increment - (_INT_MAX - sequence) - 1
    return sequence + increment


def in_sequence(last_sequence: int, next_sequence: int) -> bool:
    return next_sequence == last_sequence + 1 or (next_sequence == 0 and last_sequence == _INT_MAX)


class BatchMetadata(NamedTuple):
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


class DuplicateBatch(NamedTuple):
    """A retried batch already in the log: acknowledge it with its original offsets."""
    first_offset: int
    last_offset: int


class ProducerAppend(NamedTuple):
    """A validated batch: what `apply` records once it is appended."""
    producer_id: int
    producer_epoch: int
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int
    is_transactional: bool


class AbortedTxn(NamedTuple):
    """An aborted transaction's range; records of the producer in it are not committed."""
    producer_id: int
    first_offset: int
    last_offset: int  # the abort marker's offset


class VerificationState(NamedTuple):
    """A verification under way for a producer's next transaction on this partition (Kafka's
    VerificationStateEntry): the guard its append must present, and what the batches that
    verified with it may be."""
    guard: object
    epoch: int
    lowest_sequence: int  # a later batch may not go before the lowest one that is verifying
    supports_epoch_bump: bool  # transaction version 2: a producer new here starts at sequence 0


class CompletedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


@dataclass
class ProducerStateEntry:
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    batches: list[BatchMetadata] = field(default_factory=list)  # oldest first, at most NUM_BATCHES_TO_RETAIN
    coordinator_epoch: int = -1
    current_txn_first_offset: int | None = None
    last_timestamp: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.producer_epoch:
            return None
        for b in self.batches:
            if b.first_seq == first_seq and b.last_seq == last_seq:
                return b
        return None

    def update_epoch(self, epoch: int) -> None:
        # A new epoch starts its sequences again: the old batches can no longer be retried.
        if epoch != self.producer_epoch:
            self.batches = []
            self.producer_epoch = epoch


class ProducerStateManager:
    def __init__(self) -> None:
        self.producers: dict[int, ProducerStateEntry] = {}
        # Ongoing transactions: producer id -> first offset. The oldest bounds the LSO.
        self._ongoing: dict[int, int] = {}
        self.aborted: list[AbortedTxn] = []  # in the order of their markers, so by last_offset
        self.end_offset = 0  # the state covers the log below this offset
        # Soft state, never in a snapshot: finished transactions whose marker may not be
        # durable yet, as (first offset, marker offset) in marker order; and verifications.
        self._unreplicated: list[tuple[int, int]] = []
        self._verifying: dict[int, VerificationState] = {}

    # ------------------------------------------------------------------ data batches

    def validate_append(self, producer_id: int, epoch: int, base_sequence: int, count: int,
                        is_transactional: bool, first_offset: int, timestamp: int = -1,
                        verification_guard: object | None = None) -> ProducerAppend | DuplicateBatch | None:
        """Check a produced batch that would be appended at first_offset. Returns None for a
        producer without an id (nothing to track), the original offsets of a duplicate, or
        the update to `apply` after the append; raises INVALID_PRODUCER_EPOCH for a zombie,
        OUT_OF_ORDER_SEQUENCE_NUMBER for a gap, INVALID_TXN_STATE for a plain batch inside a
        transaction or a transactional one that neither continues an ongoing transaction nor
        presents the guard of its verification."""
        if producer_id < 0:  # Kafka's hasProducerId: any negative id is no producer id
            raise_if(is_transactional, Errors.INVALID_REQUEST, "a transactional batch needs a producer id")
            return None
        raise_if(count <= 0, Errors.INVALID_RECORD, "a batch has at least one record")
        last_seq = increment_sequence(base_sequence, count - 1)
        entry = self.producers.get(producer_id)
        if entry is not None:
            duplicate = entry.find_duplicate(epoch, base_sequence, last_seq)
            if duplicate is not None:
                return DuplicateBatch(duplicate.first_offset, duplicate.last_offset)
        verification = None
        if is_transactional and not self.has_ongoing_transaction(producer_id, epoch):
            verification = self._verifying.get(producer_id)
            raise_if(verification is None or verification.guard is not verification_guard, Errors.INVALID_TXN_STATE,
                     f"producer {producer_id}'s batch is not part of an ongoing transaction")
            raise_if(base_sequence > verification.lowest_sequence, Errors.OUT_OF_ORDER_SEQUENCE_NUMBER,
                     f"sequence {base_sequence} of producer {producer_id} would go before the verifying "
                     f"{verification.lowest_sequence}")
            raise_if(verification.supports_epoch_bump and base_sequence != 0 and (entry is None or not entry.batches),
                     Errors.OUT_OF_ORDER_SEQUENCE_NUMBER,
                     f"producer {producer_id} has no batch here: its transaction starts at sequence 0")
        if entry is not None:
            self._check_epoch(entry, epoch)
            self._check_sequence(entry, epoch, base_sequence)
            raise_if(not is_transactional and entry.current_txn_first_offset is not None, Errors.INVALID_TXN_STATE,
                     f"producer {producer_id} sent a non-transactional batch inside its transaction")
        return ProducerAppend(producer_id, epoch, base_sequence, last_seq, first_offset, first_offset + count - 1,
                              timestamp, is_transactional)

    # ------------------------------------------------------------------ verification (KIP-890 part 1)

    def has_ongoing_transaction(self, producer_id: int, epoch: int) -> bool:
        entry = self.producers.get(producer_id)
        return entry is not None and entry.current_txn_first_offset is not None and entry.producer_epoch == epoch

    def verification_guard(self, producer_id: int, epoch: int, base_sequence: int,
                           supports_epoch_bump: bool) -> object | None:
        """None when a transactional batch needs no verification (it continues the producer's
        ongoing transaction here); otherwise the guard to verify with, shared by the
        producer's batches until one of them is appended."""
        if self.has_ongoing_transaction(producer_id, epoch):
            return None
        state = self._verifying.get(producer_id)
        if state is None or epoch > state.epoch:
            state = VerificationState(object(), epoch, base_sequence, supports_epoch_bump)
        elif epoch == state.epoch and base_sequence < state.lowest_sequence:
            state = state._replace(lowest_sequence=base_sequence)
        self._verifying[producer_id] = state
        return state.guard

    @staticmethod
    def _check_epoch(entry: ProducerStateEntry, epoch: int) -> None:
        raise_if(epoch < entry.producer_epoch, Errors.INVALID_PRODUCER_EPOCH,
                 f"epoch {epoch} of producer {entry.producer_id} is older than {entry.producer_epoch}")

    @staticmethod
    def _check_sequence(entry: ProducerStateEntry, epoch: int, first_seq: int) -> None:
        if epoch != entry.producer_epoch:
            raise_if(first_seq != 0 and entry.producer_epoch != NO_PRODUCER_EPOCH, Errors.OUT_OF_ORDER_SEQUENCE_NUMBER,
                     f"a new epoch {epoch} must start at sequence 0, not {first_seq}")
        else:
            # An entry without an epoch (its batches were deleted) accepts any sequence.
            raise_if(entry.producer_epoch != NO_PRODUCER_EPOCH and not in_sequence(entry.last_seq, first_seq),
                     Errors.OUT_OF_ORDER_SEQUENCE_NUMBER,
                     f"sequence {first_seq} does not follow {entry.last_seq} for producer {entry.producer_id}")

    def apply(self, append: ProducerAppend | None) -> None:
        """Record a batch that is now in the log (the result of `validate_append`)."""
        if append is None:
            return
        entry = self.producers.get(append.producer_id)
        if entry is None:
            entry = self.producers[append.producer_id] = ProducerStateEntry(append.producer_id)
        entry.update_epoch(append.producer_epoch)
        entry.batches.append(BatchMetadata(append.first_seq, append.last_seq, append.first_offset,
                                           append.last_offset, append.timestamp))
        del entry.batches[:-NUM_BATCHES_TO_RETAIN]
        entry.last_timestamp = max(entry.last_timestamp, append.timestamp)
        if append.is_transactional and entry.current_txn_first_offset is None:
            entry.current_txn_first_offset = append.first_offset
            self._ongoing[append.producer_id] = append.first_offset
        self._verifying.pop(append.producer_id, None)  # verified, or a later batch must verify again
        self.end_offset = max(self.end_offset, append.last_offset + 1)

    # ------------------------------------------------------------------ control markers

    def validate_control_marker(self, producer_id: int, epoch: int, coordinator_epoch: int = 0,
                                transaction_version: int = 1) -> None:
        """A marker from a fenced coordinator or for an older epoch must not be appended.
        Under transaction version 2 the coordinator bumped the epoch before writing the
        marker, so it must be newer than the producer's batches here; the same epoch again
        is a retried marker of a transaction already ended here (Kafka's KAFKA-19999)."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return
        raise_if(coordinator_epoch < entry.coordinator_epoch, Errors.TRANSACTION_COORDINATOR_FENCED,
                 f"coordinator epoch {coordinator_epoch} is older than {entry.coordinator_epoch}")
        if transaction_version >= 2:
            retried = epoch == entry.producer_epoch and entry.current_txn_first_offset is None
            raise_if(epoch <= entry.producer_epoch and not retried, Errors.INVALID_PRODUCER_EPOCH,
                     f"a version 2 marker's epoch {epoch} of producer {producer_id} is not above "
                     f"{entry.producer_epoch}")
        else:
            self._check_epoch(entry, epoch)

    def apply_control_marker(self, producer_id: int, epoch: int, commit: bool, marker_offset: int,
                             coordinator_epoch: int = 0, timestamp: int = -1) -> CompletedTxn | None:
        """Record a commit or abort marker now in the log at marker_offset. Returns the
        transaction it completes, or None when the producer had none here (a retried marker,
        or a partition the producer never wrote to)."""
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = self.producers[producer_id] = ProducerStateEntry(producer_id)
        completed = None
        first = self._ongoing.pop(producer_id, None)
        if first is not None:
            completed = CompletedTxn(producer_id, first, marker_offset, not commit)
            self._unreplicated.append((first, marker_offset))
            if not commit:
                self.aborted.append(AbortedTxn(producer_id, first, marker_offset))
        self._verifying.pop(producer_id, None)
        entry.update_epoch(epoch)
        entry.current_txn_first_offset = None
        entry.coordinator_epoch = max(entry.coordinator_epoch, coordinator_epoch)
        entry.last_timestamp = max(entry.last_timestamp, timestamp)
        self.end_offset = max(self.end_offset, marker_offset + 1)
        return completed

    # ------------------------------------------------------------------ read_committed

    def first_unstable_offset(self, high_watermark: int) -> int | None:
        """The first offset of the oldest transaction that is ongoing, or finished with a
        marker the high watermark has not passed yet (Kafka's firstUnstableOffset). Finished
        transactions below the high watermark are forgotten here (the high watermark only
        grows: a failed flush rebuilds the whole state)."""
        done = 0
        while done < len(self._unreplicated) and self._unreplicated[done][1] < high_watermark:
            done += 1
        del self._unreplicated[:done]
        firsts = [first for first, _ in self._unreplicated]
        if self._ongoing:
            firsts.append(min(self._ongoing.values()))
        return min(firsts) if firsts else None

    def last_stable_offset(self, high_watermark: int) -> int:
        first = self.first_unstable_offset(high_watermark)
        return high_watermark if first is None else min(first, high_watermark)

    def aborted_ranges(self, from_offset: int, upto: int) -> list[AbortedTxn]:
        """The aborted transactions that overlap [from_offset, upto): what a read_committed
        fetch of that range must filter out."""
        start = bisect.bisect_left(self.aborted, from_offset, key=lambda a: a.last_offset)
        return [a for a in self.aborted[start:] if a.first_offset < upto]

    # ------------------------------------------------------------------ housekeeping

    def remove_expired_producers(self, now_ms: int, expiration_ms: int = PRODUCER_ID_EXPIRATION_MS) -> list[int]:
        """Forget producers idle for producer.id.expiration.ms that have no open transaction."""
        expired = [pid for pid, e in self.producers.items()
                   if e.current_txn_first_offset is None and now_ms - e.last_timestamp >= expiration_ms]
        for pid in expired:
            del self.producers[pid]
        return expired

    def truncate_aborted_before(self, log_start_offset: int) -> None:
        """Retention deleted the log below log_start_offset: its aborted ranges go with it."""
        self.aborted = [a for a in self.aborted if a.last_offset >= log_start_offset]

    # ------------------------------------------------------------------ loading and snapshots

    def load_batch(self, batch: Batch) -> None:
        """Replay one batch of the partition log. The log is the truth, so nothing is checked
        (Kafka's replication origin)."""
        if batch.producer_id == NO_PRODUCER_ID:
            self.end_offset = max(self.end_offset, batch.next_offset)
            return
        if batch.is_control:
            commit, coordinator_epoch = decode_control(batch.payload)
            self.apply_control_marker(batch.producer_id, batch.producer_epoch, commit, batch.base_offset,
                                      coordinator_epoch, batch.timestamp)
            return
        self.apply(ProducerAppend(batch.producer_id, batch.producer_epoch, batch.base_sequence,
                                  increment_sequence(batch.base_sequence, batch.count - 1), batch.base_offset,
                                  batch.last_offset, batch.timestamp, batch.is_transactional))

    @classmethod
    def load(cls, batches: Iterable[Batch], snapshot: dict | None = None) -> "ProducerStateManager":
        """Rebuild from the partition's batches, starting from a snapshot if one is given
        (batches below the snapshot's end offset are skipped)."""
        manager = cls.from_snapshot(snapshot) if snapshot is not None else cls()
        for batch in batches:
            if batch.next_offset > manager.end_offset:
                manager.load_batch(batch)
        return manager

    def snapshot(self) -> dict:
        return {
            "end_offset": self.end_offset,
            "producers": [[e.producer_id, e.producer_epoch, [list(b) for b in e.batches], e.coordinator_epoch,
                           e.current_txn_first_offset, e.last_timestamp]
                          for _, e in sorted(self.producers.items())],
            "aborted": [list(a) for a in self.aborted],
        }

    @classmethod
    def from_snapshot(cls, data: dict) -> "ProducerStateManager":
        manager = cls()
        manager.end_offset = data["end_offset"]
        for pid, epoch, batches, coordinator_epoch, txn_first, last_ts in data["producers"]:
            manager.producers[pid] = ProducerStateEntry(pid, epoch, [BatchMetadata(*b) for b in batches],
                                                        coordinator_epoch, txn_first, last_ts)
            if txn_first is not None:
                manager._ongoing[pid] = txn_first
        manager.aborted = [AbortedTxn(*a) for a in data["aborted"]]
        return manager

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ProducerStateManager) and self.snapshot() == other.snapshot()
