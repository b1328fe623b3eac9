"""The machinery every KIP-848 "modern" group shares (consumer groups now, share groups
next; Kafka's ModernGroup, TargetAssignmentBuilder and the epoch rules of
GroupMetadataManager).

Three epochs order a group's changes:
- the group epoch bumps when a member joins or leaves, when a subscription changes, and
  when the metadata of the subscribed topics changes (their metadata hash);
- the assignment epoch is the group epoch the target assignment was computed for; the
  assignor runs only while the group epoch is ahead of it;
- a member's epoch is the assignment epoch it has reconciled to.

Hard state lives in the group objects and changes only through the `apply_*` methods that
the record replay handlers call; everything else here is pure.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping

from ..assignors import MemberSubscription
from .rebalance_clock import RebalanceClock

__all__ = ["Assignment", "EMPTY", "AssignmentPacer", "ModernGroup", "ModernGroupConfig", "ModernGroupManager",
           "assignment_from", "metadata_hash",
           "compute_target_assignment", "frozen_assignment", "session_timeout_key", "rebalance_timeout_key",
           "assignment_timer_key"]

# {topic: frozenset(partitions)}; a topic with no partitions is left out
Assignment = dict[str, frozenset]
EMPTY: Assignment = {}


def frozen_assignment(assignment: Mapping[str, Iterable[int]]) -> Assignment:
    return {t: frozenset(ps) for t, ps in assignment.items() if ps}


@dataclass(frozen=True)
class ModernGroupConfig:
    """The broker configs of one modern group type, read with Kafka's names under `prefix`
    ("group.consumer." or "group.share.") and Kafka's defaults."""
    heartbeat_interval_ms: int = 5000
    session_timeout_ms: int = 45000
    max_size: int = 2147483647
    assignors: tuple[str, ...] = ("uniform", "range")
    assignment_interval_ms: int = 0

    @classmethod
    def from_config(cls, config: Mapping, prefix: str, **defaults) -> "ModernGroupConfig":
        base = cls(**defaults)

        def get(name, default, conv=int):
            value = config.get(prefix + name)
            return default if value is None else conv(value)

        def names(value) -> tuple[str, ...]:
            if isinstance(value, str):
                value = value.split(",")
            return tuple(v.strip() for v in value if v.strip())

        return cls(get("heartbeat.interval.ms", base.heartbeat_interval_ms),
                   get("session.timeout.ms", base.session_timeout_ms),
                   get("max.size", base.max_size),
                   get("assignors", base.assignors, names),
                   get("assignment.interval.ms", base.assignment_interval_ms))


def metadata_hash(topic_names: Iterable[str], topics: Mapping[str, int]) -> int:
    """A hash of the subscribed topics' metadata (name and partition count of those that
    exist), so that adding partitions or creating or deleting a subscribed topic changes it.
    Deterministic across processes (unlike Python's hash), 63 bits, 0 for nothing."""
    present = sorted(t for t in topic_names if t in topics)
    if not present:
        return 0
    h = hashlib.blake2b(digest_size=8)
    for t in present:
        h.update(t.encode())
        h.update(b"\0%d\n" % topics[t])
    return int.from_bytes(h.digest(), "big") >> 1


def session_timeout_key(group_id: str, member_id: str) -> tuple:
    return ("modern-session", group_id, member_id)


def rebalance_timeout_key(group_id: str, member_id: str) -> tuple:
    return ("modern-rebalance", group_id, member_id)


def assignment_timer_key(group_id: str) -> tuple:
    return ("modern-assignment", group_id)


