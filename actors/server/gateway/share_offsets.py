"""The gateway's share-group offset administration: DescribeShareGroupOffsets,
AlterShareGroupOffsets and DeleteShareGroupOffsets (KIP-932, lag from KIP-1226).

Where a share group is comes from the share coordinators (actors/share_offsets.py, shared with
shoal's admin client); moving or forgetting it is the group coordinator's decision (the group
must have no members, NON_EMPTY_GROUP otherwise), carried out under a new state epoch.
Topics or partitions the cluster does not have are answered UNKNOWN_TOPIC_OR_PARTITION
each, as Kafka does, and the rest goes on.
"""
from __future__ import annotations

import asyncio

from runtime.errors import Errors, KafkaError
from runtime.messages.share_group import AlterShareGroupOffsetsRequest
from runtime.messages.topics import LATEST_TIMESTAMP, ListOffsetsRequest
from runtime.wire.entities import ZERO_UUID, plain

from ... import naming, share_offsets
from .data import known_topics
from .share import _group_coordinator

UNKNOWN_PARTITION = Errors.UNKNOWN_TOPIC_OR_PARTITION.code


def _error(e: KafkaError) -> tuple[int, str | None]:
    return e.code, e.message


# ------------------------------------------------------------------ DescribeShareGroupOffsets

async def _log_ends(gw, partitions) -> dict:
    async def end(tp) -> int:
        try:
            r = await gw.call(naming.partition_host_of(tp.topic, tp.partition, gw.config), "list_offsets",
                              ListOffsetsRequest(tp.topic, tp.partition, LATEST_TIMESTAMP))
        except KafkaError:
            return share_offsets.UNKNOWN
        return r.offset if not r.error_code else share_offsets.UNKNOWN
    partitions = list(partitions)
    return dict(zip(partitions, await asyncio.gather(*(end(tp) for tp in partitions))))


async def _describe_group(gw, group: dict) -> dict:
    out = {"group_id": group["group_id"], "topics": [], "error_code": 0, "error_message": None}
    if not group["group_id"]:
        out.update(error_code=Errors.INVALID_GROUP_ID.code, error_message="empty group id")
        return out
    asked = group["topics"]  # None: every topic the group has state on
    known = await known_topics(gw, None if asked is None else [t["topic_name"] for t in asked])
    wanted = ({t["topic_name"]: t["partitions"] for t in asked} if asked is not None
              else {name: range(len(t.partitions)) for name, t in known.items()})
    partitions = [(name, known[name].topic_id, p) for name, ps in wanted.items() if name in known
                  for p in ps if p < len(known[name].partitions)]
    summaries = await share_offsets.read_summaries(gw.call, group["group_id"], partitions, gw.config)
    ends = await _log_ends(gw, [tp for tp, s in summaries.items() if s.start_offset >= 0])
    for name, ps in wanted.items():
        topic = known.get(name)
        entries = []
        for p in ps:
            s = summaries.get((name, p)) if topic is not None else None
            if s is None:
                if topic is not None and asked is None:
                    continue
                entries.append({"partition_index": p, "start_offset": share_offsets.UNKNOWN, "leader_epoch": -1,
                                "lag": share_offsets.UNKNOWN, "error_code": UNKNOWN_PARTITION,
                                "error_message": f"{name}-{p} does not exist"})
            elif asked is None and s.start_offset < 0 and s.error is None:
                continue  # never consumed: only asked-for partitions are listed without state
            else:
                end = ends.get((name, p), share_offsets.UNKNOWN)
                code, message = _error(s.error) if s.error is not None else (0, None)
                entries.append({"partition_index": p, "start_offset": s.start_offset, "leader_epoch": 0,
                                "lag": share_offsets.lag(end, s) if end >= 0 else share_offsets.UNKNOWN,
                                "error_code": code, "error_message": message})
        if entries:
            out["topics"].append({"topic_name": name, "topic_id": topic.topic_id if topic else ZERO_UUID,
                                  "partitions": entries})
    return out


async def describe_share_group_offsets(gw, event) -> dict:
    r = plain(event.request)
    groups = await asyncio.gather(*(_describe_group(gw, g) for g in r["groups"]))
    return {"throttle_time": 0, "groups": list(groups)}


# ------------------------------------------------------------------ Alter and Delete

async def _restart(gw, group_id: str, offsets: dict) -> tuple[int, str | None]:
    """The group coordinator starts the group over on these partitions ({topic: {partition:
    start offset, or -1: at share.auto.offset.reset}); its whole-request error, if any."""
    if not group_id:
        return Errors.INVALID_GROUP_ID.code, "empty group id"
    if not offsets:
        return 0, None
    try:
        response = await gw.call(_group_coordinator(gw, group_id), "alter_share_group_offsets",
                                 AlterShareGroupOffsetsRequest(group_id, offsets))
    except KafkaError as e:
        return _error(e)
    return response.error_code, response.error_message


async def alter_share_group_offsets(gw, event) -> dict:
    r = plain(event.request)
    known = await known_topics(gw, [t["topic_name"] for t in r["topics"]])
    offsets: dict[str, dict[int, int]] = {}
    results = []
    for t in r["topics"]:
        topic = known.get(t["topic_name"])
        count = len(topic.partitions) if topic else 0
        parts = []
        for p in t["partitions"]:
            code, message = 0, None
            if p["partition_index"] >= count:
                code, message = UNKNOWN_PARTITION, f"{t['topic_name']}-{p['partition_index']} does not exist"
            elif p["start_offset"] < 0:
                code, message = Errors.INVALID_REQUEST.code, "a share group cannot start at a negative offset"
            else:
                offsets.setdefault(t["topic_name"], {})[p["partition_index"]] = p["start_offset"]
            parts.append({"partition_index": p["partition_index"], "error_code": code, "error_message": message})
        results.append({"topic_name": t["topic_name"], "topic_id": topic.topic_id if topic else ZERO_UUID,
                        "partitions": parts})
    code, message = await _restart(gw, r["group_id"], offsets)
    if code:
        for t in results:  # the coordinator refused the whole request: no partition moved
            for p in t["partitions"]:
                if not p["error_code"]:
                    p.update(error_code=code, error_message=message)
    return {"throttle_time": 0, "error_code": code, "error_message": message, "responses": results}


async def delete_share_group_offsets(gw, event) -> dict:
    r = plain(event.request)
    known = await known_topics(gw, [t["topic_name"] for t in r["topics"]])
    forget = {name: {p: share_offsets.UNKNOWN for p in range(len(known[name].partitions))}
              for name in (t["topic_name"] for t in r["topics"]) if name in known}
    code, message = await _restart(gw, r["group_id"], forget)
    results = []
    for t in r["topics"]:
        topic = known.get(t["topic_name"])
        if topic is None:
            results.append({"topic_name": t["topic_name"], "topic_id": ZERO_UUID, "error_code": UNKNOWN_PARTITION,
                            "error_message": f"topic {t['topic_name']!r} does not exist"})
        else:
            results.append({"topic_name": t["topic_name"], "topic_id": topic.topic_id, "error_code": code,
                            "error_message": message})
    return {"throttle_time": 0, "error_code": code, "error_message": message, "responses": results}


HANDLERS = {
    90: (0, 1, describe_share_group_offsets),
    91: (0, 0, alter_share_group_offsets),
    92: (0, 0, delete_share_group_offsets),
}
