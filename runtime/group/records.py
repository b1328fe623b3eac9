"""Records of the group log (Kafka's __consumer_offsets), with Kafka's record type ids.

Each record type keeps Kafka's key and value fields (OffsetCommitKey/Value,
GroupMetadataKey/Value). A value of None is a tombstone. Other group protocols append their
record classes at the end of this module.
"""
from __future__ import annotations

from typing import NamedTuple

from ..codec import Record, register

__all__ = [
    "OffsetCommitKey", "OffsetCommitValue", "GroupMetadataKey", "GroupMetadataValue", "GroupMetadataMember",
    "offset_commit_record", "offset_commit_tombstone", "group_metadata_record", "group_metadata_tombstone",
    "PendingTxnOffsetCommitKey", "PendingTxnOffsetCommitValue", "pending_txn_offset_commit_record",
    "pending_txn_offset_commit_tombstone",
]


class OffsetCommitKey(NamedTuple):
    group: str
    topic: str
    partition: int


class OffsetCommitValue(NamedTuple):
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = -1  # -1: expiry follows offsets.retention.minutes (no per-commit retention)


class GroupMetadataKey(NamedTuple):
    group: str


class GroupMetadataMember(NamedTuple):
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


class GroupMetadataValue(NamedTuple):
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[GroupMetadataMember, ...]
    __nested__ = {"members": [GroupMetadataMember]}


register(1, OffsetCommitKey, OffsetCommitValue)
register(2, GroupMetadataKey, GroupMetadataValue)


def offset_commit_record(group: str, topic: str, partition: int, offset: int, leader_epoch: int, metadata: str,
                         commit_timestamp: int, expire_timestamp: int = -1) -> Record:
    return Record(OffsetCommitKey(group, topic, partition),
                  OffsetCommitValue(offset, leader_epoch, metadata, commit_timestamp, expire_timestamp))


def offset_commit_tombstone(group: str, topic: str, partition: int) -> Record:
    return Record(OffsetCommitKey(group, topic, partition))


# Transactional offset commits (TxnOffsetCommit): pending until the transaction's marker. The
# marker turns them into OffsetCommit records (commit) and tombstones them, so that a
# compacted log replays to the same state.
class PendingTxnOffsetCommitKey(NamedTuple):
    group: str
    topic: str
    partition: int
    producer_id: int


class PendingTxnOffsetCommitValue(NamedTuple):
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    producer_epoch: int


register(18, PendingTxnOffsetCommitKey, PendingTxnOffsetCommitValue)


def pending_txn_offset_commit_record(group: str, topic: str, partition: int, producer_id: int,
                                     value: PendingTxnOffsetCommitValue) -> Record:
    return Record(PendingTxnOffsetCommitKey(group, topic, partition, producer_id), value)


def pending_txn_offset_commit_tombstone(group: str, topic: str, partition: int, producer_id: int) -> Record:
    return Record(PendingTxnOffsetCommitKey(group, topic, partition, producer_id))


def group_metadata_record(group: str, protocol_type: str, generation: int, protocol: str | None,
                          leader: str | None, current_state_timestamp: int,
                          members: tuple[GroupMetadataMember, ...] | list = ()) -> Record:
    return Record(GroupMetadataKey(group),
                  GroupMetadataValue(protocol_type, generation, protocol, leader, current_state_timestamp,
                                     tuple(members)))


def group_metadata_tombstone(group: str) -> Record:
    return Record(GroupMetadataKey(group))


# KIP-848 consumer groups
#
# Kafka's ConsumerGroup* records, keyed by group (and member). Topics are named, not
# identified by topic id (the coordinator knows topics as name -> partition count). The
# group's subscription metadata is the `metadata_hash` of ConsumerGroupMetadataValue, as in
# Kafka 4.1+, so type 4 (ConsumerGroupPartitionMetadata) is not written.

class ConsumerGroupTopicPartitions(NamedTuple):
    topic_name: str
    partitions: tuple[int, ...]


class ConsumerGroupMetadataKey(NamedTuple):
    group_id: str


class ConsumerGroupMetadataValue(NamedTuple):
    epoch: int
    metadata_hash: int = 0


