"""The controller actor: topic metadata (its own durable log) and the deployment's settings."""
from __future__ import annotations

import uuid

from runtime.errors import KafkaError
from runtime.messages.topics import (CreatableTopicResult, CreatePartitionsRequest, CreatePartitionsResponse,
                                     CreatePartitionsTopicResult, CreateTopicsRequest, CreateTopicsResponse,
                                     DeletableTopicResult, DeleteTopicsRequest, DeleteTopicsResponse,
                                     MetadataRequest, MetadataResponse)
from runtime.topics.metadata import TopicMetadataShard

from .shard_host import ShardHost

METADATA_LOG = "__cluster_metadata-0"


class ControllerActor(ShardHost):
    def __init__(self, data_dir: str, config: dict, namespace: str, detached: bool) -> None:
        super().__init__(METADATA_LOG, 0, TopicMetadataShard, data_dir, config)
        self._deployment = {"data_dir": data_dir, "config": dict(config), "namespace": namespace,
                            "detached": detached}

    async def deployment(self) -> dict:
        return dict(self._deployment)

    async def create_topics(self, request: CreateTopicsRequest) -> CreateTopicsResponse:
        ids = [str(uuid.uuid4()) for _ in request.topics]
        try:
            return await self._write(lambda shard, now: shard.create_topics(request, now, ids))
        except KafkaError as e:
            return CreateTopicsResponse(tuple(CreatableTopicResult(t.name, None, e.code, e.message)
                                              for t in request.topics))

    async def delete_topics(self, request: DeleteTopicsRequest) -> DeleteTopicsResponse:
        try:
            return await self._write(lambda shard, now: shard.delete_topics(request, now))
        except KafkaError as e:
            return DeleteTopicsResponse(tuple(DeletableTopicResult(n, None, e.code, e.message)
                                              for n in request.topic_names))

    async def create_partitions(self, request: CreatePartitionsRequest) -> CreatePartitionsResponse:
        try:
            return await self._write(lambda shard, now: shard.create_partitions(request, now))
        except KafkaError as e:
            return CreatePartitionsResponse(tuple(CreatePartitionsTopicResult(t.name, e.code, e.message)
                                                  for t in request.topics))

    async def metadata(self, request: MetadataRequest) -> MetadataResponse:
        # Kafka's Metadata response has no top-level error; while loading the KafkaError
        # itself reaches the caller, whose retry loop treats it as retriable.
        return await self._read(lambda shard: shard.metadata(request))
