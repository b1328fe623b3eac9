"""KIP-848 consumer groups through the group coordinator shard: joins, epochs, revocation
before assignment, leaves, timeouts, static members, regex subscriptions, topic metadata,
assignment batching, offsets with member epochs, describe, and reload."""
from __future__ import annotations

import copy
import dataclasses

import pytest

from runtime.errors import Errors, KafkaError
from runtime.group import records as R
from runtime.group.consumer import ConsumerGroupMember, ConsumerGroupState
from runtime.group.reconcile import MemberState
from runtime.group.shard import GroupCoordinatorShard
from runtime.messages.consumer import (
    ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatRequestTopicPartitions, ConsumerGroupHeartbeatResponse,
    ConsumerGroupHeartbeatResponseAssignment, ConsumerGroupHeartbeatResponseTopicPartitions,
)
from runtime.messages.group import (
    JoinGroupRequest, JoinGroupRequestProtocol, OffsetCommitRequest, OffsetCommitRequestPartition,
    OffsetCommitRequestTopic, OffsetFetchRequest, OffsetFetchRequestGroup,
)
from runtime.testing import ShardHarness

G = "g"
SESSION_MS = 10_000
REBALANCE_MS = 3_000
CONFIG = {"group.consumer.assignors": "range,uniform", "group.consumer.session.timeout.ms": SESSION_MS}


def harness(tmp_path, topics=None, **config):
    h = ShardHarness(str(tmp_path), GroupCoordinatorShard, config={**CONFIG, **config})
    h.call(lambda s, now: s.update_topics(topics if topics is not None else {"t": 4}, now))
    return h


def owned(assignment: dict | None):
    if assignment is None:
        return None
    return tuple(ConsumerGroupHeartbeatRequestTopicPartitions(t, tuple(sorted(ps)))
                 for t, ps in sorted(assignment.items()))


def hb(h, member_id="", epoch=0, *, group=G, new_member_id="generated", owns=None, **fields):
    """One heartbeat; a join (epoch 0) sends the full request."""
    if epoch == 0:
        fields.setdefault("rebalance_timeout_ms", REBALANCE_MS)
        fields.setdefault("subscribed_topic_names", ("t",))
        owns = owns if owns is not None else {}
    request = ConsumerGroupHeartbeatRequest(group, member_id, epoch, topic_partitions=owned(owns), **fields)
    return h.call(lambda s, now: s.consumer_group_heartbeat(request, now, new_member_id))


def records_of(h, member_id="", epoch=0, **kw):
    """The records a heartbeat writes (it is applied, as any write)."""
    seen = []

    def op(s, now):
        fields = dict(kw)
        if epoch == 0:
            fields.setdefault("rebalance_timeout_ms", REBALANCE_MS)
            fields.setdefault("subscribed_topic_names", ("t",))
            fields.setdefault("topic_partitions", ())
        result = s.consumer_group_heartbeat(ConsumerGroupHeartbeatRequest(G, member_id, epoch, **fields), now, "gen")
        seen.extend(result.records)
        return result
    h.call(op)
    return seen


def assignment(**topics) -> ConsumerGroupHeartbeatResponseAssignment:
    return ConsumerGroupHeartbeatResponseAssignment(tuple(
        ConsumerGroupHeartbeatResponseTopicPartitions(t, tuple(ps)) for t, ps in sorted(topics.items())))


def group(h):
    return h.shard.groups[G]


def member(h, member_id) -> ConsumerGroupMember:
    return group(h).members[member_id]


def two_members(h):
    """a then b join topic t (4 partitions, range): a ends with 0-1, b with 2-3, both stable
    at epoch 2."""
    hb(h, "a")
    hb(h, "b")
    hb(h, "a", 1, owns={"t": {0, 1}})
    hb(h, "b", 2)
    assert group(h).state is ConsumerGroupState.STABLE


def snapshot(shard) -> dict:
    """Everything a reload must give back for consumer groups."""
    out = {}
    for gid, g in shard.groups.items():
        if g.type == "consumer":
            out[gid] = (g.group_epoch, g.assignment_epoch, g.metadata_hash, dict(g.members), g.target_assignment,
                        g.partition_owner, g.static_members, g.subscribed_topic_counts, g.regex_counts,
                        g.resolved_regexes, str(g.state))
    return copy.deepcopy(out)


