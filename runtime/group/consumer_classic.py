"""Members of the classic protocol inside a consumer group: JoinGroup, SyncGroup, Heartbeat
and LeaveGroup on a consumer group (Kafka's classicGroup{Join,Sync,Heartbeat,Leave}ToConsumerGroup).

Such a member is a consumer group member like any other, except that it speaks through the
classic APIs: its subscription (and the partitions it still owns) come from the consumer
protocol bytes of its JoinGroup, the server assignor computes its assignment, and SyncGroup
hands its current assignment over in the same bytes. Its generation is its member epoch. A
JoinGroup answers at once (there is no join phase to wait for): it moves the member as far
toward its target as its owned partitions allow. The member learns that it must move again
from REBALANCE_IN_PROGRESS on its heartbeat or SyncGroup, and revokes by joining again
without the partitions it gave up. Instead of the rebalance timeout of the consumer
protocol it has a join timeout (it must rejoin within its rebalance timeout once asked to)
and a sync timeout (it must sync within it after joining). LeaveGroup removes members of
either protocol, as Kafka 4.x does (an admin removes static members by instance id).

The coordinator reads the bytes as Kafka's ConsumerProtocol (consumer_protocol.py), which is
what shoal's classic consumer and Kafka's clients send.

`ClassicMembers` is a part of ConsumerGroupManager (consumer.py), whose steps it shares.
"""
from __future__ import annotations

import dataclasses

from ..coordinator import Result
from ..errors import Errors, KafkaError, raise_if
from ..messages.group import (
    UNKNOWN_MEMBER_ID, HeartbeatResponse, JoinGroupResponse, LeaveGroupResponse, MemberResponse, SyncGroupResponse,
)
from .consumer_group import ConsumerGroup, ConsumerGroupMember
from .consumer_protocol import PROTOCOL_TYPE, decode_subscription, encode_assignment
from .migration import classic_member_metadata, subscription_version
from .reconcile import MemberState

__all__ = ["ClassicMembers", "classic_join_timeout_key", "classic_sync_timeout_key"]


def classic_join_timeout_key(group_id: str, member_id: str) -> tuple:
    return ("consumer-classic-join", group_id, member_id)


def classic_sync_timeout_key(group_id: str, member_id: str) -> tuple:
    return ("consumer-classic-sync", group_id, member_id)


