"""Reconciliation of a consumer group member's current assignment toward its target (Kafka's
CurrentAssignmentBuilder).

The rule that keeps a partition from having two owners: a member gives up a partition
(revokes it) before it takes a new one, and it takes a partition only once no other member
owns it. So a member first drops from its assignment what its target no longer holds,
keeps those partitions "pending revocation" (still owned) in UNREVOKED_PARTITIONS until its
heartbeat no longer reports them, and only then moves to the target epoch and adds the new
partitions that are free; those still held by another member wait in
UNRELEASED_PARTITIONS.

Members are immutable dataclasses with the fields `member_id`, `member_epoch`,
`previous_member_epoch`, `state`, `assigned_partitions` and
`partitions_pending_revocation` (both {topic: frozenset(partitions)}); every new member
state goes through `_transition`, which checks the move against `MEMBER_TRANSITIONS`.
"""
from __future__ import annotations

import dataclasses
import enum
from typing import Callable, Mapping

from ..errors import Errors, KafkaError

__all__ = ["MemberState", "MEMBER_TRANSITIONS", "IllegalMemberTransition", "reconcile", "is_reconciled_to",
           "owns_any"]

Assignment = Mapping[str, frozenset]


class MemberState(enum.Enum):
    """Kafka's MemberState; the value is the byte stored in ConsumerGroupCurrentMemberAssignment."""
    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127  # a state byte this coordinator does not know: the member must start over

    @classmethod
    def from_value(cls, value: int) -> "MemberState":
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN

    def __str__(self) -> str:
        return self.name


S = MemberState

# The moves reconciliation may make from each state. A member in an unknown state owns
# nothing it could be asked to revoke, so it never waits in UNREVOKED_PARTITIONS.
MEMBER_TRANSITIONS: dict[MemberState, frozenset[MemberState]] = {
    S.STABLE: frozenset({S.STABLE, S.UNREVOKED_PARTITIONS, S.UNRELEASED_PARTITIONS}),
    S.UNREVOKED_PARTITIONS: frozenset({S.UNREVOKED_PARTITIONS, S.UNRELEASED_PARTITIONS, S.STABLE}),
    S.UNRELEASED_PARTITIONS: frozenset({S.UNRELEASED_PARTITIONS, S.STABLE, S.UNREVOKED_PARTITIONS}),
    S.UNKNOWN: frozenset({S.STABLE, S.UNRELEASED_PARTITIONS}),
}


class IllegalMemberTransition(RuntimeError):
    """A reconciliation step broke the member state table: a bug, never a client error."""


def _transition(member, to: MemberState, epoch: int, target_epoch: int, assigned: dict, pending: dict):
    """The member after a move to `to`; raises IllegalMemberTransition and returns nothing
    for a move the table forbids or that breaks the state's invariant: a member waiting for
    revocations keeps its epoch and has something pending, any other state is at the target
    epoch with nothing pending."""
    if to not in MEMBER_TRANSITIONS[member.state]:
        raise IllegalMemberTransition(f"member {member.member_id}: {member.state} -> {to} is not a legal move")
    if to is S.UNREVOKED_PARTITIONS:
        if not pending or epoch != member.member_epoch:
            raise IllegalMemberTransition(f"member {member.member_id}: {to} needs partitions pending revocation "
                                          f"and the current epoch {member.member_epoch}")
    elif pending or epoch != target_epoch:
        raise IllegalMemberTransition(f"member {member.member_id}: {to} needs epoch {target_epoch} "
                                      f"and nothing pending revocation")
    # the previous epoch is the last different one: a member whose response was lost may
    # still heartbeat with it
    previous = member.previous_member_epoch if epoch == member.member_epoch else member.member_epoch
    return dataclasses.replace(member, state=to, member_epoch=epoch, previous_member_epoch=previous,
                               assigned_partitions=assigned, partitions_pending_revocation=pending)


def is_reconciled_to(member, target_epoch: int) -> bool:
    return member.state is S.STABLE and member.member_epoch == target_epoch


def owns_any(owned: Mapping[str, frozenset] | None, partitions: Assignment) -> bool:
    """Whether the partitions the member reports (None: not reported, so assume it still
    owns everything) include any of `partitions`."""
    if owned is None:
        return True
    return any(not partitions.get(topic, frozenset()).isdisjoint(ps) for topic, ps in owned.items())


def reconcile(member, target_epoch: int, target: Assignment, owner_of: Callable[[str, int], str | None],
              owned: Mapping[str, frozenset] | None, subscribed: frozenset[str]):
    """The member's next state toward (target_epoch, target), or the member itself when it
    cannot move yet. `owner_of(topic, partition)` is the member owning a partition now (or
    None); `owned` is what the member reported in this heartbeat (None if it did not);
    `subscribed` is the set of topics the member subscribes to now: partitions of other
    topics are revoked whatever the target says."""
    if is_reconciled_to(member, target_epoch) or (
            member.state is S.UNREVOKED_PARTITIONS and owns_any(owned, member.partitions_pending_revocation)):
        return _drop_unsubscribed(member, target_epoch, owned, subscribed)
    if member.state is S.UNKNOWN and (owned is None or owned):
        raise KafkaError(Errors.FENCED_MEMBER_EPOCH, "the member is in an unknown state: it must abandon "
                                                     "all its partitions and rejoin")
    return _next_assignment(member, target_epoch, target, owner_of, owned, subscribed)


def _drop_unsubscribed(member, target_epoch, owned, subscribed):
    """A member that cannot move to a new target still gives up the topics it no longer
    subscribes to: the target may lag behind subscriptions (the assignor runs at most once
    per assignment interval)."""
    current = member.assigned_partitions
    if all(topic in subscribed for topic in current):
        return member
    assigned = {t: ps for t, ps in current.items() if t in subscribed}
    pending = dict(member.partitions_pending_revocation)
    for topic, partitions in current.items():
        if topic not in subscribed:
            pending[topic] = pending.get(topic, frozenset()) | partitions
    if owns_any(owned, pending):
        return _transition(member, S.UNREVOKED_PARTITIONS, member.member_epoch, target_epoch, assigned, pending)
    # already given up: only the assignment shrinks
    return _transition(member, member.state, member.member_epoch, target_epoch, assigned, {})


def _next_assignment(member, target_epoch, target, owner_of, owned, subscribed):
    assigned: dict[str, frozenset] = {}
    pending_revocation: dict[str, frozenset] = {}
    pending_assignment: dict[str, frozenset] = {}
    unreleased = False
    current = member.assigned_partitions
    member_id = member.member_id
    for topic in target.keys() | current.keys():
        want = target.get(topic, frozenset()) if topic in subscribed else frozenset()
        have = current.get(topic, frozenset())
        keep = have & want
        if keep:
            assigned[topic] = keep
        if have - keep:
            pending_revocation[topic] = have - keep
        add = want - keep
        if add:
            free = frozenset(p for p in add if owner_of(topic, p) in (None, member_id))
            unreleased = unreleased or len(free) < len(add)
            if free:
                pending_assignment[topic] = free

    if pending_revocation and owns_any(owned, pending_revocation):
        # revoke first: keep the epoch until the member reports the partitions gone
        return _transition(member, S.UNREVOKED_PARTITIONS, member.member_epoch, target_epoch,
                           assigned, pending_revocation)
    for topic, free in pending_assignment.items():
        assigned[topic] = assigned.get(topic, frozenset()) | free
    return _transition(member, S.UNRELEASED_PARTITIONS if unreleased else S.STABLE, target_epoch, target_epoch,
                       assigned, {})
