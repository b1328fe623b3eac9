"""A consumer's fetch positions, sans I/O: Kafka's SubscriptionState (positions, pause),
the offset reset strategy of OffsetFetcherUtils, and FetchCollector (what a fetched batch
list delivers).

Each partition has a position (the next offset `poll` hands out, what a commit stores) and
a fetch offset (where the next fetch starts; ahead of the position by what is buffered).
An epoch per partition, bumped by a seek, ties a fetch response to the position it was
asked for: a response to an older epoch is dropped. The actor owns the fetch tasks and the
calls; it asks here what to fetch and hands the responses back.
"""
from __future__ import annotations

import enum
import itertools
from collections import deque
from dataclasses import dataclass, field

from runtime.errors import Errors, KafkaError
from runtime.messages.topics import (EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, READ_COMMITTED, READ_UNCOMMITTED,
                                     FetchRequest, FetchResponse)
from runtime.topics.data import decode_rows
from runtime.topics.isolation import filter_aborted

from .types import OffsetAndMetadata, TopicPartition

__all__ = ["NoOffsetForPartitionError", "reset_timestamp", "deliverable", "FetchOutcome", "FetchResult",
           "PartitionState", "FetchPositions"]


class NoOffsetForPartitionError(Exception):
    """auto_offset_reset is "none" and these partitions have no committed offset."""

    def __init__(self, partitions) -> None:
        self.partitions = tuple(sorted(partitions))
        super().__init__(f"no committed offset and no reset policy for {list(self.partitions)}")

    def __reduce__(self):
        return (NoOffsetForPartitionError, (self.partitions,))


def reset_timestamp(policy: str, partitions) -> int:
    """The ListOffsets timestamp that `auto_offset_reset` moves `partitions` to (they have
    no committed offset, or theirs is out of range). Any policy but earliest and latest is
    Kafka's "none": the user is told, through NoOffsetForPartitionError."""
    if policy == "earliest":
        return EARLIEST_TIMESTAMP
    if policy == "latest":
        return LATEST_TIMESTAMP
    raise NoOffsetForPartitionError(partitions)


def deliverable(response: FetchResponse, fetch_offset: int, read_committed: bool) -> tuple[list, int]:
    """(records to hand out as (offset, timestamp, key, value, headers) rows, the next fetch
    offset). Control batches (transaction markers) and, for read_committed, the batches of
    aborted transactions are skipped, but the fetch offset moves past them, so they are not
    fetched again."""
    batches = response.batches
    kept = filter_aborted(batches, response.aborted_transactions) if read_committed else batches
    delivered = {id(b) for b in kept if not b.is_control}
    records = []
    for batch in batches:
        if batch.last_offset < fetch_offset:
            continue
        if id(batch) in delivered:
            rows = decode_rows(batch.records, batch.base_offset)
            # Only a batch that began before the fetch offset holds records already handed out.
            records.extend(rows if batch.base_offset >= fetch_offset else [r for r in rows if r[0] >= fetch_offset])
        fetch_offset = batch.last_offset + 1
    return records, fetch_offset


class FetchOutcome(enum.Enum):
    STALE = "stale"                  # a seek, revocation or drop came after the request: drop it
    DATA = "data"                    # buffered (possibly nothing new); fetch again
    OUT_OF_RANGE = "out_of_range"    # reset the position by the policy, then fetch again
    RETRY = "retry"                  # the leader answered an error: back off, fetch again


@dataclass(frozen=True)
class FetchResult:
    outcome: FetchOutcome
    added: int = 0
    error: Errors = Errors.NONE


@dataclass
class PartitionState:
    position: int | None = None  # the next offset poll hands out (what a commit stores)
    fetch_offset: int | None = None
    buffer: deque = field(default_factory=deque)
    paused: bool = False
    epoch: int = 0  # bumped by a seek: a fetch begun before is dropped
    fed: int = -1  # when a fetch last gave it records (FetchPositions' count), -1: never


