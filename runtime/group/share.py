"""Share groups (KIP-932) on the group coordinator: ShareGroupHeartbeat, ShareGroupDescribe
and share-group state initialisation (Kafka's GroupMetadataManager share-group half, with
ShareGroup and ShareGroupMember).

A share group is a modern group without a revocation phase: several members may hold one
partition, so a heartbeat (1) updates the member and bumps the group epoch when its
subscription or the subscribed topics' metadata changed, (2) recomputes the target
assignment with the "simple" assignor when the group epoch is ahead of the assignment
epoch, and (3) gives the member its target at once, at the assignment epoch.

The assignor only hands out partitions whose share-group state the share coordinator has
initialised. A heartbeat that makes the group subscribe to partitions it has no state for
writes them as initialising (ShareGroupStatePartitionMetadata); the owner of the shard takes
them from `pending_share_initializations()`, asks the share coordinator to initialise them
and reports back with `share_group_initialized` (which bumps the group epoch, so the next
heartbeat assigns them) or `share_group_initialize_failed`. Partitions still initialising
group.share.initialize.retry.interval.ms after they were last asked for are listed again.

Hard state changes only in the `_replay_*` handlers; what the owner has yet to be told to
initialise is soft state, rebuilt after a load (everything initialising is asked again).
"""
from __future__ import annotations

import dataclasses
import enum
import functools
from dataclasses import dataclass, field
from typing import Mapping, NamedTuple

from ..assignors import simple
from ..coordinator import CoordinatorContext, Result
from ..errors import Errors, KafkaError, raise_if
from ..messages.consumer import LEAVE_GROUP_MEMBER_EPOCH
from ..messages.group import DescribedGroup, DescribedGroupMember, ListedGroup
from ..messages.share_group import (
    ShareGroupDescribeResponseAssignment, ShareGroupDescribeResponseDescribedGroup, ShareGroupDescribeResponseMember,
    ShareGroupDescribeResponseTopicPartitions, ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse,
    ShareGroupHeartbeatResponseAssignment, ShareGroupHeartbeatResponseTopicPartitions,
)
from . import records as R
from .configs import GroupConfigManager
from .modern import (
    EMPTY, DescribeClasses, ModernGroup, ModernGroupConfig, ModernGroupManager, ModernRecords, assignment_message,
    blank, metadata_hash, raise_if_epoch_invalid, updated_member_fields,
)
from .reconcile import MemberState

__all__ = ["ShareGroupState", "ShareGroupMember", "ShareGroup", "ShareGroupManager", "InitState",
           "INIT_TRANSITIONS", "PendingShareInitialization", "share_initialize_retry_key"]


class ShareGroupState(enum.Enum):
    EMPTY = "Empty"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


class InitState(enum.Enum):
    """Where a subscribed partition's share-group state is (ShareGroupStatePartitionMetadata)."""
    UNINITIALIZED = "uninitialized"
    INITIALIZING = "initializing"
    INITIALIZED = "initialized"


# The moves a partition's state may make: it is asked for (again, on a retry or a failure),
# confirmed, started over at other offsets (AlterShareGroupOffsets, DeleteShareGroupOffsets),
# or forgotten when its topic is deleted.
INIT_TRANSITIONS: dict[InitState, frozenset[InitState]] = {
    InitState.UNINITIALIZED: frozenset({InitState.INITIALIZING}),
    InitState.INITIALIZING: frozenset({InitState.INITIALIZING, InitState.INITIALIZED, InitState.UNINITIALIZED}),
    InitState.INITIALIZED: frozenset({InitState.INITIALIZING, InitState.UNINITIALIZED}),
}


@dataclass(frozen=True, slots=True)
class ShareGroupMember:
    member_id: str
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: frozenset = frozenset()
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned_partitions: Mapping = field(default_factory=dict)
    # what ModernGroup asks of every member; share members are never static and never revoke
    instance_id: None = None
    partitions_pending_revocation: Mapping = field(default_factory=dict)


