"""The gateway's topic and data-path APIs: Metadata, CreateTopics, Produce, ListOffsets and
InitProducerId (Fetch is in fetch.py), each turned into calls on the controller, the partition
leaders and the transaction coordinators. A handler takes the gateway and the request event
and returns the response as plain values (runtime.wire.entities builds the version asked).

Records cross in Kafka's record batch v2; a produced batch goes to its partition leader as
it came (runtime.wire.storage).
"""
from __future__ import annotations

import asyncio

from runtime.errors import Errors, KafkaError
from runtime.messages.topics import (EARLIEST_LOCAL_TIMESTAMP, EARLIEST_PENDING_UPLOAD_TIMESTAMP, EARLIEST_TIMESTAMP,
                                     LATEST_TIERED_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP, CreatableTopic,
                                     CreatableTopicConfig, CreateTopicsRequest, ListOffsetsRequest, MetadataRequest)
from runtime.messages.txn import InitProducerIdRequest
from runtime.topics.assignments import topic_assignment
from runtime.wire.entities import ZERO_UUID, plain
from runtime.wire.storage import produce_request

from ... import naming
from ..deployment import start_partitions, topics_changed

UNKNOWN_AUTHORIZED_OPERATIONS = -2147483648


def partition_error(e: KafkaError) -> int:
    """A failed call on a partition leader as a Kafka client expects it: a leader actor that
    is missing or away is NOT_LEADER_OR_FOLLOWER (the client refreshes its metadata and
    retries; Metadata tells a missing topic apart)."""
    if e.error is Errors.COORDINATOR_NOT_AVAILABLE:
        return Errors.NOT_LEADER_OR_FOLLOWER.code
    return e.code


# ------------------------------------------------------------------ topics and their leaders

async def known_topics(gw, names) -> dict:
    """name -> MetadataResponseTopic of those of `names` that exist (None: every topic)."""
    response = await gw.call(naming.CONTROLLER, "metadata", MetadataRequest(None if names is None else tuple(names)))
    return {t.name: t for t in response.topics if not t.error_code}


async def leader_ids(gw, partitions) -> dict[tuple[str, int], int]:
    """(topic, partition) -> the broker id of its leader: the gateway on the node of its
    partition host (brokers.py)."""
    partitions = list(partitions)
    hosts = {naming.partition_host_of(t, p, gw.config) for t, p in partitions}
    brokers = dict(zip(hosts, await asyncio.gather(*(gw.brokers.for_actor(h) for h in hosts))))
    return {(t, p): brokers[naming.partition_host_of(t, p, gw.config)]["node_id"] for t, p in partitions}


def one_replica(leader: int) -> dict:
    """A partition's replicas as Kafka describes them, shoal keeping one: its leader's, in
    sync, at epoch 0 (leaders are never elected)."""
    return {"leader_id": leader, "leader_epoch": 0, "replica_nodes": [leader], "isr_nodes": [leader],
            "offline_replicas": []}


# ------------------------------------------------------------------ Metadata

async def metadata(gw, event) -> dict:
    request = plain(event.request)
    topics = request["topics"]
    unknown_ids = []
    if topics is not None:
        # From v10 a topic may be asked by id alone (librdkafka's KIP-848 and share
        # consumers do, for the ids of their assignments).
        asked_ids = [t["topic_id"] for t in topics if not t.get("name") and t.get("topic_id", ZERO_UUID) != ZERO_UUID]
        try:
            by_id = await gw.topic_ids.names(asked_ids)
        except KafkaError:  # the controller is restarting: the ids the gateway knows
            by_id = gw.topic_ids.known_names(asked_ids)
        unknown_ids = [i for i in asked_ids if i not in by_id]
        names = tuple(t["name"] for t in topics if t.get("name")) + tuple(by_id.values())
        # Metadata v0 has no null array: an empty one asks for every topic.
        wanted = None if event.api_version == 0 and not names else names
    else:
        wanted = None
    try:
        response = await gw.call(naming.CONTROLLER, "metadata", MetadataRequest(wanted))
    except KafkaError as e:  # the controller is restarting: the gateway's cache answers
        response, refused = gw.topic_ids.cached(wanted, e), {}
    else:
        created, refused = await _auto_create(gw, request, response)
        if created:
            response = await gw.call(naming.CONTROLLER, "metadata", MetadataRequest(wanted))
        gw.topic_ids.learn(response.topics)
    brokers = await gw.brokers.all()
    controller = await gw.brokers.for_actor(naming.CONTROLLER)
    leaders = await leader_ids(gw, ((t.name, p.partition_index) for t in response.topics for p in t.partitions))

    def partition(t, p) -> dict:
        return {"error_code": p.error_code, "partition_index": p.partition_index,
                **one_replica(leaders[t.name, p.partition_index])}

    return {
        "throttle_time": 0, "error_code": 0, "cluster_id": gw.namespace, "controller_id": controller["node_id"],
        "brokers": [{k: b[k] for k in ("node_id", "host", "port", "rack")} for b in brokers],
        "cluster_authorized_operations": UNKNOWN_AUTHORIZED_OPERATIONS,
        "topics": [{
            "error_code": refused.get(t.name, t.error_code), "name": t.name, "topic_id": t.topic_id or ZERO_UUID,
            "is_internal": False, "topic_authorized_operations": UNKNOWN_AUTHORIZED_OPERATIONS,
            "partitions": [partition(t, p) for p in t.partitions],
        } for t in response.topics] + [{
            "error_code": Errors.UNKNOWN_TOPIC_ID.code, "name": None, "topic_id": i, "is_internal": False,
            "topic_authorized_operations": UNKNOWN_AUTHORIZED_OPERATIONS, "partitions": []} for i in unknown_ids],
    }


