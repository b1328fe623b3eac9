"""Transaction coordinator messages: InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn,
EndTxn, DescribeTransactions and ListTransactions, as of Kafka 4.x, WriteTxnMarkers, which
the coordinator sends to partition leaders (and group coordinators), and TxnOffsetCommit,
which a transactional producer sends to the group coordinator.

Kafka's DescribeTransactions and ListTransactions responses both name a nested struct
`TransactionState`, and DescribeTransactions has a `TopicData`; they would collide in the flat
`runtime.messages` namespace (and with the coordinator's TransactionState enum), so those
nested structs carry their message's name as a prefix.
"""
from __future__ import annotations

from dataclasses import dataclass
from ..errors import KafkaError
from .errors import answers_errors_of

__all__ = [
    "InitProducerIdRequest", "InitProducerIdResponse",
    "AddPartitionsToTxnTopic", "AddPartitionsToTxnTransaction", "AddPartitionsToTxnRequest",
    "AddPartitionsToTxnPartitionResult", "AddPartitionsToTxnTopicResult", "AddPartitionsToTxnResult",
    "AddPartitionsToTxnResponse",
    "AddOffsetsToTxnRequest", "AddOffsetsToTxnResponse",
    "EndTxnRequest", "EndTxnResponse",
    "DescribeTransactionsRequest", "DescribeTransactionsTopicData", "DescribeTransactionsTransactionState",
    "DescribeTransactionsResponse",
    "ListTransactionsRequest", "ListTransactionsTransactionState", "ListTransactionsResponse",
    "WritableTxnMarkerTopic", "WritableTxnMarker", "WriteTxnMarkersRequest",
    "WritableTxnMarkerPartitionResult", "WritableTxnMarkerTopicResult", "WritableTxnMarkerResult",
    "WriteTxnMarkersResponse",
    "TxnOffsetCommitRequestPartition", "TxnOffsetCommitRequestTopic", "TxnOffsetCommitRequest",
    "TxnOffsetCommitResponsePartition", "TxnOffsetCommitResponseTopic", "TxnOffsetCommitResponse",
]


@dataclass(frozen=True)
class InitProducerIdRequest:
    transactional_id: str | None = None  # None: an idempotent producer
    transaction_timeout_ms: int = 60000
    producer_id: int = -1  # the producer's current id and epoch, when it re-initialises
    producer_epoch: int = -1


@dataclass(frozen=True)
class InitProducerIdResponse:
    error_code: int = 0
    producer_id: int = -1
    producer_epoch: int = -1
    throttle_time_ms: int = 0


@dataclass(frozen=True)
class AddPartitionsToTxnTopic:
    name: str
    partitions: tuple[int, ...] = ()


@dataclass(frozen=True)
class AddPartitionsToTxnTransaction:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    verify_only: bool = False  # a partition leader asking whether the partitions are in the transaction
    topics: tuple[AddPartitionsToTxnTopic, ...] = ()


@dataclass(frozen=True)
class AddPartitionsToTxnRequest:
    transactions: tuple[AddPartitionsToTxnTransaction, ...] = ()


@dataclass(frozen=True)
class AddPartitionsToTxnPartitionResult:
    partition_index: int
    partition_error_code: int = 0


@dataclass(frozen=True)
class AddPartitionsToTxnTopicResult:
    name: str
    results_by_partition: tuple[AddPartitionsToTxnPartitionResult, ...] = ()


@dataclass(frozen=True)
class AddPartitionsToTxnResult:
    transactional_id: str
    topic_results: tuple[AddPartitionsToTxnTopicResult, ...] = ()


@dataclass(frozen=True)
class AddPartitionsToTxnResponse:
    error_code: int = 0
    results_by_transaction: tuple[AddPartitionsToTxnResult, ...] = ()
    throttle_time_ms: int = 0


@dataclass(frozen=True)
class AddOffsetsToTxnRequest:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    group_id: str


@dataclass(frozen=True)
class AddOffsetsToTxnResponse:
    error_code: int = 0
    throttle_time_ms: int = 0


@dataclass(frozen=True)
class EndTxnRequest:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    committed: bool  # True to commit, False to abort
    # Stands for the request's version: Kafka's producer sends EndTxn v5 (transaction
    # version 2) when the cluster's transaction.version feature is 2, v4 otherwise.
    transaction_version: int = 2


@dataclass(frozen=True)
class EndTxnResponse:
    error_code: int = 0
    producer_id: int = -1  # version 2: the producer id and epoch to go on with
    producer_epoch: int = -1
    throttle_time_ms: int = 0


@dataclass(frozen=True)
class DescribeTransactionsRequest:
    transactional_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class DescribeTransactionsTopicData:
    topic: str
    partitions: tuple[int, ...] = ()


@dataclass(frozen=True)
class DescribeTransactionsTransactionState:
    error_code: int
    transactional_id: str
    transaction_state: str = ""
    transaction_timeout_ms: int = 0
    transaction_start_time_ms: int = -1
    producer_id: int = -1
    producer_epoch: int = -1
    topics: tuple[DescribeTransactionsTopicData, ...] = ()


@dataclass(frozen=True)
class DescribeTransactionsResponse:
    transaction_states: tuple[DescribeTransactionsTransactionState, ...] = ()
    throttle_time_ms: int = 0


@dataclass(frozen=True)
class ListTransactionsRequest:
    state_filters: tuple[str, ...] = ()  # Kafka's state names ("Ongoing", ...); empty: all
    producer_id_filters: tuple[int, ...] = ()
    duration_filter: int = -1  # only transactions running at least this long; -1: no filter
    transactional_id_pattern: str | None = None  # a regular expression; None: no filter


