"""A client harness for the share consumer's cores, with a manual clock and no Ray.

`ShareClientHarness` runs the real group coordinator shard (through ShardHarness, whose
clock is the harness's) and one pure SharePartition per topic partition, over an in-memory
log. `ShareMember` wires a ShareMembershipManager, a ShareFetchBook and InFlightRecords
together the way the facade and its background work do, and serves each request at once:
what the background work awaits, the harness answers synchronously.
"""
from __future__ import annotations

from typing import NamedTuple

from runtime.clients.share_acknowledgements import InFlightRecords
from runtime.clients.share_fetch import ShareFetchBook, records_of
from runtime.clients.share_membership import ShareMembershipManager
from runtime.clients.types import TopicPartition
from runtime.errors import Errors, KafkaError
from runtime.group.shard import GroupCoordinatorShard
from runtime.messages.share import (ShareAcknowledgeResponse, ShareAcknowledgeResponsePartition,
                                    ShareAcknowledgeTopicResponse, ShareFetchableTopicResponse, ShareFetchResponse,
                                    ShareFetchResponsePartition)
from runtime.messages.share_group import ShareGroupHeartbeatResponse
from runtime.messages.topics import FetchedBatch
from runtime.share.partition import SharePartition
from runtime.testing import ShardHarness
from runtime.topics.data import encode_records

G = "g"
LOCK_MS = 30_000
SETTINGS = {"fetch_max_wait_ms": 500, "fetch_min_bytes": 1, "max_partition_fetch_bytes": 1 << 20,
            "max_poll_records": 500}


class ReadResult(NamedTuple):  # a ReadShareGroupState result for a partition with no state yet
    start_offset: int
    state_epoch: int = 0
    state_batches: tuple = ()
    error_code: int = 0
    error_message: str | None = None


class ShareClientHarness:
    def __init__(self, tmp_path, topics: dict[str, int], config: dict | None = None) -> None:
        config = {"group.share.session.timeout.ms": 10_000, "group.share.heartbeat.interval.ms": 1000,
                  "group.share.record.lock.duration.ms": LOCK_MS, **(config or {})}
        self.coordinator = ShardHarness(str(tmp_path), GroupCoordinatorShard, config=config)
        self.topic_ids = {t: t.upper() for t in topics}
        self.coordinator.call(lambda s, now: s.update_topics(topics, now, self.topic_ids))
        self.by_id = {tid: t for t, tid in self.topic_ids.items()}
        self.partitions: dict[TopicPartition, SharePartition] = {}
        self.log: dict[TopicPartition, list[tuple]] = {}
        self.clients: list[ShareMember] = []
        for topic, count in topics.items():
            for p in range(count):
                tp = TopicPartition(topic, p)
                sp = SharePartition(G, self.topic_ids[topic], p, config)
                sp.initialize(ReadResult(0), self.now)
                self.partitions[tp], self.log[tp] = sp, []

    @property
    def now(self) -> int:
        return self.coordinator.clock.now_ms

    def advance(self, ms: int, step_ms: int = 1000) -> None:
        """Time passes in steps: the coordinator's timers fire, record locks expire, and the
        members heartbeat after each step, as their background work would."""
        while ms > 0:
            step = min(ms, step_ms)
            ms -= step
            self.coordinator.advance(step)
            for sp in self.partitions.values():
                pending = sp.expire(self.now)
                if pending is not None:
                    sp.commit(pending)
            for m in self.clients:
                m.heartbeat()

    def produce(self, tp: TopicPartition, *values: bytes | None) -> None:
        """Append records; None stands for an offset that holds no record a consumer sees
        (a control record, or one compacted away)."""
        self.log[tp].extend(None if v is None else (self.now, None, v, ()) for v in values)

    def members(self) -> set[str]:
        (group,) = self.coordinator.read(lambda s: s.share_group_describe([G]))
        return {m.member_id for m in group.members}

    def remove(self, member_id: str) -> None:
        """The group drops a member (as its session timeout would): its records go back."""
        from runtime.messages.share_group import ShareGroupHeartbeatRequest
        self.coordinator.call(lambda s, now: s.share_group_heartbeat(
            ShareGroupHeartbeatRequest(G, member_id, -1), now, "unused"))
        for sp in self.partitions.values():
            pending = sp.release_member(member_id, self.now)
            if pending is not None:
                sp.commit(pending)

    # ------------------------------------------------------------------ serving

    def share_group_heartbeat(self, request) -> ShareGroupHeartbeatResponse:
        """The coordinator answers; then the share-group state of newly assigned partitions is
        initialised (the share coordinator's part, done at once here)."""
        try:
            response = self.coordinator.call(
                lambda s, now: s.share_group_heartbeat(request, now, "unused", "client", "/host"))
        except KafkaError as e:
            return ShareGroupHeartbeatResponse(e.error.code, e.message)
        for p in self.coordinator.shard.pending_share_initializations():
            self.coordinator.call(lambda s, now, p=p: s.share_group_initialized(p.group_id, p.topic_id, p.partitions,
                                                                               now))
        return response

    def _partition(self, topics) -> tuple[TopicPartition, object]:
        (topic,) = topics
        (part,) = topic.partitions
        return TopicPartition(self.by_id[topic.topic_id], part.partition_index), part

    def _acknowledge(self, tp, member_id, batches) -> KafkaError | None:
        if not batches:
            return None
        sp = self.partitions[tp]
        try:
            pending = sp.acknowledge(member_id, batches, self.now)
        except KafkaError as e:
            return e
        sp.commit(pending)
        return None

    def share_fetch(self, request) -> ShareFetchResponse:
        if request.member_id not in self.members():
            return ShareFetchResponse(error_code=Errors.UNKNOWN_MEMBER_ID.code)
        tp, part = self._partition(request.topics)
        ack_error = self._acknowledge(tp, request.member_id, part.acknowledgement_batches)
        sp, data = self.partitions[tp], self.log[tp]
        start = sp.next_fetch_offset()
        got = sp.acquire(request.member_id, [(start, len(data) - 1)] if start < len(data) else [],
                         request.max_records, self.now)
        records = _batches(data, start) if got.acquired_records else ()
        result = ShareFetchResponsePartition(
            tp.partition, acknowledge_error_code=ack_error.error.code if ack_error else 0,
            records=records, acquired_records=got.acquired_records, acquisition_id=got.acquisition_id,
            lock_remaining_ms=-1 if got.lock_deadline_ms is None else got.lock_deadline_ms - self.now)
        return ShareFetchResponse(acquisition_lock_timeout_ms=sp.record_lock_duration_ms, responses=(
            ShareFetchableTopicResponse(self.topic_ids[tp.topic], (result,)),))

    def share_acknowledge(self, request) -> ShareAcknowledgeResponse:
        if request.member_id not in self.members():
            return ShareAcknowledgeResponse(error_code=Errors.UNKNOWN_MEMBER_ID.code)
        tp, part = self._partition(request.topics)
        error = self._acknowledge(tp, request.member_id, part.acknowledgement_batches)
        return ShareAcknowledgeResponse(acquisition_lock_timeout_ms=self.partitions[tp].record_lock_duration_ms,
                                        responses=(ShareAcknowledgeTopicResponse(self.topic_ids[tp.topic], (
            ShareAcknowledgeResponsePartition(tp.partition, error.error.code if error else 0),)),))


