"""The classic consumer member without Ray: its state table, what every JoinGroup, SyncGroup,
Heartbeat and OffsetCommit error means (Kafka's AbstractCoordinator and ConsumerCoordinator
response handlers), eager and cooperative revocation, the leader's assignment, the
metadata check, the poll timer; and members driven against the real group coordinator
shard through the client harness, where no partition ever has two owners."""
from __future__ import annotations

import pytest

from runtime.clients.classic import PREVIOUS_STATES, Action, ClassicMember, IllegalStateTransition, MemberState as S
from runtime.clients.offsets import CommitFailedError
from runtime.clients.types import TopicPartition as TP
from runtime.errors import Errors, KafkaError
from runtime.group.consumer_protocol import decode_assignment, decode_subscription, encode_assignment, \
    encode_subscription
from runtime.messages.group import (HeartbeatResponse, JoinGroupResponse, JoinGroupResponseMember,
                                    OffsetCommitResponse, OffsetCommitResponsePartition, OffsetCommitResponseTopic,
                                    SyncGroupResponse)

from .classic_harness import SETTINGS, ClassicGroupHarness


def member(**settings) -> ClassicMember:
    m = ClassicMember("g", {**SETTINGS, **settings})
    m.subscribe(["t"])
    return m


def tps(*pairs) -> frozenset:
    return frozenset(TP(t, p) for t, p in pairs)


def joined(m, member_id="m1", generation=1, leader="other", members=(), error=Errors.NONE):
    return m.on_join_response(JoinGroupResponse(error.code, generation, "consumer", "range", leader, False,
                                                member_id, members))


def synced(m, assignment: dict, error=Errors.NONE):
    return m.on_sync_response(SyncGroupResponse(error.code, "consumer", "range", encode_assignment(
        tuple((t, tuple(ps)) for t, ps in sorted(assignment.items())))))


def stable(m, assignment=None, generation=1):
    """A member that joined (as a follower) and synced `assignment` ({topic: partitions})."""
    m.prepare_join()
    m.join_request()
    assert joined(m, generation=generation).action is Action.SYNC
    m.sync_request()
    synced(m, assignment or {"t": (0, 1)})
    assert m.state is S.STABLE and not m.rejoin_needed
    return m


def commit_response(error: Errors) -> OffsetCommitResponse:
    return OffsetCommitResponse((OffsetCommitResponseTopic("t", (OffsetCommitResponsePartition(0, error.code),)),))


# ---------------------------------------------------------------------- the table

def test_a_move_the_table_does_not_allow_raises_and_changes_nothing():
    m = member()
    for to in S:
        if m.state not in PREVIOUS_STATES[to]:
            with pytest.raises(IllegalStateTransition):
                m._transition(to)
            assert m.state is S.UNJOINED
    with pytest.raises(IllegalStateTransition):  # a sync answer without a join
        m._transition(S.STABLE)
    assert m.state is S.UNJOINED


def test_a_rebalance_walks_the_table():
    m = member()
    assert m.needs_join()
    m.join_request()
    assert m.state is S.PREPARING_REBALANCE
    joined(m)
    assert m.state is S.COMPLETING_REBALANCE
    synced(m, {"t": (0,)})
    assert m.state is S.STABLE and not m.needs_join()


# ---------------------------------------------------------------------- JoinGroup errors

@pytest.mark.parametrize("error, action, member_id", [
    (Errors.UNKNOWN_MEMBER_ID, Action.REJOIN, ""),            # forget the member id, join at once
    (Errors.REBALANCE_IN_PROGRESS, Action.REJOIN, "m1"),      # join again at once
    (Errors.COORDINATOR_LOAD_IN_PROGRESS, Action.RETRY, "m1"),
    (Errors.COORDINATOR_NOT_AVAILABLE, Action.REDISCOVER, "m1"),
    (Errors.NOT_COORDINATOR, Action.REDISCOVER, "m1"),
])
def test_join_errors_that_a_new_attempt_mends(error, action, member_id):
    m = stable(member())
    m.rejoin_needed = True
    m.prepare_join()
    m.join_request()
    step = joined(m, error=error, member_id="")
    assert step.action is action
    assert m.member_id == member_id and m.state is not S.FATAL
    assert m.needs_join()
    m.join_request()  # and the next attempt is allowed


def test_member_id_required_rejoins_with_the_member_id_given():
    m = member()
    m.join_request()
    step = joined(m, error=Errors.MEMBER_ID_REQUIRED, member_id="given")
    assert step.action is Action.REJOIN
    assert m.join_request().member_id == "given"