def assert_reload_same(h, topics=None):
    before = snapshot(h.shard)
    h.reload()
    h.call(lambda s, now: s.update_topics(topics if topics is not None else {"t": 4}, now))
    assert snapshot(h.shard) == before


# ---------------------------------------------------------------------- joining

def test_first_member_joins_and_gets_everything(tmp_path):
    h = harness(tmp_path)
    records = records_of(h, "a")
    member_a = member(h, "a")
    assert records == [
        R.consumer_group_member_subscription_record(G, ConsumerGroupMember("a", subscribed_topic_names=frozenset({"t"}),
                                                                           rebalance_timeout_ms=REBALANCE_MS)),
        R.consumer_group_epoch_record(G, 1, group(h).metadata_hash),
        R.consumer_group_target_assignment_record(G, "a", {"t": {0, 1, 2, 3}}),
        R.consumer_group_target_assignment_epoch_record(G, 1),
        R.consumer_group_current_assignment_record(G, member_a),
    ]
    assert (member_a.member_epoch, member_a.previous_member_epoch, member_a.state) == (1, 0, MemberState.STABLE)
    assert group(h).state is ConsumerGroupState.STABLE
    assert group(h).metadata_hash != 0


def test_join_response_and_generated_member_id(tmp_path):
    h = harness(tmp_path)
    response = hb(h, "", new_member_id="m-1")
    assert response == ConsumerGroupHeartbeatResponse(member_id="m-1", member_epoch=1, heartbeat_interval_ms=5000,
                                                      assignment=assignment(t=(0, 1, 2, 3)))


def test_heartbeat_interval_comes_from_config(tmp_path):
    h = harness(tmp_path, **{"group.consumer.heartbeat.interval.ms": 700})
    assert hb(h, "a").heartbeat_interval_ms == 700


def test_steady_heartbeat_writes_nothing_and_omits_the_assignment(tmp_path):
    h = harness(tmp_path)
    hb(h, "a")
    assert records_of(h, "a", 1) == []
    assert hb(h, "a", 1) == ConsumerGroupHeartbeatResponse(member_id="a", member_epoch=1, heartbeat_interval_ms=5000)


def test_full_request_gets_the_assignment_again(tmp_path):
    h = harness(tmp_path)
    hb(h, "a")
    response = hb(h, "a", 1, rebalance_timeout_ms=REBALANCE_MS, subscribed_topic_names=("t",),
                  owns={"t": {0, 1, 2, 3}})
    assert response.assignment == assignment(t=(0, 1, 2, 3))


# ---------------------------------------------------------------------- revocation before assignment

def test_partition_moves_only_after_its_owner_revoked_it(tmp_path):
    h = harness(tmp_path)
    hb(h, "a")
    # b joins: epoch 2; the target gives a 0-1 and b 2-3, but a still owns 2-3
    response = hb(h, "b")
    assert response == ConsumerGroupHeartbeatResponse(member_id="b", member_epoch=2, heartbeat_interval_ms=5000,
                                                      assignment=assignment())
    assert member(h, "b").state is MemberState.UNRELEASED_PARTITIONS
    assert group(h).target_assignment == {"a": {"t": frozenset({0, 1})}, "b": {"t": frozenset({2, 3})}}
    assert group(h).state is ConsumerGroupState.RECONCILING

    # a is asked to revoke 2-3 and stays in epoch 1 until it does
    response = hb(h, "a", 1)
    assert response == ConsumerGroupHeartbeatResponse(member_id="a", member_epoch=1, heartbeat_interval_ms=5000,
                                                      assignment=assignment(t=(0, 1)))
    a = member(h, "a")
    assert (a.state, a.member_epoch, a.partitions_pending_revocation) == (
        MemberState.UNREVOKED_PARTITIONS, 1, {"t": frozenset({2, 3})})
    # still reporting 2 → still waiting; b gets nothing
    assert hb(h, "a", 1, owns={"t": {0, 1, 2}}).member_epoch == 1
    assert hb(h, "b", 2).assignment is None
    assert group(h).owner_of("t", 2) == "a"

    # a reports 0-1 only: it moves to epoch 2, and b can take 2-3
    assert hb(h, "a", 1, owns={"t": {0, 1}}) == ConsumerGroupHeartbeatResponse(
        member_id="a", member_epoch=2, heartbeat_interval_ms=5000)
    assert hb(h, "b", 2).assignment == assignment(t=(2, 3))
    assert member(h, "b").state is MemberState.STABLE
    assert group(h).state is ConsumerGroupState.STABLE
    assert group(h).partition_owner == {("t", 0): "a", ("t", 1): "a", ("t", 2): "b", ("t", 3): "b"}
    assert_reload_same(h)


