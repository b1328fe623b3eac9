"""The group coordinator actor of one __consumer_offsets partition: Kafka's group APIs as
methods, each taking its request dataclass and returning its response dataclass. The shard
decides everything; this host draws member ids and reads the clock, and ShardHost._answer
turns a KafkaError into the response Kafka gives for it.

Consumer and share groups need the topics (Kafka's coordinators get every metadata image):
after each load, when told by `notify_topics()`, and every `metadata.max.age.ms`, the host
reads the controller's metadata and hands it to the shard's `update_topics`. Until the
first one lands, their heartbeats answer COORDINATOR_LOAD_IN_PROGRESS."""
from __future__ import annotations

import asyncio
import dataclasses
import logging
import uuid
from typing import Callable

from runtime.coordinator import CoordinatorState, Result
from runtime.errors import Errors, KafkaError
from runtime.group.shard import GroupCoordinatorShard
from runtime.messages.consumer import (ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse,
                                       ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse)
from runtime.messages.group import (
    DeleteGroupsRequest, DeleteGroupsResponse, DescribeGroupsRequest, DescribeGroupsResponse, HeartbeatRequest,
    HeartbeatResponse, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest, LeaveGroupResponse,
    ListGroupsRequest, ListGroupsResponse, OffsetCommitRequest, OffsetCommitResponse, OffsetDeleteRequest,
    OffsetDeleteResponse, OffsetFetchRequest, OffsetFetchResponse, SyncGroupRequest, SyncGroupResponse,
)
from runtime.messages.share_group import (AlterGroupConfigRequest, AlterGroupConfigResponse,
                                          AlterShareGroupOffsetsRequest, AlterShareGroupOffsetsResponse,
                                          DescribeGroupConfigRequest, DescribeGroupConfigResponse,
                                          ShareGroupDescribeRequest, ShareGroupDescribeResponse,
                                          ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse)
from runtime.messages.share_state import (InitializeShareGroupStateRequest, InitializeStateData,
                                          InitializeStatePartitionData)
from runtime.messages.topics import MetadataRequest
from runtime.messages.txn import (TxnOffsetCommitRequest, TxnOffsetCommitResponse, WriteTxnMarkersRequest,
                                  WriteTxnMarkersResponse)
from runtime.topics.internal import OFFSETS_TOPIC, log_name

from .. import naming
from ..retry import ActorDirectory, ActorNotFound
from .shard_host import ShardHost

log = logging.getLogger(__name__)

# How often the topics are read again without being told (Kafka's metadata.max.age.ms).
METADATA_MAX_AGE_MS = 30000
RELOAD_TIMEOUT_S = 10  # a SharePartition's reload after an offset alter
ALTER_TIMEOUT_S = 60  # an offset alter's initialisation, retries included


def offsets_log_name(partition: int) -> str:
    return log_name(OFFSETS_TOPIC, partition)


