"""The share consumer's membership manager without Ray, from Kafka's ShareMembershipManager and
ShareHeartbeatRequestManager: a join sends epoch 0 with the subscription; an assignment is
taken at once and acknowledged by the next heartbeat; later heartbeats send the subscription
only when it changed (or after a lost heartbeat); UNKNOWN_MEMBER_ID and FENCED_MEMBER_EPOCH
rejoin at epoch 0 under the same member id; a leave sends epoch -1; responses to a membership
that is over change nothing."""
from __future__ import annotations

import pytest

from runtime.clients.membership import IllegalStateTransition, MemberState as S
from runtime.clients.share_membership import ShareMembershipManager
from runtime.clients.types import TopicPartition as TP
from runtime.errors import Errors
from runtime.messages.share_group import (ShareGroupHeartbeatResponse, ShareGroupHeartbeatResponseAssignment,
                                          ShareGroupHeartbeatResponseTopicPartitions)

G = "g"


def response(epoch=1, assignment=None, error=Errors.NONE, interval=500, member_id="m1"):
    """A heartbeat response; `assignment` is {topic: partitions} or None (unchanged)."""
    if assignment is not None:
        assignment = ShareGroupHeartbeatResponseAssignment(tuple(
            ShareGroupHeartbeatResponseTopicPartitions(t, tuple(ps)) for t, ps in assignment.items()))
    if error is not Errors.NONE:
        return ShareGroupHeartbeatResponse(error.code, "refused")
    return ShareGroupHeartbeatResponse(member_id=member_id, member_epoch=epoch, heartbeat_interval_ms=interval,
                                       assignment=assignment)


def joined(assignment=None, topics=("t",)) -> ShareMembershipManager:
    """A member in the group at epoch 1 with `assignment`, its acknowledgement sent."""
    m = ShareMembershipManager(G, "m1")
    m.subscribe(topics)
    m.heartbeat_request()
    m.on_heartbeat_response(response(1, assignment or {"t": [0]}))
    m.heartbeat_request()
    assert m.state is S.STABLE
    return m


def test_a_join_sends_epoch_zero_with_the_subscription_at_once():
    m = ShareMembershipManager(G, "m1", rack_id="r1")
    assert m.state is S.UNSUBSCRIBED and m.heartbeat_request() is None
    m.subscribe(["u", "t", "t"])
    assert m.state is S.JOINING and m.heartbeat_due_now()
    request = m.heartbeat_request()
    assert (request.group_id, request.member_id, request.member_epoch) == (G, "m1", 0)
    assert request.subscribed_topic_names == ("t", "u") and request.rack_id == "r1"


def test_a_join_waits_for_its_assignment():
    m = ShareMembershipManager(G, "m1")
    m.subscribe(["t"])
    m.heartbeat_request()
    m.on_heartbeat_response(response(1, None))
    assert m.state is S.JOINING and m.member_epoch == 1 and m.heartbeat_due_now()


def test_an_assignment_is_taken_at_once_and_acknowledged_by_the_next_heartbeat():
    m = ShareMembershipManager(G, "m1")
    m.subscribe(["t"])
    m.heartbeat_request()
    m.on_heartbeat_response(response(3, {"t": [0, 1]}, interval=700))
    assert m.owned == {TP("t", 0), TP("t", 1)} and m.member_epoch == 3 and m.heartbeat_interval_ms == 700
    assert m.state is S.ACKNOWLEDGING and m.heartbeat_due_now()
    request = m.heartbeat_request()
    assert request.member_epoch == 3 and request.subscribed_topic_names is None and request.rack_id is None
    assert m.state is S.STABLE and not m.heartbeat_due_now()


def test_an_empty_assignment_makes_a_stable_member_with_nothing_to_fetch():
    m = ShareMembershipManager(G, "m1")
    m.subscribe(["t"])
    m.heartbeat_request()
    m.on_heartbeat_response(response(1, {}))
    assert m.state is S.STABLE and m.owned == frozenset()


def test_a_new_assignment_replaces_the_old_one_without_revoking_first():
    m = joined({"t": [0, 1]})
    m.on_heartbeat_response(response(2, {"t": [1, 2]}))
    assert m.owned == {TP("t", 1), TP("t", 2)} and m.state is S.ACKNOWLEDGING
    assert m.heartbeat_request().member_epoch == 2 and m.state is S.STABLE
    m.on_heartbeat_response(response(2, None))  # unchanged
    assert m.owned == {TP("t", 1), TP("t", 2)} and m.state is S.STABLE


def test_the_member_id_is_the_one_the_coordinator_answers_with():
    m = ShareMembershipManager(G, "")
    m.subscribe(["t"])
    m.heartbeat_request()
    m.on_heartbeat_response(response(1, {}, member_id="given"))
    assert m.member_id == "given" and m.heartbeat_request().member_id == "given"


def test_the_subscription_goes_only_when_it_changed():
    m = joined()
    assert m.heartbeat_request().subscribed_topic_names is None
    m.subscribe(["t", "u"])
    assert m.state is S.STABLE  # no rejoin: the next heartbeat carries it
    assert m.heartbeat_request().subscribed_topic_names == ("t", "u")
    assert m.heartbeat_request().subscribed_topic_names is None


