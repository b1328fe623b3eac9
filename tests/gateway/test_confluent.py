"""confluent-kafka 2.16 (librdkafka), unmodified, against the gateway: produce with every
codec, then a classic consumer group reads it all back and commits."""

import confluent_kafka as ck
import pytest

from actors import naming

from tests.conftest import wait_until
from tests.helpers import read_partition

pytestmark = pytest.mark.ray


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_produce_and_consume_in_a_group(cluster, bootstrap, codec):
    topic = f"rd-{codec}"
    cluster.create_topic(topic, 2)
    producer = ck.Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 5,
                            "enable.idempotence": True})
    delivered = []
    for i in range(30):
        producer.produce(topic, key=b"k%d" % i, value=b"v%d" % i, headers=[("h", b"%d" % i)], partition=i % 2,
                         timestamp=1700000000000 + i,
                         on_delivery=lambda err, msg: delivered.append((err, msg.partition(), msg.offset())))
    assert producer.flush(30) == 0
    assert all(err is None for err, _, _ in delivered) and len(delivered) == 30

    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{codec}",
                            "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    got = []
    try:
        def read():
            m = consumer.poll(0.5)
            if m is not None and not m.error():
                got.append(m)
            return len(got) >= 30
        wait_until(read, timeout_s=60, interval_s=0, message="30 records")
        assert sorted((m.key(), m.value(), m.headers(), m.timestamp()[1]) for m in got) == sorted(
            (b"k%d" % i, b"v%d" % i, [("h", b"%d" % i)], 1700000000000 + i) for i in range(30))
        committed = consumer.commit(asynchronous=False)
        assert sorted((tp.partition, tp.offset) for tp in committed) == [(0, 15), (1, 15)]
        assert sorted(tp.offset for tp in consumer.committed(
            [ck.TopicPartition(topic, 0), ck.TopicPartition(topic, 1)], timeout=10)) == [15, 15]
    finally:
        consumer.close()


def test_pipelined_produces_of_one_connection_keep_their_order(cluster, bootstrap):
    """A non-idempotent producer with many produces in flight on one connection: Kafka serves a
    connection's requests one after another, so a partition keeps the order they were sent in.
    The gateway sends them on in order, those that wait gathered into fewer Ray calls."""
    topic = "rd-order"
    cluster.create_topic(topic, 1)
    before = _produces(cluster)
    producer = ck.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": False, "linger.ms": 0,
                            "batch.num.messages": 1, "max.in.flight.requests.per.connection": 50, "acks": "all"})
    delivered = []
    for i in range(1000):
        producer.produce(topic, value=b"%d" % i, partition=0,
                         on_delivery=lambda err, msg: delivered.append((err, msg.offset(), int(msg.value()))))
        producer.poll(0)
    assert producer.flush(60) == 0
    assert all(err is None for err, _, _ in delivered) and len(delivered) == 1000
    assert [value for _, offset, value in sorted(delivered, key=lambda d: d[1])] == list(range(1000))
    after = _produces(cluster)
    assert after["calls"] - before["calls"] == 1000
    assert after["batches"] - before["batches"] < 1000


def _produces(cluster) -> dict:
    [gateway] = [s for s in cluster.status() if s["actor"] == naming.gateway(0)]
    return gateway["produces"]


def test_a_topic_named_in_metadata_that_does_not_exist_is_created_when_the_client_allows(cluster, bootstrap):
    from tests.gateway.raw import RawClient
    raw = RawClient(bootstrap)
    try:
        def ask(topic, allow):
            (t,) = raw.request(3, 12, {"topics": [{"name": topic, "topic_id": "00000000-0000-0000-0000-000000000000"}],
                                       "allow_auto_topic_creation": allow,
                                       "include_topic_authorized_operations": False})["topics"]
            return t
        # not allowed by the request: unknown, and nothing is made
        assert ask("auto-not", False)["error_code"] == 3  # UNKNOWN_TOPIC_OR_PARTITION
        assert "auto-not" not in cluster.list_topics()
        # allowed: made with num.partitions (1), its leader in the same answer
        made = ask("auto-made", True)
        assert made["error_code"] == 0 and [p["partition_index"] for p in made["partitions"]] == [0]
        assert ask("auto-made", True)["topic_id"] == made["topic_id"]  # asked again: the same topic
        # an invalid name is not made: Kafka's INVALID_TOPIC_EXCEPTION
        assert ask("bad/name", True)["error_code"] == 17
        assert "bad/name" not in cluster.list_topics()
    finally:
        raw.close()
    # A Kafka producer's first send to a new topic makes it, and the record is there.
    producer = ck.Producer({"bootstrap.servers": bootstrap})
    delivered = []
    producer.produce("auto-by-producer", b"v", on_delivery=lambda err, msg: delivered.append((err, msg.offset())))
    assert producer.flush(30) == 0 and delivered == [(None, 0)]
    assert cluster.describe_topics(["auto-by-producer"])[0].partitions == 1


