"""The share consumer (KIP-932): confluent-kafka's ShareConsumer API, plus what it lacks.

The facade (`ShareConsumer`) keeps what the user holds (the records of the last poll and the
acknowledgements made since, in `runtime.clients.share_acknowledgements.InFlightRecords`)
and hands them to the next poll or commit. Its background work (`ShareConsumerBackground`)
runs on the process's network thread, as Kafka's share consumer runs its request managers
on its own: it heartbeats for the share membership (ShareMembershipManager), keeps one share
fetch in flight per assigned partition, each carrying that partition's acknowledgements,
against the SharePartition actors, and buffers what they return (the bookkeeping is
`runtime.clients.share_fetch.ShareFetchBook`). It runs in the user's process rather than in
a client actor because a poll then costs no Ray call of its own and the records cross one
process fewer (the README's share group figures say what that saved). A SharePartition that
is not there (never used, gone idle, or lost with its owner) is created by the controller,
and the call goes to the new one. Acknowledgements for a partition whose fetch is still
waiting go out on their own (ShareAcknowledge).

`close()` leaves the group and asks each SharePartition to release what the member still
holds. A SharePartition refuses a member its group no longer has (UNKNOWN_MEMBER_ID): the
member takes that as a fence, fetches nothing until it has joined again, and reports the
acknowledgements refused with it. A consumer dropped without close stops its background work
and sends nothing more, as if its process had died: the group fences it after the session
timeout and the SharePartitions free its records when their locks run out.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
import uuid
import weakref
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from runtime.clients.share_acknowledgements import AckResult, InFlightRecords, commit_outcome
from runtime.clients.share_fetch import FetchPartition, ShareFetchBook, records_of
from runtime.clients.share_membership import ShareMembershipManager
from runtime.clients.types import ConsumerRecord, TopicPartition
from runtime.errors import Errors, KafkaError
from runtime.messages.share import AcknowledgeType

from .. import naming
from .client import ClientActor
from .network_thread import NetworkThread, result_within
from ..errors import map_errors, to_kafka_error
from ..retry import Backoff

log = logging.getLogger(__name__)

__all__ = ["ShareConsumer", "ShareConsumerBackground", "AcknowledgeType", "DEFAULT_CONFIG"]

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


def _clock_ms() -> float:
    """The book's clock for acquisition locks: monotonic, as only durations are compared."""
    return time.monotonic() * 1000


async def _resolved(value):
    return value


@dataclass(frozen=True)
class PollResult:
    records: list  # ShareChunk: the facade decodes them
    results: list  # AckResult
    lock_timeout_ms: int


