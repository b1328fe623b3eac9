"""The group coordinator actor through Ray: Kafka's group APIs, their error codes, and
commits that survive the actor being killed."""
import ray

from runtime.errors import Errors
from runtime.messages.group import (
    DeleteGroupsRequest, DescribeGroupsRequest, HeartbeatRequest, JoinGroupRequest, JoinGroupRequestProtocol,
    LeaveGroupRequest, ListGroupsRequest, MemberIdentity, OffsetCommitRequest, OffsetCommitRequestPartition,
    OffsetCommitRequestTopic, OffsetDeleteRequest, OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
    OffsetFetchRequest, OffsetFetchRequestGroup, OffsetFetchRequestTopics, SyncGroupRequest,
    SyncGroupRequestAssignment,
)
from tests.conftest import wait_until

CLUSTER_CONFIG = {"group.min.session.timeout.ms": 200, "group.initial.rebalance.delay.ms": 0}

E = Errors


def get(ref, timeout=30):
    return ray.get(ref, timeout=timeout)


def reloaded_since(coordinator, old_pid: int) -> bool:
    """Whether a new process of the actor is loaded (ray.kill does not wait, so a call
    right after it may still reach the old process)."""
    try:
        status = get(coordinator.ready.remote())
    except ray.exceptions.RayError:  # restarting
        return False
    return status["pid"] != old_pid and status["state"] == "active"


def kill_and_reload(coordinator) -> None:
    old_pid = get(coordinator.status.remote())["pid"]
    ray.kill(coordinator, no_restart=False)
    wait_until(lambda: reloaded_since(coordinator, old_pid), message="the coordinator reloads")


def join(coordinator, group, member_id="", session_ms=10000, rebalance_ms=10000, instance_id=None,
         client_id="c"):
    request = JoinGroupRequest(group, session_ms, member_id, "consumer", (JoinGroupRequestProtocol("range", b"m"),),
                               rebalance_ms, instance_id)
    return coordinator.join_group.remote(request, client_id, "/127.0.0.1")


def join_new(coordinator, group, **kw):
    """A dynamic member's two-step join: MEMBER_ID_REQUIRED, then the join with that id."""
    first = get(join(coordinator, group, **kw))
    assert first.error_code == E.MEMBER_ID_REQUIRED.code and first.member_id.startswith("c-")
    return first.member_id


def commit(coordinator, group, offsets, generation=-1, member_id=""):
    topics = {}
    for (topic, partition), offset in offsets.items():
        topics.setdefault(topic, []).append(OffsetCommitRequestPartition(partition, offset))
    return coordinator.offset_commit.remote(OffsetCommitRequest(
        group, tuple(OffsetCommitRequestTopic(t, tuple(ps)) for t, ps in topics.items()), generation, member_id))


def committed(coordinator, group, require_stable=False):
    response = get(coordinator.offset_fetch.remote(
        OffsetFetchRequest((OffsetFetchRequestGroup(group),), require_stable)))
    (g,) = response.groups
    assert g.error_code == 0, g
    return {(t.name, p.partition_index): p.committed_offset for t in g.topics for p in t.partitions}


def test_join_sync_heartbeat_leave_and_errors(cluster):
    c = cluster.group_coordinator("g1")
    assert get(c.join_group.remote(JoinGroupRequest("", 10000))).error_code == E.INVALID_GROUP_ID.code
    assert get(c.join_group.remote(JoinGroupRequest("g1", 50))).error_code == E.INVALID_SESSION_TIMEOUT.code

    a = join_new(c, "g1")
    ra = get(join(c, "g1", a))
    assert (ra.error_code, ra.generation_id, ra.leader, ra.member_id) == (0, 1, a, a)
    assert [m.member_id for m in ra.members] == [a]
    assert get(c.sync_group.remote(SyncGroupRequest("g1", 1, a, assignments=(
        SyncGroupRequestAssignment(a, b"A1"),)))).assignment == b"A1"
    assert get(c.heartbeat.remote(HeartbeatRequest("g1", 1, a))).error_code == 0
    assert get(c.heartbeat.remote(HeartbeatRequest("g1", 7, a))).error_code == E.ILLEGAL_GENERATION.code
    assert get(c.heartbeat.remote(HeartbeatRequest("g1", 1, "nobody"))).error_code == E.UNKNOWN_MEMBER_ID.code
    assert get(c.sync_group.remote(SyncGroupRequest("g1", 1, "nobody"))).error_code == E.UNKNOWN_MEMBER_ID.code

    # A second member: the first learns of the rebalance from its heartbeat and rejoins.
    b = join_new(c, "g1")
    pending_b = join(c, "g1", b)
    # Ray may start an async actor's calls out of order: the heartbeat goes once b's join is in.
    wait_until(lambda: get(c.describe_groups.remote(DescribeGroupsRequest(("g1",)))).groups[0].group_state
               == "PreparingRebalance", message="b's join in")
    assert get(c.heartbeat.remote(HeartbeatRequest("g1", 1, a))).error_code == E.REBALANCE_IN_PROGRESS.code
    ra, rb = get(join(c, "g1", a)), get(pending_b)
    assert (ra.generation_id, rb.generation_id, ra.leader, rb.leader) == (2, 2, a, a)
    assert sorted(m.member_id for m in ra.members) == sorted([a, b]) and rb.members == ()
    follower = c.sync_group.remote(SyncGroupRequest("g1", 2, b))
    assert not ray.wait([follower], timeout=0.2)[0]  # the follower waits for the leader
    get(c.sync_group.remote(SyncGroupRequest("g1", 2, a, assignments=(
        SyncGroupRequestAssignment(a, b"A2"), SyncGroupRequestAssignment(b, b"B2")))))
    assert get(follower).assignment == b"B2"

    (described,) = get(c.describe_groups.remote(DescribeGroupsRequest(("g1",)))).groups
    assert (described.group_state, described.protocol_data) == ("Stable", "range")
    assert {m.member_id: m.member_assignment for m in described.members} == {a: b"A2", b: b"B2"}
    assert [(g.group_id, g.group_state) for g in get(c.list_groups.remote(ListGroupsRequest(("Stable",)))).groups
            if g.group_id == "g1"] == [("g1", "Stable")]
    assert get(c.delete_groups.remote(DeleteGroupsRequest(("g1",)))).results[0].error_code == E.NON_EMPTY_GROUP.code

    left = get(c.leave_group.remote(LeaveGroupRequest("g1", (MemberIdentity(a), MemberIdentity(b),
                                                             MemberIdentity("ghost")))))
    assert [m.error_code for m in left.members] == [0, 0, E.UNKNOWN_MEMBER_ID.code]
    (described,) = get(c.describe_groups.remote(DescribeGroupsRequest(("g1",)))).groups
    assert described.group_state == "Empty"
    assert get(c.delete_groups.remote(DeleteGroupsRequest(("g1",)))).results[0].error_code == 0
    (described,) = get(c.describe_groups.remote(DescribeGroupsRequest(("g1",)))).groups
    assert described.group_state == "Dead"


