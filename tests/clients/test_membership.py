"""The KIP-848 client membership manager without Ray: every transition of its table, what
each heartbeat carries, reconciliation (revoke before assign, acknowledge), fencing,
fatal errors, leaving and the poll timer; and members driven against the real group
coordinator shard, where no partition ever has two owners."""
from __future__ import annotations

import itertools

import pytest

from runtime.clients.membership import (PREVIOUS_STATES, IllegalStateTransition, MembershipManager, MemberState as S)
from runtime.clients.types import TopicPartition as TP
from runtime.errors import Errors, KafkaError
from runtime.group.shard import GroupCoordinatorShard
from runtime.messages.consumer import (ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatRequestTopicPartitions,
                                       ConsumerGroupHeartbeatResponse, ConsumerGroupHeartbeatResponseAssignment,
                                       ConsumerGroupHeartbeatResponseTopicPartitions)
from runtime.testing import ShardHarness

G = "g"


def manager(**kw) -> MembershipManager:
    kw.setdefault("rebalance_timeout_ms", 3000)
    return MembershipManager(G, "m1", **kw)


def response(epoch=1, assignment=None, error=Errors.NONE, interval=500, member_id="m1"):
    """A heartbeat response; `assignment` is {topic: partitions} or None (unchanged)."""
    if assignment is not None:
        assignment = ConsumerGroupHeartbeatResponseAssignment(tuple(
            ConsumerGroupHeartbeatResponseTopicPartitions(t, tuple(ps)) for t, ps in sorted(assignment.items())))
    if error is not Errors.NONE:
        return ConsumerGroupHeartbeatResponse(error.code, "no", None, 0, 0)
    return ConsumerGroupHeartbeatResponse(0, None, member_id, epoch, interval, assignment)


def tps(*pairs):
    return frozenset(TP(t, p) for t, p in pairs)


def reconcile(m):
    rec = m.next_reconciliation()
    m.revocation_done(rec)
    m.reconciliation_done(rec)
    return rec


def stable(m, assignment=None, epoch=1):
    """A member that joined and reconciled `assignment`."""
    m.subscribe(["t"])
    m.heartbeat_request()
    m.on_heartbeat_response(response(epoch, assignment or {}))
    if m.state is S.RECONCILING:
        reconcile(m)
        m.heartbeat_request()
    assert m.state is S.STABLE
    return m


# ---------------------------------------------------------------------- the table

def test_every_move_outside_the_table_raises_and_changes_nothing():
    for current, to in itertools.product(S, S):
        m = manager()
        m.state = current
        if current in PREVIOUS_STATES[to]:
            m._transition(to)
            assert m.state is to
        else:
            with pytest.raises(IllegalStateTransition):
                m._transition(to)
            assert m.state is current


def test_the_table_is_kafkas():
    assert PREVIOUS_STATES[S.ACKNOWLEDGING] == {S.RECONCILING}
    assert PREVIOUS_STATES[S.LEAVING] == {S.PREPARE_LEAVING}
    assert PREVIOUS_STATES[S.JOINING] == {S.FENCED, S.UNSUBSCRIBED, S.STALE}
    assert PREVIOUS_STATES[S.STALE] == {S.LEAVING}
    assert set(PREVIOUS_STATES) == set(S)


# ---------------------------------------------------------------------- joining

def test_join_sends_everything_with_epoch_zero():
    m = manager(instance_id="i1", rack_id="r1", server_assignor="range")
    assert m.heartbeat_request() is None  # unsubscribed: silent
    m.subscribe(["t", "a", "t"])
    assert m.state is S.JOINING and m.heartbeat_due_now()
    assert m.heartbeat_request() == ConsumerGroupHeartbeatRequest(
        G, "m1", 0, "i1", "r1", 3000, ("a", "t"), "", "range", ())
    assert m.state is S.JOINING


