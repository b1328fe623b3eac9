"""The gateway's Fetch: sessionless and incremental fetch sessions (KIP-227), topic ids from
v13, the long poll, isolation level and max_bytes. runtime.wire.fetch_session decides
everything about sessions; this shell reads the partitions from their leaders.
"""
from __future__ import annotations

import asyncio
import time

from runtime.errors import Errors, KafkaError
from runtime.messages.topics import FetchRequest, FetchResponse
from runtime.wire.entities import plain
from runtime.wire.fetch_session import FINAL_EPOCH, FetchPartition, FetchSessionRequest, PartitionResult
from runtime.wire.storage import fetched_records

from ... import naming
from .data import partition_error

TOPIC_IDS_FROM = 13


def session_request(version: int, request: dict) -> FetchSessionRequest:
    """The session's view of a Fetch request: partitions keyed by topic name, or by topic id
    from v13. Before v7 there are no sessions: it is a sessionless full fetch."""
    topic_field = "topic_id" if version >= TOPIC_IDS_FROM else "topic"
    partitions = {(t[topic_field], p["partition"]): FetchPartition(p["fetch_offset"], p["partition_max_bytes"],
                                                                    p.get("log_start_offset", -1))
                  for t in request["topics"] for p in t["partitions"]}
    forgotten = tuple((t[topic_field], p) for t in request.get("forgotten_topics_data") or () for p in t["partitions"])
    return FetchSessionRequest(version, request.get("session_id", 0), request.get("session_epoch", FINAL_EPOCH),
                               partitions, forgotten)


def _result(response: FetchResponse | None, partition: int, isolation_level: int, error: int = 0) -> dict:
    """A partition's part of the response; its "records" stay a list of batches (bytes)
    until the response's max_bytes is applied (`_limit_response`)."""
    out = {"partition_index": partition, "error_code": error, "high_watermark": -1, "last_stable_offset": -1,
           "log_start_offset": -1, "aborted_transactions": None, "preferred_read_replica": -1, "records": []}
    if response is None:
        return out
    aborted = None
    if isolation_level == 1:
        aborted = [{"producer_id": a.producer_id, "first_offset": a.first_offset} for a in response.aborted_transactions]
    return {**out, "error_code": response.error_code, "high_watermark": response.high_watermark,
            "last_stable_offset": response.last_stable_offset, "log_start_offset": response.log_start_offset,
            "aborted_transactions": aborted, "records": [fetched_records(b) for b in response.batches]}


async def _fetch_host(gw, host: str, requests: list[FetchRequest], max_wait_ms: int, min_bytes: int,
                      isolation_level: int, max_bytes: int | None) -> list[dict]:
    """One host's partitions of the request, in one call (its long poll spans them all; it
    reads no more than the response's max_bytes)."""
    try:
        responses = await gw.call(host, "fetch_many", requests, max_wait_ms, min_bytes, max_bytes,
                                  timeout_s=max_wait_ms / 1000 + 30)
    except KafkaError as e:
        return [_result(None, r.partition, isolation_level, partition_error(e)) for r in requests]
    return [_result(r, r.partition, isolation_level) for r in responses]


def _size(result: dict) -> int:
    return sum(len(b) for b in result["records"])


def _limit_response(results: list[dict], max_bytes: int) -> None:
    """Kafka's fetch.max.bytes, as its broker reads: partitions are filled in order, whole
    batches each, while the response holds less than max_bytes; the first batch of the
    first partition with records goes even when larger, so that a consumer always makes
    progress. Each partition's batches become its records."""
    left = max_bytes
    for result in results:
        kept = []
        for batch in result["records"]:
            if len(batch) > left and (kept or left < max_bytes):
                break
            kept.append(batch)
            left -= len(batch)
        result["records"] = b"".join(kept)


async def _read(gw, reads: list, names: dict, request: dict) -> list[dict]:
    """Every partition read once without waiting, one call per partition host; if that
    gives fewer than min_bytes, each host waits for data on its partitions until max_wait,
    and the response goes as soon as one has some."""
    isolation = request.get("isolation_level", 0)
    max_bytes = request.get("max_bytes")
    deadline = time.monotonic() + request["max_wait"] / 1000
    results: list[dict | None] = [None] * len(reads)
    by_host: dict[str, list[tuple[int, FetchRequest]]] = {}
    for i, ((topic, partition), fetch) in enumerate(reads):
        name = names.get(topic)
        if name is None:
            results[i] = _result(None, partition, isolation, Errors.UNKNOWN_TOPIC_ID.code)
            continue
        by_host.setdefault(naming.partition_host_of(name, partition, gw.config), []).append((i, FetchRequest(
            name, partition, fetch.fetch_offset, fetch.partition_max_bytes, 0, 1, isolation)))

    async def one_pass(wait_ms: int, min_bytes: int = 1) -> list[list[dict]]:
        return await asyncio.gather(*(_fetch_host(gw, host, [r for _, r in asked], wait_ms, min_bytes, isolation,
                                                  max_bytes) for host, asked in by_host.items()))

    def take(answers: list[list[dict]]) -> None:
        for (_, asked), got in zip(by_host.items(), answers):
            for (i, _), result in zip(asked, got):
                results[i] = result

    take(await one_pass(0))
    remaining_ms = int((deadline - time.monotonic()) * 1000)
    size = sum(_size(r) for r in results)
    min_bytes = max(request["min_bytes"], 1)
    if by_host and size < min_bytes and remaining_ms > 0 and not any(r["error_code"] for r in results):
        waits = [asyncio.ensure_future(_fetch_host(gw, host, [r for _, r in asked], remaining_ms, min_bytes,
                                                   isolation, max_bytes)) for host, asked in by_host.items()]
        done, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        for w in pending:
            w.cancel()
        if len(by_host) == 1:
            take([w.result() for w in done])
        elif any(r["records"] for w in done for r in w.result()):
            take(await one_pass(0))
    _limit_response(results, 0x7FFFFFFF if max_bytes is None else max_bytes)  # across hosts
    return results


async def fetch(gw, event) -> dict:
    request = plain(event.request)
    version = event.api_version
    # Sessions only compare times with each other: a monotonic clock keeps a clock step out.
    context = gw.fetch_sessions.new_context(session_request(version, request), int(time.monotonic() * 1000))
    reads = list(context.reads)
    if version >= TOPIC_IDS_FROM:
        names = await gw.topic_ids.names(sorted({topic for (topic, _), _ in reads}))
    else:
        names = {topic: topic for (topic, _), _ in reads}
    results = await _read(gw, reads, names, request) if not context.error.code else []
    by_key = dict(zip((key for key, _ in reads), results))
    answer = gw.fetch_sessions.complete(context, {key: PartitionResult(
        r["error_code"], r["high_watermark"], r["log_start_offset"], bool(r["records"]))
        for key, r in by_key.items()}, int(time.monotonic() * 1000))
    by_topic: dict[str, list] = {}
    for topic, partition in answer.partitions:
        by_topic.setdefault(topic, []).append(by_key[(topic, partition)])
    return {"throttle_time": 0, "error_code": answer.error.code, "session_id": answer.session_id,
            "responses": [{"topic": topic, "topic_id": topic, "partitions": parts}
                          for topic, parts in by_topic.items()]}


HANDLERS = {
    1: (4, 18, fetch),
}
