"""Incremental fetch sessions (KIP-227) on the wire, with kio-built requests: a session
answers only partitions where something changed, forgets what it is told to, closes on
epoch -1; unknown sessions and wrong epochs get Kafka's errors and change nothing; the
cache's limit leaves extra clients sessionless; topic ids from Fetch v13 and Produce v13;
and kafka-python's consumer, which fetches in a session, reads everything."""
import time

import pytest
import ray
from kafka import KafkaConsumer, KafkaProducer

from actors import naming
from runtime.errors import Errors
from runtime.wire.records import decode_batches, encode_batch
from tests.helpers import produce_record_through_gateway

from .raw import RawClient

pytestmark = pytest.mark.ray

CLUSTER_CONFIG = {"max.incremental.fetch.session.cache.slots": 3}
UNKNOWN_ID = "00000000-0000-0000-0000-00000000abcd"


@pytest.fixture
def conn(bootstrap):
    """A raw connection; the session it last opened is closed at the end, so that the
    module's tests do not fill the small session cache."""
    c = RawClient(bootstrap)
    c.opened = None
    yield c
    if c.opened:
        fetch(c, *c.opened)
    c.close()


def fetch(conn, topic, partitions, session_id=0, epoch=-1, forgotten=(), version=12, max_wait_ms=0, offsets=None):
    topic_field = "topic_id" if version >= 13 else "topic"
    response = conn.request(1, version, {
        "replica_id": -1, "max_wait": max_wait_ms, "min_bytes": 1, "max_bytes": 50 << 20, "isolation_level": 0,
        "session_id": session_id, "session_epoch": epoch, "rack_id": "",
        "topics": [{topic_field: topic, "partitions": [
            {"partition": p, "fetch_offset": (offsets or {}).get(p, 0), "partition_max_bytes": 1 << 20}
            for p in partitions]}] if partitions else [],
        "forgotten_topics_data": [{topic_field: topic, "partitions": list(forgotten)}] if forgotten else []})
    if response.get("session_id") and epoch == 0:
        conn.opened = (topic, [], response["session_id"], -1, (), version)
    return response


def answered(response):
    """{partition: record count} of what a fetch response holds."""
    return {p["partition_index"]: sum(len(b.records) for b in decode_batches(p["records"]))
            for t in response["responses"] for p in t["partitions"]}


def topic_id(conn, topic):
    (t,) = conn.request(3, 12, {"topics": [{"name": topic, "topic_id": "00000000-0000-0000-0000-000000000000"}], "allow_auto_topic_creation": False,
                                "include_topic_authorized_operations": False})["topics"]
    return t["topic_id"]


def gateway_status(cluster):
    return ray.get(cluster._actor(naming.gateway(0)).status.remote(), timeout=30)


def test_an_incremental_fetch_answers_only_partitions_that_changed(cluster, bootstrap, conn):
    cluster.create_topic("inc", 3)
    produce_record_through_gateway(bootstrap, "inc", 0)
    full = fetch(conn, "inc", [0, 1, 2], epoch=0)
    assert full["error_code"] == 0 and full["session_id"] > 0
    assert answered(full) == {0: 1, 1: 0, 2: 0}
    sid = full["session_id"]
    # The client moves partition 0 past its record; nothing else changed.
    quiet = fetch(conn, "inc", [0], sid, 1, offsets={0: 1})
    assert quiet["error_code"] == 0 and quiet["session_id"] == sid and answered(quiet) == {}
    produce_record_through_gateway(bootstrap, "inc", 2)
    assert answered(fetch(conn, "inc", [], sid, 2)) == {2: 1}


def test_the_long_poll_of_a_session_waits_for_a_partition_it_names_no_more(cluster, bootstrap, conn):
    cluster.create_topic("poll-session", 2)
    sid = fetch(conn, "poll-session", [0, 1], epoch=0)["session_id"]
    start = time.monotonic()
    assert answered(fetch(conn, "poll-session", [], sid, 1, max_wait_ms=1000)) == {}
    assert time.monotonic() - start >= 0.9


def test_forgotten_partitions_are_no_longer_read(cluster, bootstrap, conn):
    cluster.create_topic("forget", 2)
    sid = fetch(conn, "forget", [0, 1], epoch=0)["session_id"]
    assert fetch(conn, "forget", [], sid, 1, forgotten=[0])["error_code"] == 0
    produce_record_through_gateway(bootstrap, "forget", 0)
    produce_record_through_gateway(bootstrap, "forget", 1)
    assert answered(fetch(conn, "forget", [], sid, 2)) == {1: 1}