def test_offsets_commit_fetch_delete_and_errors(cluster):
    c = cluster.group_coordinator("g2")
    assert all(p.error_code == 0 for t in get(commit(c, "g2", {("t", 0): 5, ("t", 1): 7})).topics
               for p in t.partitions)
    assert committed(c, "g2") == {("t", 0): 5, ("t", 1): 7}
    assert committed(c, "g2", require_stable=True) == {("t", 0): 5, ("t", 1): 7}
    some = get(c.offset_fetch.remote(OffsetFetchRequest((OffsetFetchRequestGroup(
        "g2", (OffsetFetchRequestTopics("t", (1, 9)),)),))))
    assert [(p.partition_index, p.committed_offset) for p in some.groups[0].topics[0].partitions] == [(1, 7), (9, -1)]

    a = join_new(c, "g2")
    assert get(join(c, "g2", a)).generation_id == 1
    get(c.sync_group.remote(SyncGroupRequest("g2", 1, a, assignments=(SyncGroupRequestAssignment(a, b""),))))
    bad = get(commit(c, "g2", {("t", 0): 6}, generation=9, member_id=a))
    assert bad.topics[0].partitions[0].error_code == E.ILLEGAL_GENERATION.code
    bad = get(commit(c, "g2", {("t", 0): 6}, generation=1, member_id="ghost"))
    assert bad.topics[0].partitions[0].error_code == E.UNKNOWN_MEMBER_ID.code
    assert get(commit(c, "g2", {("t", 0): 6}, generation=1, member_id=a)).topics[0].partitions[0].error_code == 0
    delete = OffsetDeleteRequest("g2", (OffsetDeleteRequestTopic("t", (OffsetDeleteRequestPartition(1),)),))
    # the member's metadata is not a subscription Kafka can read: it counts as subscribed to all
    deleted = get(c.offset_delete.remote(delete))
    assert deleted.topics[0].partitions[0].error_code == E.GROUP_SUBSCRIBED_TO_TOPIC.code
    get(c.leave_group.remote(LeaveGroupRequest("g2", (MemberIdentity(a),))))
    deleted = get(c.offset_delete.remote(delete))
    assert (deleted.error_code, deleted.topics[0].partitions[0].error_code) == (0, 0)
    assert committed(c, "g2") == {("t", 0): 6}
    assert get(c.offset_commit.remote(OffsetCommitRequest(""))).topics == ()


def test_no_acknowledged_commit_is_lost_when_the_coordinator_is_killed(cluster):
    c = cluster.group_coordinator("g3")
    acknowledged = {}
    for round_ in range(3):
        for p in range(3):  # answered before the kill
            assert get(commit(c, "g3", {("k", p): 100 * round_ + p})).topics[0].partitions[0].error_code == 0
            acknowledged[("k", p)] = 100 * round_ + p
        refs = {p: commit(c, "g3", {("k", p): 100 * round_ + p}) for p in range(3, 20)}
        old_pid = get(c.status.remote())["pid"]
        ray.kill(c, no_restart=False)  # commits in flight: answered or failed, never half
        for p, ref in refs.items():
            try:
                response = get(ref)
            except ray.exceptions.RayError:
                continue
            if response.topics[0].partitions[0].error_code == 0:
                acknowledged[("k", p)] = 100 * round_ + p
        wait_until(lambda: reloaded_since(c, old_pid), message="the coordinator reloads")
    assert acknowledged
    now = committed(c, "g3")
    assert all(now[tp] >= offset for tp, offset in acknowledged.items())


def test_a_killed_coordinator_reloads_a_stable_group(cluster):
    c = cluster.group_coordinator("g4")
    a = join_new(c, "g4")
    assert get(join(c, "g4", a)).generation_id == 1
    get(c.sync_group.remote(SyncGroupRequest("g4", 1, a, assignments=(SyncGroupRequestAssignment(a, b"X"),))))
    kill_and_reload(c)
    assert get(c.heartbeat.remote(HeartbeatRequest("g4", 1, a))).error_code == 0
    (described,) = get(c.describe_groups.remote(DescribeGroupsRequest(("g4",)))).groups
    assert (described.group_state, described.members[0].member_assignment) == ("Stable", b"X")
