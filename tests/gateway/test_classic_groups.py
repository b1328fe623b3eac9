"""Classic consumer groups with the real clients through the gateway: each client's own
assignors (range, roundrobin, sticky, cooperative-sticky) through joins, a member killed
with SIGKILL and a leave; a group mixing shoal's consumer with kafka-python and
librdkafka; and the group coordinator actor killed while clients heartbeat and commit."""
import json
import os
import signal
import subprocess
import sys

import pytest
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient

from tests.conftest import ROOT, wait_until
from tests.gateway.classic_clients import HEARTBEAT_INTERVAL_MS, SESSION_TIMEOUT_MS, polled
from tests.helpers import produce_through_gateway

pytestmark = pytest.mark.ray

# Short sessions so a killed member leaves within seconds; a short initial delay so a new
# group's first generation does not wait 3 s.
CLUSTER_CONFIG = {"group.min.session.timeout.ms": 1000, "group.initial.rebalance.delay.ms": 200}
PARTITIONS = 6


def settle(members, sizes, others=frozenset(), timeout_s: float = 60, message: str = "the group settled"):
    """Wait, reading what each member polled, until each holds the given number of partitions, none twice,
    and with `others()` (partitions held elsewhere) they cover the topic. Returns the
    assignments and the (partition, offset) of every record read on the way, per member."""
    reads = [[] for _ in members]

    def settled():
        for m, got in zip(members, reads):
            got.extend(m.poll())
        held = [m.assignment() for m in members] + [set(others() if callable(others) else others)]
        flat = [p for a in held for p in a]
        return ([len(a) for a in held[:-1]] == list(sizes) and len(flat) == len(set(flat)) == PARTITIONS
                and held[:-1])
    assignments = wait_until(settled, timeout_s=timeout_s, interval_s=0.05, message=message)
    return assignments, reads


class Subprocess:
    """A consumer in its own process (tests/gateway/classic_member.py), to be SIGKILLed."""

    def __init__(self, tmp_path, client, bootstrap, group, topic, strategy) -> None:
        self.out = str(tmp_path / f"{group}-member.json")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.gateway.classic_member", client, bootstrap, group, topic, strategy,
             self.out], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def assignment(self) -> set[int]:
        try:
            with open(self.out) as f:
                return set(json.load(f))
        except FileNotFoundError:
            return set()

    def kill(self) -> None:
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)


STORIES = [("kafka-python", s) for s in ("range", "roundrobin", "sticky", "cooperative-sticky")] + \
          [("confluent", s) for s in ("range", "roundrobin", "cooperative-sticky")]


@pytest.mark.parametrize("client,strategy", STORIES)
def test_a_group_through_joins_a_killed_member_and_a_leave(cluster, bootstrap, tmp_path, client, strategy):
    group = topic = f"story-{client}-{strategy}"
    cluster.create_topic(topic, PARTITIONS)
    first = polled(client, bootstrap, group, topic, strategy)
    second = third = None
    try:
        settle([first], [6], message="the first member holds every partition")
        second = polled(client, bootstrap, group, topic, strategy)
        settle([first, second], [3, 3], message="two members share the topic")
        third = Subprocess(tmp_path, client, bootstrap, group, topic, strategy)
        (a, b), _ = settle([first, second], [2, 2], others=third.assignment, timeout_s=90,
                           message="three members share the topic")
        third.kill()
        # after session.timeout.ms the coordinator drops the killed member: the two left
        # take its partitions (the sticky assignors keep what each had)
        (a2, b2), _ = settle([first, second], [3, 3], message="the killed member's partitions taken over")
        if "sticky" in strategy:
            assert a <= a2 and b <= b2
        second.close()
        second = None
        settle([first], [6], message="the last member holds every partition after the other left")
    finally:
        if third is not None and third.proc.poll() is None:
            third.kill()
        for m in (first, second):
            if m is not None:
                m.close()


