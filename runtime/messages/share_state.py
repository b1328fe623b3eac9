"""The share-group state RPCs between a SharePartition and the share coordinator (KIP-932):
InitializeShareGroupState, ReadShareGroupState, WriteShareGroupState, DeleteShareGroupState
and ReadShareGroupStateSummary, in the shape of Kafka's latest schemas (WriteShareGroupState
and ReadShareGroupStateSummary carry KIP-1226's delivery complete count).

Every request carries many topics and partitions of one group, so that one call updates a
whole batch of share partitions. Kafka names each message's topic struct uniquely
(InitializeStateData, ReadStateResult, ...) but calls every partition struct PartitionData or
PartitionResult; since all messages share one package, the partition structs carry their
topic struct's stem as a prefix (InitializeStatePartitionData, ReadStatePartitionResult).
State batches are `PersisterStateBatch`, the same tuple the records hold.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..share_state.records import PersisterStateBatch
from ..errors import KafkaError
from .errors import answers_errors_of

__all__ = [
    "PersisterStateBatch", "UNINITIALIZED_START_OFFSET", "UNINITIALIZED_DELIVERY_COMPLETE_COUNT",
    "InitializeShareGroupStateRequest", "InitializeStateData", "InitializeStatePartitionData",
    "InitializeShareGroupStateResponse", "InitializeStateResult", "InitializeStatePartitionResult",
    "ReadShareGroupStateRequest", "ReadStateData", "ReadStatePartitionData",
    "ReadShareGroupStateResponse", "ReadStateResult", "ReadStatePartitionResult",
    "WriteShareGroupStateRequest", "WriteStateData", "WriteStatePartitionData",
    "WriteShareGroupStateResponse", "WriteStateResult", "WriteStatePartitionResult",
    "DeleteShareGroupStateRequest", "DeleteStateData", "DeleteStatePartitionData",
    "DeleteShareGroupStateResponse", "DeleteStateResult", "DeleteStatePartitionResult",
    "ReadShareGroupStateSummaryRequest", "ReadStateSummaryData", "ReadStateSummaryPartitionData",
    "ReadShareGroupStateSummaryResponse", "ReadStateSummaryResult", "ReadStateSummaryPartitionResult",
]

# What the share coordinator reports for a share partition whose state never had a start
# offset (or delivery-complete count) written (Kafka's PartitionFactory).
UNINITIALIZED_START_OFFSET = -1
UNINITIALIZED_DELIVERY_COMPLETE_COUNT = -1


# ---- InitializeShareGroupState (API key 83) ----

@dataclass(frozen=True)
class InitializeStatePartitionData:
    partition: int
    state_epoch: int = 0
    start_offset: int = -1  # -1: the start offset is not being initialised


@dataclass(frozen=True)
class InitializeStateData:
    topic_id: str
    partitions: tuple[InitializeStatePartitionData, ...] = ()


@dataclass(frozen=True)
class InitializeShareGroupStateRequest:
    group_id: str
    topics: tuple[InitializeStateData, ...] = ()


@dataclass(frozen=True)
class InitializeStatePartitionResult:
    partition: int
    error_code: int = 0
    error_message: str | None = None


@dataclass(frozen=True)
class InitializeStateResult:
    topic_id: str
    partitions: tuple[InitializeStatePartitionResult, ...] = ()


@dataclass(frozen=True)
class InitializeShareGroupStateResponse:
    results: tuple[InitializeStateResult, ...] = ()


# ---- ReadShareGroupState (API key 84) ----

@dataclass(frozen=True)
class ReadStatePartitionData:
    partition: int
    leader_epoch: int = 0


@dataclass(frozen=True)
class ReadStateData:
    topic_id: str
    partitions: tuple[ReadStatePartitionData, ...] = ()


@dataclass(frozen=True)
class ReadShareGroupStateRequest:
    group_id: str
    topics: tuple[ReadStateData, ...] = ()


@dataclass(frozen=True)
class ReadStatePartitionResult:
    partition: int
    error_code: int = 0
    error_message: str | None = None
    state_epoch: int = 0
    start_offset: int = 0  # UNINITIALIZED_START_OFFSET: the share partition was never initialised with one
    state_batches: tuple[PersisterStateBatch, ...] = ()


@dataclass(frozen=True)
class ReadStateResult:
    topic_id: str
    partitions: tuple[ReadStatePartitionResult, ...] = ()


@dataclass(frozen=True)
class ReadShareGroupStateResponse:
    results: tuple[ReadStateResult, ...] = ()


# ---- WriteShareGroupState (API key 85) ----

@dataclass(frozen=True)
class WriteStatePartitionData:
    partition: int
    state_epoch: int = 0
    leader_epoch: int = 0
    start_offset: int = -1  # -1: the start offset is not being written
    delivery_complete_count: int = -1
    state_batches: tuple[PersisterStateBatch, ...] = ()


@dataclass(frozen=True)
class WriteStateData:
    topic_id: str
    partitions: tuple[WriteStatePartitionData, ...] = ()


@dataclass(frozen=True)
class WriteShareGroupStateRequest:
    group_id: str
    topics: tuple[WriteStateData, ...] = ()


@dataclass(frozen=True)
class WriteStatePartitionResult:
    partition: int
    error_code: int = 0
    error_message: str | None = None


@dataclass(frozen=True)
class WriteStateResult:
    topic_id: str
    partitions: tuple[WriteStatePartitionResult, ...] = ()


@dataclass(frozen=True)
class WriteShareGroupStateResponse:
    results: tuple[WriteStateResult, ...] = ()


# ---- DeleteShareGroupState (API key 86) ----

@dataclass(frozen=True)
class DeleteStatePartitionData:
    partition: int


@dataclass(frozen=True)
class DeleteStateData:
    topic_id: str
    partitions: tuple[DeleteStatePartitionData, ...] = ()


@dataclass(frozen=True)
class DeleteShareGroupStateRequest:
    group_id: str
    topics: tuple[DeleteStateData, ...] = ()


@dataclass(frozen=True)
class DeleteStatePartitionResult:
    partition: int
    error_code: int = 0
    error_message: str | None = None


@dataclass(frozen=True)
class DeleteStateResult:
    topic_id: str
    partitions: tuple[DeleteStatePartitionResult, ...] = ()


@dataclass(frozen=True)
class DeleteShareGroupStateResponse:
    results: tuple[DeleteStateResult, ...] = ()


# ---- ReadShareGroupStateSummary (API key 87) ----

@dataclass(frozen=True)
class ReadStateSummaryPartitionData:
    partition: int
    leader_epoch: int = 0


@dataclass(frozen=True)
class ReadStateSummaryData:
    topic_id: str
    partitions: tuple[ReadStateSummaryPartitionData, ...] = ()


@dataclass(frozen=True)
class ReadShareGroupStateSummaryRequest:
    group_id: str
    topics: tuple[ReadStateSummaryData, ...] = ()


@dataclass(frozen=True)
class ReadStateSummaryPartitionResult:
    partition: int
    error_code: int = 0
    error_message: str | None = None
    state_epoch: int = 0
    leader_epoch: int = 0
    start_offset: int = 0
    delivery_complete_count: int = -1


@dataclass(frozen=True)
class ReadStateSummaryResult:
    topic_id: str
    partitions: tuple[ReadStateSummaryPartitionResult, ...] = ()


@dataclass(frozen=True)
class ReadShareGroupStateSummaryResponse:
    results: tuple[ReadStateSummaryResult, ...] = ()


# ---------------------------------------------------------------------- whole-request errors (errors.py)

def _per_partition(response: type, topic_result: type, partition_result: type):
    """The builder of a share-state response that answers each partition of each topic."""
    def build(request, error: KafkaError):
        return response(tuple(
            topic_result(t.topic_id, tuple(partition_result(p.partition, error_code=error.code,
                                                            error_message=error.message) for p in t.partitions))
            for t in request.topics))
    return build


for _request, _shape in {
    InitializeShareGroupStateRequest: (InitializeShareGroupStateResponse, InitializeStateResult,
                                       InitializeStatePartitionResult),
    ReadShareGroupStateRequest: (ReadShareGroupStateResponse, ReadStateResult, ReadStatePartitionResult),
    WriteShareGroupStateRequest: (WriteShareGroupStateResponse, WriteStateResult, WriteStatePartitionResult),
    DeleteShareGroupStateRequest: (DeleteShareGroupStateResponse, DeleteStateResult, DeleteStatePartitionResult),
    ReadShareGroupStateSummaryRequest: (ReadShareGroupStateSummaryResponse, ReadStateSummaryResult,
                                        ReadStateSummaryPartitionResult),
}.items():
    answers_errors_of(_request)(_per_partition(*_shape))
del _request, _shape
