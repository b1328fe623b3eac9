"""The classic consumer's group membership (Kafka's AbstractCoordinator and
ConsumerCoordinator), sans I/O.

The member decides what each JoinGroup, SyncGroup, Heartbeat and LeaveGroup carries, and
turns every answer into a `Step`: what to do next (an `Action`) and which partitions to give
up or take. The client actor carries the requests and applies the steps (commits, listener
callbacks, starting and stopping fetches). Every state change goes through `_transition`,
checked against `PREVIOUS_STATES`; what each error means is the `_ERRORS` table.

Revocation follows the rebalance protocol: an eager member gives up everything before it
joins; a cooperative one keeps what it owns, gives up after the sync what the leader took
away, and then joins again so the partitions' new owners can get them.
"""
from __future__ import annotations

import enum
import logging
from dataclasses import dataclass

from runtime.assignors import MemberSubscription, client_assignor
from runtime.errors import Errors, KafkaError
from runtime.group.consumer_protocol import (PROTOCOL_TYPE, decode_assignment, decode_subscription,
                                             encode_assignment, encode_subscription)
from runtime.messages.group import (HeartbeatRequest, HeartbeatResponse, JoinGroupRequest, JoinGroupRequestProtocol,
                                    JoinGroupResponse, LeaveGroupRequest, MemberIdentity, OffsetCommitRequest,
                                    OffsetCommitResponse, SyncGroupRequest, SyncGroupRequestAssignment,
                                    SyncGroupResponse)

from .offsets import Action, CommitFailedError, commit_outcome, offset_commit_request
from .types import TopicPartition

log = logging.getLogger(__name__)

__all__ = ["MemberState", "PREVIOUS_STATES", "IllegalStateTransition", "Step", "ClassicMember", "Action"]


class MemberState(enum.Enum):
    UNJOINED = "unjoined"                          # no generation: the next step is a JoinGroup
    PREPARING_REBALANCE = "preparing_rebalance"    # the JoinGroup is out
    COMPLETING_REBALANCE = "completing_rebalance"  # joined; the SyncGroup is out
    STABLE = "stable"                              # synced: heartbeats until the next rebalance
    FATAL = "fatal"                                # an error no retry mends; every poll raises it


S = MemberState

# Each state and the states it may be entered from (Kafka's AbstractCoordinator.MemberState,
# plus FATAL for its errors that end the consumer).
PREVIOUS_STATES: dict[MemberState, frozenset[MemberState]] = {
    S.UNJOINED: frozenset({S.UNJOINED, S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE, S.STABLE}),
    S.PREPARING_REBALANCE: frozenset({S.UNJOINED, S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE, S.STABLE}),
    S.COMPLETING_REBALANCE: frozenset({S.PREPARING_REBALANCE}),
    S.STABLE: frozenset({S.COMPLETING_REBALANCE}),
    S.FATAL: frozenset({S.UNJOINED, S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE, S.STABLE}),
}


class IllegalStateTransition(Exception):
    def __init__(self, current: MemberState, to: MemberState) -> None:
        super().__init__(f"illegal member state transition {current.value} -> {to.value}")
        self.current, self.to = current, to


_NO_PARTITIONS: frozenset = frozenset()


@dataclass(frozen=True)
class Step:
    """What the shell does next, in this order: commit what was consumed of `commit` (auto
    commit), give up `revoke` or `lose`, take `assign`."""
    action: Action = Action.NONE
    revoke: frozenset = _NO_PARTITIONS  # on_partitions_revoked, then stop fetching them
    lose: frozenset = _NO_PARTITIONS    # on_partitions_lost: the generation is gone, no commit
    assign: frozenset = _NO_PARTITIONS  # start fetching, then on_partitions_assigned
    commit: frozenset = _NO_PARTITIONS
    error: KafkaError | None = None     # with RAISE and FATAL


