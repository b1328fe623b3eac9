"""The share coordinator actor of one __share_group_state partition: Kafka's share-group
state APIs as methods. Every request carries many share partitions (batched); the shard
answers each on its own. When the shard cannot serve at all (loading, unloaded), every
partition of the request gets that error, as Kafka's share coordinator service does."""
from __future__ import annotations

from runtime.errors import KafkaError
from runtime.messages.share_state import (
    DeleteShareGroupStateRequest, DeleteShareGroupStateResponse, DeleteStatePartitionResult, DeleteStateResult,
    InitializeShareGroupStateRequest, InitializeShareGroupStateResponse, InitializeStatePartitionResult,
    InitializeStateResult, ReadShareGroupStateRequest, ReadShareGroupStateResponse,
    ReadShareGroupStateSummaryRequest, ReadShareGroupStateSummaryResponse, ReadStatePartitionResult,
    ReadStateResult, ReadStateSummaryPartitionResult, ReadStateSummaryResult, WriteShareGroupStateRequest,
    WriteShareGroupStateResponse, WriteStatePartitionResult, WriteStateResult,
)
from runtime.share.coordinator import ShareCoordinatorShard

from .shard_host import ShardHost

__all__ = ["ShareCoordinatorActor", "share_state_log_name"]

# request type -> (response, per-topic result, per-partition result)
_SHAPES = {
    InitializeShareGroupStateRequest: (InitializeShareGroupStateResponse, InitializeStateResult,
                                       InitializeStatePartitionResult),
    ReadShareGroupStateRequest: (ReadShareGroupStateResponse, ReadStateResult, ReadStatePartitionResult),
    WriteShareGroupStateRequest: (WriteShareGroupStateResponse, WriteStateResult, WriteStatePartitionResult),
    DeleteShareGroupStateRequest: (DeleteShareGroupStateResponse, DeleteStateResult, DeleteStatePartitionResult),
    ReadShareGroupStateSummaryRequest: (ReadShareGroupStateSummaryResponse, ReadStateSummaryResult,
                                        ReadStateSummaryPartitionResult),
}


def share_state_log_name(partition: int) -> str:
    return f"__share_group_state-{partition}"


def _error_response(request, error: KafkaError):
    response, topic_result, partition_result = _SHAPES[type(request)]
    return response(tuple(
        topic_result(t.topic_id, tuple(partition_result(p.partition, error_code=error.code,
                                                        error_message=error.message) for p in t.partitions))
        for t in request.topics))


class ShareCoordinatorActor(ShardHost):
    def __init__(self, data_dir: str, partition: int, config: dict) -> None:
        super().__init__(share_state_log_name(partition), partition, ShareCoordinatorShard, data_dir, config)

    async def _answer(self, request, operation):
        try:
            return await self._write(operation)
        except KafkaError as e:
            return _error_response(request, e)

    async def initialize_share_group_state(self, request: InitializeShareGroupStateRequest
                                           ) -> InitializeShareGroupStateResponse:
        return await self._answer(request, lambda s, now: s.initialize_share_group_state(request, now))

    async def read_share_group_state(self, request: ReadShareGroupStateRequest) -> ReadShareGroupStateResponse:
        return await self._answer(request, lambda s, now: s.read_share_group_state(request, now))

    async def write_share_group_state(self, request: WriteShareGroupStateRequest) -> WriteShareGroupStateResponse:
        return await self._answer(request, lambda s, now: s.write_share_group_state(request, now))

    async def delete_share_group_state(self, request: DeleteShareGroupStateRequest
                                       ) -> DeleteShareGroupStateResponse:
        return await self._answer(request, lambda s, now: s.delete_share_group_state(request, now))

    async def read_share_group_state_summary(self, request: ReadShareGroupStateSummaryRequest
                                             ) -> ReadShareGroupStateSummaryResponse:
        try:
            return await self._read(lambda s: s.read_share_group_state_summary(request))
        except KafkaError as e:
            return _error_response(request, e)
