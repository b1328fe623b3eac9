"""Records of the cluster metadata log (__cluster_metadata-0): one per topic."""
from __future__ import annotations

from typing import NamedTuple

from ..codec import Record, register


class TopicKey(NamedTuple):
    name: str


class TopicValue(NamedTuple):
    topic_id: str  # a UUID string, as Kafka 4 gives every topic
    partitions: int
    configs: dict  # topic-level config overrides, Kafka's dotted names


register(40, TopicKey, TopicValue)


def topic_record(name: str, topic_id: str, partitions: int, configs: dict) -> Record:
    return Record(TopicKey(name), TopicValue(topic_id, partitions, dict(configs)))


def topic_tombstone(name: str) -> Record:
    return Record(TopicKey(name))