@pytest.mark.parametrize("error", [Errors.FENCED_INSTANCE_ID, Errors.INCONSISTENT_GROUP_PROTOCOL,
                                   Errors.INVALID_SESSION_TIMEOUT, Errors.INVALID_GROUP_ID,
                                   Errors.GROUP_MAX_SIZE_REACHED, Errors.UNSUPPORTED_VERSION,
                                   Errors.UNKNOWN_SERVER_ERROR])
def test_fatal_join_errors_end_the_membership(error):
    m = member()
    m.join_request()
    step = joined(m, error=error)
    assert step.action is Action.FATAL and step.error.error is error
    assert m.state is S.FATAL and not m.needs_join()
    with pytest.raises(KafkaError) as e:
        m.join_request()
    assert e.value.error is error


def test_a_join_answer_after_the_member_was_reset_is_dropped():
    """Kafka's join handler drops an answer that arrives when the member is no longer
    preparing a rebalance (a failed commit reset it meanwhile)."""
    m = stable(member())
    m.rejoin_needed = True
    m.prepare_join()
    request = m.join_request()
    commit = m.offset_commit_request({TP("t", 0): 5})
    assert (commit.generation_id_or_member_epoch, request.member_id) == (1, "m1")
    m.on_commit_response(commit_response(Errors.UNKNOWN_MEMBER_ID), commit)
    assert m.state is S.UNJOINED
    assert joined(m, generation=2).action is Action.REJOIN
    assert m.generation == -1


# ---------------------------------------------------------------------- SyncGroup errors

@pytest.mark.parametrize("error, action, member_id, generation", [
    (Errors.REBALANCE_IN_PROGRESS, Action.REJOIN, "m1", 2),
    (Errors.ILLEGAL_GENERATION, Action.REJOIN, "m1", -1),  # the member id may still be good
    (Errors.UNKNOWN_MEMBER_ID, Action.REJOIN, "", -1),
    (Errors.COORDINATOR_NOT_AVAILABLE, Action.REDISCOVER, "m1", 2),
    (Errors.NOT_COORDINATOR, Action.REDISCOVER, "m1", 2),
])
def test_sync_errors_that_a_new_join_mends(error, action, member_id, generation):
    m = member()
    m.join_request()
    joined(m, generation=2)
    m.sync_request()
    step = synced(m, {}, error=error)
    assert step.action is action
    assert (m.member_id, m.generation) == (member_id, generation)
    assert m.needs_join() and not step.assign


@pytest.mark.parametrize("error", [Errors.FENCED_INSTANCE_ID, Errors.INCONSISTENT_GROUP_PROTOCOL,
                                   Errors.UNKNOWN_SERVER_ERROR])
def test_fatal_sync_errors(error):
    m = member()
    m.join_request()
    joined(m)
    m.sync_request()
    assert synced(m, {}, error=error).action is Action.FATAL
    assert m.state is S.FATAL and m.fatal_error.error is error


# ---------------------------------------------------------------------- Heartbeat errors

def heartbeat(m, error, request=None):
    request = request or m.heartbeat_request()
    return m.on_heartbeat_response(HeartbeatResponse(error.code), request)


def test_heartbeat_answers():
    m = stable(member())
    assert heartbeat(m, Errors.NONE).action is Action.NONE and not m.needs_join()
    assert heartbeat(m, Errors.NOT_COORDINATOR).action is Action.REDISCOVER
    assert heartbeat(m, Errors.COORDINATOR_NOT_AVAILABLE).action is Action.REDISCOVER
    assert not m.needs_join()  # a moved coordinator is no rebalance
    assert heartbeat(m, Errors.REBALANCE_IN_PROGRESS).action is Action.REJOIN
    assert m.needs_join() and (m.member_id, m.generation) == ("m1", 1)  # joins with its generation


def test_rebalance_in_progress_is_ignored_by_a_member_already_rejoining():
    m = stable(member())
    request = m.heartbeat_request()
    m.rejoin_needed = True
    m.prepare_join()
    m.join_request()
    assert heartbeat(m, Errors.REBALANCE_IN_PROGRESS, request).action is Action.NONE
    assert m.state is S.PREPARING_REBALANCE


@pytest.mark.parametrize("error, member_id", [(Errors.ILLEGAL_GENERATION, "m1"), (Errors.UNKNOWN_MEMBER_ID, "")])
def test_a_heartbeat_that_finds_the_generation_gone_resets_it(error, member_id):
    m = stable(member())
    assert heartbeat(m, error).action is Action.REJOIN
    assert (m.member_id, m.generation, m.state) == (member_id, -1, S.UNJOINED)
    # the partitions of the generation that is gone are lost, not revoked, and not committed
    step = m.prepare_join()
    assert step.lose == tps(("t", 0), ("t", 1)) and not step.revoke and not step.commit


