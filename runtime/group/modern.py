"""The machinery every KIP-848 "modern" group shares, consumer and share groups alike
(Kafka's ModernGroup, TargetAssignmentBuilder, and the epoch rules, fencing, session timers
and describe of GroupMetadataManager, which serves both types).

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

import dataclasses
import hashlib
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, NamedTuple

from ..assignors import MemberSubscription
from ..coordinator import Result
from ..errors import Errors, KafkaError, raise_if
from ..messages.consumer import LEAVE_GROUP_MEMBER_EPOCH
from .rebalance_clock import RebalanceClock
from .reconcile import MemberState

__all__ = ["Assignment", "EMPTY", "AssignmentPacer", "ModernGroup", "ModernGroupConfig", "ModernGroupManager",
           "ModernRecords", "DescribeClasses", "assignment_message", "raise_if_epoch_invalid",
           "updated_member_fields", "blank", "assignment_from", "metadata_hash",
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
        return _counts_with(self.subscribed_topic_counts, old_member, new_member)

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


def _counts_with(counts: Mapping[str, int], old_member, new_member) -> dict[str, int]:
    counts = dict(counts)
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


def assignment_from(topic_partitions) -> Assignment:
    """{topic: frozenset(partitions)} from a record's topic partitions."""
    return {tp.topic_name: frozenset(tp.partitions) for tp in topic_partitions if tp.partitions}


