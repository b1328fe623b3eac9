"""Share group messages (KIP-932): ShareGroupHeartbeat and ShareGroupDescribe, as in Kafka's
message JSON schemas (latest versions), with Kafka's defaults.

As in the consumer group messages, topic partitions are named by `topic_name` where Kafka
carries a topic id: the group coordinator knows topics by name.
"""
from __future__ import annotations

from dataclasses import dataclass
from ..errors import KafkaError
from .errors import answers_errors_of

__all__ = [
    "ShareGroupHeartbeatRequest", "ShareGroupHeartbeatResponseTopicPartitions",
    "ShareGroupHeartbeatResponseAssignment", "ShareGroupHeartbeatResponse",
    "ShareGroupDescribeRequest", "ShareGroupDescribeResponseTopicPartitions",
    "ShareGroupDescribeResponseAssignment", "ShareGroupDescribeResponseMember",
    "ShareGroupDescribeResponseDescribedGroup", "ShareGroupDescribeResponse",
    "AlterGroupConfigRequest", "AlterGroupConfigResponse", "DescribeGroupConfigRequest",
    "DescribeGroupConfigResponse",
]


# ---------------------------------------------------------------------- ShareGroupHeartbeat

@dataclass(frozen=True)
class ShareGroupHeartbeatRequest:
    """`subscribed_topic_names` is None when unchanged since the last heartbeat; a joining
    member (epoch 0) must send it. A joining member without an id gets one."""
    group_id: str
    member_id: str = ""
    member_epoch: int = 0
    rack_id: str | None = None
    subscribed_topic_names: tuple[str, ...] | None = None


@dataclass(frozen=True)
class ShareGroupHeartbeatResponseTopicPartitions:
    topic_name: str
    partitions: tuple[int, ...] = ()


@dataclass(frozen=True)
class ShareGroupHeartbeatResponseAssignment:
    topic_partitions: tuple[ShareGroupHeartbeatResponseTopicPartitions, ...] = ()


@dataclass(frozen=True)
class ShareGroupHeartbeatResponse:
    error_code: int = 0
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: ShareGroupHeartbeatResponseAssignment | None = None
    throttle_time_ms: int = 0


# ---------------------------------------------------------------------- ShareGroupDescribe

@dataclass(frozen=True)
class ShareGroupDescribeRequest:
    group_ids: tuple[str, ...] = ()
    include_authorized_operations: bool = False


@dataclass(frozen=True)
class ShareGroupDescribeResponseTopicPartitions:
    topic_name: str
    partitions: tuple[int, ...] = ()


@dataclass(frozen=True)
class ShareGroupDescribeResponseAssignment:
    topic_partitions: tuple[ShareGroupDescribeResponseTopicPartitions, ...] = ()


@dataclass(frozen=True)
class ShareGroupDescribeResponseMember:
    member_id: str
    rack_id: str | None = None
    member_epoch: int = 0
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    assignment: ShareGroupDescribeResponseAssignment = ShareGroupDescribeResponseAssignment()


@dataclass(frozen=True)
class ShareGroupDescribeResponseDescribedGroup:
    group_id: str
    error_code: int = 0
    error_message: str | None = None
    group_state: str = ""
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor_name: str = ""
    members: tuple[ShareGroupDescribeResponseMember, ...] = ()
    authorized_operations: int = -2147483648


@dataclass(frozen=True)
class ShareGroupDescribeResponse:
    groups: tuple[ShareGroupDescribeResponseDescribedGroup, ...] = ()
    throttle_time_ms: int = 0


# Dynamic group configs: Kafka's IncrementalAlterConfigs and DescribeConfigs on a GROUP
# resource, narrowed to one group.

@dataclass(frozen=True)
class AlterGroupConfigRequest:
    group_id: str
    configs: dict  # name -> value (SET), or None (DELETE)
    validate_only: bool = False


@dataclass(frozen=True)
class AlterGroupConfigResponse:
    group_id: str
    error_code: int = 0
    error_message: str | None = None


@dataclass(frozen=True)
class DescribeGroupConfigRequest:
    group_id: str


@dataclass(frozen=True)
class DescribeGroupConfigResponse:
    group_id: str
    error_code: int = 0
    error_message: str | None = None
    configs: tuple = ()  # runtime.group.configs.GroupConfigEntry(name, value, is_default)


# Kafka's AlterShareGroupOffsets (and DeleteShareGroupOffsets, a start offset of -1), decided
# by the group coordinator; all of a request's partitions succeed or fail together, so the
# error is the response's.

@dataclass(frozen=True)
class AlterShareGroupOffsetsRequest:
    group_id: str
    offsets: dict  # topic name -> {partition: start offset, or -1 to forget it}


@dataclass(frozen=True)
class AlterShareGroupOffsetsResponse:
    error_code: int = 0
    error_message: str | None = None


# ---------------------------------------------------------------------- whole-request errors (errors.py)

@answers_errors_of(ShareGroupHeartbeatRequest)
def _share_group_heartbeat_error(request: ShareGroupHeartbeatRequest, error: KafkaError) -> ShareGroupHeartbeatResponse:
    return ShareGroupHeartbeatResponse(error.code, error.message)


@answers_errors_of(ShareGroupDescribeRequest)
def _share_group_describe_error(request: ShareGroupDescribeRequest, error: KafkaError) -> ShareGroupDescribeResponse:
    return ShareGroupDescribeResponse(tuple(ShareGroupDescribeResponseDescribedGroup(g, error.code, error.message)
                                            for g in request.group_ids))


@answers_errors_of(AlterGroupConfigRequest)
def _alter_group_config_error(request: AlterGroupConfigRequest, error: KafkaError) -> AlterGroupConfigResponse:
    return AlterGroupConfigResponse(request.group_id, error.code, error.message)


@answers_errors_of(DescribeGroupConfigRequest)
def _describe_group_config_error(request: DescribeGroupConfigRequest,
                                 error: KafkaError) -> DescribeGroupConfigResponse:
    return DescribeGroupConfigResponse(request.group_id, error.code, error.message)


@answers_errors_of(AlterShareGroupOffsetsRequest)
def _alter_share_group_offsets_error(request: AlterShareGroupOffsetsRequest,
                                     error: KafkaError) -> AlterShareGroupOffsetsResponse:
    return AlterShareGroupOffsetsResponse(error.code, error.message)
