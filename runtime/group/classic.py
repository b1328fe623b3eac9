"""The classic group protocol: JoinGroup, SyncGroup, Heartbeat and LeaveGroup (the classic
parts of Kafka's GroupMetadataManager).

The rebalance is soft state on the ClassicGroup (see classic_group.py). Records are written
where Kafka writes them: the leader's assignment at SyncGroup, an Empty generation, a
static member's new id, a newly created group. `replay_group_metadata` applies them: while
loading it rebuilds the group from the record; on a live group it makes the assignment
durable and moves CompletingRebalance to Stable (Kafka does that when the append
completes; here the responses wait for the same durability, and a failed append reloads
the shard from its log, so every member waiting gets the runtime's retriable error and the
group is back at its last durable generation, where the members rejoin).

Long polls: a member's JoinGroup response is `Deferred(join_key(group, member))`, its
SyncGroup response `Deferred(sync_key(group, member))`; whichever operation or timer ends
the phase completes them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from ..coordinator import CoordinatorContext, Deferred, Result
from ..errors import Errors, KafkaError, raise_if
from ..messages.group import (
    UNKNOWN_MEMBER_ID, HeartbeatRequest, HeartbeatResponse, JoinGroupRequest, JoinGroupResponse,
    LeaveGroupRequest, LeaveGroupResponse, MemberResponse, SyncGroupRequest, SyncGroupResponse,
)
from .classic_group import ClassicGroup, ClassicGroupMember, ClassicGroupState
from .records import GroupMetadataKey, GroupMetadataValue
from .registry import find_group

__all__ = ["ClassicGroupManager", "join_key", "sync_key", "heartbeat_key", "rebalance_key", "pending_sync_key",
           "NEW_MEMBER_JOIN_TIMEOUT_MS"]

S = ClassicGroupState

# A new member's JoinGroup is parked without a session; if the client gave up on it, the
# member is dropped after this long (Kafka's classicGroupNewMemberJoinTimeoutMs).
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000


def join_key(group_id: str, member_id: str) -> tuple:
    return ("join", group_id, member_id)


def sync_key(group_id: str, member_id: str) -> tuple:
    return ("sync", group_id, member_id)


def heartbeat_key(group_id: str, member_id: str) -> str:
    return f"heartbeat-{group_id}-{member_id}"


def rebalance_key(group_id: str) -> str:
    return f"join-{group_id}"


def pending_sync_key(group_id: str) -> str:
    return f"sync-{group_id}"


@dataclass
class _Out:
    """What an operation has produced so far: records and completed long polls."""
    records: list = field(default_factory=list)
    completions: list = field(default_factory=list)

    def result(self, response) -> Result:
        return Result(self.records, response, self.completions)


class ClassicGroupManager:
    def __init__(self, context: CoordinatorContext, groups: dict) -> None:
        config = context.config
        self.timer = context.timer
        self.groups = groups
        self.min_session_timeout_ms = int(config.get("group.min.session.timeout.ms", 6000))
        self.max_session_timeout_ms = int(config.get("group.max.session.timeout.ms", 1800000))
        self.max_size = int(config.get("group.max.size", 2147483647))
        self.initial_rebalance_delay_ms = int(config.get("group.initial.rebalance.delay.ms", 3000))
        self.loaded = False
        # live groups that this write's GroupMetadata record brings in from another group
        # type (see adopt); replay installs them in place of a group rebuilt from the record
        self._adopting: dict[str, ClassicGroup] = {}

    def _group(self, group_id: str, mismatch: Errors) -> ClassicGroup | None:
        return find_group(self.groups, group_id, "classic", mismatch)

    def _timer_op(self, fn: Callable, *args) -> Callable[[int], Result]:
        """A timer operation that runs `fn(*args, now_ms, out)` through the write path."""
        def run(now_ms: int) -> Result:
            out = _Out()
            fn(*args, now_ms, out)
            return out.result(None)
        return run

    # ================================================================== JoinGroup

    def validate_join(self, request: JoinGroupRequest) -> None:
        """What every JoinGroup must pass, whatever the group's type."""
        raise_if(not request.group_id, Errors.INVALID_GROUP_ID, "empty group id")
        raise_if(not self.min_session_timeout_ms <= request.session_timeout_ms <= self.max_session_timeout_ms,
                 Errors.INVALID_SESSION_TIMEOUT,
                 f"session timeout {request.session_timeout_ms} ms is outside "
                 f"[{self.min_session_timeout_ms}, {self.max_session_timeout_ms}]")

    def join_group(self, request: JoinGroupRequest, now_ms: int, new_member_id: str,
                   client_id: str = "", client_host: str = "", replacing=()) -> Result:
        """`replacing`: the tombstones of an empty group of another type (a consumer group)
        that this JoinGroup replaces with a new classic group."""
        self.validate_join(request)
        group_id, member_id = request.group_id, request.member_id
        unknown = member_id == UNKNOWN_MEMBER_ID
        group = None if replacing else self._group(group_id, Errors.INCONSISTENT_GROUP_PROTOCOL)
        new_group = group is None
        if new_group:
            raise_if(not unknown, Errors.UNKNOWN_MEMBER_ID, f"group {group_id} does not exist")
            group = ClassicGroup(group_id, current_state_timestamp=now_ms)
        protocols = tuple((p.name, p.metadata) for p in request.protocols)
        names = frozenset(name for name, _ in protocols)
        out = _Out()

        if not self._accepts_joining_member(group, member_id):
            if group.has_member(member_id):
                self._drop_member(group, group.members[member_id], out)
            return out.result(JoinGroupResponse(error_code=Errors.GROUP_MAX_SIZE_REACHED.code))
        raise_if(not group.supports_protocols(request.protocol_type, names), Errors.INCONSISTENT_GROUP_PROTOCOL,
                 f"protocols {sorted(names)} of type {request.protocol_type!r} do not fit group {group_id}")
        if not unknown and member_id not in group.pending_join_members:
            group.validate_member(member_id, request.group_instance_id)
        if new_group and replacing:
            self._adopting[group_id] = group  # the other group's tombstones must replay first
        elif new_group:
            self.groups[group_id] = group

        if unknown:
            response = self._join_new_member(request, group, protocols, new_member_id, client_id, client_host,
                                             now_ms, out)
        elif member_id in group.pending_join_members:
            response = self._add_member(request, group, protocols, member_id, client_id, client_host, now_ms, out)
        else:
            response = self._join_existing_member(request, group, protocols, now_ms, out)
        if new_group and not out.records:
            # make the new group durable, as Kafka does, so it survives a restart
            out.records.append(group.empty_record())
        out.records[:0] = replacing
        return out.result(response)

    def _accepts_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        if group.is_in(S.EMPTY, S.DEAD):
            return True
        if group.is_in(S.PREPARING_REBALANCE):
            # counting members awaiting join (not all members) lets the last rejoiners be
            # turned away when group.max.size was lowered
            member = group.members.get(member_id)
            return (member is not None and member.awaiting_join) or group.num_awaiting_join < self.max_size
        return group.has_member(member_id) or len(group.members) < self.max_size

    def _join_new_member(self, request, group, protocols, new_member_id, client_id, client_host, now_ms, out):
        instance_id = request.group_instance_id
        if instance_id is not None:
            existing = group.static_member_id(instance_id)
            if existing is not None:
                return self._replace_static_member(request, group, protocols, existing, new_member_id, now_ms, out)
            return self._add_member(request, group, protocols, new_member_id, client_id, client_host, now_ms, out)
        # a dynamic member must come back with the id we give it
        group.pending_join_members.add(new_member_id)
        self.timer.schedule(heartbeat_key(group.group_id, new_member_id), now_ms + request.session_timeout_ms,
                            self._timer_op(self._expire_heartbeat, group.group_id, new_member_id))
        return JoinGroupResponse(error_code=Errors.MEMBER_ID_REQUIRED.code, member_id=new_member_id)

    def _add_member(self, request, group, protocols, member_id, client_id, client_host, now_ms, out):
        member = ClassicGroupMember(member_id, request.group_instance_id, client_id, client_host,
                                    _rebalance_timeout(request), request.session_timeout_ms, request.protocol_type,
                                    protocols, is_new=True)
        if group.is_in(S.PREPARING_REBALANCE) and group.previous_state is S.EMPTY:
            group.new_member_added = True  # stretches the initial rebalance delay
        group.add(member, awaiting_join=True)
        # the member has no session yet: drop it if its parked JoinGroup was abandoned
        self._schedule_heartbeat(group, member, now_ms, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance_or_complete_join(group, now_ms, out)
        return Deferred(join_key(group.group_id, member_id))

    def _join_existing_member(self, request, group, protocols, now_ms, out):
        member = group.members[request.member_id]
        if group.is_in(S.PREPARING_REBALANCE):
            return self._update_member_and_rebalance(request, group, member, protocols, now_ms, out)
        if group.is_in(S.COMPLETING_REBALANCE):
            if member.matches(protocols):
                # the member missed its JoinGroup response: give it again
                return self._join_response(group, member)
            return self._update_member_and_rebalance(request, group, member, protocols, now_ms, out)
        if group.is_in(S.STABLE):
            # a leader rejoining forces a rebalance (it may have seen metadata change)
            if group.is_leader(member.member_id) or not member.matches(protocols):
                return self._update_member_and_rebalance(request, group, member, protocols, now_ms, out)
            return self._join_response(group, member, with_members=False)
        return JoinGroupResponse(error_code=Errors.UNKNOWN_MEMBER_ID.code, member_id=member.member_id)

    def _update_member_and_rebalance(self, request, group, member, protocols, now_ms, out):
        group.update_member(member, protocols, _rebalance_timeout(request), request.session_timeout_ms, True)
        self._maybe_prepare_rebalance_or_complete_join(group, now_ms, out)
        return Deferred(join_key(group.group_id, member.member_id))

    def _replace_static_member(self, request, group, protocols, old_member_id, new_member_id, now_ms, out):
        """A known group instance id joins without a member id: it takes over the old id,
        whose pending requests are fenced. No rebalance when Stable and the group's
        protocol stays the same (Kafka's updateStaticMemberThenRebalanceOrCompleteJoin)."""
        old = group.members[old_member_id]
        fenced = Errors.FENCED_INSTANCE_ID.code
        self._complete_join_future(group, old, JoinGroupResponse(error_code=fenced, member_id=old_member_id), out)
        self._complete_sync_future(group, old, SyncGroupResponse(error_code=fenced), out)
        self.timer.cancel(heartbeat_key(group.group_id, old_member_id))
        member = group.replace_static_member(request.group_instance_id, old_member_id, new_member_id)
        self._schedule_heartbeat(group, member, now_ms)
        if group.is_in(S.STABLE):
            group.update_member(member, protocols, _rebalance_timeout(request), request.session_timeout_ms, False)
            if group.protocol_name == group.select_protocol():
                out.records.append(group.metadata_record(group.assignment()))
                leader = group.is_leader(new_member_id)
                return self._join_response(group, member, with_members=leader, skip_assignment=leader)
            group.set_awaiting_join(member, True)
            self._maybe_prepare_rebalance_or_complete_join(group, now_ms, out)
        else:
            group.update_member(member, protocols, _rebalance_timeout(request), request.session_timeout_ms, True)
            if group.is_in(S.COMPLETING_REBALANCE):
                # the leader may have assigned to the old id: assign again
                self._prepare_rebalance(group, now_ms, out)
            else:
                self._maybe_complete_join_phase(group, now_ms, out)
        return Deferred(join_key(group.group_id, new_member_id))

    def _join_response(self, group: ClassicGroup, member: ClassicGroupMember, with_members: bool | None = None,
                       skip_assignment: bool = False) -> JoinGroupResponse:
        if with_members is None:
            with_members = group.is_leader(member.member_id)
        return JoinGroupResponse(
            error_code=0, generation_id=group.generation_id, protocol_type=group.protocol_type,
            protocol_name=group.protocol_name, leader=group.leader_id or "", skip_assignment=skip_assignment,
            member_id=member.member_id, members=group.leader_members() if with_members else ())

    # ================================================================== the join phase

    def _maybe_prepare_rebalance_or_complete_join(self, group: ClassicGroup, now_ms: int, out: _Out) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, now_ms, out)
        else:
            self._maybe_complete_join_phase(group, now_ms, out)

    def _prepare_rebalance(self, group: ClassicGroup, now_ms: int, out: _Out) -> None:
        if group.is_in(S.COMPLETING_REBALANCE):
            # members waiting for an assignment must rejoin instead
            for member in group.members.values():
                member.assignment = b""
            self._propagate_sync(group, Errors.REBALANCE_IN_PROGRESS, {}, now_ms, out)
        group.pending_sync_members.clear()
        self.timer.cancel(pending_sync_key(group.group_id))
        initial = group.is_in(S.EMPTY)
        if initial:
            # a new group waits a little for more members before its first generation
            delay = self.initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            self.timer.schedule(rebalance_key(group.group_id), now_ms + delay,
                                self._timer_op(self._try_complete_initial_rebalance, group.group_id, delay, remaining))
        group._transition(S.PREPARING_REBALANCE, now_ms)
        if not initial:
            if group.has_all_members_joined():
                self._complete_join(group, now_ms, out)
            else:
                self.timer.schedule(rebalance_key(group.group_id), now_ms + group.rebalance_timeout_ms(),
                                    self._timer_op(self._complete_join_by_id, group.group_id))

    def _maybe_complete_join_phase(self, group: ClassicGroup, now_ms: int, out: _Out) -> None:
        if (group.is_in(S.PREPARING_REBALANCE) and group.previous_state is not S.EMPTY
                and group.has_all_members_joined()):
            self._complete_join(group, now_ms, out)

    def _try_complete_initial_rebalance(self, group_id: str, delay: int, remaining: int, now_ms: int,
                                        out: _Out) -> None:
        group = self.groups.get(group_id)
        if not isinstance(group, ClassicGroup):
            return
        if group.new_member_added and remaining != 0:
            group.new_member_added = False
            new_delay = min(self.initial_rebalance_delay_ms, remaining)
            new_remaining = max(remaining - delay, 0)
            self.timer.schedule(rebalance_key(group_id), now_ms + new_delay,
                                self._timer_op(self._try_complete_initial_rebalance, group_id, new_delay,
                                               new_remaining))
        else:
            self._complete_join(group, now_ms, out)

    def _complete_join_by_id(self, group_id: str, now_ms: int, out: _Out) -> None:
        group = self.groups.get(group_id)
        if isinstance(group, ClassicGroup):
            self._complete_join(group, now_ms, out)

    def _complete_join(self, group: ClassicGroup, now_ms: int, out: _Out) -> None:
        """End the join phase: drop dynamic members that did not rejoin, start the next
        generation, and answer every JoinGroup (the leader gets the members' metadata)."""
        self.timer.cancel(rebalance_key(group.group_id))
        for member in group.not_yet_rejoined():
            if member.group_instance_id is None:
                group.remove(member.member_id)
                self.timer.cancel(heartbeat_key(group.group_id, member.member_id))
        if group.is_in(S.DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # only static members are left and none rejoined: wait for their sessions to end
            self.timer.schedule(rebalance_key(group.group_id), now_ms + group.rebalance_timeout_ms(),
                                self._timer_op(self._complete_join_by_id, group.group_id))
            return
        group.init_next_generation(now_ms)
        if group.is_in(S.EMPTY):
            out.records.append(group.metadata_record({}))
            return
        for member in group.members.values():
            self._complete_join_future(group, member, self._join_response(group, member), out)
            self._schedule_heartbeat(group, member, now_ms)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        self.timer.schedule(pending_sync_key(group.group_id), now_ms + group.rebalance_timeout_ms(),
                            self._timer_op(self._expire_pending_sync, group.group_id, group.generation_id))

    def _complete_join_future(self, group: ClassicGroup, member: ClassicGroupMember, response, out: _Out) -> bool:
        if not member.awaiting_join:
            return False
        out.completions.append((join_key(group.group_id, member.member_id), response))
        group.set_awaiting_join(member, False)
        return True

    def _complete_sync_future(self, group: ClassicGroup, member: ClassicGroupMember, response, out: _Out) -> bool:
        if not member.awaiting_sync:
            return False
        out.completions.append((sync_key(group.group_id, member.member_id), response))
        member.awaiting_sync = False
        return True

    def _expire_pending_sync(self, group_id: str, generation_id: int, now_ms: int, out: _Out) -> None:
        group = self.groups.get(group_id)
        if not isinstance(group, ClassicGroup) or group.generation_id != generation_id:
            return
        if group.is_in(S.COMPLETING_REBALANCE, S.STABLE) and group.pending_sync_members:
            for member_id in list(group.pending_sync_members):
                self._drop_member(group, group.members[member_id], out)
            self._prepare_rebalance(group, now_ms, out)

    # ================================================================== SyncGroup

    def sync_group(self, request: SyncGroupRequest, now_ms: int) -> Result:
        raise_if(not request.group_id, Errors.INVALID_GROUP_ID, "empty group id")
        group = self._group(request.group_id, Errors.UNKNOWN_MEMBER_ID)
        raise_if(group is None or group.is_empty(), Errors.UNKNOWN_MEMBER_ID,
                 f"group {request.group_id} has no members")
        group.validate_member(request.member_id, request.group_instance_id)
        raise_if(request.generation_id != group.generation_id, Errors.ILLEGAL_GENERATION,
                 f"generation {request.generation_id} is not {group.group_id}'s {group.generation_id}")
        raise_if(_inconsistent(request.protocol_type, group.protocol_type)
                 or _inconsistent(request.protocol_name, group.protocol_name),
                 Errors.INCONSISTENT_GROUP_PROTOCOL, f"group {group.group_id} uses {group.protocol_type}/"
                 f"{group.protocol_name}")
        raise_if(group.is_in(S.PREPARING_REBALANCE), Errors.REBALANCE_IN_PROGRESS,
                 f"group {group.group_id} is rebalancing")
        member = group.members[request.member_id]
        out = _Out()
        self._remove_pending_sync_member(group, member.member_id)
        if group.is_in(S.STABLE):
            return out.result(SyncGroupResponse(protocol_type=group.protocol_type, protocol_name=group.protocol_name,
                                                assignment=member.assignment))
        member.awaiting_sync = True
        if group.is_leader(member.member_id):
            # members the leader left out get an empty assignment; the assignment is
            # durable before anyone hears of it
            given = {a.member_id: a.assignment for a in request.assignments}
            assignment = {m: given.get(m, b"") for m in group.members}
            out.records.append(group.metadata_record(assignment))
            self._propagate_sync(group, Errors.NONE, assignment, now_ms, out)
        return out.result(Deferred(sync_key(group.group_id, member.member_id)))

    def _remove_pending_sync_member(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        if not group.pending_sync_members:
            self.timer.cancel(pending_sync_key(group.group_id))

    def _propagate_sync(self, group: ClassicGroup, error: Errors, assignment: dict, now_ms: int, out: _Out) -> None:
        ok = error is Errors.NONE
        for member in group.members.values():
            response = SyncGroupResponse(error_code=error.code,
                                         protocol_type=group.protocol_type if ok else None,
                                         protocol_name=group.protocol_name if ok else None,
                                         assignment=assignment.get(member.member_id, b"") if ok else b"")
            if self._complete_sync_future(group, member, response, out):
                # a session that ran out while the member waited for its assignment starts over
                self._schedule_heartbeat(group, member, now_ms)

    # ================================================================== Heartbeat

    def heartbeat(self, request: HeartbeatRequest, now_ms: int) -> Result:
        raise_if(not request.group_id, Errors.INVALID_GROUP_ID, "empty group id")
        group = self._group(request.group_id, Errors.UNKNOWN_MEMBER_ID)
        raise_if(group is None, Errors.UNKNOWN_MEMBER_ID, f"group {request.group_id} not found")
        group.validate_member(request.member_id, request.group_instance_id)
        raise_if(request.generation_id != group.generation_id, Errors.ILLEGAL_GENERATION,
                 f"generation {request.generation_id} is not {group.group_id}'s {group.generation_id}")
        if group.is_in(S.EMPTY):
            return Result((), HeartbeatResponse(error_code=Errors.UNKNOWN_MEMBER_ID.code))
        self._schedule_heartbeat(group, group.members[request.member_id], now_ms)
        if group.is_in(S.PREPARING_REBALANCE):
            return Result((), HeartbeatResponse(error_code=Errors.REBALANCE_IN_PROGRESS.code))
        return Result((), HeartbeatResponse())

    def touch_member(self, group: ClassicGroup, member_id: str, now_ms: int) -> None:
        """An offset commit keeps a member's session alive while Stable or rebalancing."""
        if group.is_in(S.STABLE, S.PREPARING_REBALANCE) and member_id in group.members:
            self._schedule_heartbeat(group, group.members[member_id], now_ms)

    def _schedule_heartbeat(self, group: ClassicGroup, member: ClassicGroupMember, now_ms: int,
                            timeout_ms: int | None = None) -> None:
        timeout = member.session_timeout_ms if timeout_ms is None else timeout_ms
        self.timer.schedule(heartbeat_key(group.group_id, member.member_id), now_ms + timeout,
                            self._timer_op(self._expire_heartbeat, group.group_id, member.member_id))

    def _expire_heartbeat(self, group_id: str, member_id: str, now_ms: int, out: _Out) -> None:
        group = self.groups.get(group_id)
        if not isinstance(group, ClassicGroup) or group.is_in(S.DEAD):
            return
        if member_id in group.pending_join_members:
            group.remove(member_id)
            self._maybe_complete_join_after_removal(group, now_ms, out)
            return
        member = group.members.get(member_id)
        if member is None or member.has_satisfied_heartbeat():
            return
        self._drop_member(group, member, out)
        if group.is_in(S.STABLE, S.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance_or_complete_join(group, now_ms, out)
        else:
            self._maybe_complete_join_after_removal(group, now_ms, out)

    def _maybe_complete_join_after_removal(self, group: ClassicGroup, now_ms: int, out: _Out) -> None:
        if group.is_in(S.PREPARING_REBALANCE) and group.has_all_members_joined():
            self._complete_join(group, now_ms, out)

    def _drop_member(self, group: ClassicGroup, member: ClassicGroupMember, out: _Out) -> None:
        """Remove a member, answering its parked requests with UNKNOWN_MEMBER_ID so that a
        client still alive joins again."""
        unknown = Errors.UNKNOWN_MEMBER_ID.code
        self._complete_join_future(group, member, JoinGroupResponse(error_code=unknown, member_id=UNKNOWN_MEMBER_ID),
                                   out)
        self._complete_sync_future(group, member, SyncGroupResponse(error_code=unknown), out)
        self.timer.cancel(heartbeat_key(group.group_id, member.member_id))
        group.remove(member.member_id)

    # ================================================================== LeaveGroup

    def leave_group(self, request: LeaveGroupRequest, now_ms: int) -> Result:
        raise_if(not request.group_id, Errors.INVALID_GROUP_ID, "empty group id")
        group = self.groups.get(request.group_id)
        if not isinstance(group, ClassicGroup):
            unknown = Errors.UNKNOWN_MEMBER_ID.code
            return Result((), LeaveGroupResponse(members=tuple(
                MemberResponse(m.member_id, m.group_instance_id, unknown) for m in request.members)))
        out = _Out()
        responses = []
        left = False
        for identity in request.members:
            member_id, instance_id = identity.member_id, identity.group_instance_id
            error = 0
            if member_id == UNKNOWN_MEMBER_ID:
                # an admin removes a static member by its instance id alone
                existing = group.static_member_id(instance_id) if instance_id is not None else None
                if existing is None:
                    error = Errors.UNKNOWN_MEMBER_ID.code
                else:
                    self._drop_member(group, group.members[existing], out)
            elif member_id in group.pending_join_members:
                group.remove(member_id)
                self.timer.cancel(heartbeat_key(group.group_id, member_id))
                responses.append(MemberResponse(member_id, instance_id))
                continue
            else:
                try:
                    group.validate_member(member_id, instance_id)
                except KafkaError as e:
                    error = e.code
                else:
                    self._drop_member(group, group.members[member_id], out)
            left = left or error == 0
            responses.append(MemberResponse(member_id, instance_id, error))
        if left:
            if group.is_in(S.STABLE, S.COMPLETING_REBALANCE):
                self._maybe_prepare_rebalance_or_complete_join(group, now_ms, out)
            elif group.is_in(S.PREPARING_REBALANCE):
                self._maybe_complete_join_phase(group, now_ms, out)
        return out.result(LeaveGroupResponse(members=tuple(responses)))

    # ================================================================== records and loading

    def replay_group_metadata(self, offset: int, key: GroupMetadataKey, value: GroupMetadataValue | None) -> None:
        group = self.groups.get(key.group)
        if value is None:
            if group is not None:
                del self.groups[key.group]
                if isinstance(group, ClassicGroup):
                    group._transition(S.DEAD, group.current_state_timestamp or 0)
            return
        if not self.loaded or not isinstance(group, ClassicGroup):
            adopted = self._adopting.pop(key.group, None) if self.loaded else None
            self.groups[key.group] = adopted if adopted is not None else ClassicGroup.from_record(key.group, value)
        elif group.matches_record(value):
            # the checkpoint of the live group: its assignment is now part of the group
            for m in value.members:
                group.members[m.member_id].assignment = m.assignment
            if group.is_in(S.COMPLETING_REBALANCE):
                group._transition(S.STABLE, value.current_state_timestamp)
        # otherwise the live group is ahead of the record (members joined a new group
        # whose empty record this is): nothing to apply

    # ================================================================== conversions (migration.py)

    def converted(self, group: ClassicGroup) -> list:
        """A live classic group that becomes a consumer group in this write: the members
        waiting in its rebalance hear REBALANCE_IN_PROGRESS (they join the consumer group
        instead), and its timers stop. Returns the completions."""
        out = _Out()
        gid = group.group_id
        error = Errors.REBALANCE_IN_PROGRESS.code
        for member in group.members.values():
            self._complete_join_future(group, member, JoinGroupResponse(error_code=error, member_id=member.member_id),
                                       out)
            self._complete_sync_future(group, member, SyncGroupResponse(error_code=error), out)
        for member_id in [*group.members, *group.pending_join_members]:
            self.timer.cancel(heartbeat_key(gid, member_id))
        self.timer.cancel(rebalance_key(gid))
        self.timer.cancel(pending_sync_key(gid))
        return out.completions

    def adopt(self, group: ClassicGroup, now_ms: int, rebalance: bool) -> None:
        """A classic group that a consumer group becomes in this write (its GroupMetadata
        record comes last): its members' sessions start now, and with `rebalance` it
        prepares a rebalance at once, which they join when their heartbeat tells them to."""
        for member in group.members.values():
            self._schedule_heartbeat(group, member, now_ms)
        if rebalance:
            self._prepare_rebalance(group, now_ms, _Out())
        self._adopting[group.group_id] = group

    def on_loaded(self, now_ms: int) -> None:
        """Members of loaded groups must heartbeat within their session timeout; a group
        over group.max.size rebalances (Kafka's onLoaded)."""
        self.loaded = True
        for group in self.groups.values():
            if not isinstance(group, ClassicGroup):
                continue
            for member in group.members.values():
                self._schedule_heartbeat(group, member, now_ms)
            if len(group.members) > self.max_size:
                self._prepare_rebalance(group, now_ms, _Out())


def _rebalance_timeout(request: JoinGroupRequest) -> int:
    return request.session_timeout_ms if request.rebalance_timeout_ms < 0 else request.rebalance_timeout_ms


def _inconsistent(requested: str | None, current: str | None) -> bool:
    return requested is not None and current is not None and requested != current
