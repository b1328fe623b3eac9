"""What the share consumer's client actor decides about fetching and acknowledging, sans I/O
(the bookkeeping of Kafka's ShareConsumeRequestManager).

Per partition of the subscription it keeps whether a ShareFetch is under way and the offsets
acquired without a record (acknowledged as GAP with the next send). It decides which
acknowledgements ride on a fetch and which go on their own (ShareAcknowledge), builds the
requests, and turns the responses into buffered records and per-partition outcomes. The
actor sends the requests and reports what came back.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from runtime.errors import Errors, KafkaError
from runtime.messages.share import (AcknowledgePartition, AcknowledgeTopic, AcknowledgeType, ShareAcknowledgeRequest,
                                    ShareAcknowledgeResponse, ShareFetchRequest, ShareFetchRequestPartition,
                                    ShareFetchRequestTopic, ShareFetchResponse)
from runtime.topics.data import decode_entries

from .share_acknowledgements import AckResult, acknowledgement_batches
from .types import ConsumerRecord, TopicPartition

__all__ = ["FetchPartition", "Route", "ShareFetchBook"]


@dataclass
class FetchPartition:
    tp: TopicPartition
    topic_id: str
    fetching: bool = False
    gaps: dict[int, int] = field(default_factory=dict)  # acquired offsets that held no record


@dataclass(frozen=True)
class Route:
    """Where a poll's acknowledgements go, {TopicPartition: {offset: type}} each."""
    renew: dict   # sent now on their own; the poll answers with their outcome
    alone: dict   # sent on their own (no fetch of that partition can carry them now)
    fetch: dict   # a fetch to start per partition, carrying these (possibly none)


