"""The gateway's share-group APIs (KIP-932): ShareGroupHeartbeat and ShareGroupDescribe on the
group coordinator; ShareFetch and ShareAcknowledge through share sessions
(runtime.share.sessions) on the SharePartition actors, which stay the single owners of
in-flight records, so a Kafka share consumer and a shoal one in the same group never hold a
record at once.

Kafka names topics by id on these APIs and shoal's actors by name: the gateway translates
(actors/server/topic_ids.py). A ShareFetch acknowledges what it carries and acquires at once
on every partition of the session; when none has records it waits, up to max_wait, on all of
them and answers when every one has (each SharePartition answers as soon as it acquires,
so records are never acquired for an answer that already left). When a session ends (closed,
replaced, or its connection gone) the records its member holds there are released, as Kafka
does.

Kafka's clients acknowledge offsets; shoal's SharePartitions take acknowledgements of
deliveries. The share session keeps which delivery (acquisition id) it was handed each offset
in and names them (runtime.share.sessions). The acquisition lock timeout a fetch answers
with is the time left on the locks of what it hands out (Kafka's clients count it from the
answer's arrival), never the group's full lock duration when part of it is spent already.
"""
from __future__ import annotations

import asyncio
import logging
import time
import uuid

from runtime.errors import Errors, KafkaError
from runtime.messages.share import (AcknowledgementBatch, AcknowledgePartition, AcknowledgeTopic, AcknowledgeType,
                                    ShareAcknowledgeRequest, ShareFetchRequest, ShareFetchRequestPartition,
                                    ShareFetchRequestTopic)
from runtime.messages.share_group import ShareGroupDescribeRequest, ShareGroupHeartbeatRequest
from runtime.share.sessions import INITIAL_EPOCH, ShareSession
from runtime.wire.entities import plain
from runtime.wire.storage import fetched_records

from ... import naming
from ...retry import ActorNotFound
from .context import CONNECTION
from .data import UNKNOWN_AUTHORIZED_OPERATIONS, partition_error

log = logging.getLogger(__name__)

def _group_coordinator(gw, group_id: str) -> str:
    return naming.find_coordinator(naming.CoordinatorType.GROUP, group_id, gw.config)


# ------------------------------------------------------------------ membership

async def share_group_heartbeat(gw, event) -> dict:
    r = plain(event.request)
    topics = r["subscribed_topic_names"]
    request = ShareGroupHeartbeatRequest(r["group_id"], r["member_id"], r["member_epoch"], r.get("rack_id"),
                                         None if topics is None else tuple(topics))
    try:
        response = await gw.call_coalesced(_group_coordinator(gw, request.group_id), "share_group_heartbeat",
                                           request, event.client_id or "", "")
    except KafkaError as e:
        return {"throttle_time": 0, "error_code": e.code, "error_message": e.message, "member_id": None,
                "member_epoch": 0, "heartbeat_interval": 0, "assignment": None}
    if request.member_epoch == -1 and not response.error_code:
        # A member that leaves gives back what it holds, wherever its session fetched.
        session = gw.share_sessions.get(request.group_id, request.member_id)
        if session is not None:
            gw.share_sessions.connection_closed(session.connection)
            await _release(gw, session, "release_member")
    assignment = None
    if response.assignment is not None:
        parts = response.assignment.topic_partitions
        ids = await gw.topic_ids.ids([t.topic_name for t in parts])
        assignment = {"topic_partitions": [{"topic_id": ids[t.topic_name], "partitions": list(t.partitions)}
                                           for t in parts if t.topic_name in ids]}
    return {"throttle_time": 0, "error_code": response.error_code, "error_message": response.error_message,
            "member_id": response.member_id, "member_epoch": response.member_epoch,
            "heartbeat_interval": response.heartbeat_interval_ms, "assignment": assignment}


