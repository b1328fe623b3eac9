"""The share consumer's acknowledgements (KIP-932), sans I/O.

`acknowledgement_batches` encodes per-record acknowledgements as ShareFetch and
ShareAcknowledge carry them (Kafka's Acknowledgements). `InFlightRecords` is what the user's
side decides (Kafka's ShareFetch and ShareInFlightBatch): which records of the last poll are
still in hand, which acknowledgements wait to be sent, what implicit mode accepts, and which
renewed records the next poll hands out again. The facade and its background work only carry
them to the SharePartitions and back.
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import groupby
from typing import Iterable, Mapping

from runtime.errors import Errors, KafkaError
from runtime.messages.share import AcknowledgementBatch, AcknowledgeType

from .types import ConsumerRecord, TopicPartition

__all__ = ["MAX_RECORDS_WITH_SAME_ACKNOWLEDGE_TYPE", "acknowledgement_batches", "user_ack_type", "AckResult",
           "commit_outcome", "InFlightRecords"]

# A run of more records than this with one type goes in a batch of its own, with the type once
# (Kafka's client does the same); shorter runs stay in a batch with one type per offset.
MAX_RECORDS_WITH_SAME_ACKNOWLEDGE_TYPE = 10

# The acknowledge types a user may give (GAP is the client's own, for offsets with no record).
_USER_TYPES = frozenset({AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT,
                         AcknowledgeType.RENEW})


def acknowledgement_batches(acks: Mapping[int, int]) -> tuple[AcknowledgementBatch, ...]:
    """{offset: type} as acknowledgement batches: a gap in the offsets starts a new batch; a
    batch whose types all agree names its type once."""
    offsets = sorted(acks)
    types = [int(acks[o]) for o in offsets]
    out: list[AcknowledgementBatch] = []
    start = 0
    for i in range(1, len(offsets) + 1):
        if i == len(offsets) or offsets[i] != offsets[i - 1] + 1:
            _split(offsets[start], types[start:i], out)
            start = i
    return tuple(out)


def _split(first: int, types: list[int], out: list) -> None:
    """A contiguous run from `first`, with each streak of one type longer than the limit in a
    batch of its own."""
    streaks = [(t, len(list(g))) for t, g in groupby(types)]
    if len(streaks) == 1:
        out.append(AcknowledgementBatch(first, first + len(types) - 1, (types[0],)))
        return
    pending = 0  # index in `types` of the first offset not yet in a batch
    i = 0
    for t, n in streaks:
        if n > MAX_RECORDS_WITH_SAME_ACKNOWLEDGE_TYPE:
            if pending < i:
                out.append(_batch(first + pending, types[pending:i]))
            out.append(AcknowledgementBatch(first + i, first + i + n - 1, (t,)))
            pending = i + n
        i += n
    if pending < len(types):
        out.append(_batch(first + pending, types[pending:]))


def _batch(first: int, types: list[int]) -> AcknowledgementBatch:
    return AcknowledgementBatch(first, first + len(types) - 1,
                                (types[0],) if len(set(types)) == 1 else tuple(types))


def user_ack_type(ack_type) -> AcknowledgeType:
    """The user's acknowledge type, or INVALID_REQUEST (GAP and unknown values are refused)."""
    if type(ack_type) is AcknowledgeType and ack_type in _USER_TYPES:
        return ack_type  # called for every record a poll hands out: no enum lookup
    try:
        t = AcknowledgeType(ack_type)
    except ValueError:
        t = None
    if t not in _USER_TYPES:
        raise KafkaError(Errors.INVALID_REQUEST, f"invalid acknowledge type {ack_type!r}")
    return t


@dataclass(frozen=True)
class AckResult:
    """The outcome of the acknowledgements sent for one partition."""
    partition: TopicPartition
    offsets: tuple[int, ...]
    error: KafkaError | None
    renewed: bool = False  # the acknowledgements held a RENEW


def commit_outcome(results: Iterable[AckResult]) -> dict[TopicPartition, KafkaError | None]:
    """commit_sync's answer: per partition, the first error of its sends, or None."""
    out: dict = {}
    for r in results:
        if out.get(r.partition) is None:
            out[r.partition] = r.error
    return out