def test_a_heartbeat_error_about_an_older_generation_is_ignored():
    m = stable(member())
    old = m.heartbeat_request()
    m.rejoin_needed = True
    m.prepare_join()
    m.join_request()
    joined(m, generation=2)
    m.sync_request()
    synced(m, {"t": (0, 1)})
    assert heartbeat(m, Errors.ILLEGAL_GENERATION, old).action is Action.NONE
    assert m.generation == 2 and m.state is S.STABLE


def test_a_fenced_static_member_stops():
    m = stable(member(group_instance_id="i1"))
    step = heartbeat(m, Errors.FENCED_INSTANCE_ID)
    assert step.action is Action.FATAL and m.fatal_error.error is Errors.FENCED_INSTANCE_ID


def test_the_first_fatal_error_is_the_one_that_stays():
    m = stable(member(group_instance_id="i1"))
    heartbeat(m, Errors.FENCED_INSTANCE_ID)
    step = m.request_failed(Errors.INVALID_REQUEST)  # a later call that fails too
    assert step.action is Action.FATAL and step.error.error is Errors.FENCED_INSTANCE_ID


def test_calls_that_failed_without_an_answer():
    m = stable(member())
    assert m.request_failed(Errors.COORDINATOR_NOT_AVAILABLE).action is Action.REDISCOVER
    assert m.request_failed(Errors.REQUEST_TIMED_OUT).action is Action.RETRY
    assert m.request_failed(Errors.INVALID_REQUEST).action is Action.FATAL


# ---------------------------------------------------------------------- OffsetCommit errors

@pytest.mark.parametrize("error, action", [
    (Errors.NONE, Action.NONE),
    (Errors.COORDINATOR_LOAD_IN_PROGRESS, Action.RETRY),
    (Errors.UNKNOWN_TOPIC_OR_PARTITION, Action.RETRY),
    (Errors.COORDINATOR_NOT_AVAILABLE, Action.REDISCOVER),
    (Errors.NOT_COORDINATOR, Action.REDISCOVER),
    (Errors.REQUEST_TIMED_OUT, Action.REDISCOVER),
])
def test_commit_errors_that_a_retry_mends(error, action):
    m = stable(member())
    request = m.offset_commit_request({TP("t", 0): 3})
    assert m.on_commit_response(commit_response(error), request).action is action
    assert (m.member_id, m.generation, m.needs_join()) == ("m1", 1, False)


def test_a_commit_carries_the_generation_only_inside_the_group():
    m = stable(member())
    request = m.offset_commit_request({TP("t", 0): 3})
    assert (request.generation_id_or_member_epoch, request.member_id) == (1, "m1")
    assert request.topics[0].partitions[0].committed_offset == 3
    outside = ClassicMember("g", SETTINGS).offset_commit_request({TP("t", 0): 3})
    assert (outside.generation_id_or_member_epoch, outside.member_id) == (-1, "")


def test_a_commit_during_a_rebalance_fails_and_asks_to_rejoin():
    m = stable(member())
    request = m.offset_commit_request({TP("t", 0): 3})
    step = m.on_commit_response(commit_response(Errors.REBALANCE_IN_PROGRESS), request)
    assert step.action is Action.RAISE and isinstance(step.error, CommitFailedError)
    assert m.needs_join() and m.generation == 1  # the generation stays: the join finishes the rebalance


@pytest.mark.parametrize("error, member_id", [(Errors.UNKNOWN_MEMBER_ID, ""), (Errors.ILLEGAL_GENERATION, "m1")])
def test_a_commit_of_a_generation_that_is_gone_fails_and_resets_it(error, member_id):
    m = stable(member())
    request = m.offset_commit_request({TP("t", 0): 3})
    step = m.on_commit_response(commit_response(error), request)
    assert step.action is Action.RAISE and isinstance(step.error, CommitFailedError)
    assert (m.member_id, m.generation, m.state) == (member_id, -1, S.UNJOINED)


def test_a_stale_commit_during_the_next_rebalance_leaves_the_member_alone():
    m = stable(member())
    request = m.offset_commit_request({TP("t", 0): 3})
    m.rejoin_needed = True
    m.prepare_join()
    m.join_request()
    joined(m, generation=2)
    m.sync_request()
    synced(m, {"t": (0, 1)})
    m.rejoin_needed = True
    m.prepare_join()
    m.join_request()  # preparing the third generation
    step = m.on_commit_response(commit_response(Errors.ILLEGAL_GENERATION), request)
    assert isinstance(step.error, CommitFailedError)
    assert (m.member_id, m.generation, m.state) == ("m1", 2, S.PREPARING_REBALANCE)


