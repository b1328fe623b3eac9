"""kafka-python 3.0, unmodified, against the gateway: produce then consume with every
codec (keys, values, headers, timestamps, idempotence), a consumer group of two consumers
that split a topic and commit, and a topic created through its admin client."""
import threading

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

from runtime.errors import Errors
from tests.conftest import wait_until
from tests.gateway.raw import RawClient

pytestmark = pytest.mark.ray

CODECS = [None, "gzip", "snappy", "lz4", "zstd"]


def produce(bootstrap, topic, count, **config):
    producer = KafkaProducer(bootstrap_servers=bootstrap, **config)
    try:
        futures = [producer.send(topic, key=b"k%d" % i, value=b"v%d" % i, headers=[("n", b"%d" % i), ("empty", b"")],
                                 partition=i % 2, timestamp_ms=1700000000000 + i) for i in range(count)]
        producer.flush(30)
        return [f.get(10) for f in futures]
    finally:
        producer.close()


def consume_all(bootstrap, topic, partitions, count):
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=500)
    consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
    got = []
    try:
        wait_until(lambda: got.extend(consumer) or len(got) >= count, timeout_s=60, message=f"{count} records")
    finally:
        consumer.close()
    return got


@pytest.mark.parametrize("codec", CODECS)
def test_produce_then_consume_with_every_codec(cluster, bootstrap, codec):
    topic = f"codec-{codec}"
    cluster.create_topic(topic, 2)
    sent = produce(bootstrap, topic, 20, compression_type=codec, enable_idempotence=True)
    assert sorted((m.partition, m.offset) for m in sent) == sorted((i % 2, i // 2) for i in range(20))
    got = consume_all(bootstrap, topic, 2, 20)
    assert sorted((r.key, r.value, r.timestamp, r.headers, r.partition, r.offset) for r in got) == sorted(
        (b"k%d" % i, b"v%d" % i, 1700000000000 + i, [("n", b"%d" % i), ("empty", b"")], i % 2, i // 2)
        for i in range(20))


def test_acks_0_and_1_are_written(cluster, bootstrap):
    cluster.create_topic("acks", 2)
    produce(bootstrap, "acks", 4, acks=0)
    produce(bootstrap, "acks", 4, acks=1)
    assert len(consume_all(bootstrap, "acks", 2, 8)) == 8


def test_a_group_of_two_consumers_splits_a_topic_and_commits(cluster, bootstrap):
    cluster.create_topic("grouped", 4)
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for i in range(40):
        producer.send("grouped", value=b"%d" % i, partition=i % 4)
    producer.flush(30)
    producer.close()
    consumers = [KafkaConsumer("grouped", bootstrap_servers=bootstrap, group_id="pair", auto_offset_reset="earliest",
                               enable_auto_commit=False, session_timeout_ms=10000, heartbeat_interval_ms=500)
                 for _ in range(2)]
    try:
        # One thread per consumer, as applications run them: kafka-python 3.0 drops a
        # JoinGroup answer that lands after its poll() returned and joins again, so a leader
        # polled in turn with another from one thread would miss its answer in every
        # generation and, rejoining as the leader (Kafka's rule), rebalance the group again.
        seen = {}
        lock = threading.Lock()
        done = threading.Event()

        def poll_loop(c):
            while not done.is_set():
                for tp, records in c.poll(timeout_ms=200).items():
                    with lock:
                        for r in records:
                            seen[(tp.partition, r.offset)] = c
        threads = [threading.Thread(target=poll_loop, args=(c,), daemon=True) for c in consumers]
        for t in threads:
            t.start()

        def split_and_read():
            with lock:
                assignments = [c.assignment() for c in consumers]
                state["now"] = ([sorted(tp.partition for tp in a) for a in assignments], len(seen))
                return (all(len(a) == 2 for a in assignments) and not assignments[0] & assignments[1]
                        and len(seen) == 40)
        state = {}
        try:
            wait_until(split_and_read, timeout_s=120, message="two consumers sharing four partitions")
        except AssertionError as e:
            raise AssertionError(f"{e}: assignments and records seen {state['now']}") from None
        finally:
            done.set()
            for t in threads:
                t.join(10)
        for c in consumers:
            assert {tp.partition for tp in c.assignment()} == \
                {p for (p, _), owner in seen.items() if owner is c}
            c.commit()
        for p in range(4):
            assert consumers[0].committed(TopicPartition("grouped", p)) == 10
    finally:
        for c in consumers:
            c.close()
    # A new member of the group starts where the group committed: nothing left to read.
    late = KafkaConsumer("grouped", bootstrap_servers=bootstrap, group_id="pair")
    try:
        wait_until(lambda: late.poll(timeout_ms=200) == {} and len(late.assignment()) == 4, timeout_s=60,
                   message="the new member assigned every partition")
        assert {late.position(tp) for tp in late.assignment()} == {10}
    finally:
        late.close()


def test_create_topics_through_the_admin_client(cluster, bootstrap):
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic("made-by-admin", num_partitions=3, replication_factor=1)])
    finally:
        admin.close()
    assert cluster.describe_topic("made-by-admin").partitions == 3
    produce(bootstrap, "made-by-admin", 2)
    assert len(consume_all(bootstrap, "made-by-admin", 2, 2)) == 2


def test_list_offsets_from_the_beginning_and_the_end(cluster, bootstrap):
    cluster.create_topic("offsets", 2)
    produce(bootstrap, "offsets", 6)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        tps = [TopicPartition("offsets", p) for p in range(2)]
        assert consumer.beginning_offsets(tps) == {tp: 0 for tp in tps}
        assert consumer.end_offsets(tps) == {tp: 3 for tp in tps}
        found = consumer.offsets_for_times({tps[0]: 1700000000002})
        assert found[tps[0]].offset == 1
    finally:
        consumer.close()


def test_kafka_python_takes_the_gateway_for_kafka_4_2(bootstrap):
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        assert consumer.config["api_version"] == (4, 2)  # from ApiVersions: ListOffsets v11
    finally:
        consumer.close()


@pytest.mark.parametrize("timestamp,version,expected", [
    (-4, 8, 2),    # EARLIEST_LOCAL: every log is local, so the log start
    (-5, 9, -1),   # LATEST_TIERED: nothing is tiered
    (-6, 11, -1),  # EARLIEST_PENDING_UPLOAD: nothing waits for an upload
    (-3, 7, 4),    # MAX_TIMESTAMP: the record with the largest timestamp
])
def test_list_offsets_special_timestamps_answered_as_by_a_broker_without_tiered_storage(
        cluster, bootstrap, timestamp, version, expected):
    topic = f"special{-timestamp}"
    cluster.create_topic(topic, 2)
    produce(bootstrap, topic, 10)  # offsets 0-4 of partition 0 carry timestamps 0, 2, 4, 6, 8 past the base
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.delete_records({TopicPartition(topic, 0): 2})
    finally:
        admin.close()
    raw = RawClient(bootstrap)

    def list_offset(version):
        r = raw.request(2, version, {"replica_id": -1, "isolation_level": 0, "timeout": 5000, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                            "timestamp": timestamp}]}]})
        (part,) = r["topics"][0]["partitions"]
        return part["error_code"], part["offset"]
    try:
        assert list_offset(version) == (0, expected)
        # a version before the one that brought the timestamp does not know it (Kafka's check)
        assert list_offset(version - 1) == (Errors.UNSUPPORTED_VERSION.code, -1)
    finally:
        raw.close()


