"""KIP-848 consumer groups through the gateway: confluent-kafka 2.16 (librdkafka) consumers,
unmodified, with group.protocol=consumer and each server-side assignor, split a topic and
commit, take over the partitions of a member that leaves or is killed, and are described by
the AdminClient; bad heartbeats on raw sockets get Kafka's errors and change nothing."""
import asyncio
import os
import signal
import subprocess
import sys
import textwrap

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient

from actors import naming
from runtime.wire.entities import ZERO_UUID
from tests.conftest import wait_until
from tests.gateway.raw import AsyncRawClient, RawClient
from tests.helpers import produce_through_gateway

pytestmark = pytest.mark.ray

SESSION_MS = 3000
CLUSTER_CONFIG = {"group.consumer.heartbeat.interval.ms": 300, "group.consumer.min.heartbeat.interval.ms": 100,
                  "group.consumer.session.timeout.ms": SESSION_MS, "group.consumer.min.session.timeout.ms": 1000}
PARTITIONS = 4
HEARTBEAT, DESCRIBE = 68, 69
UNKNOWN_MEMBER_ID, INVALID_REQUEST, GROUP_ID_NOT_FOUND, FENCED_MEMBER_EPOCH = 25, 42, 69, 110


def consumer(bootstrap, group, assignor, **extra):
    return ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                        "group.remote.assignor": assignor, "auto.offset.reset": "earliest",
                        "enable.auto.commit": False, **extra})


def partitions_of(c) -> set[int]:
    return {tp.partition for tp in c.assignment()}


class Reader:
    """Polls some consumers in turn, keeping what each read."""

    def __init__(self, *consumers):
        self.consumers = list(consumers)
        self.read = {id(c): [] for c in consumers}

    def poll(self):
        for c in self.consumers:
            m = c.poll(0.1)
            if m is not None and not m.error():
                self.read[id(c)].append((m.partition(), m.offset()))

    def until(self, predicate, message, timeout_s=60):
        def step():
            self.poll()
            return predicate()
        wait_until(step, timeout_s=timeout_s, interval_s=0, message=message)


@pytest.fixture(params=["uniform", "range"])
def assignor(request):
    return request.param


def test_two_consumers_split_a_topic_and_commit(cluster, bootstrap, assignor):
    topic, group = f"split-{assignor}", f"split-{assignor}"
    cluster.create_topic(topic, PARTITIONS)
    produce_through_gateway(bootstrap, topic, 40, partitions=PARTITIONS)
    a, b = consumer(bootstrap, group, assignor), consumer(bootstrap, group, assignor)
    try:
        a.subscribe([topic])
        b.subscribe([topic])
        reader = Reader(a, b)

        def each_read_its_own():
            # Nothing is committed yet, so a partition that moved from one member to the other is
            # read again from the start by its new owner: at least once, as in Kafka.
            return all(len(partitions_of(c)) == 2 and {(p, o) for p, o in reader.read[id(c)] if p in partitions_of(c)}
                       == {(p, o) for p in partitions_of(c) for o in range(10)} for c in (a, b))
        reader.until(each_read_its_own, "two partitions each, each member has read all 10 records of both")
        assert partitions_of(a) | partitions_of(b) == set(range(PARTITIONS))
        for c in (a, b):
            c.commit(asynchronous=False)

        admin = AdminClient({"bootstrap.servers": bootstrap})
        [future] = admin.list_consumer_group_offsets([ck.ConsumerGroupTopicPartitions(group)]).values()
        committed = {tp.partition: tp.offset for tp in future.result(30).topic_partitions}
        assert committed == {p: 10 for p in range(PARTITIONS)}
    finally:
        a.close()
        b.close()


def test_a_member_that_leaves_hands_its_partitions_to_the_other(cluster, bootstrap, assignor):
    topic, group = f"leave-{assignor}", f"leave-{assignor}"
    cluster.create_topic(topic, PARTITIONS)
    a, b = consumer(bootstrap, group, assignor), consumer(bootstrap, group, assignor)
    try:
        a.subscribe([topic])
        b.subscribe([topic])
        reader = Reader(a, b)
        reader.until(lambda: partitions_of(a) and partitions_of(b), "both members assigned")
        b.close()
        reader.consumers = [a]
        reader.until(lambda: partitions_of(a) == set(range(PARTITIONS)), "the survivor owns every partition",
                     timeout_s=SESSION_MS / 1000 / 2 + 20)
    finally:
        a.close()


