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
from ..topics.internal import is_internal
from . import records as R
from .consumer_classic import ClassicMembers, classic_join_timeout_key, classic_sync_timeout_key
from .consumer_group import ConsumerGroup, ConsumerGroupMember, ConsumerGroupState
from .consumer_protocol import PROTOCOL_TYPE
from .migration import (
    MIGRATION_POLICY_CONFIG, MigrationPolicy, classic_group_from_consumer, consumer_group_from_classic,
    consumer_group_records, consumer_group_tombstones,
)
from .modern import (
    EMPTY, AssignmentPacer, DescribeClasses, ModernGroupConfig, ModernGroupManager, ModernRecords,
    assignment_message, assignment_timer_key, blank, metadata_hash, raise_if_epoch_invalid, rebalance_timeout_key,
    updated_member_fields,
)
from .reconcile import MemberState, reconcile

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
    return assignment_message(member.assigned_partitions, ConsumerGroupHeartbeatResponseAssignment,
                              ConsumerGroupHeartbeatResponseTopicPartitions)


class ConsumerGroupManager(ClassicMembers, ModernGroupManager):
    group_class = ConsumerGroup
    member_class = ConsumerGroupMember
    records = ModernRecords((R.ConsumerGroupMetadataKey, R.ConsumerGroupMemberMetadataKey,
                             R.ConsumerGroupTargetAssignmentMetadataKey, R.ConsumerGroupTargetAssignmentMemberKey,
                             R.ConsumerGroupCurrentMemberAssignmentKey),
                            R.consumer_group_epoch_record, R.consumer_group_member_subscription_tombstone,
                            R.consumer_group_target_assignment_record, R.consumer_group_target_assignment_tombstone,
                            R.consumer_group_target_assignment_epoch_record,
                            R.consumer_group_current_assignment_tombstone)
    describe_classes = DescribeClasses(ConsumerGroupDescribeResponseDescribedGroup,
                                       ConsumerGroupDescribeResponseAssignment,
                                       ConsumerGroupDescribeResponseTopicPartitions)

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
        return {**super().replayers(), R.ConsumerGroupRegularExpressionKey: self._replay_regex}

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
        self._raise_if_no_topics()
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
                member = self._member_or_raise(group, member_id)
                raise_if_epoch_invalid(member, epoch, lambda: _is_subset(owned, member.assigned_partitions))
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
        raise_if_epoch_invalid(existing, epoch, lambda: _is_subset(owned, existing.assigned_partitions))
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
        self._raise_if_full(group, member_id)
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
            heartbeat_interval_ms=self._heartbeat_interval_ms(group_id),
            assignment=_response_assignment(reconciled) if full or changed else None), completions)

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

    def _resolve(self, regex: str) -> frozenset[str]:
        pattern = self._pattern(regex)
        # internal topics are never matched, as in Kafka
        return frozenset(t for t in self.topics if not is_internal(t) and pattern.fullmatch(t))

    def _assign(self, group: ConsumerGroup, group_epoch: int, members: dict, previous, updated,
                resolved: dict, inherit: dict, records: list) -> dict:
        """Recompute the target assignment for `group_epoch` (Kafka's TargetAssignmentBuilder):
        a record per member whose target changed, then the new assignment epoch."""
        name = group.preferred_assignor(previous, updated) or self.config.assignors[0]

        def owned_of(member_id):
            return group.target_assignment.get(inherit.get(member_id, member_id), EMPTY)

        targets = self._compute_targets(group_epoch, self.assignors[name], members,
                                        lambda m: group.subscribed_topics(m, resolved), owned_of)
        self._target_records(group, group_epoch, targets,
                             lambda member_id: group.target_assignment.get(inherit.get(member_id, member_id)), records)
        return targets

    # ================================================================== leaving and fencing

    def _leave(self, request, now_ms: int) -> Result:
        """A dynamic member leaves at once; a static member (with an instance id) may leave
        for good (epoch -1) or for a while (epoch -2)."""
        if request.instance_id is None:
            return super()._leave(request, now_ms)
        group = self._group_or_raise(request.group_id)
        member_id, epoch = request.member_id, request.member_epoch
        response = self._leave_response(request)
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

    def _leave_response(self, request) -> ConsumerGroupHeartbeatResponse:
        return ConsumerGroupHeartbeatResponse(member_id=request.member_id, member_epoch=request.member_epoch)

    def _fence_members(self, group: ConsumerGroup, members, now_ms: int, response=None) -> Result:
        """Kafka's consumerGroupFenceMembers: when every member left speaks the classic
        protocol, the group goes back to a classic group (online downgrade) instead."""
        leaving = {m.member_id for m in members}
        if members and self._may_downgrade(group, leaving):
            return Result(self._downgraded(group, leaving, None, now_ms, rebalance=True), response)
        return super()._fence_members(group, members, now_ms, response)

    def _subscriptions_without(self, group: ConsumerGroup, members, records: list):
        # with the regexes nobody else uses
        topics, unused_regexes = group.subscriptions_without(members)
        records += [R.consumer_group_regex_tombstone(group.group_id, r) for r in sorted(unused_regexes)]
        return topics

    def _cancel_timers(self, group_id: str, member_id: str) -> None:
        super()._cancel_timers(group_id, member_id)
        for key in (classic_join_timeout_key(group_id, member_id), classic_sync_timeout_key(group_id, member_id)):
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

    def _schedule_rebalance_timeout(self, group_id: str, member, now_ms: int) -> None:
        # a member that revoked in time has left the epoch it was waiting in
        self.timer.schedule(rebalance_timeout_key(group_id, member.member_id),
                            now_ms + max(member.rebalance_timeout_ms, 0),
                            self._fence_on_timeout(group_id, member.member_id, member.member_epoch))

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
        return self._describe(group_ids)

    def _describe_member(self, group: ConsumerGroup, m: ConsumerGroupMember) -> ConsumerGroupDescribeResponseMember:
        return ConsumerGroupDescribeResponseMember(
            m.member_id, m.instance_id, m.rack_id, m.member_epoch, m.client_id, m.client_host,
            tuple(sorted(m.subscribed_topic_names)), m.subscribed_topic_regex,
            self._describe_assignment(m.assigned_partitions),
            self._describe_assignment(group.target_assignment.get(m.member_id, EMPTY)),
            0 if m.use_classic_protocol else 1)

    def _assignor_name(self, group: ConsumerGroup) -> str:
        return group.preferred_assignor() or self.config.assignors[0]

    # ================================================================== replay

    def _replay_regex(self, offset: int, key, value) -> None:
        group = self._replay_group(key.group_id, value is not None)
        if group is None:
            return
        if value is None:
            group.resolved_regexes.pop(key.regular_expression, None)
        else:
            group.resolved_regexes[key.regular_expression] = frozenset(value.topics)


def _updated_member(member: ConsumerGroupMember, request, client_id: str, client_host: str) -> ConsumerGroupMember:
    """The member with what the heartbeat sent; the same object when nothing changed (the
    steady-state heartbeat)."""
    changes = updated_member_fields(member, request, client_id, client_host)
    if request.instance_id is not None and request.instance_id != member.instance_id:
        changes["instance_id"] = request.instance_id
    if request.rebalance_timeout_ms != -1 and request.rebalance_timeout_ms != member.rebalance_timeout_ms:
        changes["rebalance_timeout_ms"] = request.rebalance_timeout_ms
    if request.server_assignor is not None and request.server_assignor != member.server_assignor:
        changes["server_assignor"] = request.server_assignor
    if request.subscribed_topic_regex is not None:
        regex = request.subscribed_topic_regex or None
        if regex != member.subscribed_topic_regex:
            changes["subscribed_topic_regex"] = regex
    if member.classic_member_metadata is not None:
        changes["classic_member_metadata"] = None  # it speaks the consumer protocol now
    return dataclasses.replace(member, **changes) if changes else member
