"""A consume-transform-produce worker with Kafka's exactly-once recipe, in its own process so a
test can SIGKILL it: `python -m tests.gateway.ctp_worker CLIENT BOOTSTRAP GROUP IN OUT TXN_ID`.

CLIENT is confluent or aiokafka. It reads IN (read_committed, a member of GROUP), writes
each record to OUT keyed "partition:offset" of its input, and commits the output and the
input offsets in one transaction (send_offsets_to_transaction). An abortable error aborts and
rewinds to the committed offsets; a fenced producer exits (a newer instance has its id).

confluent-kafka sends its consumer's group metadata with the offsets (KIP-447), so the group
coordinator fences a transaction of a member whose partitions moved on. aiokafka sends the
group id alone, so its worker follows the recipe from before KIP-447: a partition is given up
(on_partitions_revoked) only once the transaction that read from it has ended; otherwise the
member that takes it over reads from the offsets committed before that transaction, and both
commit the same inputs, which Kafka would accept as well.
"""
import asyncio
import sys

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

SESSION = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 500}


def confluent(bootstrap: str, group: str, source: str, sink: str, txn_id: str) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "isolation.level": "read_committed", **SESSION})
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5,
                         "transaction.timeout.ms": 20000})
    producer.init_transactions(60)
    consumer.subscribe([source])
    while True:
        batch = [m for m in consumer.consume(50, 0.5) if m.error() is None]
        if not batch:
            continue
        producer.begin_transaction()
        try:
            for m in batch:
                producer.produce(sink, m.value(), key=f"{m.partition()}:{m.offset()}".encode())
            producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                                 consumer.consumer_group_metadata(), 60)
            producer.commit_transaction(60)
        except KafkaException as e:
            if not e.args[0].txn_requires_abort():
                raise  # fenced, or fatal: the test starts a new instance
            producer.abort_transaction(60)
            parts = consumer.committed(consumer.assignment(), 60)
            for tp in parts:
                consumer.seek(TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else 0))


async def aiokafka(bootstrap: str, group: str, source: str, sink: str, txn_id: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener

    in_transaction = asyncio.Lock()

    class EndTransactionFirst(ConsumerRebalanceListener):
        async def on_partitions_revoked(self, revoked):
            async with in_transaction:
                pass

        async def on_partitions_assigned(self, assigned):
            pass

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                                enable_auto_commit=False, isolation_level="read_committed",
                                session_timeout_ms=SESSION["session.timeout.ms"],
                                heartbeat_interval_ms=SESSION["heartbeat.interval.ms"])
    consumer.subscribe([source], listener=EndTransactionFirst())
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=txn_id, linger_ms=5,
                                transaction_timeout_ms=20000)
    await producer.start()
    await consumer.start()
    while True:
        async with in_transaction:
            batches = await consumer.getmany(timeout_ms=500, max_records=50)
            if not batches:
                continue
            async with producer.transaction():
                for tp, records in batches.items():
                    for r in records:
                        await producer.send(sink, r.value, key=f"{tp.partition}:{r.offset}".encode())
                await producer.send_offsets_to_transaction(
                    {tp: records[-1].offset + 1 for tp, records in batches.items()}, group)


if __name__ == "__main__":
    client, *args = sys.argv[1:]
    if client == "confluent":
        confluent(*args)
    else:
        asyncio.run(aiokafka(*args))