def test_lost_response_previous_epoch_with_subset_is_accepted(tmp_path):
    h = harness(tmp_path)
    two_members(h)
    a = member(h, "a")
    assert (a.member_epoch, a.previous_member_epoch) == (2, 1)
    # a never saw epoch 2: it heartbeats with epoch 1 and owns a subset of its assignment
    assert hb(h, "a", 1, owns={"t": {0}}).member_epoch == 2


@pytest.mark.parametrize("epoch, owns", [(3, {}), (1, {"t": {0, 1, 2}}), (1, None), (0 + 1, {"x": {0}})])
def test_fenced_member_epoch(tmp_path, epoch, owns):
    h = harness(tmp_path)
    two_members(h)
    before = snapshot(h.shard)
    with pytest.raises(KafkaError) as e:
        hb(h, "a", epoch, owns=owns)
    assert e.value.error is Errors.FENCED_MEMBER_EPOCH
    assert snapshot(h.shard) == before


def test_unsubscribing_revokes_whatever_the_target_says(tmp_path):
    h = harness(tmp_path, {"t": 2, "u": 2})
    hb(h, "a", subscribed_topic_names=("t", "u"))
    response = hb(h, "a", 1, subscribed_topic_names=("u",), owns={"t": {0, 1}, "u": {0, 1}})
    assert response.member_epoch == 1 and response.assignment == assignment(u=(0, 1))
    assert member(h, "a").state is MemberState.UNREVOKED_PARTITIONS
    response = hb(h, "a", 1, owns={"u": {0, 1}})
    assert (response.member_epoch, member(h, "a").state) == (2, MemberState.STABLE)
    assert not group(h).is_subscribed_to_topic("t")


# ---------------------------------------------------------------------- leaving and timeouts

def test_leave_writes_tombstones_and_bumps_the_epoch(tmp_path):
    h = harness(tmp_path)
    two_members(h)
    records = records_of(h, "b", -1)
    assert records == [R.consumer_group_current_assignment_tombstone(G, "b"),
                       R.consumer_group_target_assignment_tombstone(G, "b"),
                       R.consumer_group_member_subscription_tombstone(G, "b"),
                       R.consumer_group_epoch_record(G, 3, group(h).metadata_hash)]
    assert "b" not in group(h).members and group(h).group_epoch == 3
    assert hb(h, "a", 2).assignment == assignment(t=(0, 1, 2, 3))
    assert member(h, "a").member_epoch == 3


def test_leave_response(tmp_path):
    h = harness(tmp_path)
    hb(h, "a")
    assert hb(h, "a", -1) == ConsumerGroupHeartbeatResponse(member_id="a", member_epoch=-1)
    assert group(h).state is ConsumerGroupState.EMPTY
    with pytest.raises(KafkaError) as e:
        hb(h, "a", -1)
    assert e.value.error is Errors.UNKNOWN_MEMBER_ID


def test_session_timeout_fences_the_member(tmp_path):
    h = harness(tmp_path)
    two_members(h)
    h.advance(SESSION_MS - 1000)
    hb(h, "a", 2)
    h.advance(1000)
    assert list(group(h).members) == ["a"]
    assert group(h).group_epoch == 3
    h.advance(SESSION_MS)
    assert group(h).members == {} and group(h).state is ConsumerGroupState.EMPTY
    with pytest.raises(KafkaError) as e:
        hb(h, "a", 3)
    assert e.value.error is Errors.UNKNOWN_MEMBER_ID


