"""confluent-kafka 2.16 (librdkafka), unmodified, against the gateway: produce with every
codec, then a classic consumer group reads it all back and commits."""

import confluent_kafka as ck
import pytest

from actors import naming

from tests.conftest import wait_until

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
