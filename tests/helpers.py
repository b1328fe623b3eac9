"""Pieces several actor test modules (and the soak, tests/soak/) share."""
import threading
import time

import ray

from actors import Cluster, ConsumerRebalanceListener, naming
from actors.server.partition_host import PartitionHostActor
from runtime.messages.topics import READ_COMMITTED, READ_UNCOMMITTED, FetchRequest
from runtime.topics.data import decode_entries
from runtime.topics.isolation import filter_aborted


class Recorder(ConsumerRebalanceListener):
    """A rebalance listener that records what it is told, in order."""

    def __init__(self):
        self.events = []

    def on_partitions_revoked(self, revoked):
        self.events.append(("revoked", frozenset(revoked)))

    def on_partitions_assigned(self, assigned):
        self.events.append(("assigned", frozenset(assigned)))

    def on_partitions_lost(self, lost):
        self.events.append(("lost", frozenset(lost)))


class Worker(threading.Thread):
    """One client's loop: `step()` until `stop` is set. Errors are kept, never fatal: the
    checks at the end judge what the faults did."""

    def __init__(self, name, step, stop):
        super().__init__(name=name, daemon=True)
        self.step, self.stop, self.errors = step, stop, []

    def run(self):
        while not self.stop.is_set():
            try:
                self.step()
            except Exception as e:  # retriable failures while actors restart
                self.errors.append(repr(e))
                self.stop.wait(0.2)  # a pause before trying again, cut short by stop


class Ownership(ConsumerRebalanceListener):
    """The intervals (tp, member, start, end, lost) during which a member owned each
    partition, in this process's clock, appended to a shared log. `close()` ends what it
    still owns (at its close, or when the member died) and ignores anything told later."""

    def __init__(self, member, log):
        self.member, self.log, self.open, self.closed = member, log, {}, False
        self.revoked = {}  # tp -> where in the log its last revocation is, until assigned again

    def on_partitions_assigned(self, assigned):
        if not self.closed:
            for tp in assigned:
                self.open[tp] = time.monotonic()
                self.revoked.pop(tp, None)

    def on_partitions_revoked(self, revoked, lost=False):
        for tp in revoked:
            if tp in self.open:
                self.log.append((tp, self.member, self.open.pop(tp), time.monotonic(), lost))
                if not lost:
                    self.revoked[tp] = len(self.log) - 1

    def on_partitions_lost(self, lost):
        # The member was fenced: in Kafka's terms it stopped owning them then, and learns it
        # only now, possibly after another member got them. A partition it was told it lost
        # after on_partitions_revoked ran was fenced before the coordinator heard of the
        # revocation: that ownership ended in the loss too.
        for tp in lost:
            at = self.revoked.pop(tp, None)
            if at is not None and tp not in self.open:
                self.log[at] = self.log[at][:4] + (True,)
        self.on_partitions_revoked(lost, lost=True)

    def close(self):
        self.on_partitions_revoked(list(self.open))
        self.closed = True


def double_owners(log):
    """(tp, member, other member) for every two intervals of one partition that overlap;
    an interval that ended in a loss (a fence) is not an ownership to its end."""
    log = sorted((i for i in log if not i[4]), key=lambda i: (str(i[0]), i[2]))
    return [(tp, m, m2) for i, (tp, m, start, end, _) in enumerate(log) for tp2, m2, start2, end2, _ in log[i + 1:]
            if tp == tp2 and m != m2 and start < end2 and start2 < end]


def error_code(future, timeout_s: float = 30) -> int:
    """The Kafka error code a confluent-kafka admin future fails with (it must fail)."""
    import pytest
    from confluent_kafka import KafkaException
    with pytest.raises(KafkaException) as e:
        future.result(timeout_s)
    return e.value.args[0].code()


def read_partition(cluster, topic, partition, committed=False):
    """Every (offset, value) of the partition, read_committed or not (retried while the
    leader restarts)."""
    out, offset = [], 0
    while True:
        r = cluster.directory.call(naming.partition_host_of(topic, partition, cluster.config), "fetch", FetchRequest(
            topic, partition, offset, 8 << 20, 0, 1, READ_COMMITTED if committed else READ_UNCOMMITTED), timeout_s=60)
        assert r.error_code == 0, r
        batches = filter_aborted(r.batches, r.aborted_transactions) if committed else r.batches
        out += [(rec.offset, rec.value) for b in batches if not b.is_control
                for rec in decode_entries(b.records, b.base_offset)]
        if not r.batches:
            return out
        offset = r.batches[-1].last_offset + 1


def transactions_settled(cluster, topic, partitions):
    """Whether every transaction on the topic is decided (the LSO is the high watermark)."""
    for p in range(partitions):
        r = cluster.directory.call(naming.partition_host_of(topic, p, cluster.config), "fetch", FetchRequest(
            topic, p, 0, 1, 0, 1, READ_COMMITTED), timeout_s=60)
        if r.last_stable_offset != r.high_watermark:
            return False
    return True