def test_epoch_minus_one_closes_the_session(cluster, bootstrap, conn):
    cluster.create_topic("close", 1)
    sid = fetch(conn, "close", [0], epoch=0)["session_id"]
    closing = fetch(conn, "close", [0], sid, -1)
    assert closing["error_code"] == 0 and closing["session_id"] == 0 and answered(closing) == {0: 0}
    assert fetch(conn, "close", [], sid, 1)["error_code"] == Errors.FETCH_SESSION_ID_NOT_FOUND.code


def test_session_errors_answer_nothing_and_change_nothing(cluster, bootstrap, conn):
    cluster.create_topic("errs", 2)
    unknown = fetch(conn, "errs", [0], 987654, 1)
    assert unknown["error_code"] == Errors.FETCH_SESSION_ID_NOT_FOUND.code and unknown["responses"] == []
    sid = fetch(conn, "errs", [0, 1], epoch=0)["session_id"]
    wrong = fetch(conn, "errs", [], sid, 5, forgotten=[0, 1])
    assert wrong["error_code"] == Errors.INVALID_FETCH_SESSION_EPOCH.code and wrong["responses"] == []
    produce_record_through_gateway(bootstrap, "errs", 0)
    # Epoch 1 still works, and forgot nothing.
    assert answered(fetch(conn, "errs", [], sid, 1)) == {0: 1}


def test_topic_ids_from_fetch_and_produce_v13(cluster, bootstrap, conn):
    cluster.create_topic("ids", 1)
    tid = topic_id(conn, "ids")
    produced = conn.request(0, 13, {"transactional_id": None, "acks": -1, "timeout": 30000, "topic_data": [
        {"topic_id": tid, "partition_data": [{"index": 0, "records": encode_batch([(1234, b"k", b"v", ())])}]},
        {"topic_id": UNKNOWN_ID, "partition_data": [{"index": 0, "records": encode_batch([(1, None, b"v", ())])}]}]})
    codes = {t["topic_id"]: t["partition_responses"][0]["error_code"] for t in produced["responses"]}
    assert codes == {tid: 0, UNKNOWN_ID: Errors.UNKNOWN_TOPIC_ID.code}
    full = fetch(conn, tid, [0], epoch=0, version=18)
    [batch] = decode_batches(full["responses"][0]["partitions"][0]["records"])
    assert full["responses"][0]["topic_id"] == tid
    assert [(r.key, r.value, r.timestamp) for r in batch.records] == [(b"k", b"v", 1234)]
    # A session opened with topic ids is not continued with names.
    mixed = fetch(conn, "ids", [], full["session_id"], 1, version=12)
    assert mixed["error_code"] == Errors.FETCH_SESSION_TOPIC_ID_ERROR.code
    [unknown] = fetch(conn, UNKNOWN_ID, [0], version=18)["responses"]
    assert unknown["partitions"][0]["error_code"] == Errors.UNKNOWN_TOPIC_ID.code


def test_a_full_cache_leaves_new_clients_without_a_session(cluster, bootstrap):
    cluster.create_topic("slots", 1)
    conns = [RawClient(bootstrap) for _ in range(4)]
    for c in conns:
        c.opened = None
    try:
        ids = [fetch(c, "slots", [0], epoch=0)["session_id"] for c in conns]
        # Three slots, all young: the fourth client is served, without a session.
        assert all(ids[:3]) and ids[3] == 0
        assert gateway_status(cluster)["fetch_sessions"] == 3
    finally:
        for c in conns:
            if c.opened:
                fetch(c, *c.opened)
            c.close()


def test_kafka_python_reads_everything_through_a_session(cluster, bootstrap):
    cluster.create_topic("kp-session", 4)
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    consumer = KafkaConsumer("kp-session", bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             fetch_max_wait_ms=100, consumer_timeout_ms=30000)
    try:
        seen = []
        for batch in range(3):
            for i in range(40):
                producer.send("kp-session", f"{batch}-{i}".encode(), partition=i % 4)
            producer.flush()
            deadline = time.monotonic() + 30
            while len(seen) < 40 * (batch + 1) and time.monotonic() < deadline:
                for records in consumer.poll(timeout_ms=500).values():
                    seen += [r.value for r in records]
            assert gateway_status(cluster)["fetch_sessions"] >= 1  # the consumer fetches in a session
        assert sorted(seen) == sorted(f"{b}-{i}".encode() for b in range(3) for i in range(40))
    finally:
        consumer.close()
        producer.close()


@pytest.mark.parametrize("version", [4, 7, 12, 13, 18])
def test_every_served_fetch_version_reads_without_a_session(cluster, bootstrap, conn, version):
    topic = f"versions-{version}"
    cluster.create_topic(topic, 1)
    produce_record_through_gateway(bootstrap, topic, 0, b"v")
    key = topic_id(conn, topic) if version >= 13 else topic
    response = fetch(conn, key, [0], version=version)
    assert response.get("session_id", 0) == 0 and answered(response) == {0: 1}