class ConsumerGroupMemberMetadataKey(NamedTuple):
    group_id: str
    member_id: str


class ConsumerGroupClassicProtocol(NamedTuple):
    """One protocol of a JoinGroup: its name and metadata (the member's subscription)."""
    name: str
    metadata: bytes


class ConsumerGroupClassicMemberMetadata(NamedTuple):
    """What a member that speaks the classic protocol inside a consumer group keeps of its
    JoinGroup (Kafka's ClassicMemberMetadata): its session timeout, and its protocols in
    its order of preference, so that the group can go back to a classic group."""
    session_timeout_ms: int
    supported_protocols: tuple[ConsumerGroupClassicProtocol, ...]
    __nested__ = {"supported_protocols": [ConsumerGroupClassicProtocol]}


class ConsumerGroupMemberMetadataValue(NamedTuple):
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    classic_member_metadata: ConsumerGroupClassicMemberMetadata | None = None  # None: the consumer protocol
    __nested__ = {"classic_member_metadata": ConsumerGroupClassicMemberMetadata}


class ConsumerGroupTargetAssignmentMetadataKey(NamedTuple):
    group_id: str


class ConsumerGroupTargetAssignmentMetadataValue(NamedTuple):
    assignment_epoch: int


class ConsumerGroupTargetAssignmentMemberKey(NamedTuple):
    group_id: str
    member_id: str


class ConsumerGroupTargetAssignmentMemberValue(NamedTuple):
    topic_partitions: tuple[ConsumerGroupTopicPartitions, ...]
    __nested__ = {"topic_partitions": [ConsumerGroupTopicPartitions]}


class ConsumerGroupCurrentMemberAssignmentKey(NamedTuple):
    group_id: str
    member_id: str


class ConsumerGroupCurrentMemberAssignmentValue(NamedTuple):
    member_epoch: int
    previous_member_epoch: int
    state: int  # MemberState's byte value
    assigned_partitions: tuple[ConsumerGroupTopicPartitions, ...]
    partitions_pending_revocation: tuple[ConsumerGroupTopicPartitions, ...]
    __nested__ = {"assigned_partitions": [ConsumerGroupTopicPartitions],
                  "partitions_pending_revocation": [ConsumerGroupTopicPartitions]}


class ConsumerGroupRegularExpressionKey(NamedTuple):
    group_id: str
    regular_expression: str


class ConsumerGroupRegularExpressionValue(NamedTuple):
    topics: tuple[str, ...]  # the topics the expression matched, sorted
    timestamp: int  # when it was resolved


register(3, ConsumerGroupMetadataKey, ConsumerGroupMetadataValue)
register(5, ConsumerGroupMemberMetadataKey, ConsumerGroupMemberMetadataValue)
register(6, ConsumerGroupTargetAssignmentMetadataKey, ConsumerGroupTargetAssignmentMetadataValue)
register(7, ConsumerGroupTargetAssignmentMemberKey, ConsumerGroupTargetAssignmentMemberValue)
register(8, ConsumerGroupCurrentMemberAssignmentKey, ConsumerGroupCurrentMemberAssignmentValue)
register(16, ConsumerGroupRegularExpressionKey, ConsumerGroupRegularExpressionValue)

__all__ += [
    "ConsumerGroupTopicPartitions", "ConsumerGroupMetadataKey", "ConsumerGroupMetadataValue",
    "ConsumerGroupClassicProtocol", "ConsumerGroupClassicMemberMetadata", "ConsumerGroupMemberMetadataKey",
    "ConsumerGroupMemberMetadataValue",
    "ConsumerGroupTargetAssignmentMetadataKey", "ConsumerGroupTargetAssignmentMetadataValue",
    "ConsumerGroupTargetAssignmentMemberKey", "ConsumerGroupTargetAssignmentMemberValue",
    "ConsumerGroupCurrentMemberAssignmentKey", "ConsumerGroupCurrentMemberAssignmentValue",
    "ConsumerGroupRegularExpressionKey", "ConsumerGroupRegularExpressionValue",
]