async def _auto_create(gw, request, response) -> tuple[bool, dict]:
    """Kafka's auto.create.topics.enable: a topic asked for by name that does not exist is
    created (num.partitions partitions) when the client allows it (Metadata v4+ says so; older
    versions always do), as librdkafka's and Kafka's own tests expect of a default broker.
    Unlike Kafka, which answers LEADER_NOT_AVAILABLE until the new topic's leaders are
    elected, the answer already has them. Whether anything was created, and the error of each
    topic that could not be (an invalid name: INVALID_TOPIC_EXCEPTION, as Kafka answers)."""
    if not gw.config.get("auto.create.topics.enable", True) or not request.get("allow_auto_topic_creation", True):
        return False, {}
    missing = [t.name for t in response.topics if t.error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION.code and t.name]
    created, refused = False, {}
    for name in missing:
        r = await _create_topic(gw, CreatableTopic(name, int(gw.config.get("num.partitions", 1)), -1, ()))
        # Another client's Metadata may have made it meanwhile.
        if not r.error_code or r.error_code == Errors.TOPIC_ALREADY_EXISTS.code:
            created = True
        else:
            refused[name] = r.error_code
    if created:
        await asyncio.get_running_loop().run_in_executor(None, topics_changed, gw.directory, gw.config)
    return created, refused


# ------------------------------------------------------------------ CreateTopics

async def _create_topic(gw, creatable: CreatableTopic, validate_only: bool = False):
    """The controller's CreateTopics result for one topic, its partitions started on their
    hosts when it was made (validate_only: checked as if made, nothing made)."""
    (r,) = (await gw.call(naming.CONTROLLER, "create_topics",
                          CreateTopicsRequest((creatable,), validate_only=validate_only))).topics
    if not r.error_code and not validate_only:
        await asyncio.get_running_loop().run_in_executor(
            None, start_partitions, gw.directory, gw.config, r.name, r.topic_id, r.configs, range(r.num_partitions))
    return r


async def _partition_count(gw, t: dict) -> int:
    """A CreateTopics topic's partition count; a manual assignment is checked as Kafka
    checks it (its leaders are the partitions' hosts: see README "Partition hosts")."""
    if not t["assignments"]:
        # -1: the broker's default (KIP-464), num.partitions here.
        return t["num_partitions"] if t["num_partitions"] != -1 else int(gw.config.get("num.partitions", 1))
    nodes = await gw.brokers.ray_nodes()
    return len(topic_assignment([(a["partition_index"], a["broker_ids"]) for a in t["assignments"]],
                                t["num_partitions"], t["replication_factor"], nodes))


async def create_topics(gw, event) -> dict:
    request = plain(event.request)
    results = []
    for t in request["topics"]:
        try:
            partitions = await _partition_count(gw, t)
        except KafkaError as e:
            results.append({"name": t["name"], "error_code": e.code, "error_message": e.message})
            continue
        creatable = CreatableTopic(t["name"], partitions, t["replication_factor"],
                                   tuple(CreatableTopicConfig(c["name"], c["value"]) for c in t["configs"]))
        r = await _create_topic(gw, creatable, request["validate_only"])
        results.append({
            "name": r.name, "topic_id": r.topic_id or ZERO_UUID,
            "error_code": r.error_code, "error_message": r.error_message, "num_partitions": r.num_partitions,
            "replication_factor": 1 if not r.error_code else -1,
            "configs": [{"name": k, "value": str(v), "read_only": False, "config_source": 1, "is_sensitive": False}
                        for k, v in sorted(r.configs.items())]})
    if any(not r["error_code"] for r in results) and not request["validate_only"]:
        await asyncio.get_running_loop().run_in_executor(None, topics_changed, gw.directory, gw.config)
    return {"throttle_time": 0, "topics": results}


# ------------------------------------------------------------------ Produce

def _partition_response(index: int, response=None, error: KafkaError | None = None) -> dict:
    out = {"index": index, "base_offset": -1, "log_append_time": -1, "log_start_offset": -1,
           "record_errors": [], "error_message": None}
    if error is not None:
        return {**out, "error_code": partition_error(error), "error_message": error.message}
    return {**out, "error_code": response.error_code, "base_offset": response.base_offset,
            "log_start_offset": response.log_start_offset, "error_message": response.error_message,
            "record_errors": [{"batch_index": i, "batch_index_error_message": m} for i, m in response.record_errors]}


