"""The reconciliation state machine on its own: every move of the member state table, the
moves it forbids, and the rule that a partition goes to a new owner only once it is free."""
from __future__ import annotations

import dataclasses

import pytest

from runtime.errors import Errors, KafkaError
from runtime.group.consumer import ConsumerGroupMember
from runtime.group.reconcile import (
    MEMBER_TRANSITIONS, IllegalMemberTransition, MemberState, _transition, is_reconciled_to, owns_any, reconcile,
)

S = MemberState
T = frozenset({"t"})


def fs(*ps):
    return frozenset(ps)


def m(state=S.STABLE, epoch=1, assigned=None, pending=None, previous=0):
    return ConsumerGroupMember("m", subscribed_topic_names=T, member_epoch=epoch, previous_member_epoch=previous,
                               state=state, assigned_partitions=assigned or {},
                               partitions_pending_revocation=pending or {})


def free(topic, partition):
    return None


def owned_by_other(*partitions):
    return lambda topic, p: "other" if p in partitions else None


def test_reconciled_member_is_returned_as_is():
    member = m(assigned={"t": fs(0)})
    assert reconcile(member, 1, {"t": fs(1)}, free, None, T) is member
    assert is_reconciled_to(member, 1) and not is_reconciled_to(member, 2)


def test_stable_to_stable_gains_free_partitions():
    new = reconcile(m(assigned={"t": fs(0)}), 2, {"t": fs(0, 1)}, free, {"t": fs(0)}, T)
    assert (new.state, new.member_epoch, new.previous_member_epoch) == (S.STABLE, 2, 1)
    assert new.assigned_partitions == {"t": fs(0, 1)} and new.partitions_pending_revocation == {}


def test_stable_to_unrevoked_keeps_the_epoch():
    new = reconcile(m(assigned={"t": fs(0, 1)}), 2, {"t": fs(0, 2)}, free, {"t": fs(0, 1)}, T)
    assert (new.state, new.member_epoch) == (S.UNREVOKED_PARTITIONS, 1)
    # partition 2 is not added before 1 is revoked
    assert new.assigned_partitions == {"t": fs(0)} and new.partitions_pending_revocation == {"t": fs(1)}


def test_revocation_already_done_goes_straight_to_the_target():
    new = reconcile(m(assigned={"t": fs(0, 1)}), 2, {"t": fs(0)}, free, {"t": fs(0)}, T)
    assert (new.state, new.member_epoch, new.assigned_partitions) == (S.STABLE, 2, {"t": fs(0)})


def test_unrevoked_waits_while_the_member_reports_a_revoked_partition():
    member = m(S.UNREVOKED_PARTITIONS, 1, {"t": fs(0)}, {"t": fs(1)})
    assert reconcile(member, 2, {"t": fs(0, 2)}, free, {"t": fs(0, 1)}, T) is member
    assert reconcile(member, 2, {"t": fs(0, 2)}, free, None, T) is member
    new = reconcile(member, 2, {"t": fs(0, 2)}, free, {"t": fs(0)}, T)
    assert (new.state, new.member_epoch, new.assigned_partitions) == (S.STABLE, 2, {"t": fs(0, 2)})


def test_unreleased_until_the_other_owner_lets_go():
    new = reconcile(m(assigned={"t": fs(0)}), 2, {"t": fs(0, 1, 2)}, owned_by_other(2), {"t": fs(0)}, T)
    assert (new.state, new.member_epoch, new.assigned_partitions) == (S.UNRELEASED_PARTITIONS, 2, {"t": fs(0, 1)})
    again = reconcile(new, 2, {"t": fs(0, 1, 2)}, owned_by_other(2), None, T)
    assert again == new
    done = reconcile(new, 2, {"t": fs(0, 1, 2)}, free, None, T)
    assert (done.state, done.assigned_partitions) == (S.STABLE, {"t": fs(0, 1, 2)})


def test_own_pending_partition_is_not_unreleased():
    member = m(S.UNREVOKED_PARTITIONS, 1, {}, {"t": fs(1)})
    new = reconcile(member, 3, {"t": fs(1)}, lambda t, p: "m", {}, T)
    assert (new.state, new.assigned_partitions) == (S.STABLE, {"t": fs(1)})