class ReleasedShareMember(NamedTuple):
    """A member that left or was fenced: the SharePartitions it was assigned must release
    the records it still holds (Kafka's SharePartition.releaseAcquiredRecords)."""
    group_id: str
    member_id: str
    partitions: tuple  # (topic name, partition) pairs
    member_epoch: int = -1  # its epoch when it went: what it acquired after joining again stays


class PendingShareInitialization(NamedTuple):
    """Partitions whose share-group state the share coordinator must initialise, with the
    state epoch to give them (the group epoch) and each one's start offset (-1: at
    share.auto.offset.reset when first fetched; another offset after an offset alter)."""
    group_id: str
    topic_id: str
    topic_name: str
    partitions: tuple[int, ...]
    group_epoch: int
    start_offsets: tuple[int, ...] = ()

    @property
    def altered(self) -> bool:
        """Whether an offset alter started these partitions over: their SharePartitions must
        load the new state before the partitions are assignable again."""
        return bool(self.start_offsets)


def share_initialize_retry_key(group_id: str) -> tuple:
    return ("share-initialize-retry", group_id)


# {topic id: (topic name, frozenset(partitions), timestamp)}
TopicStates = dict[str, tuple[str, frozenset, int]]


class ShareGroup(ModernGroup):
    type = "share"

    def __init__(self, group_id: str) -> None:
        super().__init__(group_id)
        self.initializing: TopicStates = {}
        self.initialized: TopicStates = {}
        self.deleting: dict[str, str] = {}
        self.has_state_metadata = False

    @property
    def state(self) -> ShareGroupState:
        return ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY

    def apply_current_assignment(self, member) -> None:
        # partitions are shared: no ownership to move, unlike ModernGroup's
        self.members[member.member_id] = member

    def init_state(self, topic_id: str, partition: int) -> InitState:
        for states, state in ((self.initialized, InitState.INITIALIZED), (self.initializing, InitState.INITIALIZING)):
            entry = states.get(topic_id)
            if entry is not None and partition in entry[1]:
                return state
        return InitState.UNINITIALIZED

    def known_partitions(self, topic_id: str) -> int:
        """How many partitions of the topic are initialised or initialising."""
        return sum(len(states[topic_id][1]) for states in (self.initialized, self.initializing) if topic_id in states)

    def assignable(self, topic_ids: Mapping[str, str]) -> dict[str, frozenset]:
        """topic name -> initialised partitions, for topics that still have the same id."""
        return {name: ps for tid, (name, ps, _) in self.initialized.items() if topic_ids.get(name) == tid}

    # ------------------------------------------------------------------ Kafka's Group interface

    def validate_offset_commit(self, member_id: str, group_instance_id: str | None, member_epoch: int,
                               transactional: bool = False) -> None:
        raise KafkaError(Errors.GROUP_ID_NOT_FOUND, f"Group {self.group_id} is a share group: it commits no offsets")

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> None:
        raise KafkaError(Errors.GROUP_ID_NOT_FOUND, f"Group {self.group_id} is a share group: it has no offsets")

    def validate_offset_delete(self) -> None:
        raise KafkaError(Errors.GROUP_ID_NOT_FOUND, f"Group {self.group_id} is a share group: it has no offsets")

    def validate_delete(self) -> None:
        raise_if(bool(self.members), Errors.NON_EMPTY_GROUP, f"group {self.group_id} is {self.state}")

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return topic in self.subscribed_topic_counts

    def offset_expiration_base(self):
        return None

    def as_listed_group(self) -> ListedGroup:
        return ListedGroup(self.group_id, "share", str(self.state), self.type)

    def describe(self) -> DescribedGroup:
        members = tuple(DescribedGroupMember(m.member_id, None, m.client_id, m.client_host)
                        for m in self.members.values())
        return DescribedGroup(self.group_id, group_state=str(self.state), protocol_type="share", members=members)

    def tombstones(self) -> list:
        """The records that delete this (empty) group."""
        gid = self.group_id
        records = [R.share_group_target_assignment_tombstone(gid, m) for m in sorted(self.target_assignment)]
        if self.has_state_metadata:
            records.append(R.share_group_state_partition_metadata_tombstone(gid))
        records += [R.share_group_target_assignment_epoch_tombstone(gid), R.share_group_epoch_tombstone(gid)]
        return records


