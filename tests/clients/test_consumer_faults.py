"""The classic consumer under faults and at its edges: a coordinator killed during a
rebalance and during commits, a static member restarted, a consumer that stops polling,
offset reset policies, manual assignment, asynchronous commits and error codes."""
import os
import signal
from concurrent.futures import ThreadPoolExecutor, wait

import pytest
import ray

from actors import (ConsumerRebalanceListener, Errors, KafkaError, NoOffsetForPartitionError,
                    OffsetAndMetadata, TopicPartition)
from runtime.messages.group import DescribeGroupsRequest
from tests.clients import test_consumer
from tests.helpers import Recorder, owns_each_once, poll_consumers_until, produce_values
from tests.clients.test_consumer import ALL, FAST, end_offsets
from tests.conftest import wait_until

CLUSTER_CONFIG, CLUSTER_TOPICS = test_consumer.CLUSTER_CONFIG, test_consumer.CLUSTER_TOPICS  # the same cluster


@pytest.fixture(scope="module")
def cluster(cluster):
    """The module's cluster, with 36 records in "orders"."""
    produce_values(cluster, "orders", [f"r{i}" for i in range(36)], keyed=True)
    return cluster


def group_state(cluster, group_id):
    def describe():
        try:
            return ray.get(cluster.group_coordinator(group_id).describe_groups.remote(
                DescribeGroupsRequest((group_id,))), timeout=10).groups[0]
        except ray.exceptions.RayError:
            return None
    return wait_until(describe, message="the coordinator answers")


def member(consumer):
    return ray.get(consumer._actor.group_state.remote())


def test_coordinator_killed_during_a_rebalance_and_during_commits(cluster):
    # Sessions and poll intervals outlast the coordinator's reloads: on a loaded machine a
    # reload took 30 s, and a member dropped for its session, or leaving because commit()
    # kept it from polling, fails its commit (as in Kafka).
    settings = dict(FAST, session_timeout_ms=60000, max_poll_interval_ms=120000)
    consumers = [cluster.consumer("g-coord", **settings) for _ in range(2)]
    for c in consumers:
        c.subscribe(["orders"])
    seen = []
    poll_consumers_until(consumers, lambda: owns_each_once(consumers, ALL) and len(seen) >= 36, seen,
                         message="two share")
    coordinator = cluster.group_coordinator("g-coord")

    third = cluster.consumer("g-coord", **settings)
    third.subscribe(["orders"])
    consumers.append(third)
    third.poll(timeout_ms=300)  # its JoinGroup is parked in the rebalance
    ray.kill(coordinator, no_restart=False)
    # A member whose heartbeats the reload outlasted may be dropped and rejoin: one more
    # rebalance, as in Kafka. What must hold is the end: Stable, each partition owned once.
    poll_consumers_until(consumers, lambda: owns_each_once(consumers, ALL) and
                         [len(c.assignment()) for c in consumers] == [2, 2, 2] and
                         group_state(cluster, "g-coord").group_state == "Stable", seen,
                         message="the group settles again")

    first = consumers[0]
    expected = {tp: OffsetAndMetadata(first.position(tp)) for tp in first.assignment()}
    first.commit_async()
    ray.kill(coordinator, no_restart=False)  # during the commit
    first.commit()  # retried until the reloaded coordinator takes it
    ray.kill(coordinator, no_restart=False)  # after it was acknowledged
    assert {tp: first.committed(tp) for tp in expected} == {tp: OffsetAndMetadata(o.offset, "", -1)
                                                            for tp, o in expected.items()}
    for c in consumers:
        c.close()


def test_a_blocking_commit_outlasts_a_coordinator_that_answers_nothing(cluster):
    # kafka-python's commit() and committed() wait as long as it takes unless given a
    # timeout_ms; a coordinator being reloaded on a loaded machine can take longer than a
    # request timeout (here 1 s) to answer.
    c = cluster.consumer("g-blocking", **dict(FAST, session_timeout_ms=20000, request_timeout_ms=1000))
    c.subscribe(["orders"])
    seen = []
    poll_consumers_until([c], lambda: c.assignment() == ALL and len(seen) >= 36, seen, message="it consumed")
    expected = {tp: OffsetAndMetadata(c.position(tp), "", -1) for tp in ALL}
    pid = ray.get(cluster.group_coordinator("g-blocking").status.remote())["pid"]
    os.kill(pid, signal.SIGSTOP)
    pool = ThreadPoolExecutor(1)
    try:
        with pytest.raises(KafkaError) as e:
            c.commit(timeout_ms=300)
        assert e.value.error is Errors.REQUEST_TIMED_OUT
        commit = pool.submit(c.commit)
        done, _ = wait([commit], timeout=2.5)  # more than two request timeouts unanswered
        assert not done
    finally:
        os.kill(pid, signal.SIGCONT)
    commit.result(timeout=60)
    pool.shutdown()
    assert {tp: c.committed(tp) for tp in ALL} == expected
    c.close()