def test_unsubscribed_topic_is_revoked_even_if_targeted():
    new = reconcile(m(assigned={"t": fs(0), "u": fs(0)}), 2, {"t": fs(0), "u": fs(0)}, free,
                    {"t": fs(0), "u": fs(0)}, frozenset({"t"}))
    assert new.state is S.UNREVOKED_PARTITIONS and new.partitions_pending_revocation == {"u": fs(0)}


def test_unknown_state_member_must_own_nothing():
    member = m(S.UNKNOWN, 1, {"t": fs(0)})
    with pytest.raises(KafkaError) as e:
        reconcile(member, 2, {"t": fs(0)}, free, {"t": fs(0)}, T)
    assert e.value.error is Errors.FENCED_MEMBER_EPOCH
    new = reconcile(member, 2, {"t": fs(0)}, free, {}, T)
    assert (new.state, new.member_epoch) == (S.STABLE, 2)


def test_owns_any():
    assert owns_any(None, {})
    assert not owns_any({"t": fs(0)}, {"t": fs(1)})
    assert owns_any({"t": fs(0, 1)}, {"t": fs(1)})


@pytest.mark.parametrize("start", list(S))
@pytest.mark.parametrize("to", list(S))
def test_transition_table_is_enforced(start, to):
    member = m(start, 1, {"t": fs(0)}, {"t": fs(1)} if start is S.UNREVOKED_PARTITIONS else {})
    before = dataclasses.replace(member)
    pending = {"t": fs(1)} if to is S.UNREVOKED_PARTITIONS else {}
    epoch = 1 if to is S.UNREVOKED_PARTITIONS else 2
    if to in MEMBER_TRANSITIONS.get(start, ()):
        new = _transition(member, to, epoch, 2, {"t": fs(0)}, pending)
        assert (new.state, new.member_epoch, new.previous_member_epoch) == (to, epoch, 0 if epoch == 1 else 1)
    else:
        with pytest.raises(IllegalMemberTransition):
            _transition(member, to, epoch, 2, {"t": fs(0)}, pending)
    assert member == before


@pytest.mark.parametrize("to, epoch, pending", [
    (S.UNREVOKED_PARTITIONS, 1, {}),  # nothing to wait for
    (S.UNREVOKED_PARTITIONS, 2, {"t": fs(1)}),  # a member waiting for revocation keeps its epoch
    (S.STABLE, 1, {}),  # stable means at the target epoch
    (S.STABLE, 2, {"t": fs(1)}),  # ...with nothing pending
    (S.UNRELEASED_PARTITIONS, 2, {"t": fs(1)}),
])
def test_transition_invariants(to, epoch, pending):
    member = m(S.STABLE, 1, {"t": fs(0, 1)})
    with pytest.raises(IllegalMemberTransition):
        _transition(member, to, epoch, 2, {"t": fs(0)}, pending)
    assert member.state is S.STABLE and member.member_epoch == 1


def test_state_bytes():
    assert [s.value for s in S] == [0, 1, 2, 127]
    assert S.from_value(5) is S.UNKNOWN and S.from_value(1) is S.UNREVOKED_PARTITIONS


def test_reconciled_member_still_revokes_unsubscribed_topics():
    member = m(assigned={"t": fs(0), "u": fs(1)})
    new = reconcile(member, 1, {"t": fs(0), "u": fs(1)}, free, {"t": fs(0), "u": fs(1)}, frozenset({"t"}))
    assert (new.state, new.member_epoch) == (S.UNREVOKED_PARTITIONS, 1)
    assert new.assigned_partitions == {"t": fs(0)} and new.partitions_pending_revocation == {"u": fs(1)}
    # reported gone: back to stable in the same epoch
    done = reconcile(new, 1, {"t": fs(0), "u": fs(1)}, free, {"t": fs(0)}, frozenset({"t"}))
    assert (done.state, done.member_epoch, done.assigned_partitions) == (S.STABLE, 1, {"t": fs(0)})
    # a member that already let go only shrinks
    shrunk = reconcile(member, 1, {"t": fs(0), "u": fs(1)}, free, {"t": fs(0)}, frozenset({"t"}))
    assert (shrunk.state, shrunk.assigned_partitions, shrunk.partitions_pending_revocation) == (
        S.STABLE, {"t": fs(0)}, {})