KILLED_MEMBER = textwrap.dedent("""
    import sys, time, confluent_kafka as ck
    bootstrap, group, topic, assignor = sys.argv[1:]
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                     "group.remote.assignor": assignor})
    c.subscribe([topic])
    deadline = time.monotonic() + 60  # gives up (and the test fails) if never assigned
    while not c.assignment() and time.monotonic() < deadline:
        c.poll(0.1)
    print("assigned" if c.assignment() else "never assigned", flush=True)
    while True:  # polls (and so revokes what the group takes back) until killed
        c.poll(0.1)
""")


def test_a_killed_member_loses_its_partitions_after_the_session_timeout(cluster, bootstrap, assignor):
    topic, group = f"killed-{assignor}", f"killed-{assignor}"
    cluster.create_topic(topic, PARTITIONS)
    victim = subprocess.Popen([sys.executable, "-c", KILLED_MEMBER, bootstrap, group, topic, assignor],
                              stdout=subprocess.PIPE, text=True)
    survivor = consumer(bootstrap, group, assignor)
    try:
        # The victim first: a member gives partitions back only inside its poll().
        assert victim.stdout.readline().strip() == "assigned"
        survivor.subscribe([topic])
        reader = Reader(survivor)
        reader.until(lambda: 0 < len(partitions_of(survivor)) < PARTITIONS, "the partitions shared")
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait(10)
        reader.until(lambda: partitions_of(survivor) == set(range(PARTITIONS)),
                     "the survivor owns every partition", timeout_s=SESSION_MS / 1000 + 30)
    finally:
        if victim.poll() is None:
            victim.kill()
            victim.wait(10)
        survivor.close()


def test_the_admin_client_describes_the_group(cluster, bootstrap):
    topic, group = "described", "described"
    cluster.create_topic(topic, PARTITIONS)
    a = consumer(bootstrap, group, "uniform", **{"client.id": "member-a"})
    b = consumer(bootstrap, group, "uniform", **{"client.id": "member-b"})
    try:
        a.subscribe([topic])
        b.subscribe([topic])
        reader = Reader(a, b)
        reader.until(lambda: len(partitions_of(a)) == 2 and len(partitions_of(b)) == 2, "two partitions each")
        admin = AdminClient({"bootstrap.servers": bootstrap})

        def described():
            [future] = admin.describe_consumer_groups([group]).values()
            d = future.result(30)
            members = {m.client_id: {tp.partition for tp in m.assignment.topic_partitions} for m in d.members}
            return d if members == {"member-a": partitions_of(a), "member-b": partitions_of(b)} else None
        reader.poll()
        d = wait_until(described, timeout_s=30, message="both members described with their assignments")
        assert d.type == ck.ConsumerGroupType.CONSUMER
        assert d.state == ck.ConsumerGroupState.STABLE
        assert {tp.topic for m in d.members for tp in m.assignment.topic_partitions} == {topic}
    finally:
        a.close()
        b.close()


# ------------------------------------------------------------------ bad heartbeats on raw sockets

def join(raw, group, topic, member_id):
    return raw.request(HEARTBEAT, 1, {"group_id": group, "member_id": member_id, "member_epoch": 0,
                                      "rebalance_timeout": 30000, "subscribed_topic_names": [topic],
                                      "topic_partitions": []})


def describe(raw, group):
    [g] = raw.request(DESCRIBE, 1, {"group_ids": [group], "include_authorized_operations": False})["groups"]
    return g


def test_bad_heartbeats_get_kafkas_errors_and_change_nothing(cluster, bootstrap):
    topic, group = "raw", "raw"
    cluster.create_topic(topic, PARTITIONS)
    raw = RawClient(bootstrap)
    try:
        joined = join(raw, group, topic, "member-1")
        assert joined["error_code"] == 0 and joined["member_epoch"] > 0
        before = describe(raw, group)
        [member] = before["members"]
        assert member["member_id"] == "member-1"

        unknown = raw.request(HEARTBEAT, 1, {"group_id": group, "member_id": "nobody", "member_epoch": 1,
                                             "topic_partitions": None})
        assert unknown["error_code"] == UNKNOWN_MEMBER_ID
        fenced = raw.request(HEARTBEAT, 1, {"group_id": group, "member_id": "member-1",
                                            "member_epoch": joined["member_epoch"] + 5, "topic_partitions": None})
        assert fenced["error_code"] == FENCED_MEMBER_EPOCH
        for bad_join in ({"rebalance_timeout": -1, "subscribed_topic_names": [topic]},  # no rebalance timeout
                         {"rebalance_timeout": 30000},  # no subscription
                         {"rebalance_timeout": 30000, "subscribed_topic_names": [topic], "member_id": ""}):
            r = raw.request(HEARTBEAT, 1, {"group_id": group, "member_id": "member-2", "member_epoch": 0,
                                           "topic_partitions": [], **bad_join})
            assert r["error_code"] == INVALID_REQUEST, bad_join
        assert describe(raw, group)["members"] == before["members"]

        # A bad first heartbeat makes no group.
        r = raw.request(HEARTBEAT, 1, {"group_id": "never-made", "member_id": "m", "member_epoch": 0,
                                       "rebalance_timeout": -1, "subscribed_topic_names": [topic],
                                       "topic_partitions": []})
        assert r["error_code"] == INVALID_REQUEST
        assert describe(raw, "never-made")["error_code"] == GROUP_ID_NOT_FOUND
    finally:
        raw.close()