def test_join_with_an_assignment_reconciles_then_acknowledges():
    m = manager()
    m.subscribe(["t"])
    m.heartbeat_request()
    m.on_heartbeat_response(response(1, {"t": [0, 1]}, interval=700, member_id="m1"))
    assert (m.state, m.member_epoch, m.heartbeat_interval_ms) == (S.RECONCILING, 1, 700)
    assert not m.heartbeat_due_now()
    rec = m.next_reconciliation()
    assert (rec.revoked, rec.assigned, rec.target) == (frozenset(), tps(("t", 0), ("t", 1)), tps(("t", 0), ("t", 1)))
    assert m.next_reconciliation() is None  # one at a time
    m.revocation_done(rec)
    m.reconciliation_done(rec)
    assert m.state is S.ACKNOWLEDGING and m.heartbeat_due_now() and m.owned == tps(("t", 0), ("t", 1))
    ack = m.heartbeat_request()
    assert ack == ConsumerGroupHeartbeatRequest(G, "m1", 1, topic_partitions=(
        ConsumerGroupHeartbeatRequestTopicPartitions("t", (0, 1)),))
    assert m.state is S.STABLE
    # steady state: only the member id and epoch
    assert m.heartbeat_request() == ConsumerGroupHeartbeatRequest(G, "m1", 1)


def test_join_with_nothing_assigned_is_stable_at_once():
    m = manager()
    m.subscribe(["t"])
    m.heartbeat_request()
    m.on_heartbeat_response(response(3, {}))
    assert m.state is S.STABLE and m.member_epoch == 3


def test_join_waits_for_the_response_that_carries_the_assignment():
    m = manager()
    m.subscribe(["t"])
    m.heartbeat_request()
    m.on_heartbeat_response(response(1, None))
    assert m.state is S.JOINING


def test_the_coordinator_may_name_the_member():
    m = MembershipManager(G, "", 3000)
    m.subscribe(["t"])
    m.heartbeat_request()
    m.on_heartbeat_response(response(1, {}, member_id="server-made"))
    assert m.heartbeat_request().member_id == "server-made"


# ---------------------------------------------------------------------- reconciling

def test_revocation_comes_before_the_new_assignment_and_is_reported():
    m = stable(manager(), {"t": [0, 1]})
    m.on_heartbeat_response(response(2, {"t": [1, 2]}))
    assert m.state is S.RECONCILING and m.member_epoch == 2
    rec = m.next_reconciliation()
    assert (rec.revoked, rec.assigned) == (tps(("t", 0)), tps(("t", 2)))
    m.revocation_done(rec)
    assert m.owned == tps(("t", 1))  # revoked is no longer owned, whatever comes next
    # a heartbeat at the interval midway says nothing of what it owns: told now, the
    # coordinator could count t-2, about to be taken, as given up
    assert m.heartbeat_request().topic_partitions is None
    m.reconciliation_done(rec)
    assert m.state is S.ACKNOWLEDGING
    assert m.heartbeat_request().topic_partitions == (ConsumerGroupHeartbeatRequestTopicPartitions("t", (1, 2)),)
    assert m.state is S.STABLE


def test_a_target_that_moves_during_a_reconciliation_is_reconciled_next():
    m = stable(manager(), {"t": [0]})
    m.on_heartbeat_response(response(2, {"t": [0, 1]}))
    first = m.next_reconciliation()
    m.on_heartbeat_response(response(3, {"t": [1, 2]}))
    assert m.next_reconciliation() is None  # the first one is still under way
    m.revocation_done(first)
    m.reconciliation_done(first)
    assert m.state is S.RECONCILING and m.owned == tps(("t", 0), ("t", 1))
    second = reconcile(m)
    assert (second.revoked, second.assigned) == (tps(("t", 0)), tps(("t", 2)))
    assert m.state is S.ACKNOWLEDGING


def test_an_unchanged_assignment_leaves_a_stable_member_stable():
    m = stable(manager(), {"t": [0]})
    m.on_heartbeat_response(response(4, None))
    m.on_heartbeat_response(response(5, {"t": [0]}))
    assert m.state is S.STABLE and m.member_epoch == 5
    # but it says what it owns once more: the coordinator counts it as owning what it sent
    assert m.heartbeat_request().topic_partitions == (ConsumerGroupHeartbeatRequestTopicPartitions("t", (0,)),)
    assert m.heartbeat_request().topic_partitions is None


