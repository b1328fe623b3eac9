"""The group coordinator actor of one __consumer_offsets partition: Kafka's group APIs as
methods, each taking its request dataclass and returning its response dataclass. The shard
decides everything; this host draws member ids, reads the clock and turns a KafkaError
into the response Kafka gives for it (`error_response`)."""
from __future__ import annotations

import uuid

from runtime.coordinator import Result
from runtime.errors import KafkaError
from runtime.group.shard import GroupCoordinatorShard
from runtime.messages.group import (
    DeleteGroupsRequest, DeleteGroupsResponse, DescribeGroupsRequest, DescribeGroupsResponse, HeartbeatRequest,
    HeartbeatResponse, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest, LeaveGroupResponse,
    ListGroupsRequest, ListGroupsResponse, OffsetCommitRequest, OffsetCommitResponse, OffsetDeleteRequest,
    OffsetDeleteResponse, OffsetFetchRequest, OffsetFetchResponse, SyncGroupRequest, SyncGroupResponse,
    error_response,
)

from .shard_host import ShardHost


def offsets_log_name(partition: int) -> str:
    return f"__consumer_offsets-{partition}"


class GroupCoordinatorActor(ShardHost):
    def __init__(self, data_dir: str, partition: int, config: dict) -> None:
        super().__init__(offsets_log_name(partition), partition, GroupCoordinatorShard, data_dir, config)

    async def _answer_write(self, request, operation):
        try:
            return await self._write(operation)
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
            request, lambda s, now: s.join_group(request, now, member_id, client_id, client_host))

    async def sync_group(self, request: SyncGroupRequest) -> SyncGroupResponse:
        return await self._answer_write(request, lambda s, now: s.sync_group(request, now))

    async def heartbeat(self, request: HeartbeatRequest) -> HeartbeatResponse:
        return await self._answer_write(request, lambda s, now: s.heartbeat(request, now))

    async def leave_group(self, request: LeaveGroupRequest) -> LeaveGroupResponse:
        return await self._answer_write(request, lambda s, now: s.leave_group(request, now))

    # ------------------------------------------------------------------ offsets

    async def offset_commit(self, request: OffsetCommitRequest) -> OffsetCommitResponse:
        return await self._answer_write(request, lambda s, now: s.offset_commit(request, now))

    async def offset_fetch(self, request: OffsetFetchRequest) -> OffsetFetchResponse:
        if request.require_stable:
            # As a write, so that commits still in the open batch can be told apart.
            return await self._answer_write(request, lambda s, now: Result(
                (), s.offset_fetch(request, pending_from=self.runtime.log.end_offset)))
        return await self._answer_read(request, lambda s: s.offset_fetch(request))

    async def offset_delete(self, request: OffsetDeleteRequest) -> OffsetDeleteResponse:
        return await self._answer_write(request, lambda s, now: s.offset_delete(request, now))

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