def test_assignments_carry_the_topic_ids_metadata_gives(cluster, bootstrap):
    topic, group = "ids", "ids"
    cluster.create_topic(topic, PARTITIONS)
    raw = RawClient(bootstrap)
    try:
        metadata = raw.request(3, 13, {"topics": [{"name": topic, "topic_id": ZERO_UUID}], "allow_auto_topic_creation": False,
                                       "include_topic_authorized_operations": False})
        [t] = metadata["topics"]
        joined = join(raw, group, topic, "member-1")
        epoch = joined["member_epoch"]

        def assigned():
            r = raw.request(HEARTBEAT, 1, {"group_id": group, "member_id": "member-1", "member_epoch": epoch,
                                           "topic_partitions": None})
            return r["assignment"] if r["assignment"] and r["assignment"]["topic_partitions"] else None
        assignment = joined["assignment"] if joined["assignment"]["topic_partitions"] else wait_until(assigned)
        assert assignment["topic_partitions"] == [{"topic_id": t["topic_id"], "partitions": list(range(PARTITIONS))}]
        # Metadata asked by that id names the topic.
        by_id = raw.request(3, 13, {"topics": [{"topic_id": t["topic_id"], "name": None}],
                                    "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
        assert [x["name"] for x in by_id["topics"]] == [topic]
    finally:
        raw.close()


# ------------------------------------------------------------------ request coalescing

def test_concurrent_heartbeats_each_get_their_own_answer(cluster, bootstrap):
    """Many connections heartbeat at once: the gateway gathers them into few Ray calls, and
    every member still gets its own answer, a bad one its own error."""
    topic, group, connections, per_connection = "crowd", "crowd", 10, 20
    cluster.create_topic(topic, PARTITIONS)
    before = _coalesced(cluster)

    async def main():
        clients = [await AsyncRawClient.connect(bootstrap) for _ in range(connections)]
        try:
            def join_request(member_id):
                return {"group_id": group, "member_id": member_id, "member_epoch": 0, "rebalance_timeout": 30000,
                        "subscribed_topic_names": [topic], "topic_partitions": []}
            ids = [[f"m-{c}-{i}" for i in range(per_connection)] for c in range(connections)]
            joined = await asyncio.gather(*(clients[c].request(HEARTBEAT, 1, join_request(m))
                                            for c in range(connections) for m in ids[c]))
            assert [r["member_id"] for r in joined] == [m for ms in ids for m in ms]
            assert all(r["error_code"] == 0 and r["member_epoch"] > 0 for r in joined)
            # Steady heartbeats, with a member nobody knows among them.
            steady = [(c, m, r["member_epoch"]) for c, ms in enumerate(ids) for m, r in zip(ms, joined[
                c * per_connection:(c + 1) * per_connection])] + [(0, "stranger", 1)]
            answers = await asyncio.gather(*(clients[c].request(HEARTBEAT, 1, {
                "group_id": group, "member_id": m, "member_epoch": e, "topic_partitions": None})
                for c, m, e in steady))
            for (_, m, _), r in zip(steady[:-1], answers):
                assert r["member_id"] == m and r["error_code"] == 0, r
            assert answers[-1]["error_code"] == UNKNOWN_MEMBER_ID
        finally:
            for client in clients:
                await client.close()
    asyncio.run(main())
    after = _coalesced(cluster)
    calls, batches = after["calls"] - before["calls"], after["batches"] - before["batches"]
    assert calls >= 2 * connections * per_connection + 1 and batches < calls / 4, (calls, batches)


def _coalesced(cluster) -> dict:
    [gateway] = [s for s in cluster.status() if s["actor"] == naming.gateway(0)]
    return gateway["coalesced"]


def test_a_batch_names_only_the_coordinators_rpcs(cluster):
    import ray
    coordinator = cluster.group_coordinator("anyone")
    for method in ("_write", "batched", "no_such_rpc"):
        with pytest.raises(ray.exceptions.RayTaskError, match="INVALID_REQUEST"):
            ray.get(coordinator.batched.remote(method, [()]), timeout=30)