def test_commit_errors_that_fail_the_commit_only():
    m = stable(member())
    request = m.offset_commit_request({TP("t", 0): 3})
    for error in (Errors.OFFSET_METADATA_TOO_LARGE, Errors.INVALID_COMMIT_OFFSET_SIZE, Errors.FENCED_INSTANCE_ID):
        step = m.on_commit_response(commit_response(error), request)
        assert step.action is Action.RAISE and step.error.error is error
        assert not isinstance(step.error, CommitFailedError)
    assert m.state is S.STABLE


# ---------------------------------------------------------------------- revocation

def test_an_eager_member_commits_and_revokes_everything_before_it_joins():
    m = stable(member())
    m.rejoin_needed = True
    step = m.prepare_join()
    assert step.revoke == step.commit == tps(("t", 0), ("t", 1))
    assert m.prepare_join().revoke == frozenset()  # once per rebalance: a retried join revokes nothing
    m.join_request()
    joined(m, generation=2)
    m.sync_request()
    step = synced(m, {"t": (1, 2)})
    assert step.assign == tps(("t", 1), ("t", 2)) and not step.revoke and not m.rejoin_needed


def test_without_auto_commit_nothing_is_committed_on_revocation():
    m = stable(member(enable_auto_commit=False))
    m.rejoin_needed = True
    step = m.prepare_join()
    assert step.revoke and not step.commit


def test_a_cooperative_member_keeps_its_partitions_then_gives_up_what_moved_and_rejoins():
    m = stable(member(partition_assignment_strategy=("cooperative-sticky",)), {"t": (0, 1, 2)})
    m.rejoin_needed = True
    step = m.prepare_join()
    assert not step.revoke and step.commit == tps(("t", 0), ("t", 1), ("t", 2))
    m.join_request()
    joined(m, generation=2)
    m.sync_request()
    step = synced(m, {"t": (0, 1)})
    assert step.revoke == step.commit == tps(("t", 2)) and not step.assign
    assert m.needs_join()  # so that the new owner of t-2 can get it
    m.prepare_join()
    m.join_request()
    joined(m, generation=3)
    m.sync_request()
    step = synced(m, {"t": (0, 1)})
    assert not step.revoke and not m.needs_join()


def test_a_cooperative_member_revokes_what_it_no_longer_subscribes_to_before_it_joins():
    m = member(partition_assignment_strategy=("cooperative-sticky",))
    m.subscribe(["t", "u"])
    stable(m, {"t": (0,), "u": (0,)})
    m.subscribe(["t"])
    assert m.needs_join()
    assert m.prepare_join().revoke == tps(("u", 0))


def test_only_cooperative_assignors_make_a_cooperative_member():
    assert member(partition_assignment_strategy=("cooperative-sticky",)).cooperative
    assert not member(partition_assignment_strategy=("range", "cooperative-sticky")).cooperative


def test_the_join_reports_the_last_assignment_and_generation():
    m = stable(member(), {"t": (0, 1), "gone": (3,)})
    m.rejoin_needed = True
    m.prepare_join()
    request = m.join_request()
    assert [p.name for p in request.protocols] == ["range"]
    sub = decode_subscription(request.protocols[0].metadata)
    assert (sub.topics, sub.owned_partitions, sub.generation_id) == (("t",), (("t", (0, 1)),), 1)


# ---------------------------------------------------------------------- the leader

def test_the_leader_assigns_with_the_chosen_assignor_and_checks_metadata():
    m = member()
    m.join_request()
    members = (JoinGroupResponseMember("m1", None, encode_subscription(["t"])),
               JoinGroupResponseMember("m2", None, encode_subscription(["t", "u"])))
    assert joined(m, leader="m1", members=members).action is Action.ASSIGN
    assert m.assignment_topics() == ["t", "u"]
    request = m.sync_request({"t": 2, "u": 1}, now_ms=1_000)
    got = {a.member_id: decode_assignment(a.assignment).assigned_partitions for a in request.assignments}
    assert got == {"m1": (("t", (0,)),), "m2": (("t", (1,)), ("u", (0,)))}  # range, topic by topic
    synced(m, {"t": (0,)})
    # Kafka's leader looks at the metadata every metadata_max_age_ms and rejoins on a change
    assert m.metadata_check_due(1_000 + SETTINGS["metadata_max_age_ms"] - 1) is None
    topics = m.metadata_check_due(1_000 + SETTINGS["metadata_max_age_ms"])
    assert topics == ["t", "u"]
    assert not m.on_metadata({"t": 2, "u": 1}) and not m.needs_join()
    assert m.on_metadata({"t": 3, "u": 1}) and m.needs_join()


