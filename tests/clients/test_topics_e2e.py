"""Topics, produce and fetch end to end on real Ray actors and real files."""
import time

import pytest
import ray

from actors import Cluster, DeploymentNotFound
from runtime.errors import Errors, KafkaError
from runtime.hashing import default_partition
from runtime.messages.topics import (EARLIEST_TIMESTAMP, FetchRequest, ListOffsetsRequest, ProduceRequest)
from runtime.topics.data import decode_entries, encode_records
from tests.conftest import wait_until


def fetch_all(cluster, topic, partition, offset=0):
    response = ray.get(cluster.partition_leader(topic, partition).fetch.remote(
        FetchRequest(topic, partition, offset, max_wait_ms=0)))
    assert response.error_code == 0, response
    return [r for b in response.batches for r in decode_entries(b.records, b.base_offset) if r.offset >= offset]


def test_produce_and_fetch_across_partitions(cluster):
    cluster.create_topic("e2e", 3)
    with cluster.producer(linger_ms=2) as producer:
        futures = [producer.send("e2e", f"v{i}".encode(), key=f"k{i % 7}".encode()) for i in range(60)]
        producer.flush()
        metadata = [f.get(10) for f in futures]
    for i, md in enumerate(metadata):
        assert md.partition == default_partition(f"k{i % 7}".encode(), 3)
    for p in range(3):
        values = [r.value for r in fetch_all(cluster, "e2e", p)]
        expected = [f"v{i}".encode() for i, md in enumerate(metadata) if md.partition == p]
        assert values == expected
        assert [md.offset for md in metadata if md.partition == p] == list(range(len(expected)))


def test_long_poll_fetch_wakes_when_data_arrives(cluster):
    cluster.create_topic("poll", 1)
    leader = cluster.partition_leader("poll", 0)
    started = time.monotonic()
    ref = leader.fetch.remote(FetchRequest("poll", 0, 0, max_wait_ms=20000))
    ready, _ = ray.wait([ref], timeout=0.3)
    assert not ready  # it waits for data
    with cluster.producer(linger_ms=0) as producer:
        producer.send("poll", b"wake up").get(10)
    response = ray.get(ref, timeout=15)
    assert time.monotonic() - started < 10
    assert [r.value for b in response.batches for r in decode_entries(b.records, b.base_offset)] == [b"wake up"]


def test_bad_input_gets_kafka_errors(cluster):
    cluster.create_topic("strict", 1, {"max.message.bytes": 2000})
    with pytest.raises(KafkaError) as e:
        cluster.create_topic("strict", 1)
    assert e.value.error is Errors.TOPIC_ALREADY_EXISTS
    with pytest.raises(KafkaError) as e:
        cluster.describe_topic("missing")
    assert e.value.error is Errors.UNKNOWN_TOPIC_OR_PARTITION
    with pytest.raises(KafkaError) as e:
        cluster.create_topic("bad/name", 1)
    assert e.value.error is Errors.INVALID_TOPIC_EXCEPTION
    leader = cluster.partition_leader("strict", 0)
    big = encode_records([(1, None, bytes(5000), [])])
    r = ray.get(leader.produce.remote(ProduceRequest("strict", 0, big, 1, 1)))
    assert r.error_code == Errors.MESSAGE_TOO_LARGE.code
    for offset in (-1, 5):
        r = ray.get(leader.fetch.remote(FetchRequest("strict", 0, offset, max_wait_ms=0)))
        assert r.error_code == Errors.OFFSET_OUT_OF_RANGE.code
    with cluster.producer() as producer:
        with pytest.raises(KafkaError) as e:
            producer.send("missing", b"x")
        assert e.value.error is Errors.UNKNOWN_TOPIC_OR_PARTITION
        with pytest.raises(KafkaError) as e:
            producer.send("strict", b"x", partition=3)
        assert e.value.error is Errors.UNKNOWN_TOPIC_OR_PARTITION
        with pytest.raises(KafkaError) as e:
            producer.send("strict", bytes(5000)).get(10)
        assert e.value.error is Errors.MESSAGE_TOO_LARGE


def test_connect_to_an_empty_namespace_says_so(ray_session):
    with pytest.raises(DeploymentNotFound, match="no shoal deployment in namespace 'nobody-here'"):
        Cluster.connect(namespace="nobody-here")


def test_retention_advances_the_log_start(cluster):
    cluster.create_topic("short", 1, {"segment.bytes": 2000, "retention.bytes": 4000})
    with cluster.producer(linger_ms=0, batch_size=1) as producer:
        for i in range(30):
            producer.send("short", bytes(300)).get(10)
    leader = cluster.partition_leader("short", 0)
    deleted = ray.get(leader.apply_retention.remote())
    assert deleted
    start = ray.get(leader.list_offsets.remote(ListOffsetsRequest("short", 0, EARLIEST_TIMESTAMP))).offset
    assert start > 0
    r = ray.get(leader.fetch.remote(FetchRequest("short", 0, 0, max_wait_ms=0)))
    assert r.error_code == Errors.OFFSET_OUT_OF_RANGE.code
    assert fetch_all(cluster, "short", 0, start)[0].offset == start


def test_delete_topic_removes_it_and_its_data(cluster):
    cluster.create_topic("doomed", 2)
    with cluster.producer() as producer:
        producer.send("doomed", b"x", partition=1).get(10)
    cluster.delete_topic("doomed")
    assert "doomed" not in cluster.list_topics()
    cluster.create_topic("doomed", 1)
    assert fetch_all(cluster, "doomed", 0) == []


def test_restart_of_every_actor_keeps_topics_and_data(cluster):
    cluster.create_topic("durable", 2)
    with cluster.producer() as producer:
        for i in range(20):
            producer.send("durable", f"d{i}".encode(), partition=i % 2)
        producer.flush()
    before = {p: [r.value for r in fetch_all(cluster, "durable", p)] for p in range(2)}
    # Every server actor (clients are the users' processes and are not restarted by Ray).
    servers = [n for n in cluster.actors() if "-client/" not in n]
    pids = {s["actor"]: s["pid"] for s in cluster.status() if s["actor"] in servers}
    for name in servers:
        ray.kill(ray.get_actor(name, namespace=cluster.namespace), no_restart=False)

    def restarted():
        states = [s for s in cluster.status() if s["actor"] in servers]
        return len(states) == len(servers) and all(s.get("pid") not in (None, pids[s["actor"]]) for s in states)

    wait_until(restarted, 180, message="every server actor restarted")
    assert "durable" in cluster.list_topics()
    after = {p: [r.value for r in fetch_all(cluster, "durable", p)] for p in range(2)}
    assert after == before and sum(map(len, after.values())) == 20
