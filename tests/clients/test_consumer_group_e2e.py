"""KIP-848 consumer groups end to end on real actors: consumers with group_protocol="consumer"
share a topic, leave, stop polling and come back; the errors of issue 5 through the
coordinator actor's RPCs; consumers and the coordinator killed while records flow; and a
group rolled from the classic protocol to the consumer protocol and back while records flow.
Every consumer's own log of what it owned when (one clock, time.time() in each actor) shows
that no two owned a partition at once and that every partition ends up owned."""
from __future__ import annotations

import os
import signal
import time

import pytest
import ray

from actors import Errors, KafkaError, OffsetAndMetadata, TopicPartition
from runtime.messages.consumer import (ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest,
                                       ConsumerGroupHeartbeatRequestTopicPartitions)
from runtime.messages.group import (DescribeGroupsRequest, JoinGroupRequest, JoinGroupRequestProtocol,
                                    OffsetCommitRequest, OffsetCommitRequestPartition, OffsetCommitRequestTopic)
from tests.helpers import Recorder, owns_each_once, poll_consumers_until, produce_values
from tests.conftest import wait_until

CLUSTER_CONFIG = {"group.consumer.session.timeout.ms": 2000, "group.consumer.heartbeat.interval.ms": 150,
                  "group.consumer.max.size": 4, "group.initial.rebalance.delay.ms": 0,
                  "group.min.session.timeout.ms": 200}
FAST = dict(group_protocol="consumer", fetch_max_wait_ms=200, auto_offset_reset="earliest",
            enable_auto_commit=True, auto_commit_interval_ms=300, max_poll_interval_ms=20000)
TOPIC = "flow"
CLUSTER_TOPICS = {TOPIC: 6}
ALL = {TopicPartition(TOPIC, p) for p in range(6)}


def rpc(cluster, group_id, method, *args):
    return ray.get(getattr(cluster.group_coordinator(group_id), method).remote(*args), timeout=30)


def describe(cluster, group_id):
    (group,) = rpc(cluster, group_id, "consumer_group_describe", ConsumerGroupDescribeRequest((group_id,))).groups
    return group


def settled(cluster, group_id, consumers):
    """Every member reconciled to its target, and the consumers agree."""
    try:
        group = describe(cluster, group_id)
    except ray.exceptions.RayError:  # the coordinator is restarting
        return False
    return (group.group_state == "Stable" and len(group.members) == len(consumers)
            and all(m.assignment == m.target_assignment for m in group.members)
            and all(ray.get(c._actor.group_state.remote())["state"] == "STABLE" for c in consumers)
            and owns_each_once(consumers, ALL))


def told(listener) -> set:
    """What a member owns by the callbacks it was given."""
    owned = set()
    for kind, partitions in listener.events:
        owned = owned | partitions if kind == "assigned" else owned - partitions
    return owned


# ---------------------------------------------------------------------- sharing a topic

def test_consumers_join_share_a_topic_and_leave(cluster):
    produce_values(cluster, TOPIC, [f"a{i}" for i in range(60)], keyed=True)
    listener = Recorder()
    c1 = cluster.consumer("g-share", **FAST, group_remote_assignor="range")
    c1.subscribe([TOPIC], listener=listener)
    seen = []
    poll_consumers_until([c1], lambda: c1.assignment() == ALL and len(seen) >= 60, seen, message="c1 owns everything")
    assert listener.events == [("assigned", frozenset(ALL))]
    c2, c3 = cluster.consumer("g-share", **FAST), cluster.consumer("g-share", **FAST)
    c2.subscribe([TOPIC])
    c3.subscribe([TOPIC])
    group = [c1, c2, c3]
    poll_consumers_until(group, lambda: settled(cluster, "g-share", group), seen, message="three share")
    # The callbacks tell c1's story; those of a partition taken since its last poll run at its next.
    poll_consumers_until([c1], lambda: told(listener) == c1.assignment(), seen, message="c1's callbacks ran")
    assert [len(c.assignment()) for c in group] == [2, 2, 2]
    # c1 revoked first (its auto commit ran then): nothing was delivered twice
    assert sorted(seen) == sorted(f"a{i}" for i in range(60))
    assert any(kind == "revoked" for kind, _ in listener.events)
    described = describe(cluster, "g-share")
    assert described.assignor_name == "range" and described.group_epoch == described.assignment_epoch
    state = ray.get(c2._actor.group_state.remote())
    assert state["heartbeat_interval_ms"] == 150 and state["member_epoch"] == described.group_epoch

    for c in group:
        c.commit()  # carries the member epoch
    for tp in ALL:
        owner = next(c for c in group if tp in c.assignment())
        assert c1.committed(tp) == OffsetAndMetadata(owner.position(tp), "", -1)

    c3.close()  # leaves with epoch -1: gone at once, not after its session timeout
    assert len(describe(cluster, "g-share").members) == 2
    produce_values(cluster, TOPIC, [f"b{i}" for i in range(30)], keyed=True)
    group = [c1, c2]
    poll_consumers_until(group, lambda: settled(cluster, "g-share", group) and sum(v[0] == "b" for v in seen) >= 30,
                         seen, message="two share")
    assert sorted(v for v in seen if v[0] == "b") == sorted(f"b{i}" for i in range(30))
    for c in group:
        c.close()
    assert describe(cluster, "g-share").group_state == "Empty"


