"""KIP-848 consumer groups: ConsumerGroupHeartbeat, ConsumerGroupDescribe and the topic
metadata updates that drive them (Kafka's GroupMetadataManager consumer-group half; the
group model is in consumer_group.py, the members of the classic protocol in
consumer_classic.py, the conversions to and from classic groups in migration.py).

A heartbeat (1) creates or updates the member and bumps the group epoch when its
subscription changed, (2) recomputes the target assignment when the group epoch is ahead
of the assignment epoch (at most once per group.consumer.assignment.interval.ms), and
(3) moves the member's current assignment toward its target (reconcile.py). Each step
writes records; nothing here changes hard state except the `_replay_*` handlers.

The coordinator learns topics (name -> partition count) from `update_topics`; until the
first call it answers heartbeats with COORDINATOR_LOAD_IN_PROGRESS, so the owner calls it
after every load. The member states have their table in reconcile.py.
"""
from __future__ import annotations

import dataclasses
import re
from typing import Mapping

from ..assignors import server_assignor
from ..coordinator import CoordinatorContext, Result
from ..errors import Errors, KafkaError, raise_if
from ..messages.consumer import (
    LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH, ConsumerGroupDescribeResponseAssignment,
    ConsumerGroupDescribeResponseDescribedGroup, ConsumerGroupDescribeResponseMember,
    ConsumerGroupDescribeResponseTopicPartitions, ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse,
    ConsumerGroupHeartbeatResponseAssignment, ConsumerGroupHeartbeatResponseTopicPartitions,
)
from . import records as R
from .consumer_classic import ClassicMembers, classic_join_timeout_key, classic_sync_timeout_key
from .consumer_group import ConsumerGroup, ConsumerGroupMember, ConsumerGroupState
from .consumer_protocol import PROTOCOL_TYPE
from .migration import (
    MIGRATION_POLICY_CONFIG, MigrationPolicy, classic_group_from_consumer, consumer_group_from_classic,
    consumer_group_records, consumer_group_tombstones,
)
from .modern import (
    EMPTY, AssignmentPacer, ModernGroupConfig, ModernGroupManager, assignment_from, assignment_timer_key,
    compute_target_assignment, metadata_hash, rebalance_timeout_key, session_timeout_key,
)
from .reconcile import MemberState, reconcile
from .registry import find_group

__all__ = ["ConsumerGroupState", "ConsumerGroupMember", "ConsumerGroup", "ConsumerGroupManager"]


def _owned_from(topic_partitions) -> dict | None:
    if topic_partitions is None:
        return None
    owned: dict[str, frozenset] = {}
    for tp in topic_partitions:
        if tp.partitions:
            owned[tp.topic_name] = owned.get(tp.topic_name, frozenset()) | frozenset(tp.partitions)
    return owned


def _is_subset(owned: dict | None, assigned: Mapping) -> bool:
    if owned is None:
        return False
    return all(ps <= assigned.get(t, frozenset()) for t, ps in owned.items())


def _response_assignment(member: ConsumerGroupMember) -> ConsumerGroupHeartbeatResponseAssignment:
    return ConsumerGroupHeartbeatResponseAssignment(tuple(
        ConsumerGroupHeartbeatResponseTopicPartitions(t, tuple(sorted(ps)))
        for t, ps in sorted(member.assigned_partitions.items())))


def _describe_assignment(assignment: Mapping) -> ConsumerGroupDescribeResponseAssignment:
    return ConsumerGroupDescribeResponseAssignment(tuple(
        ConsumerGroupDescribeResponseTopicPartitions(t, tuple(sorted(ps))) for t, ps in sorted(assignment.items())))


