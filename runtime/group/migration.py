"""Online migration between a classic group and a consumer group (KIP-848's upgrade and
downgrade paths: Kafka's ConsumerGroup.fromClassicGroup, ClassicGroup.fromConsumerGroup and
the conversion records of GroupMetadataManager).

A classic group that speaks the consumer protocol becomes a consumer group when a member
joins it with ConsumerGroupHeartbeat: its members keep their last assignment as their
current and target assignment, at a member epoch equal to the generation, and stay in the
group as members of the classic protocol. A consumer group goes back to a classic group
when members leave and only members of the classic protocol stay (or one of them replaces
the last member of the consumer protocol under its instance id): the classic group's
generation is the group epoch and each member's assignment its target, and it rebalances
at once when members left.

The conversion is one write whose records delete the old group and create the new one
(tombstones first), so that a load replays the same change. `group.consumer.migration.policy`
says which ways are allowed.
"""
from __future__ import annotations

import enum
import struct
from typing import Mapping

from ..errors import Errors, KafkaError
from . import records as R
from .classic_group import ClassicGroup, ClassicGroupMember, ClassicGroupState
from .consumer_group import ConsumerGroup, ConsumerGroupMember
from .consumer_protocol import PROTOCOL_TYPE, decode_assignment, decode_subscription, encode_assignment
from .modern import EMPTY, metadata_hash
from .reconcile import MemberState

__all__ = ["MIGRATION_POLICY_CONFIG", "MigrationPolicy", "consumer_group_from_classic", "consumer_group_records",
           "consumer_group_tombstones", "classic_group_from_consumer", "classic_member_metadata",
           "subscription_version"]

MIGRATION_POLICY_CONFIG = "group.consumer.migration.policy"


class MigrationPolicy(enum.Enum):
    """Kafka's ConsumerGroupMigrationPolicy; Kafka 4.x defaults to BIDIRECTIONAL."""
    BIDIRECTIONAL = "bidirectional"
    UPGRADE = "upgrade"
    DOWNGRADE = "downgrade"
    DISABLED = "disabled"

    @classmethod
    def from_config(cls, config: Mapping) -> "MigrationPolicy":
        value = config.get(MIGRATION_POLICY_CONFIG, cls.BIDIRECTIONAL.value)
        try:
            return cls(str(value).strip().lower())
        except ValueError:
            raise KafkaError(Errors.INVALID_CONFIG, f"{MIGRATION_POLICY_CONFIG} must be one of "
                                                    f"{', '.join(p.value for p in cls)}, not {value!r}") from None

    @property
    def upgrade_enabled(self) -> bool:
        return self in (MigrationPolicy.BIDIRECTIONAL, MigrationPolicy.UPGRADE)

    @property
    def downgrade_enabled(self) -> bool:
        return self in (MigrationPolicy.BIDIRECTIONAL, MigrationPolicy.DOWNGRADE)


def classic_member_metadata(session_timeout_ms: int, protocols) -> R.ConsumerGroupClassicMemberMetadata:
    """`protocols`: (name, metadata) pairs in the member's order of preference."""
    return R.ConsumerGroupClassicMemberMetadata(
        session_timeout_ms, tuple(R.ConsumerGroupClassicProtocol(n, bytes(m)) for n, m in protocols))


# ---------------------------------------------------------------------- classic -> consumer

def consumer_group_from_classic(classic: ClassicGroup, topics: Mapping[str, int]):
    """The consumer group a classic group becomes. Raises ValueError when a member's
    subscription or assignment does not decode, when an assignment carries user data (a
    custom assignor's, which the server assignor would lose: Kafka refuses it too), or when
    two members hold one partition."""
    group = ConsumerGroup(classic.group_id)
    epoch = classic.generation_id
    group.group_epoch = group.assignment_epoch = epoch
    for m in classic.members.values():
        metadata = m.metadata(classic.protocol_name) if classic.protocol_name else m.protocols[0][1]
        subscription = decode_subscription(metadata)
        assignment = decode_assignment(m.assignment)
        if assignment.user_data:
            raise ValueError(f"member {m.member_id}'s assignment carries a custom assignor's user data")
        assigned = {t: frozenset(ps) for t, ps in assignment.assigned_partitions
                    if ps and t in topics}  # as Kafka, topics the coordinator does not know are left out
        member = ConsumerGroupMember(
            m.member_id, instance_id=m.group_instance_id, rack_id=subscription.rack_id, client_id=m.client_id,
            client_host=m.client_host, subscribed_topic_names=frozenset(subscription.topics),
            rebalance_timeout_ms=m.rebalance_timeout_ms, member_epoch=epoch, previous_member_epoch=epoch,
            state=MemberState.STABLE, assigned_partitions=assigned,
            classic_member_metadata=classic_member_metadata(m.session_timeout_ms, m.protocols))
        group.apply_member(member)
        group.apply_current_assignment(member)
        group.target_assignment[m.member_id] = assigned
    group.metadata_hash = metadata_hash(group.all_subscribed_topics(), topics)
    return group


