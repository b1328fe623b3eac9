"""The gateway's KIP-848 consumer-group APIs: ConsumerGroupHeartbeat and
ConsumerGroupDescribe, each a call on the group coordinator actor that owns the group.

On the wire these APIs name topic partitions by topic id; shoal's coordinators name them by
topic name (runtime/messages/consumer.py), so ids are translated here with the ids the
gateway's Metadata gives (actors/server/topic_ids.py). Owned partitions of a topic id the
controller does not know (a topic deleted since) are left out of the heartbeat: the
coordinator has no name for them either.
Heartbeats travel coalesced: thousands of members heartbeat the same coordinator actor.
"""
from __future__ import annotations

from runtime.errors import Errors, KafkaError
from runtime.messages.consumer import (ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest,
                                       ConsumerGroupHeartbeatRequestTopicPartitions)
from runtime.wire.entities import plain

from .groups import _coalesced_call, _coordinator_call


async def _with_ids(gw, topic_partitions) -> list[dict]:
    """A coordinator's [(topic_name, partitions)] as the wire's topic partitions."""
    ids = await gw.topic_ids.ids([t.topic_name for t in topic_partitions])
    return [{"topic_id": ids[t.topic_name], "topic_name": t.topic_name, "partitions": list(t.partitions)}
            for t in topic_partitions if t.topic_name in ids]


def _heartbeat_error(e: KafkaError) -> dict:
    return {"throttle_time": 0, "error_code": e.code, "error_message": e.message, "member_epoch": 0,
            "heartbeat_interval": 0}


async def consumer_group_heartbeat(gw, event) -> dict:
    r = plain(event.request)
    if event.api_version >= 1 and not r["member_id"].strip():
        # From v1 the member draws its own id, before its first heartbeat (KIP-1082).
        return _heartbeat_error(KafkaError(Errors.INVALID_REQUEST, "MemberId can't be empty."))
    owned = r["topic_partitions"]
    if owned is not None:
        names = await gw.topic_ids.names([t["topic_id"] for t in owned])
        owned = tuple(ConsumerGroupHeartbeatRequestTopicPartitions(names[t["topic_id"]], tuple(t["partitions"]))
                      for t in owned if t["topic_id"] in names)
    topics = r["subscribed_topic_names"]
    request = ConsumerGroupHeartbeatRequest(
        r["group_id"], r["member_id"], r["member_epoch"], r["instance_id"], r["rack_id"], r["rebalance_timeout"],
        None if topics is None else tuple(topics), r.get("subscribed_topic_regex"), r["server_assignor"], owned)
    try:
        response = await _coalesced_call(gw, request.group_id, "consumer_group_heartbeat", request,
                                         event.client_id or "")
    except KafkaError as e:
        return _heartbeat_error(e)
    assignment = response.assignment
    return {"throttle_time": 0, "error_code": response.error_code, "error_message": response.error_message,
            "member_id": response.member_id, "member_epoch": response.member_epoch,
            "heartbeat_interval": response.heartbeat_interval_ms,
            "assignment": None if assignment is None else {
                "topic_partitions": await _with_ids(gw, assignment.topic_partitions)}}


async def consumer_group_describe(gw, event) -> dict:
    r = plain(event.request)
    described = []
    for group_id in r["group_ids"]:
        request = ConsumerGroupDescribeRequest((group_id,), r["include_authorized_operations"])
        try:
            (group,) = (await _coordinator_call(gw, group_id, "consumer_group_describe", request)).groups
        except KafkaError as e:
            described.append({"group_id": group_id, "error_code": e.code, "error_message": e.message,
                              "group_state": "", "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "",
                              "members": []})
            continue
        members = [{
            "member_id": m.member_id, "instance_id": m.instance_id, "rack_id": m.rack_id,
            "member_epoch": m.member_epoch, "client_id": m.client_id, "client_host": m.client_host,
            "subscribed_topic_names": list(m.subscribed_topic_names), "subscribed_topic_regex": m.subscribed_topic_regex,
            "assignment": {"topic_partitions": await _with_ids(gw, m.assignment.topic_partitions)},
            "target_assignment": {"topic_partitions": await _with_ids(gw, m.target_assignment.topic_partitions)},
            "member_type": m.member_type} for m in group.members]
        described.append({
            "group_id": group.group_id, "error_code": group.error_code, "error_message": group.error_message,
            "group_state": group.group_state, "group_epoch": group.group_epoch,
            "assignment_epoch": group.assignment_epoch, "assignor_name": group.assignor_name, "members": members,
            "authorized_operations": group.authorized_operations})
    return {"throttle_time": 0, "groups": described}


HANDLERS = {
    68: (0, 1, consumer_group_heartbeat),
    69: (0, 1, consumer_group_describe),
}
