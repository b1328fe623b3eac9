"""The KIP-848 consumer group model: Kafka's ConsumerGroup, ConsumerGroupMember and
ConsumerGroupState (the protocol is in consumer.py).

The group state (Empty, Assigning, Reconciling, Stable) is derived from the epochs and the
members, as Kafka derives it. A member that joined with the classic protocol (JoinGroup)
carries its `classic_member_metadata`; the group counts those members and the protocols
they support, for the JoinGroups that follow and for the way back to a classic group.
"""
from __future__ import annotations

import enum
from collections import Counter
from dataclasses import dataclass, field
from typing import Mapping

from ..errors import Errors, KafkaError, raise_if
from ..messages.group import DescribedGroup, DescribedGroupMember, ListedGroup
from . import records as R
from .consumer_protocol import PROTOCOL_TYPE
from .modern import EMPTY, ModernGroup
from .reconcile import MemberState, is_reconciled_to

__all__ = ["ConsumerGroupState", "ConsumerGroupMember", "ConsumerGroup"]


class ConsumerGroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True)
class ConsumerGroupMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: frozenset = frozenset()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned_partitions: Mapping = field(default_factory=dict)
    partitions_pending_revocation: Mapping = field(default_factory=dict)
    # a member that joined with JoinGroup (records.ConsumerGroupClassicMemberMetadata)
    classic_member_metadata: R.ConsumerGroupClassicMemberMetadata | None = None

    @property
    def use_classic_protocol(self) -> bool:
        return self.classic_member_metadata is not None

    @property
    def classic_protocol_names(self) -> tuple[str, ...]:
        meta = self.classic_member_metadata
        return tuple(p.name for p in meta.supported_protocols) if meta is not None else ()

    def same_assignment_state(self, other: "ConsumerGroupMember | None") -> bool:
        if other is self:
            return True
        return (other is not None and self.member_epoch == other.member_epoch
                and self.previous_member_epoch == other.previous_member_epoch and self.state is other.state
                and self.assigned_partitions == other.assigned_partitions
                and self.partitions_pending_revocation == other.partitions_pending_revocation)


