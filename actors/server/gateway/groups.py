"""The gateway's group APIs: FindCoordinator, the classic group protocol (JoinGroup,
SyncGroup, Heartbeat, LeaveGroup), OffsetCommit and OffsetFetch, each a call on the group
coordinator actor that owns the group's __consumer_offsets partition, and ListGroups and
DescribeGroups for admin clients.

The gateway is the one broker Kafka clients see, so FindCoordinator always names it and the
gateway routes each group request to its coordinator actor. A coordinator that is away is
COORDINATOR_NOT_AVAILABLE, which sends the client back to FindCoordinator, as with Kafka.
Request and response fields carry Kafka's names on both sides (runtime.messages follows the
schemas), so the mapping is mostly one to one.
"""
from __future__ import annotations

import dataclasses

from runtime.errors import Errors, KafkaError, raise_if
from runtime.messages.group import (DescribeGroupsRequest, HeartbeatRequest, JoinGroupRequest, JoinGroupRequestProtocol, JoinGroupResponse, LeaveGroupRequest,
                                    MemberIdentity, OffsetCommitRequest, OffsetCommitRequestPartition,
                                    OffsetCommitRequestTopic, OffsetFetchRequest, OffsetFetchRequestGroup,
                                    OffsetFetchRequestTopics, ListGroupsRequest, SyncGroupRequest,
                                    SyncGroupRequestAssignment)
from runtime.wire.entities import plain

from ... import naming


def _answer(response) -> dict:
    """A coordinator's response as plain values under kio's names (durations lose _ms)."""
    data = dataclasses.asdict(response)
    data["throttle_time"] = data.pop("throttle_time_ms", 0)
    return data


async def _coordinator_call(gw, group_id: str, method: str, request, *args, timeout_s: float = 30.0):
    name = naming.find_coordinator(naming.CoordinatorType.GROUP, group_id, gw.config)
    return await gw.call(name, method, request, *args, timeout_s=timeout_s)


async def _coalesced_call(gw, group_id: str, method: str, request, *args):
    """For the small requests every member sends often (heartbeats, commits)."""
    name = naming.find_coordinator(naming.CoordinatorType.GROUP, group_id, gw.config)
    return await gw.call_coalesced(name, method, request, *args)


# ------------------------------------------------------------------ FindCoordinator

# Kafka's FindCoordinatorRequest.CoordinatorType ids: GROUP, TRANSACTION, SHARE (from v6).
_KEY_TYPES = (0, 1, 2)
_SHARE_KEY = 2
_NO_NODE = {"node_id": -1, "host": "", "port": -1}


async def _locate(gw, key_type: int, key: str, version: int) -> tuple[int, str | None, dict]:
    """(error code, message, node) for one key, as Kafka's getCoordinator: an unknown key
    type fails the whole request, a share key before v6 only itself."""
    raise_if(key_type not in _KEY_TYPES, Errors.INVALID_REQUEST, f"Unknown coordinator type {key_type}")
    if key_type == _SHARE_KEY and version < 6:
        return Errors.INVALID_REQUEST.code, "share coordinators are found from FindCoordinator v6", _NO_NODE
    broker = await gw.brokers.for_actor(naming.find_coordinator(naming.CoordinatorType(key_type), key, gw.config))
    return 0, None, {"node_id": broker["node_id"], "host": broker["host"], "port": broker["port"]}


async def find_coordinator(gw, event) -> dict:
    """Batched keys (v4+) are answered key by key, each with the gateway on the node of
    its coordinator actor (see brokers.py)."""
    request = plain(event.request)
    keys = [request["key"]] if event.api_version < 4 else request["coordinator_keys"]
    try:
        located = [(key, *await _locate(gw, request.get("key_type", 0), key, event.api_version)) for key in keys]
    except KafkaError as e:
        located = [(key, e.code, e.message, _NO_NODE) for key in keys]
    if event.api_version < 4:
        ((_, error, message, node),) = located
        return {"throttle_time": 0, "error_code": error, "error_message": message, **node}
    return {"throttle_time": 0, "coordinators": [
        {"key": key, **node, "error_code": error, "error_message": message} for key, error, message, node in located]}


# ------------------------------------------------------------------ the classic group protocol

async def join_group(gw, event) -> dict:
    r = plain(event.request)
    request = JoinGroupRequest(
        r["group_id"], r["session_timeout"], r["member_id"], r["protocol_type"],
        tuple(JoinGroupRequestProtocol(p["name"], p["metadata"]) for p in r["protocols"]),
        r.get("rebalance_timeout", -1), r.get("group_instance_id"), r.get("reason"))
    wait_ms = max(request.rebalance_timeout_ms, request.session_timeout_ms)
    try:
        response = await _coordinator_call(gw, request.group_id, "join_group", request, event.client_id or "", "",
                                           timeout_s=wait_ms / 1000 + 30)
    except KafkaError as e:
        response = JoinGroupResponse(error_code=e.code, member_id=r["member_id"])
    data = _answer(response)
    if event.api_version < 7 and data["protocol_name"] is None:
        data["protocol_name"] = ""  # nullable from v7 only; Kafka writes it empty before
    return data


async def sync_group(gw, event) -> dict:
    r = plain(event.request)
    request = SyncGroupRequest(
        r["group_id"], r["generation_id"], r["member_id"], r.get("group_instance_id"), r.get("protocol_type"),
        r.get("protocol_name"), tuple(SyncGroupRequestAssignment(a["member_id"], a["assignment"])
                                      for a in r["assignments"]))
    try:
        # A follower's SyncGroup waits for the leader's assignment.
        response = await _coordinator_call(gw, request.group_id, "sync_group", request, timeout_s=330)
    except KafkaError as e:
        return {"throttle_time": 0, "error_code": e.code, "assignment": b""}
    return _answer(response)


