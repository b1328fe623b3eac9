"""The answer to a request that failed as a whole, as Kafka gives it on the wire (each
request's AbstractRequest.getErrorResponse).

Where a response carries its errors per topic, partition, group, resource, key, user or
transaction, Kafka answers each item the request named with the error: a response with the
error at the top alone, or no error field there at all, would leave those lists empty, and a
client reads an empty list as success. One builder per such API, registered with
`@_answers(api_key)`, lists the items from the request (plain values, runtime.wire.entities)
with whatever Kafka sets beside the error (-1 offsets, no node); `error_response` fills the
rest: every error code field left out takes the error, every error message field its message
(none for UNKNOWN_SERVER_ERROR, as Kafka's ApiError keeps internals to the server), every
other required field an empty value. An API without a builder gets the error in its
top-level fields; those in TOP_LEVEL_ONLY have lists with errors and are still answered
there alone, as Kafka does.
"""
from __future__ import annotations

import dataclasses
import functools
import types
import typing
from typing import Callable

from ..errors import Errors, KafkaError
from .entities import ZERO_UUID, _fields, build
from .versions import response_class

__all__ = ["error_response", "answers_per_item", "TOP_LEVEL_ONLY"]

Builder = Callable[[int, dict, KafkaError], "dict | None"]
_BUILDERS: dict[int, Builder] = {}

# APIs whose responses list items with errors, which Kafka answers with the top-level error
# alone: LeaveGroup, OffsetDelete, DescribeQuorum, ShareFetch, ShareAcknowledge,
# DeleteShareGroupOffsets, and Fetch from v13, AddPartitionsToTxn from v4 and DescribeLogDirs
# (their builders say so by version).
TOP_LEVEL_ONLY = frozenset({13, 47, 55, 78, 79, 92})

_EMPTY = {"string": "", "bytes": b"", "records": b"", "bool": False, "uuid": ZERO_UUID}
_NO_OFFSET = -1
_NO_NODE = {"node_id": -1, "host": "", "port": -1}


def _topic(t: dict) -> dict:
    """The name of a topic entry, by name or by topic id (Produce from v13, OffsetCommit
    and OffsetFetch from v10), as the request gave it."""
    return {k: t[k] for k in ("name", "topic_id") if k in t}


def _answers(*api_keys: int):
    def register(builder: Builder) -> Builder:
        for api_key in api_keys:
            if api_key in _BUILDERS:
                raise ValueError(f"API {api_key} already has an error response")
            _BUILDERS[api_key] = builder
        return builder
    return register


def answers_per_item(api_key: int) -> bool:
    """Whether failures of this API are answered on the items the request named."""
    return api_key in _BUILDERS


def error_response(api_key: int, version: int, request: dict, error: KafkaError):
    """The kio response of `version` that Kafka gives `request` (its plain values) when it
    fails as a whole with `error`; None for a request that gets no response (Produce with
    acks=0)."""
    builder = _BUILDERS.get(api_key)
    data = {} if builder is None else builder(version, request, error)
    if data is None:
        return None
    message = None if error.error is Errors.UNKNOWN_SERVER_ERROR else error.message
    return build(response_class(api_key, version), _filled(response_class(api_key, version), data, error.code,
                                                           message))


@functools.cache
def _nullable(cls) -> frozenset:
    hints = typing.get_type_hints(cls)
    return frozenset(name for name, t in hints.items()
                     if typing.get_origin(t) in (typing.Union, types.UnionType) and type(None) in typing.get_args(t))


def _filled(cls, data: dict, code: int, message: str | None) -> dict:
    """`data` with the fields it leaves out filled (see the module's doc), entries of nested
    structs in turn."""
    out = dict(data)
    for f, (name, kafka_type, entity, array) in zip(dataclasses.fields(cls), _fields(cls)):
        value = out.get(name)
        if name in out:
            if entity is not None and value is not None:
                out[name] = ([_filled(entity, v, code, message) for v in value] if array
                             else _filled(entity, value, code, message))
        elif kafka_type == "error_code":
            out[name] = code
        elif name == "error_message":
            out[name] = message if message is not None or name in _nullable(cls) else ""
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            if array:
                out[name] = []
            elif entity is not None:
                out[name] = _filled(entity, {}, code, message)
            else:
                out[name] = _EMPTY.get(kafka_type, 0)
    return out


# ------------------------------------------------------------------ topics and data

@_answers(0)
def _produce(version: int, r: dict, error: KafkaError) -> dict | None:
    if r["acks"] == 0:
        return None  # Kafka sends no response to acks=0, failed or not
    return {"responses": [{**_topic(t), "partition_responses": [
        {"index": p["index"], "base_offset": _NO_OFFSET, "log_append_time": _NO_OFFSET,
         "log_start_offset": _NO_OFFSET, "record_errors": []} for p in t["partition_data"]]}
        for t in r["topic_data"]]}