async def share_group_describe(gw, event) -> dict:
    r = plain(event.request)
    described = []
    for group_id in r["group_ids"]:
        try:
            (g,) = (await gw.call(_group_coordinator(gw, group_id), "share_group_describe",
                                  ShareGroupDescribeRequest((group_id,)))).groups
        except KafkaError as e:
            described.append({"error_code": e.code, "error_message": e.message, "group_id": group_id,
                              "group_state": "", "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "",
                              "members": [], "authorized_operations": UNKNOWN_AUTHORIZED_OPERATIONS})
            continue
        names = {t.topic_name for m in g.members for t in m.assignment.topic_partitions}
        ids = await gw.topic_ids.ids(sorted(names))
        described.append({
            "error_code": g.error_code, "error_message": g.error_message, "group_id": g.group_id,
            "group_state": g.group_state, "group_epoch": g.group_epoch, "assignment_epoch": g.assignment_epoch,
            "assignor_name": g.assignor_name, "authorized_operations": g.authorized_operations,
            "members": [{
                "member_id": m.member_id, "rack_id": m.rack_id, "member_epoch": m.member_epoch,
                "client_id": m.client_id, "client_host": m.client_host,
                "subscribed_topic_names": list(m.subscribed_topic_names),
                "assignment": {"topic_partitions": [
                    {"topic_id": ids[t.topic_name], "topic_name": t.topic_name, "partitions": list(t.partitions)}
                    for t in m.assignment.topic_partitions if t.topic_name in ids]},
            } for m in g.members]})
    return {"throttle_time": 0, "groups": described}


# ------------------------------------------------------------------ SharePartition calls

async def _sp_call(gw, group_id: str, topic: str, topic_id: str, partition: int, method: str, *args,
                   timeout_s: float = 30.0, answered: "Answered | None" = None):
    """A call on the group's SharePartition of the partition, which the controller creates
    on the first one, as for shoal's own share consumers. With `answered` (a fetch's), a
    SharePartition this call had to create is left out (None, no call; the creation goes on)
    once another partition answered the fetch with records."""
    name = naming.share_partition(group_id, topic, partition)
    try:
        response = await gw.call(name, method, *args, timeout_s=timeout_s)
        if getattr(response, "error_code", 0) != Errors.UNKNOWN_TOPIC_ID.code:
            return response
        # The SharePartition is of another topic of this name: the controller replaces it
        # if `topic_id` is the topic's now, and refuses it if the topic is gone.
    except ActorNotFound:
        pass
    except KafkaError as e:
        # A handle of an actor that ended for good since (idle, or with its topic) and never
        # got the call: its name is free. One restarting keeps its name, and the error stands.
        if e.error is not Errors.COORDINATOR_NOT_AVAILABLE or await _named(gw, name):
            raise
    creating = gw.spawn(gw.call(naming.CONTROLLER, "ensure_share_partition", group_id, topic, topic_id, partition))
    try:
        if not await _finished(creating, None if answered is None else answered.has_records):
            return None
    except KafkaError as e:
        if e.error is Errors.UNKNOWN_TOPIC_ID:
            gw.topic_ids.forget(topic_id)
        raise
    if answered is None:
        return await gw.call(name, method, *args, timeout_s=timeout_s)
    async with answered.first_fetches:
        if answered.has_records.is_set():
            return None
        return await gw.call(name, method, *args, timeout_s=timeout_s)


class Answered:
    """A ShareFetch's partitions racing to answer it. Kafka leaves a SharePartition still
    initialising out of a fetch that another partition answers; here the SharePartitions a
    fetch had to create take their first fetch one at a time, so that those created together
    do not all answer it (librdkafka's 0179 counts on one partition's records in the first
    batch). A fetch with records sets `has_records` before it yields again, so the next in
    turn sees it."""

    def __init__(self) -> None:
        self.has_records = asyncio.Event()
        self.first_fetches = asyncio.Lock()


async def _named(gw, name: str) -> bool:
    """Whether an actor has the name now (Ray asked afresh)."""
    try:
        await gw.directory.lookup(name, fresh=True)
        return True
    except ActorNotFound:
        return False