class GroupCoordinatorActor(ShardHost):
    def __init__(self, data_dir: str, partition: int, config: dict) -> None:
        super().__init__(offsets_log_name(partition), partition, GroupCoordinatorShard, data_dir, config)
        self._namespace = config.get(naming.NAMESPACE_KEY, naming.DEFAULT_NAMESPACE)
        self._metadata_max_age_s = int(config.get("metadata.max.age.ms", METADATA_MAX_AGE_MS)) / 1000
        self._topics_task: asyncio.Task | None = None
        self._config = config
        self._actors = ActorDirectory(self._namespace)
        self._share_inits: set[asyncio.Task] = set()  # share-state initialisations under way
        # Offset alters waiting for their initialisation: (group id, topic id) -> futures
        self._alters: dict[tuple[str, str], list[asyncio.Future]] = {}
        self._topics_wanted: asyncio.Event | None = None
        # Reads of the controller are numbered as they start; a later read never sees older
        # topics, so an answer older than the one applied last is dropped.
        self._metadata_reads = 0
        self._metadata_applied = 0

    # ------------------------------------------------------------------ the classic protocol

    async def join_group(self, request: JoinGroupRequest, client_id: str = "",
                         client_host: str = "") -> JoinGroupResponse:
        member_id = f"{client_id}-{uuid.uuid4()}"
        return await self._answer(
            request, lambda s, now: s.join_group(request, now, member_id, client_id, client_host), key=request.group_id)

    async def sync_group(self, request: SyncGroupRequest) -> SyncGroupResponse:
        return await self._answer(request, lambda s, now: s.sync_group(request, now), key=request.group_id)

    async def heartbeat(self, request: HeartbeatRequest) -> HeartbeatResponse:
        return await self._answer(request, lambda s, now: s.heartbeat(request, now), key=request.group_id)

    async def leave_group(self, request: LeaveGroupRequest) -> LeaveGroupResponse:
        return await self._answer(request, lambda s, now: s.leave_group(request, now), key=request.group_id)

    # ------------------------------------------------------------------ offsets

    async def offset_commit(self, request: OffsetCommitRequest) -> OffsetCommitResponse:
        # Filed apart from the group's membership: no heartbeat, join or sync answer reads
        # committed offsets, so none waits for a commit's flush.
        return await self._answer(request, lambda s, now: s.offset_commit(request, now),
                                  key=(request.group_id, "offsets"))

    async def offset_fetch(self, request: OffsetFetchRequest) -> OffsetFetchResponse:
        if request.require_stable:
            # As a write, so that commits still in the open batch can be told apart.
            return await self._answer(request, lambda s, now: Result(
                (), s.offset_fetch(request, pending_from=self.runtime.last_committed_offset)))
        return await self._answer(request, lambda s: s.offset_fetch(request), read=True)

    async def offset_delete(self, request: OffsetDeleteRequest) -> OffsetDeleteResponse:
        return await self._answer(request, lambda s, now: s.offset_delete(request, now))

    # ------------------------------------------------------------------ transactions

    async def txn_offset_commit(self, request: TxnOffsetCommitRequest) -> TxnOffsetCommitResponse:
        """Offsets of a transaction: pending until its marker (write_txn_markers)."""
        return await self._answer(request, lambda s, now: s.txn_offset_commit(request, now))

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
        return await self._answer(request, lambda s: DescribeGroupsResponse(tuple(s.describe_groups(request.groups))),
                                  read=True)

    async def list_groups(self, request: ListGroupsRequest) -> ListGroupsResponse:
        return await self._answer(
            request, lambda s: ListGroupsResponse(groups=tuple(s.list_groups(request.states_filter,
                                                                             request.types_filter))), read=True)

    async def delete_groups(self, request: DeleteGroupsRequest) -> DeleteGroupsResponse:
        def delete(s, now) -> Result:
            result = s.delete_groups(request.groups_names, now)
            return dataclasses.replace(result, response=DeleteGroupsResponse(tuple(result.response)))
        return await self._answer(request, delete)

    # ------------------------------------------------------------------ KIP-848 consumer groups

    async def consumer_group_heartbeat(self, request: ConsumerGroupHeartbeatRequest, client_id: str = "",
                                       client_host: str = "") -> ConsumerGroupHeartbeatResponse:
        return await self._modern_heartbeat(GroupCoordinatorShard.consumer_group_heartbeat, request, client_id,
                                            client_host)

    async def consumer_group_describe(self, request: ConsumerGroupDescribeRequest) -> ConsumerGroupDescribeResponse:
        return await self._answer(
            request, lambda s: ConsumerGroupDescribeResponse(tuple(s.consumer_group_describe(request.group_ids))),
            read=True)

    # ------------------------------------------------------------------ share groups

    async def share_group_describe(self, request: ShareGroupDescribeRequest) -> ShareGroupDescribeResponse:
        return await self._answer(
            request, lambda s: ShareGroupDescribeResponse(tuple(s.share_group_describe(request.group_ids))), read=True)

    async def share_group_heartbeat(self, request: ShareGroupHeartbeatRequest, client_id: str = "",
                                    client_host: str = "") -> ShareGroupHeartbeatResponse:
        return await self._modern_heartbeat(GroupCoordinatorShard.share_group_heartbeat, request, client_id,
                                            client_host)

    async def _modern_heartbeat(self, handler: Callable, request, client_id: str, client_host: str):
        member_id = request.member_id or str(uuid.uuid4())  # for a member that joins without an id
        return await self._answer(request, lambda s, now: handler(s, request, now, member_id, client_id, client_host),
                                  key=request.group_id)

    async def _initialize_share_state(self, pending) -> None:
        """Have the share coordinators initialise newly subscribed partitions (state epoch =
        the group epoch, start offset -1) or partitions an offset alter starts over, then
        tell the shard which succeeded; the shard asks again after
        group.share.initialize.retry.interval.ms for the rest."""
        by_coordinator: dict[str, list[int]] = {}
        for p in pending.partitions:
            key = naming.share_coordinator_key(pending.group_id, pending.topic_id, p)
            by_coordinator.setdefault(naming.find_coordinator(naming.CoordinatorType.SHARE, key, self._config),
                                      []).append(p)
        starts = dict(zip(pending.partitions, pending.start_offsets))
        done, failed = [], []
        for coordinator, partitions in by_coordinator.items():
            request = InitializeShareGroupStateRequest(pending.group_id, (InitializeStateData(pending.topic_id, tuple(
                InitializeStatePartitionData(p, pending.group_epoch, starts.get(p, -1)) for p in partitions)),))
            try:
                response = await self._actors.call_async(coordinator, "initialize_share_group_state", request)
                results = [r for t in response.results for r in t.partitions]
            except KafkaError as e:
                log.info("%s: initialising share state of %s failed: %s", self.runtime.name, pending.group_id, e)
                results = []
            ok = {r.partition for r in results if r.error_code == 0}
            done += [p for p in partitions if p in ok]
            failed += [p for p in partitions if p not in ok]
        error = None
        try:
            if done and pending.altered:
                # Before the partitions are assignable again: no member may fetch the old state.
                await self._reload_share_partitions(pending.group_id, pending.topic_name, done, pending.group_epoch)
            if done:
                await self._write(lambda s, now: s.share_group_initialized(pending.group_id, pending.topic_id, done,
                                                                           now))
            if failed:
                error = KafkaError(Errors.COORDINATOR_NOT_AVAILABLE,
                                   f"the share coordinator did not initialise partitions {failed}")
                await self._write(lambda s, now: s.share_group_initialize_failed(pending.group_id, pending.topic_id,
                                                                                 failed, now))
        except KafkaError as e:
            error = e
        finally:
            for future in self._alters.pop((pending.group_id, pending.topic_id), []):
                if not future.done():
                    future.set_result(error)

    async def _reload_share_partitions(self, group_id: str, topic: str, partitions, state_epoch: int) -> None:
        """SharePartitions that hold the share group's state of these partitions load it
        again (an offset alter started it over under `state_epoch`). One that does not answer
        is restarting or gone, and loads the new state when it comes back; if it is only
        slow, its next write is fenced (FENCED_STATE_EPOCH) and it loads then."""
        results = await asyncio.gather(*(self._share_partition_call(
            group_id, topic, p, "reload_state", state_epoch, timeout_s=RELOAD_TIMEOUT_S) for p in partitions),
            return_exceptions=True)
        for partition, result in zip(partitions, results):
            # None: no SharePartition; the next share fetch creates one, which loads the new state
            if isinstance(result, Exception):
                log.info("%s: reloading %s-%d of %s: %s", self.runtime.name, topic, partition, group_id, result)

    async def _share_partition_call(self, group_id: str, topic: str, partition: int, method: str, *args,
                                    timeout_s: float | None = None):
        """One call on the SharePartition of the group on the topic partition, found afresh
        (one that went away idle may have a successor) off the event loop; None when there
        is none (it holds nothing, and one created later reads the state as it is then)."""
        try:
            return await self._actors.send(naming.share_partition(group_id, topic, partition), method, *args,
                                           timeout_s=timeout_s, fresh=True)
        except ActorNotFound:
            return None

    async def alter_share_group_offsets(self, request: AlterShareGroupOffsetsRequest
                                        ) -> AlterShareGroupOffsetsResponse:
        """AlterShareGroupOffsets (a start offset of -1 forgets where the group is:
        DeleteShareGroupOffsets): answered once the share coordinators hold the new state and
        the group's SharePartitions loaded it."""
        group_id, offsets = request.group_id, request.offsets
        pending: list[asyncio.Future] = []

        def alter(shard, now):
            result = shard.alter_share_group_offsets(group_id, offsets, now)
            for name in offsets:  # the alter raised for a topic it does not know
                future = asyncio.get_running_loop().create_future()
                self._alters.setdefault((group_id, shard.share.topic_ids[name]), []).append(future)
                pending.append(future)
            return result
        try:
            await self._write(alter)
            errors = await asyncio.wait_for(asyncio.gather(*pending), ALTER_TIMEOUT_S)
        except (KafkaError, asyncio.TimeoutError) as e:
            for key in list(self._alters):
                self._alters[key] = [f for f in self._alters[key] if f not in pending]
                if not self._alters[key]:
                    del self._alters[key]
            error = e if isinstance(e, KafkaError) else KafkaError(
                Errors.REQUEST_TIMED_OUT, f"the share state of {group_id!r} was not initialised in time")
            return AlterShareGroupOffsetsResponse(error.code, error.message)
        error = next((e for e in errors if e is not None), None)
        return AlterShareGroupOffsetsResponse(error.code, error.message) if error else AlterShareGroupOffsetsResponse()

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
        def alter(s, now) -> Result:
            result = s.alter_group_config(request.group_id, request.configs, now)
            records = () if request.validate_only else result.records
            return dataclasses.replace(result, records=records, response=AlterGroupConfigResponse(request.group_id))
        response = await self._answer(request, alter)
        if not response.error_code and not request.validate_only:
            await self._push_share_configs(request.group_id)
        return response

    async def describe_group_config(self, request: DescribeGroupConfigRequest) -> DescribeGroupConfigResponse:
        return await self._answer(request, lambda s: DescribeGroupConfigResponse(
            request.group_id, configs=tuple(s.describe_group_config(request.group_id))), read=True)

    async def configured_group_ids(self) -> list[str]:
        """The groups of this coordinator with a config of their own (ListConfigResources)."""
        return await self._read(lambda s: s.configured_group_ids())

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
                    await self._share_partition_call(group_id, topic, partition, "update_config", share)
                except Exception as e:  # restarting: it reads them when it loads
                    log.info("%s: share configs of %s to %s-%d: %s", self.runtime.name, group_id, topic, partition, e)

    async def _release_share_member(self, released) -> None:
        """A share-group member left or was fenced: its SharePartitions release what it
        holds now, rather than when the acquisition locks expire."""
        results = await asyncio.gather(*(self._share_partition_call(
            released.group_id, topic, partition, "release_member", released.member_id, released.member_epoch)
            for topic, partition in released.partitions), return_exceptions=True)
        for result in results:
            if isinstance(result, Exception):  # the lock expiry releases the records anyway
                log.info("%s: releasing %s: %s", self.runtime.name, released.member_id, result)

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
        response = await self._actors.call_async(naming.CONTROLLER, "metadata", MetadataRequest(None))
        if read < self._metadata_applied:
            return
        self._metadata_applied = read
        topics = {t.name: len(t.partitions) for t in response.topics if not t.error_code and t.partitions}
        topic_ids = {t.name: t.topic_id for t in response.topics if t.name in topics and t.topic_id}
        await self._write(lambda s, now: s.update_topics(topics, now, topic_ids))
