"""aiokafka 0.14, unmodified, against the gateway: produce with lz4, then a consumer group
reads everything back and commits."""
import asyncio

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

pytestmark = pytest.mark.ray


async def produce_and_consume(bootstrap, topic):
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, compression_type="lz4", enable_idempotence=True)
    await producer.start()
    try:
        for i in range(20):
            await producer.send_and_wait(topic, b"v%d" % i, key=b"k%d" % i, partition=i % 2,
                                         headers=[("h", b"%d" % i)], timestamp_ms=1700000000000 + i)
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id="aio", auto_offset_reset="earliest",
                                enable_auto_commit=False)
    await consumer.start()
    got = []
    try:
        async def read():
            while len(got) < 20:
                for records in (await consumer.getmany(timeout_ms=500)).values():
                    got.extend(records)
        await asyncio.wait_for(read(), 60)
        await consumer.commit()
        committed = [await consumer.committed(TopicPartition(topic, p)) for p in range(2)]
    finally:
        await consumer.stop()
    return got, committed


def test_aiokafka_produces_and_consumes_in_a_group(cluster, bootstrap):
    cluster.create_topic("aio", 2)
    got, committed = asyncio.run(produce_and_consume(bootstrap, "aio"))
    assert sorted((r.key, r.value, list(r.headers), r.timestamp) for r in got) == sorted(
        (b"k%d" % i, b"v%d" % i, [("h", b"%d" % i)], 1700000000000 + i) for i in range(20))
    assert committed == [10, 10]
