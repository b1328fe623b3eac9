"""The gateway's APIs on the cluster's shape: ElectLeaders, DescribeLogDirs,
AlterReplicaLogDirs, DescribeQuorum, AlterPartitionReassignments,
ListPartitionReassignments, DescribeTopicPartitions and ListConfigResources.

shoal keeps one replica of each partition, its partition-leader actor, and no replication
yet: each is answered as a Kafka 4.2 cluster whose partitions all have exactly one replica,
on the broker of their leader (the gateway on that actor's node, brokers.py). So the
leader is always the preferred one (no election is needed), every broker has one log dir
(the deployment's data directory), nothing is ever being reassigned, and a reassignment can
only keep a partition where it is. The metadata quorum is the controller actor alone, its
voter the broker on its node.
"""
from __future__ import annotations

import asyncio
import os
import shutil
import time

from runtime.errors import Errors, KafkaError
from runtime.topics.assignments import check_replicas
from runtime.topics.internal import CLUSTER_METADATA_TOPIC
from runtime.topics.metadata import raise_if_illegal_topic_name
from runtime.wire.entities import ZERO_UUID, plain

from ... import naming
from .admin import BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP, TOPIC
from .data import UNKNOWN_AUTHORIZED_OPERATIONS, known_topics, leader_ids, one_replica

# Kafka's ElectionType ids.
PREFERRED, UNCLEAN = 0, 1
# The types ListConfigResources lists at each version, in the order Kafka lists them (v0 was
# ListClientMetricsResources).
CONFIG_RESOURCE_TYPES = {0: (CLIENT_METRICS,), 1: (GROUP, CLIENT_METRICS, BROKER_LOGGER, BROKER, TOPIC)}
# Kafka's max.request.partition.size.limit default: DescribeTopicPartitions' page size cap.
MAX_REQUEST_PARTITION_SIZE_LIMIT = 2000
# What Kafka appends to a partition's dir name to make its future log's: ".<32 hex digits>-future".
FUTURE_DIR_SUFFIX_LENGTH = 1 + 32 + len("-future")
MAX_DIR_NAME_LENGTH = 255


def _log_dir(gw) -> str:
    return os.path.abspath(gw.deployment["data_dir"])


def _partition_counts(topics: dict) -> dict[str, int]:
    return {name: len(t.partitions) for name, t in topics.items()}


# ------------------------------------------------------------------ ElectLeaders

async def elect_leaders(gw, event) -> dict:
    """A partition's leader is its only replica, so the preferred one, and present: no
    election is ever needed. For every partition (topic_partitions null) Kafka lists only
    those it elected, so each topic comes back with no partitions."""
    r = plain(event.request)
    election = r.get("election_type", PREFERRED)  # v0 elects the preferred replica only
    if election not in (PREFERRED, UNCLEAN):
        raise KafkaError(Errors.INVALID_REQUEST, f"Unknown election type {election}")
    if r["topic_partitions"] is None:
        results = [{"topic": name, "partition_result": []} for name in sorted(await known_topics(gw, None))]
    else:
        counts = _partition_counts(await known_topics(gw, [t["topic"] for t in r["topic_partitions"]]))
        results = [{"topic": t["topic"], "partition_result": [
            {"partition_id": p, **_election(counts, t["topic"], p)} for p in t["partitions"]]}
            for t in r["topic_partitions"]]
    return {"throttle_time": 0, "error_code": 0, "replica_election_results": results}


def _election(counts: dict, topic: str, partition: int) -> dict:
    if topic not in counts:
        return {"error_code": Errors.UNKNOWN_TOPIC_OR_PARTITION.code, "error_message": f"No such topic as {topic}"}
    if not 0 <= partition < counts[topic]:
        return {"error_code": Errors.UNKNOWN_TOPIC_OR_PARTITION.code,
                "error_message": f"No such partition as {topic}-{partition}"}
    return {"error_code": Errors.ELECTION_NOT_NEEDED.code,
            "error_message": "Leader election not needed for topic partition."}


# ------------------------------------------------------------------ DescribeLogDirs