class ShareConsumerBackground(ClientActor):
    """The share consumer's work on the network thread: carries the cores' requests to the
    group coordinator and the SharePartitions and their answers back. The membership manager
    decides the heartbeats and the assignment, the fetch book which fetches and
    acknowledgements go out and what their answers mean."""

    def __init__(self, namespace: str, config: dict, client_id: str, group_id: str, member_id: str,
                 settings: dict) -> None:
        super().__init__(namespace, config, client_id)
        self.group_id = group_id
        self.member_id = member_id
        self.s = settings
        self.membership = ShareMembershipManager(group_id, member_id)
        self.book = ShareFetchBook(group_id, member_id, settings)
        self._fetches: dict[TopicPartition, asyncio.Task] = {}
        self._heartbeats: asyncio.Task | None = None
        self._heartbeat_wake: asyncio.Event | None = None
        self._arrived: asyncio.Event | None = None

    @property
    def _fetchable(self) -> frozenset:
        """What the group assigned, of the partitions whose topic ids the facade gave."""
        return self.membership.owned & self.book.partitions.keys()

    # ------------------------------------------------------------------ membership

    async def subscribe(self, topics: list[str], partitions: list[tuple[str, str, int]]) -> None:
        """Join (or change the subscription) through ShareGroupHeartbeat; `partitions` are the
        subscribed topics' (topic, topic id, partition)."""
        for part in self.book.subscribe(partitions):
            await self._release(part)
        self.membership.subscribe(topics)
        if self._heartbeats is None:
            self._heartbeat_wake = asyncio.Event()
            self._heartbeats = self._spawn(self._heartbeat_loop())
        self._heartbeat_wake.set()

    async def _heartbeat_loop(self) -> None:
        backoff = Backoff()
        while not self._stopped:
            request = self.membership.heartbeat_request()
            delay_s = None  # none due: wait to be woken
            if request is not None:
                owned = self.membership.owned
                try:
                    response = await self._call(self.group_coordinator_name(self.group_id), "share_group_heartbeat",
                                                request, self.client_id, self.host,
                                                timeout_s=self.s["request_timeout_ms"] / 1000)
                    if response.error_code:
                        log.info("%s: share group heartbeat: %s", self.client_id,
                                 Errors.for_code(response.error_code))
                    self.membership.on_heartbeat_response(response)
                except KafkaError as e:
                    log.info("%s: share group heartbeat failed: %s", self.client_id, e)
                    self.membership.heartbeat_failed()
                self._assignment_changed(owned)
                if self.membership.backing_off:
                    delay_s = backoff.next_s()
                else:
                    backoff = Backoff()
                    if self.membership.heartbeat_due_now():
                        continue
                    delay_s = self.membership.heartbeat_interval_ms / 1000
            try:
                await asyncio.wait_for(self._heartbeat_wake.wait(), delay_s)
            except asyncio.TimeoutError:
                pass
            self._heartbeat_wake.clear()

    def _assignment_changed(self, before: frozenset) -> None:
        """A poll waiting for records starts the fetches of a new assignment at once."""
        if self.membership.owned != before and self._arrived is not None:
            self._arrived.set()

    def _refused(self, error: Errors, stamp: int | None) -> None:
        """A SharePartition's answer: a fence stops fetching, and the member joins again
        under the same id (its heartbeat goes at once)."""
        self.membership.partition_refused(error, stamp)
        if self.membership.heartbeat_due_now() and self._heartbeat_wake is not None:
            self._heartbeat_wake.set()

    async def _leave(self) -> None:
        if self._heartbeats is None:
            return
        self._heartbeats.cancel()
        self.membership.leave()
        request = self.membership.heartbeat_request()
        if request is None:
            return
        try:
            await self._call(self.group_coordinator_name(self.group_id), "share_group_heartbeat", request,
                             timeout_s=5)
        except KafkaError as e:
            log.info("%s: leaving the share group: %s", self.client_id, e)

    def _sp_name(self, part: FetchPartition) -> str:
        return naming.share_partition(self.group_id, part.tp.topic, part.tp.partition)

    async def _sp_call(self, part: FetchPartition, method: str, *args, timeout_s: float):
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
        route = self.book.route(self.book.screen(acks, _clock_ms()), self._fetchable)
        renewals = [self._acknowledge(tp, a) for tp, a in route.renew.items()]
        for tp, a in route.alone.items():
            self._spawn(self._acknowledge_later(self._acknowledge(tp, a)))
        for tp, a in route.fetch.items():
            self._start_fetch(tp, a, timeout_ms)
        renewed = list(await asyncio.gather(*renewals))
        deadline = time.monotonic() + timeout_ms / 1000
        while not self.book.has_records(self.membership.stamp()) and not renewed:
            self._arrived.clear()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            try:
                await asyncio.wait_for(self._arrived.wait(), remaining)
            except asyncio.TimeoutError:
                break
            for tp in self.book.idle(self._fetchable):
                self._start_fetch(tp, {}, max(int((deadline - time.monotonic()) * 1000), 0))
        records = self.book.drain(max_records or self.s["max_poll_records"], self.membership.stamp())
        return PollResult(records, renewed + self.book.take_results(), self.book.lock_timeout_ms)

    def _start_fetch(self, tp: TopicPartition, acks: dict, wait_ms: int) -> None:
        request, acks = self.book.fetch_request(tp, acks, wait_ms, self.membership.stamp(),
                                                self.membership.member_epoch)
        self._fetches[tp] = self._spawn(self._fetch(self.book.partitions[tp], request, acks))

    async def _fetch(self, part: FetchPartition, request, acks: dict) -> None:
        stamp = part.membership
        try:
            response = await self._sp_call(part, "share_fetch", request,
                                        timeout_s=request.max_wait_ms / 1000 + self.s["request_timeout_ms"] / 1000)
            error = self.book.on_fetch_response(part, acks, response, _clock_ms())
        except KafkaError as e:
            error = self.book.on_fetch_failed(part, acks, e)
        finally:
            part.fetching = False
            if self._arrived is not None:
                self._arrived.set()
        if error is not Errors.NONE:
            log.info("%s: share fetch of %s: %s", self.client_id, part.tp, error)
            self._refused(error, stamp)

    def _acknowledge(self, tp: TopicPartition, acks: dict) -> Awaitable[AckResult]:
        """A ShareAcknowledge of the partition, under way from now on (its partition is not
        fetched until it is answered); the awaitable gives its outcome."""
        part = self.book.partitions.get(tp)
        if part is None:
            return _resolved(self.book.acknowledge_refused(tp, acks))
        request, acks = self.book.acknowledge_request(part, acks)
        part.acknowledging += 1
        return self._send_acknowledge(part, request, acks)

    async def _send_acknowledge(self, part: FetchPartition, request, acks: dict) -> AckResult:
        stamp = self.membership.stamp()
        sent = _clock_ms()
        try:
            response = await self._sp_call(part, "share_acknowledge", request,
                                           timeout_s=self.s["request_timeout_ms"] / 1000)
        except KafkaError as e:
            response = e
        finally:
            part.acknowledging -= 1
            if self._arrived is not None:
                self._arrived.set()  # the partition may be fetched again
        result = self.book.acknowledge_outcome(part.tp, acks, response, sent)
        if result.error is not None:
            self._refused(result.error.error, stamp)
        return result

    async def _acknowledge_later(self, sending: Awaitable[AckResult]) -> None:
        self.book.results.append(await sending)
        if self._arrived is not None:
            self._arrived.set()

    async def commit(self, acks: dict) -> list[AckResult]:
        """Send `acks` now, each partition on its own, and return their results together with
        those of earlier sends that came back meanwhile."""
        acks = self.book.screen(acks, _clock_ms())
        sent = await asyncio.gather(*(self._acknowledge(tp, a) for tp, a in acks.items()))
        return self.book.take_results() + list(sent)

    # ------------------------------------------------------------------ leaving

    async def _release(self, part: FetchPartition) -> None:
        fetch = self._fetches.pop(part.tp, None)
        if fetch is not None:
            await asyncio.gather(fetch, return_exceptions=True)
        try:
            await self._sp_call(part, "release_member", self.member_id, timeout_s=10)
        except KafkaError as e:
            log.info("%s: releasing %s: %s", self.client_id, part.tp, e)

    async def close(self, acks: dict) -> list[AckResult]:
        """Send the last acknowledgements, wait for the fetches under way, then have every
        SharePartition release what this member still holds (buffered records included)."""
        results = await self.commit(acks)
        await self._leave()
        await asyncio.gather(*(self._release(p) for p in self.book.partitions.values()))
        self.book.clear()
        await self._stop_tasks()
        return results + self.book.take_results()

    async def state(self) -> dict:
        return {"member_id": self.membership.member_id, "member_epoch": self.membership.member_epoch,
                "joins": self.membership.joins,
                "assigned": sorted(self._fetchable), "buffered": self.book.buffered, "dropped": self.book.dropped,
                "fetching": sorted(tp for tp, p in self.book.partitions.items() if p.fetching)}