class ModernGroup:
    """Members, epochs, target assignment and partition ownership of one modern group.
    Members are immutable objects with `member_id`, `instance_id`, `rack_id`,
    `subscribed_topic_names`, `member_epoch`, `state`, `assigned_partitions` and
    `partitions_pending_revocation`; which topics a member subscribes to in all is
    `subscribed_topics(member)` (a consumer group adds what its regex matches)."""

    type = ""

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.metadata_hash = 0
        self.members: dict = {}
        self.static_members: dict[str, str] = {}  # instance id -> member id
        self.target_assignment: dict[str, Assignment] = {}
        # (topic, partition) -> the member that owns it (assigned or pending revocation)
        self.partition_owner: dict[tuple[str, int], str] = {}
        self.subscribed_topic_counts: dict[str, int] = {}
        self.rebalance_clock = RebalanceClock()
        self._clock_epoch = 0  # the group epoch the clock last saw

    # ------------------------------------------------------------------ the rebalance clock

    def track_rebalance(self, now_ms: int, loaded: bool = False) -> None:
        """After records of this group were applied: a new group epoch starts a rebalance,
        which ends when the group is Stable (every member reconciled to the target). A
        settled group costs no look at its members. Just loaded, a group that is mid-way
        starts its clock now."""
        bumped = self.group_epoch != self._clock_epoch
        self._clock_epoch = self.group_epoch
        if self.rebalance_clock.started_ms is None:
            if not bumped:
                return
            if not loaded:
                self.rebalance_clock.start(now_ms)
        state = str(self.state)
        if state == "Empty":
            self.rebalance_clock.abandon()
        elif state != "Stable":
            self.rebalance_clock.start(now_ms)
        elif not loaded:
            self.rebalance_clock.settle(now_ms)

    # ------------------------------------------------------------------ views

    def subscribed_topics(self, member) -> frozenset[str]:
        return member.subscribed_topic_names

    def is_empty(self) -> bool:
        return not self.members

    def static_member(self, instance_id: str | None):
        member_id = self.static_members.get(instance_id) if instance_id is not None else None
        return self.members.get(member_id) if member_id is not None else None

    def owner_of(self, topic: str, partition: int) -> str | None:
        return self.partition_owner.get((topic, partition))

    def target_of(self, member_id: str, instance_id: str | None = None) -> Assignment:
        """A member's target; a static member that replaced another under the same instance
        id inherits the target of the member it replaced."""
        target = self.target_assignment.get(member_id)
        if target is None and instance_id is not None:
            previous = self.static_members.get(instance_id)
            if previous is not None:
                target = self.target_assignment.get(previous)
        return target if target is not None else EMPTY

    def subscribed_topic_counts_with(self, old_member, new_member) -> dict[str, int]:
        """The group's topic name -> count of members subscribing to it by name, if
        `old_member` (or None) became `new_member` (or None)."""
        counts = dict(self.subscribed_topic_counts)
        if old_member is not None:
            for t in old_member.subscribed_topic_names:
                n = counts.get(t, 0) - 1
                if n > 0:
                    counts[t] = n
                else:
                    counts.pop(t, None)
        if new_member is not None:
            for t in new_member.subscribed_topic_names:
                counts[t] = counts.get(t, 0) + 1
        return counts

    # ------------------------------------------------------------------ replay (hard state)

    def apply_member(self, member) -> None:
        """Add or update a member's subscription (its assignment fields are kept)."""
        old = self.members.get(member.member_id)
        self.subscribed_topic_counts = self.subscribed_topic_counts_with(old, member)
        if old is not None and old.instance_id is not None and old.instance_id != member.instance_id:
            self.static_members.pop(old.instance_id, None)
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        self.members[member.member_id] = member

    def apply_member_removed(self, member_id: str) -> None:
        old = self.members.pop(member_id, None)
        if old is None:
            return
        self.subscribed_topic_counts = self.subscribed_topic_counts_with(old, None)
        if old.instance_id is not None and self.static_members.get(old.instance_id) == member_id:
            del self.static_members[old.instance_id]
        self._release(old)

    def apply_current_assignment(self, member) -> None:
        """A member's new epoch, state and assignment; moves partition ownership. Raises if a
        partition would have two owners, the invariant everything else protects."""
        old = self.members.get(member.member_id)
        if old is not None:
            self._release(old)
        for topic, partitions in _owned(member):
            for p in partitions:
                holder = self.partition_owner.setdefault((topic, p), member.member_id)
                if holder != member.member_id:
                    raise ValueError(f"group {self.group_id}: {topic}-{p} is owned by {holder}, "
                                     f"cannot also be owned by {member.member_id}")
        self.members[member.member_id] = member

    def _release(self, member) -> None:
        owners = self.partition_owner
        for topic, partitions in _owned(member):
            for p in partitions:
                if owners.get((topic, p)) == member.member_id:
                    del owners[(topic, p)]


