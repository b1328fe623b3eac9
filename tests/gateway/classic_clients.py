"""kafka-python and confluent-kafka classic consumers behind one small interface, so a
group test can run the same story with either client (or both in one group)."""
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

    def commit(self) -> None:
        self.consumer.commit(asynchronous=False)

    def close(self) -> None:
        self.consumer.close()


CLIENTS = {"kafka-python": KafkaPythonMember, "confluent": ConfluentMember}


def member(client: str, bootstrap: str, group: str, topic: str, strategy: str):
    return CLIENTS[client](bootstrap, group, topic, strategy)