class ConsumerGroup(ModernGroup):
    type = "consumer"

    def __init__(self, group_id: str) -> None:
        super().__init__(group_id)
        self.resolved_regexes: dict[str, frozenset[str]] = {}
        self.regex_counts: dict[str, int] = {}  # regex -> members subscribing with it
        # members that speak the classic protocol, and how many of them support each protocol name
        self.num_classic_members = 0
        self.classic_protocol_counts: Counter = Counter()

    # ------------------------------------------------------------------ subscriptions

    def subscribed_topics(self, member, resolved: Mapping[str, frozenset] | None = None) -> frozenset[str]:
        regex = member.subscribed_topic_regex
        if not regex:
            return member.subscribed_topic_names
        matched = (resolved or {}).get(regex)
        if matched is None:
            matched = self.resolved_regexes.get(regex, frozenset())
        return member.subscribed_topic_names | matched

    def regex_counts_with(self, old_member, new_member) -> dict[str, int]:
        counts = dict(self.regex_counts)
        if old_member is not None and old_member.subscribed_topic_regex:
            n = counts.get(old_member.subscribed_topic_regex, 0) - 1
            if n > 0:
                counts[old_member.subscribed_topic_regex] = n
            else:
                counts.pop(old_member.subscribed_topic_regex, None)
        if new_member is not None and new_member.subscribed_topic_regex:
            counts[new_member.subscribed_topic_regex] = counts.get(new_member.subscribed_topic_regex, 0) + 1
        return counts

    def all_subscribed_topics(self, old_member=None, new_member=None,
                              resolved: Mapping[str, frozenset] | None = None) -> set[str]:
        """Every topic the group subscribes to, by name or by regex, if `old_member`
        became `new_member` and the regexes resolved as `resolved` says."""
        if old_member is None and new_member is None:
            names, regexes = self.subscribed_topic_counts, self.regex_counts
        else:
            names = self.subscribed_topic_counts_with(old_member, new_member)
            regexes = self.regex_counts_with(old_member, new_member)
        topics = set(names)
        for regex in regexes:
            matched = (resolved or {}).get(regex)
            topics.update(matched if matched is not None else self.resolved_regexes.get(regex, ()))
        return topics

    def preferred_assignor(self, old_member=None, new_member=None) -> str | None:
        """The server assignor most members ask for (Kafka's computePreferredServerAssignor);
        ties go to the name that sorts first."""
        counts = Counter(m.server_assignor for m in self.members.values() if m.server_assignor)
        if old_member is not None and old_member.server_assignor:
            counts[old_member.server_assignor] -= 1
        if new_member is not None and new_member.server_assignor:
            counts[new_member.server_assignor] += 1
        best = sorted((-n, name) for name, n in counts.items() if n > 0)
        return best[0][1] if best else None

    # ------------------------------------------------------------------ members of the classic protocol

    def supports_classic_protocols(self, protocol_type: str, names) -> bool:
        """Whether a JoinGroup with these protocols fits: a protocol every classic member
        supports (Kafka's supportsClassicProtocols)."""
        if protocol_type != PROTOCOL_TYPE:
            return False
        if not self.members:
            return bool(names)
        return any(self.classic_protocol_counts[n] == self.num_classic_members for n in names)

    def all_use_classic_protocol_except(self, member_ids) -> bool:
        """Whether every member but those named speaks the classic protocol."""
        excluded = sum(1 for m in member_ids if m in self.members and self.members[m].use_classic_protocol)
        return self.num_classic_members - excluded == len(self.members) - len(set(member_ids) & self.members.keys())

    def subscriptions_without(self, members) -> tuple[set[str], set[str]]:
        """What the group subscribes to once `members` are gone: (every topic, by name or
        by a regex someone still uses; the regexes nobody uses any more)."""
        names, regexes = dict(self.subscribed_topic_counts), dict(self.regex_counts)
        for member in members:
            for t in member.subscribed_topic_names:
                names[t] -= 1
            if member.subscribed_topic_regex:
                regexes[member.subscribed_topic_regex] -= 1
        topics = {t for t, n in names.items() if n > 0}
        for regex, n in regexes.items():
            if n > 0:
                topics.update(self.resolved_regexes.get(regex, ()))
        return topics, {r for r, n in regexes.items() if n <= 0}

    def waiting_on_unreleased_partition(self, member) -> bool:
        """Whether a member in UNRELEASED_PARTITIONS still waits for a partition of its
        target that another member owns."""
        if member.state is not MemberState.UNRELEASED_PARTITIONS:
            return False
        for topic, partitions in self.target_assignment.get(member.member_id, EMPTY).items():
            assigned = member.assigned_partitions.get(topic, frozenset())
            if any(p not in assigned and self.owner_of(topic, p) is not None for p in partitions):
                return True
        return False

    def _count_classic(self, member, sign: int) -> None:
        if member is not None and member.use_classic_protocol:
            self.num_classic_members += sign
            for name in member.classic_protocol_names:
                self.classic_protocol_counts[name] += sign

    # ------------------------------------------------------------------ state

    @property
    def state(self) -> ConsumerGroupState:
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        epoch = self.assignment_epoch
        if any(not is_reconciled_to(m, epoch) for m in self.members.values()):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    # ------------------------------------------------------------------ replay helpers

    def apply_member(self, member) -> None:
        old = self.members.get(member.member_id)
        self.regex_counts = self.regex_counts_with(old, member)
        self._count_classic(old, -1)
        self._count_classic(member, 1)
        super().apply_member(member)

    def apply_member_removed(self, member_id: str) -> None:
        old = self.members.get(member_id)
        if old is not None:
            self.regex_counts = self.regex_counts_with(old, None)
            self._count_classic(old, -1)
        super().apply_member_removed(member_id)

    # ------------------------------------------------------------------ Kafka's Group interface

    def validate_offset_commit(self, member_id: str, group_instance_id: str | None, member_epoch: int,
                               transactional: bool = False) -> None:
        if member_epoch < 0 and not self.members:
            return  # the admin client, or a consumer without group management
        if transactional and member_epoch < 0 and not member_id and group_instance_id is None:
            return  # a TxnOffsetCommit need not name its member (older clients send only the group id)
        self._raise_if_not_current(member_id, member_epoch)

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> None:
        if member_epoch < 0 and not member_id:
            return
        self._raise_if_not_current(member_id, member_epoch)

    def _raise_if_not_current(self, member_id: str | None, member_epoch: int) -> None:
        member = self.members.get(member_id)
        if member is None:
            raise KafkaError(Errors.UNKNOWN_MEMBER_ID, f"member {member_id} is not in group {self.group_id}")
        if member_epoch != member.member_epoch:
            # a member of the classic protocol sends its generation, which is its member epoch
            error = Errors.ILLEGAL_GENERATION if member.use_classic_protocol else Errors.STALE_MEMBER_EPOCH
            raise KafkaError(error, f"member epoch {member_epoch} is not {member_id}'s current epoch "
                                    f"{member.member_epoch}")

    def validate_offset_delete(self) -> None:
        """Any consumer group may delete offsets; subscribed topics are refused per
        partition (GROUP_SUBSCRIBED_TO_TOPIC) by the offsets manager."""

    def validate_delete(self) -> None:
        raise_if(bool(self.members), Errors.NON_EMPTY_GROUP, f"group {self.group_id} is {self.state}")

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return topic in self.subscribed_topic_counts or any(
            topic in self.resolved_regexes.get(r, ()) for r in self.regex_counts)

    def offset_expiration_base(self):
        return lambda o: o.commit_timestamp

    def as_listed_group(self) -> ListedGroup:
        return ListedGroup(self.group_id, "consumer", str(self.state), self.type)

    def describe(self) -> DescribedGroup:
        members = tuple(DescribedGroupMember(m.member_id, m.instance_id, m.client_id, m.client_host)
                        for m in self.members.values())
        return DescribedGroup(self.group_id, group_state=str(self.state), protocol_type="consumer", members=members)

    def tombstones(self) -> list:
        """The records that delete this (empty) group."""
        gid = self.group_id
        records = [R.consumer_group_target_assignment_tombstone(gid, m) for m in sorted(self.target_assignment)]
        records += [R.consumer_group_regex_tombstone(gid, r) for r in sorted(self.resolved_regexes)]
        records += [R.consumer_group_target_assignment_epoch_tombstone(gid), R.consumer_group_epoch_tombstone(gid)]
        return records