def consumer_group_records(group) -> list:
    """The records that create `group` (Kafka's createConsumerGroupRecords)."""
    gid = group.group_id
    members = list(group.members.values())
    records = [R.consumer_group_member_subscription_record(gid, m) for m in members]
    records.append(R.consumer_group_epoch_record(gid, group.group_epoch, group.metadata_hash))
    records += [R.consumer_group_target_assignment_record(gid, m.member_id, group.target_of(m.member_id))
                for m in members]
    records.append(R.consumer_group_target_assignment_epoch_record(gid, group.assignment_epoch))
    records += [R.consumer_group_current_assignment_record(gid, m) for m in members]
    return records


# ---------------------------------------------------------------------- consumer -> classic

def consumer_group_tombstones(group, joining_member=None) -> list:
    """The records that delete `group` with its members (Kafka's createGroupTombstoneRecords;
    with `joining_member`, ...WithReplacedMember: the member that replaced the static member
    of the same instance id in this same write is deleted under its own id)."""
    gid = group.group_id
    replaced = group.static_members.get(joining_member.instance_id) if joining_member is not None else None
    ids = [joining_member.member_id if m == replaced else m for m in group.members]
    records = [R.consumer_group_current_assignment_tombstone(gid, m) for m in ids]
    records += [R.consumer_group_target_assignment_tombstone(gid, m) for m in ids]
    records.append(R.consumer_group_target_assignment_epoch_tombstone(gid))
    records += [R.consumer_group_member_subscription_tombstone(gid, m) for m in ids]
    records += [R.consumer_group_regex_tombstone(gid, r) for r in sorted(group.resolved_regexes)]
    records.append(R.consumer_group_epoch_tombstone(gid))
    return records


def classic_group_from_consumer(group, leaving_member_ids, joining_member, now_ms: int) -> ClassicGroup:
    """The classic group a consumer group becomes without `leaving_member_ids`, and with
    `joining_member` (of the classic protocol) in the place of the static member of its
    instance id, which it replaces in this write (or None). Every member's assignment is its
    target (the joining member's, the replaced one's), in the consumer protocol version its
    subscription uses."""
    classic = ClassicGroup(group.group_id, ClassicGroupState.STABLE, now_ms, group.group_epoch, PROTOCOL_TYPE)
    replaced = group.static_members.get(joining_member.instance_id) if joining_member is not None else None
    members = [m for m in group.members.values() if m.member_id not in leaving_member_ids and m.member_id != replaced]
    if joining_member is not None:
        members.append(joining_member)
    for m in members:
        meta = m.classic_member_metadata
        classic.add(ClassicGroupMember(m.member_id, m.instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                                       meta.session_timeout_ms, PROTOCOL_TYPE,
                                       tuple((p.name, p.metadata) for p in meta.supported_protocols)))
    classic.protocol_name = classic.select_protocol()
    classic.subscribed_topics = classic.compute_subscribed_topics()
    for member in classic.members.values():
        source = member.member_id
        if joining_member is not None and source == joining_member.member_id:
            source = replaced
        target = group.target_assignment.get(source, EMPTY)
        member.assignment = encode_assignment(tuple((t, tuple(sorted(ps))) for t, ps in sorted(target.items())),
                                              version=subscription_version(member.metadata(classic.protocol_name)))
    return classic


def subscription_version(metadata: bytes) -> int:
    """The consumer protocol version a subscription is written in (the newest this
    coordinator writes, when it is newer): its assignment is written in the same."""
    if len(metadata) < 2:
        return 0
    return max(0, min(struct.unpack_from(">h", metadata)[0], 3))