def test_a_static_member_restarted_within_its_session_timeout_causes_no_rebalance(cluster):
    settings = dict(FAST, session_timeout_ms=8000)
    a = cluster.consumer("g-static", group_instance_id="a", **settings)
    b = cluster.consumer("g-static", group_instance_id="b", **settings)
    a.subscribe(["orders"])
    b.subscribe(["orders"])
    poll_consumers_until([a, b], lambda: owns_each_once([a, b], ALL), message="two static members share")
    before_a, before_b = member(a), member(b)
    b.close()  # a static member does not leave
    b2 = cluster.consumer("g-static", group_instance_id="b", **settings)
    b2.subscribe(["orders"])
    poll_consumers_until([a, b2], lambda: owns_each_once([a, b2], ALL), message="b comes back")
    after_a, after_b = member(a), member(b2)
    assert after_a["generation"] == before_a["generation"] == after_b["generation"]
    assert after_b["assignment"] == before_b["assignment"] and after_a["assignment"] == before_a["assignment"]
    assert after_b["member_id"] != before_b["member_id"]
    a.close()
    b2.close()


def test_a_consumer_that_stops_polling_leaves_and_rejoins_on_its_next_poll(cluster):
    slow = cluster.consumer("g-slow", **dict(FAST, max_poll_interval_ms=1500))
    busy = cluster.consumer("g-slow", **FAST)
    listener = Recorder()
    slow.subscribe(["orders"], listener=listener)
    busy.subscribe(["orders"])
    poll_consumers_until([slow, busy], lambda: owns_each_once([slow, busy], ALL), message="two share")
    poll_consumers_until([busy], lambda: busy.assignment() == ALL, message="the slow one left")
    assert slow.assignment() == set()
    poll_consumers_until([slow, busy], lambda: owns_each_once([slow, busy], ALL), message="it came back")
    assert ("lost", frozenset()) not in listener.events and any(k == "lost" for k, _ in listener.events)
    slow.close()
    busy.close()


def test_offset_reset_policies(cluster):
    none = cluster.consumer("g-none", **dict(FAST, auto_offset_reset="none"))
    none.subscribe(["orders"])
    with pytest.raises(NoOffsetForPartitionError) as e:
        wait_until(lambda: none.poll(timeout_ms=50) and False, message="the error")
    assert set(e.value.partitions) <= ALL
    none.close()

    latest = cluster.consumer("g-latest", **dict(FAST, auto_offset_reset="latest"))
    latest.subscribe(["orders"])
    poll_consumers_until([latest], lambda: latest.assignment() == ALL, message="assigned")
    wait_until(lambda: all(latest.position(tp) is not None for tp in ALL))
    produce_values(cluster, "orders", ["new"], keyed=True)
    seen = []
    poll_consumers_until([latest], lambda: seen, seen, message="the new record")
    assert seen == ["new"]
    latest.close()


def test_manual_assignment_seek_pause_and_async_commit(cluster):
    c = cluster.consumer("g-manual", **FAST)
    tp = TopicPartition("orders", 0)
    c.assign([tp])
    assert c.assignment() == {tp}
    c.seek_to_beginning(tp)
    assert c.position(tp) == 0
    got = []
    wait_until(lambda: got.extend(c.poll(timeout_ms=50).get(tp, [])) or len(got) >= 3)
    assert [r.offset for r in got[:3]] == [0, 1, 2] and all(isinstance(r.value, bytes) for r in got)
    c.seek(tp, 2)
    assert c.poll(timeout_ms=2000, max_records=1)[tp][0].offset == 2
    c.pause(tp)
    assert c.paused() == {tp} and c.poll(timeout_ms=300) == {}
    c.resume(tp)
    assert c.poll(timeout_ms=2000)[tp][0].offset == 3
    results = []
    c.commit_async({tp: OffsetAndMetadata(3, "meta")}, callback=lambda offsets, error: results.append(error))
    wait_until(lambda: c.poll(timeout_ms=20) is not None and results)
    assert results == [None] and c.committed(tp) == OffsetAndMetadata(3, "meta", -1)
    c.close()

    decoded = cluster.consumer(None, value_deserializer=bytes.decode, **FAST)
    decoded.assign([tp])
    decoded.seek(tp, 0)
    assert decoded.poll(timeout_ms=3000, max_records=1)[tp][0].value.startswith("r")
    with pytest.raises(KafkaError) as e:
        decoded.commit()
    assert e.value.error is Errors.INVALID_GROUP_ID
    decoded.close()