@pytest.mark.parametrize("error", [Errors.COORDINATOR_NOT_AVAILABLE, Errors.NOT_COORDINATOR,
                                   Errors.COORDINATOR_LOAD_IN_PROGRESS])
def test_a_retriable_error_keeps_the_membership_and_the_next_heartbeat_says_everything(error):
    m = joined()
    m.heartbeat_request()
    m.on_heartbeat_response(response(error=error))
    assert m.state is S.STABLE and m.owned == {TP("t", 0)} and m.member_epoch == 1
    request = m.heartbeat_request()
    assert request.member_epoch == 1 and request.subscribed_topic_names == ("t",)


def test_a_lost_heartbeat_makes_the_next_one_say_everything():
    m = joined()
    m.heartbeat_request()
    m.heartbeat_failed()
    assert m.heartbeat_request().subscribed_topic_names == ("t",)


@pytest.mark.parametrize("error", [Errors.UNKNOWN_MEMBER_ID, Errors.FENCED_MEMBER_EPOCH])
def test_a_fenced_member_rejoins_at_epoch_zero_under_its_id_with_nothing_assigned(error):
    m = joined({"t": [0, 1]})
    joins = m.joins
    m.heartbeat_request()
    m.on_heartbeat_response(response(error=error))
    assert m.state is S.JOINING and m.owned == frozenset() and m.joins == joins + 1
    assert m.heartbeat_due_now()
    request = m.heartbeat_request()
    assert (request.member_id, request.member_epoch, request.subscribed_topic_names) == ("m1", 0, ("t",))
    m.on_heartbeat_response(response(5, {"t": [1]}))
    assert m.owned == {TP("t", 1)} and m.member_epoch == 5


def test_an_error_no_retry_mends_keeps_the_member_heartbeating():
    # shoal departs from Kafka (README): a full group is not fatal, the member keeps trying
    m = ShareMembershipManager(G, "m1")
    m.subscribe(["t"])
    m.heartbeat_request()
    m.on_heartbeat_response(response(error=Errors.GROUP_MAX_SIZE_REACHED))
    assert m.state is S.JOINING and m.fatal_error is None
    assert m.heartbeat_request().member_epoch == 0
    m.on_heartbeat_response(response(1, {"t": [0]}))
    assert m.owned == {TP("t", 0)}


def test_a_leave_sends_epoch_minus_one_and_then_nothing():
    m = joined({"t": [0]})
    assert m.leave() == {TP("t", 0)}
    assert m.state is S.LEAVING and m.heartbeat_due_now() and m.owned == frozenset()
    request = m.heartbeat_request()
    assert (request.member_id, request.member_epoch) == ("m1", -1)
    assert m.state is S.UNSUBSCRIBED and m.heartbeat_request() is None
    m.on_heartbeat_response(response(2, {"t": [0]}))  # the answer to an older heartbeat
    assert m.state is S.UNSUBSCRIBED and m.owned == frozenset()


def test_a_response_while_leaving_is_ignored():
    m = joined({"t": [0]})
    m.leave()
    m.on_heartbeat_response(response(error=Errors.UNKNOWN_MEMBER_ID))
    m.on_heartbeat_response(response(2, {"t": [1]}))
    assert m.state is S.LEAVING and m.heartbeat_request().member_epoch == -1


def test_leaving_before_joining_sends_nothing():
    m = ShareMembershipManager(G, "m1")
    assert m.leave() == frozenset()
    assert m.state is S.UNSUBSCRIBED and m.heartbeat_request() is None


def test_a_share_partition_refusal_fences_the_current_membership_only():
    m = joined({"t": [0]})
    stamp = m.stamp()
    m.partition_refused(Errors.INVALID_RECORD_STATE, stamp)  # about records, not the member
    assert m.state is S.STABLE
    m.partition_refused(Errors.UNKNOWN_MEMBER_ID, stamp)
    assert m.state is S.JOINING and m.owned == frozenset() and m.stamp() is None
    m.partition_refused(Errors.UNKNOWN_MEMBER_ID, None)  # sent before the join completed
    m.heartbeat_request()
    m.on_heartbeat_response(response(2, {"t": [0]}))
    m.partition_refused(Errors.UNKNOWN_MEMBER_ID, stamp)  # sent in the membership before
    assert m.owned == {TP("t", 0)} and m.state is S.ACKNOWLEDGING


def test_an_illegal_transition_raises_and_changes_nothing():
    m = joined()
    with pytest.raises(IllegalStateTransition):
        m._transition(S.LEAVING)
    assert m.state is S.STABLE and m.owned == {TP("t", 0)}


def test_a_failed_heartbeat_waits_for_the_backoff_and_a_fence_does_not():
    m = joined()
    assert not m.backing_off
    m.heartbeat_request()
    m.on_heartbeat_response(response(error=Errors.COORDINATOR_LOAD_IN_PROGRESS))
    assert m.backing_off
    m.heartbeat_request()
    m.on_heartbeat_response(response(1, None))
    assert not m.backing_off
    m.heartbeat_request()
    m.heartbeat_failed()  # the call itself failed
    assert m.backing_off
    m.heartbeat_request()
    m.on_heartbeat_response(response(error=Errors.FENCED_MEMBER_EPOCH))
    assert not m.backing_off and m.heartbeat_due_now()  # the rejoin goes at once
