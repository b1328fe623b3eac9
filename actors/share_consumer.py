"""The share consumer (KIP-932): confluent-kafka's ShareConsumer API, plus what it lacks, over
a client actor.

The facade (`ShareConsumer`) keeps what the user holds: the records of the last poll and the
acknowledgements made since, and sends them with the next poll or commit in one Ray call. The
client actor (`ShareConsumerActor`) keeps one share fetch in flight per partition, each
carrying that partition's acknowledgements, against the SharePartition actors, and buffers
what they return. A SharePartition that is not there (never used, gone idle, or lost with its
owner) is created again by the controller, and the call goes to the new one. Acknowledgements for a partition whose fetch is
still waiting go out on their own (ShareAcknowledge).

Until the group coordinator serves ShareGroupHeartbeat, every member fetches from every
partition of its subscription (share groups allow many members per partition); `close()`
asks each SharePartition to release what the member still holds, as a leave does in Kafka.
A SharePartition refuses a member its group no longer has (UNKNOWN_MEMBER_ID): the member
takes that as a fence, fetches nothing until it has joined again, and reports the
acknowledgements refused with it.
"""
from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable

import ray

from runtime.errors import Errors, KafkaError
from runtime.messages.consumer import LEAVE_GROUP_MEMBER_EPOCH
from runtime.messages.share import (AcknowledgementBatch, AcknowledgePartition, AcknowledgeTopic, AcknowledgeType,
                                    ShareAcknowledgeRequest, ShareFetchRequest, ShareFetchRequestPartition,
                                    ShareFetchRequestTopic)
from runtime.messages.share_group import ShareGroupHeartbeatRequest
from runtime.topics.data import decode_entries

from . import naming
from .client import ClientActor, ClientFacade
from .errors import to_kafka_error
from .retry import Backoff
from runtime.clients.types import ConsumerRecord, TopicPartition

log = logging.getLogger(__name__)

__all__ = ["ShareConsumer", "ShareConsumerActor", "AcknowledgeType", "DEFAULT_CONFIG"]

DEFAULT_CONFIG: dict = {
    "client_id": None,
    "share_acknowledgement_mode": "implicit",
    "max_poll_records": 500,
    "fetch_max_wait_ms": 500,
    "fetch_min_bytes": 1,
    "max_partition_fetch_bytes": 1048576 * 8,
    "request_timeout_ms": 30000,
    "key_deserializer": None,
    "value_deserializer": None,
}

# Errors that say the group does not have this member (any more): it joins again.
_REJOIN = frozenset({Errors.UNKNOWN_MEMBER_ID, Errors.FENCED_MEMBER_EPOCH})

# The acknowledge types a user may give (GAP is the client's own, for offsets with no record).
_USER_TYPES = frozenset({AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT,
                         AcknowledgeType.RENEW})


@dataclass(frozen=True)
class AckResult:
    """The outcome of the acknowledgements sent for one partition."""
    partition: TopicPartition
    offsets: tuple[int, ...]
    error: KafkaError | None
    renewed: bool = False  # the acknowledgements held a RENEW


@dataclass(frozen=True)
class PollResult:
    records: list
    results: list  # AckResult
    lock_timeout_ms: int


def ack_batches(acks: dict[int, int]) -> tuple[AcknowledgementBatch, ...]:
    """{offset: type} as acknowledgement batches: contiguous runs, one type when they agree."""
    out = []
    run: list[tuple[int, int]] = []
    for offset in sorted(acks):
        if run and offset != run[-1][0] + 1:
            out.append(_batch(run))
            run = []
        run.append((offset, int(acks[offset])))
    if run:
        out.append(_batch(run))
    return tuple(out)


def _batch(run: list[tuple[int, int]]) -> AcknowledgementBatch:
    types = tuple(t for _, t in run)
    return AcknowledgementBatch(run[0][0], run[-1][0], types[:1] if len(set(types)) == 1 else types)


class _Partition:
    def __init__(self, topic: str, topic_id: str, partition: int) -> None:
        self.tp = TopicPartition(topic, partition)
        self.topic_id = topic_id
        self.fetch: asyncio.Task | None = None
        self.gaps: dict[int, int] = {}  # acquired offsets that held no record: acknowledged as GAP