class ShareFetchBook:
    def __init__(self, group_id: str, member_id: str, settings: dict) -> None:
        self.group_id = group_id
        self.member_id = member_id
        self.s = settings
        self.partitions: dict[TopicPartition, FetchPartition] = {}  # of the subscribed topics
        self.buffer: deque = deque()  # fetched records, not yet polled
        self.results: list[AckResult] = []  # outcomes not yet reported to the user
        self.lock_timeout_ms = -1

    def subscribe(self, partitions) -> list[FetchPartition]:
        """The subscribed topics' (topic, topic id, partition); the partitions dropped, whose
        SharePartitions must release what this member holds."""
        wanted = {}
        for topic, topic_id, partition in partitions:
            tp = TopicPartition(topic, partition)
            wanted[tp] = self.partitions.get(tp) or FetchPartition(tp, topic_id)
        dropped = [p for tp, p in self.partitions.items() if tp not in wanted]
        self.partitions = wanted
        return dropped

    # ------------------------------------------------------------------ deciding

    def route(self, acks: dict, fetchable) -> Route:
        """A RENEW is answered in the poll that sends it; the rest rides on the partition's
        next fetch when one can start now, and goes alone otherwise. Every fetchable partition
        without a fetch under way gets one."""
        renew = {tp: a for tp, a in acks.items() if AcknowledgeType.RENEW in a.values()}
        alone, fetch = {}, {}
        for tp, a in acks.items():
            if tp in renew:
                continue
            if self._can_fetch(tp, fetchable):
                fetch[tp] = a
            else:
                alone[tp] = a
        for tp in self.idle(fetchable):
            fetch.setdefault(tp, {})
        return Route(renew, alone, fetch)

    def idle(self, fetchable) -> list[TopicPartition]:
        """The fetchable partitions with no fetch under way."""
        return [tp for tp in fetchable if self._can_fetch(tp, fetchable)]

    def _can_fetch(self, tp: TopicPartition, fetchable) -> bool:
        part = self.partitions.get(tp)
        return part is not None and not part.fetching and tp in fetchable

    def _with_gaps(self, part: FetchPartition, acks: dict) -> dict:
        acks = {**part.gaps, **acks}
        part.gaps = {}
        return acks

    # ------------------------------------------------------------------ ShareFetch

    def fetch_request(self, tp: TopicPartition, acks: dict, wait_ms: int) -> tuple[ShareFetchRequest, dict]:
        """The fetch to send (it is now under way) and the acknowledgements it carries."""
        part = self.partitions[tp]
        part.fetching = True
        acks = self._with_gaps(part, acks)
        request = ShareFetchRequest(
            self.group_id, self.member_id, max_wait_ms=min(wait_ms, self.s["fetch_max_wait_ms"]),
            min_bytes=self.s["fetch_min_bytes"], max_bytes=self.s["max_partition_fetch_bytes"],
            max_records=self.s["max_poll_records"], batch_size=self.s["max_poll_records"],
            topics=(ShareFetchRequestTopic(part.topic_id, (ShareFetchRequestPartition(
                tp.partition, acknowledgement_batches(acks)),)),))
        return request, acks

    def on_fetch_response(self, part: FetchPartition, acks: dict, response: ShareFetchResponse) -> Errors:
        """Take in a fetch's response (`part` may have left the subscription meanwhile); the
        error that refused it, or NONE."""
        if response.error_code:
            # Refused as a whole (the group does not have this member): the acknowledgements
            # it carried were not applied.
            return self.on_fetch_failed(part, acks, KafkaError(Errors.for_code(response.error_code),
                                                               response.error_message))
        part.fetching = False
        (result,) = response.responses[0].partitions
        if acks:
            self.results.append(AckResult(part.tp, tuple(sorted(acks)), _error(
                result.acknowledge_error_code, result.acknowledge_error_message)))
        if result.error_code:
            return Errors.for_code(result.error_code)
        self.lock_timeout_ms = response.acquisition_lock_timeout_ms
        self._take(part, result)
        return Errors.NONE

    def on_fetch_failed(self, part: FetchPartition, acks: dict, error: KafkaError) -> Errors:
        """The fetch was refused or lost: its acknowledgements failed with it."""
        part.fetching = False
        if acks:
            self.results.append(AckResult(part.tp, tuple(sorted(acks)), error))
        return error.error

    def _take(self, part: FetchPartition, result) -> None:
        """Buffer the acquired records with their delivery counts; offsets acquired without a
        record (control batches, compacted offsets) are acknowledged as GAP with the next send."""
        if not result.acquired_records:
            return
        data = {}
        for batch in result.records or ():
            for r in decode_entries(batch.records, batch.base_offset):
                data[r.offset] = r
        tp = part.tp
        for acquired in result.acquired_records:
            for offset in range(acquired.first_offset, acquired.last_offset + 1):
                r = data.get(offset)
                if r is None:
                    part.gaps[offset] = AcknowledgeType.GAP
                else:
                    self.buffer.append(ConsumerRecord(tp.topic, tp.partition, offset, r.timestamp, r.key, r.value,
                                                      r.headers, acquired.delivery_count))

    # ------------------------------------------------------------------ ShareAcknowledge

    def acknowledge_request(self, part: FetchPartition, acks: dict) -> tuple[ShareAcknowledgeRequest, dict]:
        """The acknowledgement to send on its own and what it carries (for a partition
        outside the subscription, `acknowledge_refused` gives the outcome instead)."""
        acks = self._with_gaps(part, acks)
        return ShareAcknowledgeRequest(self.group_id, self.member_id, topics=(AcknowledgeTopic(
            part.topic_id, (AcknowledgePartition(part.tp.partition, acknowledgement_batches(acks)),)),)), acks

    @staticmethod
    def acknowledge_refused(tp: TopicPartition, acks: dict) -> AckResult:
        return AckResult(tp, tuple(sorted(acks)), KafkaError(
            Errors.UNKNOWN_TOPIC_OR_PARTITION, f"{tp} is not in the subscription"),
            AcknowledgeType.RENEW in acks.values())

    @staticmethod
    def acknowledge_outcome(tp: TopicPartition, acks: dict,
                            response: ShareAcknowledgeResponse | KafkaError) -> AckResult:
        """A ShareAcknowledge's response (or the error that lost it) as the partition's outcome."""
        if isinstance(response, KafkaError):
            error = response
        elif response.error_code:  # refused as a whole
            error = _error(response.error_code, response.error_message)
        else:
            (result,) = response.responses[0].partitions
            error = _error(result.error_code, result.error_message)
        return AckResult(tp, tuple(sorted(acks)), error, AcknowledgeType.RENEW in acks.values())

    # ------------------------------------------------------------------ handing out

    def drain(self, limit: int) -> list[ConsumerRecord]:
        records = []
        while self.buffer and len(records) < limit:
            records.append(self.buffer.popleft())
        return records

    def take_results(self) -> list[AckResult]:
        results, self.results = self.results, []
        return results


def _error(code: int, message: str | None) -> KafkaError | None:
    return KafkaError(Errors.for_code(code), message) if code else None
