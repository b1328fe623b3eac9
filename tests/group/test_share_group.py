"""Share groups (KIP-932) through the group coordinator shard: joins, epochs, assignment of
initialised partitions only, leaves, session expiry, group size, topic metadata, group type
conflicts, describe, list, delete and reload."""
from __future__ import annotations

import pytest

from runtime.codec import Record
from runtime.errors import Errors, KafkaError
from runtime.group import records as R
from runtime.group.shard import GroupCoordinatorShard
from runtime.group.share import PendingShareInitialization, ShareGroupState
from runtime.messages.consumer import ConsumerGroupHeartbeatRequest
from runtime.messages.group import (
    DescribedGroup, DescribedGroupMember, HeartbeatRequest, JoinGroupRequest, JoinGroupRequestProtocol, ListedGroup,
    OffsetCommitRequest, OffsetCommitRequestPartition, OffsetCommitRequestTopic, OffsetFetchRequest,
    OffsetFetchRequestGroup,
)
from runtime.messages.share_group import (
    ShareGroupDescribeResponseAssignment, ShareGroupDescribeResponseDescribedGroup, ShareGroupDescribeResponseMember,
    ShareGroupDescribeResponseTopicPartitions, ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse,
    ShareGroupHeartbeatResponseAssignment, ShareGroupHeartbeatResponseTopicPartitions,
)
from runtime.testing import ShardHarness

G = "g"
SESSION_MS = 10_000
RETRY_MS = 30_000
CONFIG = {"group.share.session.timeout.ms": SESSION_MS, "group.share.initialize.retry.interval.ms": RETRY_MS}
TOPICS = {"t": 2, "u": 1}
IDS = {"t": "T", "u": "U"}


def harness(tmp_path, topics=TOPICS, ids=IDS, **config):
    h = ShardHarness(str(tmp_path), GroupCoordinatorShard, config={**CONFIG, **config})
    h.call(lambda s, now: s.update_topics(topics, now, ids))
    return h


def hb(h, member_id="", epoch=0, *, group=G, new_member_id="m", topics=None, rack_id=None):
    """One heartbeat; a join sends its subscription (("t",) unless told)."""
    if epoch == 0 and topics is None:
        topics = ("t",)
    request = ShareGroupHeartbeatRequest(group, member_id, epoch, rack_id, topics)
    return h.call(lambda s, now: s.share_group_heartbeat(request, now, new_member_id, "client", "/10.0.0.1"))


def written(h, operation):
    """Run a write and return (its response, the records it wrote)."""
    start = h.end_offset
    response = h.call(operation)
    return response, [r for _, r in h.records(start)]


def sent(h, request, new_member_id="x"):
    """A heartbeat and the records it wrote."""
    return written(h, lambda s, now: s.share_group_heartbeat(request, now, new_member_id, "client", "/10.0.0.1"))


def initialize(h, group=G):
    """Play the owner's part: initialise everything pending, successfully."""
    for p in h.shard.pending_share_initializations():
        h.call(lambda s, now, p=p: s.share_group_initialized(p.group_id, p.topic_id, p.partitions, now))


def assignment(**topics):
    return ShareGroupHeartbeatResponseAssignment(tuple(
        ShareGroupHeartbeatResponseTopicPartitions(t, tuple(ps)) for t, ps in sorted(topics.items())))


def group(h):
    return h.shard.groups[G]


def snapshot(shard):
    """Everything a share group holds as hard state, and the group configs."""
    out = {}
    for gid, g in shard.groups.items():
        if g.type == "share":
            out[gid] = (g.group_epoch, g.assignment_epoch, g.metadata_hash, dict(g.members), dict(g.target_assignment),
                        dict(g.initializing), dict(g.initialized), g.has_state_metadata)
    return out, dict(shard.configs.configs)


def raises(error, fn):
    with pytest.raises(KafkaError) as e:
        fn()
    assert e.value.error is error, e.value
    return e.value


def ready_group(h, members=("a",)):
    """A group whose members hold their share of initialised partitions of "t"."""
    for m in members:
        hb(h, new_member_id=m)
    initialize(h)
    return {m: hb(h, m, group(h).members[m].member_epoch) for m in members}


# ---------------------------------------------------------------------- joining