async def _finished(work: asyncio.Future, stop: asyncio.Event | None) -> bool:
    """Whether `work` finished (its error raised) before `stop` was set; it goes on either way."""
    if stop is None:
        await asyncio.shield(work)
        return True
    stopped = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait((work, stopped), return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopped.cancel()
    if not work.done():
        return False
    work.result()
    return True


async def _release(gw, session: ShareSession, method: str = "release_session") -> None:
    """What the member holds on the session's partitions is available again."""
    names = await gw.topic_ids.names([tid for tid, _ in session.partitions])

    async def one(tid: str, p: int) -> None:
        if tid not in names:
            return
        try:
            await gw.call(naming.share_partition(session.group_id, names[tid], p), method, session.member_id)
        except KafkaError as e:  # not created yet, or away: it holds nothing for the member, or reloads
            log.info("releasing %s-%d of %s: %s", names[tid], p, session.member_id, e)
    await asyncio.gather(*(one(tid, p) for tid, p in session.partitions))


def _batches(p: dict) -> tuple[AcknowledgementBatch, ...]:
    return tuple(AcknowledgementBatch(b["first_offset"], b["last_offset"], tuple(b["acknowledge_types"]))
                 for b in p["acknowledgement_batches"])


def _clock_ms() -> float:
    return time.monotonic() * 1000


def _renewed_offsets(acks: tuple[AcknowledgementBatch, ...]) -> list[int]:
    return [o for b in acks for i, o in enumerate(range(b.first_offset, b.last_offset + 1))
            if (b.acknowledge_types[i] if len(b.acknowledge_types) > 1 else b.acknowledge_types[0])
            == AcknowledgeType.RENEW]


def _sent(session: ShareSession | None, tp: tuple[str, int], acks: tuple, response, sent_ms: float) -> None:
    """What an answered ShareAcknowledge (or the acknowledgements of a ShareFetch) did to the
    session's deliveries: renewed locks last longer."""
    if session is None or response.error_code:
        return
    (got,) = response.responses[0].partitions
    renewed = _renewed_offsets(acks)
    failed = getattr(got, "acknowledge_error_code", got.error_code)
    if renewed and not failed:
        session.renewed(tp, renewed, sent_ms + response.acquisition_lock_timeout_ms)


def connection_closed(gw, connection) -> None:
    """The sessions of a closed connection end; their records are released."""
    for session in gw.share_sessions.connection_closed(connection):
        gw.spawn(_release(gw, session))


# ------------------------------------------------------------------ ShareFetch

def _fetch_error(e: KafkaError) -> dict:
    return {"throttle_time": 0, "error_code": e.code, "error_message": e.message, "acquisition_lock_timeout": 0,
            "responses": [], "node_endpoints": []}


async def share_fetch(gw, event) -> dict:
    r = plain(event.request)
    group_id, member_id, epoch = r["group_id"], r["member_id"], r["share_session_epoch"]
    listed = {(t["topic_id"], p["partition_index"]): _batches(p) for t in r["topics"] for p in t["partitions"]}
    forgotten = [(t["topic_id"], p) for t in r["forgotten_topics_data"] for p in t["partitions"]]
    try:
        fetching, ended = gw.share_sessions.fetch(group_id, member_id, epoch, CONNECTION.get(), listed, forgotten,
                                                  any(listed.values()))
    except KafkaError as e:
        return _fetch_error(e)
    session = gw.share_sessions.get(group_id, member_id) or ended
    names = await gw.topic_ids.names(sorted({tid for tid, _ in (*listed, *fetching)}))
    template = dict(group_id=group_id, member_id=member_id, share_session_epoch=epoch, min_bytes=r["min_bytes"],
                    max_bytes=r["max_bytes"], max_records=r["max_records"], batch_size=r["batch_size"],
                    is_renew_ack=bool(r.get("is_renew_ack", False)))
    if "share_acquire_mode" in r:
        template["share_acquire_mode"] = r["share_acquire_mode"]
    results: dict[tuple[str, int], dict] = {}

    # Kafka answers a ShareFetch once it holds records (fetch.min.bytes is 1 for a share
    # consumer) or an error, not when its slowest partition does. Once a partition has
    # records, a SharePartition still being created for its first fetch is not waited for
    # (its creation goes on); once a long poll has records or an error, the others' are ended
    # (end_poll), each answering at once with whatever it acquired meanwhile.
    answered = Answered()
    poll_id = uuid.uuid4().hex
    polling: dict[tuple[str, int], str] = {}  # the long polls under way: partition -> its SharePartition

    def end_polls() -> None:
        for name in polling.values():
            gw.spawn(gw.call(name, "end_poll", poll_id))
        polling.clear()

    async def one(tid: str, p: int, acks: tuple, wait_ms: int, acquire: bool) -> None:
        out = results.setdefault((tid, p), {"partition_index": p, "error_code": 0, "error_message": None,
                                            "acknowledge_error_code": 0, "acknowledge_error_message": None,
                                            "current_leader": {"leader_id": -1, "leader_epoch": -1},
                                            "records": b"", "acquired_records": [], "lock_ms": 0,
                                            "lock_deadline_ms": None})
        if tid not in names:
            out["error_code"] = Errors.UNKNOWN_TOPIC_ID.code
            return
        topic = names[tid]
        sent = _clock_ms()
        if acks and session is not None:
            acks = session.name((tid, p), acks, sent)
        try:
            if acquire:
                request = ShareFetchRequest(**template, max_wait_ms=wait_ms, topics=(
                    ShareFetchRequestTopic(tid, (ShareFetchRequestPartition(p, acks),)),), poll_id=poll_id)
                response = await _sp_call(gw, group_id, topic, tid, p, "share_fetch", request,
                                          timeout_s=wait_ms / 1000 + 30, answered=None if acks else answered)
            else:
                request = ShareAcknowledgeRequest(group_id, member_id, epoch, template["is_renew_ack"], (
                    AcknowledgeTopic(tid, (AcknowledgePartition(p, acks),)),))
                response = await _sp_call(gw, group_id, topic, tid, p, "share_acknowledge", request)
            if response is None:
                return  # not created yet: nothing from this partition this time
        except KafkaError as e:
            out["error_code"] = partition_error(e)
            out["error_message"] = e.message
            if acks:  # their outcome is not known: the client retries them or reports the failure
                out["acknowledge_error_code"], out["acknowledge_error_message"] = out["error_code"], e.message
            return
        if response.error_code:  # the member refused as a whole (UNKNOWN_MEMBER_ID)
            out["error_code"], out["error_message"] = response.error_code, response.error_message
            if acks:
                out["acknowledge_error_code"] = response.error_code
            return
        (got,) = response.responses[0].partitions
        out["lock_ms"] = max(out["lock_ms"], response.acquisition_lock_timeout_ms)
        _sent(session, (tid, p), acks, response, sent)
        if not acquire:
            out["error_code"], out["error_message"] = got.error_code, got.error_message
            return
        out["error_code"], out["error_message"] = got.error_code, got.error_message
        if acks:
            out["acknowledge_error_code"] = got.acknowledge_error_code
            out["acknowledge_error_message"] = got.acknowledge_error_message
        if got.acquired_records:
            out["acquired_records"] = [{"first_offset": a.first_offset, "last_offset": a.last_offset,
                                        "delivery_count": a.delivery_count} for a in got.acquired_records]
            out["records"] = b"".join(fetched_records(b) for b in got.records or ())
            now = _clock_ms()
            deadline = now + got.lock_remaining_ms
            out["lock_deadline_ms"] = deadline
            if session is not None:
                session.handed_out((tid, p), [(a.first_offset, a.last_offset) for a in got.acquired_records],
                                   got.acquisition_id, deadline, now)
            answered.has_records.set()

    async def waiting(tid: str, p: int, wait_ms: int) -> None:
        """A long poll of the partition, ended early once another has something to answer."""
        polling[(tid, p)] = naming.share_partition(group_id, names[tid], p)
        try:
            await one(tid, p, (), wait_ms, True)
        finally:
            polling.pop((tid, p), None)
        if results[(tid, p)]["acquired_records"] or results[(tid, p)]["error_code"]:
            end_polls()

    deadline = time.monotonic() + r["max_wait"] / 1000
    if ended is not None and epoch == INITIAL_EPOCH:
        # Replaced: what the member held in the old session goes back before the new one
        # acquires, lest the release take what this fetch hands out.
        await _release(gw, ended)
        ended = None
    # Acknowledgements first, with the first pass that does not wait; partitions outside the
    # session (forgotten, or a closing fetch) only acknowledge.
    await asyncio.gather(*(one(tid, p, acks, 0, (tid, p) in fetching) for (tid, p), acks in listed.items()),
                         *(one(tid, p, (), 0, True) for tid, p in fetching if (tid, p) not in listed))
    remaining_ms = int((deadline - time.monotonic()) * 1000)
    # A partition of a topic the cluster lacks (deleted, the client not knowing yet) is
    # answered UNKNOWN_TOPIC_ID and the others wait on, as Kafka leaves such partitions out
    # of its delayed fetch.
    polled = [(tid, p) for tid, p in fetching if tid in names]
    if (polled and remaining_ms > 0 and not any(results[k]["acquired_records"] for k in polled)
            and not any(results[k]["error_code"] for k in polled)):
        await asyncio.gather(*(waiting(tid, p, remaining_ms) for tid, p in polled))
    if ended is not None:
        await _release(gw, ended)
    return _fetch_response(gw, results)


def _fetch_response(gw, results: dict) -> dict:
    me = gw.address()["node_id"]
    by_topic: dict[str, list] = {}
    lock_ms = 0
    deadlines = []
    for (tid, _), out in sorted(results.items()):
        lock_ms = max(lock_ms, out.pop("lock_ms"))
        deadline = out.pop("lock_deadline_ms")
        if deadline is not None:
            deadlines.append(deadline)
        out["current_leader"] = {"leader_id": me, "leader_epoch": 0}
        by_topic.setdefault(tid, []).append(out)
    if deadlines:
        # The client counts from this answer: what is left of the earliest lock it hands out.
        lock_ms = max(int(min(deadlines) - _clock_ms()), 0)
    return {"throttle_time": 0, "error_code": 0, "error_message": None, "acquisition_lock_timeout": lock_ms,
            "responses": [{"topic_id": tid, "partitions": parts} for tid, parts in by_topic.items()],
            "node_endpoints": []}


# ------------------------------------------------------------------ ShareAcknowledge

async def share_acknowledge(gw, event) -> dict:
    r = plain(event.request)
    group_id, member_id, epoch = r["group_id"], r["member_id"], r["share_session_epoch"]
    try:
        ended = gw.share_sessions.acknowledge(group_id, member_id, epoch, CONNECTION.get())
    except KafkaError as e:
        return {"throttle_time": 0, "error_code": e.code, "error_message": e.message, "responses": [],
                "node_endpoints": [], "acquisition_lock_timeout": 0}
    session = gw.share_sessions.get(group_id, member_id) or ended
    listed = {(t["topic_id"], p["partition_index"]): _batches(p) for t in r["topics"] for p in t["partitions"]}
    names = await gw.topic_ids.names(sorted({tid for tid, _ in listed}))
    is_renew = bool(r.get("is_renew_ack", False))
    lock_ms = 0

    async def one(tid: str, p: int, acks: tuple) -> dict:
        nonlocal lock_ms
        out = {"partition_index": p, "error_code": 0, "error_message": None,
               "current_leader": {"leader_id": gw.address()["node_id"], "leader_epoch": 0}}
        if tid not in names:
            return {**out, "error_code": Errors.UNKNOWN_TOPIC_ID.code}
        sent = _clock_ms()
        if session is not None:
            acks = session.name((tid, p), acks, sent)
        request = ShareAcknowledgeRequest(group_id, member_id, epoch, is_renew,
                                          (AcknowledgeTopic(tid, (AcknowledgePartition(p, acks),)),))
        try:
            response = await _sp_call(gw, group_id, names[tid], tid, p, "share_acknowledge", request)
        except KafkaError as e:
            return {**out, "error_code": partition_error(e), "error_message": e.message}
        if response.error_code:
            return {**out, "error_code": response.error_code, "error_message": response.error_message}
        _sent(session, (tid, p), acks, response, sent)
        lock_ms = max(lock_ms, response.acquisition_lock_timeout_ms)
        (got,) = response.responses[0].partitions
        return {**out, "error_code": got.error_code, "error_message": got.error_message}

    answered = await asyncio.gather(*(one(tid, p, acks) for (tid, p), acks in listed.items()))
    if ended is not None:
        await _release(gw, ended)
    by_topic: dict[str, list] = {}
    for (tid, _), out in zip(listed, answered):
        by_topic.setdefault(tid, []).append(out)
    return {"throttle_time": 0, "error_code": 0, "error_message": None, "acquisition_lock_timeout": lock_ms,
            "responses": [{"topic_id": tid, "partitions": parts} for tid, parts in by_topic.items()],
            "node_endpoints": []}


HANDLERS = {
    76: (1, 1, share_group_heartbeat),
    77: (1, 1, share_group_describe),
    78: (1, 2, share_fetch),
    79: (1, 2, share_acknowledge),
}