class FetchPositions:
    """The partitions a consumer fetches (its group assignment, or its manual one)."""

    def __init__(self, settings: dict) -> None:
        self.s = settings
        self.read_committed = settings["isolation_level"] == "read_committed"
        self.parts: dict[TopicPartition, PartitionState] = {}
        self._next_drain = 0
        self._feeds = itertools.count()

    def __contains__(self, tp) -> bool:
        return tp in self.parts

    def __iter__(self):
        return iter(self.parts)

    def __len__(self) -> int:
        return len(self.parts)

    def owned(self, tp: TopicPartition) -> PartitionState:
        part = self.parts.get(tp)
        if part is None:
            raise KafkaError(Errors.INVALID_REQUEST, f"{tp} is not assigned to this consumer")
        return part

    def epoch(self, tp: TopicPartition) -> int | None:
        part = self.parts.get(tp)
        return None if part is None else part.epoch

    def add(self, tps) -> list[TopicPartition]:
        added = sorted(tp for tp in tps if tp not in self.parts)
        for tp in added:
            self.parts[tp] = PartitionState()
        return added

    def drop(self, tps) -> None:
        for tp in tps:
            self.parts.pop(tp, None)

    def seek(self, tp: TopicPartition, offset: int) -> int:
        """Move the position; what was buffered is dropped. Returns the new epoch."""
        if offset < 0:
            raise KafkaError(Errors.INVALID_REQUEST, f"cannot seek to {offset}")
        part = self.owned(tp)
        part.position = part.fetch_offset = offset
        part.buffer.clear()
        part.epoch += 1
        return part.epoch

    def pause(self, tps, paused: bool) -> None:
        for tp in tps:
            self.owned(tp)
        for tp in tps:
            self.parts[tp].paused = paused

    def paused(self) -> set:
        return {tp for tp, p in self.parts.items() if p.paused}

    # ------------------------------------------------------------------ positions

    def missing_positions(self, tps) -> list[TopicPartition]:
        return [tp for tp in tps if tp in self.parts and self.parts[tp].position is None]

    def initialize(self, committed: dict, reset_offsets: dict) -> None:
        """Positions of partitions that have none yet: the committed offset, else the reset
        one. A partition dropped, or sought, while they were looked up is left alone."""
        for tp, part in self.parts.items():
            if part.position is not None:
                continue
            om = committed.get(tp)
            offset = om.offset if om is not None else reset_offsets.get(tp)
            if offset is not None:
                part.position = part.fetch_offset = offset

    def reset(self, tp: TopicPartition, epoch: int, offset: int) -> None:
        """The policy's offset after OFFSET_OUT_OF_RANGE, unless a seek came meanwhile."""
        part = self.parts.get(tp)
        if part is not None and part.epoch == epoch:
            part.position = part.fetch_offset = offset

    def consumed(self) -> dict:
        """What a commit of everything consumed stores."""
        return {tp: OffsetAndMetadata(p.position) for tp, p in self.parts.items() if p.position is not None}

    # ------------------------------------------------------------------ fetching

    def fetch_request(self, tp: TopicPartition) -> FetchRequest | None:
        """The next fetch of `tp`; None while it is paused or its buffer is full (poll makes
        room), or it has no position yet."""
        part = self.parts.get(tp)
        if part is None or part.paused or part.fetch_offset is None or len(part.buffer) >= max(
                self.s["max_poll_records"], 1):
            return None
        return FetchRequest(tp.topic, tp.partition, part.fetch_offset, self.s["max_partition_fetch_bytes"],
                            self.s["fetch_max_wait_ms"], self.s["fetch_min_bytes"],
                            READ_COMMITTED if self.read_committed else READ_UNCOMMITTED)

    def last_fed(self, topic: str, partition: int) -> int:
        """The order of a Fetch's partitions: a fetch that fills at most its max bytes goes
        first to those that got records longest ago (Kafka's consumer moves a partition it
        got records of to the end), lest the first ones take every answer."""
        part = self.parts.get((topic, partition))
        return -1 if part is None else part.fed

    def on_fetch_response(self, tp: TopicPartition, epoch: int, response: FetchResponse) -> FetchResult:
        part = self.parts.get(tp)
        if part is None or part.epoch != epoch:
            return FetchResult(FetchOutcome.STALE)
        error = Errors.for_code(response.error_code)
        if error is Errors.OFFSET_OUT_OF_RANGE:
            return FetchResult(FetchOutcome.OUT_OF_RANGE, error=error)
        if error is not Errors.NONE:
            return FetchResult(FetchOutcome.RETRY, error=error)
        records, part.fetch_offset = deliverable(response, part.fetch_offset, self.read_committed)
        part.buffer.extend(records)
        if records:
            part.fed = next(self._feeds)
        return FetchResult(FetchOutcome.DATA, len(records))

    def drain(self, limit: int) -> dict:
        """Up to `limit` buffered records, {(topic, partition): [(offset, timestamp, key,
        value, headers)]}: plain tuples, which cross a Ray call in C where ConsumerRecords
        would each go through cloudpickle's Python hook (18 times the cost); the user's side
        makes them ConsumerRecords. Every partition gets its turn first in rotation, so a busy
        one does not starve the others."""
        out: dict[tuple[str, int], list] = {}
        order = list(self.parts.items())
        self._next_drain = (self._next_drain + 1) % max(len(order), 1)
        for tp, part in order[self._next_drain:] + order[:self._next_drain]:
            if limit <= 0:
                break
            if part.paused or not part.buffer:
                continue
            records = []
            while part.buffer and limit > 0:
                row = part.buffer.popleft()
                if row[0] < part.position:
                    continue
                records.append(row)
                part.position = row[0] + 1
                limit -= 1
            if records:
                out[(tp.topic, tp.partition)] = records
        return out
