"""KIP-848 consumer group messages: ConsumerGroupHeartbeat and ConsumerGroupDescribe, as in
Kafka's message JSON schemas (latest versions), with Kafka's defaults.

One deviation: the coordinator's view of topics is name -> partition count, so topic
partitions are named by `topic_name` where Kafka's heartbeat carries a topic id.
"""
from __future__ import annotations

from dataclasses import dataclass
from ..errors import KafkaError
from .errors import answers_errors_of

__all__ = [
    "ConsumerGroupHeartbeatRequestTopicPartitions", "ConsumerGroupHeartbeatRequest",
    "ConsumerGroupHeartbeatResponseTopicPartitions", "ConsumerGroupHeartbeatResponseAssignment",
    "ConsumerGroupHeartbeatResponse",
    "ConsumerGroupDescribeRequest", "ConsumerGroupDescribeResponseTopicPartitions",
    "ConsumerGroupDescribeResponseAssignment", "ConsumerGroupDescribeResponseMember",
    "ConsumerGroupDescribeResponseDescribedGroup", "ConsumerGroupDescribeResponse",
    "LEAVE_GROUP_MEMBER_EPOCH", "LEAVE_GROUP_STATIC_MEMBER_EPOCH", "JOIN_GROUP_MEMBER_EPOCH",
]

JOIN_GROUP_MEMBER_EPOCH = 0
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


# ---------------------------------------------------------------------- ConsumerGroupHeartbeat

@dataclass(frozen=True)
class ConsumerGroupHeartbeatRequestTopicPartitions:
    topic_name: str
    partitions: tuple[int, ...] = ()


@dataclass(frozen=True)
class ConsumerGroupHeartbeatRequest:
    """Fields left at None were not sent: the member sends its subscription, assignor and
    owned partitions only when they changed, or all of them in a full request."""
    group_id: str
    member_id: str = ""
    member_epoch: int = 0
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    topic_partitions: tuple[ConsumerGroupHeartbeatRequestTopicPartitions, ...] | None = None


@dataclass(frozen=True)
class ConsumerGroupHeartbeatResponseTopicPartitions:
    topic_name: str
    partitions: tuple[int, ...] = ()


@dataclass(frozen=True)
class ConsumerGroupHeartbeatResponseAssignment:
    topic_partitions: tuple[ConsumerGroupHeartbeatResponseTopicPartitions, ...] = ()


@dataclass(frozen=True)
class ConsumerGroupHeartbeatResponse:
    error_code: int = 0
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: ConsumerGroupHeartbeatResponseAssignment | None = None
    throttle_time_ms: int = 0


# ---------------------------------------------------------------------- ConsumerGroupDescribe

@dataclass(frozen=True)
class ConsumerGroupDescribeRequest:
    group_ids: tuple[str, ...] = ()
    include_authorized_operations: bool = False


@dataclass(frozen=True)
class ConsumerGroupDescribeResponseTopicPartitions:
    topic_name: str
    partitions: tuple[int, ...] = ()


@dataclass(frozen=True)
class ConsumerGroupDescribeResponseAssignment:
    topic_partitions: tuple[ConsumerGroupDescribeResponseTopicPartitions, ...] = ()


@dataclass(frozen=True)
class ConsumerGroupDescribeResponseMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    member_epoch: int = 0
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    assignment: ConsumerGroupDescribeResponseAssignment = ConsumerGroupDescribeResponseAssignment()
    target_assignment: ConsumerGroupDescribeResponseAssignment = ConsumerGroupDescribeResponseAssignment()
    member_type: int = -1  # 1: consumer protocol, 0: classic protocol, -1: unknown


@dataclass(frozen=True)
class ConsumerGroupDescribeResponseDescribedGroup:
    group_id: str
    error_code: int = 0
    error_message: str | None = None
    group_state: str = ""
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor_name: str = ""
    members: tuple[ConsumerGroupDescribeResponseMember, ...] = ()
    authorized_operations: int = -2147483648


@dataclass(frozen=True)
class ConsumerGroupDescribeResponse:
    groups: tuple[ConsumerGroupDescribeResponseDescribedGroup, ...] = ()
    throttle_time_ms: int = 0


# ---------------------------------------------------------------------- whole-request errors (errors.py)

@answers_errors_of(ConsumerGroupHeartbeatRequest)
def _consumer_group_heartbeat_error(request: ConsumerGroupHeartbeatRequest,
                                    error: KafkaError) -> ConsumerGroupHeartbeatResponse:
    return ConsumerGroupHeartbeatResponse(error.code, error.message)


@answers_errors_of(ConsumerGroupDescribeRequest)
def _consumer_group_describe_error(request: ConsumerGroupDescribeRequest,
                                   error: KafkaError) -> ConsumerGroupDescribeResponse:
    return ConsumerGroupDescribeResponse(tuple(ConsumerGroupDescribeResponseDescribedGroup(g, error.code, error.message)
                                               for g in request.group_ids))