@dataclass(frozen=True)
class ListTransactionsTransactionState:
    transactional_id: str
    producer_id: int
    transaction_state: str


@dataclass(frozen=True)
class ListTransactionsResponse:
    error_code: int = 0
    unknown_state_filters: tuple[str, ...] = ()
    transaction_states: tuple[ListTransactionsTransactionState, ...] = ()
    throttle_time_ms: int = 0


@dataclass(frozen=True)
class WritableTxnMarkerTopic:
    name: str
    partition_indexes: tuple[int, ...] = ()


@dataclass(frozen=True)
class WritableTxnMarker:
    producer_id: int
    producer_epoch: int
    transaction_result: bool  # True: commit, False: abort
    topics: tuple[WritableTxnMarkerTopic, ...] = ()
    coordinator_epoch: int = 0
    transaction_version: int = 1  # 2: the marker's epoch is the one the transaction's end bumped to


@dataclass(frozen=True)
class WriteTxnMarkersRequest:
    markers: tuple[WritableTxnMarker, ...] = ()


@dataclass(frozen=True)
class WritableTxnMarkerPartitionResult:
    partition_index: int
    error_code: int = 0


@dataclass(frozen=True)
class WritableTxnMarkerTopicResult:
    name: str
    partitions: tuple[WritableTxnMarkerPartitionResult, ...] = ()


@dataclass(frozen=True)
class WritableTxnMarkerResult:
    producer_id: int
    topics: tuple[WritableTxnMarkerTopicResult, ...] = ()


@dataclass(frozen=True)
class WriteTxnMarkersResponse:
    markers: tuple[WritableTxnMarkerResult, ...] = ()

    @classmethod
    def from_results(cls, results) -> "WriteTxnMarkersResponse":
        """From (producer id, topic, partition, error code) per marker partition, in order."""
        by_producer: dict[int, dict[str, list]] = {}
        for producer_id, topic, partition, code in results:
            by_producer.setdefault(producer_id, {}).setdefault(topic, []).append(
                WritableTxnMarkerPartitionResult(partition, code))
        return cls(tuple(WritableTxnMarkerResult(pid, tuple(WritableTxnMarkerTopicResult(t, tuple(ps))
                                                            for t, ps in topics.items()))
                         for pid, topics in by_producer.items()))


@dataclass(frozen=True)
class TxnOffsetCommitRequestPartition:
    partition_index: int
    committed_offset: int
    committed_leader_epoch: int = -1
    committed_metadata: str | None = None


@dataclass(frozen=True)
class TxnOffsetCommitRequestTopic:
    name: str
    partitions: tuple[TxnOffsetCommitRequestPartition, ...] = ()


@dataclass(frozen=True)
class TxnOffsetCommitRequest:
    transactional_id: str
    group_id: str
    producer_id: int
    producer_epoch: int
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None
    topics: tuple[TxnOffsetCommitRequestTopic, ...] = ()


@dataclass(frozen=True)
class TxnOffsetCommitResponsePartition:
    partition_index: int
    error_code: int = 0


@dataclass(frozen=True)
class TxnOffsetCommitResponseTopic:
    name: str
    partitions: tuple[TxnOffsetCommitResponsePartition, ...] = ()


@dataclass(frozen=True)
class TxnOffsetCommitResponse:
    topics: tuple[TxnOffsetCommitResponseTopic, ...] = ()
    throttle_time_ms: int = 0


# ---------------------------------------------------------------------- whole-request errors (errors.py)

@answers_errors_of(InitProducerIdRequest)
def _init_producer_id_error(request: InitProducerIdRequest, error: KafkaError) -> InitProducerIdResponse:
    return InitProducerIdResponse(error_code=error.code)


@answers_errors_of(AddPartitionsToTxnRequest)
def _add_partitions_to_txn_error(request: AddPartitionsToTxnRequest, error: KafkaError) -> AddPartitionsToTxnResponse:
    return AddPartitionsToTxnResponse(error.code, tuple(AddPartitionsToTxnResult(t.transactional_id, tuple(
        AddPartitionsToTxnTopicResult(topic.name, tuple(AddPartitionsToTxnPartitionResult(p, error.code)
                                                        for p in topic.partitions))
        for topic in t.topics)) for t in request.transactions))


@answers_errors_of(AddOffsetsToTxnRequest)
def _add_offsets_to_txn_error(request: AddOffsetsToTxnRequest, error: KafkaError) -> AddOffsetsToTxnResponse:
    return AddOffsetsToTxnResponse(error_code=error.code)


@answers_errors_of(EndTxnRequest)
def _end_txn_error(request: EndTxnRequest, error: KafkaError) -> EndTxnResponse:
    return EndTxnResponse(error_code=error.code)


@answers_errors_of(DescribeTransactionsRequest)
def _describe_transactions_error(request: DescribeTransactionsRequest,
                                 error: KafkaError) -> DescribeTransactionsResponse:
    return DescribeTransactionsResponse(tuple(DescribeTransactionsTransactionState(error.code, tid)
                                              for tid in request.transactional_ids))


@answers_errors_of(ListTransactionsRequest)
def _list_transactions_error(request: ListTransactionsRequest, error: KafkaError) -> ListTransactionsResponse:
    return ListTransactionsResponse(error_code=error.code)


@answers_errors_of(TxnOffsetCommitRequest)
def _txn_offset_commit_error(request: TxnOffsetCommitRequest, error: KafkaError) -> TxnOffsetCommitResponse:
    return TxnOffsetCommitResponse(tuple(TxnOffsetCommitResponseTopic(t.name, tuple(
        TxnOffsetCommitResponsePartition(p.partition_index, error.code) for p in t.partitions))
        for t in request.topics))