def test_a_target_withdrawn_before_it_was_applied_is_acknowledged():
    m = manager()
    m.subscribe(["t"])
    m.heartbeat_request()
    m.on_heartbeat_response(response(1, {"t": [0, 1]}))
    m.heartbeat_request()
    m.on_heartbeat_response(response(2, {}))  # another member took them before this one started
    assert m.state is S.ACKNOWLEDGING and m.next_reconciliation() is None
    assert m.heartbeat_request().topic_partitions == ()  # or the coordinator waits for it forever
    assert m.state is S.STABLE


def test_a_full_heartbeat_waits_for_the_reconciliation_to_finish():
    m = stable(manager(), {"t": [0]})
    m.on_heartbeat_response(response(2, {"t": [0, 1]}))
    rec = m.next_reconciliation()
    m.heartbeat_failed()
    assert m.heartbeat_request().topic_partitions is None
    m.revocation_done(rec)
    m.reconciliation_done(rec)
    assert m.heartbeat_request() == ConsumerGroupHeartbeatRequest(
        G, "m1", 2, None, None, 3000, ("t",), "", None, (ConsumerGroupHeartbeatRequestTopicPartitions("t", (0, 1)),))


def test_a_reconciled_target_not_yet_reported_is_acknowledged():
    m = stable(manager(), {"t": [0]})
    m.on_heartbeat_response(response(2, {"t": [0, 1]}))
    m.heartbeat_request()  # went out before the reconciliation finished
    rec = m.next_reconciliation()
    m.revocation_done(rec)
    m.reconciliation_done(rec)
    m.on_heartbeat_response(response(2, None))  # the answer to that heartbeat
    assert m.state is S.ACKNOWLEDGING


# ---------------------------------------------------------------------- fencing and errors

@pytest.mark.parametrize("error", [Errors.FENCED_MEMBER_EPOCH, Errors.UNKNOWN_MEMBER_ID])
def test_a_fenced_member_loses_its_partitions_and_rejoins_with_epoch_zero(error):
    m = stable(manager(), {"t": [0, 1]}, epoch=4)
    m.on_heartbeat_response(response(5, {"t": [0]}))
    rec = m.next_reconciliation()
    m.on_heartbeat_response(response(error=error))
    assert m.state is S.FENCED and m.owned == tps(("t", 0), ("t", 1))  # the caller gives these up as lost
    assert m.heartbeat_request() is None
    assert not m.is_current(rec)
    m.revocation_done(rec)
    m.reconciliation_done(rec)  # too late: ignored
    assert m.state is S.FENCED
    m.on_heartbeat_response(response(6, {"t": [1]}))  # a late answer is ignored too
    assert m.state is S.FENCED
    m.lost_done()
    assert (m.state, m.owned, m.member_epoch) == (S.JOINING, frozenset(), 0)
    assert m.heartbeat_request() == ConsumerGroupHeartbeatRequest(G, "m1", 0, None, None, 3000, ("t",), "", None, ())


def test_a_member_fenced_while_preparing_to_leave_stays_out():
    m = stable(manager(), {"t": [0]})
    assert m.leave() == tps(("t", 0))
    m.on_heartbeat_response(response(error=Errors.FENCED_MEMBER_EPOCH))
    assert m.state is S.FENCED
    m.leave_ready()  # ignored: out of the group already
    m.lost_done()
    assert m.state is S.UNSUBSCRIBED and m.heartbeat_request() is None


@pytest.mark.parametrize("error", [Errors.GROUP_MAX_SIZE_REACHED, Errors.UNSUPPORTED_ASSIGNOR, Errors.INVALID_REQUEST,
                                   Errors.UNRELEASED_INSTANCE_ID, Errors.GROUP_ID_NOT_FOUND,
                                   Errors.FENCED_INSTANCE_ID])