def test_coordinator_errors_reach_the_user(cluster):
    c = cluster.consumer("g-bad", **dict(FAST, session_timeout_ms=100))  # below group.min.session.timeout.ms
    c.subscribe(["orders"])
    with pytest.raises(KafkaError) as e:
        wait_until(lambda: c.poll(timeout_ms=50) and False, message="the error")
    assert e.value.error is Errors.INVALID_SESSION_TIMEOUT
    with pytest.raises(KafkaError):  # the member cannot go on: every poll says so
        c.poll(timeout_ms=10)
    c.close()
    with pytest.raises(KafkaError) as e:
        cluster.consumer("g-bad", partition_assignment_strategy=["nope"], **FAST)
    assert e.value.error is Errors.UNSUPPORTED_ASSIGNOR


def test_the_leader_rebalances_when_a_topic_grows(cluster):
    cluster.create_topic("grow", 2)
    c = cluster.consumer("g-grow", **dict(FAST, metadata_max_age_ms=200))
    c.subscribe(["grow"])
    poll_consumers_until([c], lambda: c.assignment() == {TopicPartition("grow", 0), TopicPartition("grow", 1)},
                         message="two partitions")
    cluster.create_partitions("grow", 3)
    poll_consumers_until([c], lambda: len(c.assignment()) == 3, message="the new partition is assigned")
    c.close()


def test_a_commit_in_on_partitions_revoked_counts(cluster):
    """The member rejoins only after the user's callback ran (in its poll), so the commit
    made there is still accepted, as in Kafka."""
    commits = []

    class CommitOnRevoke(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked):
            if revoked:
                first.commit()
                commits.append({tp: first.committed(tp) for tp in revoked})

    first = cluster.consumer("g-revoke", **FAST)
    first.subscribe(["orders"], listener=CommitOnRevoke())
    end = end_offsets(cluster)
    poll_consumers_until([first], lambda: first.assignment() == ALL and
                         all(first.position(tp) == end[tp] for tp in ALL), message="one owns and has read all")
    second = cluster.consumer("g-revoke", **FAST)
    second.subscribe(["orders"])
    poll_consumers_until([first, second], lambda: owns_each_once([first, second], ALL), message="two share")
    assert commits and commits[0] == {tp: OffsetAndMetadata(end[tp], "", -1) for tp in ALL}
    first.close()
    second.close()


def test_kafka_python_extras_offsets_subscription_and_iteration(cluster):
    c = cluster.consumer("g-iter", consumer_timeout_ms=1500, **FAST)
    assert c.subscription() is None
    c.subscribe(["orders"])
    assert c.subscription() == {"orders"}
    ends = c.end_offsets(sorted(ALL))
    assert c.beginning_offsets(sorted(ALL)) == {tp: 0 for tp in ALL}
    values = [r.value for r in c]  # stops once nothing came for consumer_timeout_ms
    assert len(values) == sum(ends.values())
    c.close()


def test_close_commits_what_was_consumed_and_leaves(cluster):
    c = cluster.consumer("g-close", **dict(FAST, enable_auto_commit=True, auto_commit_interval_ms=600000))
    c.subscribe(["orders"])
    end = end_offsets(cluster)
    poll_consumers_until([c], lambda: c.assignment() == ALL and all(c.position(tp) == end[tp] for tp in ALL),
                         message="all read")
    c.close()  # the interval never came: only close committed
    assert group_state(cluster, "g-close").group_state == "Empty"
    reader = cluster.consumer("g-close", **FAST)
    assert {tp: reader.committed(tp) for tp in ALL} == {tp: OffsetAndMetadata(end[tp], "", -1) for tp in ALL}
    reader.close()


def test_a_slow_on_partitions_revoked_keeps_the_session(cluster):
    """The actor heartbeats while it waits for the user's callback (longer than the session
    timeout here), so the member is not removed and nothing is lost."""
    import time

    class Slow(Recorder):
        def on_partitions_revoked(self, revoked):
            super().on_partitions_revoked(revoked)
            if revoked:
                time.sleep(FAST["session_timeout_ms"] / 1000 * 1.5)

    listener = Slow()
    first = cluster.consumer("g-slow-cb", **FAST)
    first.subscribe(["orders"], listener=listener)
    poll_consumers_until([first], lambda: first.assignment() == ALL, message="one owns all")
    second = cluster.consumer("g-slow-cb", **FAST)
    second.subscribe(["orders"])
    poll_consumers_until([first, second], lambda: owns_each_once([first, second], ALL) and len(listener.events) >= 3,
                         message="two share")
    assert [k for k, _ in listener.events] == ["assigned", "revoked", "assigned"]
    # one rebalance: had the session ended, the first member would have been removed and
    # come back in a third generation
    assert member(first)["generation"] == member(second)["generation"] == 2
    first.close()
    second.close()