async def describe_log_dirs(gw, event) -> dict:
    """This broker's one log dir, with the partitions it leads of those asked (null: all)
    and their bytes on disk; a partition whose leader does not answer is left out, as
    Kafka leaves out a log it does not have online."""
    r = plain(event.request)
    asked = r["topics"]
    log_dir = _log_dir(gw)
    try:
        counts = _partition_counts(await known_topics(gw, None if asked is None else [t["topic"] for t in asked]))
        usage = await asyncio.get_running_loop().run_in_executor(None, shutil.disk_usage, log_dir)
    except (KafkaError, OSError) as e:  # on the dir, as Kafka answers one it cannot describe
        code = e.code if isinstance(e, KafkaError) else Errors.KAFKA_STORAGE_ERROR.code
        return {"throttle_time": 0, "error_code": 0, "results": [{"log_dir": log_dir, "error_code": code,
                                                                  "topics": []}]}
    wanted = ([(t, p) for t, n in sorted(counts.items()) for p in range(n)] if asked is None else
              sorted({(t["topic"], p) for t in asked for p in t["partitions"] if 0 <= p < counts.get(t["topic"], 0)}))
    sizes = await _hosted_sizes(gw, wanted)
    topics: dict[str, list] = {}
    for (topic, p), size in sizes.items():
        topics.setdefault(topic, []).append({"partition_index": p, "partition_size": size, "offset_lag": 0,
                                             "is_future_key": False})
    return {"throttle_time": 0, "error_code": 0, "results": [{
        "log_dir": log_dir, "error_code": 0, "total_bytes": usage.total, "usable_bytes": usage.free,
        "topics": [{"name": t, "partitions": parts} for t, parts in topics.items()]}]}


