"""The group coordinator actor of one __consumer_offsets partition: Kafka's group APIs as
methods, each taking its request dataclass and returning its response dataclass. The shard
decides everything; this host draws member ids, reads the clock and turns a KafkaError
into the response Kafka gives for it (`error_response`).

Consumer and share groups need the topics (Kafka's coordinators get every metadata image):
after each load, when told by `notify_topics()`, and every `metadata.max.age.ms`, the host
reads the controller's metadata and hands it to the shard's `update_topics`. Until the
first one lands, their heartbeats answer COORDINATOR_LOAD_IN_PROGRESS."""
from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Callable

import ray

from runtime.coordinator import CoordinatorState, Result
from runtime.errors import Errors, KafkaError
from runtime.group.shard import GroupCoordinatorShard
from runtime.messages.consumer import (ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse,
                                       ConsumerGroupDescribeResponseDescribedGroup, ConsumerGroupHeartbeatRequest,
                                       ConsumerGroupHeartbeatResponse)
from runtime.messages.group import (
    DeleteGroupsRequest, DeleteGroupsResponse, DescribeGroupsRequest, DescribeGroupsResponse, HeartbeatRequest,
    HeartbeatResponse, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest, LeaveGroupResponse,
    ListGroupsRequest, ListGroupsResponse, OffsetCommitRequest, OffsetCommitResponse, OffsetDeleteRequest,
    OffsetDeleteResponse, OffsetFetchRequest, OffsetFetchResponse, SyncGroupRequest, SyncGroupResponse,
    error_response,
)
from runtime.messages.share_group import (AlterGroupConfigRequest, AlterGroupConfigResponse,
                                          DescribeGroupConfigRequest, DescribeGroupConfigResponse,
                                          ShareGroupDescribeRequest, ShareGroupDescribeResponse,
                                          ShareGroupDescribeResponseDescribedGroup,
                                          ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse)
from runtime.messages.share_state import (InitializeShareGroupStateRequest, InitializeStateData,
                                          InitializeStatePartitionData)
from runtime.messages.topics import MetadataRequest
from runtime.messages.txn import (TxnOffsetCommitRequest, TxnOffsetCommitResponse, TxnOffsetCommitResponsePartition,
                                  TxnOffsetCommitResponseTopic, WriteTxnMarkersRequest, WriteTxnMarkersResponse)
from runtime.share.coordinator import state_partition_for
from runtime.txn.coordinator import OFFSETS_TOPIC

from . import naming
from .retry import call_async
from .shard_host import ShardHost

log = logging.getLogger(__name__)

# How often the topics are read again without being told (Kafka's metadata.max.age.ms).
METADATA_MAX_AGE_MS = 30000


def offsets_log_name(partition: int) -> str:
    return f"__consumer_offsets-{partition}"


