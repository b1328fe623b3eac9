"""The gateway's admin APIs: DeleteTopics, CreatePartitions, DescribeConfigs and
IncrementalAlterConfigs (TOPIC and GROUP resources), DescribeCluster, OffsetDelete and
DeleteGroups, each turned into calls on the controller (topics and their configs), the
partition leaders (started for new partitions, ended with their data for deleted topics)
and the group coordinators (group configs, offsets, groups).

Topic configs live in the controller's metadata log, group configs in the group
coordinator's log (runtime.group.configs); DescribeConfigs reads them back with Kafka's
config sources, so any admin client shows which values were set and which are defaults.
"""
from __future__ import annotations

import asyncio
import dataclasses
import json

from runtime.errors import Errors, KafkaError
from runtime.messages.group import (DeleteGroupsRequest, OffsetDeleteRequest, OffsetDeleteRequestPartition,
                                    OffsetDeleteRequestTopic)
from runtime.messages.share_group import AlterGroupConfigRequest, DescribeGroupConfigRequest
from runtime.messages.topics import (AlterTopicConfigRequest, CreatePartitionsRequest, CreatePartitionsTopic,
                                     DeleteRecordsRequest, DeleteTopicsRequest)
from runtime.topics.assignments import added_partitions_assignment
from runtime.topics.partition import DEFAULTS as TOPIC_DEFAULTS
from runtime.wire.entities import ZERO_UUID, plain

from ... import naming
from ...config import DEFAULTS as CLUSTER_DEFAULTS
from .data import UNKNOWN_AUTHORIZED_OPERATIONS, known_topics, partition_error
from ..deployment import delete_partitions, start_partitions, topics_changed
from .groups import _coordinator_call

# Kafka's ConfigResource.Type ids.
TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
# Kafka's DescribeConfigsResponse.ConfigSource ids.
TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG, GROUP_CONFIG = 1, 4, 5, 8
# Kafka's DescribeConfigsResponse.ConfigType ids.
BOOLEAN, STRING, INT, LONG, DOUBLE, LIST, PASSWORD = 1, 2, 3, 5, 6, 7, 9
# Broker configs Kafka types PASSWORD: described as sensitive, with no value.
SENSITIVE_BROKER_CONFIGS = frozenset({"ssl.keystore.key", "sasl.jaas.config"})
# Kafka's AlterConfigOp.OpType ids.
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
LIST_TOPIC_CONFIGS = frozenset({"cleanup.policy"})  # the served topic configs Kafka types LIST
# Kafka's DescribeConfigsResponse.ConfigType of each config served (STRING 2, INT 3, LONG 5, LIST 7).
CONFIG_TYPES = {
    "retention.ms": 5, "retention.bytes": 5, "segment.bytes": 3, "max.message.bytes": 3, "flush.messages": 5,
    "cleanup.policy": 7, "message.timestamp.type": 2,
    "consumer.session.timeout.ms": 3, "consumer.heartbeat.interval.ms": 3, "share.session.timeout.ms": 3,
    "share.heartbeat.interval.ms": 3, "share.record.lock.duration.ms": 3, "share.auto.offset.reset": 2,
    "share.isolation.level": 2,
}
# DescribeCluster's endpoint types: brokers, controllers.
BROKERS_ENDPOINT = 1


def _in_executor(fn, *args):
    return asyncio.get_running_loop().run_in_executor(None, fn, *args)


# ------------------------------------------------------------------ DeleteTopics

async def delete_topics(gw, event) -> dict:
    """By name (v1-5) or, from v6, by name or topic id."""
    r = plain(event.request)
    wanted = ([{"name": n, "topic_id": None} for n in r["topic_names"]] if event.api_version < 6 else r["topics"])
    known = await known_topics(gw, None)
    by_id = {t.topic_id: name for name, t in known.items()}
    refused, names = {}, []
    for i, w in enumerate(wanted):
        name, topic_id = w["name"], w["topic_id"] or ZERO_UUID
        if name is not None and topic_id != ZERO_UUID:
            refused[i] = {"name": name, "topic_id": topic_id, "error_code": Errors.INVALID_REQUEST.code,
                          "error_message": "give a topic's name or its id, not both"}
        elif name is None and topic_id not in by_id:
            refused[i] = {"name": None, "topic_id": topic_id, "error_code": Errors.UNKNOWN_TOPIC_ID.code,
                          "error_message": f"no topic has id {topic_id}"}
        else:
            names.append(name if name is not None else by_id[topic_id])
    response = await gw.call(naming.CONTROLLER, "delete_topics", DeleteTopicsRequest(tuple(names)))
    deleted = {d.name: d for d in response.responses}
    for d in deleted.values():
        if not d.error_code:
            await _in_executor(delete_partitions, gw.directory, gw.config, d.name, range(len(known[d.name].partitions)))
    if any(not d.error_code for d in deleted.values()):
        await _in_executor(topics_changed, gw.directory, gw.config)
    answered = iter(names)
    results = [refused.get(i) or _deleted(deleted[next(answered)]) for i in range(len(wanted))]
    return {"throttle_time": 0, "responses": results}