# What an error answer to each API means: (action, what of the member's identity goes).
# Errors not listed: retriable ones are retried after a backoff, the rest are fatal, as
# Kafka's "unexpected error" branches are. "member" forgets the member id and generation,
# "generation" only the generation (the member id may still be good, so its old membership
# need not time out before it joins again).
_J, _SY, _H = "join_group", "sync_group", "heartbeat"
_COORDINATOR_GONE = {Errors.COORDINATOR_NOT_AVAILABLE: (Action.REDISCOVER, None),
                     Errors.NOT_COORDINATOR: (Action.REDISCOVER, None)}
_ERRORS: dict[str, dict[Errors, tuple[Action, str | None]]] = {
    _J: {**_COORDINATOR_GONE,
         Errors.COORDINATOR_LOAD_IN_PROGRESS: (Action.RETRY, None),
         Errors.UNKNOWN_MEMBER_ID: (Action.REJOIN, "member"),
         Errors.REBALANCE_IN_PROGRESS: (Action.REJOIN, None),
         Errors.MEMBER_ID_REQUIRED: (Action.REJOIN, None)},  # with the member id it was given
    _SY: {**_COORDINATOR_GONE,
          Errors.REBALANCE_IN_PROGRESS: (Action.REJOIN, None),
          Errors.UNKNOWN_MEMBER_ID: (Action.REJOIN, "member"),
          Errors.ILLEGAL_GENERATION: (Action.REJOIN, "generation")},
    _H: {**_COORDINATOR_GONE,
         Errors.REBALANCE_IN_PROGRESS: (Action.REJOIN, None),
         Errors.UNKNOWN_MEMBER_ID: (Action.REJOIN, "member"),
         Errors.ILLEGAL_GENERATION: (Action.REJOIN, "generation"),
         Errors.FENCED_INSTANCE_ID: (Action.FATAL, "member")},  # another instance took its place
}