class GroupCoordinatorActor(ShardHost):
    def __init__(self, data_dir: str, partition: int, config: dict) -> None:
        super().__init__(offsets_log_name(partition), partition, GroupCoordinatorShard, data_dir, config)
        self._namespace = config.get(naming.NAMESPACE_KEY, naming.DEFAULT_NAMESPACE)
        self._metadata_max_age_s = int(config.get("metadata.max.age.ms", METADATA_MAX_AGE_MS)) / 1000
        self._topics_task: asyncio.Task | None = None
        self._share_state_partitions = int(config.get("share.coordinator.state.topic.num.partitions", 1))
        self._share_inits: set[asyncio.Task] = set()  # share-state initialisations under way
        self._topics_wanted: asyncio.Event | None = None
        # Reads of the controller are numbered as they start; a later read never sees older
        # topics, so an answer older than the one applied last is dropped.
        self._metadata_reads = 0
        self._metadata_applied = 0

    async def _answer_write(self, request, operation, key=None):
        try:
            return await self._write(operation, key)
        except KafkaError as e:
            return error_response(request, e.error)

    async def _answer_read(self, request, operation, wrap=lambda r: r):
        try:
            return wrap(await self._read(operation))
        except KafkaError as e:
            return error_response(request, e.error)

    # ------------------------------------------------------------------ the classic protocol

    async def join_group(self, request: JoinGroupRequest, client_id: str = "",
                         client_host: str = "") -> JoinGroupResponse:
        member_id = f"{client_id}-{uuid.uuid4()}"
        return await self._answer_write(
            request, lambda s, now: s.join_group(request, now, member_id, client_id, client_host), request.group_id)

    async def sync_group(self, request: SyncGroupRequest) -> SyncGroupResponse:
        return await self._answer_write(request, lambda s, now: s.sync_group(request, now), request.group_id)

    async def heartbeat(self, request: HeartbeatRequest) -> HeartbeatResponse:
        return await self._answer_write(request, lambda s, now: s.heartbeat(request, now), request.group_id)

    async def leave_group(self, request: LeaveGroupRequest) -> LeaveGroupResponse:
        return await self._answer_write(request, lambda s, now: s.leave_group(request, now), request.group_id)

    # ------------------------------------------------------------------ offsets

    async def offset_commit(self, request: OffsetCommitRequest) -> OffsetCommitResponse:
        # Filed apart from the group's membership: no heartbeat, join or sync answer reads
        # committed offsets, so none waits for a commit's flush.
        return await self._answer_write(request, lambda s, now: s.offset_commit(request, now),
                                        (request.group_id, "offsets"))

    async def offset_fetch(self, request: OffsetFetchRequest) -> OffsetFetchResponse:
        if request.require_stable:
            # As a write, so that commits still in the open batch can be told apart.
            return await self._answer_write(request, lambda s, now: Result(
                (), s.offset_fetch(request, pending_from=self.runtime.last_committed_offset)))
        return await self._answer_read(request, lambda s: s.offset_fetch(request))

    async def offset_delete(self, request: OffsetDeleteRequest) -> OffsetDeleteResponse:
        return await self._answer_write(request, lambda s, now: s.offset_delete(request, now))

    # ------------------------------------------------------------------ transactions

    async def txn_offset_commit(self, request: TxnOffsetCommitRequest) -> TxnOffsetCommitResponse:
        """Offsets of a transaction: pending until its marker (write_txn_markers)."""
        try:
            return await self._write(lambda s, now: s.txn_offset_commit(request, now))
        except KafkaError as e:
            return TxnOffsetCommitResponse(tuple(TxnOffsetCommitResponseTopic(t.name, tuple(
                TxnOffsetCommitResponsePartition(p.partition_index, e.code) for p in t.partitions))
                for t in request.topics))

    async def write_txn_markers(self, request: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse:
        """The transaction coordinator's markers for this __consumer_offsets partition."""
        results = []
        for marker in request.markers:
            for topic in marker.topics:
                for partition in topic.partition_indexes:
                    code = Errors.NOT_LEADER_OR_FOLLOWER.code
                    if (topic.name, partition) == (OFFSETS_TOPIC, self.runtime.partition):
                        try:
                            await self._write(lambda s, now, m=marker: s.complete_txn_offsets(
                                m.producer_id, m.transaction_result, now))
                            code = Errors.NONE.code
                        except KafkaError as e:
                            code = e.code
                    results.append((marker.producer_id, topic.name, partition, code))
        return WriteTxnMarkersResponse.from_results(results)

    # ------------------------------------------------------------------ admin

    async def describe_groups(self, request: DescribeGroupsRequest) -> DescribeGroupsResponse:
        return await self._answer_read(request, lambda s: s.describe_groups(request.groups),
                                       lambda groups: DescribeGroupsResponse(tuple(groups)))

    async def list_groups(self, request: ListGroupsRequest) -> ListGroupsResponse:
        return await self._answer_read(
            request, lambda s: s.list_groups(request.states_filter, request.types_filter),
            lambda groups: ListGroupsResponse(groups=tuple(groups)))

    async def delete_groups(self, request: DeleteGroupsRequest) -> DeleteGroupsResponse:
        response = await self._answer_write(request, lambda s, now: s.delete_groups(request.groups_names, now))
        return response if isinstance(response, DeleteGroupsResponse) else DeleteGroupsResponse(tuple(response))

    # ------------------------------------------------------------------ KIP-848 consumer groups

    async def consumer_group_heartbeat(self, request: ConsumerGroupHeartbeatRequest, client_id: str = "",
                                       client_host: str = "") -> ConsumerGroupHeartbeatResponse:
        return await self._modern_heartbeat(GroupCoordinatorShard.consumer_group_heartbeat, request,
                                            ConsumerGroupHeartbeatResponse, client_id, client_host)

    async def consumer_group_describe(self, request: ConsumerGroupDescribeRequest) -> ConsumerGroupDescribeResponse:
        return ConsumerGroupDescribeResponse(await self._modern_describe(
            GroupCoordinatorShard.consumer_group_describe, request.group_ids,
            ConsumerGroupDescribeResponseDescribedGroup))

    # ------------------------------------------------------------------ share groups

    async def share_group_describe(self, request: ShareGroupDescribeRequest) -> ShareGroupDescribeResponse:
        return ShareGroupDescribeResponse(await self._modern_describe(
            GroupCoordinatorShard.share_group_describe, request.group_ids, ShareGroupDescribeResponseDescribedGroup))

    async def share_group_heartbeat(self, request: ShareGroupHeartbeatRequest, client_id: str = "",
                                    client_host: str = "") -> ShareGroupHeartbeatResponse:
        return await self._modern_heartbeat(GroupCoordinatorShard.share_group_heartbeat, request,
                                            ShareGroupHeartbeatResponse, client_id, client_host)

    async def _modern_heartbeat(self, handler: Callable, request, response_cls, client_id: str, client_host: str):
        """A consumer or share group heartbeat; an error goes back in the protocol's response."""
        member_id = request.member_id or str(uuid.uuid4())  # for a member that joins without an id
        try:
            return await self._write(lambda s, now: handler(s, request, now, member_id, client_id, client_host),
                                     request.group_id)
        except KafkaError as e:
            return response_cls(e.code, e.message)

    async def _modern_describe(self, handler: Callable, group_ids, described_cls) -> tuple:
        """Each group's description, or the error (a load in progress, say) for each of them."""
        try:
            return tuple(await self._read(lambda s: handler(s, group_ids)))
        except KafkaError as e:
            return tuple(described_cls(g, e.code, e.message) for g in group_ids)

    async def _initialize_share_state(self, pending) -> None:
        """Have the share coordinators initialise newly subscribed partitions (state epoch =
        the group epoch, start offset -1), then tell the shard which succeeded; the shard
        asks again after group.share.initialize.retry.interval.ms for the rest."""
        by_coordinator: dict[int, list[int]] = {}
        for p in pending.partitions:
            by_coordinator.setdefault(state_partition_for(pending.group_id, pending.topic_id, p,
                                                          self._share_state_partitions), []).append(p)
        done, failed = [], []
        for coordinator, partitions in by_coordinator.items():
            request = InitializeShareGroupStateRequest(pending.group_id, (InitializeStateData(pending.topic_id, tuple(
                InitializeStatePartitionData(p, pending.group_epoch, -1) for p in partitions)),))
            try:
                response = await call_async(lambda c=coordinator: ray.get_actor(
                    naming.share_coordinator(c), namespace=self._namespace), "initialize_share_group_state", request)
                results = [r for t in response.results for r in t.partitions]
            except KafkaError as e:
                log.info("%s: initialising share state of %s failed: %s", self.runtime.name, pending.group_id, e)
                results = []
            ok = {r.partition for r in results if r.error_code == 0}
            done += [p for p in partitions if p in ok]
            failed += [p for p in partitions if p not in ok]
        if done:
            await self._write(lambda s, now: s.share_group_initialized(pending.group_id, pending.topic_id, done, now))
        if failed:
            await self._write(lambda s, now: s.share_group_initialize_failed(pending.group_id, pending.topic_id,
                                                                             failed, now))

    # ------------------------------------------------------------------ topic metadata

    def _on_active(self) -> None:
        super()._on_active()
        if self._topics_task is None:
            self._topics_wanted = asyncio.Event()
            self._topics_task = asyncio.get_running_loop().create_task(self._topics_loop())
        for pending in self.runtime.shard.pending_share_initializations():
            task = asyncio.get_running_loop().create_task(self._initialize_share_state(pending))
            self._share_inits.add(task)
            task.add_done_callback(self._share_inits.discard)
        for released in self.runtime.shard.released_share_members():
            task = asyncio.get_running_loop().create_task(self._release_share_member(released))
            self._share_inits.add(task)
            task.add_done_callback(self._share_inits.discard)

    # ------------------------------------------------------------------ dynamic group configs

    async def alter_group_config(self, request: AlterGroupConfigRequest) -> AlterGroupConfigResponse:
        try:
            await self._write(lambda s, now: s.alter_group_config(request.group_id, request.configs, now))
        except KafkaError as e:
            return AlterGroupConfigResponse(request.group_id, e.code, e.message)
        await self._push_share_configs(request.group_id)
        return AlterGroupConfigResponse(request.group_id)

    async def describe_group_config(self, request: DescribeGroupConfigRequest) -> DescribeGroupConfigResponse:
        try:
            entries = await self._read(lambda s: s.describe_group_config(request.group_id))
        except KafkaError as e:
            return DescribeGroupConfigResponse(request.group_id, e.code, e.message)
        return DescribeGroupConfigResponse(request.group_id, configs=tuple(entries))

    async def _push_share_configs(self, group_id: str) -> None:
        """The group's share.* configs go to its live SharePartitions (new ones read them
        when they load)."""
        entries = await self._read(lambda s: s.describe_group_config(group_id))
        share = {e.name: None if e.is_default else e.value for e in entries if e.name.startswith("share.")}
        try:
            live = await self._read(lambda s: s.share_group_state_partitions(group_id))
        except KafkaError:  # no share group (yet): its SharePartitions read the configs when they load
            return
        for _topic_id, topic, partitions in live:
            for partition in partitions:
                try:
                    sp = ray.get_actor(naming.share_partition(group_id, topic, partition), namespace=self._namespace)
                    await sp.update_config.remote(share)
                except Exception as e:  # not created yet, or restarting: it reads them when it loads
                    log.info("%s: share configs of %s to %s-%d: %s", self.runtime.name, group_id, topic, partition, e)

    async def _release_share_member(self, released) -> None:
        """A share-group member left or was fenced: its SharePartitions release what it
        holds now, rather than when the acquisition locks expire."""
        calls = []
        for topic, partition in released.partitions:
            try:
                sp = ray.get_actor(naming.share_partition(released.group_id, topic, partition),
                                   namespace=self._namespace)
            except ValueError:
                continue  # never fetched from: it holds nothing
            calls.append(sp.release_member.remote(released.member_id))
        for call in calls:
            try:
                await call
            except Exception as e:  # the lock expiry releases the records anyway
                log.info("%s: releasing %s: %s", self.runtime.name, released.member_id, e)

    async def notify_topics(self) -> None:
        """Topics were created, grown or deleted: read them now. Returns once topics at least
        as new as the controller's at the time of the call are in the shard."""
        await self.ready()
        await self._refresh_topics()

    async def _topics_loop(self) -> None:
        while self.runtime.state is not CoordinatorState.CLOSED:
            try:
                await self._refresh_topics()
            except Exception as e:  # the controller is away; the next round tries again
                log.info("%s: reading the topics failed: %s", self.runtime.name, e)
                await asyncio.sleep(0.2)
                continue
            try:
                await asyncio.wait_for(self._topics_wanted.wait(), self._metadata_max_age_s)
            except asyncio.TimeoutError:
                pass
            self._topics_wanted.clear()

    async def _refresh_topics(self) -> None:
        self._metadata_reads += 1
        read = self._metadata_reads
        response = await call_async(lambda: ray.get_actor(naming.CONTROLLER, namespace=self._namespace),
                                    "metadata", MetadataRequest(None))
        if read < self._metadata_applied:
            return
        self._metadata_applied = read
        topics = {t.name: len(t.partitions) for t in response.topics if not t.error_code and t.partitions}
        topic_ids = {t.name: t.topic_id for t in response.topics if t.name in topics and t.topic_id}
        await self._write(lambda s, now: s.update_topics(topics, now, topic_ids))
