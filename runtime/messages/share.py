"""ShareFetch and ShareAcknowledge (KIP-932), in the shape of Kafka's latest message schemas.

Kafka's schemas reuse struct names across messages (FetchTopic, FetchPartition and
PartitionData also name structs of the plain Fetch messages), and every message here is
re-exported from one package, so those structs carry the message name as a prefix:
ShareFetchRequestTopic, ShareFetchRequestPartition, ShareFetchResponsePartition,
ShareAcknowledgeResponsePartition. Topics are addressed by topic id, as in Kafka.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Callable, Iterable

__all__ = [
    "AcknowledgeType", "AcknowledgementBatch", "AcquiredRecords", "LeaderIdAndEpoch", "NodeEndpoint",
    "ShareFetchRequest", "ShareFetchRequestTopic", "ShareFetchRequestPartition", "ShareFetchRequestForgottenTopic",
    "ShareFetchResponse", "ShareFetchableTopicResponse", "ShareFetchResponsePartition",
    "ShareAcknowledgeRequest", "AcknowledgeTopic", "AcknowledgePartition",
    "ShareAcknowledgeResponse", "ShareAcknowledgeTopicResponse", "ShareAcknowledgeResponsePartition",
    "BATCH_OPTIMIZED", "RECORD_LIMIT", "NO_ACQUISITION", "name_deliveries",
]

# An acknowledgement that names no delivery (it never matches one).
NO_ACQUISITION = -1

# ShareFetchRequest.ShareAcquireMode
BATCH_OPTIMIZED = 0
RECORD_LIMIT = 1


class AcknowledgeType(enum.IntEnum):
    """The per-record outcome a share consumer reports. GAP (0) marks offsets that hold no
    record the client could deliver (control records, compacted-away offsets)."""
    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


@dataclass(frozen=True)
class AcknowledgementBatch:
    """Offsets first_offset..last_offset (inclusive) with either one acknowledge type for the
    whole range or one per offset. `acquisition_id` (shoal's, not on Kafka's wire) names the
    delivery acknowledged: the ShareFetch answer that handed these records out carried it.
    An acknowledgement of any other delivery of the same offsets (an earlier one whose lock ran
    out, or one of a SharePartition since restarted) is refused with INVALID_RECORD_STATE."""
    first_offset: int
    last_offset: int
    acknowledge_types: tuple[int, ...] = ()
    acquisition_id: int = NO_ACQUISITION


def name_deliveries(batches: Iterable[AcknowledgementBatch],
                    acquisition_of: Callable[[int], int]) -> tuple[AcknowledgementBatch, ...]:
    """Acknowledgements that name offsets only (as Kafka's clients send them), as
    acknowledgements of the deliveries `acquisition_of(offset)` says hold them, split where
    those differ. An offset whose delivery is not known goes with the delivery after it (or,
    at the end, the one before), so that a split never leaves a batch ending in a gap; a batch
    with no offset known names no delivery, and the SharePartition refuses it."""
    out = []
    for b in batches:
        first, last = b.first_offset, b.last_offset
        start, current, last_known = first, NO_ACQUISITION, None
        for offset in range(first, last + 1):
            held = acquisition_of(offset)
            if held == NO_ACQUISITION:
                continue
            if last_known is not None and held != current:
                out.append(_slice(b, start, last_known, current))
                start = last_known + 1
            current, last_known = held, offset
        out.append(_slice(b, start, last, current))
    return tuple(out)


def _slice(b: AcknowledgementBatch, first: int, last: int, acquisition_id: int) -> AcknowledgementBatch:
    types = b.acknowledge_types
    if len(types) > 1:
        types = types[first - b.first_offset:last - b.first_offset + 1]
    return AcknowledgementBatch(first, last, types, acquisition_id)


@dataclass(frozen=True)
class AcquiredRecords:
    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True)
class LeaderIdAndEpoch:
    leader_id: int = -1
    leader_epoch: int = -1


@dataclass(frozen=True)
class NodeEndpoint:
    node_id: int
    host: str
    port: int
    rack: str | None = None


# ---- ShareFetch (API key 78) ----

@dataclass(frozen=True)
class ShareFetchRequestPartition:
    partition_index: int
    acknowledgement_batches: tuple[AcknowledgementBatch, ...] = ()


@dataclass(frozen=True)
class ShareFetchRequestTopic:
    topic_id: str
    partitions: tuple[ShareFetchRequestPartition, ...] = ()


@dataclass(frozen=True)
class ShareFetchRequestForgottenTopic:
    topic_id: str
    partitions: tuple[int, ...] = ()


@dataclass(frozen=True)
class ShareFetchRequest:
    group_id: str | None = None
    member_id: str | None = None
    share_session_epoch: int = 0
    max_wait_ms: int = 0
    min_bytes: int = 0
    max_bytes: int = 0x7FFFFFFF
    max_records: int = 0
    batch_size: int = 0
    share_acquire_mode: int = BATCH_OPTIMIZED
    is_renew_ack: bool = False
    topics: tuple[ShareFetchRequestTopic, ...] = ()
    forgotten_topics_data: tuple[ShareFetchRequestForgottenTopic, ...] = ()
    # shoal's, not on Kafka's wire: the member epoch the fetching member has (-1: not known).
    # A release of the member's records at an older epoch (it was fenced, then joined again
    # with the same member id) leaves what this fetch acquires alone.
    member_epoch: int = -1
    # shoal's: names this fetch's wait, so that its caller can end the wait early (the
    # gateway does once another partition of the same Kafka request has records).
    poll_id: str = ""


@dataclass(frozen=True)
class ShareFetchResponsePartition:
    partition_index: int
    error_code: int = 0
    error_message: str | None = None
    acknowledge_error_code: int = 0
    acknowledge_error_message: str | None = None
    current_leader: LeaderIdAndEpoch = LeaderIdAndEpoch()
    # The record data of the acquired offsets, as the partition leader returned it.
    records: Any = None
    acquired_records: tuple[AcquiredRecords, ...] = ()
    # shoal's, not on Kafka's wire: the delivery the acquired records are (acknowledgements
    # name it), and how long their acquisition lock had left when this answer was made (-1:
    # nothing acquired), which may be much less than the lock's duration (the answer waited
    # for a slow write of the acknowledgements the fetch carried).
    acquisition_id: int = NO_ACQUISITION
    lock_remaining_ms: int = -1


@dataclass(frozen=True)
class ShareFetchableTopicResponse:
    topic_id: str
    partitions: tuple[ShareFetchResponsePartition, ...] = ()


@dataclass(frozen=True)
class ShareFetchResponse:
    throttle_time_ms: int = 0
    error_code: int = 0
    error_message: str | None = None
    acquisition_lock_timeout_ms: int = 0
    responses: tuple[ShareFetchableTopicResponse, ...] = ()
    node_endpoints: tuple[NodeEndpoint, ...] = ()


# ---- ShareAcknowledge (API key 79) ----

@dataclass(frozen=True)
class AcknowledgePartition:
    partition_index: int
    acknowledgement_batches: tuple[AcknowledgementBatch, ...] = ()


@dataclass(frozen=True)
class AcknowledgeTopic:
    topic_id: str
    partitions: tuple[AcknowledgePartition, ...] = ()


@dataclass(frozen=True)
class ShareAcknowledgeRequest:
    group_id: str | None = None
    member_id: str | None = None
    share_session_epoch: int = 0
    is_renew_ack: bool = False
    topics: tuple[AcknowledgeTopic, ...] = ()


@dataclass(frozen=True)
class ShareAcknowledgeResponsePartition:
    partition_index: int
    error_code: int = 0
    error_message: str | None = None
    current_leader: LeaderIdAndEpoch = LeaderIdAndEpoch()


@dataclass(frozen=True)
class ShareAcknowledgeTopicResponse:
    topic_id: str
    partitions: tuple[ShareAcknowledgeResponsePartition, ...] = ()


@dataclass(frozen=True)
class ShareAcknowledgeResponse:
    throttle_time_ms: int = 0
    error_code: int = 0
    error_message: str | None = None
    acquisition_lock_timeout_ms: int = 0
    responses: tuple[ShareAcknowledgeTopicResponse, ...] = ()
    node_endpoints: tuple[NodeEndpoint, ...] = ()