def assignment_from(topic_partitions) -> Assignment:
    """{topic: frozenset(partitions)} from a record's topic partitions."""
    return {tp.topic_name: frozenset(tp.partitions) for tp in topic_partitions if tp.partitions}


class ModernGroupManager:
    """What the manager of every modern group type shares: finding its live groups, and the
    replay handlers of the group epoch and target assignment records, whose fields are the
    same for every type. A subclass sets `group_class` and keeps the shard's `groups`."""

    group_class: type = ModernGroup
    groups: dict

    def _live_group(self, group_id: str):
        group = self.groups.get(group_id)
        return group if group is not None and group.type == self.group_class.type else None

    def _replay_group(self, group_id: str, create: bool):
        group = self.groups.get(group_id)
        if group is None:
            if not create:
                return None
            group = self.groups[group_id] = self.group_class(group_id)
        elif group.type != self.group_class.type:
            raise ValueError(f"group {group_id} is a {group.type} group, not a {self.group_class.type} group")
        return group

    def _replay_metadata(self, offset: int, key, value) -> None:
        group = self._replay_group(key.group_id, value is not None)
        if group is None:
            return
        if value is None:
            if group.members:
                raise ValueError(f"tombstone for {group.type} group {key.group_id} that has members")
            del self.groups[key.group_id]
            return
        group.group_epoch = value.epoch
        group.metadata_hash = value.metadata_hash

    def _replay_target_epoch(self, offset: int, key, value) -> None:
        group = self._replay_group(key.group_id, value is not None)
        if group is not None:
            group.assignment_epoch = -1 if value is None else value.assignment_epoch

    def _replay_target_member(self, offset: int, key, value) -> None:
        group = self._replay_group(key.group_id, value is not None)
        if group is None:
            return
        if value is None:
            group.target_assignment.pop(key.member_id, None)
        else:
            group.target_assignment[key.member_id] = assignment_from(value.topic_partitions)


class AssignmentPacer:
    """When each group's assignor last ran (soft state, kept by the manager because a new
    group object only exists once its records are replayed): the assignor runs at most once
    per group.*.assignment.interval.ms."""

    def __init__(self, interval_ms: int) -> None:
        self.interval_ms = interval_ms
        self._last: dict[str, int] = {}

    def due(self, group_id: str, now_ms: int) -> int | None:
        """None if the assignor may run now, else when it may next run."""
        last = self._last.get(group_id)
        if self.interval_ms <= 0 or last is None or now_ms >= last + self.interval_ms:
            return None
        return last + self.interval_ms

    def ran(self, group_id: str, now_ms: int) -> None:
        if self.interval_ms > 0:
            self._last[group_id] = now_ms


def _owned(member):
    yield from member.assigned_partitions.items()
    yield from member.partitions_pending_revocation.items()


def compute_target_assignment(assign: Callable, members: Mapping[str, object],
                              topics_of: Callable[[object], frozenset], owned_of: Callable[[str], Assignment],
                              topics: Mapping[str, int]) -> dict[str, Assignment]:
    """Run the assignor over `members` (member id -> member, the group's members as the
    operation sees them). `topics_of(member)` is what a member subscribes to;
    `owned_of(member_id)` its current target, the assignor's input for stickiness."""
    subscriptions = {member_id: MemberSubscription(topics_of(member), owned_of(member_id), member.rack_id,
                                                   member.instance_id)
                     for member_id, member in members.items()}
    result = assign(subscriptions, topics) if subscriptions else {}
    return {m: frozen_assignment(result.get(m, {})) for m in members}
