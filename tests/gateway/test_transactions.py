"""Transactions through the gateway with Kafka's own clients, unmodified: confluent-kafka's and
aiokafka's transactional producers commit and abort, a newer instance fences a zombie,
consume-transform-produce sends its offsets in the transaction, and read_committed
consumers of kafka-python, aiokafka and confluent-kafka see committed records only."""
import asyncio

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from tests.conftest import wait_until

CLUSTER_CONFIG = {"transaction.state.log.num.partitions": 1}


def txn_producer(bootstrap, tid):
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 5})
    p.init_transactions(30)
    return p


def read_committed(bootstrap, topic, count, group):
    """What a confluent read_committed consumer reads, once `count` records came."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  "isolation.level": "read_committed", "enable.auto.commit": False})
    got = []
    try:
        c.subscribe([topic])

        def step():
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
            return len(got) >= count
        wait_until(step, timeout_s=60, interval_s=0, message=f"{count} committed records")
        # Nothing past them: the aborted records never come.
        assert all(m is None or m.error() is not None for m in (c.poll(0.5) for _ in range(3)))
    finally:
        c.close()
    return got


def test_commit_and_abort_then_read_committed_by_three_clients(cluster, bootstrap):
    cluster.create_topic("tx1", 2)
    p = txn_producer(bootstrap, "tx-a")
    p.begin_transaction()
    for i in range(4):
        p.produce("tx1", f"kept{i}".encode(), partition=i % 2)
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(4):
        p.produce("tx1", f"dropped{i}".encode(), partition=i % 2)
    p.abort_transaction(30)
    p.begin_transaction()
    p.produce("tx1", b"last", partition=0)
    p.commit_transaction(30)
    want = sorted([f"kept{i}".encode() for i in range(4)] + [b"last"])
    assert sorted(read_committed(bootstrap, "tx1", 5, "rc-confluent")) == want

    from kafka import KafkaConsumer
    kp = KafkaConsumer("tx1", bootstrap_servers=bootstrap, group_id="rc-kp", auto_offset_reset="earliest",
                       isolation_level="read_committed", enable_auto_commit=False)
    got = []
    try:
        wait_until(lambda: got.extend(r.value for rs in kp.poll(500).values() for r in rs) or len(got) >= 5,
                   timeout_s=60, message="5 committed records")
        assert not any(kp.poll(500).values())
    finally:
        kp.close()
    assert sorted(got) == want

    async def aio():
        from aiokafka import AIOKafkaConsumer
        c = AIOKafkaConsumer("tx1", bootstrap_servers=bootstrap, group_id="rc-aio", auto_offset_reset="earliest",
                             isolation_level="read_committed", enable_auto_commit=False)
        await c.start()
        out = []
        try:
            while len(out) < 5:
                batches = await c.getmany(timeout_ms=500)
                out.extend(r.value for rs in batches.values() for r in rs)
        finally:
            await c.stop()
        return out
    assert sorted(asyncio.run(asyncio.wait_for(aio(), 60))) == want

    (state,) = cluster.describe_transactions(["tx-a"])
    assert state.transaction_state == "CompleteCommit"
    p.flush(10)


def test_a_newer_instance_fences_the_zombie(cluster, bootstrap):
    cluster.create_topic("tx2", 1)
    old = txn_producer(bootstrap, "tx-z")
    old.begin_transaction()
    old.produce("tx2", b"zombie")
    old.flush(10)
    new = txn_producer(bootstrap, "tx-z")  # fences the old one and aborts its transaction
    new.begin_transaction()
    new.produce("tx2", b"fresh")
    new.commit_transaction(30)
    with pytest.raises(KafkaException) as e:
        old.commit_transaction(30)
    assert e.value.args[0].fatal() or "fenced" in str(e.value).lower()
    assert read_committed(bootstrap, "tx2", 1, "rc-z") == [b"fresh"]


def test_consume_transform_produce_sends_its_offsets_in_the_transaction(cluster, bootstrap):
    cluster.create_topic("ctp-in", 1)
    cluster.create_topic("ctp-out", 1)
    seed = Producer({"bootstrap.servers": bootstrap})
    for i in range(10):
        seed.produce("ctp-in", f"{i}".encode())
    assert seed.flush(30) == 0
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "ctp", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "isolation.level": "read_committed"})
    p = txn_producer(bootstrap, "tx-ctp")
    try:
        c.subscribe(["ctp-in"])
        done = 0
        while done < 10:
            batch = [m for m in c.consume(10, 1.0) if m.error() is None]
            if not batch:
                continue
            p.begin_transaction()
            for m in batch:
                p.produce("ctp-out", str(int(m.value()) * 10).encode())
            p.send_offsets_to_transaction(c.position(c.assignment()), c.consumer_group_metadata(), 30)
            p.commit_transaction(30)
            done += len(batch)
        committed = c.committed([TopicPartition("ctp-in", 0)], 30)
    finally:
        c.close()
    assert committed[0].offset == 10  # the offsets came with the transaction
    assert sorted(int(v) for v in read_committed(bootstrap, "ctp-out", 10, "rc-ctp")) == [i * 10 for i in range(10)]


def test_aiokafka_transactional_producer_commits_and_aborts(cluster, bootstrap):
    cluster.create_topic("tx3", 1)

    async def run():
        from aiokafka import AIOKafkaProducer
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id="tx-aio")
        await p.start()
        try:
            async with p.transaction():
                await p.send_and_wait("tx3", b"aio-kept")
            await p.begin_transaction()
            await p.send_and_wait("tx3", b"aio-dropped")
            await p.abort_transaction()
        finally:
            await p.stop()
    asyncio.run(asyncio.wait_for(run(), 60))
    assert read_committed(bootstrap, "tx3", 1, "rc-aio3") == [b"aio-kept"]
