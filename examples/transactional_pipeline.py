"""Consume, transform, produce with transactions: exactly once from `orders` to `invoices`.

Each poll's output records and the consumer's new offsets go into one transaction
(`send_offsets_to_transaction`): either both become visible or neither does. One transaction
is aborted on purpose (a simulated failure): its invoices never reach read_committed
readers, its offsets are not committed, and the same orders are processed again. At the end a
read_committed reader finds every order invoiced exactly once, while a read_uncommitted one
also sees the aborted attempt; the admin API shows the transaction and the group's lag.

    python examples/transactional_pipeline.py
"""
from actors import Cluster, OffsetAndMetadata, TopicPartition

ORDERS, INVOICES, GROUP, TXN_ID, COUNT = "orders", "invoices", "invoicer", "invoicer-1", 300


def read_all(cluster: Cluster, isolation_level: str) -> list[str]:
    reader = cluster.consumer(None, auto_offset_reset="earliest", isolation_level=isolation_level,
                              fetch_max_wait_ms=100)
    reader.assign([TopicPartition(INVOICES, p) for p in range(cluster.describe_topic(INVOICES).partitions)])
    values, idle = [], 0
    while idle < 10:
        batch = reader.poll(timeout_ms=100)
        idle = 0 if batch else idle + 1
        values += [r.value.decode() for records in batch.values() for r in records]
    reader.close()
    return values


def main() -> None:
    with Cluster.local() as cluster:
        cluster.create_topic(ORDERS, 3)
        cluster.create_topic(INVOICES, 3)
        with cluster.producer(linger_ms=5) as producer:
            for i in range(COUNT):
                producer.send(ORDERS, f"order-{i}:{(i * 37) % 500}".encode(), key=str(i).encode())
        print(f"{COUNT} orders written")

        consumer = cluster.consumer(GROUP, auto_offset_reset="earliest", enable_auto_commit=False,
                                    isolation_level="read_committed", fetch_max_wait_ms=100, max_poll_records=50)
        # Manual assignment: the group only keeps the offsets, so the transaction may commit
        # them by group id alone (a subscribed member would pass its generation and member id).
        consumer.assign([TopicPartition(ORDERS, p) for p in range(3)])
        producer = cluster.producer(transactional_id=TXN_ID, linger_ms=5)
        producer.init_transactions()  # fences any older producer with this id
        committed = aborted = transactions = 0
        while committed < COUNT:
            batch = consumer.poll(timeout_ms=200)
            if not batch:
                continue
            transactions += 1
            producer.begin_transaction()
            for records in batch.values():
                for r in records:
                    order, cents = r.value.decode().split(":")
                    producer.send(INVOICES, f"invoice for {order}: {int(cents) * 1.2 / 100:.2f}".encode(), key=r.key)
            producer.send_offsets_to_transaction(
                {tp: OffsetAndMetadata(records[-1].offset + 1) for tp, records in batch.items()}, GROUP)
            if transactions == 3:
                producer.abort_transaction()  # a failure: nothing of this attempt counts
                for tp, records in batch.items():
                    consumer.seek(tp, records[0].offset)  # process the same orders again
                aborted += sum(len(r) for r in batch.values())
                print(f"transaction {transactions} aborted: {aborted} orders will be processed again")
                continue
            producer.commit_transaction()
            committed += sum(len(r) for r in batch.values())
        print(f"{transactions} transactions, {committed} orders invoiced")

        admin = cluster.admin()
        state = admin.describe_transactions([TXN_ID])[TXN_ID]
        print(f"transaction {TXN_ID}: {state.transaction_state}, producer id {state.producer_id} "
              f"epoch {state.producer_epoch}")
        lag = sum(o.lag for o in admin.list_group_offsets(GROUP).values())
        print(f"group {GROUP} lag: {lag}")
        consumer.close()
        producer.close()

        committed_view = read_all(cluster, "read_committed")
        everything = read_all(cluster, "read_uncommitted")
        print(f"read_committed reader: {len(committed_view)} invoices, {len(set(committed_view))} distinct")
        print(f"read_uncommitted reader: {len(everything)} invoices (the aborted attempt included)")
        assert len(committed_view) == len(set(committed_view)) == COUNT and len(everything) == COUNT + aborted


if __name__ == "__main__":
    main()