class ShareConsumerActor(ClientActor):
    def __init__(self, namespace: str, config: dict, client_id: str, group_id: str, member_id: str,
                 settings: dict) -> None:
        super().__init__(namespace, config, client_id)
        self.group_id = group_id
        self.member_id = member_id
        self.s = settings
        self.partitions: dict[TopicPartition, _Partition] = {}  # of the subscribed topics
        self.assigned: set[TopicPartition] = set()  # what the group coordinator assigned
        self.topics: tuple[str, ...] = ()
        self.member_epoch = 0
        self._send_subscription = False
        self._heartbeats: asyncio.Task | None = None
        self._heartbeat_wake: asyncio.Event | None = None
        self._closing = False  # no joining again: a leave is coming
        self._buffer: deque = deque()
        self._results: list[AckResult] = []
        self._arrived: asyncio.Event | None = None
        self.lock_timeout_ms = -1

    # ------------------------------------------------------------------ membership

    async def subscribe(self, topics: list[str], partitions: list[tuple[str, str, int]]) -> None:
        """Join (or change the subscription) through ShareGroupHeartbeat; `partitions` are the
        subscribed topics' (topic, topic id, partition)."""
        wanted = {}
        for topic, topic_id, partition in partitions:
            tp = TopicPartition(topic, partition)
            wanted[tp] = self.partitions.get(tp) or _Partition(topic, topic_id, partition)
        for tp in set(self.partitions) - set(wanted):
            await self._release(self.partitions[tp])
        self.partitions = wanted
        self.assigned &= set(wanted)
        self.topics = tuple(sorted(topics))
        self._send_subscription = True
        if self._heartbeats is None:
            self._heartbeat_wake = asyncio.Event()
            self._heartbeats = self._spawn(self._heartbeat_loop())
        self._heartbeat_wake.set()

    async def _heartbeat_loop(self) -> None:
        backoff = Backoff()
        while True:
            request = ShareGroupHeartbeatRequest(
                self.group_id, self.member_id, self.member_epoch,
                subscribed_topic_names=self.topics if self._send_subscription or self.member_epoch == 0 else None)
            sent_subscription = request.subscribed_topic_names is not None
            interval_s = backoff.next_s()
            try:
                response = await self._call(self.group_coordinator_name(self.group_id), "share_group_heartbeat",
                                            request, self.client_id, self.host,
                                            timeout_s=self.s["request_timeout_ms"] / 1000)
                error = Errors.for_code(response.error_code)
                if error in _REJOIN:
                    self._fenced()
                    continue
                if error is Errors.NONE:
                    backoff = Backoff()
                    if sent_subscription:
                        self._send_subscription = False
                    self.member_epoch = response.member_epoch
                    interval_s = response.heartbeat_interval_ms / 1000
                    if response.assignment is not None:
                        self._assign(response.assignment)
                else:
                    log.info("%s: share group heartbeat: %s", self.client_id, error)
            except KafkaError as e:
                log.info("%s: share group heartbeat failed: %s", self.client_id, e)
            try:
                await asyncio.wait_for(self._heartbeat_wake.wait(), interval_s)
            except asyncio.TimeoutError:
                pass
            self._heartbeat_wake.clear()

    def _fenced(self) -> None:
        """The group no longer has this member: stop fetching and join again, under the same
        member id (the heartbeat loop sends member epoch 0 next)."""
        self.member_epoch = 0
        self.assigned = set()
        if self._heartbeat_wake is not None and not self._closing:
            self._heartbeat_wake.set()

    def _assign(self, assignment) -> None:
        assigned = {TopicPartition(t.topic_name, p) for t in assignment.topic_partitions for p in t.partitions}
        self.assigned = assigned & set(self.partitions)
        if self._arrived is not None:
            self._arrived.set()

    async def _leave(self) -> None:
        if self._heartbeats is None:
            return
        self._heartbeats.cancel()
        try:
            await self._call(self.group_coordinator_name(self.group_id), "share_group_heartbeat",
                             ShareGroupHeartbeatRequest(self.group_id, self.member_id, LEAVE_GROUP_MEMBER_EPOCH),
                             timeout_s=5)
        except KafkaError as e:
            log.info("%s: leaving the share group: %s", self.client_id, e)

    def _sp_name(self, part: _Partition) -> str:
        return naming.share_partition(self.group_id, part.tp.topic, part.tp.partition)

    async def _sp_call(self, part: _Partition, method: str, *args, timeout_s: float):
        """A call to the partition's SharePartition, which the controller creates if needed."""
        async def create() -> None:
            await self._call(naming.CONTROLLER, "ensure_share_partition", self.group_id, part.tp.topic,
                             part.topic_id, part.tp.partition, timeout_s=timeout_s)
        return await self._actors.call_async(self._sp_name(part), method, *args, timeout_s=timeout_s,
                                             on_missing=create)

    # ------------------------------------------------------------------ poll and acknowledge

    async def poll(self, acks: dict, timeout_ms: int, max_records: int | None) -> PollResult:
        """Send `acks` ({TopicPartition: {offset: type}}), then return buffered or newly fetched
        records. Acknowledgements holding a RENEW are answered in this result."""
        if self._arrived is None:
            self._arrived = asyncio.Event()
        renew_parts = {tp for tp, a in acks.items() if AcknowledgeType.RENEW in a.values()}
        renewals = [self._acknowledge(tp, acks.pop(tp)) for tp in renew_parts]
        for tp, a in acks.items():
            part = self.partitions.get(tp)
            if part is None or part.fetch is not None or tp not in self.assigned:
                self._spawn(self._acknowledge_later(tp, a))
            else:
                self._start_fetch(part, a, timeout_ms)
        for tp in self.assigned:
            part = self.partitions[tp]
            if part.fetch is None:
                self._start_fetch(part, {}, timeout_ms)
        renewed = list(await asyncio.gather(*renewals))
        deadline = time.monotonic() + timeout_ms / 1000
        while not self._buffer and not renewed:
            self._arrived.clear()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            try:
                await asyncio.wait_for(self._arrived.wait(), remaining)
            except asyncio.TimeoutError:
                break
            for tp in self.assigned:
                part = self.partitions[tp]
                if part.fetch is None:
                    self._start_fetch(part, {}, max(int((deadline - time.monotonic()) * 1000), 0))
        records = []
        limit = max_records or self.s["max_poll_records"]
        while self._buffer and len(records) < limit:
            records.append(self._buffer.popleft())
        results, self._results = renewed + self._results, []
        return PollResult(records, results, self.lock_timeout_ms)

    def _start_fetch(self, part: _Partition, acks: dict, wait_ms: int) -> None:
        acks = {**part.gaps, **acks}
        part.gaps = {}
        part.fetch = self._spawn(self._fetch(part, acks, min(wait_ms, self.s["fetch_max_wait_ms"])))

    async def _fetch(self, part: _Partition, acks: dict, wait_ms: int) -> None:
        request = ShareFetchRequest(
            self.group_id, self.member_id, max_wait_ms=wait_ms, min_bytes=self.s["fetch_min_bytes"],
            max_bytes=self.s["max_partition_fetch_bytes"], max_records=self.s["max_poll_records"],
            batch_size=self.s["max_poll_records"],
            topics=(ShareFetchRequestTopic(part.topic_id, (ShareFetchRequestPartition(
                part.tp.partition, ack_batches(acks)),)),))
        try:
            response = await self._sp_call(part, "share_fetch", request,
                                        timeout_s=wait_ms / 1000 + self.s["request_timeout_ms"] / 1000)
            if response.error_code:
                # Refused as a whole (the group does not have this member): the
                # acknowledgements it carried were not applied.
                raise KafkaError(Errors.for_code(response.error_code), response.error_message)
            (result,) = response.responses[0].partitions
            if acks:
                self._results.append(AckResult(part.tp, tuple(sorted(acks)), _error(
                    result.acknowledge_error_code, result.acknowledge_error_message)))
            if result.error_code:
                log.info("%s: share fetch of %s: %s", self.client_id, part.tp, Errors.for_code(result.error_code))
                if Errors.for_code(result.error_code) in _REJOIN:
                    self._fenced()
            else:
                self.lock_timeout_ms = response.acquisition_lock_timeout_ms
                self._take(part, result)
        except KafkaError as e:
            if acks:
                self._results.append(AckResult(part.tp, tuple(sorted(acks)), e))
            if e.error in _REJOIN:
                self._fenced()
        finally:
            part.fetch = None
            if self._arrived is not None:
                self._arrived.set()

    def _take(self, part: _Partition, result) -> None:
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
                    self._buffer.append(ConsumerRecord(tp.topic, tp.partition, offset, r.timestamp, r.key, r.value,
                                                       r.headers, acquired.delivery_count))

    async def _acknowledge(self, tp: TopicPartition, acks: dict) -> AckResult:
        part = self.partitions.get(tp)
        renewed = AcknowledgeType.RENEW in acks.values()
        if part is None:
            return AckResult(tp, tuple(sorted(acks)), KafkaError(
                Errors.UNKNOWN_TOPIC_OR_PARTITION, f"{tp} is not in the subscription"), renewed)
        acks = {**part.gaps, **acks}
        part.gaps = {}
        request = ShareAcknowledgeRequest(self.group_id, self.member_id, topics=(AcknowledgeTopic(
            part.topic_id, (AcknowledgePartition(tp.partition, ack_batches(acks)),)),))
        try:
            response = await self._sp_call(part, "share_acknowledge", request,
                                        timeout_s=self.s["request_timeout_ms"] / 1000)
            if response.error_code:  # refused as a whole
                error = _error(response.error_code, response.error_message)
            else:
                (result,) = response.responses[0].partitions
                error = _error(result.error_code, result.error_message)
        except KafkaError as e:
            error = e
        if error is not None and error.error in _REJOIN:
            self._fenced()
        return AckResult(tp, tuple(sorted(acks)), error, renewed)

    async def _acknowledge_later(self, tp: TopicPartition, acks: dict) -> None:
        self._results.append(await self._acknowledge(tp, acks))
        if self._arrived is not None:
            self._arrived.set()

    async def commit(self, acks: dict) -> list[AckResult]:
        """Send `acks` now, each partition on its own, and return their results together with
        those of earlier sends that came back meanwhile."""
        sent = await asyncio.gather(*(self._acknowledge(tp, a) for tp, a in acks.items()))
        results, self._results = self._results + list(sent), []
        return results

    # ------------------------------------------------------------------ leaving

    async def _release(self, part: _Partition) -> None:
        if part.fetch is not None:
            await asyncio.gather(part.fetch, return_exceptions=True)
        try:
            await self._sp_call(part, "release_member", self.member_id, timeout_s=10)
        except KafkaError as e:
            log.info("%s: releasing %s: %s", self.client_id, part.tp, e)

    async def close(self, acks: dict) -> list[AckResult]:
        """Send the last acknowledgements, wait for the fetches under way, then have every
        SharePartition release what this member still holds (buffered records included)."""
        self._closing = True
        results = await self.commit(acks)
        await self._leave()
        self.assigned = set()
        await asyncio.gather(*(self._release(p) for p in self.partitions.values()))
        self._buffer.clear()
        await self._stop_tasks()
        return results + self._results

    async def state(self) -> dict:
        return {"member_id": self.member_id, "member_epoch": self.member_epoch, "assigned": sorted(self.assigned),
                "buffered": len(self._buffer)}


