"""shoal quickstart: Kafka's consumer groups and queues on an embedded Ray cluster.

1. A topic and a producer.
2. A consumer group (KIP-848, `group_protocol="consumer"`) of two consumers that split the
   topic's partitions; the rebalance is printed as each consumer's listener sees it.
3. A share group (KIP-932) used as a work queue: records are acknowledged one by one (ACCEPT),
   handed back for a retry (RELEASE), rejected (REJECT), or left unacknowledged by a worker
   that stalls, so that its lock times out and the record goes to the other worker.
4. The admin API describes both groups and their lag.

    bash scripts/quickstart.sh
"""
import time

from actors import AcknowledgeType, Cluster, ConsumerRebalanceListener

LOCK_MS = 3000  # how long a share consumer may hold a record before it goes to somebody else


class Announce(ConsumerRebalanceListener):
    def __init__(self, name: str) -> None:
        self.name = name

    def on_partitions_revoked(self, revoked) -> None:
        if revoked:
            print(f"    {self.name} gives up partitions {sorted(tp.partition for tp in revoked)}")

    def on_partitions_assigned(self, assigned) -> None:
        if assigned:
            print(f"    {self.name} now reads partitions {sorted(tp.partition for tp in assigned)}")


def poll_until(consumers, done, timeout_s=30.0) -> dict:
    """Poll every consumer until `done(counts)`; returns records read per consumer."""
    counts = {name: 0 for name in consumers}
    deadline = time.monotonic() + timeout_s
    while not done(counts):
        if time.monotonic() > deadline:
            raise TimeoutError(f"the group did not settle: {counts}")
        for name, c in consumers.items():
            counts[name] += sum(len(records) for records in c.poll(timeout_ms=100).values())
    return counts


def consumer_group(cluster: Cluster) -> None:
    print("\n2. A consumer group: two consumers split the topic 'orders'")

    def start(name):
        consumer = cluster.consumer("etl", client_id=name, group_protocol="consumer",
                                    auto_offset_reset="earliest", enable_auto_commit=False, fetch_max_wait_ms=100)
        consumer.subscribe(["orders"], listener=Announce(name))
        return consumer

    print("  consumer-1 joins the group 'etl' alone:")
    one = {"consumer-1": start("consumer-1")}
    read = poll_until(one, lambda n: n["consumer-1"] >= 40)
    one["consumer-1"].commit()
    print(f"  consumer-1 reads all {read['consumer-1']} records and commits its offsets")
    print("  consumer-2 joins; the coordinator moves half of the partitions to it:")
    both = {**one, "consumer-2": start("consumer-2")}
    poll_until(both, lambda _: all(len(c.assignment()) == 2 for c in both.values()))
    produce_orders(cluster, 40, 80)
    read = poll_until(both, lambda n: sum(n.values()) >= 40)
    for name, c in both.items():
        c.commit()
    print(f"  40 more records: consumer-1 reads {read['consumer-1']}, consumer-2 reads {read['consumer-2']}, "
          f"each from its own partitions, and both commit")
    describe(cluster, "etl")
    print("  the consumers close and leave the group:")
    for c in both.values():
        c.close()


def produce_orders(cluster: Cluster, first: int, end: int) -> None:
    with cluster.producer(linger_ms=5) as producer:
        for i in range(first, end):
            producer.send("orders", f"order {i}".encode(), key=f"customer-{i % 8}".encode())


