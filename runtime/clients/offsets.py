"""Offset commits and offset fetches of a consumer, sans I/O: the requests, and what an
answer means (Kafka's OffsetCommitResponseHandler and OffsetFetchResponseHandler).

A commit answer becomes an `Action` for the caller: done, retry (commits are idempotent,
the whole request goes again), find the coordinator again, or raise. What it means for the
group membership (a stale generation, a fenced member) is the membership's business: the
classic member (`classic.ClassicMember.on_commit_response`) adds that on top.
"""
from __future__ import annotations

import enum

from runtime.errors import Errors, KafkaError
from runtime.messages.group import (OffsetCommitRequest, OffsetCommitRequestPartition, OffsetCommitRequestTopic,
                                    OffsetCommitResponse, OffsetFetchRequest, OffsetFetchRequestGroup,
                                    OffsetFetchRequestTopics, OffsetFetchResponse)

from .types import OffsetAndMetadata, TopicPartition

__all__ = ["Action", "CommitFailedError", "offset_commit_request", "commit_outcome",
           "offset_fetch_request", "committed_offsets"]


class Action(enum.Enum):
    """What the shell does after a response: the decision of a client core."""
    NONE = "none"              # done; go on
    SYNC = "sync"              # (join) send the SyncGroup
    ASSIGN = "assign"          # (join) this member leads: compute the assignment, then sync
    REJOIN = "rejoin"          # join the group again, at once
    RETRY = "retry"            # back off, then the same request again
    REDISCOVER = "rediscover"  # the coordinator moved or died: forget it, back off, retry
    RAISE = "raise"            # the caller's request failed with the error given
    FATAL = "fatal"            # the membership cannot go on; every poll raises the error


class CommitFailedError(KafkaError):
    """The group rebalanced (or this member was removed) before the commit: the partitions
    may be someone else's now. Carries the coordinator's error."""


_ASK_AGAIN = frozenset({Errors.UNSTABLE_OFFSET_COMMIT, Errors.NOT_COORDINATOR, Errors.COORDINATOR_NOT_AVAILABLE,
                        Errors.COORDINATOR_LOAD_IN_PROGRESS})
_REDISCOVER = frozenset({Errors.COORDINATOR_NOT_AVAILABLE, Errors.NOT_COORDINATOR, Errors.REQUEST_TIMED_OUT})
# Kafka's consumer answers these with CommitFailedException (or RebalanceInProgressException,
# which shoal folds into it): the commit is for partitions the member may no longer own.
_REBALANCED = frozenset({Errors.ILLEGAL_GENERATION, Errors.UNKNOWN_MEMBER_ID, Errors.REBALANCE_IN_PROGRESS,
                         Errors.STALE_MEMBER_EPOCH})


def offset_commit_request(group_id: str, offsets: dict, generation: int = -1, member_id: str = "",
                          instance_id: str | None = None) -> OffsetCommitRequest:
    """`offsets` is {TopicPartition: OffsetAndMetadata | (offset, ...) | offset}."""
    topics: dict[str, list] = {}
    for tp, om in sorted(offsets.items()):
        om = om if isinstance(om, OffsetAndMetadata) else OffsetAndMetadata(*om) if isinstance(om, tuple) \
            else OffsetAndMetadata(int(om))
        topics.setdefault(tp[0], []).append(OffsetCommitRequestPartition(tp[1], om.offset, om.leader_epoch,
                                                                         om.metadata))
    return OffsetCommitRequest(group_id, tuple(OffsetCommitRequestTopic(t, tuple(ps)) for t, ps in topics.items()),
                               generation, member_id, instance_id)


def commit_outcome(response: OffsetCommitResponse, member_epoch: bool = False) -> tuple[Action, KafkaError | None]:
    """What a commit answer means, before any membership consequence: NONE; RETRY or
    REDISCOVER for retriable errors (a loading or moved coordinator, an unknown partition);
    RAISE with CommitFailedError when the group rebalanced, or with the error. A commit of
    the KIP-848 consumer (`member_epoch`) that carried a stale member epoch is retried with
    the current one (Kafka's CommitRequestManager); when the retries run out, it failed."""
    errors = sorted({Errors.for_code(p.error_code) for t in response.topics for p in t.partitions if p.error_code},
                    key=lambda e: e.code)
    if not errors:
        return Action.NONE, None
    retriable = [e for e in errors if e.retriable or member_epoch and e is Errors.STALE_MEMBER_EPOCH]
    error = (retriable or errors)[0]
    action, exc = _commit_failure(error)
    if member_epoch and error is Errors.STALE_MEMBER_EPOCH:
        action = Action.RETRY
    return action, exc


def _commit_failure(error: Errors) -> tuple[Action, KafkaError]:
    if error in _REDISCOVER:
        return Action.REDISCOVER, KafkaError(error, "the commit failed")
    if error.retriable:
        return Action.RETRY, KafkaError(error, "the commit failed")
    if error in _REBALANCED:
        return Action.RAISE, CommitFailedError(error, "the commit failed: the group rebalanced or this member "
                                                      "left it")
    return Action.RAISE, KafkaError(error, "the commit failed")


def offset_fetch_request(group_id: str, tps) -> OffsetFetchRequest:
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(tps):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return OffsetFetchRequest((OffsetFetchRequestGroup(group_id, tuple(
        OffsetFetchRequestTopics(t, tuple(ps)) for t, ps in by_topic.items())),), require_stable=True)


def committed_offsets(response: OffsetFetchResponse, tps) -> dict | None:
    """{tp: OffsetAndMetadata | None}; None when the answer says to ask again (offsets of a
    transaction not yet settled, UNSTABLE_OFFSET_COMMIT, or a coordinator not ready).
    Raises the group's error otherwise."""
    (group,) = response.groups
    codes = {Errors.for_code(p.error_code) for t in group.topics for p in t.partitions}
    codes.add(Errors.for_code(group.error_code))
    if codes & _ASK_AGAIN:
        return None
    if group.error_code:
        raise KafkaError(Errors.for_code(group.error_code), "offset fetch failed")
    out = {tp: None for tp in tps}
    for t in group.topics:
        for p in t.partitions:
            if p.committed_offset >= 0:
                out[TopicPartition(t.name, p.partition_index)] = OffsetAndMetadata(
                    p.committed_offset, p.metadata or "", p.committed_leader_epoch)
    return out