def test_join_writes_the_member_the_epoch_an_empty_target_and_the_initializing_state(tmp_path):
    h = harness(tmp_path)
    response, records = sent(h, ShareGroupHeartbeatRequest(G, "", 0, None, ("t",)), "m1")
    assert response == ShareGroupHeartbeatResponse(member_id="m1", member_epoch=1, heartbeat_interval_ms=5000,
                                                   assignment=assignment())
    h_ = group(h).metadata_hash
    assert records == [
        Record(R.ShareGroupMemberMetadataKey(G, "m1"),
                 R.ShareGroupMemberMetadataValue(None, "client", "/10.0.0.1", ("t",))),
        R.share_group_epoch_record(G, 1, h_),
        R.share_group_target_assignment_record(G, "m1", {}),
        R.share_group_target_assignment_epoch_record(G, 1),
        Record(R.ShareGroupCurrentMemberAssignmentKey(G, "m1"), R.ShareGroupCurrentMemberAssignmentValue(1, 0, 0, ())),
        Record(R.ShareGroupStatePartitionMetadataKey(G), R.ShareGroupStatePartitionMetadataValue(
            (R.ShareGroupStateTopicPartitions("T", "t", (0, 1), 0),), ())),
    ]
    assert h_ != 0
    assert group(h).state is ShareGroupState.STABLE


def test_partitions_are_assigned_only_once_initialised(tmp_path):
    h = harness(tmp_path)
    hb(h, new_member_id="a")
    pending = h.shard.pending_share_initializations()
    assert pending == [PendingShareInitialization(G, "T", "t", (0, 1), 1)]
    assert h.shard.pending_share_initializations() == []  # each is listed once
    # nothing is assignable yet: a steady heartbeat changes nothing
    response, records = sent(h, ShareGroupHeartbeatRequest(G, "a", 1))
    assert response == ShareGroupHeartbeatResponse(member_id="a", member_epoch=1, heartbeat_interval_ms=5000)
    assert records == []

    _, records = written(h, lambda s, now: s.share_group_initialized(G, "T", (0, 1), now))
    assert records == [
        Record(R.ShareGroupStatePartitionMetadataKey(G), R.ShareGroupStatePartitionMetadataValue(
            (), (R.ShareGroupStateTopicPartitions("T", "t", (0, 1)),))),
        R.share_group_epoch_record(G, 2, group(h).metadata_hash),
    ]
    response, records = sent(h, ShareGroupHeartbeatRequest(G, "a", 1))
    assert response == ShareGroupHeartbeatResponse(member_id="a", member_epoch=2, heartbeat_interval_ms=5000,
                                                   assignment=assignment(t=[0, 1]))
    assert records == [
        R.share_group_target_assignment_record(G, "a", {"t": {0, 1}}),
        R.share_group_target_assignment_epoch_record(G, 2),
        R.share_group_current_assignment_record(G, group(h).members["a"]),
    ]
    assert group(h).members["a"].previous_member_epoch == 1
    assert h.shard.pending_share_initializations() == []


def test_members_share_partitions_and_get_their_target_at_once(tmp_path):
    h = harness(tmp_path)
    ready_group(h, ("a", "b", "c", "d"))
    for m in "abcd":
        hb(h, m, group(h).members[m].member_epoch)
    held = {m: group(h).members[m].assigned_partitions for m in "abcd"}
    # 4 members on 2 partitions: each partition is shared by 2, each member holds 1
    assert all(sum(len(ps) for ps in a.values()) == 1 for a in held.values())
    for p in (0, 1):
        assert sum(1 for a in held.values() if p in a.get("t", ())) == 2
    assert {m.member_epoch for m in group(h).members.values()} == {group(h).group_epoch}


def test_a_member_id_sent_on_join_is_kept(tmp_path):
    h = harness(tmp_path)
    assert hb(h, "mine", 0, new_member_id="unused").member_id == "mine"
    assert set(group(h).members) == {"mine"}


def test_a_rejoin_with_epoch_zero_gets_the_full_assignment_back(tmp_path):
    h = harness(tmp_path)
    ready_group(h)
    response, records = sent(h, ShareGroupHeartbeatRequest(G, "a", 0, None, ("t",)))
    assert response == ShareGroupHeartbeatResponse(member_id="a", member_epoch=2, heartbeat_interval_ms=5000,
                                                   assignment=assignment(t=[0, 1]))
    assert records == []


# ---------------------------------------------------------------------- heartbeats