def test_errors_no_retry_mends_are_fatal(error):
    m = manager()
    m.subscribe(["t"])
    m.heartbeat_request()
    m.on_heartbeat_response(response(error=error))
    assert m.state is S.FATAL and m.fatal_error.error is error
    assert m.heartbeat_request() is None
    with pytest.raises(KafkaError) as e:
        m.subscribe(["u"])
    assert e.value.error is error
    assert m.leave() == frozenset() and m.state is S.FATAL


@pytest.mark.parametrize("error", [Errors.COORDINATOR_LOAD_IN_PROGRESS, Errors.NOT_COORDINATOR,
                                   Errors.COORDINATOR_NOT_AVAILABLE])
def test_retriable_errors_change_nothing_but_the_next_heartbeat_is_full(error):
    m = stable(manager(server_assignor="uniform"), {"t": [0]}, epoch=2)
    m.on_heartbeat_response(response(error=error))
    assert m.state is S.STABLE and m.member_epoch == 2
    assert m.heartbeat_request() == ConsumerGroupHeartbeatRequest(
        G, "m1", 2, None, None, 3000, ("t",), "", "uniform",
        (ConsumerGroupHeartbeatRequestTopicPartitions("t", (0,)),))
    assert m.heartbeat_request() == ConsumerGroupHeartbeatRequest(G, "m1", 2)


def test_a_lost_heartbeat_makes_the_next_one_full():
    m = stable(manager(), {"t": [0]})
    m.heartbeat_request()
    m.heartbeat_failed()
    assert m.heartbeat_request().rebalance_timeout_ms == 3000


# ---------------------------------------------------------------------- subscription changes

def test_a_subscription_change_is_sent_once():
    m = stable(manager(), {"t": [0]})
    m.subscribe(["t", "u"])
    assert m.state is S.STABLE
    assert m.heartbeat_request() == ConsumerGroupHeartbeatRequest(G, "m1", 1, subscribed_topic_names=("t", "u"),
                                                                  subscribed_topic_regex="")
    assert m.heartbeat_request() == ConsumerGroupHeartbeatRequest(G, "m1", 1)
    m.subscribe(regex="t.*")
    assert m.heartbeat_request() == ConsumerGroupHeartbeatRequest(G, "m1", 1, subscribed_topic_names=(),
                                                                  subscribed_topic_regex="t.*")


# ---------------------------------------------------------------------- leaving

@pytest.mark.parametrize("instance_id,epoch", [(None, -1), ("i1", -2)])
def test_leaving_revokes_then_says_goodbye(instance_id, epoch):
    m = stable(manager(instance_id=instance_id), {"t": [0, 1]}, epoch=3)
    assert m.leave() == tps(("t", 0), ("t", 1))
    assert m.state is S.PREPARE_LEAVING and not m.heartbeat_due_now()
    m.on_heartbeat_response(response(4, {"t": [2]}))  # no new assignment while leaving
    assert m.state is S.PREPARE_LEAVING and m.next_reconciliation() is None
    m.leave_ready()
    assert m.state is S.LEAVING and m.heartbeat_due_now() and m.owned == frozenset()
    assert m.heartbeat_request() == ConsumerGroupHeartbeatRequest(G, "m1", epoch, instance_id)
    assert m.state is S.UNSUBSCRIBED and m.heartbeat_request() is None
    m.on_heartbeat_response(response(error=Errors.UNKNOWN_MEMBER_ID))  # the goodbye's answer: ignored
    assert m.state is S.UNSUBSCRIBED
    m.subscribe(["t"])  # and back again
    assert m.state is S.JOINING and m.heartbeat_request().member_epoch == 0


def test_leaving_when_not_in_the_group_does_nothing():
    m = manager()
    assert m.leave() == frozenset() and m.state is S.UNSUBSCRIBED


def test_leaving_while_joining_leaves_with_nothing_to_revoke():
    m = manager()
    m.subscribe(["t"])
    m.heartbeat_request()
    assert m.leave() == frozenset()
    m.leave_ready()
    assert m.heartbeat_request().member_epoch == -1


