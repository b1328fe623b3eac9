"""Group coordination messages: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit,
OffsetFetch, OffsetDelete, DescribeGroups, ListGroups and DeleteGroups, as in Kafka's message
JSON schemas (latest versions), with Kafka's defaults.

Each request's error response (the whole request failed with one error: the coordinator is
loading, the group id is empty, a validator raised) is registered at the end, see errors.py;
`error_response` is re-exported from there.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import Errors, KafkaError
from .errors import answers_errors_of, error_response  # noqa: F401 (error_response: its old home)

__all__ = [
    "JoinGroupRequestProtocol", "JoinGroupRequest", "JoinGroupResponseMember", "JoinGroupResponse",
    "SyncGroupRequestAssignment", "SyncGroupRequest", "SyncGroupResponse",
    "HeartbeatRequest", "HeartbeatResponse",
    "MemberIdentity", "LeaveGroupRequest", "MemberResponse", "LeaveGroupResponse",
    "OffsetCommitRequestPartition", "OffsetCommitRequestTopic", "OffsetCommitRequest",
    "OffsetCommitResponsePartition", "OffsetCommitResponseTopic", "OffsetCommitResponse",
    "OffsetFetchRequestTopics", "OffsetFetchRequestGroup", "OffsetFetchRequest",
    "OffsetFetchResponsePartitions", "OffsetFetchResponseTopics", "OffsetFetchResponseGroup", "OffsetFetchResponse",
    "OffsetDeleteRequestPartition", "OffsetDeleteRequestTopic", "OffsetDeleteRequest",
    "OffsetDeleteResponsePartition", "OffsetDeleteResponseTopic", "OffsetDeleteResponse",
    "DescribeGroupsRequest", "DescribedGroupMember", "DescribedGroup", "DescribeGroupsResponse",
    "ListGroupsRequest", "ListedGroup", "ListGroupsResponse",
    "DeleteGroupsRequest", "DeletableGroupResult", "DeleteGroupsResponse",
    "UNKNOWN_MEMBER_ID", "UNKNOWN_GENERATION_ID",
]

UNKNOWN_MEMBER_ID = ""  # JoinGroupRequest.UNKNOWN_MEMBER_ID
UNKNOWN_GENERATION_ID = -1


# ---------------------------------------------------------------------- JoinGroup

@dataclass(frozen=True)
class JoinGroupRequestProtocol:
    name: str
    metadata: bytes = b""


@dataclass(frozen=True)
class JoinGroupRequest:
    group_id: str
    session_timeout_ms: int
    member_id: str = UNKNOWN_MEMBER_ID
    protocol_type: str = "consumer"
    protocols: tuple[JoinGroupRequestProtocol, ...] = ()
    rebalance_timeout_ms: int = -1  # -1: as long as the session timeout (Kafka's v0 rule)
    group_instance_id: str | None = None
    reason: str | None = None


@dataclass(frozen=True)
class JoinGroupResponseMember:
    member_id: str
    group_instance_id: str | None = None
    metadata: bytes = b""


@dataclass(frozen=True)
class JoinGroupResponse:
    error_code: int = 0
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    member_id: str = ""
    members: tuple[JoinGroupResponseMember, ...] = ()
    throttle_time_ms: int = 0


# ---------------------------------------------------------------------- SyncGroup

@dataclass(frozen=True)
class SyncGroupRequestAssignment:
    member_id: str
    assignment: bytes = b""


@dataclass(frozen=True)
class SyncGroupRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignments: tuple[SyncGroupRequestAssignment, ...] = ()


@dataclass(frozen=True)
class SyncGroupResponse:
    error_code: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""
    throttle_time_ms: int = 0


# ---------------------------------------------------------------------- Heartbeat

@dataclass(frozen=True)
class HeartbeatRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None


@dataclass(frozen=True)
class HeartbeatResponse:
    error_code: int = 0
    throttle_time_ms: int = 0


# ---------------------------------------------------------------------- LeaveGroup

@dataclass(frozen=True)
class MemberIdentity:
    member_id: str = UNKNOWN_MEMBER_ID
    group_instance_id: str | None = None
    reason: str | None = None


@dataclass(frozen=True)
class LeaveGroupRequest:
    group_id: str
    members: tuple[MemberIdentity, ...] = ()


@dataclass(frozen=True)
class MemberResponse:
    member_id: str
    group_instance_id: str | None = None
    error_code: int = 0


@dataclass(frozen=True)
class LeaveGroupResponse:
    error_code: int = 0
    members: tuple[MemberResponse, ...] = ()
    throttle_time_ms: int = 0


# ---------------------------------------------------------------------- OffsetCommit

@dataclass(frozen=True)
class OffsetCommitRequestPartition:
    partition_index: int
    committed_offset: int
    committed_leader_epoch: int = -1
    committed_metadata: str | None = None


@dataclass(frozen=True)
class OffsetCommitRequestTopic:
    name: str
    partitions: tuple[OffsetCommitRequestPartition, ...] = ()


@dataclass(frozen=True)
class OffsetCommitRequest:
    group_id: str
    topics: tuple[OffsetCommitRequestTopic, ...] = ()
    generation_id_or_member_epoch: int = -1
    member_id: str = UNKNOWN_MEMBER_ID
    group_instance_id: str | None = None


@dataclass(frozen=True)
class OffsetCommitResponsePartition:
    partition_index: int
    error_code: int = 0


@dataclass(frozen=True)
class OffsetCommitResponseTopic:
    name: str
    partitions: tuple[OffsetCommitResponsePartition, ...] = ()


@dataclass(frozen=True)
class OffsetCommitResponse:
    topics: tuple[OffsetCommitResponseTopic, ...] = ()
    throttle_time_ms: int = 0


# ---------------------------------------------------------------------- OffsetFetch

@dataclass(frozen=True)
class OffsetFetchRequestTopics:
    name: str
    partition_indexes: tuple[int, ...] = ()


@dataclass(frozen=True)
class OffsetFetchRequestGroup:
    group_id: str
    topics: tuple[OffsetFetchRequestTopics, ...] | None = None  # None: every partition
    member_id: str | None = None
    member_epoch: int = -1


@dataclass(frozen=True)
class OffsetFetchRequest:
    groups: tuple[OffsetFetchRequestGroup, ...] = ()
    require_stable: bool = False


@dataclass(frozen=True)
class OffsetFetchResponsePartitions:
    partition_index: int
    committed_offset: int = -1
    committed_leader_epoch: int = -1
    metadata: str | None = ""
    error_code: int = 0


@dataclass(frozen=True)
class OffsetFetchResponseTopics:
    name: str
    partitions: tuple[OffsetFetchResponsePartitions, ...] = ()


@dataclass(frozen=True)
class OffsetFetchResponseGroup:
    group_id: str
    topics: tuple[OffsetFetchResponseTopics, ...] = ()
    error_code: int = 0


@dataclass(frozen=True)
class OffsetFetchResponse:
    groups: tuple[OffsetFetchResponseGroup, ...] = ()
    throttle_time_ms: int = 0


# ---------------------------------------------------------------------- OffsetDelete

@dataclass(frozen=True)
class OffsetDeleteRequestPartition:
    partition_index: int


@dataclass(frozen=True)
class OffsetDeleteRequestTopic:
    name: str
    partitions: tuple[OffsetDeleteRequestPartition, ...] = ()


@dataclass(frozen=True)
class OffsetDeleteRequest:
    group_id: str
    topics: tuple[OffsetDeleteRequestTopic, ...] = ()


@dataclass(frozen=True)
class OffsetDeleteResponsePartition:
    partition_index: int
    error_code: int = 0


@dataclass(frozen=True)
class OffsetDeleteResponseTopic:
    name: str
    partitions: tuple[OffsetDeleteResponsePartition, ...] = ()


@dataclass(frozen=True)
class OffsetDeleteResponse:
    error_code: int = 0
    topics: tuple[OffsetDeleteResponseTopic, ...] = ()
    throttle_time_ms: int = 0


# ---------------------------------------------------------------------- admin

@dataclass(frozen=True)
class DescribeGroupsRequest:
    groups: tuple[str, ...] = ()
    include_authorized_operations: bool = False


@dataclass(frozen=True)
class DescribedGroupMember:
    member_id: str
    group_instance_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    member_metadata: bytes = b""
    member_assignment: bytes = b""


@dataclass(frozen=True)
class DescribedGroup:
    group_id: str
    error_code: int = 0
    error_message: str | None = None
    group_state: str = ""
    protocol_type: str = ""
    protocol_data: str = ""
    members: tuple[DescribedGroupMember, ...] = ()
    authorized_operations: int = -2147483648


@dataclass(frozen=True)
class DescribeGroupsResponse:
    groups: tuple[DescribedGroup, ...] = ()
    throttle_time_ms: int = 0


@dataclass(frozen=True)
class ListGroupsRequest:
    states_filter: tuple[str, ...] = ()
    types_filter: tuple[str, ...] = ()


@dataclass(frozen=True)
class ListedGroup:
    group_id: str
    protocol_type: str = ""
    group_state: str = ""
    group_type: str = ""


@dataclass(frozen=True)
class ListGroupsResponse:
    error_code: int = 0
    groups: tuple[ListedGroup, ...] = ()
    throttle_time_ms: int = 0


@dataclass(frozen=True)
class DeleteGroupsRequest:
    groups_names: tuple[str, ...] = ()


@dataclass(frozen=True)
class DeletableGroupResult:
    group_id: str
    error_code: int = 0


@dataclass(frozen=True)
class DeleteGroupsResponse:
    results: tuple[DeletableGroupResult, ...] = ()
    throttle_time_ms: int = 0


# ---------------------------------------------------------------------- whole-request errors

@answers_errors_of(JoinGroupRequest)
def _join_group_error(request: JoinGroupRequest, error: KafkaError) -> JoinGroupResponse:
    return JoinGroupResponse(error_code=error.code, member_id=request.member_id)


@answers_errors_of(SyncGroupRequest)
def _sync_group_error(request: SyncGroupRequest, error: KafkaError) -> SyncGroupResponse:
    # A loading coordinator has lost the rebalance: the member rejoins rather than looking
    # for the coordinator again (Kafka's handleSyncGroup).
    if error.error is Errors.COORDINATOR_LOAD_IN_PROGRESS:
        return SyncGroupResponse(error_code=Errors.REBALANCE_IN_PROGRESS.code)
    return SyncGroupResponse(error_code=error.code)


@answers_errors_of(HeartbeatRequest)
def _heartbeat_error(request: HeartbeatRequest, error: KafkaError) -> HeartbeatResponse:
    # a loading coordinator cannot judge the session; Kafka answers as if it were fine
    if error.error is Errors.COORDINATOR_LOAD_IN_PROGRESS:
        return HeartbeatResponse()
    return HeartbeatResponse(error_code=error.code)


@answers_errors_of(LeaveGroupRequest)
def _leave_group_error(request: LeaveGroupRequest, error: KafkaError) -> LeaveGroupResponse:
    return LeaveGroupResponse(error_code=error.code)


@answers_errors_of(OffsetCommitRequest)
def _offset_commit_error(request: OffsetCommitRequest, error: KafkaError) -> OffsetCommitResponse:
    return OffsetCommitResponse(tuple(
        OffsetCommitResponseTopic(t.name, tuple(OffsetCommitResponsePartition(p.partition_index, error.code)
                                                for p in t.partitions))
        for t in request.topics))


@answers_errors_of(OffsetFetchRequest)
def _offset_fetch_error(request: OffsetFetchRequest, error: KafkaError) -> OffsetFetchResponse:
    return OffsetFetchResponse(tuple(OffsetFetchResponseGroup(g.group_id, error_code=error.code)
                                     for g in request.groups))


@answers_errors_of(OffsetDeleteRequest)
def _offset_delete_error(request: OffsetDeleteRequest, error: KafkaError) -> OffsetDeleteResponse:
    return OffsetDeleteResponse(error_code=error.code)


@answers_errors_of(DescribeGroupsRequest)
def _describe_groups_error(request: DescribeGroupsRequest, error: KafkaError) -> DescribeGroupsResponse:
    return DescribeGroupsResponse(tuple(DescribedGroup(g, error_code=error.code) for g in request.groups))


@answers_errors_of(ListGroupsRequest)
def _list_groups_error(request: ListGroupsRequest, error: KafkaError) -> ListGroupsResponse:
    return ListGroupsResponse(error_code=error.code)


@answers_errors_of(DeleteGroupsRequest)
def _delete_groups_error(request: DeleteGroupsRequest, error: KafkaError) -> DeleteGroupsResponse:
    return DeleteGroupsResponse(tuple(DeletableGroupResult(g, error.code) for g in request.groups_names))
