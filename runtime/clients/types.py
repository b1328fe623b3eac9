"""The value types clients hand to users, named as kafka-python names them."""
from __future__ import annotations

from typing import Any, NamedTuple

__all__ = ["TopicPartition", "OffsetAndMetadata", "ConsumerRecord", "ConsumerRebalanceListener"]


class TopicPartition(NamedTuple):
    topic: str
    partition: int


class OffsetAndMetadata(NamedTuple):
    """A committed offset: the next offset to consume, as Kafka commits it."""
    offset: int
    metadata: str = ""
    leader_epoch: int = -1


class ConsumerRecord(NamedTuple):
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: Any
    value: Any
    headers: tuple = ()
    delivery_count: int | None = None  # set by share consumers only


class ConsumerRebalanceListener:
    """Callbacks run in the user's process, inside `poll()` (and `close()`), with sets of
    TopicPartition. Override what you need; a lost partition is by default treated as
    revoked, as Kafka's Java listener does."""

    def on_partitions_revoked(self, revoked) -> None:
        pass

    def on_partitions_assigned(self, assigned) -> None:
        pass

    def on_partitions_lost(self, lost) -> None:
        self.on_partitions_revoked(lost)