def _deleted(d) -> dict:
    return {"name": d.name, "topic_id": d.topic_id or ZERO_UUID, "error_code": d.error_code,
            "error_message": d.error_message}


# ------------------------------------------------------------------ CreatePartitions

async def create_partitions(gw, event) -> dict:
    """The hosts start leading the new partitions only; the existing ones run on. Manual
    assignments are checked as Kafka checks them (the new partitions' leaders are their
    hosts: see README "Partition hosts")."""
    r = plain(event.request)
    before = await known_topics(gw, [t["name"] for t in r["topics"]])
    results, asked = [], []
    for t in r["topics"]:
        current = before.get(t["name"])
        # Kafka checks the assignments of an increase only; the controller refuses the rest.
        if t["assignments"] is not None and current is not None and t["count"] > len(current.partitions):
            nodes = await gw.brokers.ray_nodes()
            try:
                added_partitions_assignment([a["broker_ids"] for a in t["assignments"]],
                                            len(current.partitions), t["count"], nodes)
            except KafkaError as e:
                results.append({"name": t["name"], "error_code": e.code, "error_message": e.message})
                continue
        asked.append(CreatePartitionsTopic(t["name"], t["count"]))
    response = await gw.call(naming.CONTROLLER, "create_partitions",
                             CreatePartitionsRequest(tuple(asked), r["timeout"], r["validate_only"]))
    grown = [c for c in response.results if not c.error_code and not r["validate_only"]]
    if grown:
        topics = await known_topics(gw, [c.name for c in grown])
        for c in grown:
            info = topics[c.name]
            await _in_executor(start_partitions, gw.directory, gw.config, c.name, info.topic_id, info.configs,
                               range(len(before[c.name].partitions) if c.name in before else 0, len(info.partitions)))
        await _in_executor(topics_changed, gw.directory, gw.config)
    results.extend(dataclasses.asdict(c) for c in response.results)
    return {"throttle_time": 0, "results": results}


# ------------------------------------------------------------------ DescribeConfigs

def _config_entry(name: str, value, source: int, include_synonyms: bool, config_type: int | None = None,
                  read_only: bool = False, sensitive: bool = False) -> dict:
    text = None if value is None or sensitive else str(value)
    return {"name": name, "value": text, "read_only": read_only, "config_source": source, "is_sensitive": sensitive,
            "is_default": source == DEFAULT_CONFIG, "documentation": None,
            "config_type": CONFIG_TYPES.get(name, 0) if config_type is None else config_type,
            "synonyms": [{"name": name, "value": text, "source": source}] if include_synonyms else []}


async def _describe_topic(gw, name: str, include_synonyms: bool) -> list[dict]:
    topic = (await known_topics(gw, [name])).get(name)
    if topic is None:
        raise KafkaError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
    return [_config_entry(k, topic.configs[k], TOPIC_CONFIG, include_synonyms) if k in topic.configs
            else _config_entry(k, default, DEFAULT_CONFIG, include_synonyms)
            for k, default in sorted(TOPIC_DEFAULTS.items())]


async def _describe_group(gw, group_id: str, include_synonyms: bool) -> list[dict]:
    response = await _coordinator_call(gw, group_id, "describe_group_config", DescribeGroupConfigRequest(group_id))
    if response.error_code:
        raise KafkaError(Errors.for_code(response.error_code), response.error_message)
    return [_config_entry(e.name, e.value, DEFAULT_CONFIG if e.is_default else GROUP_CONFIG, include_synonyms)
            for e in response.configs]