async def heartbeat(gw, event) -> dict:
    r = plain(event.request)
    request = HeartbeatRequest(r["group_id"], r["generation_id"], r["member_id"], r.get("group_instance_id"))
    try:
        return _answer(await _coalesced_call(gw, request.group_id, "heartbeat", request))
    except KafkaError as e:
        return {"throttle_time": 0, "error_code": e.code}


async def leave_group(gw, event) -> dict:
    r = plain(event.request)
    if event.api_version < 3:
        members = (MemberIdentity(r["member_id"]),)
    else:
        members = tuple(MemberIdentity(m["member_id"], m.get("group_instance_id"), m.get("reason"))
                        for m in r["members"])
    request = LeaveGroupRequest(r["group_id"], members)
    try:
        return _answer(await _coordinator_call(gw, request.group_id, "leave_group", request))
    except KafkaError as e:
        return {"throttle_time": 0, "error_code": e.code, "members": []}


# ------------------------------------------------------------------ offsets

async def offset_commit(gw, event) -> dict:
    r = plain(event.request)
    topics = tuple(OffsetCommitRequestTopic(t["name"], tuple(
        OffsetCommitRequestPartition(p["partition_index"], p["committed_offset"], p.get("committed_leader_epoch", -1),
                                     p["committed_metadata"]) for p in t["partitions"])) for t in r["topics"])
    unknown = await gw.topic_ids.missing(t.name for t in topics)
    known = tuple(t for t in topics if t.name not in unknown)
    request = OffsetCommitRequest(r["group_id"], known, r["generation_id_or_member_epoch"], r["member_id"],
                                  r.get("group_instance_id"))
    answer = {"throttle_time": 0, "topics": []}
    if known:
        try:
            answer = _answer(await _coalesced_call(gw, request.group_id, "offset_commit", request))
        except KafkaError as e:
            answer["topics"] = refused_topics(known, e.code)
    answer["topics"] = [*answer["topics"],
                        *refused_topics([t for t in topics if t.name in unknown], Errors.UNKNOWN_TOPIC_OR_PARTITION.code)]
    return answer


def refused_topics(topics, error_code: int) -> list[dict]:
    """An offset commit's answer for topics it did not commit: the error on each partition
    (a topic the cluster does not have is refused so, as Kafka does, while the others commit)."""
    return [{"name": t.name, "partitions": [{"partition_index": p.partition_index, "error_code": error_code}
                                            for p in t.partitions]} for t in topics]


def _fetch_group(g: dict) -> OffsetFetchRequestGroup:
    topics = None if g["topics"] is None else tuple(
        OffsetFetchRequestTopics(t["name"], tuple(t["partition_indexes"])) for t in g["topics"])
    return OffsetFetchRequestGroup(g["group_id"], topics, g.get("member_id"), g.get("member_epoch", -1))


async def offset_fetch(gw, event) -> dict:
    r = plain(event.request)
    # Up to v7 one group at the top level; from v8 a list of groups.
    groups = [r] if event.api_version < 8 else r["groups"]
    answered = []
    for g in groups:
        request = OffsetFetchRequest((_fetch_group(g),), r.get("require_stable", False))
        try:
            (group,) = (await _coordinator_call(gw, g["group_id"], "offset_fetch", request)).groups
            answered.append(dataclasses.asdict(group))
        except KafkaError as e:
            answered.append({"group_id": g["group_id"], "topics": [], "error_code": e.code})
    if event.api_version < 8:
        (group,) = answered
        error = group["error_code"]
        if event.api_version < 2 and error:
            # v0-1 have no top-level error: the request fails whole, which puts the error on
            # each partition it asked for (runtime.wire.error_responses), as Kafka does.
            raise KafkaError(Errors.for_code(error), f"OffsetFetch of group {group['group_id']!r}")
        return {"throttle_time": 0, "topics": group["topics"], "error_code": error}
    return {"throttle_time": 0, "groups": answered}


# ------------------------------------------------------------------ admin

async def list_groups(gw, event) -> dict:
    """Every coordinator's groups (Kafka asks each broker; here each coordinator actor)."""
    r = plain(event.request)
    request = ListGroupsRequest(tuple(r.get("states_filter", ())), tuple(r.get("types_filter", ())))
    groups, error = [], 0
    for name in naming.every_coordinator(naming.CoordinatorType.GROUP, gw.config):
        try:
            response = await gw.call(name, "list_groups", request)
        except KafkaError as e:
            error = error or e.code
            continue
        error = error or response.error_code
        groups.extend(dataclasses.asdict(g) for g in response.groups)
    return {"throttle_time": 0, "error_code": error, "groups": groups}


async def describe_groups(gw, event) -> dict:
    r = plain(event.request)
    described = []
    for group_id in r["groups"]:
        try:
            response = await _coordinator_call(gw, group_id, "describe_groups", DescribeGroupsRequest((group_id,)))
            described.extend(dataclasses.asdict(g) for g in response.groups)
        except KafkaError as e:
            described.append({"error_code": e.code, "error_message": e.message, "group_id": group_id,
                              "group_state": "", "protocol_type": "", "protocol_data": "", "members": []})
    return {"throttle_time": 0, "groups": described}


HANDLERS = {
    10: (0, 6, find_coordinator),
    11: (4, 9, join_group),
    14: (0, 5, sync_group),
    12: (0, 4, heartbeat),
    13: (0, 5, leave_group),
    8: (2, 9, offset_commit),
    9: (1, 9, offset_fetch),
    16: (0, 5, list_groups),
    15: (0, 6, describe_groups),
}
