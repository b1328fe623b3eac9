"""The controller's shard: which topics exist, their ids, partition counts and configs; and
the users' SCRAM credentials (runtime.security.users), the cluster's other metadata.

Topic ids are passed in (the actor draws a UUID); nothing here is random.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..codec import Record
from ..coordinator import CoordinatorContext, CoordinatorShard, Result
from ..errors import Errors, KafkaError
from ..messages.topics import (AlterTopicConfigRequest, AlterTopicConfigResponse, CreatableTopicResult,
                               CreatePartitionsRequest, CreatePartitionsResponse,
                               CreatePartitionsTopicResult, CreateTopicsRequest, CreateTopicsResponse,
                               DeletableTopicResult, DeleteTopicsRequest, DeleteTopicsResponse, MetadataRequest,
                               MetadataResponse, MetadataResponsePartition, MetadataResponseTopic)
from ..security import users
from ..security.scram import ScramCredential
from .records import TopicKey, topic_record, topic_tombstone
from .internal import is_internal

# The config key under which a deployment records how many partition hosts it runs
# (partition.hosts.per.node times the Ray nodes it was deployed on).
PARTITION_HOSTS_KEY = "shoal.partition.hosts"
# The partitions a deployment takes per partition host unless max.partitions says otherwise.
PARTITIONS_PER_HOST = 4000
# Kafka's Topic.validate: legal characters and length.
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_TOPIC_NAME_LENGTH = 249
# Topic-level configs a user may set, with their types (Kafka's names).
TOPIC_CONFIGS = {
    "retention.ms": int, "retention.bytes": int, "segment.bytes": int, "max.message.bytes": int,
    "cleanup.policy": str, "flush.messages": int, "message.timestamp.type": str, "compression.type": str,
    "flush.ms": int, "delete.retention.ms": int,
}
# The least value of the integer ones (Kafka's LogConfig); 1 where not given.
_MINIMUM = {"retention.ms": -1, "retention.bytes": -1, "flush.ms": 0, "delete.retention.ms": 0}
# The values Kafka's LogConfig accepts for the string-valued ones.
_CHOICES = {
    "cleanup.policy": ("delete", "compact", "compact,delete", "delete,compact"),
    "message.timestamp.type": ("CreateTime", "LogAppendTime"),
    # Accepted and described; batches are kept as their producer compressed them whatever
    # the value (README "Topics": shoal does not recompress).
    "compression.type": ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
}


@dataclass(frozen=True)
class TopicInfo:
    name: str
    topic_id: str
    partitions: int
    configs: dict


def validate_topic_name(name: str) -> None:
    """A name a user may create a topic under: legal (raise_if_illegal_topic_name) and not
    an internal topic's."""
    raise_if_illegal_topic_name(name)
    if is_internal(name):
        raise KafkaError(Errors.INVALID_TOPIC_EXCEPTION, f"topic names starting with '__' are internal: {name!r}")


def raise_if_illegal_topic_name(name: str) -> None:
    """Kafka's Topic.validate: INVALID_TOPIC_EXCEPTION for a name no topic can have."""
    if not name or name in (".", ".."):
        raise KafkaError(Errors.INVALID_TOPIC_EXCEPTION, f"topic name {name!r} is illegal")
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise KafkaError(Errors.INVALID_TOPIC_EXCEPTION, f"topic name is longer than {MAX_TOPIC_NAME_LENGTH}")
    if not _LEGAL_TOPIC.match(name):
        raise KafkaError(Errors.INVALID_TOPIC_EXCEPTION,
                         f"topic name {name!r} has characters other than ASCII alphanumerics, '.', '_' and '-'")


def validate_topic_configs(configs: dict) -> dict:
    out = {}
    for key, value in configs.items():
        kind = TOPIC_CONFIGS.get(key)
        if kind is None:
            raise KafkaError(Errors.INVALID_CONFIG, f"unknown topic config {key!r}")
        try:
            out[key] = kind(value)
        except (TypeError, ValueError):
            raise KafkaError(Errors.INVALID_CONFIG, f"{key} must be {kind.__name__}, got {value!r}") from None
        if kind is int and out[key] < _MINIMUM.get(key, 1):
            raise KafkaError(Errors.INVALID_CONFIG, f"{key} must be at least {_MINIMUM.get(key, 1)}")
        if key in _CHOICES and out[key] not in _CHOICES[key]:
            raise KafkaError(Errors.INVALID_CONFIG, f"Invalid value {out[key]} for configuration {key}: "
                                                    f"String must be one of: {', '.join(_CHOICES[key])}")
    return out