def _describe_broker(gw, name: str, include_synonyms: bool) -> list[dict]:
    """The deployment's settings as the broker's configs: those the deployment was given are
    STATIC_BROKER_CONFIG (Kafka's server.properties), the rest of shoal's defaults
    DEFAULT_CONFIG. None can change while the deployment runs, so every one is read-only. The
    empty name asks for the cluster-wide dynamic defaults, which shoal has none of."""
    if name == "":
        return []
    try:
        broker_id = int(name)
    except ValueError:
        raise KafkaError(Errors.INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}") from None
    if broker_id != gw.node_id:
        raise KafkaError(Errors.INVALID_REQUEST, f"Unexpected broker id, expected {gw.node_id} or empty string, "
                                                 f"but received {name}")
    given = set(gw.deployment.get("static_config", ()))
    configs = {k: v for k, v in {**CLUSTER_DEFAULTS, **gw.config}.items() if k != naming.NAMESPACE_KEY}
    # The deployment numbers its gateways, and the advertised listeners default to the
    # listeners it was given: both come from its own settings.
    configs["node.id"] = gw.node_id
    given.add("node.id")
    if configs.get("advertised.listeners") is None:
        configs["advertised.listeners"] = configs.get("listeners")
        if "listeners" in given:
            given.add("advertised.listeners")
    return [_config_entry(k, _broker_value(v), STATIC_BROKER_CONFIG if k in given else DEFAULT_CONFIG,
                          include_synonyms, _broker_config_type(k, v), read_only=True,
                          sensitive=_sensitive(k))
            for k, v in sorted(configs.items())]


def _broker_value(value) -> str | None:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True)
    return None if value is None else str(value)


def _sensitive(name: str) -> bool:
    return name.endswith(".password") or name in SENSITIVE_BROKER_CONFIGS


def _broker_config_type(name: str, value) -> int:
    if _sensitive(name):
        return PASSWORD
    if name.endswith("listeners"):
        return LIST
    if isinstance(value, bool):
        return BOOLEAN
    if isinstance(value, int):
        return LONG if name.endswith((".ms", ".bytes")) else INT
    if isinstance(value, float):
        return DOUBLE
    return STRING


def _raise_if_unnamed(resource: dict) -> None:
    if not resource["resource_name"]:
        kind = "Topic" if resource["resource_type"] == TOPIC else "Group"
        raise KafkaError(Errors.INVALID_REQUEST, f"{kind} name must not be empty")


async def _describe_one(gw, resource: dict, include_synonyms: bool) -> list[dict]:
    kind = resource["resource_type"]
    if kind not in (TOPIC, BROKER, GROUP):
        raise KafkaError(Errors.INVALID_REQUEST, f"Unsupported resource type: {kind}")
    if kind == BROKER:
        entries = _describe_broker(gw, resource["resource_name"], include_synonyms)
    else:
        _raise_if_unnamed(resource)
        describe = _describe_topic if kind == TOPIC else _describe_group
        entries = await describe(gw, resource["resource_name"], include_synonyms)
    keys = resource["configuration_keys"]
    return [e for e in entries if e["name"] in keys] if keys else entries


async def describe_configs(gw, event) -> dict:
    r = plain(event.request)
    results = []
    for resource in r["resources"]:
        out = {"resource_type": resource["resource_type"], "resource_name": resource["resource_name"],
               "error_code": 0, "error_message": None, "configs": []}
        try:
            out["configs"] = await _describe_one(gw, resource, r["include_synonyms"])
        except KafkaError as e:
            out.update(error_code=e.code, error_message=e.message)
        results.append(out)
    return {"throttle_time": 0, "results": results}


# ------------------------------------------------------------------ IncrementalAlterConfigs

