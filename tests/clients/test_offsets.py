"""Offset commits and fetches without Ray: what an answer means for the caller (Kafka's
OffsetCommitResponseHandler, the KIP-848 consumer's stale member epoch retry, and
OffsetFetch's "ask again" for offsets of an unsettled transaction)."""
from __future__ import annotations

import pytest

from runtime.clients.offsets import (Action, CommitFailedError, commit_outcome, committed_offsets,
                                     offset_commit_request, offset_fetch_request)
from runtime.clients.types import OffsetAndMetadata, TopicPartition as TP
from runtime.errors import Errors, KafkaError
from runtime.messages.group import (OffsetCommitResponse, OffsetCommitResponsePartition, OffsetCommitResponseTopic,
                                    OffsetFetchResponse, OffsetFetchResponseGroup, OffsetFetchResponsePartitions,
                                    OffsetFetchResponseTopics)


def commit_response(*codes) -> OffsetCommitResponse:
    return OffsetCommitResponse((OffsetCommitResponseTopic("t", tuple(
        OffsetCommitResponsePartition(p, e.code) for p, e in enumerate(codes))),))


def test_the_commit_request_groups_partitions_by_topic():
    request = offset_commit_request("g", {TP("u", 0): 4, TP("t", 1): OffsetAndMetadata(2, "m", 3), TP("t", 0): (1,)},
                                    5, "m1")
    assert [(t.name, [(p.partition_index, p.committed_offset) for p in t.partitions]) for t in request.topics] == [
        ("t", [(0, 1), (1, 2)]), ("u", [(0, 4)])]
    assert request.topics[0].partitions[1].committed_metadata == "m"
    assert (request.generation_id_or_member_epoch, request.member_id) == (5, "m1")


@pytest.mark.parametrize("codes, action, error_type", [
    ((Errors.NONE,), Action.NONE, None),
    ((Errors.NONE, Errors.COORDINATOR_LOAD_IN_PROGRESS), Action.RETRY, KafkaError),
    ((Errors.NOT_COORDINATOR,), Action.REDISCOVER, KafkaError),
    ((Errors.ILLEGAL_GENERATION, Errors.COORDINATOR_LOAD_IN_PROGRESS), Action.RETRY, KafkaError),  # retry first
    ((Errors.ILLEGAL_GENERATION,), Action.RAISE, CommitFailedError),
    ((Errors.STALE_MEMBER_EPOCH,), Action.RAISE, CommitFailedError),
    ((Errors.OFFSET_METADATA_TOO_LARGE,), Action.RAISE, KafkaError),
])
def test_what_a_commit_answer_means(codes, action, error_type):
    got, error = commit_outcome(commit_response(*codes))
    assert got is action
    assert (error is None) if error_type is None else type(error) is error_type


def test_the_kip848_consumer_retries_a_stale_member_epoch_and_fails_when_out_of_time():
    action, error = commit_outcome(commit_response(Errors.STALE_MEMBER_EPOCH), member_epoch=True)
    assert action is Action.RETRY  # with the epoch the next heartbeat brought
    assert isinstance(error, CommitFailedError) and error.error is Errors.STALE_MEMBER_EPOCH  # raised at the deadline


def fetch_response(*partitions, group_error=Errors.NONE) -> OffsetFetchResponse:
    return OffsetFetchResponse((OffsetFetchResponseGroup("g", (OffsetFetchResponseTopics("t", tuple(
        OffsetFetchResponsePartitions(p, offset, -1, "", error.code) for p, offset, error in partitions)),),
        group_error.code),))


def test_committed_offsets():
    tps = {TP("t", 0), TP("t", 1)}
    assert offset_fetch_request("g", tps).require_stable
    assert committed_offsets(fetch_response((0, 5, Errors.NONE), (1, -1, Errors.NONE)), tps) == {
        TP("t", 0): OffsetAndMetadata(5), TP("t", 1): None}
    # an offset of a transaction not yet settled, or a coordinator not ready: ask again
    assert committed_offsets(fetch_response((0, -1, Errors.UNSTABLE_OFFSET_COMMIT)), tps) is None
    assert committed_offsets(fetch_response(group_error=Errors.COORDINATOR_LOAD_IN_PROGRESS), tps) is None
    with pytest.raises(KafkaError) as e:
        committed_offsets(fetch_response(group_error=Errors.INVALID_GROUP_ID), tps)
    assert e.value.error is Errors.INVALID_GROUP_ID