class ShareConsumer:
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
        self._key_deserializer = settings.pop("key_deserializer")
        self._value_deserializer = settings.pop("value_deserializer")
        client_id = settings["client_id"] or f"share-consumer-{group_id}-{uuid.uuid4().hex[:8]}"
        settings["client_id"] = client_id
        self.group_id = group_id
        self.member_id = f"{client_id}-{uuid.uuid4()}"
        self.config = settings
        self._records = InFlightRecords(mode == "explicit")
        self._callback: Callable | None = None
        self._async_commits: list = []
        self._lock_timeout_ms = -1
        self._closed = False
        self._cluster = cluster
        self.client_id = client_id
        self._network = NetworkThread.instance()
        self._background = ShareConsumerBackground(cluster.namespace, cluster.config, client_id, group_id,
                                                   self.member_id, settings)
        self._calls: set[concurrent.futures.Future] = set()  # under way, for _abandon
        self._network.register(self._background)
        self._finalizer = weakref.finalize(self, self._network.stop, self._background, None)

    def _submit(self, method: str, *args) -> concurrent.futures.Future:
        future = self._network.submit(getattr(self._background, method)(*args))
        self._calls.add(future)
        future.add_done_callback(self._calls.discard)
        return future

    def _call(self, method: str, *args, timeout_s: float | None = 60.0) -> Any:
        """A call on the background work, waited for on the user's thread."""
        with map_errors():
            try:
                return result_within(self._submit(method, *args), timeout_s)
            except concurrent.futures.CancelledError:
                raise KafkaError(Errors.INVALID_REQUEST, "the share consumer was abandoned") from None

    def _abandon(self) -> None:
        """Stop at once, sending nothing more (no acknowledgement, no leave), as a process
        that dies does; calls under way fail. What the member held comes back when the
        SharePartitions' locks run out, and the group fences it after its session timeout.
        Returns once the background work has ended."""
        self._closed = True
        for future in list(self._calls):
            future.cancel()
        self._finalizer.detach()
        self._network.stop(self._background)

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
        self._records.acknowledge(record, ack_type)

    def acknowledge_offset(self, topic: str, partition: int, offset: int,
                           ack_type: AcknowledgeType = AcknowledgeType.ACCEPT) -> None:
        """Acknowledge by coordinates. An offset this consumer does not hold is still sent: the
        SharePartition judges it, and the outcome is in commit_sync's result (or the callback)."""
        self._records.acknowledge_offset(topic, partition, offset, ack_type)

    # ------------------------------------------------------------------ polling

    def poll(self, timeout: float = 0.0) -> list[ConsumerRecord]:
        """Records acquired for this member, each with its delivery_count (`timeout` in seconds)."""
        self._require_open()
        self._records.raise_if_unacknowledged()
        self._finish_async_commits()
        timeout_ms = 0 if self._records.again else max(int(timeout * 1000), 0)
        result: PollResult = self._call("poll", self._records.take(), timeout_ms, None,
                                        timeout_s=timeout_ms / 1000 + 60)
        self._lock_timeout_ms = result.lock_timeout_ms
        self._settle(result.results)
        records = records_of(result.records)
        if self._key_deserializer is not None or self._value_deserializer is not None:
            records = [self._deserialize(r) for r in records]
        return self._records.deliver(records)

    def _settle(self, results: list[AckResult]) -> None:
        """Take in the outcomes (renewed records come back with the next poll); the callback
        hears each."""
        self._records.settle(results)
        if self._callback is not None:
            for result in results:
                self._callback({result.partition: set(result.offsets)}, result.error)

    def _deserialize(self, r: ConsumerRecord) -> ConsumerRecord:
        kd, vd = self._key_deserializer, self._value_deserializer
        return r._replace(key=kd(r.key) if kd and r.key is not None else r.key,
                          value=vd(r.value) if vd and r.value is not None else r.value)

    # ------------------------------------------------------------------ committing

    def commit_sync(self, timeout: float = 30.0) -> dict[TopicPartition, KafkaError | None]:
        """Send the acknowledgements now; {TopicPartition: None or the error} for each partition."""
        self._require_open()
        self._finish_async_commits(wait=True)
        results = self._call("commit", self._records.take(), timeout_s=timeout)
        self._settle(results)
        return commit_outcome(results)

    def commit_async(self) -> None:
        """Send the acknowledgements; the callback hears the outcome in a later poll, commit or close."""
        self._require_open()
        self._async_commits.append(self._submit("commit", self._records.take()))

    def _finish_async_commits(self, wait: bool = False) -> None:
        if not self._async_commits:
            return
        done, pending = concurrent.futures.wait(self._async_commits, timeout=30 if wait else 0)
        self._async_commits = list(pending)
        for future in done:
            try:
                results = future.result()
            except Exception as e:
                error = to_kafka_error(e)
                if self._callback is not None:
                    self._callback({}, error)
                continue
            self._settle(results)

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
            self._settle(self._call("close", self._records.take()))
        finally:
            self._closed = True
            self._finalizer()

    def __enter__(self) -> "ShareConsumer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