def test_subscription_is_written_only_when_it_changes(tmp_path):
    h = harness(tmp_path)
    ready_group(h)
    response, records = sent(h, ShareGroupHeartbeatRequest(G, "a", 2))
    assert response == ShareGroupHeartbeatResponse(member_id="a", member_epoch=2, heartbeat_interval_ms=5000)
    assert records == []
    # the same subscription sent again: a full answer, no records
    response, records = sent(h, ShareGroupHeartbeatRequest(G, "a", 2, None, ("t",)))
    assert response.assignment == assignment(t=[0, 1])
    assert records == []
    # a new subscription: new epoch, u initialising, t still held
    response, records = sent(h, ShareGroupHeartbeatRequest(G, "a", 2, None, ("t", "u")))
    assert response.member_epoch == 3 and response.assignment == assignment(t=[0, 1])
    assert [type(r.key).__name__ for r in records] == [
        "ShareGroupMemberMetadataKey", "ShareGroupMetadataKey", "ShareGroupTargetAssignmentMetadataKey",
        "ShareGroupCurrentMemberAssignmentKey", "ShareGroupStatePartitionMetadataKey"]
    assert records[4].value.initializing_topics == (R.ShareGroupStateTopicPartitions("U", "u", (0,), 0),)
    initialize(h)
    assert hb(h, "a", 3).assignment == assignment(t=[0, 1], u=[0])


def test_rack_and_client_changes_are_written_without_a_new_epoch(tmp_path):
    h = harness(tmp_path)
    ready_group(h)
    _, records = sent(h, ShareGroupHeartbeatRequest(G, "a", 2, "rack1"))
    assert records == [Record(R.ShareGroupMemberMetadataKey(G, "a"),
                                R.ShareGroupMemberMetadataValue("rack1", "client", "/10.0.0.1", ("t",)))]
    assert group(h).group_epoch == 2


def test_a_member_may_heartbeat_with_its_previous_epoch(tmp_path):
    h = harness(tmp_path)
    ready_group(h)
    assert group(h).members["a"].previous_member_epoch == 1
    assert hb(h, "a", 1).member_epoch == 2


@pytest.mark.parametrize("request_, message", [
    (ShareGroupHeartbeatRequest("", "", 0, None, ("t",)), "GroupId can't be empty."),
    (ShareGroupHeartbeatRequest(G, "", 0, " ", ("t",)), "RackId can't be empty."),
    (ShareGroupHeartbeatRequest(G, "  ", 0, None, ("t",)), "MemberId can't be empty."),
    (ShareGroupHeartbeatRequest(G, "", 0), "SubscribedTopicNames must be set in first request."),
    (ShareGroupHeartbeatRequest(G, "", 0, None, ()), "SubscribedTopicNames must be set in first request."),
    (ShareGroupHeartbeatRequest(G, "a", -2), "MemberEpoch is invalid."),
    (ShareGroupHeartbeatRequest(G, "", 1), "MemberId can't be empty."),
    (ShareGroupHeartbeatRequest(G, "", -1), "MemberId can't be empty."),
])
def test_invalid_requests_change_nothing(tmp_path, request_, message):
    h = harness(tmp_path)
    ready_group(h)
    before, end = snapshot(h.shard), h.end_offset
    error = raises(Errors.INVALID_REQUEST, lambda: h.call(
        lambda s, now: s.share_group_heartbeat(request_, now, "x")))
    assert error.message == message
    assert snapshot(h.shard) == before and h.end_offset == end


@pytest.mark.parametrize("member_id, epoch, error", [
    ("a", 4, Errors.FENCED_MEMBER_EPOCH),  # ahead of the coordinator
    ("a", 5, Errors.FENCED_MEMBER_EPOCH),
    ("zz", 2, Errors.UNKNOWN_MEMBER_ID),
    ("zz", -1, Errors.UNKNOWN_MEMBER_ID),
])
def test_stale_and_unknown_members_are_refused(tmp_path, member_id, epoch, error):
    h = harness(tmp_path)
    ready_group(h)
    hb(h, new_member_id="b")  # a at 2 must move to 3 with its next heartbeat
    hb(h, "a", 2)
    assert group(h).members["a"].member_epoch == 3 and group(h).members["a"].previous_member_epoch == 2
    before, end = snapshot(h.shard), h.end_offset
    raises(error, lambda: hb(h, member_id, epoch))
    raises(Errors.FENCED_MEMBER_EPOCH, lambda: hb(h, "a", 1))  # neither current nor previous
    assert snapshot(h.shard) == before and h.end_offset == end


def test_unknown_group(tmp_path):
    h = harness(tmp_path)
    error = raises(Errors.GROUP_ID_NOT_FOUND, lambda: hb(h, "a", 1))
    assert error.message == f"Share group {G} not found."
    raises(Errors.GROUP_ID_NOT_FOUND, lambda: hb(h, "a", -1))
    assert h.shard.groups == {}