def test_member_that_does_not_revoke_in_time_is_fenced(tmp_path):
    h = harness(tmp_path)
    hb(h, "a")
    hb(h, "b")
    hb(h, "a", 1)  # a must revoke 2-3
    h.advance(REBALANCE_MS - 1)
    hb(h, "a", 1, owns={"t": {0, 1, 2, 3}})
    hb(h, "b", 2)
    assert "a" in group(h).members
    h.advance(1)
    assert list(group(h).members) == ["b"]
    assert group(h).owner_of("t", 2) is None
    assert hb(h, "b", 2).assignment == assignment(t=(0, 1, 2, 3))
    with pytest.raises(KafkaError) as e:
        hb(h, "a", 1, owns={"t": {0, 1}})
    assert e.value.error is Errors.UNKNOWN_MEMBER_ID


def test_revoking_in_time_cancels_the_rebalance_timeout(tmp_path):
    h = harness(tmp_path)
    hb(h, "a")
    hb(h, "b")
    hb(h, "a", 1)
    hb(h, "a", 1, owns={"t": {0, 1}})
    h.advance(REBALANCE_MS * 2)
    assert set(group(h).members) == {"a", "b"}


def test_rejoin_with_epoch_zero_starts_over_with_what_it_held(tmp_path):
    h = harness(tmp_path)
    two_members(h)
    response = hb(h, "a", 0)
    assert response == ConsumerGroupHeartbeatResponse(member_id="a", member_epoch=2, heartbeat_interval_ms=5000,
                                                      assignment=assignment(t=(0, 1)))
    assert group(h).group_epoch == 2


# ---------------------------------------------------------------------- errors

def test_unknown_group_and_member(tmp_path):
    h = harness(tmp_path)
    with pytest.raises(KafkaError) as e:
        hb(h, "a", 1)
    assert e.value.error is Errors.GROUP_ID_NOT_FOUND
    hb(h, "a")
    with pytest.raises(KafkaError) as e:
        hb(h, "zz", 1)
    assert e.value.error is Errors.UNKNOWN_MEMBER_ID


def test_group_max_size(tmp_path):
    h = harness(tmp_path, **{"group.consumer.max.size": 1})
    hb(h, "a")
    before = snapshot(h.shard)
    with pytest.raises(KafkaError) as e:
        hb(h, "b")
    assert e.value.error is Errors.GROUP_MAX_SIZE_REACHED
    assert snapshot(h.shard) == before
    assert hb(h, "a", 1).member_epoch == 1


def test_unsupported_assignor(tmp_path):
    h = harness(tmp_path)
    with pytest.raises(KafkaError) as e:
        hb(h, "a", server_assignor="sticky")
    assert e.value.error is Errors.UNSUPPORTED_ASSIGNOR
    hb(h, "a", server_assignor="uniform")
    assert h.read(lambda s: s.consumer_group_describe([G]))[0].assignor_name == "uniform"


@pytest.mark.parametrize("fields, message", [
    (dict(group_id=""), "GroupId"),
    (dict(group_id="  "), "GroupId"),
    (dict(instance_id=" "), "InstanceId"),
    (dict(rack_id=""), "RackId"),
    (dict(member_epoch=0, rebalance_timeout_ms=-1, subscribed_topic_names=("t",), topic_partitions=()),
     "RebalanceTimeoutMs"),
    (dict(member_epoch=0, rebalance_timeout_ms=1, subscribed_topic_names=("t",)), "TopicPartitions"),
    (dict(member_epoch=0, rebalance_timeout_ms=1, subscribed_topic_names=("t",),
          topic_partitions=(ConsumerGroupHeartbeatRequestTopicPartitions("t", (0,)),)), "TopicPartitions"),
    (dict(member_epoch=0, rebalance_timeout_ms=1, topic_partitions=()), "SubscribedTopic"),
    (dict(member_epoch=1, member_id=""), "MemberId"),
    (dict(member_epoch=-1, member_id=""), "MemberId"),
    (dict(member_epoch=-2, member_id="a"), "InstanceId"),
    (dict(member_epoch=-3, member_id="a"), "MemberEpoch"),
])
def test_malformed_heartbeats_are_invalid_requests(tmp_path, fields, message):
    h = harness(tmp_path)
    request = ConsumerGroupHeartbeatRequest(**{"group_id": G, **fields})
    with pytest.raises(KafkaError) as e:
        h.call(lambda s, now: s.consumer_group_heartbeat(request, now, "x"))
    assert e.value.error is Errors.INVALID_REQUEST and message in e.value.message
    assert h.shard.groups == {}


