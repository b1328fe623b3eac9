"""kafka-python and confluent-kafka classic consumers behind one small interface, so a
group test can run the same story with either client (or both in one group)."""
import concurrent.futures
import queue
import threading

import confluent_kafka as ck
from kafka import KafkaConsumer
from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor

SESSION_TIMEOUT_MS = 3000
HEARTBEAT_INTERVAL_MS = 300
KAFKA_PYTHON_ASSIGNORS = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor,
                          "sticky": StickyPartitionAssignor, "cooperative-sticky": CooperativeStickyAssignor}


class KafkaPythonMember:
    def __init__(self, bootstrap: str, group: str, topic: str, strategy: str) -> None:
        self.consumer = KafkaConsumer(
            topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
            enable_auto_commit=False, session_timeout_ms=SESSION_TIMEOUT_MS,
            heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS,
            partition_assignment_strategy=[KAFKA_PYTHON_ASSIGNORS[strategy]])

    def poll(self) -> list[tuple[int, int]]:
        """(partition, offset) of each record this poll returned."""
        return [(tp.partition, r.offset) for tp, rs in self.consumer.poll(timeout_ms=100).items() for r in rs]

    def assignment(self) -> set[int]:
        return {tp.partition for tp in self.consumer.assignment()}

    def positions(self) -> dict[int, int]:
        """{partition: the consumer's position} of its assigned partitions: what commit() commits."""
        return {tp.partition: self.consumer.position(tp) for tp in self.consumer.assignment()}

    def commit(self) -> None:
        self.consumer.commit()

    def close(self) -> None:
        self.consumer.close()


class ConfluentMember:
    def __init__(self, bootstrap: str, group: str, topic: str, strategy: str) -> None:
        self.consumer = ck.Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
            "enable.auto.commit": False, "session.timeout.ms": SESSION_TIMEOUT_MS,
            "heartbeat.interval.ms": HEARTBEAT_INTERVAL_MS, "partition.assignment.strategy": strategy})
        self.consumer.subscribe([topic])

    def poll(self) -> list[tuple[int, int]]:
        return [(m.partition(), m.offset()) for m in self.consumer.consume(100, timeout=0.1) if not m.error()]

    def assignment(self) -> set[int]:
        return {tp.partition for tp in self.consumer.assignment()}

    def positions(self) -> dict[int, int]:
        """{partition: the consumer's position} of its assigned partitions that have one."""
        return {tp.partition: tp.offset for tp in self.consumer.position(self.consumer.assignment()) if tp.offset >= 0}

    def commit(self) -> None:
        self.consumer.commit(asynchronous=False)

    def close(self) -> None:
        self.consumer.close()


CLIENTS = {"kafka-python": KafkaPythonMember, "confluent": ConfluentMember}


def member(client: str, bootstrap: str, group: str, topic: str, strategy: str):
    return CLIENTS[client](bootstrap, group, topic, strategy)


class Polled:
    """A member that polls on a thread of its own, as an application's consumer does: a
    member is then in poll whenever its JoinGroup is answered (kafka-python 3.0 drops an
    answer that arrives after its poll returned, so members polled in turn from one thread
    miss theirs). Every call reaches the client on that thread (neither client is
    thread-safe); `poll` returns what the thread read since the last call."""

    def __init__(self, client) -> None:
        self._client = client
        self._calls: queue.Queue = queue.Queue()
        self._lock = threading.Lock()
        self._reads: list[tuple[int, int]] = []
        self._assignment: set[int] = set()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            try:
                fn, future = self._calls.get_nowait()
            except queue.Empty:
                pass
            else:
                try:
                    future.set_result(fn())
                except BaseException as e:
                    future.set_exception(e)
                if fn == self._client.close:
                    return
            got = self._client.poll()
            with self._lock:
                self._reads.extend(got)
                self._assignment = self._client.assignment()

    def _on_thread(self, fn, timeout_s: float = 60):
        future = concurrent.futures.Future()
        self._calls.put((fn, future))
        return future.result(timeout_s)

    def poll(self) -> list[tuple[int, int]]:
        with self._lock:
            reads, self._reads = self._reads, []
        return reads

    def assignment(self) -> set[int]:
        with self._lock:
            return set(self._assignment)

    def commit(self) -> dict[int, int]:
        """Commit what was read; returns what that commit covers ({partition: next offset}:
        the client's own positions, on the thread, so nothing polled after it counts; a
        position the thread tracked itself would outlive a partition lost and regained)."""
        def commit():
            self._client.commit()
            return self._client.positions()
        return self._on_thread(commit)

    def close(self) -> None:
        if self._thread.is_alive():
            self._on_thread(self._client.close)
        self._thread.join(30)


def polled(client: str, bootstrap: str, group: str, topic: str, strategy: str) -> Polled:
    return Polled(member(client, bootstrap, group, topic, strategy))