def test_heartbeats_wait_for_topic_metadata(tmp_path):
    h = ShardHarness(str(tmp_path), GroupCoordinatorShard, config=CONFIG)
    raises(Errors.COORDINATOR_LOAD_IN_PROGRESS, lambda: hb(h))


def test_group_max_size(tmp_path):
    h = harness(tmp_path, **{"group.share.max.size": 2})
    hb(h, new_member_id="a")
    hb(h, new_member_id="b")
    before = snapshot(h.shard)
    error = raises(Errors.GROUP_MAX_SIZE_REACHED, lambda: hb(h, new_member_id="c"))
    assert error.message == "The share group has reached its maximum capacity of 2 members."
    assert snapshot(h.shard) == before
    assert hb(h, "a", group(h).members["a"].member_epoch).member_id == "a"  # members still heartbeat
    assert hb(h, "b", 0).member_id == "b"  # and rejoin


# ---------------------------------------------------------------------- leaving and expiry

def test_leave_writes_tombstones_and_bumps_the_epoch(tmp_path):
    h = harness(tmp_path)
    ready_group(h, ("a", "b"))
    epoch = group(h).group_epoch
    response, records = sent(h, ShareGroupHeartbeatRequest(G, "a", -1))
    assert response == ShareGroupHeartbeatResponse(member_id="a", member_epoch=-1)
    assert records == [R.share_group_current_assignment_tombstone(G, "a"),
                       R.share_group_target_assignment_tombstone(G, "a"),
                       R.share_group_member_subscription_tombstone(G, "a"),
                       R.share_group_epoch_record(G, epoch + 1, group(h).metadata_hash)]
    assert set(group(h).members) == {"b"}
    # b takes everything at its next heartbeat
    assert hb(h, "b", group(h).members["b"].member_epoch).assignment == assignment(t=[0, 1])
    hb(h, "b", -1)
    assert group(h).state is ShareGroupState.EMPTY
    assert group(h).metadata_hash == 0


def test_session_expiry_fences_the_member(tmp_path):
    h = harness(tmp_path)
    ready_group(h, ("a", "b"))
    h.advance(SESSION_MS - 1)
    hb(h, "b", group(h).members["b"].member_epoch)
    start = h.end_offset
    h.advance(1)
    assert set(group(h).members) == {"b"}
    assert [r for _, r in h.records(start)][:3] == [R.share_group_current_assignment_tombstone(G, "a"),
                                                    R.share_group_target_assignment_tombstone(G, "a"),
                                                    R.share_group_member_subscription_tombstone(G, "a")]
    h.advance(SESSION_MS)
    assert group(h).members == {}


def test_leave_cancels_the_session_timer(tmp_path):
    h = harness(tmp_path)
    ready_group(h)
    hb(h, "a", -1)
    end = h.end_offset
    h.advance(SESSION_MS * 2)
    assert h.end_offset == end


# ---------------------------------------------------------------------- topic metadata

def test_more_partitions_bump_the_epoch_and_are_initialised_at_the_next_heartbeat(tmp_path):
    h = harness(tmp_path)
    ready_group(h)
    epoch = group(h).group_epoch
    _, records = written(h, lambda s, now: s.update_topics({"t": 3, "u": 1}, now, IDS))
    assert records == [R.share_group_epoch_record(G, epoch + 1, group(h).metadata_hash)]
    response = hb(h, "a", epoch)
    assert response.member_epoch == epoch + 1 and response.assignment is None  # 2 is not initialised yet
    assert h.shard.pending_share_initializations() == [PendingShareInitialization(G, "T", "t", (2,), epoch + 1)]
    h.call(lambda s, now: s.share_group_initialized(G, "T", (2,), now))
    assert hb(h, "a", epoch + 1).assignment == assignment(t=[0, 1, 2])


def test_unchanged_metadata_writes_nothing(tmp_path):
    h = harness(tmp_path)
    ready_group(h)
    _, records = written(h, lambda s, now: s.update_topics({**TOPICS, "other": 5}, now, {**IDS, "other": "O"}))
    assert records == []