def test_invalid_regex(tmp_path):
    h = harness(tmp_path)
    with pytest.raises(KafkaError) as e:
        hb(h, "a", subscribed_topic_names=None, subscribed_topic_regex="t(")
    assert e.value.error is Errors.INVALID_REGULAR_EXPRESSION


def test_topic_metadata_must_be_known(tmp_path):
    h = ShardHarness(str(tmp_path), GroupCoordinatorShard, config=CONFIG)
    with pytest.raises(KafkaError) as e:
        hb(h, "a")
    assert e.value.error is Errors.COORDINATOR_LOAD_IN_PROGRESS and e.value.retriable


# ---------------------------------------------------------------------- static members

def test_static_member_temporary_leave_and_return(tmp_path):
    h = harness(tmp_path)
    hb(h, "a", instance_id="i-a")
    hb(h, "b", instance_id="i-b")
    hb(h, "a", 1, owns={"t": {0, 1}})
    hb(h, "b", 2)
    assert hb(h, "b", -2, instance_id="i-b") == ConsumerGroupHeartbeatResponse(member_id="b", member_epoch=-2)
    assert member(h, "b").member_epoch == -2 and group(h).owner_of("t", 2) == "b"
    assert group(h).group_epoch == 2
    # another process with the instance id cannot join while b is in the group...
    with pytest.raises(KafkaError) as e:
        hb(h, "a2", instance_id="i-a")
    assert e.value.error is Errors.UNRELEASED_INSTANCE_ID
    # ...but b's successor takes over b's partitions without a rebalance
    response = hb(h, "b2", instance_id="i-b")
    assert response == ConsumerGroupHeartbeatResponse(member_id="b2", member_epoch=2, heartbeat_interval_ms=5000,
                                                      assignment=assignment(t=(2, 3)))
    assert set(group(h).members) == {"a", "b2"} and group(h).group_epoch == 2
    assert group(h).static_members == {"i-a": "a", "i-b": "b2"}
    assert group(h).owner_of("t", 2) == "b2"
    assert_reload_same(h)


def test_static_member_errors(tmp_path):
    h = harness(tmp_path)
    hb(h, "a", instance_id="i-a")
    with pytest.raises(KafkaError) as e:
        hb(h, "other", 1, instance_id="i-a")
    assert e.value.error is Errors.FENCED_INSTANCE_ID
    with pytest.raises(KafkaError) as e:
        hb(h, "a", 1, instance_id="i-zz")
    assert e.value.error is Errors.UNKNOWN_MEMBER_ID
    with pytest.raises(KafkaError) as e:
        hb(h, "other", -2, instance_id="i-a")
    assert e.value.error is Errors.FENCED_INSTANCE_ID


def test_static_member_that_never_returns_expires(tmp_path):
    h = harness(tmp_path)
    hb(h, "a", instance_id="i-a")
    hb(h, "a", -2, instance_id="i-a")
    h.advance(SESSION_MS)
    assert group(h).members == {} and group(h).static_members == {}


# ---------------------------------------------------------------------- topics and regexes

def test_partition_addition_bumps_the_epoch(tmp_path):
    h = harness(tmp_path)
    hb(h, "a")
    h.call(lambda s, now: s.update_topics({"t": 4, "other": 3}, now))
    assert group(h).group_epoch == 1  # nothing the group subscribes to changed
    h.call(lambda s, now: s.update_topics({"t": 6}, now))
    assert group(h).group_epoch == 2
    assert hb(h, "a", 1).assignment == assignment(t=range(6))
    assert_reload_same(h, {"t": 6})