@ray.remote(num_cpus=0, max_restarts=0)
class ShareConsumerProcess:
    """A share consumer in a process of its own, for tests whose consumer dies with its process
    (ray.kill): no acknowledgement, no leave, its network thread gone with it."""

    def __init__(self, namespace: str, group_id: str, topic: str, **config) -> None:
        self.consumer = Cluster.connect(namespace=namespace).share_consumer(group_id, **config)
        self.consumer.subscribe(topic)

    def poll_records(self, count: int, timeout_s: float = 60) -> list:
        """At least `count` records, polled without acknowledging them."""
        deadline, got = time.monotonic() + timeout_s, []
        while len(got) < count:
            assert time.monotonic() < deadline, f"{len(got)} of {count} records after {timeout_s} s"
            got.extend(self.consumer.poll(0.1))
        return got


def produce(cluster, topic: str, count: int, partitions: int = 1, start: int = 0) -> None:
    """`count` records with values b"v<i>" (i from `start`), round robin over the partitions."""
    with cluster.producer(linger_ms=1) as producer:
        for i in range(start, start + count):
            producer.send(topic, f"v{i}".encode(), partition=i % partitions)
        producer.flush()


def produce_values(cluster, topic: str, values, partition: int | None = None, keyed: bool = False) -> None:
    """These string values, in order, to `partition` (None: the partitioner picks), each its
    own key when `keyed`."""
    with cluster.producer(linger_ms=1) as producer:
        for v in values:
            producer.send(topic, v.encode(), key=v.encode() if keyed else None, partition=partition)
        producer.flush()


def produce_through_gateway(bootstrap: str, topic: str, count: int, partitions: int = 1, start: int = 0) -> None:
    """As `produce` (key b"k<i>", value b"v<i>"), by a Kafka client (confluent-kafka, acks=all)
    through the gateway; every record acknowledged."""
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(start, start + count):
        producer.produce(topic, value=f"v{i}".encode(), key=f"k{i}".encode(), partition=i % partitions)
    assert producer.flush(30) == 0


def owns_each_once(consumers, partitions) -> bool:
    """Whether every consumer holds some of `partitions` and, together, each exactly once."""
    owned = [c.assignment() for c in consumers]
    return all(owned) and sum(len(o) for o in owned) == len(partitions) and set().union(*owned) == partitions


def produce_record_through_gateway(bootstrap: str, topic: str, partition: int, value: bytes = b"x") -> None:
    """One record to the partition, by confluent-kafka through the gateway, acknowledged."""
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    producer.produce(topic, value=value, partition=partition)
    assert producer.flush(30) == 0


def poll_consumers_until(consumers, predicate, seen=None, timeout_s: float = 40, message: str = "condition") -> list:
    """Poll every (shoal) consumer in turn, as their applications would, keeping the decoded
    values in `seen`, until `predicate()`. Returns `seen`."""
    from tests.conftest import wait_until
    seen = seen if seen is not None else []

    def step():
        for c in consumers:
            for records in c.poll(timeout_ms=30).values():
                seen.extend(r.value.decode() for r in records)
        return predicate()
    wait_until(step, timeout_s=timeout_s, interval_s=0, message=message)
    return seen


def poll_records(consumer, count: int, timeout_s: float = 60, acknowledge: bool = False) -> list:
    """At least `count` records from a share consumer, polled within the deadline, each
    acknowledged (ACCEPT) as it comes when `acknowledge`."""
    from tests.conftest import wait_until
    got = []

    def step():
        records = consumer.poll(0.1)
        if acknowledge:
            for r in records:
                consumer.acknowledge(r)
        got.extend(records)
        return len(got) >= count
    wait_until(step, timeout_s=timeout_s, interval_s=0, message=f"{count} records")
    return got


def share_partition(cluster, group: str, topic: str, partition: int = 0):
    """The SharePartition actor's handle (it must be live)."""
    return ray.get_actor(naming.share_partition(group, topic, partition), namespace=cluster.namespace)


def record_states(cluster, group: str, topic: str, partition: int = 0) -> dict:
    """The SharePartition's record states ({offset: (state, delivery count, ...)}, and its
    "start_offset")."""
    return ray.get(share_partition(cluster, group, topic, partition).record_states.remote(), timeout=30)


def share_start_offset(cluster, group: str, topic: str, partition: int = 0) -> int:
    """The SharePartition's start offset; -1 before any fetch there made the actor, or while
    one killed is not back yet (the next fetch makes it again)."""
    try:
        return record_states(cluster, group, topic, partition)["start_offset"]
    except (ValueError, ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError):
        return -1


def share_partition_status(cluster, group: str, topic: str, partition: int = 0) -> dict | None:
    """The SharePartition actor's status (its pid among it), or None when no live actor has
    the name. Asks nothing that would make it load."""
    try:
        return ray.get(share_partition(cluster, group, topic, partition).status.remote(), timeout=30)
    except (ValueError, ray.exceptions.RayActorError):
        return None


def host_of(data_dir: str, partitions: list, **config) -> PartitionHostActor:
    """A partition host (the actor's class, run on the caller's asyncio loop, without Ray)
    leading `partitions` ((topic, partition, topic id, configs)), as if the controller had
    them."""
    host = PartitionHostActor(data_dir, 0, {"log.flush.fsync": True, **config})

    async def assigned():
        return partitions
    host._assigned = assigned
    return host