def work_queue(cluster: Cluster) -> None:
    print("\n3. A share group as a work queue: two workers take jobs from one partition")
    send_jobs(cluster, 0, 4)
    worker_a = start_worker(cluster, "worker-a")
    jobs = take(worker_a, 4)
    print(f"  worker-a takes {names(jobs)}; each is locked to it for {LOCK_MS} ms")
    done, retry, bad, also_done = jobs
    for r, ack, why in ((done, AcknowledgeType.ACCEPT, "done"), (retry, AcknowledgeType.RELEASE, "try again"),
                        (bad, AcknowledgeType.REJECT, "never again"), (also_done, AcknowledgeType.ACCEPT, "done")):
        worker_a.acknowledge(r, ack)
        print(f"    {r.value.decode()}: {ack.name} ({why})")
    (back,) = take(worker_a, 1)  # the acknowledgements go with this poll
    print(f"  {back.value.decode()} comes back, delivery {back.delivery_count}; worker-a accepts it this time")
    worker_a.acknowledge(back, AcknowledgeType.ACCEPT)
    worker_a.commit_sync()

    send_jobs(cluster, 4, 5)
    (stuck,) = take(worker_a, 1)
    taken = time.monotonic()
    print(f"  worker-a takes {stuck.value.decode()} and stalls without acknowledging it")
    worker_b = start_worker(cluster, "worker-b")
    (late,) = take(worker_b, 1)
    print(f"  worker-b gets {late.value.decode()} {time.monotonic() - taken:.1f} s later, delivery "
          f"{late.delivery_count}: its lock on worker-a timed out. worker-b accepts it")
    worker_b.acknowledge(late, AcknowledgeType.ACCEPT)
    worker_b.commit_sync()
    describe(cluster, "workers")
    worker_a.close()
    worker_b.close()


def send_jobs(cluster: Cluster, first: int, end: int) -> None:
    with cluster.producer() as producer:
        for i in range(first, end):
            producer.send("jobs", f"job-{i}".encode())


def start_worker(cluster: Cluster, name: str):
    worker = cluster.share_consumer("workers", client_id=name, share_acknowledgement_mode="explicit",
                                    fetch_max_wait_ms=100)
    worker.subscribe(["jobs"])
    return worker


def take(worker, n: int, timeout_s: float = 30.0) -> list:
    records, deadline = [], time.monotonic() + timeout_s
    while len(records) < n:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{n} records did not come")
        records += worker.poll(0.5)
    return records


def names(records) -> list[str]:
    return [r.value.decode() for r in records]


def describe(cluster: Cluster, group_id: str) -> None:
    admin = cluster.admin()
    group = admin.describe_groups([group_id])[group_id]
    print(f"  the admin describes '{group_id}': a {group.type} group, {group.state}, {len(group.members)} members")
    for m in sorted(group.members, key=lambda m: m.client_id):
        print(f"    {m.client_id}: partitions {sorted(tp.partition for tp in m.assignment)}")
    if group.type == "share":
        for tp, o in admin.describe_share_group_offsets(group_id).items():
            print(f"    {tp.topic}-{tp.partition}: start offset {o.start_offset}, lag {o.lag} (no job left to do)")
    else:
        lag = sum(max(o.lag, 0) for o in admin.list_group_offsets(group_id).values())
        print(f"    committed offsets leave a lag of {lag}")


def main() -> None:
    config = {"group.consumer.heartbeat.interval.ms": 200, "group.share.heartbeat.interval.ms": 200,
              "group.share.record.lock.duration.ms": LOCK_MS, "share.auto.offset.reset": "earliest"}
    with Cluster.local(config=config) as cluster:  # starts Ray if needed; everything is removed on exit
        print("1. A topic 'orders' with 4 partitions, and 40 records keyed by customer")
        cluster.create_topic("orders", partitions=4)
        cluster.create_topic("jobs", partitions=1)
        with cluster.producer(linger_ms=5) as producer:
            first = producer.send("orders", b"order 0", key=b"customer-0").get()
        print(f"  a send is acknowledged once durable: 'order 0' went to {first.topic}-{first.partition} "
              f"at offset {first.offset}")
        produce_orders(cluster, 1, 40)
        consumer_group(cluster)
        work_queue(cluster)
        print("\nDone. Every group and actor above is a Ray actor: see `ray list actors`, or the README.")


if __name__ == "__main__":
    main()
