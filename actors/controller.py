"""The controller actor: topic metadata (its own durable log) and the deployment's settings."""
from __future__ import annotations

import uuid

from runtime.messages.topics import (CreatePartitionsRequest, CreatePartitionsResponse, CreateTopicsRequest,
                                     CreateTopicsResponse, DeleteTopicsRequest, DeleteTopicsResponse, MetadataRequest,
                                     MetadataResponse)
from runtime.topics.internal import CLUSTER_METADATA_TOPIC, log_name
from runtime.topics.metadata import TopicMetadataShard

from .shard_host import ShardHost

METADATA_LOG = log_name(CLUSTER_METADATA_TOPIC, 0)


class ControllerActor(ShardHost):
    def __init__(self, data_dir: str, config: dict, namespace: str, detached: bool) -> None:
        super().__init__(METADATA_LOG, 0, TopicMetadataShard, data_dir, config)
        self._deployment = {"data_dir": data_dir, "config": dict(config), "namespace": namespace,
                            "detached": detached}

    async def deployment(self) -> dict:
        return dict(self._deployment)

    async def create_topics(self, request: CreateTopicsRequest) -> CreateTopicsResponse:
        ids = [str(uuid.uuid4()) for _ in request.topics]
        return await self._answer(request, lambda shard, now: shard.create_topics(request, now, ids))

    async def delete_topics(self, request: DeleteTopicsRequest) -> DeleteTopicsResponse:
        return await self._answer(request, lambda shard, now: shard.delete_topics(request, now))

    async def create_partitions(self, request: CreatePartitionsRequest) -> CreatePartitionsResponse:
        return await self._answer(request, lambda shard, now: shard.create_partitions(request, now))

    async def metadata(self, request: MetadataRequest) -> MetadataResponse:
        # Kafka's Metadata response has no top-level error; while loading the KafkaError
        # itself reaches the caller, whose retry loop treats it as retriable.
        return await self._read(lambda shard: shard.metadata(request))