def test_a_group_mixing_shoal_kafka_python_and_librdkafka(cluster, bootstrap):
    group = topic = "mixed-classic"
    cluster.create_topic(topic, PARTITIONS)
    ours = cluster.consumer(group, auto_offset_reset="earliest", enable_auto_commit=False,
                            session_timeout_ms=SESSION_TIMEOUT_MS, heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS)
    ours.subscribe([topic])

    class Shoal:
        def poll(self):
            return [(tp.partition, r.offset) for tp, rs in ours.poll(timeout_ms=100).items() for r in rs]

        def assignment(self):
            return {tp.partition for tp in ours.assignment()}

    members = [Shoal(), polled("kafka-python", bootstrap, group, topic, "range"),
               polled("confluent", bootstrap, group, topic, "range")]
    try:
        assignments, _ = settle(members, [2, 2, 2], timeout_s=90, message="three clients share the topic")
        produce_through_gateway(bootstrap, topic, 60, partitions=PARTITIONS)
        reads = [[] for _ in members]

        def read_all():
            for m, got in zip(members, reads):
                got.extend(m.poll())
            return sum(map(len, reads)) >= 60
        wait_until(read_all, timeout_s=60, interval_s=0.05, message="60 records read")
        every = [r for got in reads for r in got]
        assert sorted(every) == sorted((p, o) for p in range(PARTITIONS) for o in range(10))  # each once
        for assigned, got in zip(assignments, reads):
            assert {p for p, _ in got} == assigned
        # every admin client describes each member's assignment (Kafka's ConsumerProtocol bytes)
        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        try:
            described = admin.describe_groups([group])[group]
        finally:
            admin.close()
        assert (described["group_state"], described["protocol_type"], described["protocol_data"]) == \
            ("Stable", "consumer", "range")
        theirs = sorted(sorted(p for t in m["member_assignment"]["assigned_partitions"] for p in t["partitions"])
                        for m in described["members"])
        assert theirs == sorted(sorted(a) for a in assignments)
        ours_described = cluster.admin().describe_groups([group])[group]
        assert sorted(sorted(tp.partition for tp in m.assignment) for m in ours_described.members) == theirs
        librdkafka = AdminClient({"bootstrap.servers": bootstrap})  # kept: its requests die with it
        rd_described = librdkafka.describe_consumer_groups([group])[group].result(30)
        assert sorted(sorted(tp.partition for tp in m.assignment.topic_partitions)
                      for m in rd_described.members) == theirs
    finally:
        ours.close()
        for m in members[1:]:
            m.close()


def committed(bootstrap: str, group: str) -> dict[int, int]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        return {tp.partition: meta.offset for tp, meta in admin.list_group_offsets(group)[group].items()}
    finally:
        admin.close()


def test_clients_rediscover_a_killed_group_coordinator_and_no_commit_is_lost(cluster, bootstrap):
    import ray
    group = topic = "coordinator-killed"
    cluster.create_topic(topic, PARTITIONS)
    members = [polled("kafka-python", bootstrap, group, topic, "range"),
               polled("confluent", bootstrap, group, topic, "range")]
    read, acked = {}, {}  # partition -> its records read; -> the offset a commit acknowledged

    def consume_and_commit(expected: dict):
        def step():
            for m in members:
                for p, o in m.poll():
                    read[p] = max(read.get(p, 0), o + 1)
                try:
                    acked.update(m.commit())
                except Exception:  # the coordinator is away, or nothing new to commit: again
                    continue
            return acked == expected
        try:
            wait_until(step, timeout_s=120, interval_s=0.05, message="consumed and committed")
        except AssertionError as e:
            raise AssertionError(f"{e}: read {read}, acknowledged commits {acked}, "
                                 f"assignments {[m.assignment() for m in members]}") from None

    try:
        settle(members, [3, 3], timeout_s=90, message="two clients share the topic")
        # produced now, so that every record is counted where it is read
        produce_through_gateway(bootstrap, topic, 60, partitions=PARTITIONS)
        consume_and_commit({p: 10 for p in range(PARTITIONS)})
        assert committed(bootstrap, group) == {p: 10 for p in range(PARTITIONS)}
        ray.kill(cluster.group_coordinator(group), no_restart=False)
        produce_through_gateway(bootstrap, topic, 60, partitions=PARTITIONS)
        # the clients find the restarted coordinator (FindCoordinator) and commit to it
        consume_and_commit({p: 20 for p in range(PARTITIONS)})
        assert committed(bootstrap, group) == {p: 20 for p in range(PARTITIONS)}
        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        try:
            def whole():
                for m in members:
                    m.poll()
                g = admin.describe_groups([group])[group]
                return g["group_state"] == "Stable" and len(g["members"]) == 2
            wait_until(whole, timeout_s=60, interval_s=0.05, message="both clients members of a Stable group again")
        finally:
            admin.close()
    finally:
        for m in members:
            m.close()