class ClassicMembers:
    """The classic APIs on a consumer group; mixed into ConsumerGroupManager."""

    # ================================================================== JoinGroup

    def classic_join(self, group: ConsumerGroup, request, now_ms: int, new_member_id: str,
                     client_id: str = "", client_host: str = "") -> Result:
        """A JoinGroup to a consumer group that has members (the caller validated the
        request's group id and session timeout, as for any JoinGroup)."""
        raise_if(self.topics is None, Errors.COORDINATOR_LOAD_IN_PROGRESS,
                 "the coordinator does not know the topic metadata yet")
        gid, instance_id = group.group_id, request.group_instance_id
        unknown = request.member_id == UNKNOWN_MEMBER_ID
        member_id = new_member_id if unknown else request.member_id
        self._raise_if_full(group, None if unknown else member_id)
        names = [p.name for p in request.protocols]
        raise_if(not group.supports_classic_protocols(request.protocol_type, names), Errors.INCONSISTENT_GROUP_PROTOCOL,
                 f"member {member_id}'s protocols are not supported")
        if unknown and instance_id is None:
            # a dynamic member must come back with the id we give it
            return Result((), JoinGroupResponse(error_code=Errors.MEMBER_ID_REQUIRED.code, member_id=member_id))
        try:
            # every protocol carries the same subscription
            subscription = decode_subscription(request.protocols[0].metadata)
        except ValueError as e:
            raise KafkaError(Errors.UNKNOWN_SERVER_ERROR, f"malformed consumer protocol subscription: {e}") from e

        records: list = []
        replaced = None
        existing = group.static_member(instance_id) if instance_id is not None else None
        if instance_id is None:
            stored = group.members.get(member_id)
            member = stored if stored is not None else ConsumerGroupMember(member_id)
        elif not unknown:
            raise_if(existing is None, Errors.UNKNOWN_MEMBER_ID, f"instance id {instance_id} is unknown")
            raise_if(existing.member_id != member_id, Errors.FENCED_INSTANCE_ID,
                     f"static member {member_id} with instance id {instance_id} was fenced by {existing.member_id}")
            stored = member = existing
        elif existing is None:
            stored, member = None, ConsumerGroupMember(member_id)
        else:
            # the instance is back under a new member id: it takes over the old one's place
            stored, replaced = None, existing
            member = dataclasses.replace(existing, member_id=member_id, member_epoch=0, previous_member_epoch=0)
            records += self._replace_member_records(group, existing, member)

        updated = _joined_member(member, request, subscription, client_id, client_host)
        owned = {t: frozenset(ps) for t, ps in subscription.owned_partitions if ps}
        if (existing is not None and not existing.use_classic_protocol
                and self._may_downgrade(group, {existing.member_id}, joining=1)):
            # the last member of the consumer protocol replaced by one of the classic
            # protocol: the group goes back to a classic group, which rebalances only if the
            # subscription changed; otherwise the member takes the place it inherits
            group_epoch, resolved = self._subscribe(group, stored, replaced, member, updated, now_ms, records)
            changed = group_epoch != group.group_epoch
            reconciled = updated if changed else self._reconcile(
                group, stored, replaced, member, updated, owned, group.assignment_epoch,
                group.target_of(member_id, instance_id), resolved, now_ms, records)
            records += self._downgraded(group, (), reconciled, now_ms, rebalance=changed)
        else:
            reconciled = self._advance(group, stored, replaced, member, updated, owned, now_ms, records)
            self.timer.cancel(classic_join_timeout_key(gid, member_id))
            self._schedule_classic_session_timeout(gid, reconciled, now_ms)
            self._schedule_classic_timeout(classic_sync_timeout_key(gid, member_id), gid, member_id,
                                           now_ms + reconciled.rebalance_timeout_ms)
        return Result(records, JoinGroupResponse(
            generation_id=reconciled.member_epoch, protocol_type=PROTOCOL_TYPE,
            protocol_name=reconciled.classic_protocol_names[0], member_id=member_id))

    # ================================================================== SyncGroup

    def classic_sync(self, group: ConsumerGroup, request, now_ms: int) -> Result:
        member = self._classic_member(group, request.member_id, request.group_instance_id)
        _raise_if_generation_unmatched(member, request.generation_id)
        protocol_name = member.classic_protocol_names[0]
        raise_if(request.protocol_type is not None and request.protocol_type != PROTOCOL_TYPE,
                 Errors.INCONSISTENT_GROUP_PROTOCOL,
                 f"protocol type {request.protocol_type} is not the group's {PROTOCOL_TYPE}")
        raise_if(request.protocol_name is not None and request.protocol_name != protocol_name,
                 Errors.INCONSISTENT_GROUP_PROTOCOL,
                 f"protocol {request.protocol_name} is not {protocol_name}, which the JoinGroup answered")
        gid = group.group_id
        if group.group_epoch > member.member_epoch and member.state is not MemberState.UNREVOKED_PARTITIONS:
            # a new epoch since the member joined: it must join again to catch up (one
            # waiting for its revocations joins again once it has revoked them)
            self._schedule_classic_join_timeout(gid, member, now_ms)
            return Result((), SyncGroupResponse(error_code=Errors.REBALANCE_IN_PROGRESS.code))
        self.timer.cancel(classic_sync_timeout_key(gid, member.member_id))
        self._schedule_classic_session_timeout(gid, member, now_ms)
        assigned = tuple((t, tuple(sorted(ps))) for t, ps in sorted(member.assigned_partitions.items()))
        version = subscription_version(member.classic_member_metadata.supported_protocols[0].metadata)
        return Result((), SyncGroupResponse(protocol_type=request.protocol_type, protocol_name=request.protocol_name,
                                            assignment=encode_assignment(assigned, version=version)))

    # ================================================================== Heartbeat

    def classic_heartbeat(self, group: ConsumerGroup, request, now_ms: int) -> Result:
        """REBALANCE_IN_PROGRESS asks the member to join again: when the group epoch is
        ahead of its own, when it has partitions to revoke, or when the partitions it waits
        for have all been released."""
        member = self._classic_member(group, request.member_id, request.group_instance_id)
        _raise_if_generation_unmatched(member, request.generation_id)
        gid = group.group_id
        self._schedule_classic_session_timeout(gid, member, now_ms)
        if (member.member_epoch < group.group_epoch or member.state is MemberState.UNREVOKED_PARTITIONS
                or (member.state is MemberState.UNRELEASED_PARTITIONS
                    and not group.waiting_on_unreleased_partition(member))):
            self._schedule_classic_join_timeout(gid, member, now_ms)
            return Result((), HeartbeatResponse(error_code=Errors.REBALANCE_IN_PROGRESS.code))
        return Result((), HeartbeatResponse())

    # ================================================================== LeaveGroup

    def classic_leave(self, group: ConsumerGroup, request, now_ms: int) -> Result:
        """Each member named leaves, whichever protocol it speaks (so that an admin can
        remove any static member by its instance id); the group epoch bumps once, or the
        group goes back to a classic group if only members of the classic protocol stay."""
        responses, leaving = [], {}
        for identity in request.members:
            member_id, instance_id = identity.member_id, identity.group_instance_id
            try:
                if instance_id is None:
                    member = group.members.get(member_id)
                    raise_if(member is None, Errors.UNKNOWN_MEMBER_ID,
                             f"member {member_id} is not in group {group.group_id}")
                else:
                    member = group.static_member(instance_id)
                    raise_if(member is None, Errors.UNKNOWN_MEMBER_ID, f"instance id {instance_id} is unknown")
                    # an admin removes a static member by its instance id alone
                    raise_if(member_id != UNKNOWN_MEMBER_ID and member.member_id != member_id,
                             Errors.FENCED_INSTANCE_ID,
                             f"static member {member_id} with instance id {instance_id} was fenced by "
                             f"{member.member_id}")
            except KafkaError as e:
                responses.append(MemberResponse(member_id, instance_id, e.code))
                continue
            leaving[member.member_id] = member
            responses.append(MemberResponse(member_id, instance_id))
        return self._fence_members(group, list(leaving.values()), now_ms,
                                   LeaveGroupResponse(members=tuple(responses)))

    # ================================================================== helpers and timers

    def _classic_member(self, group: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerGroupMember:
        """The member a classic request is from (Kafka's validateConsumerGroupMember and
        throwIfMemberDoesNotUseClassicProtocol)."""
        if instance_id is None:
            member = group.members.get(member_id)
            raise_if(member is None, Errors.UNKNOWN_MEMBER_ID, f"member {member_id} is not in group {group.group_id}")
        else:
            member = group.static_member(instance_id)
            raise_if(member is None, Errors.UNKNOWN_MEMBER_ID, f"instance id {instance_id} is unknown")
            raise_if(member.member_id != member_id, Errors.FENCED_INSTANCE_ID,
                     f"static member {member_id} with instance id {instance_id} was fenced by {member.member_id}")
        raise_if(not member.use_classic_protocol, Errors.UNKNOWN_MEMBER_ID,
                 f"member {member.member_id} does not use the classic protocol")
        return member

    def _schedule_classic_session_timeout(self, group_id: str, member: ConsumerGroupMember, now_ms: int) -> None:
        self._schedule_session_timeout(group_id, member.member_id, now_ms,
                                       member.classic_member_metadata.session_timeout_ms)

    def _schedule_classic_join_timeout(self, group_id: str, member: ConsumerGroupMember, now_ms: int) -> None:
        """Once asked to join again, the member has its rebalance timeout to do so; asking
        again does not push the deadline back."""
        key = classic_join_timeout_key(group_id, member.member_id)
        if not self.timer.is_scheduled(key):
            self._schedule_classic_timeout(key, group_id, member.member_id, now_ms + member.rebalance_timeout_ms)

    def _schedule_classic_timeout(self, key, group_id: str, member_id: str, deadline_ms: int) -> None:
        self.timer.schedule(key, deadline_ms, self._fence_on_timeout(group_id, member_id))


def _raise_if_generation_unmatched(member: ConsumerGroupMember, generation_id: int) -> None:
    raise_if(generation_id != member.member_epoch, Errors.ILLEGAL_GENERATION,
             f"generation {generation_id} is not member {member.member_id}'s epoch {member.member_epoch}")


def _joined_member(member: ConsumerGroupMember, request, subscription, client_id: str,
                   client_host: str) -> ConsumerGroupMember:
    """The member with what its JoinGroup sent; the same object when nothing changed."""
    changes = {}
    if request.group_instance_id is not None and request.group_instance_id != member.instance_id:
        changes["instance_id"] = request.group_instance_id
    if subscription.rack_id is not None and subscription.rack_id != member.rack_id:
        changes["rack_id"] = subscription.rack_id
    rebalance_timeout = request.session_timeout_ms if request.rebalance_timeout_ms < 0 else request.rebalance_timeout_ms
    if rebalance_timeout != member.rebalance_timeout_ms:
        changes["rebalance_timeout_ms"] = rebalance_timeout
    topics = frozenset(subscription.topics)
    if topics != member.subscribed_topic_names:
        changes["subscribed_topic_names"] = topics
    if member.subscribed_topic_regex is not None:
        changes["subscribed_topic_regex"] = None
    if client_id != member.client_id:
        changes["client_id"] = client_id
    if client_host != member.client_host:
        changes["client_host"] = client_host
    meta = classic_member_metadata(request.session_timeout_ms, ((p.name, p.metadata) for p in request.protocols))
    if meta != member.classic_member_metadata:
        changes["classic_member_metadata"] = meta
    return dataclasses.replace(member, **changes) if changes else member