@_answers(1)
def _fetch(version: int, r: dict, error: KafkaError) -> dict:
    """Before v13 every partition carries the error too (v4-6 have no top-level one)."""
    out = {"session_id": r.get("session_id", 0), "responses": []}
    if version < 13:
        out["responses"] = [{"topic": t.get("topic"), "topic_id": t.get("topic_id"), "partitions": [
            {"partition_index": p["partition"], "high_watermark": _NO_OFFSET, "records": b""}
            for p in t["partitions"]]} for t in r["topics"]]
    return out


@_answers(2)
def _list_offsets(version: int, r: dict, error: KafkaError) -> dict:
    return {"topics": [{"name": t["name"], "partitions": [
        {"partition_index": p["partition_index"], "timestamp": _NO_OFFSET, "offset": _NO_OFFSET}
        for p in t["partitions"]]} for t in r["topics"]]}


@_answers(3)
def _metadata(version: int, r: dict, error: KafkaError) -> dict:
    """Each topic asked for has the error; no brokers, and no top-level error (from v13 the
    field is for a client that must re-bootstrap)."""
    return {"error_code": 0, "topics": [
        {"name": t.get("name") or "", "topic_id": t.get("topic_id") or ZERO_UUID, "is_internal": False,
         "partitions": []} for t in r["topics"] or ()]}


@_answers(19)
def _create_topics(version: int, r: dict, error: KafkaError) -> dict:
    return {"topics": [{"name": t["name"]} for t in r["topics"]]}


@_answers(21)
def _delete_records(version: int, r: dict, error: KafkaError) -> dict:
    return {"topics": [{"name": t["name"], "partitions": [
        {"partition_index": p["partition_index"], "low_watermark": _NO_OFFSET} for p in t["partitions"]]}
        for t in r["topics"]]}


@_answers(20)
def _delete_topics(version: int, r: dict, error: KafkaError) -> dict:
    """By name up to v5, by name or topic id from v6."""
    topics = ([{"name": n} for n in r["topic_names"]] if version < 6
              else [{"name": t["name"], "topic_id": t["topic_id"]} for t in r["topics"]])
    return {"responses": topics}


@_answers(37)
def _create_partitions(version: int, r: dict, error: KafkaError) -> dict:
    return {"results": [{"name": t["name"]} for t in r["topics"]]}


# ------------------------------------------------------------------ the cluster's shape

@_answers(34)
def _alter_replica_log_dirs(version: int, r: dict, error: KafkaError) -> dict:
    return {"results": [{"topic_name": t["name"], "partitions": [{"partition_index": p} for p in t["partitions"]]}
                        for d in r["dirs"] for t in d["topics"]]}


@_answers(35)
def _describe_log_dirs(version: int, r: dict, error: KafkaError) -> dict:
    """At the top from v3; v1-2 have no field for it and Kafka's answer is an empty list. The
    gateway answers its own failures on the log dir (as Kafka answers a dir it cannot
    describe), so only a fault of the gateway itself is answered here."""
    return {"results": []}


@_answers(43)
def _elect_leaders(version: int, r: dict, error: KafkaError) -> dict:
    """Each partition named carries the error (and, from v1, the top level)."""
    return {"replica_election_results": [{"topic": t["topic"], "partition_result": [
        {"partition_id": p} for p in t["partitions"]]} for t in r["topic_partitions"] or ()]}


@_answers(45)
def _alter_partition_reassignments(version: int, r: dict, error: KafkaError) -> dict:
    return {"responses": [{"name": t["name"], "partitions": [{"partition_index": p["partition_index"]}
                                                             for p in t["partitions"]]} for t in r["topics"]]}


@_answers(46)
def _list_partition_reassignments(version: int, r: dict, error: KafkaError) -> dict:
    return {"topics": [{"name": t["name"], "partitions": [{"partition_index": p} for p in t["partition_indexes"]]}
                       for t in r["topics"] or ()]}


@_answers(75)
def _describe_topic_partitions(version: int, r: dict, error: KafkaError) -> dict:
    return {"topics": [{"name": t["name"], "is_internal": False, "partitions": []} for t in r["topics"]]}


# ------------------------------------------------------------------ ACLs

@_answers(30)
def _create_acls(version: int, r: dict, error: KafkaError) -> dict:
    """A result per creation, in the request's order (a result names nothing else)."""
    return {"results": [{} for _ in r["creations"]]}