def test_the_poll_timer_leaves_and_the_next_poll_rejoins():
    m = stable(manager(), {"t": [0]})
    assert m.poll_timer_expired() == tps(("t", 0))
    assert m.state is S.LEAVING and m.owned == frozenset()
    assert m.heartbeat_request().member_epoch == -1
    assert m.state is S.STALE and m.heartbeat_request() is None
    m.poll_resumed()
    assert m.state is S.JOINING and m.heartbeat_request().member_epoch == 0


def test_a_stale_member_that_is_closed_stays_out():
    m = stable(manager(), {"t": [0]})
    m.poll_timer_expired()
    m.heartbeat_request()
    assert m.leave() == frozenset()
    m.poll_resumed()
    assert m.state is S.STALE and m.heartbeat_request() is None


# ---------------------------------------------------------------------- against the real coordinator

class Member:
    """A membership manager wired to the shard the way the client actor wires it."""

    def __init__(self, h, member_id, topics=("t",)):
        self.h, self.m = h, MembershipManager(G, member_id, 3000)
        self.m.subscribe(topics)

    def heartbeat(self):
        request = self.m.heartbeat_request()
        if request is None:
            return
        try:
            resp = self.h.call(lambda s, now: s.consumer_group_heartbeat(request, now, "unused"))
        except KafkaError as e:
            resp = ConsumerGroupHeartbeatResponse(e.error.code, e.message)
        self.m.on_heartbeat_response(resp)
        if self.m.state is S.FENCED:
            self.m.lost_done()
        rec = self.m.next_reconciliation()
        if rec is not None:
            self.m.revocation_done(rec)
            self.m.reconciliation_done(rec)


def no_double_owner(members):
    seen = [tp for mb in members for tp in mb.m.owned]
    assert len(seen) == len(set(seen))


def test_members_share_a_topic_against_the_coordinator_shard(tmp_path):
    h = ShardHarness(str(tmp_path), GroupCoordinatorShard, config={"group.consumer.assignors": "uniform"})
    h.call(lambda s, now: s.update_topics({"t": 6}, now))
    members = [Member(h, f"m{i}") for i in range(3)]
    for _ in range(8):
        for mb in members:
            mb.heartbeat()
            no_double_owner(members)
    assert [len(mb.m.owned) for mb in members] == [2, 2, 2]
    assert all(mb.m.state is S.STABLE for mb in members)
    # one leaves: the others take its partitions, never while it still owns them
    members[0].m.leave()
    members[0].m.leave_ready()
    for _ in range(6):
        for mb in members:
            mb.heartbeat()
            no_double_owner(members)
    assert members[0].m.state is S.UNSUBSCRIBED
    assert sorted(len(mb.m.owned) for mb in members[1:]) == [3, 3]


def test_a_member_silent_past_its_session_is_fenced_and_rejoins(tmp_path):
    h = ShardHarness(str(tmp_path), GroupCoordinatorShard,
                     config={"group.consumer.session.timeout.ms": 1000, "group.consumer.min.session.timeout.ms": 100})
    h.call(lambda s, now: s.update_topics({"t": 2}, now))
    a, b = Member(h, "a"), Member(h, "b")
    for _ in range(4):
        a.heartbeat()
        b.heartbeat()
    h.advance(600)
    b.heartbeat()
    h.advance(600)  # a's session expires; b keeps its own
    b.heartbeat()
    b.heartbeat()
    assert b.m.owned == tps(("t", 0), ("t", 1)) and a.m.owned  # a does not know yet
    request = a.m.heartbeat_request()
    with pytest.raises(KafkaError) as e:
        h.call(lambda s, now: s.consumer_group_heartbeat(request, now, "unused"))
    assert e.value.error is Errors.UNKNOWN_MEMBER_ID
    a.m.on_heartbeat_response(ConsumerGroupHeartbeatResponse(e.value.error.code))
    assert a.m.state is S.FENCED
    a.m.lost_done()
    for _ in range(4):
        a.heartbeat()
        b.heartbeat()
    assert len(a.m.owned) == len(b.m.owned) == 1
