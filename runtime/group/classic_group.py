"""The classic group model: Kafka's ClassicGroup, ClassicGroupMember and ClassicGroupState.

A classic group's rebalance (members joining, the generation it is building, who still has
to sync) is soft state, as in Kafka, where ClassicGroup is not a timeline structure and its
records are written as checkpoints: the GroupMetadata record holds what survives a restart
(generation, protocol, leader, members with their subscription and assignment). A group
rebuilt from that record is Stable, or Empty when it has no members.

All legal state moves are in `VALID_PREVIOUS_STATES`, checked by `ClassicGroup._transition`.
"""
from __future__ import annotations

import enum
from collections import Counter
from dataclasses import dataclass, field

from ..errors import Errors, KafkaError
from ..messages.group import DescribedGroup, DescribedGroupMember, JoinGroupResponseMember, ListedGroup
from .consumer_protocol import PROTOCOL_TYPE, decode_subscription
from .rebalance_clock import RebalanceClock
from .records import GroupMetadataMember, GroupMetadataValue, group_metadata_record

__all__ = ["ClassicGroupState", "VALID_PREVIOUS_STATES", "IllegalGroupStateTransition", "ClassicGroupMember",
           "ClassicGroup"]


class ClassicGroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


S = ClassicGroupState

# state -> the states it may be entered from (Kafka's ClassicGroupState.validPreviousStates)
VALID_PREVIOUS_STATES: dict[ClassicGroupState, frozenset[ClassicGroupState]] = {
    S.EMPTY: frozenset({S.PREPARING_REBALANCE}),
    S.PREPARING_REBALANCE: frozenset({S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY}),
    S.COMPLETING_REBALANCE: frozenset({S.PREPARING_REBALANCE}),
    S.STABLE: frozenset({S.COMPLETING_REBALANCE}),
    S.DEAD: frozenset({S.STABLE, S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE, S.EMPTY, S.DEAD}),
}


class IllegalGroupStateTransition(RuntimeError):
    """A move the state table does not allow: a bug in the caller, never a client error."""