class TopicMetadataShard(CoordinatorShard):
    def __init__(self, context: CoordinatorContext) -> None:
        self.context = context
        self.topics: dict[str, TopicInfo] = {}
        self.credentials: users.Credentials = {}

    def replay(self, offset: int, record: Record) -> None:
        if type(record.key) is users.ScramCredentialKey:
            users.replay(self.credentials, record)
            return
        if type(record.key) is not TopicKey:
            raise ValueError(f"the metadata log does not hold {type(record.key).__name__} records")
        if record.value is None:
            self.topics.pop(record.key.name, None)
        else:
            v = record.value
            self.topics[record.key.name] = TopicInfo(record.key.name, v.topic_id, v.partitions, dict(v.configs))

    # ------------------------------------------------------------------ writes

    def _partition_limit(self) -> int:
        """The most topic partitions the deployment takes: `max.partitions`, else 4,000
        per partition host (Confluent's guidance for a Kafka broker)."""
        config = self.context.config
        given = config.get("max.partitions")
        return int(given) if given else PARTITIONS_PER_HOST * max(int(config.get(PARTITION_HOSTS_KEY, 1)), 1)

    def _raise_if_over_limit(self, adding: int, total: int) -> None:
        limit = self._partition_limit()
        if total + adding > limit:
            raise KafkaError(Errors.POLICY_VIOLATION,
                             f"{adding} more partitions would make {total + adding}, over the deployment's limit of "
                             f"{limit} (max.partitions)")

    def _partitions(self) -> int:
        return sum(t.partitions for t in self.topics.values())

    def create_topics(self, request: CreateTopicsRequest, now_ms: int, new_topic_ids: list[str]) -> Result:
        records, results = [], []
        seen = set()
        total = self._partitions()
        for topic, topic_id in zip(request.topics, new_topic_ids):
            try:
                validate_topic_name(topic.name)
                if topic.name in self.topics or topic.name in seen:
                    raise KafkaError(Errors.TOPIC_ALREADY_EXISTS, f"topic {topic.name!r} already exists")
                if topic.num_partitions <= 0:
                    raise KafkaError(Errors.INVALID_PARTITIONS, "the number of partitions must be at least 1")
                configs = validate_topic_configs({c.name: c.value for c in topic.configs if c.value is not None})
                self._raise_if_over_limit(topic.num_partitions, total)
            except KafkaError as e:
                results.append(CreatableTopicResult(topic.name, None, e.code, e.message))
                continue
            seen.add(topic.name)
            total += topic.num_partitions
            if not request.validate_only:
                records.append(topic_record(topic.name, topic_id, topic.num_partitions, configs))
            results.append(CreatableTopicResult(topic.name, topic_id, 0, None, topic.num_partitions, configs))
        return Result(records, CreateTopicsResponse(tuple(results)))

    def delete_topics(self, request: DeleteTopicsRequest, now_ms: int) -> Result:
        records, results = [], []
        for name in dict.fromkeys(request.topic_names):
            info = self.topics.get(name)
            if info is None:
                results.append(DeletableTopicResult(name, None, Errors.UNKNOWN_TOPIC_OR_PARTITION.code,
                                                    f"topic {name!r} does not exist"))
                continue
            records.append(topic_tombstone(name))
            results.append(DeletableTopicResult(name, info.topic_id))
        return Result(records, DeleteTopicsResponse(tuple(results)))

    def create_partitions(self, request: CreatePartitionsRequest, now_ms: int) -> Result:
        records, results = [], []
        total = self._partitions()
        for t in request.topics:
            info = self.topics.get(t.name)
            if info is None:
                results.append(CreatePartitionsTopicResult(t.name, Errors.UNKNOWN_TOPIC_OR_PARTITION.code,
                                                           f"topic {t.name!r} does not exist"))
            elif t.count <= info.partitions:
                results.append(CreatePartitionsTopicResult(
                    t.name, Errors.INVALID_PARTITIONS.code,
                    f"topic {t.name!r} has {info.partitions} partitions; the count can only grow"))
            else:
                try:
                    self._raise_if_over_limit(t.count - info.partitions, total)
                except KafkaError as e:
                    results.append(CreatePartitionsTopicResult(t.name, e.code, e.message))
                    continue
                total += t.count - info.partitions
                if not request.validate_only:
                    records.append(topic_record(t.name, info.topic_id, t.count, info.configs))
                results.append(CreatePartitionsTopicResult(t.name))
        return Result(records, CreatePartitionsResponse(tuple(results)))

    def alter_topic_config(self, request: AlterTopicConfigRequest, now_ms: int) -> Result:
        """Incremental: a value sets a config, None removes the topic's value (back to the
        default). INVALID_CONFIG (and no change) if any name or value is invalid."""
        info = self.topics.get(request.name)
        if info is None:
            raise KafkaError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"topic {request.name!r} does not exist")
        unknown = sorted(k for k in request.configs if k not in TOPIC_CONFIGS)
        if unknown:
            raise KafkaError(Errors.INVALID_CONFIG, f"unknown topic config {unknown[0]!r}")
        updated = {k: v for k, v in info.configs.items() if k not in request.configs}
        updated.update(validate_topic_configs({k: v for k, v in request.configs.items() if v is not None}))
        records = []
        if updated != info.configs and not request.validate_only:
            records.append(topic_record(info.name, info.topic_id, info.partitions, updated))
        return Result(records, AlterTopicConfigResponse(info.name, configs=updated))

    def alter_user_scram_credentials(self, deletions: list[dict], upsertions: list[dict], now_ms: int) -> Result:
        records, results = users.alter(self.credentials, deletions, upsertions)
        return Result(records, results)

    # ------------------------------------------------------------------ reads

    def describe_user_scram_credentials(self, names: list[dict] | None) -> dict:
        return users.describe(self.credentials, names)

    def scram_credentials(self, user: str) -> dict[str, ScramCredential]:
        return dict(self.credentials.get(user, {}))

    def metadata(self, request: MetadataRequest) -> MetadataResponse:
        names = sorted(self.topics) if request.topics is None else request.topics
        out = []
        for name in names:
            info = self.topics.get(name)
            if info is None:
                out.append(MetadataResponseTopic(name, None, Errors.UNKNOWN_TOPIC_OR_PARTITION.code))
            else:
                out.append(MetadataResponseTopic(
                    name, info.topic_id, 0,
                    tuple(MetadataResponsePartition(p) for p in range(info.partitions)), dict(info.configs)))
        return MetadataResponse(tuple(out))