def _topic_partitions(assignment) -> tuple[ConsumerGroupTopicPartitions, ...]:
    """{topic: partitions} as records hold it: topics and partitions sorted."""
    return tuple(ConsumerGroupTopicPartitions(t, tuple(sorted(ps))) for t, ps in sorted(assignment.items()) if ps)


def consumer_group_epoch_record(group_id: str, epoch: int, metadata_hash: int) -> Record:
    return Record(ConsumerGroupMetadataKey(group_id), ConsumerGroupMetadataValue(epoch, metadata_hash))


def consumer_group_epoch_tombstone(group_id: str) -> Record:
    return Record(ConsumerGroupMetadataKey(group_id))


def consumer_group_member_subscription_record(group_id: str, member) -> Record:
    return Record(ConsumerGroupMemberMetadataKey(group_id, member.member_id),
                  ConsumerGroupMemberMetadataValue(member.instance_id, member.rack_id, member.client_id,
                                                   member.client_host, tuple(sorted(member.subscribed_topic_names)),
                                                   member.subscribed_topic_regex, member.rebalance_timeout_ms,
                                                   member.server_assignor, member.classic_member_metadata))


def consumer_group_member_subscription_tombstone(group_id: str, member_id: str) -> Record:
    return Record(ConsumerGroupMemberMetadataKey(group_id, member_id))


def consumer_group_target_assignment_record(group_id: str, member_id: str, assignment) -> Record:
    return Record(ConsumerGroupTargetAssignmentMemberKey(group_id, member_id),
                  ConsumerGroupTargetAssignmentMemberValue(_topic_partitions(assignment)))


def consumer_group_target_assignment_tombstone(group_id: str, member_id: str) -> Record:
    return Record(ConsumerGroupTargetAssignmentMemberKey(group_id, member_id))


def consumer_group_target_assignment_epoch_record(group_id: str, epoch: int) -> Record:
    return Record(ConsumerGroupTargetAssignmentMetadataKey(group_id), ConsumerGroupTargetAssignmentMetadataValue(epoch))


def consumer_group_target_assignment_epoch_tombstone(group_id: str) -> Record:
    return Record(ConsumerGroupTargetAssignmentMetadataKey(group_id))


def consumer_group_current_assignment_record(group_id: str, member) -> Record:
    return Record(ConsumerGroupCurrentMemberAssignmentKey(group_id, member.member_id),
                  ConsumerGroupCurrentMemberAssignmentValue(
                      member.member_epoch, member.previous_member_epoch, member.state.value,
                      _topic_partitions(member.assigned_partitions),
                      _topic_partitions(member.partitions_pending_revocation)))


def consumer_group_current_assignment_tombstone(group_id: str, member_id: str) -> Record:
    return Record(ConsumerGroupCurrentMemberAssignmentKey(group_id, member_id))


def consumer_group_regex_record(group_id: str, regex: str, topics, timestamp: int) -> Record:
    return Record(ConsumerGroupRegularExpressionKey(group_id, regex),
                  ConsumerGroupRegularExpressionValue(tuple(sorted(topics)), timestamp))


def consumer_group_regex_tombstone(group_id: str, regex: str) -> Record:
    return Record(ConsumerGroupRegularExpressionKey(group_id, regex))


__all__ += [
    "consumer_group_epoch_record", "consumer_group_epoch_tombstone",
    "consumer_group_member_subscription_record", "consumer_group_member_subscription_tombstone",
    "consumer_group_target_assignment_record", "consumer_group_target_assignment_tombstone",
    "consumer_group_target_assignment_epoch_record", "consumer_group_target_assignment_epoch_tombstone",
    "consumer_group_current_assignment_record", "consumer_group_current_assignment_tombstone",
    "consumer_group_regex_record", "consumer_group_regex_tombstone",
]


# Share groups (KIP-932)
#
# Kafka's ShareGroup* records, keyed by group (and member), with topic partitions held as
# the consumer group records hold them (by topic name). As for consumer groups, the
# subscription metadata is the metadata hash of ShareGroupMetadataValue, so type 9
# (ShareGroupPartitionMetadata) is not written. ShareGroupStatePartitionMetadata names
# topics by id as well: the share coordinator keys its state by topic id, and a topic
# deleted and created again under the same name must not inherit the old one's state.