def test_a_consumer_that_stops_polling_leaves_and_rejoins(cluster):
    listener = Recorder()
    slow = cluster.consumer("g-poll", **dict(FAST, max_poll_interval_ms=1500))
    other = cluster.consumer("g-poll", **FAST)
    slow.subscribe([TOPIC], listener=listener)
    other.subscribe([TOPIC])
    seen = []
    poll_consumers_until([slow, other], lambda: settled(cluster, "g-poll", [slow, other]), seen, message="two share")
    owned = slow.assignment()
    wait_until(lambda: other.poll(timeout_ms=50) is not None and other.assignment() == ALL, timeout_s=20,
               interval_s=0, message="the other takes everything")
    assert ray.get(slow._actor.group_state.remote())["state"] == "STALE"
    poll_consumers_until([slow, other], lambda: settled(cluster, "g-poll", [slow, other]), seen, message="rejoined")
    assert ("lost", frozenset(owned)) in listener.events
    slow.close()
    other.close()


def test_a_member_that_does_not_revoke_in_time_is_fenced_loses_its_partitions_and_rejoins(cluster):
    listener = Recorder()
    stuck = cluster.consumer("g-fence", **dict(FAST, rebalance_timeout_ms=2000))
    stuck.subscribe([TOPIC], listener=listener)
    seen = []
    poll_consumers_until([stuck], lambda: stuck.assignment() == ALL, seen, message="it owns everything")
    other = cluster.consumer("g-fence", **FAST)
    other.subscribe([TOPIC])
    # its application does not poll, so on_partitions_revoked cannot run and it cannot
    # revoke: past the rebalance timeout the coordinator fences it
    wait_until(lambda: other.poll(timeout_ms=50) is not None and any(
        kind == "lost" for _, kind, _ in ray.get(stuck._actor.ownership_history.remote())),
        timeout_s=30, interval_s=0, message="fenced")
    poll_consumers_until([stuck, other], lambda: settled(cluster, "g-fence", [stuck, other]), seen, message="rejoined")
    stuck.poll(timeout_ms=100)  # the callbacks of what it took since its last poll run here
    kinds = [kind for kind, _ in listener.events]
    assert kinds[:3] == ["assigned", "revoked", "lost"]
    # what it was revoking is lost too: the fence took it back before the revocation was told
    assert listener.events[2] == ("lost", frozenset(ALL))
    assert "assigned" in kinds[3:] and stuck.assignment()  # rejoined with epoch 0 and got partitions again
    stuck.close()
    other.close()


def test_members_follow_topics_as_they_grow_and_go(cluster):
    cluster.create_topic("grow", 1)
    consumer = cluster.consumer("g-grow", **FAST)
    consumer.subscribe(["grow"])

    def owns(partitions):
        return lambda: consumer.poll(timeout_ms=50) is not None and consumer.assignment() == partitions
    wait_until(owns({TopicPartition("grow", 0)}), timeout_s=30, interval_s=0, message="it owns grow-0")
    cluster.create_partitions("grow", 2)  # the coordinator is told at once (notify_topics)
    wait_until(owns({TopicPartition("grow", 0), TopicPartition("grow", 1)}), timeout_s=30, interval_s=0,
               message="it owns the new partition")
    cluster.delete_topic("grow")
    wait_until(owns(set()), timeout_s=30, interval_s=0, message="the deleted topic is revoked")
    consumer.close()