@_answers(31)
def _delete_acls(version: int, r: dict, error: KafkaError) -> dict:
    """A result per filter, in the request's order."""
    return {"filter_results": [{} for _ in r["filters"]]}


# ------------------------------------------------------------------ configs and users

@_answers(32)
def _describe_configs(version: int, r: dict, error: KafkaError) -> dict:
    return {"results": [{"resource_type": c["resource_type"], "resource_name": c["resource_name"], "configs": []}
                        for c in r["resources"]]}


@_answers(44)
def _incremental_alter_configs(version: int, r: dict, error: KafkaError) -> dict:
    return {"responses": [{"resource_type": c["resource_type"], "resource_name": c["resource_name"]}
                          for c in r["resources"]]}


@_answers(50)
def _describe_user_scram_credentials(version: int, r: dict, error: KafkaError) -> dict:
    """On each user named, and at the top only when none is (every user was asked for).
    Kafka sets both, but librdkafka (2.16) aborts its process on any top-level error of this
    response (it frees the error string it parsed onto the stack); each user's error is what
    a client reports when it named users."""
    if not r["users"]:
        return {"results": []}
    return {"error_code": 0, "error_message": None,
            "results": [{"user": u["name"], "credential_infos": []} for u in r["users"]]}


@_answers(51)
def _alter_user_scram_credentials(version: int, r: dict, error: KafkaError) -> dict:
    users = sorted({u["name"] for u in r["deletions"]} | {u["name"] for u in r["upsertions"]})
    return {"results": [{"user": user} for user in users]}


# ------------------------------------------------------------------ groups and offsets

@_answers(8, 28)
def _offset_commit(version: int, r: dict, error: KafkaError) -> dict:
    """OffsetCommit and TxnOffsetCommit."""
    return {"topics": [{**_topic(t), "partitions": [{"partition_index": p["partition_index"]} for p in t["partitions"]]}
                       for t in r["topics"]]}


@_answers(9)
def _offset_fetch(version: int, r: dict, error: KafkaError) -> dict:
    """v1 has no top-level error: each partition asked carries it; v2-7 answer at the top
    alone; from v8 each group carries it."""
    if version >= 8:
        return {"groups": [{"group_id": g["group_id"], "topics": []} for g in r["groups"]]}
    if version >= 2:
        return {"topics": []}
    return {"topics": [{**_topic(t), "partitions": [
        {"partition_index": p, "committed_offset": _NO_OFFSET, "metadata": ""} for p in t["partition_indexes"]]}
        for t in r["topics"] or ()]}


@_answers(10)
def _find_coordinator(version: int, r: dict, error: KafkaError) -> dict:
    if version < 4:
        return dict(_NO_NODE)
    return {"coordinators": [{"key": key, **_NO_NODE} for key in r["coordinator_keys"]]}


@_answers(15)
def _describe_groups(version: int, r: dict, error: KafkaError) -> dict:
    return {"groups": [{"group_id": g, "members": []} for g in r["groups"]]}


@_answers(42)
def _delete_groups(version: int, r: dict, error: KafkaError) -> dict:
    return {"results": [{"group_id": g} for g in r["groups_names"]]}


@_answers(69, 77)
def _describe_modern_groups(version: int, r: dict, error: KafkaError) -> dict:
    """ConsumerGroupDescribe and ShareGroupDescribe."""
    return {"groups": [{"group_id": g, "members": []} for g in r["group_ids"]]}


@_answers(90)
def _describe_share_group_offsets(version: int, r: dict, error: KafkaError) -> dict:
    return {"groups": [{"group_id": g["group_id"], "topics": []} for g in r["groups"]]}


@_answers(91)
def _alter_share_group_offsets(version: int, r: dict, error: KafkaError) -> dict:
    """Each partition carries the error, as Kafka answers; the top-level error is set too,
    which Kafka's own admin client reads first."""
    return {"responses": [{"topic_name": t["topic_name"], "partitions": [
        {"partition_index": p["partition_index"]} for p in t["partitions"]]} for t in r["topics"]]}


# ------------------------------------------------------------------ transactions

@_answers(24)
def _add_partitions_to_txn(version: int, r: dict, error: KafkaError) -> dict:
    """Up to v3 (a producer's request) each partition carries the error; from v4 it is
    answered at the top."""
    if version >= 4:
        return {"results_by_transaction": []}
    return {"results_by_topic_v3_and_below": [{"name": t["name"], "results_by_partition": [
        {"partition_index": p} for p in t["partitions"]]} for t in r["v3_and_below_topics"]]}


@_answers(65)
def _describe_transactions(version: int, r: dict, error: KafkaError) -> dict:
    return {"transaction_states": [{"transactional_id": t, "topics": []} for t in r["transactional_ids"]]}