class InFlightRecords:
    """The records of the last poll and what the user said about them."""

    def __init__(self, explicit: bool) -> None:
        self.explicit = explicit
        self.in_hand: dict[tuple, ConsumerRecord] = {}  # delivered by the last poll, not acknowledged
        self.acks: dict[TopicPartition, dict[int, int]] = {}  # waiting to be sent
        self.renewing: dict[tuple, ConsumerRecord] = {}  # sent as RENEW, outcome not heard yet
        self.again: list[ConsumerRecord] = []  # renewed: the next poll returns them again

    def acknowledge(self, record: ConsumerRecord, ack_type=AcknowledgeType.ACCEPT) -> None:
        """A record of the last poll; anything else is INVALID_RECORD_STATE."""
        ack_type = user_ack_type(ack_type)
        key = (record.topic, record.partition, record.offset)
        held = self.in_hand.pop(key, None)
        if held is None:
            done = record.offset in self.acks.get(key[:2], {})
            raise KafkaError(Errors.INVALID_RECORD_STATE,
                             f"{record.topic}-{record.partition}@{record.offset} was "
                             + ("already acknowledged" if done else "not delivered by the last poll"))
        self._queue(key, held, ack_type)

    def acknowledge_offset(self, topic: str, partition: int, offset: int, ack_type) -> None:
        """By coordinates: an offset not in hand is still sent, for the SharePartition to judge."""
        ack_type = user_ack_type(ack_type)
        key = (topic, partition, offset)
        self._queue(key, self.in_hand.pop(key, None), ack_type)

    def _queue(self, key: tuple, record: ConsumerRecord | None, ack_type: AcknowledgeType) -> None:
        """The offset at `key` acknowledged as ack_type; `record` is what was in hand there
        (None: nothing, and a RENEW has no record to hand out again)."""
        # A plain (topic, partition) finds its TopicPartition key (a named tuple hashes and
        # compares as one); a new TopicPartition only for a partition's first record.
        tp = key[:2]
        acks = self.acks.get(tp)
        if acks is None:
            acks = self.acks[TopicPartition(*tp)] = {}
        acks[key[2]] = ack_type
        if ack_type is AcknowledgeType.RENEW and record is not None:
            self.renewing[key] = record

    def raise_if_unacknowledged(self) -> None:
        """Explicit mode: every record of a poll is acknowledged before the next poll."""
        if self.explicit and self.in_hand:
            raise KafkaError(Errors.INVALID_RECORD_STATE,
                             f"{len(self.in_hand)} records of the last poll are not acknowledged "
                             "(share_acknowledgement_mode=explicit)")

    def take(self) -> dict[TopicPartition, dict[int, int]]:
        """The acknowledgements to send now; implicit mode accepts what is still in hand."""
        if not self.explicit:
            for key, record in self.in_hand.items():
                self._queue(key, record, AcknowledgeType.ACCEPT)
            self.in_hand = {}
        acks, self.acks = self.acks, {}
        return acks

    def settle(self, results: Iterable[AckResult]) -> None:
        """Outcomes heard: a renewal that held comes back with the next poll."""
        for result in results:
            if not result.renewed:
                continue
            tp = result.partition
            for offset in result.offsets:
                record = self.renewing.pop((tp.topic, tp.partition, offset), None)
                if record is not None and result.error is None:
                    self.again.append(record)

    def deliver(self, records: list[ConsumerRecord]) -> list[ConsumerRecord]:
        """What a poll hands out (renewed records first); these are now in hand. A renewed
        record whose lock ran out before this poll and that this member's fetch acquired
        again comes once, as the new delivery: the renewed copy is stale."""
        out = records
        if self.again:
            delivered = {(r.topic, r.partition, r.offset) for r in records}
            out = [r for r in self.again if (r.topic, r.partition, r.offset) not in delivered] + records
            self.again = []
        self.in_hand = {(r.topic, r.partition, r.offset): r for r in out}
        return out