def _changes(resource: dict, current: dict) -> dict:
    """The resource's operations as name -> value (SET, and APPEND or SUBTRACT on a list
    config, from its `current` value) or None (DELETE). Kafka takes APPEND and SUBTRACT on
    list configs only (of those shoal serves, a topic's cleanup.policy), INVALID_CONFIG on any
    other."""
    changes = {}
    for c in resource["configs"]:
        name, op = c["name"], c["config_operation"]
        if name in changes:
            raise KafkaError(Errors.INVALID_REQUEST, f"Error due to duplicate config keys: {name}")
        if op in (APPEND, SUBTRACT):
            if resource["resource_type"] != TOPIC or name not in LIST_TOPIC_CONFIGS:
                raise KafkaError(Errors.INVALID_CONFIG, f"Config value append or subtract is not allowed for config "
                                                        f"key: {name}")
            values = [v for v in str(current.get(name, "")).split(",") if v]
            given = [v.strip() for v in (c["value"] or "").split(",") if v.strip()]
            values = values + [v for v in given if v not in values] if op == APPEND else [
                v for v in values if v not in given]
            changes[name] = ",".join(values)
            continue
        if op not in (SET, DELETE):
            raise KafkaError(Errors.INVALID_REQUEST, f"Unknown alter config operation {op} for {name}")
        changes[name] = c["value"] if op == SET else None
    return changes


async def _current_topic_configs(gw, name: str) -> dict:
    """A topic's configs as they stand, defaults included (what APPEND and SUBTRACT start from)."""
    topic = (await known_topics(gw, [name])).get(name)
    if topic is None:
        raise KafkaError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
    return {**TOPIC_DEFAULTS, **topic.configs}


async def _alter_topic(gw, name: str, changes: dict, validate_only: bool) -> None:
    response = await gw.call(naming.CONTROLLER, "alter_topic_config",
                             AlterTopicConfigRequest(name, changes, validate_only))
    if response.error_code:
        raise KafkaError(Errors.for_code(response.error_code), response.error_message)
    if validate_only:
        return
    topic = (await known_topics(gw, [name]))[name]
    # The hosts apply the new values now; one that is away reads them from the controller
    # when Ray restarts it (actors/server/partition_host.py).
    hosts = {naming.partition_host_of(name, p.partition_index, gw.config) for p in topic.partitions}
    await asyncio.gather(*(gw.call(host, "alter_configs", name, response.configs) for host in hosts),
                         return_exceptions=True)


async def _alter_group(gw, group_id: str, changes: dict, validate_only: bool) -> None:
    response = await _coordinator_call(gw, group_id, "alter_group_config",
                                       AlterGroupConfigRequest(group_id, changes, validate_only))
    if response.error_code:
        raise KafkaError(Errors.for_code(response.error_code), response.error_message)


async def incremental_alter_configs(gw, event) -> dict:
    r = plain(event.request)
    results = []
    for resource in r["resources"]:
        out = {"resource_type": resource["resource_type"], "resource_name": resource["resource_name"],
               "error_code": 0, "error_message": None}
        try:
            kind = resource["resource_type"]
            if kind not in (TOPIC, GROUP):
                raise KafkaError(Errors.INVALID_REQUEST, f"Unsupported resource type: {kind}")
            _raise_if_unnamed(resource)
            alter = _alter_topic if kind == TOPIC else _alter_group
            lists = any(c["config_operation"] in (APPEND, SUBTRACT) for c in resource["configs"])
            current = await _current_topic_configs(gw, resource["resource_name"]) if lists and kind == TOPIC else {}
            await alter(gw, resource["resource_name"], _changes(resource, current), r["validate_only"])
        except KafkaError as e:
            out.update(error_code=e.code, error_message=e.message)
        results.append(out)
    return {"throttle_time": 0, "responses": results}


# ------------------------------------------------------------------ DescribeCluster

async def describe_cluster(gw, event) -> dict:
    r = plain(event.request)
    controller = await gw.brokers.for_actor(naming.CONTROLLER)
    out = {"throttle_time": 0, "error_code": 0, "error_message": None, "endpoint_type": BROKERS_ENDPOINT,
           "cluster_id": gw.namespace, "controller_id": controller["node_id"], "brokers": [],
           "cluster_authorized_operations": UNKNOWN_AUTHORIZED_OPERATIONS}
    if r.get("endpoint_type", BROKERS_ENDPOINT) != BROKERS_ENDPOINT:
        return {**out, "error_code": Errors.UNSUPPORTED_ENDPOINT_TYPE.code, "controller_id": -1,
                "error_message": "the gateway serves the brokers' endpoints only"}
    out["brokers"] = [{"broker_id": b["node_id"], "host": b["host"], "port": b["port"], "rack": None,
                       "is_fenced": False} for b in await gw.brokers.all()]
    return out


