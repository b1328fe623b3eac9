"""KIP-848 group membership on the client, sans I/O: the base every member shares (Kafka's
AbstractMembershipManager) and the consumer's manager (Kafka's ConsumerMembershipManager).
The share consumer's manager subclasses the same base (`share_membership.py`).

A manager decides what the next heartbeat carries, takes in the responses, and hands out
the reconciliations to apply; the client actor does the I/O (the heartbeat calls, the
commits and listener callbacks of a revocation, starting and stopping fetches) and reports
back. Every state change goes through `_transition`, checked against `PREVIOUS_STATES`.

A reconciliation revokes before it assigns, and a consumer acknowledges it by reporting
what it owns in its next heartbeat; the coordinator gives a partition to its next owner
only after that report, so two members never own a partition at once.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass

from runtime.errors import Errors, KafkaError
from runtime.messages.consumer import (JOIN_GROUP_MEMBER_EPOCH, LEAVE_GROUP_MEMBER_EPOCH,
                                       LEAVE_GROUP_STATIC_MEMBER_EPOCH, ConsumerGroupHeartbeatRequest,
                                       ConsumerGroupHeartbeatRequestTopicPartitions)

from .types import TopicPartition

__all__ = ["MemberState", "PREVIOUS_STATES", "IllegalStateTransition", "Reconciliation",
           "AbstractMembershipManager", "MembershipManager"]


class MemberState(enum.Enum):
    UNSUBSCRIBED = "UNSUBSCRIBED"        # not in a group, and not meaning to join one
    JOINING = "JOINING"                  # heartbeating with epoch 0 until the first response
    RECONCILING = "RECONCILING"          # moving from what it owns toward the target it was sent
    ACKNOWLEDGING = "ACKNOWLEDGING"      # reconciled; the next heartbeat (sent at once) says so
    STABLE = "STABLE"                    # owns its target; heartbeats at the interval
    FENCED = "FENCED"                    # the coordinator dropped it: partitions lost, then rejoin
    PREPARE_LEAVING = "PREPARE_LEAVING"  # giving up its partitions (callbacks) before leaving
    LEAVING = "LEAVING"                  # the next heartbeat carries epoch -1 (or -2 for a static member)
    STALE = "STALE"                      # left because poll was not called within max_poll_interval_ms
    FATAL = "FATAL"                      # an error no retry can mend; the consumer must be closed


S = MemberState

# Kafka 4.x's MemberState table: each state and the states it may be entered from.
PREVIOUS_STATES: dict[MemberState, frozenset[MemberState]] = {
    S.UNSUBSCRIBED: frozenset({S.PREPARE_LEAVING, S.LEAVING, S.FENCED}),
    S.JOINING: frozenset({S.FENCED, S.UNSUBSCRIBED, S.STALE}),
    S.RECONCILING: frozenset({S.STABLE, S.JOINING, S.ACKNOWLEDGING, S.RECONCILING}),
    S.ACKNOWLEDGING: frozenset({S.RECONCILING}),
    S.STABLE: frozenset({S.JOINING, S.ACKNOWLEDGING, S.RECONCILING}),
    S.FENCED: frozenset({S.JOINING, S.STABLE, S.RECONCILING, S.ACKNOWLEDGING, S.PREPARE_LEAVING, S.LEAVING}),
    S.PREPARE_LEAVING: frozenset({S.JOINING, S.STABLE, S.RECONCILING, S.ACKNOWLEDGING, S.UNSUBSCRIBED}),
    S.LEAVING: frozenset({S.PREPARE_LEAVING}),
    S.STALE: frozenset({S.LEAVING}),
    S.FATAL: frozenset({S.JOINING, S.STABLE, S.RECONCILING, S.ACKNOWLEDGING, S.PREPARE_LEAVING, S.LEAVING,
                        S.UNSUBSCRIBED}),
}

# States whose heartbeat goes out at once rather than at the interval; and those that send none.
_SEND_NOW = frozenset({S.JOINING, S.ACKNOWLEDGING, S.LEAVING})
_SILENT = frozenset({S.UNSUBSCRIBED, S.FENCED, S.STALE, S.FATAL})
# States in which a heartbeat response belongs to a membership that is over.
_OUT = frozenset({S.UNSUBSCRIBED, S.STALE, S.FATAL, S.FENCED, S.LEAVING})
# A new assignment is taken only by a member that means to stay (Kafka's canHandleNewAssignment).
_TAKES_ASSIGNMENT = PREVIOUS_STATES[S.RECONCILING]
FENCING_ERRORS = frozenset({Errors.FENCED_MEMBER_EPOCH, Errors.UNKNOWN_MEMBER_ID})
_RETRY = frozenset({Errors.NOT_COORDINATOR, Errors.COORDINATOR_NOT_AVAILABLE, Errors.COORDINATOR_LOAD_IN_PROGRESS})


class IllegalStateTransition(Exception):
    def __init__(self, current: MemberState, to: MemberState) -> None:
        super().__init__(f"illegal member state transition {current.value} -> {to.value}")
        self.current, self.to = current, to


@dataclass(frozen=True)
class Reconciliation:
    """One step from `owned` to `target`: revoke first, then assign. `joins` ties it to one
    membership; a fence or leave in between makes it stale."""
    joins: int
    revoked: frozenset
    assigned: frozenset
    target: frozenset


_NO_PARTITIONS: frozenset = frozenset()


class AbstractMembershipManager:
    """The member id and epoch, the state table, joining, fencing, leaving, the poll timer,
    the outline of a heartbeat and its response, and reconciliation. A subclass builds its
    group type's heartbeat requests (`_request`, `_leave_request`) and decides when a
    reconciliation is settled (`_settle`)."""

    def __init__(self, group_id: str, member_id: str, rack_id: str | None = None) -> None:
        self.group_id = group_id
        self.member_id = member_id  # drawn by the client, as Kafka 4.x clients do (KIP-1082)
        self.rack_id = rack_id
        self.state = S.UNSUBSCRIBED
        self.member_epoch = 0
        self.heartbeat_interval_ms = 0
        self.topics: tuple[str, ...] = ()
        self.owned: frozenset = _NO_PARTITIONS
        self.target: frozenset = _NO_PARTITIONS
        self.in_progress: Reconciliation | None = None
        self.fatal_error: KafkaError | None = None
        self.poll_expired = False
        self.backing_off = False  # the last heartbeat failed: the next waits for the retry backoff
        self.joins = 0  # bumped whenever the member starts over (fenced, left)
        self._sent: dict | None = None  # what the coordinator was last told; None: tell it everything

    # ------------------------------------------------------------------ the table

    def _transition(self, to: MemberState) -> None:
        if self.state not in PREVIOUS_STATES[to]:
            raise IllegalStateTransition(self.state, to)
        self.state = to

    @property
    def subscribed(self) -> bool:
        return bool(self.topics)

    # ------------------------------------------------------------------ the group type's part

    def _request(self, joining: bool):
        """The heartbeat of a member in the group (epoch 0 when `joining`)."""
        raise NotImplementedError

    def _leave_request(self):
        """The heartbeat that leaves the group."""
        raise NotImplementedError

    def _settle(self) -> None:
        """Move on after a response: reconcile toward the target, or be stable."""
        raise NotImplementedError

    def _clear_subscription(self) -> None:
        self.topics = ()

    def _on_new_target(self) -> None:
        """A response carried an assignment (now `target`)."""

    def _on_unexpected_error(self, error: Errors, message: str | None) -> None:
        self.fatal_error = KafkaError(error, message or f"the group coordinator answered {error.name}")
        self.in_progress = None
        self._transition(S.FATAL)

    # ------------------------------------------------------------------ the user's calls

    def subscribe(self, topics=()) -> None:
        """A new subscription; a member in the group sends it with its next heartbeat."""
        self._raise_if_fatal()
        self.topics = tuple(sorted(set(topics)))
        if self.state is S.UNSUBSCRIBED and self.subscribed:
            self._join()

    def leave(self) -> frozenset:
        """Start leaving (unsubscribe or close): the partitions the caller must revoke before
        `leave_ready()`. A member not in the group has nothing to do."""
        self._clear_subscription()
        if self.state in (S.UNSUBSCRIBED, S.FATAL, S.STALE, S.LEAVING, S.PREPARE_LEAVING, S.FENCED):
            # out of the group already, or on the way out (a fenced member's partitions are
            # being given up as lost, after which it stays out)
            self.poll_expired = False
            return _NO_PARTITIONS
        self._transition(S.PREPARE_LEAVING)
        self.in_progress = None
        return self.owned

    def leave_ready(self) -> None:
        """The revocation of a leave is done: the next heartbeat says goodbye."""
        if self.state is not S.PREPARE_LEAVING:
            return  # fenced meanwhile: out of the group already
        self.owned = self.target = _NO_PARTITIONS
        self._transition(S.LEAVING)

    def poll_timer_expired(self) -> frozenset:
        """max_poll_interval_ms passed without a poll: leave at once; returns the partitions
        lost (no commit, no revocation: someone else may own them soon)."""
        if self.state not in PREVIOUS_STATES[S.PREPARE_LEAVING] or self.state is S.UNSUBSCRIBED:
            return _NO_PARTITIONS
        lost = self.owned
        self._transition(S.PREPARE_LEAVING)
        self.poll_expired = True
        self.in_progress = None
        self.leave_ready()
        return lost

    def poll_resumed(self) -> None:
        """The user polls again: a stale member rejoins (Kafka's maybeRejoinStaleMember)."""
        if self.state is S.STALE and self.subscribed:
            self.poll_expired = False
            self._join()

    # ------------------------------------------------------------------ heartbeats

    def heartbeat_due_now(self) -> bool:
        """Whether the next heartbeat goes out without waiting for the interval."""
        return self.state in _SEND_NOW

    def heartbeat_request(self):
        """The next heartbeat (None: none is due in this state). Generating it moves
        ACKNOWLEDGING on and completes a leave (Kafka's onHeartbeatRequestGenerated)."""
        if self.state in _SILENT:
            return None
        self.backing_off = False
        if self.state is S.LEAVING:
            request = self._leave_request()
            self._sent = None
            self.member_epoch = 0
            self._transition(S.STALE if self.poll_expired else S.UNSUBSCRIBED)
            return request
        request = self._request(self.state is S.JOINING)
        if self.state is S.ACKNOWLEDGING:
            self._transition(S.STABLE if self.target == self.owned else S.RECONCILING)
        return request

    def heartbeat_failed(self) -> None:
        """The heartbeat or its response was lost (the coordinator died, moved, or was
        loading): the next one carries everything, so the coordinator answers in full."""
        self._sent = None
        self.backing_off = True

    def on_heartbeat_response(self, response) -> None:
        """Take in a response; afterwards the state says what the caller must do (FENCED:
        give up `owned` as lost, then `lost_done()`; RECONCILING: `next_reconciliation()`;
        FATAL: raise `fatal_error` to the user)."""
        if self.state in _OUT:
            return  # an answer to a heartbeat of a membership that is over
        error = Errors.for_code(response.error_code)
        if error is not Errors.NONE:
            self._on_error(error, response.error_message)
            return
        if response.member_id:
            self.member_id = response.member_id
        self.member_epoch = response.member_epoch
        if response.heartbeat_interval_ms > 0:
            self.heartbeat_interval_ms = response.heartbeat_interval_ms
        if self.state not in _TAKES_ASSIGNMENT:
            return
        if response.assignment is not None:
            self.target = frozenset(TopicPartition(tp.topic_name, p) for tp in response.assignment.topic_partitions
                                    for p in tp.partitions)
            self._on_new_target()
        elif self.state is S.JOINING:
            return  # a join is answered with an assignment; wait for it
        self._settle()

    def _on_error(self, error: Errors, message: str | None) -> None:
        if error in _RETRY or error.retriable:
            self.heartbeat_failed()
        elif error in FENCING_ERRORS:
            self._fence()
        else:
            self._on_unexpected_error(error, message)

    def _fence(self) -> None:
        if self.state is S.PREPARE_LEAVING:
            self._clear_subscription()
        self.in_progress = None
        self._transition(S.FENCED)

    def lost_done(self) -> None:
        """The fenced member's partitions are given up (on_partitions_lost ran): rejoin with
        epoch 0, or stay out if it left meanwhile."""
        if self.state is not S.FENCED:
            return
        self.owned = self.target = _NO_PARTITIONS
        if self.subscribed:
            self._join()
        else:
            self.member_epoch = 0
            self._transition(S.UNSUBSCRIBED)

    def _join(self) -> None:
        self._transition(S.JOINING)
        self.joins += 1
        self.member_epoch = 0
        self.owned = self.target = _NO_PARTITIONS
        self.in_progress = None
        self._sent = None

    def _raise_if_fatal(self) -> None:
        if self.state is S.FATAL:
            raise self.fatal_error

    # ------------------------------------------------------------------ reconciliation

    def next_reconciliation(self) -> Reconciliation | None:
        """The step toward the target to apply now, if any and none is under way."""
        if self.state is not S.RECONCILING or self.in_progress is not None or self.target == self.owned:
            return None
        self.in_progress = Reconciliation(self.joins, self.owned - self.target, self.target - self.owned,
                                          self.target)
        return self.in_progress

    def is_current(self, rec: Reconciliation) -> bool:
        """False once a fence, leave or rejoin made the reconciliation moot: stop applying it."""
        return rec is self.in_progress and rec.joins == self.joins

    def revocation_done(self, rec: Reconciliation) -> None:
        """The revoked partitions are given up (fetching stopped, offsets committed, the
        listener ran): they are no longer owned, whatever happens next."""
        if self.is_current(rec):
            self.owned = self.owned - rec.revoked

    def reconciliation_done(self, rec: Reconciliation) -> None:
        """The assigned partitions are taken: acknowledge with the next heartbeat, or go on
        toward a target that moved meanwhile."""
        if not self.is_current(rec):
            return
        self.owned = rec.target
        self.in_progress = None
        if self.target != self.owned:
            self._transition(S.RECONCILING)
        else:
            self._transition(S.ACKNOWLEDGING)


class MembershipManager(AbstractMembershipManager):
    """The KIP-848 consumer's member (Kafka's ConsumerMembershipManager): a regex or topic
    subscription, static membership, and heartbeats that carry only what changed, including
    the partitions it owns once a reconciliation completes."""

    def __init__(self, group_id: str, member_id: str, rebalance_timeout_ms: int, instance_id: str | None = None,
                 rack_id: str | None = None, server_assignor: str | None = None) -> None:
        super().__init__(group_id, member_id, rack_id)
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.instance_id = instance_id
        self.server_assignor = server_assignor
        self.regex: str | None = None

    @property
    def subscribed(self) -> bool:
        return bool(self.topics) or self.regex is not None

    def subscribe(self, topics=(), regex: str | None = None) -> None:
        """A new subscription; a member in the group sends it with its next heartbeat."""
        self._raise_if_fatal()
        self.regex = regex
        super().subscribe(topics)

    def _clear_subscription(self) -> None:
        self.topics, self.regex = (), None

    def _leave_request(self) -> ConsumerGroupHeartbeatRequest:
        epoch = LEAVE_GROUP_STATIC_MEMBER_EPOCH if self.instance_id is not None else LEAVE_GROUP_MEMBER_EPOCH
        return ConsumerGroupHeartbeatRequest(self.group_id, self.member_id, epoch, self.instance_id)

    def _request(self, joining: bool) -> ConsumerGroupHeartbeatRequest:
        """Only what changed since the coordinator last heard from the member."""
        sent = self._sent or {}
        now = {"topics": self.topics, "regex": self.regex, "assignor": self.server_assignor,
               "owned": _NO_PARTITIONS if joining else self.owned}
        full = joining or self._sent is None

        def changed(*keys):
            return full or any(sent.get(k) != now[k] for k in keys)

        subscription = changed("topics", "regex")  # "" clears a regex, as the coordinator reads it
        # What it owns is told only between reconciliations (Kafka sends its local assignment,
        # which changes only when one completes): told midway, the coordinator would count
        # partitions about to be taken as given up, and could hand them to another member.
        report = changed("owned") and self.in_progress is None
        request = ConsumerGroupHeartbeatRequest(
            self.group_id, self.member_id, JOIN_GROUP_MEMBER_EPOCH if joining else self.member_epoch,
            self.instance_id,
            rack_id=self.rack_id if full else None,
            rebalance_timeout_ms=self.rebalance_timeout_ms if full else -1,
            subscribed_topic_names=self.topics if subscription else None,
            subscribed_topic_regex=(self.regex or "") if subscription else None,
            server_assignor=self.server_assignor if changed("assignor") else None,
            topic_partitions=_request_partitions(now["owned"]) if report else None)
        if report or not full:
            # a full request without what it owns does not count as one: it goes out again
            self._sent = now if report else {**now, "owned": sent.get("owned")}
        return request

    def _on_new_target(self) -> None:
        if self._sent is not None:
            # The coordinator now counts the member as owning what it assigned until told
            # otherwise: the next heartbeat says what the member owns, even if unchanged
            # (a target withdrawn before it was applied would wait for a revocation forever).
            self._sent["owned"] = None

    def _settle(self) -> None:
        if self.in_progress is not None or self.target != self.owned:
            if self.state is not S.RECONCILING:
                self._transition(S.RECONCILING)
        elif self.state is S.JOINING or self.state is S.RECONCILING and self._reported():
            self._transition(S.STABLE)
        elif self.state is S.RECONCILING:
            self._transition(S.ACKNOWLEDGING)

    def _reported(self) -> bool:
        return self._sent is not None and self._sent.get("owned") == self.owned


def _request_partitions(owned: frozenset) -> tuple:
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(owned):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return tuple(ConsumerGroupHeartbeatRequestTopicPartitions(t, tuple(ps)) for t, ps in by_topic.items())