def test_an_offset_commit_naming_a_missing_topic_fails_there_and_commits_the_rest(cluster, bootstrap):
    """Kafka answers UNKNOWN_TOPIC_OR_PARTITION for the partitions of a topic it does not have
    and commits the others of the same request (librdkafka's 0030_offset_commit relies on it);
    the missing topic is not created by the commit."""
    cluster.create_topic("commit-known", 1)
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "commit-missing",
                            "enable.auto.commit": False, "allow.auto.create.topics": False})
    try:
        answered = consumer.commit(offsets=[ck.TopicPartition("commit-known", 0, 5),
                                            ck.TopicPartition("commit-missing", 0, 7),
                                            ck.TopicPartition("commit-missing", 1, 7)], asynchronous=False)
    except ck.KafkaException as e:  # the commit as a whole reports its first error
        assert e.args[0].code() == ck.KafkaError.UNKNOWN_TOPIC_OR_PART
    else:
        errors = {(tp.topic, tp.partition): tp.error and tp.error.code() for tp in answered}
        assert errors == {("commit-known", 0): None, ("commit-missing", 0): ck.KafkaError.UNKNOWN_TOPIC_OR_PART,
                          ("commit-missing", 1): ck.KafkaError.UNKNOWN_TOPIC_OR_PART}
    finally:
        consumer.close()
    offsets = cluster.admin().list_group_offsets("commit-missing")
    assert {(tp.topic, tp.partition): o.committed_offset for tp, o in offsets.items()} == {("commit-known", 0): 5}
    assert "commit-missing" not in cluster.list_topics()


def test_a_transactional_offset_commit_naming_a_missing_topic_fails_there(cluster, bootstrap):
    cluster.create_topic("txn-commit-known", 1)
    producer = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": "txn-commit-missing"})
    producer.init_transactions(30)
    producer.begin_transaction()
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "txn-commit-missing",
                            "enable.auto.commit": False})
    try:
        with pytest.raises(ck.KafkaException) as failed:
            producer.send_offsets_to_transaction([ck.TopicPartition("txn-commit-known", 0, 3),
                                                  ck.TopicPartition("txn-commit-missing", 0, 3)],
                                                 consumer.consumer_group_metadata(), 3)
        assert failed.value.args[0].code() == ck.KafkaError.UNKNOWN_TOPIC_OR_PART
        producer.abort_transaction(30)
    finally:
        consumer.close()
    assert cluster.admin().list_group_offsets("txn-commit-missing") == {}


@pytest.mark.parametrize("one_batch", [True, False])
def test_a_compacted_topic_refuses_records_without_key_and_takes_the_rest(cluster, bootstrap, one_batch):
    """KIP-467 as librdkafka's 0011_produce_batch checks it: a record without a key on a
    compacted topic fails with INVALID_RECORD; in one batch with it, the others fail as
    _INVALID_DIFFERENT_RECORD (the record errors tell them apart); sent alone, they are written."""
    topic = f"compacted-{one_batch}"
    cluster.create_topic(topic, 1, {"cleanup.policy": "compact"})
    producer = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 100 if one_batch else 0,
                            "batch.num.messages": 100 if one_batch else 1, "retries": 0})
    outcomes = {}
    for i in range(10):
        producer.produce(topic, key=None if i % 5 == 0 else b"k%d" % i, value=b"v%d" % i, partition=0,
                         on_delivery=lambda err, msg: outcomes.__setitem__(msg.value(), err and err.code()))
        if not one_batch:
            producer.flush(30)
    assert producer.flush(30) == 0
    keyless = {b"v0", b"v5"}
    assert {v for v, code in outcomes.items() if code == ck.KafkaError.INVALID_RECORD} == keyless
    others = {v: code for v, code in outcomes.items() if v not in keyless}
    if one_batch:
        assert set(others.values()) == {ck.KafkaError._INVALID_DIFFERENT_RECORD}
        assert read_partition(cluster, topic, 0) == []
    else:
        assert set(others.values()) == {None}
        assert sorted(v for _, v in read_partition(cluster, topic, 0)) == sorted(others)