class ConsumerGroupManager(ClassicMembers, ModernGroupManager):
    group_class = ConsumerGroup

    def __init__(self, context: CoordinatorContext, groups: dict, classic, assignors: Mapping | None = None,
                 group_configs=None) -> None:
        """`classic` is the shard's ClassicGroupManager, which takes over a group that goes
        back to the classic protocol. `group_configs` (a GroupConfigManager) gives groups
        their own session timeout and heartbeat interval (consumer.session.timeout.ms,
        consumer.heartbeat.interval.ms)."""
        self.context = context
        self.classic = classic
        self.migration_policy = MigrationPolicy.from_config(context.config)
        self.group_configs = group_configs
        self.timer = context.timer
        self.groups = groups
        self.config = ModernGroupConfig.from_config(context.config, "group.consumer.")
        raise_if(not self.config.assignors, Errors.INVALID_CONFIG, "group.consumer.assignors is empty")
        self.assignors = {name: (assignors[name] if assignors and name in assignors else server_assignor(name))
                          for name in self.config.assignors}
        self.topics: dict[str, int] | None = None
        self.pacer = AssignmentPacer(self.config.assignment_interval_ms)
        self._patterns: dict[str, re.Pattern] = {}

    def replayers(self) -> dict:
        return {
            R.ConsumerGroupMetadataKey: self._replay_metadata,
            R.ConsumerGroupMemberMetadataKey: self._replay_member,
            R.ConsumerGroupTargetAssignmentMetadataKey: self._replay_target_epoch,
            R.ConsumerGroupTargetAssignmentMemberKey: self._replay_target_member,
            R.ConsumerGroupCurrentMemberAssignmentKey: self._replay_current_assignment,
            R.ConsumerGroupRegularExpressionKey: self._replay_regex,
        }

    def on_loaded(self, now_ms: int) -> None:
        for group in self.groups.values():
            if group.type != "consumer":
                continue
            for member in group.members.values():
                if member.use_classic_protocol:
                    self._schedule_classic_session_timeout(group.group_id, member, now_ms)
                    continue
                self._schedule_session_timeout(group.group_id, member.member_id, now_ms)
                if member.state is MemberState.UNREVOKED_PARTITIONS:
                    self._schedule_rebalance_timeout(group.group_id, member, now_ms)

    def _group(self, group_id: str) -> ConsumerGroup | None:
        return find_group(self.groups, group_id, "consumer", Errors.GROUP_ID_NOT_FOUND)

    # ================================================================== validation

    def _pattern(self, regex: str) -> re.Pattern:
        pattern = self._patterns.get(regex)
        if pattern is None:
            try:
                pattern = self._patterns[regex] = re.compile(regex)
            except re.error as e:
                raise KafkaError(Errors.INVALID_REGULAR_EXPRESSION, f"SubscribedTopicRegex {regex!r} is invalid: {e}")
        return pattern

    def _raise_if_invalid(self, request: ConsumerGroupHeartbeatRequest) -> None:
        def blank(value):
            return value is not None and not value.strip()

        raise_if(blank(request.group_id) or not request.group_id, Errors.INVALID_REQUEST, "GroupId can't be empty.")
        raise_if(blank(request.instance_id), Errors.INVALID_REQUEST, "InstanceId can't be empty.")
        raise_if(blank(request.rack_id), Errors.INVALID_REQUEST, "RackId can't be empty.")
        epoch = request.member_epoch
        if epoch > 0 or epoch == LEAVE_GROUP_MEMBER_EPOCH:
            raise_if(not request.member_id.strip(), Errors.INVALID_REQUEST, "MemberId can't be empty.")
        elif epoch == 0:
            raise_if(request.rebalance_timeout_ms == -1, Errors.INVALID_REQUEST,
                     "RebalanceTimeoutMs must be provided in first request.")
            raise_if(request.topic_partitions is None or len(request.topic_partitions) > 0, Errors.INVALID_REQUEST,
                     "TopicPartitions must be empty when (re-)joining.")
            raise_if(request.subscribed_topic_names is None and request.subscribed_topic_regex is None,
                     Errors.INVALID_REQUEST,
                     "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.")
        elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            raise_if(not request.member_id.strip(), Errors.INVALID_REQUEST, "MemberId can't be empty.")
            raise_if(request.instance_id is None, Errors.INVALID_REQUEST, "InstanceId can't be null.")
        else:
            raise KafkaError(Errors.INVALID_REQUEST, "MemberEpoch is invalid.")
        raise_if(request.rebalance_timeout_ms < -1, Errors.INVALID_REQUEST, "RebalanceTimeoutMs is invalid.")
        if request.subscribed_topic_regex:
            self._pattern(request.subscribed_topic_regex)
        if request.server_assignor is not None and request.server_assignor not in self.assignors:
            raise KafkaError(Errors.UNSUPPORTED_ASSIGNOR,
                             f"ServerAssignor {request.server_assignor} is not supported. "
                             f"Supported assignors: {', '.join(self.assignors)}.")

    # ================================================================== ConsumerGroupHeartbeat

    def consumer_group_heartbeat(self, request: ConsumerGroupHeartbeatRequest, now_ms: int, new_member_id: str,
                                 client_id: str = "", client_host: str = "") -> Result:
        """`new_member_id` names a member that joins without an id of its own."""
        self._raise_if_invalid(request)
        raise_if(self.topics is None, Errors.COORDINATOR_LOAD_IN_PROGRESS,
                 "the coordinator does not know the topic metadata yet")
        if request.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
            return self._leave(request, now_ms)
        return self._heartbeat(request, now_ms, new_member_id, client_id, client_host)

    def _existing_member(self, group: ConsumerGroup, request, member_id: str, owned):
        """The member the heartbeat is from as the group knows it now (None: a new member)
        and, for a static member taking over another's instance id, the member replaced."""
        epoch, instance_id = request.member_epoch, request.instance_id
        if instance_id is None:
            member = group.members.get(member_id)
            if epoch != 0:
                if member is None:
                    raise KafkaError(Errors.UNKNOWN_MEMBER_ID, f"member {member_id} is not in group {group.group_id}")
                _raise_if_epoch_invalid(member, epoch, owned)
            return member, None
        existing = group.static_member(instance_id)
        if epoch == 0:
            if existing is None or existing.member_id == member_id:
                return group.members.get(member_id), None
            # a member of the classic protocol never says it leaves for a while: the
            # consumer-protocol instance that follows it in a rolling upgrade replaces it
            raise_if(existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH and not existing.use_classic_protocol,
                     Errors.UNRELEASED_INSTANCE_ID,
                     f"static member {member_id} with instance id {instance_id} cannot join the group because "
                     f"the instance id is owned by member {existing.member_id}")
            return None, existing
        raise_if(existing is None, Errors.UNKNOWN_MEMBER_ID, f"instance id {instance_id} is unknown")
        raise_if(existing.member_id != member_id, Errors.FENCED_INSTANCE_ID,
                 f"static member {member_id} with instance id {instance_id} was fenced by {existing.member_id}")
        _raise_if_epoch_invalid(existing, epoch, owned)
        return existing, None

    def _heartbeat(self, request, now_ms: int, new_member_id: str, client_id: str, client_host: str) -> Result:
        group_id, epoch = request.group_id, request.member_epoch
        records: list = []
        group = self.groups.get(group_id)
        upgraded = None  # the classic group this heartbeat converts
        if group is not None and group.type != "consumer":
            # a classic group becomes a consumer group when a member joins: an empty one
            # (say, one that only has offsets an admin client set) is simply replaced, a
            # live one is converted (online upgrade); any other keeps its id
            if epoch != 0 or group.type != "classic":
                raise KafkaError(Errors.GROUP_ID_NOT_FOUND,
                                 f"group {group_id} is a {group.type} group, not a consumer group")
            if group.is_empty():
                records.append(R.group_metadata_tombstone(group_id))
                group = None
            else:
                upgraded, group = group, self._upgraded(group, records)
        if group is None:
            if epoch != 0:
                raise KafkaError(Errors.GROUP_ID_NOT_FOUND, f"consumer group {group_id} not found")
            group = ConsumerGroup(group_id)  # replaying the records below adds it
        member_id = request.member_id or new_member_id
        self._raise_if_full(group, request.member_id and member_id)
        owned = _owned_from(request.topic_partitions)
        stored, replaced = self._existing_member(group, request, member_id, owned)

        if replaced is not None:
            # a static member back under a new member id takes over the old one's partitions
            member = dataclasses.replace(replaced, member_id=member_id, member_epoch=0, previous_member_epoch=0)
            records += self._replace_member_records(group, replaced, member)
        elif stored is None:
            member = ConsumerGroupMember(member_id)
        elif epoch == 0:
            # a rejoin: the member gave up everything; what it still holds here can be given back
            member = dataclasses.replace(stored, member_epoch=0, previous_member_epoch=0, state=MemberState.STABLE,
                                         partitions_pending_revocation={})
        else:
            member = stored
        updated = _updated_member(member, request, client_id, client_host)
        reconciled = self._advance(group, stored, replaced, member, updated, owned, now_ms, records)
        self._schedule_session_timeout(group_id, member_id, now_ms)
        completions = ()
        if upgraded is not None:
            # the classic group's members keep their sessions; its rebalance is over
            for m in group.members.values():
                if m.use_classic_protocol and m.member_id != member_id:
                    self._schedule_classic_session_timeout(group_id, m, now_ms)
            completions = self.classic.converted(upgraded)

        full = epoch == 0 or (request.rebalance_timeout_ms != -1 and request.topic_partitions is not None
                              and (request.subscribed_topic_names is not None
                                   or request.subscribed_topic_regex is not None))
        before = stored.assigned_partitions if stored is not None else EMPTY
        changed = reconciled.assigned_partitions != before
        return Result(records, ConsumerGroupHeartbeatResponse(
            member_id=member_id, member_epoch=reconciled.member_epoch,
            heartbeat_interval_ms=self._group_config(group_id, "consumer.heartbeat.interval.ms",
                                                     self.config.heartbeat_interval_ms),
            assignment=_response_assignment(reconciled) if full or changed else None), completions)

    def _raise_if_full(self, group: ConsumerGroup, known_member_id: str | None) -> None:
        if len(group.members) >= self.config.max_size and (not known_member_id
                                                           or known_member_id not in group.members):
            raise KafkaError(Errors.GROUP_MAX_SIZE_REACHED,
                             f"the consumer group has reached its maximum capacity of {self.config.max_size} members")

    def _replace_member_records(self, group: ConsumerGroup, replaced, member) -> list:
        """The records that put `member` in the place of the static member `replaced`."""
        gid = group.group_id
        return [R.consumer_group_current_assignment_tombstone(gid, replaced.member_id),
                R.consumer_group_target_assignment_tombstone(gid, replaced.member_id),
                R.consumer_group_member_subscription_tombstone(gid, replaced.member_id),
                R.consumer_group_member_subscription_record(gid, member),
                R.consumer_group_target_assignment_record(gid, member.member_id, group.target_of(replaced.member_id)),
                R.consumer_group_current_assignment_record(gid, member)]

    def _advance(self, group: ConsumerGroup, stored, replaced, member, updated, owned, now_ms: int,
                 records: list) -> ConsumerGroupMember:
        """The steps every join and heartbeat takes once the member is known: (1) write the
        member if it changed and bump the group epoch if its subscription did, (2) compute
        the target assignment if the group epoch is ahead of it, (3) reconcile the member
        toward its target. `member` is where the member starts from (a copy of `replaced`
        under its new id, a rejoin at epoch 0, or `stored`), `updated` that with what the
        request sent. Returns the reconciled member."""
        group_id, member_id = group.group_id, updated.member_id
        group_epoch, resolved = self._subscribe(group, stored, replaced, member, updated, now_ms, records)
        target_epoch = group.assignment_epoch
        if group_epoch > group.assignment_epoch:
            due = self.pacer.due(group_id, now_ms)
            if due is None:
                members = dict(group.members)
                if replaced is not None:
                    del members[replaced.member_id]
                members[member_id] = updated
                inherit = {member_id: replaced.member_id} if replaced is not None else {}
                previous = replaced if replaced is not None else stored
                targets = self._assign(group, group_epoch, members, previous, updated, resolved, inherit, records)
                self.pacer.ran(group_id, now_ms)
                target_epoch, target = group_epoch, targets.get(member_id, EMPTY)
            else:
                self._schedule_assignment(group_id, due)
                target = group.target_of(member_id, updated.instance_id)
        else:
            target = group.target_of(member_id, updated.instance_id)
        return self._reconcile(group, stored, replaced, member, updated, owned, target_epoch, target, resolved,
                               now_ms, records)

    def _subscribe(self, group: ConsumerGroup, stored, replaced, member, updated, now_ms: int,
                   records: list) -> tuple[int, dict]:
        """Step 1: the member's record if it changed, and a new group epoch if its
        subscription did. Returns the group epoch and the regexes resolved on the way."""
        group_id = group.group_id
        previous = replaced if replaced is not None else stored
        if updated is not member or (stored is None and replaced is None):
            records.append(R.consumer_group_member_subscription_record(group_id, updated))
        if (updated.subscribed_topic_names == member.subscribed_topic_names
                and updated.subscribed_topic_regex == member.subscribed_topic_regex):
            return group.group_epoch, {}
        resolved = self._regex_changes(group, previous, updated, now_ms, records)
        topics = group.all_subscribed_topics(previous, updated, resolved)
        records.append(R.consumer_group_epoch_record(group_id, group.group_epoch + 1,
                                                     self._metadata_hash(group, topics)))
        return group.group_epoch + 1, resolved

    def _reconcile(self, group: ConsumerGroup, stored, replaced, member, updated, owned, target_epoch: int, target,
                   resolved: dict, now_ms: int, records: list) -> ConsumerGroupMember:
        """Step 3: the member moved toward (target_epoch, target), and its record if it moved."""
        group_id, member_id = group.group_id, updated.member_id
        subscribed = group.subscribed_topics(updated, resolved)
        reconciled = reconcile(updated, target_epoch, target, group.owner_of, owned, subscribed)
        # a replaced static member's record already holds `member`
        if not reconciled.same_assignment_state(member if replaced is not None else stored):
            records.append(R.consumer_group_current_assignment_record(group_id, reconciled))
            # a member of the classic protocol has join and sync timeouts instead
            if reconciled.state is MemberState.UNREVOKED_PARTITIONS and not reconciled.use_classic_protocol:
                self._schedule_rebalance_timeout(group_id, reconciled, now_ms)
            else:
                self.timer.cancel(rebalance_timeout_key(group_id, member_id))
        return reconciled

    def _regex_changes(self, group: ConsumerGroup, previous, updated, now_ms: int, records: list) -> dict:
        """Resolve a regex the group has not seen (and write it); drop the one no member
        uses any more. Returns the newly resolved regexes."""
        resolved = {}
        regex = updated.subscribed_topic_regex
        if regex and regex not in group.resolved_regexes:
            resolved[regex] = self._resolve(regex)
            records.append(R.consumer_group_regex_record(group.group_id, regex, resolved[regex], now_ms))
        old = previous.subscribed_topic_regex if previous is not None else None
        if old and old != regex and group.regex_counts.get(old, 0) <= 1:
            records.append(R.consumer_group_regex_tombstone(group.group_id, old))
        return resolved

    def _metadata_hash(self, group: ConsumerGroup, topics) -> int:
        # before the first update_topics (a timer after a load) the group keeps its hash;
        # update_topics sets it right
        return group.metadata_hash if self.topics is None else metadata_hash(topics, self.topics)

    def _resolve(self, regex: str) -> frozenset[str]:
        pattern = self._pattern(regex)
        # internal topics are never matched, as in Kafka
        return frozenset(t for t in self.topics if not t.startswith("__") and pattern.fullmatch(t))

    def _assign(self, group: ConsumerGroup, group_epoch: int, members: dict, previous, updated,
                resolved: dict, inherit: dict, records: list) -> dict:
        """Recompute the target assignment for `group_epoch` (Kafka's TargetAssignmentBuilder):
        a record per member whose target changed, then the new assignment epoch."""
        name = group.preferred_assignor(previous, updated) or self.config.assignors[0]

        def owned_of(member_id):
            return group.target_assignment.get(inherit.get(member_id, member_id), EMPTY)

        try:
            targets = compute_target_assignment(self.assignors[name], members,
                                                lambda m: group.subscribed_topics(m, resolved), owned_of, self.topics)
        except Exception as e:
            raise KafkaError(Errors.UNKNOWN_SERVER_ERROR,
                             f"failed to compute a new target assignment for epoch {group_epoch}: {e}") from e
        for member_id, target in targets.items():
            old = group.target_assignment.get(inherit.get(member_id, member_id))
            if old is None or old != target:
                records.append(R.consumer_group_target_assignment_record(group.group_id, member_id, target))
        records.append(R.consumer_group_target_assignment_epoch_record(group.group_id, group_epoch))
        return targets

    # ================================================================== leaving and fencing

    def _leave(self, request, now_ms: int) -> Result:
        group = self._group(request.group_id)
        raise_if(group is None, Errors.GROUP_ID_NOT_FOUND, f"consumer group {request.group_id} not found")
        member_id, epoch = request.member_id, request.member_epoch
        response = ConsumerGroupHeartbeatResponse(member_id=member_id, member_epoch=epoch)
        if request.instance_id is None:
            member = group.members.get(member_id)
            raise_if(member is None, Errors.UNKNOWN_MEMBER_ID, f"member {member_id} is not in group {group.group_id}")
            return self._fence(group, member, now_ms, response)
        member = group.static_member(request.instance_id)
        raise_if(member is None, Errors.UNKNOWN_MEMBER_ID, f"instance id {request.instance_id} is unknown")
        raise_if(member.member_id != member_id, Errors.FENCED_INSTANCE_ID,
                 f"static member {member_id} with instance id {request.instance_id} was fenced by {member.member_id}")
        if epoch == LEAVE_GROUP_MEMBER_EPOCH:
            return self._fence(group, member, now_ms, response)
        # a static member's temporary leave: it keeps its partitions until its session
        # expires, so that it can come back (under a new member id) without a rebalance
        leaving = dataclasses.replace(member, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                                      partitions_pending_revocation={})
        return Result([R.consumer_group_current_assignment_record(group.group_id, leaving)], response)

    def _fence(self, group: ConsumerGroup, member, now_ms: int, response=None) -> Result:
        return self._fence_members(group, [member], now_ms, response)

    def _fence_members(self, group: ConsumerGroup, members, now_ms: int, response=None) -> Result:
        """Remove members (Kafka's consumerGroupFenceMembers): tombstones for their records
        and for the regexes nobody else uses, then one group epoch bump so that their
        partitions are reassigned. When every member left speaks the classic protocol, the
        group goes back to a classic group instead (online downgrade)."""
        if not members:
            return Result((), response)
        gid = group.group_id
        leaving = {m.member_id for m in members}
        if self._may_downgrade(group, leaving):
            return Result(self._downgraded(group, leaving, None, now_ms, rebalance=True), response)
        records = []
        for member in members:
            records += [R.consumer_group_current_assignment_tombstone(gid, member.member_id),
                        R.consumer_group_target_assignment_tombstone(gid, member.member_id),
                        R.consumer_group_member_subscription_tombstone(gid, member.member_id)]
        topics, unused_regexes = group.subscriptions_without(members)
        records += [R.consumer_group_regex_tombstone(gid, r) for r in sorted(unused_regexes)]
        records.append(R.consumer_group_epoch_record(gid, group.group_epoch + 1, self._metadata_hash(group, topics)))
        for member_id in leaving:
            self._cancel_timers(gid, member_id)
        return Result(records, response)

    def _cancel_timers(self, group_id: str, member_id: str) -> None:
        for key in (session_timeout_key(group_id, member_id), rebalance_timeout_key(group_id, member_id),
                    classic_join_timeout_key(group_id, member_id), classic_sync_timeout_key(group_id, member_id)):
            self.timer.cancel(key)

    # ================================================================== online upgrade and downgrade

    def _upgraded(self, classic, records: list) -> ConsumerGroup:
        """The consumer group a live classic group becomes (Kafka's validateOnlineUpgrade and
        convertToConsumerGroup): its records go after the classic group's tombstone, and
        each member keeps its session. Raises GROUP_ID_NOT_FOUND, as Kafka, when the
        policy, the protocol type or the group's size forbid it, or its members' consumer
        protocol bytes do not decode."""
        gid = classic.group_id
        raise_if(not self.migration_policy.upgrade_enabled, Errors.GROUP_ID_NOT_FOUND,
                 f"group {gid} is a classic group and {MIGRATION_POLICY_CONFIG} does not allow upgrades")
        raise_if(classic.protocol_type != PROTOCOL_TYPE, Errors.GROUP_ID_NOT_FOUND,
                 f"group {gid} is a classic group of protocol type {classic.protocol_type!r}, not a consumer group")
        raise_if(len(classic.members) > self.config.max_size, Errors.GROUP_ID_NOT_FOUND,
                 f"classic group {gid} has more members than group.consumer.max.size")
        try:
            group = consumer_group_from_classic(classic, self.topics)
        except ValueError as e:
            raise KafkaError(Errors.GROUP_ID_NOT_FOUND, f"cannot upgrade classic group {gid}: {e}") from e
        records.append(R.group_metadata_tombstone(gid))
        records += consumer_group_records(group)
        return group

    def _may_downgrade(self, group: ConsumerGroup, leaving_member_ids, joining: int = 0) -> bool:
        """Kafka's validateOnlineDowngradeWith{FencedMembers,ReplacedMember}: every member but
        those leaving speaks the classic protocol, and they (with `joining` members that
        take a leaving one's place) would form a classic group that the policy and
        group.max.size allow."""
        size = len(group.members) - len(set(leaving_member_ids) & group.members.keys()) + joining
        return (size > 0 and group.all_use_classic_protocol_except(leaving_member_ids)
                and self.migration_policy.downgrade_enabled and size <= self.classic.max_size)

    def _downgraded(self, group: ConsumerGroup, leaving_member_ids, joining_member, now_ms: int,
                    rebalance: bool) -> list:
        """The records that turn `group` into a classic group without `leaving_member_ids`,
        and with `joining_member` in the place of the static member of its instance id.
        With `rebalance` the new group prepares a rebalance at once; its members learn of it
        from their next heartbeat. (Members of the classic protocol join only with a
        protocol all the others support, so the new group always has one.)"""
        classic = classic_group_from_consumer(group, leaving_member_ids, joining_member, now_ms)
        records = consumer_group_tombstones(group, joining_member)
        records.append(classic.metadata_record(classic.assignment()))
        for member_id in [*group.members, *([joining_member.member_id] if joining_member is not None else [])]:
            self._cancel_timers(group.group_id, member_id)
        self.classic.adopt(classic, now_ms, rebalance)
        return records

    # ================================================================== timers

    def _schedule_session_timeout(self, group_id: str, member_id: str, now_ms: int,
                                  timeout_ms: int | None = None) -> None:
        """`timeout_ms`: a member of the classic protocol's, from its JoinGroup; the group's
        consumer session timeout otherwise."""
        def expire(_now_ms: int) -> Result:
            group = self._live_group(group_id)
            member = group.members.get(member_id) if group is not None else None
            return self._fence(group, member, _now_ms) if member is not None else Result()
        if timeout_ms is None:
            timeout_ms = self._group_config(group_id, "consumer.session.timeout.ms", self.config.session_timeout_ms)
        self.timer.schedule(session_timeout_key(group_id, member_id), now_ms + timeout_ms, expire)

    def _group_config(self, group_id: str, name: str, default: int) -> int:
        if self.group_configs is None or name not in self.group_configs.configs.get(group_id, ()):
            return default
        return self.group_configs.value(group_id, name)

    def _schedule_rebalance_timeout(self, group_id: str, member, now_ms: int) -> None:
        member_id, epoch = member.member_id, member.member_epoch

        def expire(_now_ms: int) -> Result:
            # a member that revoked in time has left the epoch it was waiting in
            group = self._live_group(group_id)
            current = group.members.get(member_id) if group is not None else None
            if current is None or current.member_epoch != epoch:
                return Result()
            return self._fence(group, current, _now_ms)
        self.timer.schedule(rebalance_timeout_key(group_id, member_id), now_ms + max(member.rebalance_timeout_ms, 0),
                            expire)

    def _schedule_assignment(self, group_id: str, due_ms: int) -> None:
        key = assignment_timer_key(group_id)
        if not self.timer.is_scheduled(key):
            self.timer.schedule(key, due_ms, lambda now_ms: self._assignment_op(group_id, now_ms))

    def _assignment_op(self, group_id: str, now_ms: int) -> Result:
        """The deferred assignor run of group.consumer.assignment.interval.ms; members pick
        the new target up with their next heartbeat."""
        group = self._live_group(group_id)
        if group is None or self.topics is None or group.group_epoch <= group.assignment_epoch:
            return Result()
        records: list = []
        self._assign(group, group.group_epoch, dict(group.members), None, None, {}, {}, records)
        self.pacer.ran(group_id, now_ms)
        return Result(records)


    # ================================================================== topic metadata

    def update_topics(self, topics: Mapping[str, int], now_ms: int) -> Result:
        """New topic metadata (name -> partition count): regexes are resolved again, and
        every group whose subscribed topics' metadata hash changed moves to a new epoch."""
        for name, partitions in topics.items():
            raise_if(not name or not isinstance(partitions, int) or partitions < 1, Errors.INVALID_REQUEST,
                     f"topic {name!r} with {partitions!r} partitions")
        self.topics = dict(topics)
        records: list = []
        for group_id, group in sorted(self.groups.items()):
            if group.type != "consumer":
                continue
            resolved = {}
            for regex in sorted(group.regex_counts):
                matched = self._resolve(regex)
                if matched != group.resolved_regexes.get(regex):
                    resolved[regex] = matched
                    records.append(R.consumer_group_regex_record(group_id, regex, matched, now_ms))
            new_hash = metadata_hash(group.all_subscribed_topics(resolved=resolved), self.topics)
            if new_hash != group.metadata_hash:
                records.append(R.consumer_group_epoch_record(group_id, group.group_epoch + 1, new_hash))
        return Result(records)

    # ================================================================== ConsumerGroupDescribe

    def consumer_group_describe(self, group_ids) -> list[ConsumerGroupDescribeResponseDescribedGroup]:
        out = []
        for group_id in group_ids:
            group = self.groups.get(group_id)
            if group is None or group.type != "consumer":
                message = (f"group {group_id} not found" if group is None
                           else f"group {group_id} is not a consumer group")
                out.append(ConsumerGroupDescribeResponseDescribedGroup(
                    group_id, Errors.GROUP_ID_NOT_FOUND.code, message, group_state=str(ConsumerGroupState.DEAD)))
                continue
            members = tuple(ConsumerGroupDescribeResponseMember(
                m.member_id, m.instance_id, m.rack_id, m.member_epoch, m.client_id, m.client_host,
                tuple(sorted(m.subscribed_topic_names)), m.subscribed_topic_regex,
                _describe_assignment(m.assigned_partitions),
                _describe_assignment(group.target_assignment.get(m.member_id, EMPTY)),
                0 if m.use_classic_protocol else 1)
                for m in group.members.values())
            out.append(ConsumerGroupDescribeResponseDescribedGroup(
                group_id, group_state=str(group.state), group_epoch=group.group_epoch,
                assignment_epoch=group.assignment_epoch,
                assignor_name=group.preferred_assignor() or self.config.assignors[0], members=members))
        return out

    # ================================================================== replay

    def _replay_member(self, offset: int, key, value) -> None:
        group = self._replay_group(key.group_id, value is not None)
        if group is None:
            return
        if value is None:
            group.apply_member_removed(key.member_id)
            return
        base = group.members.get(key.member_id) or ConsumerGroupMember(key.member_id)
        group.apply_member(dataclasses.replace(
            base, instance_id=value.instance_id, rack_id=value.rack_id, client_id=value.client_id,
            client_host=value.client_host, subscribed_topic_names=frozenset(value.subscribed_topic_names),
            subscribed_topic_regex=value.subscribed_topic_regex, rebalance_timeout_ms=value.rebalance_timeout_ms,
            server_assignor=value.server_assignor, classic_member_metadata=value.classic_member_metadata))

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
        group.apply_current_assignment(dataclasses.replace(
            base or ConsumerGroupMember(key.member_id), member_epoch=value.member_epoch,
            previous_member_epoch=value.previous_member_epoch, state=MemberState.from_value(value.state),
            assigned_partitions=assignment_from(value.assigned_partitions),
            partitions_pending_revocation=assignment_from(value.partitions_pending_revocation)))

    def _replay_regex(self, offset: int, key, value) -> None:
        group = self._replay_group(key.group_id, value is not None)
        if group is None:
            return
        if value is None:
            group.resolved_regexes.pop(key.regular_expression, None)
        else:
            group.resolved_regexes[key.regular_expression] = frozenset(value.topics)