def _batches(data: list, start: int) -> tuple:
    """The log from `start` as fetched batches, one per run of offsets that hold records."""
    out, run = [], []
    for offset in range(start, len(data) + 1):
        if offset < len(data) and data[offset] is not None:
            run.append(offset)
        elif run:
            out.append(FetchedBatch(run[0], run[-1], encode_records(data[run[0]:run[-1] + 1])))
            run = []
    return tuple(out)


class ShareMember:
    """One share consumer: the cores as the actor and the facade drive them."""

    def __init__(self, harness: ShareClientHarness, member_id: str, topics=("t",), explicit: bool = True) -> None:
        self.h = harness
        self.membership = ShareMembershipManager(G, member_id)
        self.book = ShareFetchBook(G, member_id, SETTINGS)
        self.in_flight = InFlightRecords(explicit)
        self.book.subscribe([(tp.topic, harness.topic_ids[tp.topic], tp.partition)
                             for tp in harness.partitions if tp.topic in topics])
        self.membership.subscribe(topics)
        self.results: list = []
        harness.clients.append(self)

    def heartbeat(self) -> None:
        """Heartbeats until none is due at once (a join, an acknowledgement, a leave)."""
        while True:
            request = self.membership.heartbeat_request()
            if request is None:
                return
            response = self.h.share_group_heartbeat(request)
            self.membership.on_heartbeat_response(response)
            if not self.membership.heartbeat_due_now():
                return

    @property
    def fetchable(self) -> frozenset:
        return self.membership.owned & frozenset(self.book.partitions)

    def poll(self) -> list:
        """Send what the user acknowledged, fetch every fetchable partition once, hand out."""
        self.in_flight.raise_if_unacknowledged()
        route = self.book.route(self.book.screen(self.in_flight.take(), self.h.now), self.fetchable)
        for tp, acks in {**route.renew, **route.alone}.items():
            self.results.append(self._acknowledge(tp, acks))
        for tp, acks in route.fetch.items():
            stamp = self.membership.stamp()
            request, acks = self.book.fetch_request(tp, acks, 0, stamp)
            error = self.book.on_fetch_response(self.book.partitions[tp], acks, self.h.share_fetch(request), self.h.now)
            self.membership.partition_refused(error, stamp)
        self.results += self.book.take_results()
        self.in_flight.settle(self.results)
        return self.in_flight.deliver(records_of(self.book.drain(SETTINGS["max_poll_records"], self.membership.stamp())))

    def commit(self) -> list:
        for tp, acks in self.book.screen(self.in_flight.take(), self.h.now).items():
            self.results.append(self._acknowledge(tp, acks))
        self.results += self.book.take_results()
        self.in_flight.settle(self.results)
        results, self.results = self.results, []
        return results

    def _acknowledge(self, tp, acks):
        stamp = self.membership.stamp()
        part = self.book.partitions.get(tp)
        if part is None:
            return self.book.acknowledge_refused(tp, acks)
        request, acks = self.book.acknowledge_request(part, acks)
        result = self.book.acknowledge_outcome(tp, acks, self.h.share_acknowledge(request), self.h.now)
        if result.error is not None:
            self.membership.partition_refused(result.error.error, stamp)
        return result