def test_a_static_member_that_closes_keeps_its_place_for_its_successor(cluster):
    first = cluster.consumer("g-static", **FAST, group_instance_id="i1")
    first.subscribe([TOPIC])
    wait_until(lambda: first.poll(timeout_ms=50) is not None and first.assignment() == ALL, timeout_s=30,
               interval_s=0, message="it owns everything")
    first.close()  # epoch -2: the member and its partitions wait for it for a session timeout
    (member,) = describe(cluster, "g-static").members
    assert (member.instance_id, member.member_epoch) == ("i1", -2)
    again = cluster.consumer("g-static", **FAST, group_instance_id="i1")
    again.subscribe([TOPIC])
    wait_until(lambda: again.poll(timeout_ms=50) is not None and again.assignment() == ALL, timeout_s=30,
               interval_s=0, message="the same partitions again")
    (member,) = describe(cluster, "g-static").members
    assert member.instance_id == "i1" and member.member_epoch > 0
    again.close()


# ---------------------------------------------------------------------- errors through the actor

def heartbeat(cluster, group_id, member_id="", epoch=0, **fields):
    if epoch == 0:
        fields.setdefault("rebalance_timeout_ms", 5000)
        fields.setdefault("subscribed_topic_names", (TOPIC,))
        fields.setdefault("topic_partitions", ())
    return rpc(cluster, group_id, "consumer_group_heartbeat",
               ConsumerGroupHeartbeatRequest(group_id, member_id, epoch, **fields), "test", "localhost")


def test_every_heartbeat_error_through_the_actor(cluster):
    g = "g-errors"
    joined = heartbeat(cluster, g, "m1")
    assert joined.error_code == 0 and joined.member_id == "m1" and joined.member_epoch == 1
    assert joined.heartbeat_interval_ms == 150
    assert {tp.topic_name: tp.partitions for tp in joined.assignment.topic_partitions} == {TOPIC: tuple(range(6))}

    def error(response):
        return Errors.for_code(response.error_code)

    assert error(heartbeat(cluster, g, "m1", 7)) is Errors.FENCED_MEMBER_EPOCH
    assert error(heartbeat(cluster, g, "nobody", 1)) is Errors.UNKNOWN_MEMBER_ID
    assert error(heartbeat(cluster, g, "m2", server_assignor="nope")) is Errors.UNSUPPORTED_ASSIGNOR
    assert error(heartbeat(cluster, g, "m2", rebalance_timeout_ms=-1)) is Errors.INVALID_REQUEST
    assert error(heartbeat(cluster, g, "m2", topic_partitions=(
        ConsumerGroupHeartbeatRequestTopicPartitions(TOPIC, (0,)),))) is Errors.INVALID_REQUEST
    assert error(heartbeat(cluster, g, "m2", -5)) is Errors.INVALID_REQUEST
    assert heartbeat(cluster, g, "s1", instance_id="i1").error_code == 0
    unreleased = heartbeat(cluster, g, "s2", instance_id="i1")
    assert error(unreleased) is Errors.UNRELEASED_INSTANCE_ID and "s1" in unreleased.error_message
    for member in ("m3", "m4"):
        assert heartbeat(cluster, g, member).error_code == 0
    assert error(heartbeat(cluster, g, "m5")) is Errors.GROUP_MAX_SIZE_REACHED  # group.consumer.max.size 4

    # an offset commit carries the member epoch
    epoch = heartbeat(cluster, g, "m1", 1).member_epoch
    commit = OffsetCommitRequest(g, (OffsetCommitRequestTopic(TOPIC, (OffsetCommitRequestPartition(0, 5),)),),
                                 epoch - 1, "m1")
    response = rpc(cluster, g, "offset_commit", commit)
    assert response.topics[0].partitions[0].error_code == Errors.STALE_MEMBER_EPOCH.code

    # a classic join to a consumer group makes a member like the others: here one too many
    join = JoinGroupRequest(g, 10000, "", "consumer", (JoinGroupRequestProtocol("range", b""),), 10000)
    assert rpc(cluster, g, "join_group", join).error_code == Errors.GROUP_MAX_SIZE_REACHED.code
    # a classic group becomes a consumer group only when a member joins it (epoch 0)
    classic = cluster.consumer("g-classic", auto_offset_reset="earliest", enable_auto_commit=False,
                               session_timeout_ms=2000, heartbeat_interval_ms=150)
    classic.subscribe([TOPIC])
    wait_until(lambda: classic.poll(timeout_ms=50) is not None and classic.assignment() == ALL, timeout_s=30,
               interval_s=0, message="the classic consumer joins")
    assert error(heartbeat(cluster, "g-classic", "m1", 1)) is Errors.GROUP_ID_NOT_FOUND
    classic.close()


