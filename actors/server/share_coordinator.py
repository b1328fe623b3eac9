"""The share coordinator actor of one __share_group_state partition: Kafka's share-group
state APIs as methods. Every request carries many share partitions (batched); the shard
answers each on its own. When the shard cannot serve at all (loading, unloaded), every
partition of the request gets that error, as Kafka's share coordinator service does."""
from __future__ import annotations

from runtime.messages.share_state import (
    DeleteShareGroupStateRequest, DeleteShareGroupStateResponse, InitializeShareGroupStateRequest,
    InitializeShareGroupStateResponse, ReadShareGroupStateRequest, ReadShareGroupStateResponse,
    ReadShareGroupStateSummaryRequest, ReadShareGroupStateSummaryResponse, WriteShareGroupStateRequest,
    WriteShareGroupStateResponse,
)
from runtime.share_state.coordinator import ShareCoordinatorShard
from runtime.topics.internal import SHARE_GROUP_STATE_TOPIC, log_name

from .shard_host import ShardHost

__all__ = ["ShareCoordinatorActor", "share_state_log_name"]


def share_state_log_name(partition: int) -> str:
    return log_name(SHARE_GROUP_STATE_TOPIC, partition)


class ShareCoordinatorActor(ShardHost):
    def __init__(self, data_dir: str, partition: int, config: dict) -> None:
        super().__init__(share_state_log_name(partition), partition, ShareCoordinatorShard, data_dir, config)

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
        return await self._answer(request, lambda s: s.read_share_group_state_summary(request), read=True)