def _transition(group: ShareGroup, topic_id: str, partitions, to: InitState) -> None:
    """Raise, before any record is built, if a partition may not move to `to`."""
    for p in partitions:
        current = group.init_state(topic_id, p)
        if to not in INIT_TRANSITIONS[current]:
            raise KafkaError(Errors.INVALID_REQUEST, f"share group {group.group_id}: partition {p} of topic "
                                                     f"{topic_id} cannot move from {current.value} to {to.value}")


def _with(states: TopicStates, topic_id: str, name: str, partitions, timestamp: int) -> TopicStates:
    out = dict(states)
    old = out.get(topic_id)
    out[topic_id] = (name, (old[1] if old else frozenset()) | frozenset(partitions), timestamp)
    return out


def _without(states: TopicStates, topic_id: str, partitions) -> TopicStates:
    out = dict(states)
    old = out.get(topic_id)
    if old is not None:
        left = old[1] - frozenset(partitions)
        if left:
            out[topic_id] = (old[0], left, old[2])
        else:
            del out[topic_id]
    return out


def _states_from(topics) -> TopicStates:
    return {t.topic_id: (t.topic_name, frozenset(t.partitions), t.timestamp) for t in topics}


class ShareGroupManager(ModernGroupManager):
    group_class = ShareGroup
    member_class = ShareGroupMember
    records = ModernRecords((R.ShareGroupMetadataKey, R.ShareGroupMemberMetadataKey,
                             R.ShareGroupTargetAssignmentMetadataKey, R.ShareGroupTargetAssignmentMemberKey,
                             R.ShareGroupCurrentMemberAssignmentKey),
                            R.share_group_epoch_record, R.share_group_member_subscription_tombstone,
                            R.share_group_target_assignment_record, R.share_group_target_assignment_tombstone,
                            R.share_group_target_assignment_epoch_record, R.share_group_current_assignment_tombstone)
    describe_classes = DescribeClasses(ShareGroupDescribeResponseDescribedGroup, ShareGroupDescribeResponseAssignment,
                                       ShareGroupDescribeResponseTopicPartitions)

    def __init__(self, context: CoordinatorContext, groups: dict, group_configs: GroupConfigManager) -> None:
        self.context = context
        self.timer = context.timer
        self.groups = groups
        self.group_configs = group_configs
        self.config = ModernGroupConfig.from_config(context.config, "group.share.", max_size=200, assignors=("simple",))
        self.retry_interval_ms = int(context.config.get("group.share.initialize.retry.interval.ms", 30000))
        self.topics: dict[str, int] | None = None
        self._released: list[ReleasedShareMember] = []
        self.topic_ids: dict[str, str] = {}
        self._pending: set[tuple[str, str]] = set()  # (group id, topic id) the owner must still be told of
        # {(group id, topic id): {partition: start offset}} of offset alters not initialised yet
        self._altered: dict[tuple[str, str], dict[int, int]] = {}

    def replayers(self) -> dict:
        return {**super().replayers(), R.ShareGroupStatePartitionMetadataKey: self._replay_state_metadata}

    def on_loaded(self, now_ms: int) -> None:
        # the initialisations in flight before the restart are lost: ask for them again
        for group in self._share_groups():
            for member_id in group.members:
                self._schedule_session_timeout(group.group_id, member_id, now_ms)
            if group.initializing:
                self._pending.update((group.group_id, tid) for tid in group.initializing)
                self._schedule_retry(group, now_ms)

    def _share_groups(self):
        return [g for _, g in sorted(self.groups.items()) if g.type == "share"]

    # ================================================================== ShareGroupHeartbeat

    @staticmethod
    def _raise_if_invalid(request: ShareGroupHeartbeatRequest) -> None:
        raise_if(not request.group_id or blank(request.group_id), Errors.INVALID_REQUEST, "GroupId can't be empty.")
        raise_if(blank(request.rack_id), Errors.INVALID_REQUEST, "RackId can't be empty.")
        epoch = request.member_epoch
        if epoch == 0:
            # an empty id asks for one; one of blanks is refused
            raise_if(bool(request.member_id) and blank(request.member_id), Errors.INVALID_REQUEST,
                     "MemberId can't be empty.")
            raise_if(not request.subscribed_topic_names, Errors.INVALID_REQUEST,
                     "SubscribedTopicNames must be set in first request.")
        else:
            raise_if(epoch < LEAVE_GROUP_MEMBER_EPOCH, Errors.INVALID_REQUEST, "MemberEpoch is invalid.")
            raise_if(not request.member_id.strip(), Errors.INVALID_REQUEST, "MemberId can't be empty.")

    def share_group_heartbeat(self, request: ShareGroupHeartbeatRequest, now_ms: int, new_member_id: str,
                              client_id: str = "", client_host: str = "") -> Result:
        """`new_member_id` names a member that joins without an id of its own."""
        self._raise_if_invalid(request)
        self._raise_if_no_topics()
        if request.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
            return self._leave(request, now_ms)
        return self._heartbeat(request, now_ms, new_member_id, client_id, client_host)

    def _heartbeat(self, request, now_ms: int, new_member_id: str, client_id: str, client_host: str) -> Result:
        group_id, epoch = request.group_id, request.member_epoch
        group = self._group_or_raise(group_id, create=epoch == 0)
        member_id = request.member_id or new_member_id
        self._raise_if_full(group, member_id)
        if epoch != 0:
            stored = self._member_or_raise(group, member_id)
            raise_if_epoch_invalid(stored, epoch)
        else:
            stored = group.members.get(member_id)
        member = stored if stored is not None else ShareGroupMember(member_id)
        records: list = []

        # 1. the member and its subscription
        changes = updated_member_fields(member, request, client_id, client_host)
        updated = dataclasses.replace(member, **changes) if changes else member
        if updated is not member or stored is None:
            records.append(R.share_group_member_subscription_record(group_id, updated))
        counts = group.subscribed_topic_counts_with(stored, updated)
        new_hash = metadata_hash(counts, self.topics)
        group_epoch = group.group_epoch
        if updated.subscribed_topic_names != member.subscribed_topic_names or new_hash != group.metadata_hash:
            group_epoch += 1
            records.append(R.share_group_epoch_record(group_id, group_epoch, new_hash))

        # 2. the target assignment
        if group_epoch > group.assignment_epoch:
            members = dict(group.members)
            members[member_id] = updated
            targets = self._assign(group, group_epoch, members, records)
            target_epoch, target = group_epoch, targets.get(member_id, EMPTY)
        else:
            target_epoch, target = group.assignment_epoch, group.target_of(member_id)

        # 3. no revocation: the member takes its target at once
        reconciled = updated
        if updated.member_epoch != target_epoch or updated.assigned_partitions != target:
            reconciled = dataclasses.replace(updated, member_epoch=target_epoch,
                                             previous_member_epoch=updated.member_epoch, assigned_partitions=target)
            records.append(R.share_group_current_assignment_record(group_id, reconciled))

        # 4. state initialisation of newly subscribed partitions
        self._initialize(group, counts, group_epoch, now_ms, records)
        self._schedule_session_timeout(group_id, member_id, now_ms)

        before = stored.assigned_partitions if stored is not None else EMPTY
        full = epoch == 0 or request.subscribed_topic_names is not None
        return Result(records, ShareGroupHeartbeatResponse(
            member_id=member_id, member_epoch=reconciled.member_epoch,
            heartbeat_interval_ms=self._heartbeat_interval_ms(group_id),
            assignment=(assignment_message(reconciled.assigned_partitions, ShareGroupHeartbeatResponseAssignment,
                                           ShareGroupHeartbeatResponseTopicPartitions)
                        if full or reconciled.assigned_partitions != before else None)))

    def _assign(self, group: ShareGroup, group_epoch: int, members: dict, records: list) -> dict:
        """The simple assignor over the initialised partitions (Kafka's TargetAssignmentBuilder)."""
        assign = functools.partial(simple, assignable=group.assignable(self.topic_ids))
        targets = self._compute_targets(group_epoch, assign, members, lambda m: m.subscribed_topic_names,
                                        group.target_of)
        self._target_records(group, group_epoch, dict(sorted(targets.items())), group.target_assignment.get, records)
        return targets

    # ================================================================== leaving and fencing

    def _leave_response(self, request) -> ShareGroupHeartbeatResponse:
        return ShareGroupHeartbeatResponse(member_id=request.member_id, member_epoch=LEAVE_GROUP_MEMBER_EPOCH)

    def _fenced(self, group: ShareGroup, members) -> None:
        for member in members:
            self._released.append(ReleasedShareMember(group.group_id, member.member_id, tuple(
                (topic, p) for topic, ps in sorted(member.assigned_partitions.items()) for p in sorted(ps)),
                member.member_epoch))

    def released_share_members(self) -> list[ReleasedShareMember]:
        """Members removed since the last call, each listed once; the owner asks their
        SharePartitions to release what they hold. Soft state: after a reload the locks'
        expiry releases the records instead."""
        out, self._released = self._released, []
        return out

    # ================================================================== state initialisation

    def _initialize(self, group: ShareGroup, counts: Mapping[str, int], group_epoch: int, now_ms: int,
                    records: list) -> None:
        """Write the subscribed partitions that have no share-group state yet as
        initialising (Kafka's maybeCreateInitializeShareGroupStateRequest)."""
        initializing = group.initializing
        added = []
        for name in sorted(counts):
            topic_id = self.topic_ids.get(name)
            if topic_id is None or name not in self.topics:
                continue
            if group.known_partitions(topic_id) >= self.topics[name]:
                continue  # the steady state: every partition initialised or initialising
            new = [p for p in range(self.topics[name])
                   if group.init_state(topic_id, p) is InitState.UNINITIALIZED]
            if new:
                _transition(group, topic_id, new, InitState.INITIALIZING)
                initializing = _with(initializing, topic_id, name, new, now_ms)
                added.append(topic_id)
        if not added:
            return
        records.append(R.share_group_state_partition_metadata_record(group.group_id, initializing, group.initialized,
                                                                     group.deleting))
        self._pending.update((group.group_id, tid) for tid in added)
        self._schedule_retry_at(group.group_id, now_ms + self.retry_interval_ms)

    def pending_share_initializations(self) -> list[PendingShareInitialization]:
        """What the share coordinator must now initialise (InitializeShareGroupState with
        start offset -1 and the group epoch as state epoch), each listed once: the owner
        calls this after its writes complete and reports each outcome back."""
        out = []
        for group_id, topic_id in sorted(self._pending):
            group = self._live_group(group_id)
            entry = group.initializing.get(topic_id) if group is not None else None
            if entry is not None:
                partitions = tuple(sorted(entry[1]))
                altered = self._altered.get((group_id, topic_id), {})
                out.append(PendingShareInitialization(
                    group_id, topic_id, entry[0], partitions, group.group_epoch,
                    tuple(altered.get(p, -1) for p in partitions) if altered else ()))
        self._pending.clear()
        return out

    def alter_share_group_offsets(self, group_id: str, offsets: Mapping[str, Mapping[int, int]],
                                  now_ms: int) -> Result:
        """AlterShareGroupOffsets (DeleteShareGroupOffsets with start offset -1): the share
        group, which must have no members, starts each partition over at its offset. As in
        Kafka the partitions go back to initialising (no member is assigned them meanwhile)
        and the share coordinator initialises them under a new state epoch (the group
        epoch), which fences any SharePartition still holding the old state; the owner
        reports the outcome with share_group_initialized or share_group_initialize_failed."""
        group = self._group_or_raise(group_id)
        raise_if(bool(group.members), Errors.NON_EMPTY_GROUP,
                 f"share-group offsets can be changed only if the group {group_id!r} is inactive, but the current "
                 f"state is {group.state.value} with {len(group.members)} member(s)")
        raise_if(self.topics is None, Errors.COORDINATOR_LOAD_IN_PROGRESS, "topic metadata is not known yet")
        moves = []
        for name, starts in sorted(offsets.items()):
            topic_id = self.topic_ids.get(name)
            raise_if(topic_id is None or name not in self.topics, Errors.UNKNOWN_TOPIC_OR_PARTITION,
                     f"unknown topic {name!r}")
            for p, o in starts.items():
                raise_if(not 0 <= p < self.topics[name], Errors.UNKNOWN_TOPIC_OR_PARTITION,
                         f"{name}-{p} does not exist")
                raise_if(o < -1, Errors.INVALID_REQUEST, f"cannot start {name}-{p} at offset {o}")
            _transition(group, topic_id, starts, InitState.INITIALIZING)
            moves.append((topic_id, name, dict(starts)))
        if not moves:
            return Result()
        initializing, initialized = group.initializing, group.initialized
        for topic_id, name, starts in moves:
            initialized = _without(initialized, topic_id, starts)
            initializing = _with(initializing, topic_id, name, starts, now_ms)
            self._altered[(group_id, topic_id)] = {**self._altered.get((group_id, topic_id), {}), **starts}
            self._pending.add((group_id, topic_id))
        self._schedule_retry_at(group_id, now_ms + self.retry_interval_ms)
        return Result([R.share_group_state_partition_metadata_record(group_id, initializing, initialized,
                                                                     group.deleting)])

    def share_group_initialized(self, group_id: str, topic_id: str, partitions, now_ms: int) -> Result:
        """The share coordinator initialised these partitions: they become assignable, and
        the group epoch moves on so that the next heartbeat assigns them. Partitions no
        longer initialising (a late answer) are ignored."""
        group, entry, done = self._initializing(group_id, topic_id, partitions)
        if not done:
            return Result()
        _transition(group, topic_id, done, InitState.INITIALIZED)
        altered = self._altered.get((group_id, topic_id))
        if altered is not None:
            for p in done:
                altered.pop(p, None)
            if not altered:
                del self._altered[(group_id, topic_id)]
        initializing = _without(group.initializing, topic_id, done)
        initialized = _with(group.initialized, topic_id, entry[0], done, -1)
        if topic_id not in initializing:
            self._pending.discard((group_id, topic_id))
        return Result([R.share_group_state_partition_metadata_record(group_id, initializing, initialized,
                                                                     group.deleting),
                       R.share_group_epoch_record(group_id, group.group_epoch + 1, group.metadata_hash)])

    def share_group_initialize_failed(self, group_id: str, topic_id: str, partitions, now_ms: int) -> Result:
        """The share coordinator could not initialise these partitions: they stay
        initialising and are asked for again a full retry interval from now."""
        group, entry, failed = self._initializing(group_id, topic_id, partitions)
        if not failed:
            return Result()
        _transition(group, topic_id, failed, InitState.INITIALIZING)
        initializing = dict(group.initializing)
        initializing[topic_id] = (entry[0], entry[1], now_ms)
        self._schedule_retry(group, now_ms, initializing)
        return Result([R.share_group_state_partition_metadata_record(group_id, initializing, group.initialized,
                                                                     group.deleting)])

    def _initializing(self, group_id: str, topic_id: str, partitions):
        """The group, its initialising entry for the topic, and which of `partitions` it holds."""
        group = self._group_or_raise(group_id)
        entry = group.initializing.get(topic_id)
        return group, entry, sorted(frozenset(partitions) & entry[1]) if entry is not None else []

    def share_group_state_partitions(self, group_id: str) -> list[tuple[str, str, tuple[int, ...]]]:
        """(topic id, topic name, partitions) of every partition the share coordinator may
        hold state of for the group (initialised or initialising): what to delete there
        before deleting the group."""
        group = self._group_or_raise(group_id)
        topics: TopicStates = {}
        for states in (group.initialized, group.initializing):
            for tid, (name, ps, _) in states.items():
                topics = _with(topics, tid, name, ps, -1)
        return [(tid, name, tuple(sorted(ps))) for tid, (name, ps, _) in sorted(topics.items())]

    def _schedule_retry(self, group: ShareGroup, now_ms: int, initializing: TopicStates | None = None) -> None:
        states = group.initializing if initializing is None else initializing
        if states:
            self._schedule_retry_at(group.group_id, min(ts for _, _, ts in states.values()) + self.retry_interval_ms)

    def _schedule_retry_at(self, group_id: str, deadline_ms: int) -> None:
        self.timer.schedule(share_initialize_retry_key(group_id), deadline_ms,
                            lambda now_ms: self._retry_initializations(group_id, now_ms))

    def _retry_initializations(self, group_id: str, now_ms: int) -> Result:
        """Partitions initialising for a retry interval or more are asked for again."""
        group = self._live_group(group_id)
        if group is None or not group.initializing:
            return Result()
        due = sorted(tid for tid, (_, _, ts) in group.initializing.items() if ts + self.retry_interval_ms <= now_ms)
        initializing = dict(group.initializing)
        for tid in due:
            name, ps, _ = initializing[tid]
            _transition(group, tid, ps, InitState.INITIALIZING)
            initializing[tid] = (name, ps, now_ms)
        self._schedule_retry(group, now_ms, initializing)
        if not due:
            return Result()
        self._pending.update((group_id, tid) for tid in due)
        return Result([R.share_group_state_partition_metadata_record(group_id, initializing, group.initialized,
                                                                     group.deleting)])

    # ================================================================== topic metadata

    def update_topics(self, topics: Mapping[str, int], topic_ids: Mapping[str, str] | None, now_ms: int) -> Result:
        """New topic metadata: groups whose subscribed topics' metadata hash changed move to
        a new epoch; state kept for topics that no longer exist under that id is dropped.
        `topic_ids` maps names to topic ids (a topic without one is known by its name)."""
        self.topics = dict(topics)
        self.topic_ids = {name: (topic_ids or {}).get(name, name) for name in topics}
        live_ids = set(self.topic_ids.values())
        records: list = []
        for group in self._share_groups():
            gid = group.group_id
            gone = sorted((set(group.initializing) | set(group.initialized)) - live_ids)
            if gone:
                initializing, initialized = dict(group.initializing), dict(group.initialized)
                for tid in gone:
                    for states in (initializing, initialized):
                        if tid in states:
                            _transition(group, tid, states[tid][1], InitState.UNINITIALIZED)
                            del states[tid]
                    self._pending.discard((gid, tid))
                records.append(R.share_group_state_partition_metadata_record(gid, initializing, initialized,
                                                                             group.deleting))
            new_hash = metadata_hash(group.subscribed_topic_counts, self.topics)
            if new_hash != group.metadata_hash or gone:
                records.append(R.share_group_epoch_record(gid, group.group_epoch + 1, new_hash))
        return Result(records)

    # ================================================================== ShareGroupDescribe

    def share_group_describe(self, group_ids) -> list[ShareGroupDescribeResponseDescribedGroup]:
        return self._describe(group_ids)

    def _described_members(self, group: ShareGroup):
        return [m for _, m in sorted(group.members.items())]

    def _describe_member(self, group: ShareGroup, m: ShareGroupMember) -> ShareGroupDescribeResponseMember:
        return ShareGroupDescribeResponseMember(
            m.member_id, m.rack_id, m.member_epoch, m.client_id, m.client_host, tuple(sorted(m.subscribed_topic_names)),
            self._describe_assignment(m.assigned_partitions))

    def _assignor_name(self, group: ShareGroup) -> str:
        return "simple"

    # ================================================================== replay

    def _replay_state_metadata(self, offset: int, key, value) -> None:
        group = self._replay_group(key.group_id, value is not None)
        if group is None:
            return
        if value is None:
            group.initializing, group.initialized, group.deleting = {}, {}, {}
            group.has_state_metadata = False
            return
        group.initializing = _states_from(value.initializing_topics)
        group.initialized = _states_from(value.initialized_topics)
        group.deleting = {t.topic_id: t.topic_name for t in value.deleting_topics}
        group.has_state_metadata = True
