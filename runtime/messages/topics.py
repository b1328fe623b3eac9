"""Topic administration and the data path of one topic partition.

Admin messages follow Kafka's CreateTopics, DeleteTopics, CreatePartitions and Metadata
schemas. The data-path messages address a single partition (each partition has its own
leader actor), so they are Kafka's per-partition structs lifted to the top level: Produce
carries one batch of records already encoded by the producer, and Fetch returns whole
batches, which the client decodes (the leader never re-encodes records).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from ..errors import KafkaError
from .errors import answers_errors_of

__all__ = [
    "CreatableTopicConfig", "CreatableTopic", "CreateTopicsRequest", "CreatableTopicResult", "CreateTopicsResponse",
    "DeleteTopicsRequest", "DeletableTopicResult", "DeleteTopicsResponse",
    "CreatePartitionsTopic", "CreatePartitionsRequest", "CreatePartitionsTopicResult", "CreatePartitionsResponse",
    "AlterTopicConfigRequest", "AlterTopicConfigResponse",
    "MetadataRequest", "MetadataResponsePartition", "MetadataResponseTopic", "MetadataResponse",
    "ProduceRequest", "ProduceResponse", "FetchRequest", "FetchedBatch", "AbortedTransaction", "FetchResponse",
    "ListOffsetsRequest", "ListOffsetsResponse",
    "EARLIEST_TIMESTAMP", "LATEST_TIMESTAMP", "MAX_TIMESTAMP", "EARLIEST_LOCAL_TIMESTAMP", "LATEST_TIERED_TIMESTAMP",
    "EARLIEST_PENDING_UPLOAD_TIMESTAMP", "READ_UNCOMMITTED", "READ_COMMITTED",
]

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3
# The tiered-storage sentinels (KIP-405, KIP-1005, KIP-1023). shoal keeps every log local, so
# the local log starts at the log start and nothing is uploaded.
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5
EARLIEST_PENDING_UPLOAD_TIMESTAMP = -6
READ_UNCOMMITTED = 0
READ_COMMITTED = 1


@dataclass(frozen=True)
class CreatableTopicConfig:
    name: str
    value: str | None


@dataclass(frozen=True)
class CreatableTopic:
    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    configs: tuple[CreatableTopicConfig, ...] = ()


@dataclass(frozen=True)
class CreateTopicsRequest:
    topics: tuple[CreatableTopic, ...]
    timeout_ms: int = 60000
    validate_only: bool = False


@dataclass(frozen=True)
class CreatableTopicResult:
    name: str
    topic_id: str | None = None
    error_code: int = 0
    error_message: str | None = None
    num_partitions: int = -1
    configs: dict = field(default_factory=dict)


@dataclass(frozen=True)
class CreateTopicsResponse:
    topics: tuple[CreatableTopicResult, ...]


@dataclass(frozen=True)
class DeleteTopicsRequest:
    topic_names: tuple[str, ...]
    timeout_ms: int = 60000


@dataclass(frozen=True)
class DeletableTopicResult:
    name: str
    topic_id: str | None = None
    error_code: int = 0
    error_message: str | None = None


@dataclass(frozen=True)
class DeleteTopicsResponse:
    responses: tuple[DeletableTopicResult, ...]


@dataclass(frozen=True)
class CreatePartitionsTopic:
    name: str
    count: int


@dataclass(frozen=True)
class CreatePartitionsRequest:
    topics: tuple[CreatePartitionsTopic, ...]
    timeout_ms: int = 60000
    validate_only: bool = False


@dataclass(frozen=True)
class CreatePartitionsTopicResult:
    name: str
    error_code: int = 0
    error_message: str | None = None


@dataclass(frozen=True)
class CreatePartitionsResponse:
    results: tuple[CreatePartitionsTopicResult, ...]


# Kafka's IncrementalAlterConfigs on a TOPIC resource, narrowed to one topic (its
# DescribeConfigs is the configs Metadata returns).

@dataclass(frozen=True)
class AlterTopicConfigRequest:
    name: str
    configs: dict  # name -> value (SET), or None (DELETE)
    validate_only: bool = False


@dataclass(frozen=True)
class AlterTopicConfigResponse:
    name: str
    error_code: int = 0
    error_message: str | None = None
    configs: dict = field(default_factory=dict)  # the topic's configs after the change


@dataclass(frozen=True)
class MetadataRequest:
    topics: tuple[str, ...] | None = None  # None: every topic


@dataclass(frozen=True)
class MetadataResponsePartition:
    partition_index: int
    error_code: int = 0


@dataclass(frozen=True)
class MetadataResponseTopic:
    name: str
    topic_id: str | None
    error_code: int = 0
    partitions: tuple[MetadataResponsePartition, ...] = ()
    configs: dict = field(default_factory=dict)


@dataclass(frozen=True)
class MetadataResponse:
    topics: tuple[MetadataResponseTopic, ...]


@dataclass(frozen=True)
class ProduceRequest:
    topic: str
    partition: int
    records: bytes  # runtime.topics.data.encode_records(...)
    record_count: int
    max_timestamp: int
    acks: int = -1
    timeout_ms: int = 30000
    transactional_id: str | None = None
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1
    is_transactional: bool = False
    # Stands for the request's version: Kafka's producer sends Produce v12 and later
    # (transaction version 2) when the cluster's transaction.version feature is 2.
    transaction_version: int = 2


@dataclass(frozen=True)
class ProduceResponse:
    topic: str
    partition: int
    error_code: int = 0
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    error_message: str | None = None
    # INVALID_RECORD's refused records, (index in the batch, why) (runtime.errors.RecordErrors).
    record_errors: tuple[tuple[int, str], ...] = ()


@dataclass(frozen=True)
class FetchRequest:
    topic: str
    partition: int
    fetch_offset: int
    partition_max_bytes: int = 1048576
    max_wait_ms: int = 500
    min_bytes: int = 1
    isolation_level: int = READ_UNCOMMITTED
    max_records: int | None = None


@dataclass(frozen=True)
class FetchedBatch:
    base_offset: int
    last_offset: int
    records: bytes  # decode with runtime.topics.data.decode_batch
    producer_id: int = -1
    is_transactional: bool = False
    is_control: bool = False


@dataclass(frozen=True)
class AbortedTransaction:
    producer_id: int
    first_offset: int


@dataclass(frozen=True)
class FetchResponse:
    topic: str
    partition: int
    error_code: int = 0
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    batches: tuple[FetchedBatch, ...] = ()
    aborted_transactions: tuple[AbortedTransaction, ...] = ()
    error_message: str | None = None


@dataclass(frozen=True)
class ListOffsetsRequest:
    topic: str
    partition: int
    timestamp: int = LATEST_TIMESTAMP
    isolation_level: int = READ_UNCOMMITTED


@dataclass(frozen=True)
class ListOffsetsResponse:
    topic: str
    partition: int
    error_code: int = 0
    timestamp: int = -1
    offset: int = -1
    error_message: str | None = None


@dataclass(frozen=True)
class DeleteRecordsRequest:
    """Kafka's DeleteRecords for one partition: the records before `offset` go (-1: the
    high watermark)."""
    topic: str
    partition: int
    offset: int


@dataclass(frozen=True)
class DeleteRecordsResponse:
    topic: str
    partition: int
    error_code: int = 0
    low_watermark: int = -1  # the log start offset after it
    error_message: str | None = None


# ---------------------------------------------------------------------- whole-request errors (errors.py)

@answers_errors_of(CreateTopicsRequest)
def _create_topics_error(request: CreateTopicsRequest, error: KafkaError) -> CreateTopicsResponse:
    return CreateTopicsResponse(tuple(CreatableTopicResult(t.name, None, error.code, error.message)
                                      for t in request.topics))


@answers_errors_of(DeleteTopicsRequest)
def _delete_topics_error(request: DeleteTopicsRequest, error: KafkaError) -> DeleteTopicsResponse:
    return DeleteTopicsResponse(tuple(DeletableTopicResult(n, None, error.code, error.message)
                                      for n in request.topic_names))


@answers_errors_of(CreatePartitionsRequest)
def _create_partitions_error(request: CreatePartitionsRequest, error: KafkaError) -> CreatePartitionsResponse:
    return CreatePartitionsResponse(tuple(CreatePartitionsTopicResult(t.name, error.code, error.message)
                                          for t in request.topics))


@answers_errors_of(AlterTopicConfigRequest)
def _alter_topic_config_error(request: AlterTopicConfigRequest, error: KafkaError) -> AlterTopicConfigResponse:
    return AlterTopicConfigResponse(request.name, error.code, error.message)


@answers_errors_of(ProduceRequest)
def _produce_error(request: ProduceRequest, error: KafkaError) -> ProduceResponse:
    return ProduceResponse(request.topic, request.partition, error.code, error_message=error.message,
                           record_errors=getattr(error, "record_errors", ()))


@answers_errors_of(DeleteRecordsRequest)
def _delete_records_error(request: DeleteRecordsRequest, error: KafkaError) -> DeleteRecordsResponse:
    return DeleteRecordsResponse(request.topic, request.partition, error.code, error_message=error.message)


@answers_errors_of(ListOffsetsRequest)
def _list_offsets_error(request: ListOffsetsRequest, error: KafkaError) -> ListOffsetsResponse:
    return ListOffsetsResponse(request.topic, request.partition, error.code, error_message=error.message)