def test_regex_subscription_follows_topic_creation(tmp_path):
    h = harness(tmp_path, {"orders-1": 1, "payments": 1, "__internal-orders": 1})
    records = records_of(h, "a", subscribed_topic_names=None, subscribed_topic_regex="orders-.*|__internal.*")
    assert records[1] == R.consumer_group_regex_record(G, "orders-.*|__internal.*", ["orders-1"], 0)
    assert member(h, "a").assigned_partitions == {"orders-1": frozenset({0})}
    h.call(lambda s, now: s.update_topics({"orders-1": 1, "orders-2": 2, "payments": 1}, now))
    assert group(h).resolved_regexes == {"orders-.*|__internal.*": frozenset({"orders-1", "orders-2"})}
    assert hb(h, "a", 1).assignment == assignment(**{"orders-1": (0,), "orders-2": (0, 1)})
    assert group(h).is_subscribed_to_topic("orders-2") and not group(h).is_subscribed_to_topic("payments")
    assert_reload_same(h, {"orders-1": 1, "orders-2": 2, "payments": 1})
    # the last member using the regex leaves: its resolution goes too
    assert R.consumer_group_regex_tombstone(G, "orders-.*|__internal.*") in records_of(h, "a", -1)
    assert group(h).resolved_regexes == {}


def test_names_and_regex_together(tmp_path):
    h = harness(tmp_path, {"a1": 1, "b1": 1, "c": 1})
    hb(h, "m", subscribed_topic_names=("c",), subscribed_topic_regex="a.*")
    assert member(h, "m").assigned_partitions == {"a1": frozenset({0}), "c": frozenset({0})}


# ---------------------------------------------------------------------- assignment batching

def test_assignment_interval_batches_the_assignor(tmp_path):
    h = harness(tmp_path, **{"group.consumer.assignment.interval.ms": 1000})
    hb(h, "a")  # first run at t=0
    h.advance(10)
    response = hb(h, "b")
    assert (group(h).group_epoch, group(h).assignment_epoch) == (2, 1)
    assert group(h).state is ConsumerGroupState.ASSIGNING
    assert response.member_epoch == 1 and response.assignment == assignment()
    h.advance(989)
    assert group(h).assignment_epoch == 1
    h.advance(1)  # the deferred run
    assert group(h).assignment_epoch == 2
    assert group(h).target_assignment == {"a": {"t": frozenset({0, 1})}, "b": {"t": frozenset({2, 3})}}


# ---------------------------------------------------------------------- offsets

def commit(h, member_id, epoch, group_id=G):
    request = OffsetCommitRequest(group_id, generation_id_or_member_epoch=epoch, member_id=member_id,
                                  topics=(OffsetCommitRequestTopic("t", (OffsetCommitRequestPartition(0, 42),)),))
    return h.call(lambda s, now: s.offset_commit(request, now))


def test_offset_commit_checks_the_member_epoch(tmp_path):
    h = harness(tmp_path)
    two_members(h)
    assert commit(h, "a", 2).topics[0].partitions[0].error_code == 0
    for member_id, epoch, error in (("a", 1, Errors.STALE_MEMBER_EPOCH), ("a", 3, Errors.STALE_MEMBER_EPOCH),
                                    ("zz", 2, Errors.UNKNOWN_MEMBER_ID), ("", -1, Errors.UNKNOWN_MEMBER_ID)):
        with pytest.raises(KafkaError) as e:
            commit(h, member_id, epoch)
        assert e.value.error is error
    fetch = OffsetFetchRequest(groups=(OffsetFetchRequestGroup(G, member_id="a", member_epoch=1),))
    assert h.read(lambda s: s.offset_fetch(fetch)).groups[0].error_code == Errors.STALE_MEMBER_EPOCH.code
    fetch = OffsetFetchRequest(groups=(OffsetFetchRequestGroup(G, member_id="a", member_epoch=2),))
    assert h.read(lambda s: s.offset_fetch(fetch)).groups[0].topics[0].partitions[0].committed_offset == 42


def test_empty_group_accepts_admin_commits(tmp_path):
    h = harness(tmp_path)
    hb(h, "a")
    hb(h, "a", -1)
    assert commit(h, "", -1).topics[0].partitions[0].error_code == 0


# ---------------------------------------------------------------------- describe and list