async def produce(gw, event) -> dict | None:
    """Topics are named by name, or by topic id from v13. Every partition's batch joins its
    host's produce line (one Ray call per host, its partitions in order) with no task of
    its own: a request of a thousand one-record partitions is a thousand futures, not a
    thousand coroutines."""
    request = plain(event.request)
    acks, timeout_ms, transactional_id = request["acks"], request["timeout"], request["transactional_id"]
    if event.api_version >= 13:
        topics = [t["topic_id"] for t in request["topic_data"]]
        names = await gw.topic_ids.names(topics)
    else:
        topics = [t["name"] for t in request["topic_data"]]
        names = {name: name for name in topics}
    answers: list[tuple[str, int, object]] = []  # (topic as named, partition, future or error)
    for topic, t in zip(topics, request["topic_data"]):
        name = names.get(topic)
        for p in t["partition_data"]:
            try:
                if name is None:
                    raise KafkaError(Errors.UNKNOWN_TOPIC_ID, "no topic has this id")
                # Produce v3 and later carry exactly one batch of magic 2 per partition.
                produced = produce_request(name, p["index"], p["records"] or b"", acks, timeout_ms, transactional_id)
                answer = gw.produce_line.submit(naming.partition_host_of(name, p["index"], gw.config), "produce",
                                                produced)
            except KafkaError as e:
                answer = e
            answers.append((topic, p["index"], answer))
    # Shielded: a produce that was read is done even if its connection closes first (an
    # acks=0 producer closes right after sending), as Kafka's request handlers do.
    results = await asyncio.shield(asyncio.gather(
        *(a for _, _, a in answers if isinstance(a, asyncio.Future)), return_exceptions=True))
    if acks == 0:
        return None  # Kafka sends no response to acks=0
    by_topic: dict[str, list] = {}
    waited = iter(results)
    for topic, index, answer in answers:
        result = next(waited) if isinstance(answer, asyncio.Future) else answer
        if isinstance(result, KafkaError):
            part = _partition_response(index, error=result)
        elif isinstance(result, BaseException):
            raise result
        else:
            part = _partition_response(index, result)
        by_topic.setdefault(topic, []).append(part)
    return {"throttle_time": 0, "responses": [{"name": topic, "topic_id": topic, "partition_responses": parts}
                                              for topic, parts in by_topic.items()]}


# ------------------------------------------------------------------ ListOffsets

# The first ListOffsets version that carries each special timestamp (Kafka's
# timestampMinSupportedVersion); any other negative timestamp is unsupported at every version.
_TIMESTAMP_MIN_VERSION = {EARLIEST_TIMESTAMP: 1, LATEST_TIMESTAMP: 1, MAX_TIMESTAMP: 7, EARLIEST_LOCAL_TIMESTAMP: 8,
                          LATEST_TIERED_TIMESTAMP: 9, EARLIEST_PENDING_UPLOAD_TIMESTAMP: 11}


async def _list_one(gw, topic: str, p: dict, isolation_level: int, version: int) -> dict:
    out = {"partition_index": p["partition_index"], "timestamp": -1, "offset": -1, "leader_epoch": 0}
    if p["timestamp"] < 0 and version < _TIMESTAMP_MIN_VERSION.get(p["timestamp"], version + 1):
        return {**out, "error_code": Errors.UNSUPPORTED_VERSION.code}
    try:
        r = await gw.call(naming.partition_host_of(topic, p["partition_index"], gw.config), "list_offsets",
                          ListOffsetsRequest(topic, p["partition_index"], p["timestamp"], isolation_level))
    except KafkaError as e:
        return {**out, "error_code": partition_error(e)}
    return {**out, "error_code": r.error_code, "timestamp": r.timestamp, "offset": r.offset}


async def list_offsets(gw, event) -> dict:
    request = plain(event.request)
    isolation = request.get("isolation_level", 0)
    topics = []
    for t in request["topics"]:
        parts = await asyncio.gather(*(_list_one(gw, t["name"], p, isolation, event.api_version)
                                       for p in t["partitions"]))
        topics.append({"name": t["name"], "partitions": list(parts)})
    return {"throttle_time": 0, "topics": topics}


# ------------------------------------------------------------------ InitProducerId

async def init_producer_id(gw, event) -> dict:
    request = plain(event.request)
    key = request["transactional_id"] or event.client_id or ""
    name = naming.find_coordinator(naming.CoordinatorType.TRANSACTION, key, gw.config)
    try:
        r = await gw.call(name, "init_producer_id", InitProducerIdRequest(
            request["transactional_id"], request["transaction_timeout"], request.get("producer_id", -1),
            request.get("producer_epoch", -1)))
    except KafkaError as e:
        return {"throttle_time": 0, "error_code": e.code, "producer_id": -1, "producer_epoch": -1}
    return {"throttle_time": 0, "error_code": r.error_code, "producer_id": r.producer_id,
            "producer_epoch": r.producer_epoch}


HANDLERS = {
    3: (0, 13, metadata),
    19: (2, 7, create_topics),
    0: (3, 13, produce),
    2: (1, 11, list_offsets),
    22: (0, 5, init_producer_id),
}
