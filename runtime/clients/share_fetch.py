"""What the share consumer's background work decides about fetching and acknowledging, sans I/O
(the bookkeeping of Kafka's ShareConsumeRequestManager).

Per partition of the subscription it keeps whether a ShareFetch is under way and the offsets
acquired without a record (acknowledged as GAP with the next send). It decides which
acknowledgements ride on a fetch and which go on their own (ShareAcknowledge), builds the
requests, and turns the responses into buffered records and per-partition outcomes. The
background work sends the requests and reports what came back.

Records stay in their log batches (`ShareChunk`) until the user's thread takes them: the
network thread never decodes them, and a poll hands over a few batches' bytes rather than
one object per record. A buffered record is handed out only in the membership it was acquired in
(the member's stamp, `ShareMembershipManager.stamp`): once the group has lost the member, the
SharePartitions gave what it held back (its delivery not counted), another member may hold
the record with the same delivery count, so the book drops it unseen and unacknowledged. As in
Kafka's share consumer, a partition is not fetched while records of it wait in the buffer, so
a poll never holds two deliveries of one offset.

Every acknowledgement names the delivery it is for: the acquisition id of the fetch that
handed the record out. The SharePartition refuses one that names an earlier delivery of the
same offset (this member's fetch may have acquired it again after its lock ran out), so a
late acknowledgement never settles a later delivery.

The book counts each record's acquisition lock from the answer that brought it, with what
the SharePartition said was left of it when it answered (the answer may have waited long
after the acquisition, on a slow write of the acknowledgements the fetch carried). The lock
believed here outlasts the real one by the answer's way back at most; an acknowledgement sent
in that moment names a delivery that has ended, and the SharePartition refuses it.
An acknowledgement of a handed-out record whose lock has run out is not sent: the book
answers it INVALID_RECORD_STATE, as the SharePartition would. A record whose lock ran out
while it waited in the buffer is still handed out, as Kafka's consumer does: the user may
process it, and learns from the acknowledgement's outcome that the delivery had ended.

Acknowledgements and fetches of one partition go in order: a partition with a
ShareAcknowledge under way is not fetched until it is answered.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field, replace

from runtime.errors import Errors, KafkaError
from runtime.messages.share import (NO_ACQUISITION, AcknowledgePartition, AcknowledgeTopic, AcknowledgeType,
                                    ShareAcknowledgeRequest, ShareAcknowledgeResponse, ShareFetchRequest,
                                    ShareFetchRequestPartition, ShareFetchRequestTopic, ShareFetchResponse,
                                    name_deliveries)
from runtime.topics.data import decode_rows

from .share_acknowledgements import AckResult, acknowledgement_batches
from .types import ConsumerRecord, TopicPartition

__all__ = ["FetchPartition", "Route", "ShareChunk", "ShareFetchBook", "records_of"]


@dataclass(frozen=True, slots=True)
class ShareChunk:
    """Acquired records of one log batch: `ranges` are (first offset, last offset, delivery
    count), ascending, all inside the batch, whose entries are base_offset, base_offset + 1...
    `membership`: the member's stamp when they were acquired. `lock_deadline_ms`: when their
    acquisition lock runs out (the answer's arrival plus what it said was left of the lock), on
    the clock the book is given, or None when the SharePartition named no lock.
    `acquisition_id`: the delivery they are, which their acknowledgements name."""
    tp: TopicPartition
    base_offset: int
    payload: bytes
    ranges: tuple
    membership: int | None = None
    lock_deadline_ms: float | None = None
    acquisition_id: int = NO_ACQUISITION

    @property
    def count(self) -> int:
        return sum(last - first + 1 for first, last, _ in self.ranges)

    def split(self, n: int) -> tuple["ShareChunk", "ShareChunk"]:
        """The first n records, and the rest (0 < n < count)."""
        head, tail = [], []
        for first, last, count in self.ranges:
            take = min(max(n, 0), last - first + 1)
            if take:
                head.append((first, first + take - 1, count))
            if take <= last - first:
                tail.append((first + take, last, count))
            n -= take
        return (replace(self, ranges=tuple(head)), replace(self, ranges=tuple(tail)))

    def records(self) -> list[ConsumerRecord]:
        entries = decode_rows(self.payload, self.base_offset)
        topic, partition, base = self.tp.topic, self.tp.partition, self.base_offset
        out = []
        for first, last, count in self.ranges:
            out.extend(ConsumerRecord(topic, partition, *r, count) for r in entries[first - base:last - base + 1])
        return out


def records_of(chunks) -> list[ConsumerRecord]:
    """The records a poll hands the user, decoded where the user is."""
    return [r for chunk in chunks for r in chunk.records()]


@dataclass
class FetchPartition:
    tp: TopicPartition
    topic_id: str
    fetching: bool = False
    acknowledging: int = 0  # ShareAcknowledges under way: the partition is not fetched meanwhile
    membership: int | None = None  # the member's stamp when the fetch under way was sent
    # Acquired offsets that held no record: {offset: (GAP, acquisition id)}.
    gaps: dict[int, tuple[int, int]] = field(default_factory=dict)


def _renews(acks: dict) -> bool:
    return any(t == AcknowledgeType.RENEW for t, _ in acks.values())


def _batches(acks: dict) -> tuple:
    """{offset: (type, acquisition id)} as the acknowledgement batches of those deliveries."""
    return name_deliveries(acknowledgement_batches({o: t for o, (t, _) in acks.items()}),
                           lambda o: acks[o][1] if o in acks else NO_ACQUISITION)


@dataclass(frozen=True)
class Route:
    """Where a poll's acknowledgements go, {TopicPartition: {offset: (type, acquisition id)}} each."""
    renew: dict   # sent now on their own; the poll answers with their outcome
    alone: dict   # sent on their own (no fetch of that partition can carry them now)
    fetch: dict   # a fetch to start per partition, carrying these (possibly none)


class ShareFetchBook:
    def __init__(self, group_id: str, member_id: str, settings: dict) -> None:
        self.group_id = group_id
        self.member_id = member_id
        self.s = settings
        self.partitions: dict[TopicPartition, FetchPartition] = {}  # of the subscribed topics
        self.buffer: deque[ShareChunk] = deque()  # fetched records, not yet polled
        self.buffered = 0  # records in the buffer
        self.dropped = 0  # buffered records dropped because their membership ended
        # Handed-out records not yet acknowledged: {offset: (acquisition id, when its lock runs
        # out or None)}.
        self.held: dict[TopicPartition, dict[int, tuple[int, float | None]]] = {}
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
        for p in dropped:
            self.held.pop(p.tp, None)
        return dropped

    # ------------------------------------------------------------------ deciding

    def route(self, acks: dict, fetchable) -> Route:
        """A RENEW is answered in the poll that sends it; the rest rides on the partition's
        next fetch when one can start now, and goes alone otherwise. Every partition that can
        be fetched (`idle`) gets a fetch."""
        renew = {tp: a for tp, a in acks.items() if _renews(a)}
        idle = self.idle(fetchable)
        alone, fetch = {}, {}
        for tp, a in acks.items():
            if tp not in renew:
                (fetch if tp in idle else alone)[tp] = a
        for tp in idle:
            if tp not in renew:  # fetched once the renewal is answered
                fetch.setdefault(tp, {})
        return Route(renew, alone, fetch)

    def idle(self, fetchable) -> list[TopicPartition]:
        """The fetchable partitions with no fetch or acknowledgement under way and none of
        their records in the buffer (why: the module's note)."""
        buffered = {chunk.tp for chunk in self.buffer}
        return [tp for tp in fetchable if tp not in buffered
                and (part := self.partitions.get(tp)) is not None and not part.fetching and not part.acknowledging]

    def _with_gaps(self, part: FetchPartition, acks: dict) -> dict:
        acks = {**part.gaps, **acks}
        part.gaps = {}
        return acks

    # ------------------------------------------------------------------ ShareFetch

    def fetch_request(self, tp: TopicPartition, acks: dict, wait_ms: int, membership: int | None,
                      member_epoch: int = -1) -> tuple[ShareFetchRequest, dict]:
        """The fetch to send in `membership`, at `member_epoch` (it is now under way), and the
        acknowledgements it carries."""
        part = self.partitions[tp]
        part.fetching = True
        part.membership = membership
        acks = self._with_gaps(part, acks)
        request = ShareFetchRequest(
            self.group_id, self.member_id, max_wait_ms=min(wait_ms, self.s["fetch_max_wait_ms"]),
            min_bytes=self.s["fetch_min_bytes"], max_bytes=self.s["max_partition_fetch_bytes"],
            max_records=self.s["max_poll_records"], batch_size=self.s["max_poll_records"],
            topics=(ShareFetchRequestTopic(part.topic_id, (ShareFetchRequestPartition(
                tp.partition, _batches(acks)),)),), member_epoch=member_epoch)
        return request, acks

    def on_fetch_response(self, part: FetchPartition, acks: dict, response: ShareFetchResponse,
                          now_ms: float) -> Errors:
        """Take in a fetch's response, arrived at `now_ms` (`part` may have left the
        subscription meanwhile); the error that refused it, or NONE."""
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
        self._take(part, result, now_ms)
        return Errors.NONE

    def on_fetch_failed(self, part: FetchPartition, acks: dict, error: KafkaError) -> Errors:
        """The fetch was refused or lost: its acknowledgements failed with it."""
        part.fetching = False
        if acks:
            self.results.append(AckResult(part.tp, tuple(sorted(acks)), error))
        return error.error

    def _take(self, part: FetchPartition, result, now_ms: float) -> None:
        """Buffer the acquired records with their delivery counts; offsets acquired without a
        record (control batches, compacted offsets) are acknowledged as GAP with the next send."""
        if not result.acquired_records:
            return
        # A batch's entries are its offsets from the base on, one each (decode_rows).
        batches = sorted((b.base_offset, b.last_offset, b.records) for b in result.records or ())
        acquired = [(a.first_offset, a.last_offset, a.delivery_count) for a in result.acquired_records]
        deadline = now_ms + result.lock_remaining_ms if result.lock_remaining_ms >= 0 else None
        covered = 0
        for base, last, payload in batches:
            ranges = tuple((max(first, base), min(end, last), count) for first, end, count in acquired
                           if first <= last and end >= base)
            if ranges:
                chunk = ShareChunk(part.tp, base, payload, ranges, part.membership, deadline, result.acquisition_id)
                self.buffer.append(chunk)
                self.buffered += chunk.count
                covered += chunk.count
        if covered < sum(end - first + 1 for first, end, _ in acquired):
            held = [(b, l) for b, l, _ in batches]
            for first, end, _ in acquired:
                for offset in range(first, end + 1):
                    if not any(b <= offset <= l for b, l in held):
                        part.gaps[offset] = (AcknowledgeType.GAP, result.acquisition_id)

    # ------------------------------------------------------------------ ShareAcknowledge

    def acknowledge_request(self, part: FetchPartition, acks: dict) -> tuple[ShareAcknowledgeRequest, dict]:
        """The acknowledgement to send on its own and what it carries (for a partition
        outside the subscription, `acknowledge_refused` gives the outcome instead)."""
        acks = self._with_gaps(part, acks)
        return ShareAcknowledgeRequest(self.group_id, self.member_id, topics=(AcknowledgeTopic(
            part.topic_id, (AcknowledgePartition(part.tp.partition, _batches(acks)),)),)), acks

    @staticmethod
    def acknowledge_refused(tp: TopicPartition, acks: dict) -> AckResult:
        return AckResult(tp, tuple(sorted(acks)), KafkaError(
            Errors.UNKNOWN_TOPIC_OR_PARTITION, f"{tp} is not in the subscription"), _renews(acks))

    def acknowledge_outcome(self, tp: TopicPartition, acks: dict, response: ShareAcknowledgeResponse | KafkaError,
                            sent_ms: float) -> AckResult:
        """The response (or the error that lost it) of a ShareAcknowledge sent at `sent_ms`, as
        the partition's outcome. A renewal that held restarted the records' locks (after the
        send: counted from it, they never outlast the real ones)."""
        if isinstance(response, KafkaError):
            error = response
        elif response.error_code:  # refused as a whole
            error = _error(response.error_code, response.error_message)
        else:
            (result,) = response.responses[0].partitions
            error = _error(result.error_code, result.error_message)
        renewed = [o for o, (t, _) in acks.items() if t == AcknowledgeType.RENEW]
        held = self.held.get(tp)
        if renewed and held is not None:
            lock_ms = -1 if isinstance(response, KafkaError) else response.acquisition_lock_timeout_ms
            for offset in renewed:
                if error is None and lock_ms > 0 and offset in held:
                    held[offset] = (held[offset][0], sent_ms + lock_ms)
                else:
                    held.pop(offset, None)
        return AckResult(tp, tuple(sorted(acks)), error, bool(renewed))

    def screen(self, acks: dict, now_ms: float) -> dict:
        """The acknowledgements ({TopicPartition: {offset: type}}) worth sending at `now_ms`,
        each with the delivery it names: {TopicPartition: {offset: (type, acquisition id)}}.
        Those of handed-out records whose lock has run out are answered here instead, with
        INVALID_RECORD_STATE (their outcome joins `results`); an offset this member was not
        handed names no delivery (the SharePartition refuses it)."""
        out = {}
        for tp, a in acks.items():
            held = self.held.get(tp, {})
            named, late = {}, set()
            for offset, ack_type in a.items():
                # A RENEW keeps its record held here until its outcome is known.
                acquisition_id, deadline = (held.get(offset) if ack_type == AcknowledgeType.RENEW
                                            else held.pop(offset, None)) or (NO_ACQUISITION, None)
                if deadline is not None and now_ms >= deadline:
                    late.add(offset)
                    held.pop(offset, None)
                else:
                    named[offset] = (ack_type, acquisition_id)
            if late:
                self.results.append(AckResult(tp, tuple(sorted(late)), KafkaError(
                    Errors.INVALID_RECORD_STATE, f"the acquisition lock of {len(late)} records of {tp} ran out "
                    "before they were acknowledged"), any(a[o] == AcknowledgeType.RENEW for o in late)))
            if named:
                out[tp] = named
        return out

    # ------------------------------------------------------------------ handing out

    def has_records(self, membership: int | None) -> bool:
        """Whether a poll in `membership` would get records (those of an earlier one are dropped)."""
        while self.buffer and self._stale(self.buffer[0], membership):
            self.buffer.popleft()
        return bool(self.buffer)

    def _stale(self, chunk: ShareChunk, membership: int | None) -> bool:
        if chunk.membership != membership:
            self.buffered -= chunk.count
            self.dropped += chunk.count
            return True
        return False

    def drain(self, limit: int, membership: int | None) -> list[ShareChunk]:
        """Up to `limit` records acquired in `membership`, in the order they came (handed out:
        their deliveries and lock deadlines go into `held`)."""
        chunks = []
        while self.buffer and limit > 0:
            chunk = self.buffer.popleft()
            if self._stale(chunk, membership):
                continue
            if chunk.count > limit:
                chunk, rest = chunk.split(limit)
                self.buffer.appendleft(rest)
            chunks.append(chunk)
            limit -= chunk.count
            self.buffered -= chunk.count
            held = self.held.setdefault(chunk.tp, {})
            delivery = (chunk.acquisition_id, chunk.lock_deadline_ms)
            for first, last, _ in chunk.ranges:
                held.update(dict.fromkeys(range(first, last + 1), delivery))
        return chunks

    def clear(self) -> None:
        self.buffer.clear()
        self.buffered = 0
        self.held.clear()

    def take_results(self) -> list[AckResult]:
        results, self.results = self.results, []
        return results


def _error(code: int, message: str | None) -> KafkaError | None:
    return KafkaError(Errors.for_code(code), message) if code else None