def test_describe(tmp_path):
    h = harness(tmp_path)
    two_members(h)
    described, missing = h.read(lambda s: s.consumer_group_describe([G, "nope"]))
    assert (described.group_state, described.group_epoch, described.assignment_epoch, described.assignor_name) == (
        "Stable", 2, 2, "range")
    a = described.members[0]
    assert (a.member_id, a.member_epoch, a.subscribed_topic_names, a.member_type) == ("a", 2, ("t",), 1)
    assert a.assignment.topic_partitions[0].partitions == (0, 1)
    assert a.target_assignment.topic_partitions[0].partitions == (0, 1)
    assert (missing.error_code, missing.group_state) == (Errors.GROUP_ID_NOT_FOUND.code, "Dead")
    listed = h.read(lambda s: s.list_groups(types_filter=("consumer",)))
    assert [(g.group_id, g.group_state, g.group_type) for g in listed] == [(G, "Stable", "consumer")]


def test_reload_after_a_busy_history(tmp_path):
    h = harness(tmp_path, {"t": 4, "u": 3})
    hb(h, "a", subscribed_topic_names=("t", "u"))
    hb(h, "b", instance_id="i-b", subscribed_topic_names=("u",))
    hb(h, "a", 1)
    hb(h, "c", subscribed_topic_names=None, subscribed_topic_regex="t|u")
    hb(h, "b", -2, instance_id="i-b")
    assert_reload_same(h, {"t": 4, "u": 3})


# ---------------------------------------------------------------------- deleting

def test_delete_group_needs_it_empty_and_removes_it_for_good(tmp_path):
    h = harness(tmp_path)
    hb(h, "a", subscribed_topic_names=None, subscribed_topic_regex="t")
    commit(h, "a", 1)
    assert h.call(lambda s, now: s.delete_groups([G], now))[0].error_code == Errors.NON_EMPTY_GROUP.code
    hb(h, "a", -1)
    assert h.call(lambda s, now: s.delete_groups([G], now))[0].error_code == 0
    assert G not in h.shard.groups
    h.reload()
    assert G not in h.shard.groups and h.shard.offsets.offsets == {}
    # the id is free again, for any protocol
    h.call(lambda s, now: s.update_topics({"t": 4}, now))
    assert hb(h, "b").member_epoch == 1


def test_empty_group_without_offsets_expires(tmp_path):
    h = harness(tmp_path, **{"offsets.retention.check.interval.ms": 1000})
    hb(h, "a")
    h.advance(1000)
    assert G in h.shard.groups
    hb(h, "a", 1)
    hb(h, "a", -1)
    h.advance(1000)
    assert G not in h.shard.groups
    h.reload()
    assert G not in h.shard.groups


def test_empty_classic_group_with_offsets_becomes_a_consumer_group(tmp_path):
    h = harness(tmp_path)
    commit(h, "", -1)  # an admin client sets the group's offsets before any consumer runs
    assert h.shard.groups[G].type == "classic"
    records = records_of(h, "a")
    assert records[0] == R.group_metadata_tombstone(G)
    assert group(h).type == "consumer" and member(h, "a").member_epoch == 1
    fetch = OffsetFetchRequest(groups=(OffsetFetchRequestGroup(G, member_id="a", member_epoch=1),))
    assert h.read(lambda s: s.offset_fetch(fetch)).groups[0].topics[0].partitions[0].committed_offset == 42
    assert_reload_same(h)
    assert h.shard.groups[G].type == "consumer"


def test_classic_group_with_members_that_cannot_be_upgraded_keeps_its_id(tmp_path):
    """A live classic group is upgraded when a member joins with ConsumerGroupHeartbeat
    (test_migration.py), unless its members' subscriptions are not consumer protocol bytes,
    as here."""
    h = harness(tmp_path)
    join = JoinGroupRequest(G, 10_000, "", protocol_type="consumer", rebalance_timeout_ms=10_000,
                            protocols=(JoinGroupRequestProtocol("range", b""),))
    h.write(lambda s, now: s.join_group(join, now, "c-1"))
    h.write(lambda s, now: s.join_group(dataclasses.replace(join, member_id="c-1"), now, "c-1"))
    assert not h.shard.groups[G].is_empty()
    with pytest.raises(KafkaError) as e:
        hb(h, "a")
    assert e.value.error is Errors.GROUP_ID_NOT_FOUND
    assert h.shard.groups[G].type == "classic"