@dataclass(eq=False)
class ClassicGroupMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]  # (name, metadata) in the member's preference order
    assignment: bytes = b""
    # soft state
    awaiting_join: bool = False
    awaiting_sync: bool = False
    is_new: bool = False

    @property
    def protocol_names(self) -> frozenset[str]:
        return frozenset(name for name, _ in self.protocols)

    def metadata(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        raise ValueError(f"member {self.member_id} does not support protocol {protocol}")

    def matches(self, protocols: tuple[tuple[str, bytes], ...]) -> bool:
        return tuple(protocols) == self.protocols

    def vote(self, candidates: set[str]) -> str:
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")

    def has_satisfied_heartbeat(self) -> bool:
        # New members can expire while awaiting join; known ones waiting in a rebalance are alive.
        return not self.is_new and (self.awaiting_join or self.awaiting_sync)


@dataclass(eq=False)
class ClassicGroup:
    group_id: str
    state: ClassicGroupState = S.EMPTY
    current_state_timestamp: int | None = None
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, ClassicGroupMember] = field(default_factory=dict)
    # soft state
    previous_state: ClassicGroupState | None = None
    static_members: dict[str, str] = field(default_factory=dict)  # group instance id -> member id
    pending_join_members: set[str] = field(default_factory=set)
    pending_sync_members: set[str] = field(default_factory=set)
    new_member_added: bool = False
    subscribed_topics: frozenset[str] | None = None
    _votes: Counter = field(default_factory=Counter)
    _num_awaiting_join: int = 0
    rebalance_clock: RebalanceClock = field(default_factory=RebalanceClock)

    type = "classic"

    # ------------------------------------------------------------------ states

    def _transition(self, to: ClassicGroupState, now_ms: int) -> None:
        if self.state not in VALID_PREVIOUS_STATES[to]:
            raise IllegalGroupStateTransition(
                f"group {self.group_id} cannot move from {self.state} to {to}")
        self.previous_state = self.state
        self.state = to
        self.current_state_timestamp = now_ms
        if to is S.PREPARING_REBALANCE:
            self.rebalance_clock.start(now_ms)
        elif to in (S.EMPTY, S.DEAD):
            self.rebalance_clock.abandon()

    def track_rebalance(self, now_ms: int) -> None:
        """After records of this group were applied: the assignment became durable and the
        group Stable (replay has no clock of its own, so the rebalance ends here)."""
        if self.state is S.STABLE:
            self.rebalance_clock.settle(now_ms)

    def is_in(self, *states: ClassicGroupState) -> bool:
        return self.state in states

    def can_rebalance(self) -> bool:
        return self.state in VALID_PREVIOUS_STATES[S.PREPARING_REBALANCE]

    def is_empty(self) -> bool:
        return self.state is S.EMPTY

    # ------------------------------------------------------------------ members

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def add(self, member: ClassicGroupMember, awaiting_join: bool = False) -> None:
        if member.group_instance_id is not None:
            if member.group_instance_id in self.static_members:
                raise ValueError(f"static member {member.group_instance_id} is already in group {self.group_id}")
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.protocol_type != member.protocol_type or not self.supports_protocols(member.protocol_type,
                                                                                    member.protocol_names):
            raise ValueError(f"member {member.member_id} does not fit group {self.group_id}")
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self._votes.update(member.protocol_names)
        member.awaiting_join = False
        self.set_awaiting_join(member, awaiting_join)
        self.pending_join_members.discard(member.member_id)

    def remove(self, member_id: str) -> None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self._votes.subtract(member.protocol_names)
            if member.awaiting_join:
                self._num_awaiting_join -= 1
            if member.group_instance_id is not None:
                self.static_members.pop(member.group_instance_id, None)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        self.pending_join_members.discard(member_id)
        self.pending_sync_members.discard(member_id)

    def set_awaiting_join(self, member: ClassicGroupMember, awaiting: bool) -> None:
        if awaiting != member.awaiting_join:
            self._num_awaiting_join += 1 if awaiting else -1
            member.awaiting_join = awaiting

    def update_member(self, member: ClassicGroupMember, protocols: tuple[tuple[str, bytes], ...],
                      rebalance_timeout_ms: int, session_timeout_ms: int, awaiting_join: bool) -> None:
        self._votes.subtract(member.protocol_names)
        member.protocols = tuple(protocols)
        self._votes.update(member.protocol_names)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        self.set_awaiting_join(member, awaiting_join)

    def replace_static_member(self, group_instance_id: str, old_member_id: str,
                              new_member_id: str) -> ClassicGroupMember:
        """Give a static member a new member id, keeping everything else (Kafka's
        replaceStaticMember). The caller fences the old id's pending requests."""
        old = self.members.pop(old_member_id)
        if old.awaiting_join:
            self._num_awaiting_join -= 1
        new = ClassicGroupMember(new_member_id, old.group_instance_id, old.client_id, old.client_host,
                                 old.rebalance_timeout_ms, old.session_timeout_ms, old.protocol_type,
                                 old.protocols, old.assignment)
        self.members[new_member_id] = new
        if self.leader_id == old_member_id:
            self.leader_id = new_member_id
        self.static_members[group_instance_id] = new_member_id
        if old_member_id in self.pending_sync_members:
            self.pending_sync_members.discard(old_member_id)
            self.pending_sync_members.add(new_member_id)
        return new

    def static_member_id(self, group_instance_id: str) -> str | None:
        return self.static_members.get(group_instance_id)

    def validate_member(self, member_id: str, group_instance_id: str | None) -> None:
        """UNKNOWN_MEMBER_ID, or FENCED_INSTANCE_ID when a static member's id is stale."""
        if group_instance_id is not None:
            existing = self.static_members.get(group_instance_id)
            if existing is None:
                raise KafkaError(Errors.UNKNOWN_MEMBER_ID, f"unknown static member {group_instance_id}")
            if existing != member_id:
                raise KafkaError(Errors.FENCED_INSTANCE_ID,
                                 f"static member {group_instance_id} now has member id {existing}")
        elif member_id not in self.members:
            raise KafkaError(Errors.UNKNOWN_MEMBER_ID, f"member {member_id} is not in group {self.group_id}")

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self._num_awaiting_join and not self.pending_join_members

    @property
    def num_awaiting_join(self) -> int:
        return self._num_awaiting_join

    def not_yet_rejoined(self) -> list[ClassicGroupMember]:
        return [m for m in self.members.values() if not m.awaiting_join]

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep a leader that rejoined, or pick the first member that did; False if none did."""
        if self.leader_id is None:
            return False
        if self.members[self.leader_id].awaiting_join:
            return True
        for member in self.members.values():
            if member.awaiting_join:
                self.leader_id = member.member_id
                return True
        return False

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # ------------------------------------------------------------------ protocols

    def supports_protocols(self, protocol_type: str, names: frozenset[str] | set[str]) -> bool:
        if self.state is S.EMPTY:
            return bool(protocol_type) and bool(names)
        n = len(self.members)
        return self.protocol_type == protocol_type and any(self._votes[name] == n for name in names)

    def select_protocol(self) -> str:
        """Each member votes for its most preferred protocol that every member supports; the
        protocol with the most votes wins (ties go to the one voted for first)."""
        if not self.members:
            raise ValueError(f"cannot select a protocol for empty group {self.group_id}")
        n = len(self.members)
        candidates = {name for name, count in self._votes.items() if count == n}
        votes = Counter(m.vote(candidates) for m in self.members.values())
        return max(votes, key=votes.__getitem__)

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self._transition(S.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self._transition(S.EMPTY, now_ms)
        self.pending_sync_members.clear()

    # ------------------------------------------------------------------ offsets' view

    def compute_subscribed_topics(self) -> frozenset[str] | None:
        """The topics the members subscribe to, when the group speaks the consumer protocol
        and its subscriptions parse; None when the coordinator cannot know."""
        if self.protocol_type != PROTOCOL_TYPE:
            return None
        if not self.members:
            return frozenset()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        try:
            for member in self.members.values():
                topics.update(decode_subscription(member.metadata(self.protocol_name)).topics)
        except ValueError:
            return None
        return frozenset(topics)

    def is_subscribed_to_topic(self, topic: str) -> bool:
        if self.subscribed_topics is None:
            # unknown subscriptions of a consumer group: assume the worst (keep its offsets)
            return self.protocol_type == PROTOCOL_TYPE
        return topic in self.subscribed_topics

    def offset_expiration_base(self):
        """Kafka's offsetExpirationCondition: a function giving the timestamp an offset's
        retention counts from, or None when this group's offsets do not expire now."""
        if self.protocol_type:
            if self.state is S.EMPTY:
                # retention runs from when the group became Empty
                stamp = self.current_state_timestamp
                return lambda o: stamp if stamp is not None else o.commit_timestamp
            if self.protocol_type == PROTOCOL_TYPE and self.subscribed_topics is not None and self.state is S.STABLE:
                # members are consuming: offsets of topics nobody subscribes to expire from
                # their last commit (the caller skips subscribed topics)
                return lambda o: o.commit_timestamp
            return None
        # a simple group (commits only, no membership): from the last commit
        return lambda o: o.commit_timestamp

    # ------------------------------------------------------------------ Kafka's Group interface

    def validate_offset_commit(self, member_id: str, group_instance_id: str | None, generation_id: int,
                               transactional: bool = False) -> None:
        """`transactional`: a TxnOffsetCommit, which need not name its member (a producer of an
        older client, aiokafka's for one, sends only the group id)."""
        if self.state is S.DEAD:
            raise KafkaError(Errors.COORDINATOR_NOT_AVAILABLE, f"group {self.group_id} is dead")
        if generation_id < 0 and self.state is S.EMPTY:
            return  # a commit from the admin client or a consumer without group management
        if generation_id >= 0 or member_id or group_instance_id is not None:
            self.validate_member(member_id, group_instance_id)
            if generation_id != self.generation_id:
                raise KafkaError(Errors.ILLEGAL_GENERATION,
                                 f"generation {generation_id} is not {self.group_id}'s {self.generation_id}")
        elif not transactional and self.state is not S.EMPTY:
            raise KafkaError(Errors.UNKNOWN_MEMBER_ID, f"group {self.group_id} has members: commit as one of them")
        if not transactional and self.state is S.COMPLETING_REBALANCE:
            # the member knows the new generation but has no assignment yet
            raise KafkaError(Errors.REBALANCE_IN_PROGRESS, f"group {self.group_id} is completing a rebalance")

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> None:
        if self.state is S.DEAD:
            raise KafkaError(Errors.GROUP_ID_NOT_FOUND, f"group {self.group_id} is dead")

    def validate_offset_delete(self) -> None:
        if self.state is S.DEAD:
            raise KafkaError(Errors.GROUP_ID_NOT_FOUND, f"group {self.group_id} is dead")
        if self.state is not S.EMPTY and self.protocol_type != PROTOCOL_TYPE:
            raise KafkaError(Errors.NON_EMPTY_GROUP, f"group {self.group_id} is {self.state}")

    def validate_delete(self) -> None:
        if self.state is S.DEAD:
            raise KafkaError(Errors.GROUP_ID_NOT_FOUND, f"group {self.group_id} is dead")
        if self.state is not S.EMPTY:
            raise KafkaError(Errors.NON_EMPTY_GROUP, f"group {self.group_id} is {self.state}")

    def as_listed_group(self) -> ListedGroup:
        return ListedGroup(self.group_id, self.protocol_type or "", str(self.state), self.type)

    def describe(self) -> DescribedGroup:
        stable = self.state is S.STABLE
        members = tuple(
            DescribedGroupMember(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                 m.metadata(self.protocol_name) if stable else b"", m.assignment)
            for m in self.members.values())
        return DescribedGroup(self.group_id, group_state=str(self.state), protocol_type=self.protocol_type or "",
                              protocol_data=(self.protocol_name or "") if stable else "", members=members)

    # ------------------------------------------------------------------ views and records

    def leader_members(self) -> tuple[JoinGroupResponseMember, ...]:
        return tuple(JoinGroupResponseMember(m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
                     for m in self.members.values())

    def assignment(self) -> dict[str, bytes]:
        return {m.member_id: m.assignment for m in self.members.values()}

    def metadata_record(self, assignment: dict[str, bytes]):
        members = tuple(
            GroupMetadataMember(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                m.rebalance_timeout_ms, m.session_timeout_ms, m.metadata(self.protocol_name),
                                assignment[m.member_id])
            for m in self.members.values())
        return group_metadata_record(self.group_id, self.protocol_type or "", self.generation_id, self.protocol_name,
                                     self.leader_id, self._timestamp(), members)

    def empty_record(self):
        """The record that makes a newly created group durable (Kafka writes it so that a
        group created by a MEMBER_ID_REQUIRED answer survives)."""
        return group_metadata_record(self.group_id, "", 0, None, None, self._timestamp(), ())

    def _timestamp(self) -> int:
        return -1 if self.current_state_timestamp is None else self.current_state_timestamp

    def matches_record(self, value: GroupMetadataValue) -> bool:
        """Whether `value` is a checkpoint of this live group (same generation and members)."""
        return (self.state is not S.DEAD and value.generation == self.generation_id
                and [m.member_id for m in value.members] == list(self.members))

    @classmethod
    def from_record(cls, group_id: str, value: GroupMetadataValue) -> "ClassicGroup":
        group = cls(group_id, S.STABLE if value.members else S.EMPTY,
                    None if value.current_state_timestamp == -1 else value.current_state_timestamp,
                    value.generation, value.protocol_type or None, value.protocol, value.leader)
        for m in value.members:
            rebalance_timeout = m.session_timeout if m.rebalance_timeout == -1 else m.rebalance_timeout
            group.add(ClassicGroupMember(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                         rebalance_timeout, m.session_timeout, value.protocol_type,
                                         ((value.protocol, m.subscription),), m.assignment))
        # add() elects the first member when the record has no leader; the record decides
        group.leader_id = value.leader
        group.subscribed_topics = group.compute_subscribed_topics()
        return group