async def _hosted_sizes(gw, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """(topic, partition) -> log size in bytes, of those of `partitions` this broker leads
    (the log's size as its leader has it, the segment being written included)."""
    leaders = await leader_ids(gw, partitions)
    mine = [tp for tp in partitions if leaders[tp] == gw.node_id]
    statuses = await asyncio.gather(*(gw.call(naming.partition_host_of(t, p, gw.config), "partition_status", t, p) for t, p in mine),
                                    return_exceptions=True)
    return {tp: s["size"] for tp, s in zip(mine, statuses) if isinstance(s, dict) and s.get("size") is not None}


# ------------------------------------------------------------------ AlterReplicaLogDirs

async def alter_replica_log_dirs(gw, event) -> dict:
    """A broker has one log dir, so a replica can only be "moved" to the dir it is in:
    that succeeds and changes nothing. Any other path is LOG_DIR_NOT_FOUND; a partition the
    cluster does not have UNKNOWN_TOPIC_OR_PARTITION, one another broker leads
    REPLICA_NOT_AVAILABLE, as Kafka answers them."""
    r = plain(event.request)
    dirs: dict[tuple[str, int], str] = {}  # as Kafka's partitionDirs: the last path named wins
    for d in r["dirs"]:
        for t in d["topics"]:
            for p in t["partitions"]:
                dirs[t["name"], p] = d["path"]
    counts = _partition_counts(await known_topics(gw, sorted({t for t, _ in dirs})))
    existing = [tp for tp in dirs if 0 <= tp[1] < counts.get(tp[0], 0)]
    leaders = await leader_ids(gw, existing)
    log_dir = _log_dir(gw)
    results: dict[str, list] = {}
    for (topic, p), path in dirs.items():
        if len(f"{topic}-{p}") + FUTURE_DIR_SUFFIX_LENGTH > MAX_DIR_NAME_LENGTH:
            error = Errors.INVALID_TOPIC_EXCEPTION  # its future log's dir name would be too long
        elif path != log_dir:
            error = Errors.LOG_DIR_NOT_FOUND
        elif (topic, p) not in leaders:
            error = Errors.UNKNOWN_TOPIC_OR_PARTITION
        elif leaders[topic, p] != gw.node_id:
            error = Errors.REPLICA_NOT_AVAILABLE
        else:
            error = Errors.NONE
        results.setdefault(topic, []).append({"partition_index": p, "error_code": error.code})
    return {"throttle_time": 0, "results": [{"topic_name": t, "partitions": parts} for t, parts in results.items()]}


# ------------------------------------------------------------------ DescribeQuorum

async def describe_quorum(gw, event) -> dict:
    """The controller actor is the quorum's only voter and its leader, at epoch 0 (it is
    never elected); its high watermark is its metadata log's durable end. The other brokers
    are observers; they read the controller rather than fetch its log, so their offsets and
    fetch times are unknown (-1). Anything but __cluster_metadata-0 alone is
    UNKNOWN_TOPIC_OR_PARTITION on each partition named, as KafkaRaftClient answers."""
    r = plain(event.request)
    asked = r["topics"]
    if not (len(asked) == 1 and asked[0]["topic_name"] == CLUSTER_METADATA_TOPIC and len(asked[0]["partitions"]) == 1
            and asked[0]["partitions"][0]["partition_index"] == 0):
        error = Errors.UNKNOWN_TOPIC_OR_PARTITION
        return {"error_code": 0, "error_message": None, "nodes": [], "topics": [
            {"topic_name": t["topic_name"], "partitions": [
                {"partition_index": p["partition_index"], "error_code": error.code,
                 "error_message": "This server does not host this topic-partition.", "leader_id": 0,
                 "leader_epoch": 0, "high_watermark": 0, "current_voters": [], "observers": []}
                for p in t["partitions"]]} for t in asked]}
    status = await gw.call(naming.CONTROLLER, "status")
    leader = (await gw.brokers.for_actor(naming.CONTROLLER))["node_id"]
    high_watermark = status["high_watermark"] if status["state"] == "active" else -1
    now_ms = int(time.time() * 1000)
    voter = {"replica_id": leader, "replica_directory_id": ZERO_UUID, "last_fetch_timestamp": now_ms,
             "last_caught_up_timestamp": now_ms,
             "log_end_offset": high_watermark + status["pending_records"] if high_watermark >= 0 else -1}
    observers = [{"replica_id": b["node_id"], "replica_directory_id": ZERO_UUID, "log_end_offset": -1,
                  "last_fetch_timestamp": -1, "last_caught_up_timestamp": -1}
                 for b in await gw.brokers.all() if b["node_id"] != leader]
    return {"error_code": 0, "error_message": None, "nodes": [await _quorum_node(gw, leader)], "topics": [
        {"topic_name": CLUSTER_METADATA_TOPIC, "partitions": [
            {"partition_index": 0, "error_code": 0, "error_message": None, "leader_id": leader, "leader_epoch": 0,
             "high_watermark": high_watermark, "current_voters": [voter], "observers": observers}]}]}


async def _quorum_node(gw, node_id: int) -> dict:
    """The voter's endpoints: every listener of the gateway on its node (Kafka lists the
    controller's listeners; shoal's controller is reached through the gateways')."""
    addresses = gw.addresses() if node_id == gw.node_id else await gw.call(naming.gateway(node_id), "addresses")
    listeners = []
    for name, address in addresses.items():
        host, _, port = address.rpartition(":")
        listeners.append({"name": name, "host": host, "port": int(port)})
    return {"node_id": node_id, "listeners": listeners}


# ------------------------------------------------------------------ partition reassignments

async def alter_partition_reassignments(gw, event) -> dict:
    """With one replica a partition, the only reassignment shoal can carry out is to the
    replica set it has, [its leader's broker]: a success that changes nothing. The target is
    checked as Kafka's controller checks it (INVALID_REPLICA_ASSIGNMENT for an empty list, an
    unknown broker or one named twice; INVALID_REPLICATION_FACTOR for a different count when
    the request does not allow one); a valid target that would move the log or add replicas
    is INVALID_REPLICA_ASSIGNMENT, saying shoal cannot. A cancellation finds nothing to
    cancel: NO_REASSIGNMENT_IN_PROGRESS."""
    r = plain(event.request)
    allow_rf_change = r.get("allow_replication_factor_change", True)  # v0 has no say
    counts = _partition_counts(await known_topics(gw, [t["name"] for t in r["topics"]]))
    brokers = {b["node_id"] for b in await gw.brokers.all()}
    existing = [(t["name"], p["partition_index"]) for t in r["topics"] for p in t["partitions"]
                if 0 <= p["partition_index"] < counts.get(t["name"], 0)]
    leaders = await leader_ids(gw, existing)
    responses = []
    for t in r["topics"]:
        partitions = []
        for p in t["partitions"]:
            out = {"partition_index": p["partition_index"], "error_code": 0, "error_message": None}
            try:
                _raise_if_not_kept(t["name"], p, counts, brokers, leaders, allow_rf_change)
            except KafkaError as e:
                out.update(error_code=e.code, error_message=e.message)
            partitions.append(out)
        responses.append({"name": t["name"], "partitions": partitions})
    return {"throttle_time": 0, "allow_replication_factor_change": allow_rf_change, "error_code": 0,
            "error_message": None, "responses": responses}


def _raise_if_not_kept(topic: str, p: dict, counts: dict, brokers: set, leaders: dict, allow_rf_change: bool) -> None:
    partition, replicas = p["partition_index"], p["replicas"]
    if topic not in counts:
        raise KafkaError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find a topic named {topic}.")
    if (topic, partition) not in leaders:
        raise KafkaError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition {topic}:{partition}.")
    if replicas is None:
        raise KafkaError(Errors.NO_REASSIGNMENT_IN_PROGRESS, "No partition reassignment is in progress.")
    check_replicas(replicas, brokers, None)
    if not allow_rf_change and len(replicas) != 1:
        raise KafkaError(Errors.INVALID_REPLICATION_FACTOR,
                         f"The replication factor is changed from 1 to {len(replicas)}")
    leader = leaders[topic, partition]
    if replicas != [leader]:
        raise KafkaError(Errors.INVALID_REPLICA_ASSIGNMENT,
                         f"shoal keeps one replica of each partition, on its leader's broker ({leader}), and cannot "
                         f"move a partition's log to another broker or add replicas: {topic}:{partition} can only "
                         f"be assigned [{leader}]")


async def list_partition_reassignments(gw, event) -> dict:
    """No reassignment is ever in progress, and Kafka lists only the partitions with one
    (asked for or not, known or not): the list is always empty."""
    return {"throttle_time": 0, "error_code": 0, "error_message": None, "topics": []}


# ------------------------------------------------------------------ DescribeTopicPartitions

async def describe_topic_partitions(gw, event) -> dict:
    """Topics by name (none named: every topic), sorted, from the cursor on, until
    response_partition_limit partitions are listed (capped by Kafka's
    max.request.partition.size.limit); next_cursor says where the next page starts when the
    limit cut the listing short. As Kafka's DescribeTopicPartitionsRequestHandler."""
    r = plain(event.request)
    cursor = r["cursor"]
    start_topic = cursor["topic_name"] if cursor is not None else ""
    every = not r["topics"]
    if every:
        known = await known_topics(gw, None)
        names = sorted(n for n in known if n >= start_topic)
    else:
        names = sorted({t["name"] for t in r["topics"] if t["name"] >= start_topic})
        if cursor is not None and cursor["topic_name"] not in names:
            raise KafkaError(Errors.INVALID_REQUEST, f"DescribeTopicPartitionsRequest topic list should contain the "
                                                     f"cursor topic: {cursor['topic_name']}")
    if cursor is not None and cursor["partition_index"] < 0:
        raise KafkaError(Errors.INVALID_REQUEST, f"DescribeTopicPartitionsRequest cursor partition must be valid: "
                                                 f"{cursor}")
    if not every:
        known = await known_topics(gw, names)
    limit = max(min(int(gw.config.get("max.request.partition.size.limit", MAX_REQUEST_PARTITION_SIZE_LIMIT)),
                    r["response_partition_limit"]), 1)
    page, next_cursor = _page(names, _partition_counts(known), start_topic,
                              cursor["partition_index"] if cursor is not None else 0, limit, every)
    leaders = await leader_ids(gw, ((name, p) for name, partitions in page if partitions for p in partitions))
    topics = []
    for name, partitions in page:
        if partitions is None:
            topics.append({"error_code": _unknown_topic_error(name), "name": name, "topic_id": ZERO_UUID,
                           "is_internal": False, "partitions": [],
                           "topic_authorized_operations": UNKNOWN_AUTHORIZED_OPERATIONS})
            continue
        topics.append({"error_code": 0, "name": name, "topic_id": known[name].topic_id or ZERO_UUID,
                       "is_internal": False, "topic_authorized_operations": UNKNOWN_AUTHORIZED_OPERATIONS,
                       "partitions": [{"error_code": 0, "partition_index": p, **one_replica(leaders[name, p]),
                                       "eligible_leader_replicas": [], "last_known_elr": []} for p in partitions]})
    return {"throttle_time": 0, "topics": topics, "next_cursor": next_cursor}


def _page(names: list[str], counts: dict, start_topic: str, start_partition: int, limit: int,
          every: bool) -> tuple[list[tuple[str, range | None]], dict | None]:
    """The topics of one page with the partitions listed of each (None: the topic does not
    exist; left out when every topic was asked), and the cursor of the next page."""
    page, remaining = [], limit
    for name in names:
        if remaining == 0:
            return page, {"topic_name": name, "partition_index": 0}
        if name not in counts:
            if not every:
                page.append((name, None))
            continue
        first = start_partition if name == start_topic else 0
        end = min(counts[name], first + remaining)
        page.append((name, range(first, end)))
        if end < counts[name]:
            return page, {"topic_name": name, "partition_index": end}
        remaining -= len(range(first, end))
    return page, None


def _unknown_topic_error(name: str) -> int:
    try:
        raise_if_illegal_topic_name(name)
    except KafkaError as e:
        return e.code
    return Errors.UNKNOWN_TOPIC_OR_PARTITION.code


# ------------------------------------------------------------------ ListConfigResources

async def list_config_resources(gw, event) -> dict:
    """The config resources of the types asked (none: every type the version lists), as
    Kafka lists them: groups with a config of their own, client metrics subscriptions (shoal
    has none), each broker (as a broker and as its loggers), each topic. A type the version
    does not list fails the request with UNSUPPORTED_VERSION."""
    r = plain(event.request)
    supported = CONFIG_RESOURCE_TYPES[min(event.api_version, 1)]
    types = set(r.get("resource_types") or supported)
    if not types <= set(supported):
        return {"throttle_time": 0, "error_code": Errors.UNSUPPORTED_VERSION.code, "config_resources": []}
    names: dict[int, list[str]] = {}
    if GROUP in types:
        names[GROUP] = await _configured_groups(gw)
    if types & {BROKER, BROKER_LOGGER}:
        brokers = [str(b["node_id"]) for b in await gw.brokers.all()]
        names[BROKER_LOGGER] = names[BROKER] = brokers
    if TOPIC in types:
        names[TOPIC] = sorted(await known_topics(gw, None))
    return {"throttle_time": 0, "error_code": 0, "config_resources": [
        {"resource_name": name, "resource_type": kind}
        for kind in supported if kind in types for name in names.get(kind, ())]}


async def _configured_groups(gw) -> list[str]:
    """Every group coordinator's groups with a config of their own (Kafka's
    GroupConfigManager.groupIds)."""
    answers = await asyncio.gather(*(gw.call(name, "configured_group_ids")
                                     for name in naming.every_coordinator(naming.CoordinatorType.GROUP, gw.config)))
    return sorted(g for ids in answers for g in ids)


HANDLERS = {
    34: (1, 2, alter_replica_log_dirs),
    35: (1, 4, describe_log_dirs),
    43: (0, 2, elect_leaders),
    45: (0, 1, alter_partition_reassignments),
    46: (0, 0, list_partition_reassignments),
    55: (0, 2, describe_quorum),
    74: (0, 1, list_config_resources),
    75: (0, 0, describe_topic_partitions),
}