def test_failed_write_reverts_to_the_durable_state(tmp_path):
    h = harness(tmp_path)
    hb(h, "a")
    before = snapshot(h.shard)
    h.io.fail_after_bytes = 0
    with pytest.raises(KafkaError) as e:
        hb(h, "b")
    assert e.value.error is Errors.NOT_COORDINATOR and e.value.retriable
    h.io.fail_after_bytes = None
    # the shard was rebuilt from its log: it needs the topic metadata again
    with pytest.raises(KafkaError) as e:
        hb(h, "b")
    assert e.value.error is Errors.COORDINATOR_LOAD_IN_PROGRESS
    h.call(lambda s, now: s.update_topics({"t": 4}, now))
    assert snapshot(h.shard) == before
    assert hb(h, "b").member_epoch == 2


def test_deleted_topic_is_revoked(tmp_path):
    h = harness(tmp_path, {"t": 2, "u": 2})
    hb(h, "a", subscribed_topic_names=("t", "u"))
    h.call(lambda s, now: s.update_topics({"u": 2}, now))
    assert group(h).group_epoch == 2
    response = hb(h, "a", 1)
    assert (response.member_epoch, response.assignment) == (1, assignment(u=(0, 1)))
    assert member(h, "a").partitions_pending_revocation == {"t": frozenset({0, 1})}
    assert hb(h, "a", 1, owns={"u": {0, 1}}).member_epoch == 2
    assert group(h).partition_owner == {("u", 0): "a", ("u", 1): "a"}


def test_describe_a_classic_group_id(tmp_path):
    h = harness(tmp_path)
    commit(h, "", -1, group_id="simple")
    (described,) = h.read(lambda s: s.consumer_group_describe(["simple"]))
    assert described.error_code == Errors.GROUP_ID_NOT_FOUND.code
    assert described.error_message == "Group simple is not a consumer group."


def test_timers_come_back_after_a_restart(tmp_path):
    h = harness(tmp_path)
    hb(h, "a")
    hb(h, "b")
    hb(h, "a", 1)  # a must revoke 2-3 within its rebalance timeout
    h.reload()
    h.call(lambda s, now: s.update_topics({"t": 4}, now))
    assert member(h, "a").state is MemberState.UNREVOKED_PARTITIONS
    h.advance(REBALANCE_MS)
    assert list(group(h).members) == ["b"]
    h.advance(SESSION_MS)
    assert group(h).members == {}


def test_unsubscribed_topic_is_revoked_while_the_assignor_waits(tmp_path):
    h = harness(tmp_path, {"t": 2, "u": 2}, **{"group.consumer.assignment.interval.ms": 1000})
    hb(h, "a", subscribed_topic_names=("t", "u"))
    response = hb(h, "a", 1, subscribed_topic_names=("u",), owns={"t": {0, 1}, "u": {0, 1}})
    assert group(h).assignment_epoch == 1 and group(h).group_epoch == 2
    assert (response.member_epoch, response.assignment) == (1, assignment(u=(0, 1)))
    assert member(h, "a").state is MemberState.UNREVOKED_PARTITIONS
    hb(h, "a", 1, owns={"u": {0, 1}})
    assert member(h, "a").state is MemberState.STABLE and group(h).owner_of("t", 0) is None
    h.advance(1000)
    assert group(h).assignment_epoch == 2
    assert hb(h, "a", 1).member_epoch == 2


@pytest.mark.parametrize("topics", [{"": 1}, {"t": 0}, {"t": -1}, {"t": "4"}])
def test_bad_topic_metadata_is_refused(tmp_path, topics):
    h = harness(tmp_path)
    hb(h, "a")
    before = snapshot(h.shard)
    with pytest.raises(KafkaError) as e:
        h.call(lambda s, now: s.update_topics(topics, now))
    assert e.value.error is Errors.INVALID_REQUEST
    assert snapshot(h.shard) == before and h.shard.consumer.topics == {"t": 4}