def test_a_follower_sends_no_assignment_and_checks_no_metadata():
    m = member()
    m.join_request()
    assert joined(m, leader="m2").action is Action.SYNC
    assert m.sync_request().assignments == ()
    synced(m, {"t": (0,)})
    assert m.metadata_check_due(10 ** 9) is None


def test_a_static_leader_told_to_skip_the_assignment_just_syncs():
    m = member(group_instance_id="i1")
    m.join_request()
    step = m.on_join_response(JoinGroupResponse(0, 3, "consumer", "range", "m1", True, "m1", ()))
    assert step.action is Action.SYNC and m.sync_request().assignments == ()


# ---------------------------------------------------------------------- leaving and the poll timer

def test_leaving_gives_up_everything_and_a_dynamic_member_says_goodbye():
    m = stable(member())
    given_up, request = m.unsubscribe("bye")
    assert given_up == tps(("t", 0), ("t", 1))
    assert request.members[0].member_id == "m1" and request.members[0].reason == "bye"
    assert (m.member_id, m.generation, m.state, m.needs_join()) == ("", -1, S.UNJOINED, False)


def test_a_static_member_leaves_without_a_goodbye():
    m = stable(member(group_instance_id="i1"))
    assert m.leave("closing")[1] is None


def test_a_missed_poll_loses_the_partitions_until_the_next_poll():
    m = stable(member())
    lost, request = m.poll_timer_expired("poll timeout")
    assert lost == tps(("t", 0), ("t", 1)) and request is not None
    assert not m.needs_join()
    m.poll_resumed()
    assert m.needs_join() and m.prepare_join().lose == frozenset()  # already given up


# ---------------------------------------------------------------------- against the coordinator

@pytest.mark.parametrize("strategy, rounds", [("range", 1), ("cooperative-sticky", 2)])
def test_members_join_share_and_hand_over_partitions_without_a_double_owner(tmp_path, strategy, rounds):
    """The second member's arrival: an eager group rebalances once (everyone gives up
    everything first); a cooperative one twice (the partitions that move are given up
    in the first, taken in the second)."""
    g = ClassicGroupHarness(tmp_path, {"t": 4})
    a = g.member(partition_assignment_strategy=(strategy,))
    a.subscribe(["t"])
    assert g.rebalance({"a": a}) == 1
    assert g.owned["a"] == tps(*(("t", p) for p in range(4)))
    b = g.member(partition_assignment_strategy=(strategy,))
    b.subscribe(["t"])
    assert g.rebalance({"a": a, "b": b}) == rounds
    assert len(g.owned["a"]) == len(g.owned["b"]) == 2
    if strategy == "cooperative-sticky":
        assert ("a", "revoke", g.owned["b"]) in g.log  # only what moved was given up
    else:
        assert ("a", "revoke", tps(*(("t", p) for p in range(4)))) in g.log


def test_a_member_removed_by_the_coordinator_loses_its_partitions_and_joins_again(tmp_path):
    g = ClassicGroupHarness(tmp_path, {"t": 2})
    a = g.member()
    a.subscribe(["t"])
    g.rebalance({"a": a})
    g.h.advance(SETTINGS["session_timeout_ms"] + 1)  # no heartbeat: the session ends
    step = g.heartbeat(a)
    assert step.action is Action.REJOIN and a.member_id == ""
    g.rebalance({"a": a})
    assert ("a", "lose", tps(("t", 0), ("t", 1))) in g.log
    assert g.owned["a"] == tps(("t", 0), ("t", 1)) and a.generation >= 2


def test_the_leader_rejoins_when_a_topic_grows_and_assigns_the_new_partition(tmp_path):
    g = ClassicGroupHarness(tmp_path, {"t": 2})
    a = g.member()
    a.subscribe(["t"])
    g.rebalance({"a": a})
    age = SETTINGS["metadata_max_age_ms"]
    assert a.metadata_check_due(g.now_ms + age) == ["t"]
    assert not a.on_metadata(g.topics) and not a.needs_join()  # unchanged: no rebalance
    g.topics["t"] = 3
    topics = a.metadata_check_due(g.now_ms + 2 * age)
    assert a.on_metadata({t: g.topics[t] for t in topics})
    assert a.generation != -1  # still in the group: it rejoins to assign the new partition
    assert g.rebalance({"a": a}) == 1
    assert g.owned["a"] == tps(("t", 0), ("t", 1), ("t", 2))