def _error(code: int, message: str | None) -> KafkaError | None:
    return KafkaError(Errors.for_code(code), message) if code else None


class ShareConsumer(ClientFacade):
    """`cluster.share_consumer(group_id, share_acknowledgement_mode="implicit", **config)`.

    In implicit mode the records of a poll are accepted by the next poll, commit or close. In
    explicit mode every record must be acknowledged before the next poll. RENEW keeps a record
    (its lock starts again) and the next poll returns it again."""

    def __init__(self, cluster, group_id: str, **config) -> None:
        unknown = set(config) - set(DEFAULT_CONFIG)
        if unknown:
            raise TypeError(f"unknown share consumer settings: {sorted(unknown)}")
        settings = {**DEFAULT_CONFIG, **config}
        mode = settings["share_acknowledgement_mode"]
        if mode not in ("implicit", "explicit"):
            raise KafkaError(Errors.INVALID_CONFIG, f"share_acknowledgement_mode must be implicit or explicit, not {mode!r}")
        self._explicit = mode == "explicit"
        self._key_deserializer = settings.pop("key_deserializer")
        self._value_deserializer = settings.pop("value_deserializer")
        client_id = settings["client_id"] or f"share-consumer-{group_id}-{uuid.uuid4().hex[:8]}"
        settings["client_id"] = client_id
        self.group_id = group_id
        self.member_id = f"{client_id}-{uuid.uuid4()}"
        self.config = settings
        self._in_hand: dict[tuple, ConsumerRecord] = {}  # delivered by the last poll, not acknowledged
        self._acks: dict[TopicPartition, dict[int, int]] = {}
        self._renewing: dict[tuple, ConsumerRecord] = {}
        self._again: list[ConsumerRecord] = []  # renewed: the next poll returns them again
        self._callback: Callable | None = None
        self._async_commits: list = []
        self._lock_timeout_ms = -1
        self._closed = False
        self._cluster = cluster
        super().__init__(cluster, "share-consumer", ShareConsumerActor, client_id, group_id, self.member_id,
                         settings)

    def subscribe(self, topics) -> None:
        if isinstance(topics, str):
            topics = [topics]
        partitions = []
        for topic in self._cluster.describe_topics(list(topics)):
            for p in range(topic.partitions):
                partitions.append((topic.name, topic.topic_id, p))
        self._call("subscribe", list(topics), partitions)

    def assignment(self) -> set[TopicPartition]:
        """The partitions the share group assigned to this member (it fetches from these)."""
        return set(self._call("state")["assigned"])

    # ------------------------------------------------------------------ acknowledging

    def acknowledge(self, record: ConsumerRecord, ack_type: AcknowledgeType = AcknowledgeType.ACCEPT) -> None:
        """Acknowledge a record of the last poll; it is sent with the next poll or commit."""
        ack_type = _user_type(ack_type)
        key = (record.topic, record.partition, record.offset)
        if key not in self._in_hand:
            done = record.offset in self._acks.get(TopicPartition(record.topic, record.partition), {})
            raise KafkaError(Errors.INVALID_RECORD_STATE,
                             f"{record.topic}-{record.partition}@{record.offset} was "
                             + ("already acknowledged" if done else "not delivered by the last poll"))
        self._queue(key, ack_type)

    def acknowledge_offset(self, topic: str, partition: int, offset: int,
                           ack_type: AcknowledgeType = AcknowledgeType.ACCEPT) -> None:
        """Acknowledge by coordinates. An offset this consumer does not hold is still sent: the
        SharePartition judges it, and the outcome is in commit_sync's result (or the callback)."""
        ack_type = _user_type(ack_type)
        key = (topic, partition, offset)
        if key in self._in_hand:
            self._queue(key, ack_type)
        else:
            self._acks.setdefault(TopicPartition(topic, partition), {})[offset] = ack_type

    def _queue(self, key: tuple, ack_type: AcknowledgeType) -> None:
        record = self._in_hand.pop(key)
        self._acks.setdefault(TopicPartition(key[0], key[1]), {})[key[2]] = ack_type
        if ack_type == AcknowledgeType.RENEW:
            self._renewing[key] = record

    def _take_acks(self) -> dict:
        if not self._explicit:
            for key in list(self._in_hand):
                self._queue(key, AcknowledgeType.ACCEPT)
        acks, self._acks = self._acks, {}
        return acks

    # ------------------------------------------------------------------ polling

    def poll(self, timeout: float = 0.0) -> list[ConsumerRecord]:
        """Records acquired for this member, each with its delivery_count (`timeout` in seconds)."""
        self._require_open()
        if self._explicit and self._in_hand:
            raise KafkaError(Errors.INVALID_RECORD_STATE,
                             f"{len(self._in_hand)} records of the last poll are not acknowledged "
                             "(share_acknowledgement_mode=explicit)")
        self._finish_async_commits()
        timeout_ms = 0 if self._again else max(int(timeout * 1000), 0)
        result: PollResult = self._call("poll", self._take_acks(), timeout_ms, None,
                                        timeout_s=timeout_ms / 1000 + 60)
        self._lock_timeout_ms = result.lock_timeout_ms
        again, self._again = self._again + self._settle(result.results), []
        fresh = [self._deserialize(r) for r in result.records]
        # A renewed record whose lock ran out before this poll may be acquired again by this
        # very member: the new delivery is the one it holds, the renewed copy is stale.
        delivered = {(r.topic, r.partition, r.offset) for r in fresh}
        records = [r for r in again if (r.topic, r.partition, r.offset) not in delivered] + fresh
        self._in_hand = {(r.topic, r.partition, r.offset): r for r in records}
        return records

    def _settle(self, results: list[AckResult]) -> list[ConsumerRecord]:
        """Run the callback for each result; the renewed records to hand out again."""
        again = []
        for result in results:
            if result.renewed:
                tp = result.partition
                for offset in result.offsets:
                    record = self._renewing.pop((tp.topic, tp.partition, offset), None)
                    if record is not None and result.error is None:
                        again.append(record)
            if self._callback is not None:
                self._callback({result.partition: set(result.offsets)}, result.error)
        return again

    def _deserialize(self, r: ConsumerRecord) -> ConsumerRecord:
        kd, vd = self._key_deserializer, self._value_deserializer
        if kd is None and vd is None:
            return r
        return r._replace(key=kd(r.key) if kd and r.key is not None else r.key,
                          value=vd(r.value) if vd and r.value is not None else r.value)

    # ------------------------------------------------------------------ committing

    def commit_sync(self, timeout: float = 30.0) -> dict[TopicPartition, KafkaError | None]:
        """Send the acknowledgements now; {TopicPartition: None or the error} for each partition."""
        self._require_open()
        self._finish_async_commits(wait=True)
        results = self._call("commit", self._take_acks(), timeout_s=timeout)
        self._again.extend(self._settle(results))
        out: dict = {}
        for r in results:
            if out.get(r.partition) is None:
                out[r.partition] = r.error
        return out

    def commit_async(self) -> None:
        """Send the acknowledgements; the callback hears the outcome in a later poll, commit or close."""
        self._require_open()
        self._async_commits.append(self._submit("commit", self._take_acks()))

    def _finish_async_commits(self, wait: bool = False) -> None:
        if not self._async_commits:
            return
        done, pending = ray.wait(self._async_commits, num_returns=len(self._async_commits),
                                 timeout=30 if wait else 0)
        self._async_commits = pending
        for ref in done:
            try:
                results = ray.get(ref)
            except Exception as e:
                error = to_kafka_error(e)
                if self._callback is not None:
                    self._callback({}, error)
                continue
            self._again.extend(self._settle(results))

    def set_acknowledgement_commit_callback(self, callback: Callable[[dict, Any], None] | None) -> None:
        """`callback({TopicPartition: {offsets}}, error_or_None)`, once per partition and send."""
        self._callback = callback

    def acquisition_lock_timeout_ms(self) -> int:
        """The share group's record lock duration, as the last fetch reported it (-1 before)."""
        return self._lock_timeout_ms

    # ------------------------------------------------------------------ closing

    def _require_open(self) -> None:
        if self._closed:
            raise KafkaError(Errors.INVALID_REQUEST, "the share consumer is closed")

    def close(self) -> None:
        """Send pending acknowledgements (implicit mode accepts the last poll's records), then
        leave: the SharePartitions release whatever this member still holds."""
        if self._closed:
            return
        try:
            self._finish_async_commits(wait=True)
            self._settle(self._call("close", self._take_acks()))
        finally:
            self._closed = True
            self._kill()

    def __enter__(self) -> "ShareConsumer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _user_type(ack_type) -> AcknowledgeType:
    try:
        t = AcknowledgeType(ack_type)
    except ValueError:
        t = None
    if t not in _USER_TYPES:
        raise KafkaError(Errors.INVALID_REQUEST, f"invalid acknowledge type {ack_type!r}")
    return t