class ShareGroupMetadataKey(NamedTuple):
    group_id: str


class ShareGroupMetadataValue(NamedTuple):
    epoch: int
    metadata_hash: int = 0


class ShareGroupMemberMetadataKey(NamedTuple):
    group_id: str
    member_id: str


class ShareGroupMemberMetadataValue(NamedTuple):
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]


class ShareGroupTargetAssignmentMetadataKey(NamedTuple):
    group_id: str


class ShareGroupTargetAssignmentMetadataValue(NamedTuple):
    assignment_epoch: int


class ShareGroupTargetAssignmentMemberKey(NamedTuple):
    group_id: str
    member_id: str


class ShareGroupTargetAssignmentMemberValue(NamedTuple):
    topic_partitions: tuple[ConsumerGroupTopicPartitions, ...]
    __nested__ = {"topic_partitions": [ConsumerGroupTopicPartitions]}


class ShareGroupCurrentMemberAssignmentKey(NamedTuple):
    group_id: str
    member_id: str


class ShareGroupCurrentMemberAssignmentValue(NamedTuple):
    member_epoch: int
    previous_member_epoch: int
    state: int  # MemberState's byte value (always STABLE: share groups never revoke)
    assigned_partitions: tuple[ConsumerGroupTopicPartitions, ...]
    __nested__ = {"assigned_partitions": [ConsumerGroupTopicPartitions]}


class ShareGroupStateTopicPartitions(NamedTuple):
    topic_id: str
    topic_name: str
    partitions: tuple[int, ...]
    timestamp: int = -1  # initialising topics: when their initialisation was last asked for


class ShareGroupStateTopic(NamedTuple):
    topic_id: str
    topic_name: str


class ShareGroupStatePartitionMetadataKey(NamedTuple):
    group_id: str


class ShareGroupStatePartitionMetadataValue(NamedTuple):
    initializing_topics: tuple[ShareGroupStateTopicPartitions, ...]
    initialized_topics: tuple[ShareGroupStateTopicPartitions, ...]
    deleting_topics: tuple[ShareGroupStateTopic, ...] = ()
    __nested__ = {"initializing_topics": [ShareGroupStateTopicPartitions],
                  "initialized_topics": [ShareGroupStateTopicPartitions],
                  "deleting_topics": [ShareGroupStateTopic]}


register(10, ShareGroupMemberMetadataKey, ShareGroupMemberMetadataValue)
register(11, ShareGroupMetadataKey, ShareGroupMetadataValue)
register(12, ShareGroupTargetAssignmentMetadataKey, ShareGroupTargetAssignmentMetadataValue)
register(13, ShareGroupTargetAssignmentMemberKey, ShareGroupTargetAssignmentMemberValue)
register(14, ShareGroupCurrentMemberAssignmentKey, ShareGroupCurrentMemberAssignmentValue)
register(15, ShareGroupStatePartitionMetadataKey, ShareGroupStatePartitionMetadataValue)

__all__ += [
    "ShareGroupMetadataKey", "ShareGroupMetadataValue", "ShareGroupMemberMetadataKey",
    "ShareGroupMemberMetadataValue", "ShareGroupTargetAssignmentMetadataKey",
    "ShareGroupTargetAssignmentMetadataValue", "ShareGroupTargetAssignmentMemberKey",
    "ShareGroupTargetAssignmentMemberValue", "ShareGroupCurrentMemberAssignmentKey",
    "ShareGroupCurrentMemberAssignmentValue", "ShareGroupStateTopicPartitions", "ShareGroupStateTopic",
    "ShareGroupStatePartitionMetadataKey", "ShareGroupStatePartitionMetadataValue",
]


def share_group_epoch_record(group_id: str, epoch: int, metadata_hash: int) -> Record:
    return Record(ShareGroupMetadataKey(group_id), ShareGroupMetadataValue(epoch, metadata_hash))