class ClassicMember:
    def __init__(self, group_id: str, settings: dict) -> None:
        self.group_id = group_id
        self.session_timeout_ms = settings["session_timeout_ms"]
        self.rebalance_timeout_ms = settings["rebalance_timeout_ms"] or settings["max_poll_interval_ms"]
        self.metadata_max_age_ms = settings["metadata_max_age_ms"]
        self.instance_id = settings["group_instance_id"]
        self.auto_commit = settings["enable_auto_commit"]
        self.strategies = tuple(settings["partition_assignment_strategy"])
        # Kafka's rule: cooperative only if every configured assignor supports it.
        self.cooperative = all(name == "cooperative-sticky" for name in self.strategies)
        self.state = S.UNJOINED
        self.member_id = ""
        self.generation = -1
        self.protocol: str | None = None
        self.subscription: tuple[str, ...] = ()
        self.owned: frozenset = _NO_PARTITIONS
        self.last_assignment: dict[str, tuple[int, ...]] = {}  # reported as owned when it joins
        self.rejoin_needed = False
        self.needs_join_prepare = True  # Kafka's: the revocation before a join is done once per rebalance
        self.poll_expired = False
        self.fatal_error: KafkaError | None = None
        self._members: dict[str, MemberSubscription] | None = None  # the leader's view of the join
        self._metadata: tuple | None = None  # the leader's (topics, partition counts) of its last assignment
        self._metadata_checked_ms = 0

    # ------------------------------------------------------------------ the table

    def _transition(self, to: MemberState) -> None:
        if self.state not in PREVIOUS_STATES[to]:
            raise IllegalStateTransition(self.state, to)
        self.state = to

    def _reset(self, what: str | None) -> None:
        """Kafka's resetStateAndGeneration: back to UNJOINED without a generation."""
        if what is None:
            return
        if what == "member":
            self.member_id = ""
        self.generation = -1
        self.needs_join_prepare = True
        if self.state is not S.FATAL:
            self._transition(S.UNJOINED)

    def _fail(self, error: Errors, message: str | None = None) -> Step:
        if self.state is S.FATAL:  # the first fatal error is the one the user sees
            return Step(Action.FATAL, error=self.fatal_error)
        self.fatal_error = KafkaError(error, message or f"the group coordinator answered {error.name}")
        self._transition(S.FATAL)
        return Step(Action.FATAL, error=self.fatal_error)

    def _on_error(self, api: str, error: Errors) -> Step:
        action, reset = _ERRORS[api].get(error, (Action.RETRY if error.retriable else Action.FATAL, None))
        if action is Action.FATAL:
            self._reset(reset)
            return self._fail(error)
        self._reset(reset)
        if action is Action.REJOIN:
            self.rejoin_needed = True
        return Step(action)

    # ------------------------------------------------------------------ the user's calls

    def subscribe(self, topics) -> bool:
        """A new subscription; True if it changed (the member joins again to send it)."""
        self._raise_if_fatal()
        topics = tuple(sorted(set(topics)))
        if topics == self.subscription:
            return False
        self.subscription = topics
        self.rejoin_needed = True
        return True

    def needs_join(self) -> bool:
        return bool(self.subscription) and not self.poll_expired and self.state is not S.FATAL and (
            self.state is not S.STABLE or self.rejoin_needed)

    def leave(self, reason: str) -> tuple[frozenset, LeaveGroupRequest | None]:
        """Kafka's maybeLeaveGroup: the partitions to give up (the caller revokes or loses
        them), and the goodbye of a dynamic member. A static member just forgets its
        generation, so that coming back within the session timeout is no rebalance."""
        given_up = self.owned
        request = None
        if self.member_id and self.instance_id is None and self.generation != -1:
            request = LeaveGroupRequest(self.group_id, (MemberIdentity(self.member_id, None, reason),))
        self.owned = _NO_PARTITIONS
        self.last_assignment = {}
        self.member_id, self.generation = "", -1
        self.needs_join_prepare = True
        if self.state is not S.FATAL:
            self._transition(S.UNJOINED)
        return given_up, request

    def unsubscribe(self, reason: str) -> tuple[frozenset, LeaveGroupRequest | None]:
        self.subscription = ()
        return self.leave(reason)

    def poll_timer_expired(self, reason: str) -> tuple[frozenset, LeaveGroupRequest | None]:
        """max_poll_interval_ms passed without a poll: Kafka's heartbeat thread leaves the
        group; the partitions are lost, and the next poll joins again."""
        lost, request = self.leave(reason)
        self.poll_expired = True
        return lost, request

    def poll_resumed(self) -> None:
        if self.poll_expired:
            self.poll_expired = False
            self.rejoin_needed = True

    # ------------------------------------------------------------------ joining

    def prepare_join(self) -> Step:
        """Kafka's onJoinPrepare, once per rebalance: partitions of a generation that is gone
        are lost; otherwise what was consumed is committed (auto commit) and an eager member
        gives up everything, a cooperative one what it no longer subscribes to."""
        if not self.needs_join_prepare:
            return Step()
        self.needs_join_prepare = False
        owned = self.owned
        if self.generation == -1 or not self.member_id:
            self.owned = _NO_PARTITIONS
            if owned:
                self.last_assignment = {}
            return Step(lose=owned)
        revoked = owned if not self.cooperative else frozenset(tp for tp in owned
                                                               if tp.topic not in self.subscription)
        self.owned = owned - revoked
        return Step(revoke=revoked, commit=owned if self.auto_commit else _NO_PARTITIONS)

    def join_request(self) -> JoinGroupRequest:
        self._raise_if_fatal()
        self._transition(S.PREPARING_REBALANCE)
        # An eager member reports its last assignment as owned too (a departure from Kafka,
        # README): the sticky assignors keep their stickiness from it.
        owned = tuple((t, ps) for t, ps in sorted(self.last_assignment.items()) if t in self.subscription)
        metadata = encode_subscription(self.subscription, None, owned, self.generation)
        return JoinGroupRequest(self.group_id, self.session_timeout_ms, self.member_id, PROTOCOL_TYPE,
                                tuple(JoinGroupRequestProtocol(name, metadata) for name in self.strategies),
                                self.rebalance_timeout_ms, self.instance_id)

    def on_join_response(self, response: JoinGroupResponse) -> Step:
        """SYNC, or ASSIGN for the leader (`assignment_topics()`, then `leader_sync_request`);
        otherwise what the error means."""
        if self.state is not S.PREPARING_REBALANCE:
            return Step(Action.REJOIN)  # the member was reset meanwhile (a failed commit): this join is moot
        error = Errors.for_code(response.error_code)
        if error is Errors.MEMBER_ID_REQUIRED:
            self.member_id = response.member_id
        if error is not Errors.NONE:
            return self._on_error(_J, error)
        self.member_id, self.generation, self.protocol = response.member_id, response.generation_id, \
            response.protocol_name
        self._transition(S.COMPLETING_REBALANCE)
        self._metadata = None
        if response.leader != self.member_id or response.skip_assignment:
            self._members = None
            return Step(Action.SYNC)
        self._members = {m.member_id: _member_subscription(m) for m in response.members}
        return Step(Action.ASSIGN)

    def assignment_topics(self) -> list[str]:
        """The topics whose partition counts the leader needs: every member's subscription."""
        return sorted(set().union(*(s.topics for s in (self._members or {}).values())))

    def sync_request(self, partition_counts: dict | None = None, now_ms: int = 0) -> SyncGroupRequest:
        """The SyncGroup; the leader's carries the assignment its chosen assignor computed
        from every member's subscription and the `partition_counts` of their topics."""
        assignments = ()
        if self._members is not None:
            self._metadata = (self.assignment_topics(), dict(partition_counts or {}))
            self._metadata_checked_ms = now_ms
            result = client_assignor(self.protocol)(self._members, self._metadata[1])
            assignments = tuple(SyncGroupRequestAssignment(mid, encode_assignment(
                tuple((t, tuple(sorted(ps))) for t, ps in sorted(result.get(mid, {}).items()) if ps)))
                for mid in self._members)
            self._members = None
        return SyncGroupRequest(self.group_id, self.generation, self.member_id, self.instance_id, PROTOCOL_TYPE,
                                self.protocol, assignments)

    def on_sync_response(self, response: SyncGroupResponse) -> Step:
        """Kafka's onJoinComplete: take the assignment. A cooperative member gives up what the
        leader moved away, then joins again so that the new owners can get it."""
        if self.state is not S.COMPLETING_REBALANCE:
            return Step(Action.REJOIN)  # reset meanwhile
        error = Errors.for_code(response.error_code)
        if error is not Errors.NONE:
            return self._on_error(_SY, error)
        assigned_partitions = decode_assignment(response.assignment).assigned_partitions
        assigned = frozenset(TopicPartition(t, p) for t, ps in assigned_partitions for p in ps)
        self.last_assignment = {t: tuple(sorted(ps)) for t, ps in assigned_partitions}
        self._transition(S.STABLE)
        self.needs_join_prepare = True
        revoked = self.owned - assigned
        self.rejoin_needed = bool(revoked)
        added = assigned - self.owned
        self.owned = assigned
        return Step(revoke=revoked, assign=added, commit=revoked if self.auto_commit else _NO_PARTITIONS)

    # ------------------------------------------------------------------ heartbeats

    def heartbeat_request(self) -> HeartbeatRequest | None:
        """None when there is no generation to keep alive."""
        if not self.member_id or self.generation == -1:
            return None
        return HeartbeatRequest(self.group_id, self.generation, self.member_id, self.instance_id)

    def on_heartbeat_response(self, response: HeartbeatResponse, request: HeartbeatRequest) -> Step:
        error = Errors.for_code(response.error_code)
        if error is Errors.NONE:
            return Step()
        if error is Errors.REBALANCE_IN_PROGRESS and self.state is not S.STABLE:
            return Step()  # it is rejoining already
        if error in (Errors.ILLEGAL_GENERATION, Errors.UNKNOWN_MEMBER_ID, Errors.FENCED_INSTANCE_ID) and (
                (request.generation_id, request.member_id) != (self.generation, self.member_id)):
            return Step()  # about a generation it has left behind
        return self._on_error(_H, error)

    def request_failed(self, error: Errors) -> Step:
        """A join, sync or heartbeat call failed without an answer (the actor died, the call
        timed out): retriable ones are retried after a backoff."""
        if error in _COORDINATOR_GONE:
            return Step(Action.REDISCOVER)
        if error.retriable:
            return Step(Action.RETRY)
        return self._fail(error)

    # ------------------------------------------------------------------ metadata

    def metadata_check_due(self, now_ms: int) -> list[str] | None:
        """The topics to look up if the leader's metadata is due for a check, else None."""
        if self._metadata is None or now_ms - self._metadata_checked_ms < self.metadata_max_age_ms:
            return None
        self._metadata_checked_ms = now_ms
        return self._metadata[0]

    def on_metadata(self, partition_counts: dict) -> bool:
        """Kafka's leader joins again when what it assigned from changed: a subscribed topic
        got partitions, or was created or deleted. True if it does."""
        if self._metadata is not None and partition_counts != self._metadata[1]:
            self.rejoin_needed = True
        return self.rejoin_needed

    # ------------------------------------------------------------------ offsets

    def offset_commit_request(self, offsets: dict) -> OffsetCommitRequest:
        """A commit carries the generation while the member is in the group; otherwise it is
        a commit of a consumer outside the group (generation -1, no member id)."""
        in_group = bool(self.subscription) and self.generation != -1
        return offset_commit_request(self.group_id, offsets, self.generation if in_group else -1,
                                     self.member_id if in_group else "", self.instance_id if in_group else None)

    def on_commit_response(self, response: OffsetCommitResponse, request: OffsetCommitRequest) -> Step:
        """Kafka's OffsetCommitResponseHandler: NONE, RETRY or REDISCOVER (commits are
        idempotent: the whole request goes again), or RAISE with the error."""
        action, exc = commit_outcome(response)
        if action is not Action.RAISE:
            return Step(action, error=exc)
        error = exc.error
        unchanged = (request.generation_id_or_member_epoch, request.member_id) == (self.generation, self.member_id)
        if error is Errors.REBALANCE_IN_PROGRESS:
            self.rejoin_needed = True  # the rebalance is finished in the next poll
        elif error in (Errors.UNKNOWN_MEMBER_ID, Errors.ILLEGAL_GENERATION):
            if unchanged or self.state is not S.PREPARING_REBALANCE:
                self._reset("member" if error is Errors.UNKNOWN_MEMBER_ID else "generation")
                self.rejoin_needed = True
        elif error is Errors.FENCED_INSTANCE_ID and not unchanged:
            exc = CommitFailedError(error, "the commit failed: a newer generation of this member fenced the old one")
        return Step(Action.RAISE, error=exc)

    def _raise_if_fatal(self) -> None:
        if self.state is S.FATAL:
            raise self.fatal_error


def _member_subscription(member) -> MemberSubscription:
    try:
        sub = decode_subscription(member.metadata)
    except ValueError:
        log.warning("member %s sent a subscription that does not decode", member.member_id)
        return MemberSubscription((), instance_id=member.group_instance_id)
    return MemberSubscription(sub.topics, owned={t: ps for t, ps in sub.owned_partitions}, rack=sub.rack_id,
                              instance_id=member.group_instance_id, generation=sub.generation_id)
