"""The gateway's transaction APIs: AddPartitionsToTxn (the client form up to v3, and from v4
the batched form with verify_only), AddOffsetsToTxn, EndTxn, DescribeTransactions and
ListTransactions on the transaction coordinator that owns each transactional id, and
TxnOffsetCommit on the group's coordinator. InitProducerId (data.py) gives
transactional producers their id and fences the older instance.

The gateway advertises no transaction.version feature, so Kafka's clients run transactions
version 1 (EndTxn up to v4: the epoch stays, partitions are added before they are written);
an EndTxn of v5 is taken as version 2, as the coordinator knows both.
"""
from __future__ import annotations

import asyncio
import dataclasses

from runtime.errors import Errors, KafkaError
from runtime.messages.errors import error_response
from runtime.messages.txn import (AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, AddPartitionsToTxnTopic,
                                  AddPartitionsToTxnTransaction, DescribeTransactionsRequest, EndTxnRequest,
                                  ListTransactionsRequest, TxnOffsetCommitRequest, TxnOffsetCommitRequestPartition,
                                  TxnOffsetCommitRequestTopic)
from runtime.wire.entities import plain

from ... import naming
from .groups import refused_topics


def _coordinator(gw, transactional_id: str) -> str:
    return naming.find_coordinator(naming.CoordinatorType.TRANSACTION, transactional_id, gw.config)


async def _call(gw, name: str, method: str, request):
    """The coordinator's answer, or the error answer the request would get from it."""
    try:
        return await gw.call(name, method, request)
    except KafkaError as e:
        return error_response(request, e)


def _kio(data) -> dict:
    """A coordinator's answer under kio's names (durations lose _ms)."""
    out = dataclasses.asdict(data) if dataclasses.is_dataclass(data) else dict(data)
    for key in [k for k in out if k.endswith("_ms")]:
        out[key[:-3]] = out.pop(key)
    return out


async def add_partitions_to_txn(gw, event) -> dict:
    r = plain(event.request)
    if event.api_version < 4:
        transactions = [{"transactional_id": r["v3_and_below_transactional_id"],
                         "producer_id": r["v3_and_below_producer_id"],
                         "producer_epoch": r["v3_and_below_producer_epoch"], "verify_only": False,
                         "topics": r["v3_and_below_topics"]}]
    else:
        transactions = r["transactions"]

    async def one(t: dict):
        request = AddPartitionsToTxnRequest((AddPartitionsToTxnTransaction(
            t["transactional_id"], t["producer_id"], t["producer_epoch"], t["verify_only"],
            tuple(AddPartitionsToTxnTopic(topic["name"], tuple(topic["partitions"])) for topic in t["topics"])),))
        return await _call(gw, _coordinator(gw, t["transactional_id"]), "add_partitions_to_txn", request)

    responses = await asyncio.gather(*(one(t) for t in transactions))
    results = [result for response in responses for result in response.results_by_transaction]
    if event.api_version < 4:
        (result,) = results
        return {"throttle_time": 0, "results_by_topic_v3_and_below": [dataclasses.asdict(t)
                                                                       for t in result.topic_results]}
    error = next((resp.error_code for resp in responses if resp.error_code), 0)
    return {"throttle_time": 0, "error_code": error,
            "results_by_transaction": [dataclasses.asdict(result) for result in results]}


async def add_offsets_to_txn(gw, event) -> dict:
    r = plain(event.request)
    request = AddOffsetsToTxnRequest(r["transactional_id"], r["producer_id"], r["producer_epoch"], r["group_id"])
    return _kio(await _call(gw, _coordinator(gw, request.transactional_id), "add_offsets_to_txn", request))


async def end_txn(gw, event) -> dict:
    r = plain(event.request)
    request = EndTxnRequest(r["transactional_id"], r["producer_id"], r["producer_epoch"], r["committed"],
                            transaction_version=2 if event.api_version >= 5 else 1)
    return _kio(await _call(gw, _coordinator(gw, request.transactional_id), "end_txn", request))


async def txn_offset_commit(gw, event) -> dict:
    r = plain(event.request)
    request = TxnOffsetCommitRequest(
        r["transactional_id"], r["group_id"], r["producer_id"], r["producer_epoch"], r.get("generation_id", -1),
        r.get("member_id", ""), r.get("group_instance_id"),
        tuple(TxnOffsetCommitRequestTopic(t["name"], tuple(TxnOffsetCommitRequestPartition(
            p["partition_index"], p["committed_offset"], p.get("committed_leader_epoch", -1),
            p["committed_metadata"]) for p in t["partitions"])) for t in r["topics"]))
    unknown = await gw.topic_ids.missing(t.name for t in request.topics)
    refused = refused_topics([t for t in request.topics if t.name in unknown], Errors.UNKNOWN_TOPIC_OR_PARTITION.code)
    if len(refused) == len(request.topics):
        return {"throttle_time": 0, "topics": refused}
    request = dataclasses.replace(request, topics=tuple(t for t in request.topics if t.name not in unknown))
    name = naming.find_coordinator(naming.CoordinatorType.GROUP, request.group_id, gw.config)
    answer = _kio(await _call(gw, name, "txn_offset_commit", request))
    answer["topics"] = [*answer["topics"], *refused]
    return answer


async def describe_transactions(gw, event) -> dict:
    r = plain(event.request)
    by_coordinator: dict[str, list[str]] = {}
    for tid in r["transactional_ids"]:
        by_coordinator.setdefault(_coordinator(gw, tid), []).append(tid)
    responses = await asyncio.gather(*(_call(gw, name, "describe_transactions",
                                             DescribeTransactionsRequest(tuple(tids)))
                                       for name, tids in by_coordinator.items()))
    states = {s.transactional_id: _kio(s) for response in responses for s in response.transaction_states}
    return {"throttle_time": 0, "transaction_states": [states[tid] for tid in r["transactional_ids"]
                                                       if tid in states]}


async def list_transactions(gw, event) -> dict:
    """Every coordinator's transactions (Kafka asks each broker; here each coordinator actor)."""
    r = plain(event.request)
    request = ListTransactionsRequest(tuple(r["state_filters"]), tuple(r["producer_id_filters"]),
                                      r.get("duration_filter", -1), r.get("transactional_id_pattern"))
    names = naming.every_coordinator(naming.CoordinatorType.TRANSACTION, gw.config)
    responses = await asyncio.gather(*(_call(gw, name, "list_transactions", request) for name in names))
    return {"throttle_time": 0, "error_code": next((x.error_code for x in responses if x.error_code), 0),
            "unknown_state_filters": sorted({f for x in responses for f in x.unknown_state_filters}),
            "transaction_states": [dataclasses.asdict(s) for x in responses for s in x.transaction_states]}


HANDLERS = {
    24: (0, 5, add_partitions_to_txn),
    25: (0, 4, add_offsets_to_txn),
    26: (0, 5, end_txn),
    28: (0, 5, txn_offset_commit),
    65: (0, 0, describe_transactions),
    66: (0, 2, list_transactions),
}