def share_group_epoch_tombstone(group_id: str) -> Record:
    return Record(ShareGroupMetadataKey(group_id))


def share_group_member_subscription_record(group_id: str, member) -> Record:
    return Record(ShareGroupMemberMetadataKey(group_id, member.member_id),
                  ShareGroupMemberMetadataValue(member.rack_id, member.client_id, member.client_host,
                                                tuple(sorted(member.subscribed_topic_names))))


def share_group_member_subscription_tombstone(group_id: str, member_id: str) -> Record:
    return Record(ShareGroupMemberMetadataKey(group_id, member_id))


def share_group_target_assignment_record(group_id: str, member_id: str, assignment) -> Record:
    return Record(ShareGroupTargetAssignmentMemberKey(group_id, member_id),
                  ShareGroupTargetAssignmentMemberValue(_topic_partitions(assignment)))


def share_group_target_assignment_tombstone(group_id: str, member_id: str) -> Record:
    return Record(ShareGroupTargetAssignmentMemberKey(group_id, member_id))


def share_group_target_assignment_epoch_record(group_id: str, epoch: int) -> Record:
    return Record(ShareGroupTargetAssignmentMetadataKey(group_id), ShareGroupTargetAssignmentMetadataValue(epoch))


def share_group_target_assignment_epoch_tombstone(group_id: str) -> Record:
    return Record(ShareGroupTargetAssignmentMetadataKey(group_id))


def share_group_current_assignment_record(group_id: str, member) -> Record:
    return Record(ShareGroupCurrentMemberAssignmentKey(group_id, member.member_id),
                  ShareGroupCurrentMemberAssignmentValue(member.member_epoch, member.previous_member_epoch,
                                                         member.state.value,
                                                         _topic_partitions(member.assigned_partitions)))


def share_group_current_assignment_tombstone(group_id: str, member_id: str) -> Record:
    return Record(ShareGroupCurrentMemberAssignmentKey(group_id, member_id))


def share_group_state_partition_metadata_record(group_id: str, initializing, initialized, deleting=()) -> Record:
    """`initializing` and `initialized`: {topic id: (topic name, partitions, timestamp)};
    `deleting`: {topic id: topic name}. Topics and partitions are written sorted."""
    return Record(ShareGroupStatePartitionMetadataKey(group_id), ShareGroupStatePartitionMetadataValue(
        tuple(ShareGroupStateTopicPartitions(tid, name, tuple(sorted(ps)), ts)
              for tid, (name, ps, ts) in sorted(initializing.items())),
        tuple(ShareGroupStateTopicPartitions(tid, name, tuple(sorted(ps)))
              for tid, (name, ps, _) in sorted(initialized.items())),
        tuple(ShareGroupStateTopic(tid, name) for tid, name in sorted(dict(deleting).items()))))


def share_group_state_partition_metadata_tombstone(group_id: str) -> Record:
    return Record(ShareGroupStatePartitionMetadataKey(group_id))


__all__ += [
    "share_group_epoch_record", "share_group_epoch_tombstone",
    "share_group_member_subscription_record", "share_group_member_subscription_tombstone",
    "share_group_target_assignment_record", "share_group_target_assignment_tombstone",
    "share_group_target_assignment_epoch_record", "share_group_target_assignment_epoch_tombstone",
    "share_group_current_assignment_record", "share_group_current_assignment_tombstone",
    "share_group_state_partition_metadata_record", "share_group_state_partition_metadata_tombstone",
]


# Dynamic group configs (Kafka's GROUP config resource, set with incrementalAlterConfigs)

class GroupConfigKey(NamedTuple):
    group_id: str


class GroupConfigValue(NamedTuple):
    configs: dict  # config name -> its validated value (int or str)


register(17, GroupConfigKey, GroupConfigValue)


def group_config_record(group_id: str, configs) -> Record:
    return Record(GroupConfigKey(group_id), GroupConfigValue(dict(sorted(configs.items()))))


def group_config_tombstone(group_id: str) -> Record:
    return Record(GroupConfigKey(group_id))


__all__ += ["GroupConfigKey", "GroupConfigValue", "group_config_record", "group_config_tombstone"]