def test_a_recreated_topic_forgets_the_old_state(tmp_path):
    h = harness(tmp_path)
    ready_group(h)
    epoch = group(h).group_epoch
    _, records = written(h, lambda s, now: s.update_topics(TOPICS, now, {"t": "T2", "u": "U"}))
    assert records == [
        Record(R.ShareGroupStatePartitionMetadataKey(G), R.ShareGroupStatePartitionMetadataValue((), ())),
        R.share_group_epoch_record(G, epoch + 1, group(h).metadata_hash),
    ]
    response = hb(h, "a", epoch)
    assert response.assignment == assignment()  # the new topic's state is not initialised yet
    assert h.shard.pending_share_initializations() == [PendingShareInitialization(G, "T2", "t", (0, 1), epoch + 1)]


def test_topics_without_ids_are_known_by_name(tmp_path):
    h = harness(tmp_path, ids=None)
    hb(h, new_member_id="a")
    assert h.shard.pending_share_initializations() == [PendingShareInitialization(G, "t", "t", (0, 1), 1)]


# ---------------------------------------------------------------------- other group types

def test_a_share_group_id_is_not_a_consumer_or_classic_group(tmp_path):
    h = harness(tmp_path)
    ready_group(h)
    before, end = snapshot(h.shard), h.end_offset
    consumer = ConsumerGroupHeartbeatRequest(G, "", 0, rebalance_timeout_ms=1000, subscribed_topic_names=("t",),
                                             topic_partitions=())
    raises(Errors.GROUP_ID_NOT_FOUND, lambda: h.call(lambda s, now: s.consumer_group_heartbeat(consumer, now, "c")))
    join = JoinGroupRequest(G, 10_000, "", "consumer", (JoinGroupRequestProtocol("range", b""),), 10_000)
    raises(Errors.INCONSISTENT_GROUP_PROTOCOL, lambda: h.call(lambda s, now: s.join_group(join, now, "c")))
    commit = OffsetCommitRequest(G, (OffsetCommitRequestTopic("t", (OffsetCommitRequestPartition(0, 5),)),))
    raises(Errors.GROUP_ID_NOT_FOUND, lambda: h.call(lambda s, now: s.offset_commit(commit, now)))
    heartbeat = HeartbeatRequest(G, 1, "a")
    raises(Errors.UNKNOWN_MEMBER_ID, lambda: h.call(lambda s, now: s.heartbeat(heartbeat, now)))
    fetched = h.read(lambda s: s.offset_fetch(OffsetFetchRequest((OffsetFetchRequestGroup(G),))))
    assert (fetched.groups[0].error_code, fetched.groups[0].topics) == (0, ())  # as for a group with no offsets
    assert snapshot(h.shard) == before and h.end_offset == end


def test_a_consumer_or_classic_group_id_is_not_a_share_group(tmp_path):
    h = harness(tmp_path)
    consumer = ConsumerGroupHeartbeatRequest("cg", "", 0, rebalance_timeout_ms=1000, subscribed_topic_names=("t",),
                                             topic_partitions=())
    h.call(lambda s, now: s.consumer_group_heartbeat(consumer, now, "c"))
    join = JoinGroupRequest("classic", 10_000, "", "consumer", (JoinGroupRequestProtocol("range", b""),), 10_000)
    h.write(lambda s, now: s.join_group(join, now, "c"))
    for gid in ("cg", "classic"):
        error = raises(Errors.GROUP_ID_NOT_FOUND, lambda: hb(h, group=gid))
        assert error.message == f"Group {gid} is not a share group."
    assert h.shard.share_group_describe(["cg"]) == [ShareGroupDescribeResponseDescribedGroup(
        "cg", Errors.GROUP_ID_NOT_FOUND.code, "Group cg is not a share group.", group_state="Dead")]
    assert h.shard.groups["cg"].type == "consumer" and h.shard.groups["classic"].type == "classic"


# ---------------------------------------------------------------------- describe, list, delete

def test_describe_and_list(tmp_path):
    h = harness(tmp_path)
    ready_group(h)
    hb(h, "a", 2, rack_id="r")
    assert h.shard.share_group_describe([G, "nope"]) == [
        ShareGroupDescribeResponseDescribedGroup(
            G, group_state="Stable", group_epoch=2, assignment_epoch=2, assignor_name="simple",
            members=(ShareGroupDescribeResponseMember(
                "a", "r", 2, "client", "/10.0.0.1", ("t",), ShareGroupDescribeResponseAssignment(
                    (ShareGroupDescribeResponseTopicPartitions("t", (0, 1)),))),)),
        ShareGroupDescribeResponseDescribedGroup("nope", Errors.GROUP_ID_NOT_FOUND.code, "Group nope not found.",
                                                 group_state="Dead"),
    ]
    assert h.shard.list_groups() == [ListedGroup(G, "share", "Stable", "share")]
    assert h.shard.list_groups(types_filter=["share"]) == [ListedGroup(G, "share", "Stable", "share")]
    assert h.shard.list_groups(types_filter=["consumer"]) == []
    assert h.shard.describe_groups([G]) == [DescribedGroup(
        G, group_state="Stable", protocol_type="share",
        members=(DescribedGroupMember("a", None, "client", "/10.0.0.1"),))]