def test_errors_reach_the_user_of_the_consumer(cluster):
    consumer = cluster.consumer("g-bad-assignor", **FAST, group_remote_assignor="nope")
    consumer.subscribe([TOPIC])
    with pytest.raises(KafkaError) as e:
        wait_until(lambda: consumer.poll(timeout_ms=50) and False, timeout_s=20, interval_s=0)
    assert e.value.error is Errors.UNSUPPORTED_ASSIGNOR
    consumer.close()


# ---------------------------------------------------------------------- faults

def assert_one_owner_at_a_time(consumers, logs: list) -> None:
    """Every partition was owned, never by two consumers at once, by the consumers' own
    ownership logs (`logs` holds those of consumers already gone). The one overlap Kafka
    allows is a fenced member's: the coordinator gives its partitions away when it fences
    it, and the member learns it (and logs them lost) only on its next heartbeat; its
    commits in between are refused. A span that ended revoked or is still held overlaps
    none."""
    now = time.time()
    logs = logs + [intervals(ray.get(c._actor.ownership_history.remote()), now) for c in consumers]
    for tp in ALL:
        spans = sorted(span for log in logs for span in log.get(tp, []))
        assert spans, f"{tp} was never owned"
        for i, (_, end, ended) in enumerate(spans):
            for start, _, _ in spans[i + 1:]:
                assert end <= start or ended == "lost", f"{tp} had two owners at once: {spans}"


def intervals(history, end):
    """{partition: [(start, end, how it ended)]} from one consumer's ownership log; what it
    still owns ends at `end`, as "held"."""
    out, since = {}, {}
    for at, kind, partitions in history:
        for tp in partitions:
            tp = TopicPartition(*tp)
            if kind == "assigned":
                assert tp not in since, f"{tp} assigned twice without a revocation"
                since[tp] = at
            else:
                out.setdefault(tp, []).append((since.pop(tp), at, kind))
    for tp, at in since.items():
        out.setdefault(tp, []).append((at, end, "held"))
    return out


def test_consumers_and_the_coordinator_killed_while_records_flow(cluster):
    g = "g-faults"
    consumers = [cluster.consumer(g, **FAST) for _ in range(3)]
    for c in consumers:
        c.subscribe([TOPIC])
    seen, produced, logs = [], [], []
    batch = iter(range(10 ** 6))

    def flow(n=12):
        values = [f"f{next(batch)}" for _ in range(n)]
        produce_values(cluster, TOPIC, values, keyed=True)
        produced.extend(values)

    def settle(message):
        poll_consumers_until(consumers, lambda: settled(cluster, g, consumers), seen, message=message)

    def kill_consumer(victim):
        # Nothing may move between reading the victim's log and its kill, or what it gave up
        # after the read would count as owned until the kill. A group that reads as settled
        # can still be finishing a move (runs saw a partition handed on 6-7 ms before the
        # kill), so the group coordinator's process is stopped around the read and the kill:
        # a partition goes to another member only once the coordinator has seen the victim
        # give it up, so whatever moves before the end the log records here is in the log.
        settle("stable before the kill")
        pid = ray.get(coordinator.status.remote())["pid"]
        os.kill(pid, signal.SIGSTOP)
        try:
            history = ray.get(victim._actor.ownership_history.remote())
            ray.kill(victim._actor, no_restart=False)
            logs.append(intervals(history, time.time()))
        finally:
            os.kill(pid, signal.SIGCONT)
        consumers.remove(victim)

    coordinator = cluster.group_coordinator(g)
    flow()
    settle("three share")
    flow()
    kill_consumer(consumers[0])
    flow()
    ray.kill(coordinator, no_restart=False)  # while the two take over the dead one's partitions
    flow()
    settle("two share after the coordinator came back")
    newcomer = cluster.consumer(g, **FAST)
    newcomer.subscribe([TOPIC])
    consumers.append(newcomer)
    poll_consumers_until(consumers, lambda: bool(newcomer.assignment()), seen, message="the newcomer gets partitions")
    ray.kill(coordinator, no_restart=False)  # during the rebalance
    flow()
    kill_consumer(consumers[1])
    flow()
    settle("the last two share")
    poll_consumers_until(consumers, lambda: set(produced) <= set(seen), seen, message="every record delivered")

    assert_one_owner_at_a_time(consumers, logs)
    assert set().union(*(c.assignment() for c in consumers)) == ALL
    for c in consumers:
        c.close()


# ---------------------------------------------------------------------- rolling migration

CLASSIC = dict(FAST, group_protocol="classic", session_timeout_ms=2000, heartbeat_interval_ms=150)


