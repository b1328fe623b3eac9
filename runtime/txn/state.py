"""The state machine of one transactional id: Kafka's TransactionState and TransactionMetadata.

`TransactionMetadata` is immutable. Each `prepare_*` method checks the move against
`VALID_PREVIOUS_STATES` (the one table of legal moves) through `_transition` and returns the
metadata the coordinator will write; nothing changes until that record is replayed. An
illegal move raises and leaves the metadata as it was.

Both of Kafka 4.x's transaction protocol versions are served. Version 1 bumps the epoch only
on InitProducerId and when a producer is fenced. Version 2 (KIP-890 part 2) also bumps it
when a transaction ends: PrepareCommit/PrepareAbort carry epoch + 1, the markers are written
with it, and when that would exhaust the epochs the Complete record moves to the next
producer id (chosen at the Prepare) at epoch 0. Version 2 may also abort with no partition
added, which is why the table lets Empty and Complete* move into PrepareAbort.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, replace

from ..errors import Errors, KafkaError
from ..logformat import NO_PRODUCER_EPOCH, NO_PRODUCER_ID
from .records import TransactionLogPartitions, TransactionLogValue

MAX_EPOCH = 32767  # Short.MAX_VALUE
TV_1 = 1  # transaction.version feature levels (Kafka's TransactionVersion); 0 behaves as 1
TV_2 = 2


class TransactionState(enum.Enum):
    # (id persisted in transaction_status, Kafka's name, may the transactional id expire here)
    EMPTY = (0, "Empty", True)
    ONGOING = (1, "Ongoing", False)
    PREPARE_COMMIT = (2, "PrepareCommit", False)
    PREPARE_ABORT = (3, "PrepareAbort", False)
    COMPLETE_COMMIT = (4, "CompleteCommit", True)
    COMPLETE_ABORT = (5, "CompleteAbort", True)
    DEAD = (6, "Dead", False)
    # Fencing a producer mid-transaction: never persisted, the abort it leads to is.
    PREPARE_EPOCH_FENCE = (7, "PrepareEpochFence", False)

    def __init__(self, state_id: int, state_name: str, expiration_allowed: bool) -> None:
        self.id = state_id
        self.state_name = state_name
        self.expiration_allowed = expiration_allowed

    @classmethod
    def from_id(cls, state_id: int) -> "TransactionState":
        return _BY_ID[state_id]

    @classmethod
    def from_name(cls, name: str) -> "TransactionState | None":
        return _BY_NAME.get(name)


_BY_ID = {s.id: s for s in TransactionState}
_BY_NAME = {s.state_name: s for s in TransactionState}

S = TransactionState
VALID_PREVIOUS_STATES: dict[TransactionState, frozenset[TransactionState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}
del S


def is_epoch_exhausted(epoch: int) -> bool:
    """Kafka keeps Short.MAX_VALUE back so that a producer can always be fenced once more."""
    return epoch >= MAX_EPOCH - 1


@dataclass(frozen=True)
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    previous_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    state: TransactionState
    topic_partitions: frozenset  # of (topic, partition)
    txn_start_timestamp: int
    txn_last_update_timestamp: int
    # Version 2: the producer id the Complete record moves to when the ending epoch bump
    # exhausts the epochs; NO_PRODUCER_ID otherwise.
    next_producer_id: int = NO_PRODUCER_ID
    client_transaction_version: int = 0  # the version the last transaction was ended with

    @classmethod
    def new(cls, transactional_id: str, producer_id: int, txn_timeout_ms: int, now_ms: int) -> "TransactionMetadata":
        """A transactional id seen for the first time: no epoch yet, nothing written yet."""
        return cls(transactional_id, producer_id, NO_PRODUCER_ID, NO_PRODUCER_EPOCH, NO_PRODUCER_EPOCH,
                   txn_timeout_ms, TransactionState.EMPTY, frozenset(), -1, now_ms)

    @property
    def supports_epoch_bump(self) -> bool:
        return self.client_transaction_version >= TV_2

    # ------------------------------------------------------------------ transitions

    def _transition(self, to: TransactionState, **changes) -> "TransactionMetadata":
        if self.state not in VALID_PREVIOUS_STATES[to]:
            raise KafkaError(Errors.INVALID_TXN_STATE,
                             f"{self.transactional_id}: {self.state.state_name} cannot move to {to.state_name}")
        if changes.get("producer_id", self.producer_id) < 0:
            raise ValueError(f"illegal producer id for {to.state_name}")
        if to is not TransactionState.DEAD and changes.get("producer_epoch", self.producer_epoch) < 0:
            raise ValueError(f"illegal producer epoch for {to.state_name}")
        return replace(self, state=to, **changes)

    def prepare_increment_producer_epoch(self, txn_timeout_ms: int, expected_epoch: int | None,
                                         now_ms: int) -> "TransactionMetadata":
        """InitProducerId on an idle transactional id: bump the epoch, fencing older producers,
        unless the request is a retry of a bump that already happened."""
        if is_epoch_exhausted(self.producer_epoch):
            raise ValueError(f"no epochs left for producer id {self.producer_id}")
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epoch, last = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            epoch, last = self.producer_epoch, self.last_producer_epoch  # a retry: same answer again
        else:
            raise KafkaError(Errors.PRODUCER_FENCED,
                             f"epoch {expected_epoch} is neither {self.producer_epoch} nor {self.last_producer_epoch}")
        return self._transition(TransactionState.EMPTY, producer_epoch=epoch, last_producer_epoch=last,
                                txn_timeout_ms=txn_timeout_ms, topic_partitions=frozenset(),
                                txn_start_timestamp=-1, txn_last_update_timestamp=now_ms)

    def prepare_producer_id_rotation(self, new_producer_id: int, txn_timeout_ms: int, now_ms: int,
                                     record_last_epoch: bool) -> "TransactionMetadata":
        """The epoch ran out: start again at epoch 0 with a fresh producer id."""
        return self._transition(TransactionState.EMPTY, producer_id=new_producer_id,
                                previous_producer_id=self.producer_id, producer_epoch=0,
                                last_producer_epoch=self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
                                txn_timeout_ms=txn_timeout_ms, topic_partitions=frozenset(),
                                txn_start_timestamp=-1, txn_last_update_timestamp=now_ms)

    def prepare_fence_producer_epoch(self, transaction_version: int, now_ms: int) -> "TransactionMetadata":
        """Fence the producer of an ongoing transaction and abort it: Ongoing → PrepareEpochFence
        (epoch + 1) → PrepareAbort, written as one PrepareAbort record. The abort takes the
        cluster's transaction version, not the client's, so under version 2 it bumps once
        more (Kafka's fencing abort). The epoch is never given to a client; its next
        InitProducerId bumps again."""
        fence = self._transition(TransactionState.PREPARE_EPOCH_FENCE,
                                 producer_epoch=min(self.producer_epoch + 1, MAX_EPOCH),
                                 last_producer_epoch=NO_PRODUCER_EPOCH)
        return fence.prepare_abort_or_commit(False, transaction_version, NO_PRODUCER_ID, now_ms)

    def prepare_add_partitions(self, partitions: frozenset, now_ms: int) -> "TransactionMetadata":
        starting = self.state in (TransactionState.EMPTY, TransactionState.COMPLETE_COMMIT,
                                  TransactionState.COMPLETE_ABORT)
        return self._transition(TransactionState.ONGOING, topic_partitions=self.topic_partitions | partitions,
                                txn_start_timestamp=now_ms if starting else self.txn_start_timestamp,
                                txn_last_update_timestamp=now_ms)

    def prepare_abort_or_commit(self, commit: bool, transaction_version: int, next_producer_id: int, now_ms: int,
                                no_partition_added: bool = False) -> "TransactionMetadata":
        """PrepareCommit or PrepareAbort. Version 2 bumps the epoch (not past Short.MAX_VALUE,
        which only an abort can meet, after a fence) and may name the next producer id."""
        to = TransactionState.PREPARE_COMMIT if commit else TransactionState.PREPARE_ABORT
        if transaction_version >= TV_2:
            epoch = self.producer_epoch if self.producer_epoch == MAX_EPOCH and not commit else self.producer_epoch + 1
            last = self.producer_epoch
        else:
            epoch, last = self.producer_epoch, self.last_producer_epoch
        if epoch > MAX_EPOCH:
            raise ValueError("ending the transaction would overflow the producer epoch")
        # Version 2 may abort with nothing added: the transaction starts now.
        return self._transition(to, producer_epoch=epoch, last_producer_epoch=last,
                                next_producer_id=next_producer_id,
                                txn_start_timestamp=now_ms if no_partition_added else self.txn_start_timestamp,
                                txn_last_update_timestamp=now_ms, client_transaction_version=transaction_version)

    def prepare_complete(self, now_ms: int) -> "TransactionMetadata":
        """CompleteCommit or CompleteAbort. Under version 2 with a next producer id the id
        rotates here, at epoch 0; last_producer_epoch keeps the last epoch the client saw."""
        to = (TransactionState.COMPLETE_COMMIT if self.state is TransactionState.PREPARE_COMMIT
              else TransactionState.COMPLETE_ABORT)
        rotated = {}
        if self.supports_epoch_bump and self.next_producer_id != NO_PRODUCER_ID:
            rotated = dict(producer_id=self.next_producer_id, previous_producer_id=self.producer_id, producer_epoch=0)
        return self._transition(to, topic_partitions=frozenset(), txn_last_update_timestamp=now_ms,
                                next_producer_id=NO_PRODUCER_ID, **rotated)

    def prepare_dead(self) -> "TransactionMetadata":
        return self._transition(TransactionState.DEAD, topic_partitions=frozenset())

    # ------------------------------------------------------------------ records

    def to_value(self) -> TransactionLogValue:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in self.topic_partitions:
            by_topic.setdefault(topic, []).append(partition)
        partitions = tuple(TransactionLogPartitions(t, tuple(sorted(ps))) for t, ps in sorted(by_topic.items()))
        return TransactionLogValue(self.producer_id, self.previous_producer_id, self.next_producer_id,
                                   self.producer_epoch, self.last_producer_epoch, self.txn_timeout_ms,
                                   self.state.id, partitions, self.txn_last_update_timestamp,
                                   self.txn_start_timestamp, self.client_transaction_version)

    @classmethod
    def from_value(cls, transactional_id: str, value: TransactionLogValue) -> "TransactionMetadata":
        partitions = frozenset((p.topic, i) for p in value.topic_partitions for i in p.partition_ids)
        return cls(transactional_id, value.producer_id, value.previous_producer_id, value.producer_epoch,
                   value.last_producer_epoch, value.transaction_timeout_ms,
                   TransactionState.from_id(value.transaction_status), partitions,
                   value.transaction_start_timestamp_ms, value.transaction_last_update_timestamp_ms,
                   value.next_producer_id, value.client_transaction_version)