# ------------------------------------------------------------------ OffsetDelete

async def offset_delete(gw, event) -> dict:
    """Offsets of topics the cluster does not have (or partitions past their count) are
    UNKNOWN_TOPIC_OR_PARTITION, as Kafka answers them; the rest go to the coordinator."""
    r = plain(event.request)
    known = await known_topics(gw, [t["name"] for t in r["topics"]])
    asked, unknown = [], []
    for t in r["topics"]:
        count = len(known[t["name"]].partitions) if t["name"] in known else 0
        ours = tuple(OffsetDeleteRequestPartition(p["partition_index"]) for p in t["partitions"]
                     if p["partition_index"] < count)
        others = [{"partition_index": p["partition_index"], "error_code": Errors.UNKNOWN_TOPIC_OR_PARTITION.code}
                  for p in t["partitions"] if p["partition_index"] >= count]
        if ours:
            asked.append(OffsetDeleteRequestTopic(t["name"], ours))
        if others:
            unknown.append({"name": t["name"], "partitions": others})
    try:
        response = await _coordinator_call(gw, r["group_id"], "offset_delete",
                                           OffsetDeleteRequest(r["group_id"], tuple(asked)))
    except KafkaError as e:
        return {"throttle_time": 0, "error_code": e.code, "topics": []}
    if response.error_code:
        return {"throttle_time": 0, "error_code": response.error_code, "topics": []}
    topics = [dataclasses.asdict(t) for t in response.topics] + unknown
    return {"throttle_time": 0, "error_code": 0, "topics": topics}


# ------------------------------------------------------------------ DeleteGroups

async def delete_groups(gw, event) -> dict:
    """Each coordinator deletes its own groups, in one call per coordinator."""
    r = plain(event.request)
    by_coordinator: dict[str, list[str]] = {}
    for group_id in dict.fromkeys(r["groups_names"]):
        name = naming.find_coordinator(naming.CoordinatorType.GROUP, group_id, gw.config)
        by_coordinator.setdefault(name, []).append(group_id)

    async def delete(name: str, group_ids: list[str]) -> list[dict]:
        try:
            response = await gw.call(name, "delete_groups", DeleteGroupsRequest(tuple(group_ids)))
        except KafkaError as e:
            return [{"group_id": g, "error_code": e.code} for g in group_ids]
        return [dataclasses.asdict(d) for d in response.results]

    answered = await asyncio.gather(*(delete(n, ids) for n, ids in by_coordinator.items()))
    return {"throttle_time": 0, "results": [d for part in answered for d in part]}


# ------------------------------------------------------------------ DeleteRecords

async def delete_records(gw, event) -> dict:
    """Each partition's leader moves its log start offset; a topic or partition the cluster
    does not have is UNKNOWN_TOPIC_OR_PARTITION, as Kafka answers."""
    r = plain(event.request)
    topics = await known_topics(gw, [t["name"] for t in r["topics"]])

    async def one(name: str, p: dict) -> dict:
        out = {"partition_index": p["partition_index"], "low_watermark": -1, "error_code": 0}
        topic = topics.get(name)
        if topic is None or not any(q.partition_index == p["partition_index"] for q in topic.partitions):
            return {**out, "error_code": Errors.UNKNOWN_TOPIC_OR_PARTITION.code}
        try:
            response = await gw.call(naming.partition_host_of(name, p["partition_index"], gw.config), "delete_records",
                                     DeleteRecordsRequest(name, p["partition_index"], p["offset"]))
        except KafkaError as e:
            return {**out, "error_code": partition_error(e)}
        return {**out, "error_code": response.error_code, "low_watermark": response.low_watermark}

    answered = [await asyncio.gather(*(one(t["name"], p) for p in t["partitions"])) for t in r["topics"]]
    return {"throttle_time": 0, "topics": [{"name": t["name"], "partitions": list(parts)}
                                           for t, parts in zip(r["topics"], answered)]}


HANDLERS = {
    21: (0, 2, delete_records),
    20: (1, 6, delete_topics),
    37: (0, 3, create_partitions),
    32: (1, 4, describe_configs),
    44: (0, 1, incremental_alter_configs),
    60: (0, 2, describe_cluster),
    47: (0, 0, offset_delete),
    42: (0, 2, delete_groups),
}
