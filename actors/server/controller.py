"""The controller actor: topic metadata (its own durable log), the deployment's settings, and
the SharePartition actors, which it creates on demand (they go away when idle, and with their
topic: Kafka's broker removes a deleted partition's SharePartitions with its replica)."""
from __future__ import annotations

import asyncio
import logging
import uuid

import ray

from runtime.errors import Errors, KafkaError
from runtime.messages.topics import (AlterTopicConfigRequest, AlterTopicConfigResponse, CreatePartitionsRequest,
                                     CreatePartitionsResponse, CreateTopicsRequest, CreateTopicsResponse,
                                     DeleteTopicsRequest, DeleteTopicsResponse, MetadataRequest, MetadataResponse)
from runtime.topics.internal import CLUSTER_METADATA_TOPIC, log_name
from runtime.topics.metadata import TopicMetadataShard

from .. import naming
from ..placement import on_node, remote
from ..retry import ActorDirectory, ActorNotFound, await_ref
from .shard_host import ShardHost

log = logging.getLogger(__name__)

METADATA_LOG = log_name(CLUSTER_METADATA_TOPIC, 0)
LEADER_STATUS_TIMEOUT_S = 2.0
LOAD_WAIT_S = 20.0


class ControllerActor(ShardHost):
    def __init__(self, data_dir: str, config: dict, namespace: str, detached: bool) -> None:
        super().__init__(METADATA_LOG, 0, TopicMetadataShard, data_dir, config)
        self._deployment = {"data_dir": data_dir, "config": dict(config), "namespace": namespace,
                            "detached": detached}
        self._creating: dict[str, asyncio.Future] = {}  # SharePartition name -> its creation under way
        # A non-detached actor ends when its owner drops its last handle: the SharePartitions
        # this controller made live as long as it keeps theirs (or until they expire idle).
        self._actors = ActorDirectory(namespace)

    async def deployment(self) -> dict:
        return dict(self._deployment)

    async def create_topics(self, request: CreateTopicsRequest) -> CreateTopicsResponse:
        ids = [str(uuid.uuid4()) for _ in request.topics]
        return await self._answer(request, lambda shard, now: shard.create_topics(request, now, ids))

    async def delete_topics(self, request: DeleteTopicsRequest) -> DeleteTopicsResponse:
        response = await self._answer(request, lambda shard, now: shard.delete_topics(request, now))
        deleted = {d.name for d in response.responses if not d.error_code}
        if deleted:
            await self._end_share_partitions(deleted)
        return response

    async def create_partitions(self, request: CreatePartitionsRequest) -> CreatePartitionsResponse:
        return await self._answer(request, lambda shard, now: shard.create_partitions(request, now))

    async def alter_topic_config(self, request: AlterTopicConfigRequest) -> AlterTopicConfigResponse:
        return await self._answer(request, lambda shard, now: shard.alter_topic_config(request, now))

    async def metadata(self, request: MetadataRequest) -> MetadataResponse:
        # Kafka's Metadata response has no top-level error; while loading the KafkaError
        # itself reaches the caller, whose retry loop treats it as retriable.
        return await self._read(lambda shard: shard.metadata(request))

    async def alter_user_scram_credentials(self, deletions: list[dict], upsertions: list[dict]) -> list[dict]:
        """Kafka's AlterUserScramCredentials in plain values: one result per user."""
        return await self._write(lambda shard, now: shard.alter_user_scram_credentials(deletions, upsertions, now))

    async def describe_user_scram_credentials(self, users: list[dict] | None) -> dict:
        return await self._read(lambda shard: shard.describe_user_scram_credentials(users))

    async def scram_credentials(self, user: str) -> dict:
        """A user's credentials by SCRAM mechanism, for the gateways' authentication."""
        return await self._read(lambda shard: shard.scram_credentials(user))

    async def ensure_share_partition(self, group_id: str, topic: str, topic_id: str, partition: int) -> None:
        """Create the SharePartition actor of the group on the topic partition unless one
        runs: on the partition leader's node when it answers (soft), owned by this controller
        (detached in a detached deployment). Callers then find it by name. Callers asking at
        once share one creation: a second actor under the name would fail, and the first
        would end with the handle it replaced."""
        # A controller restarting loads its topics first: the caller waits for that rather
        # than getting NOT_COORDINATOR, which a Kafka client does not expect from a fetch.
        await self.ready(LOAD_WAIT_S)
        (known,) = (await self._read(lambda shard: shard.metadata(MetadataRequest((topic,))))).topics
        if known.error_code or known.topic_id != topic_id:
            raise KafkaError(Errors.UNKNOWN_TOPIC_ID, f"no topic {topic} has id {topic_id}")
        if not 0 <= partition < len(known.partitions):
            raise KafkaError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"{topic} has no partition {partition}")
        name = naming.share_partition(group_id, topic, partition)
        creating = self._creating.get(name)
        if creating is None:
            creating = self._creating[name] = asyncio.ensure_future(
                self._create_share_partition(name, group_id, topic, topic_id, partition))
            creating.add_done_callback(lambda _: self._creating.pop(name, None))
        await asyncio.shield(creating)

    async def _create_share_partition(self, name: str, group_id: str, topic: str, topic_id: str,
                                      partition: int) -> None:
        from .share_partition import SharePartitionActor
        d = self._deployment
        try:
            running = await self._actors.lookup(name, fresh=True)  # not a cached one: it may have gone away idle
        except ActorNotFound:
            running = None
        if running is not None:
            # The name is the topic's, not its id's: one left from a deleted topic of the same
            # name (this controller was away at the deletion) is ended, and a new one made.
            try:
                if (await await_ref(running.status.remote(), LEADER_STATUS_TIMEOUT_S))["topic_id"] == topic_id:
                    return
            except Exception:  # ending or restarting: the caller's call tells it, and it asks again
                return
            await asyncio.get_running_loop().run_in_executor(None, self._actors.kill, name)
        node = None
        try:
            node = (await self._actors.send(naming.partition_host_of(topic, partition, self._deployment["config"]),
                                            "partition_status", topic, partition,
                                            timeout_s=LEADER_STATUS_TIMEOUT_S))["node_id"]
        except Exception as e:  # no leader, or it is restarting: let Ray place it
            log.info("placing %s without its leader's node: %s", name, e)
        # Creating a named actor asks Ray's control service: off the event loop, as lookups.
        await self._actors.create(name, lambda: remote(
            SharePartitionActor, name, d["namespace"], d["detached"], d["config"], strategy=on_node(node),
        ).remote(d["namespace"], group_id, topic, topic_id, partition, d["config"]))

    async def _end_share_partitions(self, topics: set[str]) -> None:
        """End the SharePartitions of these topics and wait until their names are free. Their
        acquisitions end with them; the gateway and shoal's consumers then find the topics
        gone (ensure_share_partition)."""
        def end() -> None:
            for a in ray.util.list_named_actors(all_namespaces=True):
                parsed = naming.parse_share_partition(a["name"])
                if a["namespace"] == self._actors.namespace and parsed is not None and parsed[1] in topics:
                    self._actors.kill(a["name"])
        await asyncio.get_running_loop().run_in_executor(None, end)
