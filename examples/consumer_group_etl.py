"""A consumer-group ETL job that scales from 2 to 4 consumers while records keep arriving.

Each consumer reads click events, aggregates clicks per page, and commits after each batch.
Halfway through, two more consumers join the group: the coordinator moves partitions to them
(KIP-848 incremental rebalance, `group_protocol="consumer"`), the listeners print what each
consumer gave up and received, and the admin API shows the members, their partitions and the
lag. Every event is counted exactly once because offsets are committed after the work.

    python examples/consumer_group_etl.py
"""
from collections import Counter

from actors import Cluster, ConsumerRebalanceListener

TOPIC, GROUP, PARTITIONS, EVENTS = "clicks", "etl", 8, 2000
PAGES = ["home", "search", "cart", "checkout", "help"]


class Announce(ConsumerRebalanceListener):
    def __init__(self, name: str) -> None:
        self.name = name

    def on_partitions_revoked(self, revoked) -> None:
        if revoked:
            print(f"  {self.name} gives up {sorted(tp.partition for tp in revoked)}")

    def on_partitions_assigned(self, assigned) -> None:
        if assigned:
            print(f"  {self.name} receives  {sorted(tp.partition for tp in assigned)}")


def start_consumer(cluster: Cluster, name: str):
    consumer = cluster.consumer(GROUP, client_id=name, group_protocol="consumer", auto_offset_reset="earliest",
                                enable_auto_commit=False, fetch_max_wait_ms=100)
    consumer.subscribe([TOPIC], listener=Announce(name))
    return consumer


def show_group(cluster: Cluster) -> None:
    admin = cluster.admin()
    group = admin.describe_groups([GROUP])[GROUP]
    print(f"group {GROUP}: {group.state}, epoch {group.group_epoch}, assignor {group.protocol}")
    for m in sorted(group.members, key=lambda m: m.client_id):
        print(f"  {m.client_id:<11} epoch {m.member_epoch:<3} partitions {sorted(tp.partition for tp in m.assignment)}")
    lag = sum(o.lag for o in admin.list_group_offsets(GROUP).values() if o.lag > 0)
    print(f"  total lag: {lag}")


def main() -> None:
    config = {"group.consumer.heartbeat.interval.ms": 200, "group.initial.rebalance.delay.ms": 0}
    with Cluster.local(config=config) as cluster:
        cluster.create_topic(TOPIC, PARTITIONS)
        producer = cluster.producer(linger_ms=5)
        consumers = [start_consumer(cluster, f"consumer-{i}") for i in range(2)]
        totals: Counter = Counter()
        per_consumer: Counter = Counter()
        sent = 0
        print(f"2 consumers start on {PARTITIONS} partitions")
        while sum(totals.values()) < EVENTS:
            if sent < EVENTS:  # records keep arriving while the group changes
                for i in range(sent, min(sent + 50, EVENTS)):
                    producer.send(TOPIC, PAGES[i % len(PAGES)].encode(), key=str(i).encode())
                sent = min(sent + 50, EVENTS)
                producer.flush()
            if sent == EVENTS // 2 and len(consumers) == 2:
                print("scaling out: 2 more consumers join")
                consumers += [start_consumer(cluster, f"consumer-{i}") for i in range(2, 4)]
            for c in consumers:
                batch = c.poll(timeout_ms=50)
                for records in batch.values():
                    for r in records:
                        totals[r.value.decode()] += 1  # the "transform": clicks per page
                        per_consumer[c.client_id] += 1
                if batch:
                    c.commit()  # after the work: a record is counted once even across a rebalance
        show_group(cluster)
        print("clicks per page:", dict(sorted(totals.items())))
        print("events per consumer:", dict(sorted(per_consumer.items())))
        assert sum(totals.values()) == EVENTS
        for c in consumers:
            c.close()
        producer.close()


if __name__ == "__main__":
    main()