def test_shoal_clients_and_kafka_python_read_each_other(cluster, bootstrap):
    cluster.create_topic("mixed", 1)
    ours = cluster.producer()
    try:
        ours.send("mixed", b"from-shoal", key=b"s", headers=[("h", b"1")], partition=0,
                  timestamp_ms=1700000000100).get(30)
    finally:
        ours.close()
    theirs = KafkaProducer(bootstrap_servers=bootstrap)
    try:
        theirs.send("mixed", b"from-kafka-python", key=b"k", headers=[("h", b"2")], partition=0,
                    timestamp_ms=1700000000200).get(30)
    finally:
        theirs.close()
    expected = [(b"s", b"from-shoal", [("h", b"1")], 1700000000100),
                (b"k", b"from-kafka-python", [("h", b"2")], 1700000000200)]
    got = consume_all(bootstrap, "mixed", 1, 2)
    assert [(r.key, r.value, list(r.headers), r.timestamp) for r in got] == expected
    consumer = cluster.consumer(auto_offset_reset="earliest")
    try:
        consumer.assign([("mixed", 0)])
        records = []
        wait_until(lambda: records.extend(r for rs in consumer.poll(timeout_ms=500).values() for r in rs)
                   or len(records) >= 2, timeout_s=60, message="shoal's consumer reads both")
        assert [(r.key, r.value, [tuple(h) for h in r.headers], r.timestamp) for r in records] == expected
    finally:
        consumer.close()


def test_status_lists_the_gateway_at_its_address(cluster, bootstrap):
    rows = {row["actor"]: row for row in cluster.status()}
    assert rows["shoal/gateway/0"]["state"] == "active"
    assert rows["shoal/gateway/0"]["name"] == f"gateway {bootstrap}"


def test_admin_client_lists_and_describes_a_group(cluster, bootstrap):
    cluster.create_topic("watched", 2)
    consumer = KafkaConsumer("watched", bootstrap_servers=bootstrap, group_id="described")
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        wait_until(lambda: consumer.poll(timeout_ms=200) == {} and len(consumer.assignment()) == 2, timeout_s=60,
                   message="the consumer assigned both partitions")
        listed = admin.list_groups()
        assert {(g["group_id"], g["protocol_type"]) for g in listed} >= {("described", "consumer")}
        described = admin.describe_groups(["described"])
        group = described["described"]
        assert (group["group_state"], group["protocol_type"], group["protocol_data"]) == ("Stable", "consumer", "range")
        [member] = group["members"]
        assert member["member_metadata"]["topics"] == ["watched"]
        assert member["member_assignment"]["assigned_partitions"] == [{"topic": "watched", "partitions": [0, 1]}]
    finally:
        admin.close()
        consumer.close()