def test_delete_an_empty_group(tmp_path):
    h = harness(tmp_path)
    ready_group(h)
    assert h.call(lambda s, now: s.delete_groups([G], now))[0].error_code == Errors.NON_EMPTY_GROUP.code
    hb(h, "a", -1)
    results, records = written(h, lambda s, now: s.delete_groups([G], now))
    assert results[0].error_code == 0
    assert records == [R.share_group_state_partition_metadata_tombstone(G),
                       R.share_group_target_assignment_epoch_tombstone(G),
                       R.share_group_epoch_tombstone(G)]
    assert G not in h.shard.groups
    h.reload()
    assert G not in h.shard.groups


def test_empty_share_groups_do_not_expire_with_offsets(tmp_path):
    h = harness(tmp_path, **{"offsets.retention.check.interval.ms": 1000})
    ready_group(h)
    hb(h, "a", -1)
    h.advance(5000)
    assert group(h).state is ShareGroupState.EMPTY


# ---------------------------------------------------------------------- reload

def test_reload_gives_the_same_state_and_timers(tmp_path):
    h = harness(tmp_path)
    ready_group(h, ("a", "b", "c"))
    hb(h, "a", group(h).members["a"].member_epoch, topics=("t", "u"))
    before = snapshot(h.shard)
    h.reload()
    assert snapshot(h.shard) == before
    h.call(lambda s, now: s.update_topics(TOPICS, now, IDS))
    assert snapshot(h.shard) == before
    # sessions start again at the load; u was initialising: it is asked for again
    assert h.shard.pending_share_initializations() == [
        PendingShareInitialization(G, "U", "u", (0,), group(h).group_epoch)]
    h.advance(SESSION_MS)
    assert group(h).members == {}


def test_a_fenced_or_leaving_member_is_listed_once_for_release(tmp_path):
    from runtime.group.share import ReleasedShareMember
    from runtime.messages.share_group import ShareGroupHeartbeatRequest
    from runtime.testing import ShardHarness
    from runtime.group.shard import GroupCoordinatorShard
    h = ShardHarness(str(tmp_path), GroupCoordinatorShard,
                     config={"group.share.session.timeout.ms": 1000, "group.share.min.session.timeout.ms": 100,
                             "group.share.heartbeat.interval.ms": 100, "group.share.min.heartbeat.interval.ms": 50})
    h.call(lambda s, now: s.update_topics({"t": 2}, now, {"t": "tid"}))
    for member in ("m1", "m2"):
        h.call(lambda s, now, m=member: s.share_group_heartbeat(
            ShareGroupHeartbeatRequest("g", m, 0, subscribed_topic_names=("t",)), now, m))
    for pending in h.shard.pending_share_initializations():
        h.call(lambda s, now, p=pending: s.share_group_initialized(p.group_id, p.topic_id, p.partitions, now))
    assigned = {}
    for member in ("m1", "m2"):
        r = h.call(lambda s, now, m=member: s.share_group_heartbeat(
            ShareGroupHeartbeatRequest("g", m, h.shard.groups["g"].members[m].member_epoch), now, m))
        assigned[member] = tuple(("t", p) for t in r.assignment.topic_partitions for p in t.partitions)
    assert sorted(assigned["m1"] + assigned["m2"]) == [("t", 0), ("t", 1)]
    assert h.shard.released_share_members() == []
    epochs = {m: h.shard.groups["g"].members[m].member_epoch for m in ("m1", "m2")}
    h.call(lambda s, now: s.share_group_heartbeat(ShareGroupHeartbeatRequest("g", "m1", -1), now, "m1"))
    # The member epoch it went at: what the same member id acquires after joining again stays.
    assert h.shard.released_share_members() == [ReleasedShareMember("g", "m1", assigned["m1"], epochs["m1"])]
    assert h.shard.released_share_members() == []
    h.advance(1500)  # m2 stops heartbeating: fenced by its session timeout
    released = h.shard.released_share_members()
    assert [(r.group_id, r.member_id) for r in released] == [("g", "m2")]