def _raise_if_epoch_invalid(member: ConsumerGroupMember, epoch: int, owned) -> None:
    """A member heartbeats with its current epoch, or with the one before it when the
    response that bumped it was lost and it owns nothing beyond its assignment."""
    if epoch > member.member_epoch:
        raise KafkaError(Errors.FENCED_MEMBER_EPOCH,
                         f"the member has a greater member epoch ({epoch}) than the one known by the group "
                         f"coordinator ({member.member_epoch}); it must abandon all its partitions and rejoin")
    if epoch < member.member_epoch and (epoch != member.previous_member_epoch
                                        or not _is_subset(owned, member.assigned_partitions)):
        raise KafkaError(Errors.FENCED_MEMBER_EPOCH,
                         f"the member has a smaller member epoch ({epoch}) than the one known by the group "
                         f"coordinator ({member.member_epoch}); it must abandon all its partitions and rejoin")


def _updated_member(member: ConsumerGroupMember, request, client_id: str, client_host: str) -> ConsumerGroupMember:
    """The member with what the heartbeat sent; the same object when nothing changed (the
    steady-state heartbeat)."""
    changes = {}
    if request.instance_id is not None and request.instance_id != member.instance_id:
        changes["instance_id"] = request.instance_id
    if request.rack_id is not None and request.rack_id != member.rack_id:
        changes["rack_id"] = request.rack_id
    if request.rebalance_timeout_ms != -1 and request.rebalance_timeout_ms != member.rebalance_timeout_ms:
        changes["rebalance_timeout_ms"] = request.rebalance_timeout_ms
    if request.server_assignor is not None and request.server_assignor != member.server_assignor:
        changes["server_assignor"] = request.server_assignor
    if request.subscribed_topic_names is not None:
        names = frozenset(request.subscribed_topic_names)
        if names != member.subscribed_topic_names:
            changes["subscribed_topic_names"] = names
    if request.subscribed_topic_regex is not None:
        regex = request.subscribed_topic_regex or None
        if regex != member.subscribed_topic_regex:
            changes["subscribed_topic_regex"] = regex
    if client_id != member.client_id:
        changes["client_id"] = client_id
    if client_host != member.client_host:
        changes["client_host"] = client_host
    if member.classic_member_metadata is not None:
        changes["classic_member_metadata"] = None  # it speaks the consumer protocol now
    return dataclasses.replace(member, **changes) if changes else member