class ModernGroupManager:
    """What the managers of every modern group type share (Kafka keeps it in
    GroupMetadataManager for both types): finding live groups, the group configs of a
    group, the member validators, the session timer, fencing and leaving, computing a
    target assignment, describing groups, and the replay handlers of the records whose
    fields every type has. A subclass sets `group_class`, `member_class`, `records` (its
    record factories) and `describe_classes`, and keeps the shard's `groups`, the broker
    configs of its type in `config`, the `topics` it last learned, `timer` and
    `group_configs`."""

    group_class: type = ModernGroup
    member_class: type
    records: "ModernRecords"
    describe_classes: "DescribeClasses"
    groups: dict
    config: ModernGroupConfig
    topics: dict[str, int] | None
    group_configs = None  # a GroupConfigManager: a group's own session timeout and heartbeat interval

    # ------------------------------------------------------------------ groups and their configs

    def _live_group(self, group_id: str):
        group = self.groups.get(group_id)
        return group if group is not None and group.type == self.group_class.type else None

    def _group_config(self, group_id: str, name: str, default: int) -> int:
        """The group's value of `<type>.<name>` (a dynamic group config), or `default`, the
        broker's."""
        overrides = self.group_configs.configs.get(group_id) if self.group_configs is not None else None
        if not overrides:  # the common case, on every heartbeat
            return default
        name = f"{self.group_class.type}.{name}"
        return overrides[name] if name in overrides else default

    def _heartbeat_interval_ms(self, group_id: str) -> int:
        return self._group_config(group_id, "heartbeat.interval.ms", self.config.heartbeat_interval_ms)

    def _metadata_hash(self, group, topics) -> int:
        # before the first update_topics (a timer after a load) the group keeps its hash;
        # update_topics sets it right
        return group.metadata_hash if self.topics is None else metadata_hash(topics, self.topics)

    # ------------------------------------------------------------------ validators

    def _raise_if_no_topics(self) -> None:
        raise_if(self.topics is None, Errors.COORDINATOR_LOAD_IN_PROGRESS,
                 "the coordinator does not know the topic metadata yet")

    def _raise_if_full(self, group, member_id: str) -> None:
        """A member the group does not have yet may not join a group at group.*.max.size."""
        # (`if`, not raise_if: the message is built only when raised, and this runs on every heartbeat)
        max_size = self.config.max_size
        if len(group.members) >= max_size and member_id not in group.members:
            raise KafkaError(Errors.GROUP_MAX_SIZE_REACHED,
                             f"The {group.type} group has reached its maximum capacity of {max_size} members.")

    @staticmethod
    def _member_or_raise(group, member_id: str):
        member = group.members.get(member_id)
        if member is None:
            raise KafkaError(Errors.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group.group_id}.")
        return member

    # ------------------------------------------------------------------ timers

    def _fence_on_timeout(self, group_id: str, member_id: str, epoch: int | None = None) -> Callable[[int], Result]:
        """A timer operation that fences the member if the group still has it (and, with
        `epoch`, if it is still at that epoch: a member that moved on in time is spared)."""
        def expire(now_ms: int) -> Result:
            group = self._live_group(group_id)
            member = group.members.get(member_id) if group is not None else None
            if member is None or (epoch is not None and member.member_epoch != epoch):
                return Result()
            return self._fence(group, member, now_ms)
        return expire

    def _schedule_session_timeout(self, group_id: str, member_id: str, now_ms: int,
                                  timeout_ms: int | None = None) -> None:
        """`timeout_ms`: the member's own (a classic member's, from its JoinGroup); the
        group's session timeout otherwise."""
        if timeout_ms is None:
            timeout_ms = self._group_config(group_id, "session.timeout.ms", self.config.session_timeout_ms)
        self.timer.schedule(session_timeout_key(group_id, member_id), now_ms + timeout_ms,
                            self._fence_on_timeout(group_id, member_id))

    def _cancel_timers(self, group_id: str, member_id: str) -> None:
        for key in (session_timeout_key(group_id, member_id), rebalance_timeout_key(group_id, member_id)):
            self.timer.cancel(key)

    # ------------------------------------------------------------------ leaving and fencing

    def _leave(self, request, now_ms: int) -> Result:
        """A dynamic member's leave (epoch -1): it is fenced at once."""
        group = self._group_or_raise(request.group_id)
        member = self._member_or_raise(group, request.member_id)
        return self._fence(group, member, now_ms, self._leave_response(request))

    def _group_or_raise(self, group_id: str, create: bool = False):
        """Kafka's getOrMaybeCreate*Group: the group, or with `create` a new one (replaying
        the operation's records adds it to `groups`); GROUP_ID_NOT_FOUND if there is none, or
        if the id is another type's (that group keeps it)."""
        group, kind = self.groups.get(group_id), self.group_class.type
        if group is None:
            raise_if(not create, Errors.GROUP_ID_NOT_FOUND, f"{kind.capitalize()} group {group_id} not found.")
            return self.group_class(group_id)
        raise_if(group.type != kind, Errors.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a {kind} group.")
        return group

    def _leave_response(self, request):
        raise NotImplementedError

    def _fence(self, group, member, now_ms: int, response=None) -> Result:
        return self._fence_members(group, [member], now_ms, response)

    def _fence_members(self, group, members, now_ms: int, response=None) -> Result:
        """Remove members (Kafka's fenceMember): tombstones for their records, then one group
        epoch bump so that their partitions are reassigned."""
        if not members:
            return Result((), response)
        gid, records = group.group_id, []
        for member in members:
            records += [self.records.current_assignment_tombstone(gid, member.member_id),
                        self.records.target_assignment_tombstone(gid, member.member_id),
                        self.records.member_subscription_tombstone(gid, member.member_id)]
        topics = self._subscriptions_without(group, members, records)
        records.append(self.records.epoch_record(gid, group.group_epoch + 1, self._metadata_hash(group, topics)))
        for member in members:
            self._cancel_timers(gid, member.member_id)
        self._fenced(group, members)
        return Result(records, response)

    def _subscriptions_without(self, group, members, records: list):
        """The topics the group subscribes to once `members` are gone; a subclass may add
        records for what they alone used."""
        counts = group.subscribed_topic_counts
        for member in members:
            counts = _counts_with(counts, member, None)
        return counts

    def _fenced(self, group, members) -> None:
        """Hook: soft state to update once members are fenced."""

    # ------------------------------------------------------------------ the target assignment

    def _compute_targets(self, group_epoch: int, assign: Callable, members: Mapping, topics_of: Callable,
                         owned_of: Callable) -> dict[str, Assignment]:
        try:
            return compute_target_assignment(assign, members, topics_of, owned_of, self.topics)
        except Exception as e:
            raise KafkaError(Errors.UNKNOWN_SERVER_ERROR,
                             f"failed to compute a new target assignment for epoch {group_epoch}: {e}") from e

    def _target_records(self, group, group_epoch: int, targets: Mapping[str, Assignment], old_of: Callable,
                        records: list) -> None:
        """A record per member whose target changed, in the order of `targets`, then the new
        assignment epoch."""
        for member_id, target in targets.items():
            if old_of(member_id) != target:
                records.append(self.records.target_assignment_record(group.group_id, member_id, target))
        records.append(self.records.target_assignment_epoch_record(group.group_id, group_epoch))

    # ------------------------------------------------------------------ describe

    def _describe(self, group_ids) -> list:
        """A described group per id (Kafka's {Consumer,Share}GroupDescribe): GROUP_ID_NOT_FOUND
        for an id that names no group of this type."""
        classes, out = self.describe_classes, []
        for group_id in group_ids:
            group = self.groups.get(group_id)
            if group is None or group.type != self.group_class.type:
                message = (f"Group {group_id} not found." if group is None
                           else f"Group {group_id} is not a {self.group_class.type} group.")
                out.append(classes.group(group_id, Errors.GROUP_ID_NOT_FOUND.code, message, group_state="Dead"))
                continue
            members = tuple(self._describe_member(group, m) for m in self._described_members(group))
            out.append(classes.group(
                group_id, group_state=str(group.state), group_epoch=group.group_epoch,
                assignment_epoch=group.assignment_epoch, assignor_name=self._assignor_name(group), members=members))
        return out

    def _described_members(self, group):
        return group.members.values()

    def _describe_assignment(self, assignment: Mapping):
        classes = self.describe_classes
        return assignment_message(assignment, classes.assignment, classes.topic_partitions)

    def _describe_member(self, group, member):
        raise NotImplementedError

    def _assignor_name(self, group) -> str:
        raise NotImplementedError

    # ------------------------------------------------------------------ replay

    def replayers(self) -> dict:
        metadata, member, target_epoch, target_member, current = self.records.keys
        return {metadata: self._replay_metadata, member: self._replay_member, target_epoch: self._replay_target_epoch,
                target_member: self._replay_target_member, current: self._replay_current_assignment}

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

    def _replay_member(self, offset: int, key, value) -> None:
        """A member's subscription record: its value's fields are the member's own."""
        group = self._replay_group(key.group_id, value is not None)
        if group is None:
            return
        if value is None:
            group.apply_member_removed(key.member_id)
            return
        base = group.members.get(key.member_id) or self.member_class(key.member_id)
        fields = value._asdict()
        fields["subscribed_topic_names"] = frozenset(value.subscribed_topic_names)
        group.apply_member(dataclasses.replace(base, **fields))

    def _replay_current_assignment(self, offset: int, key, value) -> None:
        group = self._replay_group(key.group_id, value is not None)
        if group is None:
            return
        base = group.members.get(key.member_id)
        if value is None:
            if base is not None:
                group.apply_current_assignment(dataclasses.replace(
                    base, member_epoch=LEAVE_GROUP_MEMBER_EPOCH, previous_member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                    state=MemberState.STABLE, assigned_partitions={}, partitions_pending_revocation={}))
            return
        pending = getattr(value, "partitions_pending_revocation", ())
        group.apply_current_assignment(dataclasses.replace(
            base or self.member_class(key.member_id), member_epoch=value.member_epoch,
            previous_member_epoch=value.previous_member_epoch, state=MemberState.from_value(value.state),
            assigned_partitions=assignment_from(value.assigned_partitions),
            partitions_pending_revocation=assignment_from(pending)))


class ModernRecords(NamedTuple):
    """The record key classes and factories of one modern group type (records.py), for the
    steps every type takes the same way. `keys`: the group epoch, member subscription, target
    assignment epoch, target assignment member and current assignment keys."""
    keys: tuple[type, type, type, type, type]
    epoch_record: Callable
    member_subscription_tombstone: Callable
    target_assignment_record: Callable
    target_assignment_tombstone: Callable
    target_assignment_epoch_record: Callable
    current_assignment_tombstone: Callable


class DescribeClasses(NamedTuple):
    """The response structs of one type's describe API."""
    group: type
    assignment: type
    topic_partitions: type


def assignment_message(assignment: Mapping, assignment_class: type, topic_partitions_class: type):
    """An assignment as a response holds it: topics and partitions sorted."""
    return assignment_class(tuple(topic_partitions_class(t, tuple(sorted(ps))) for t, ps in sorted(assignment.items())))


def raise_if_epoch_invalid(member, epoch: int, owns_no_more: Callable[[], bool] | None = None) -> None:
    """A member heartbeats with its current epoch, or with the one before it when the
    response that bumped it was lost (and, for a consumer, `owns_no_more()` than its
    assignment); any other epoch fences it (Kafka's throwIf*MemberEpochIsInvalid)."""
    if epoch > member.member_epoch:
        raise KafkaError(Errors.FENCED_MEMBER_EPOCH,
                         f"the member has a greater member epoch ({epoch}) than the one known by the group "
                         f"coordinator ({member.member_epoch}); it must abandon all its partitions and rejoin")
    if epoch < member.member_epoch and (epoch != member.previous_member_epoch
                                        or (owns_no_more is not None and not owns_no_more())):
        raise KafkaError(Errors.FENCED_MEMBER_EPOCH,
                         f"the member has a smaller member epoch ({epoch}) than the one known by the group "
                         f"coordinator ({member.member_epoch}); it must abandon all its partitions and rejoin")


def updated_member_fields(member, request, client_id: str, client_host: str) -> dict:
    """What a heartbeat changes of the fields every modern member has (rack, subscribed
    topic names, client): the changed fields only, so a steady heartbeat changes nothing."""
    changes = {}
    if request.rack_id is not None and request.rack_id != member.rack_id:
        changes["rack_id"] = request.rack_id
    if request.subscribed_topic_names is not None:
        names = frozenset(request.subscribed_topic_names)
        if names != member.subscribed_topic_names:
            changes["subscribed_topic_names"] = names
    if client_id != member.client_id:
        changes["client_id"] = client_id
    if client_host != member.client_host:
        changes["client_host"] = client_host
    return changes


def blank(value: str | None) -> bool:
    """A field that is set but holds only white space (Kafka refuses those ids)."""
    return value is not None and not value.strip()


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