def any_settled(cluster, group_id, consumers):
    """Whatever the group is now (a consumer group, with members of both protocols, or a
    classic group): every consumer is a member with its whole assignment, and every partition
    is owned exactly once."""
    try:
        group = describe(cluster, group_id)
        if group.error_code == Errors.GROUP_ID_NOT_FOUND.code:
            (classic,) = rpc(cluster, group_id, "describe_groups", DescribeGroupsRequest((group_id,))).groups
            if classic.group_state != "Stable" or len(classic.members) != len(consumers):
                return False
        elif not (group.group_state == "Stable" and len(group.members) == len(consumers)
                  and all(m.assignment == m.target_assignment for m in group.members)):
            return False
        states = [ray.get(c._actor.group_state.remote())["state"].lower() for c in consumers]
    except ray.exceptions.RayError:
        return False
    return all(s == "stable" for s in states) and owns_each_once(consumers, ALL)


@pytest.mark.parametrize("strategies", [("range", "cooperative-sticky"), ("cooperative-sticky",)],
                         ids=["eager", "cooperative"])
def test_a_rolling_upgrade_to_the_consumer_protocol_and_back_while_records_flow(cluster, strategies):
    """An operator's rolling upgrade: one member at a time of a classic group of three is
    closed and started again with group_protocol="consumer" (the first one converts the
    group), then rolled back the same way (the last consumer-protocol member leaving converts
    it back). The classic members revoke all they own before each JoinGroup (eager) or only
    what moves (cooperative). No partition is owned twice, every record is delivered, and
    the committed offsets only move forward."""
    g = f"g-roll-{len(strategies)}"
    admin = cluster.admin()
    classic_settings = dict(CLASSIC, partition_assignment_strategy=strategies)
    consumers = [cluster.consumer(g, **classic_settings) for _ in range(3)]
    for c in consumers:
        c.subscribe([TOPIC])
    seen, produced, logs, commits = [], [], [], []
    batch = iter(range(10 ** 6))

    def flow(n=12):
        values = [f"r{next(batch)}" for _ in range(n)]
        produce_values(cluster, TOPIC, values, keyed=True)
        produced.extend(values)

    def settle(message):
        poll_consumers_until(consumers, lambda: any_settled(cluster, g, consumers), seen, message=message)
        commits.append({tp: o.committed_offset for tp, o in admin.list_group_offsets(g, ALL).items()})

    def member_types():
        types = sorted(m.member_type for m in describe(cluster, g).members)
        (described,) = admin.describe_groups([g]).values()
        assert sorted(m.upgraded for m in described.members) == [t == 1 for t in types]
        return types

    def roll(settings, message):
        old = consumers.pop(0)
        history = ray.get(old._actor.ownership_history.remote())
        assert history, "every member owned partitions: its log says so"
        # From here on its application takes no more records, and the coordinator cannot
        # give its partitions to another before the LeaveGroup that close() sends (the log
        # of the revocation at close dies with the actor).
        logs.append(intervals(history, time.time()))
        old.close()  # commits what it consumed, then leaves
        new = cluster.consumer(g, **settings)
        new.subscribe([TOPIC])
        consumers.append(new)
        flow()
        settle(message)

    flow()
    settle("the classic group shares")
    assert describe(cluster, g).error_code == Errors.GROUP_ID_NOT_FOUND.code  # a classic group
    roll(FAST, "upgraded by the first consumer-protocol member")
    assert member_types() == [0, 0, 1]
    roll(FAST, "the second")
    roll(FAST, "the third")
    assert member_types() == [1, 1, 1]
    roll(classic_settings, "rolled back one")
    assert member_types() == [0, 1, 1]
    roll(classic_settings, "rolled back two")
    roll(classic_settings, "downgraded when the last consumer-protocol member left")
    (classic,) = rpc(cluster, g, "describe_groups", DescribeGroupsRequest((g,))).groups
    assert (classic.protocol_type, len(classic.members)) == ("consumer", 3)
    poll_consumers_until(consumers, lambda: set(produced) <= set(seen), seen, message="every record delivered")

    assert_one_owner_at_a_time(consumers, logs)
    for c in consumers:
        c.close()
    commits.append({tp: o.committed_offset for tp, o in admin.list_group_offsets(g, ALL).items()})
    for before, after in zip(commits, commits[1:]):
        assert all(after[tp] >= before[tp] for tp in ALL), (before, after)
    final = admin.list_group_offsets(g, ALL)
    assert all(o.lag == 0 for o in final.values()), final
