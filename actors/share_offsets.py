"""Where a share group is on each partition: its share-partition start offset (KIP-932) as
the share coordinators keep it, and the lag behind the log end (KIP-1226). One home for
shoal's admin client and the gateway's DescribeShareGroupOffsets, each passing its own way
of calling an actor (`call(name, method, request)`)."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Awaitable, Callable, Iterable

from runtime.clients.types import TopicPartition
from runtime.errors import Errors, KafkaError
from runtime.messages.share_state import (ReadShareGroupStateSummaryRequest, ReadStateSummaryData,
                                          ReadStateSummaryPartitionData)

from . import naming

__all__ = ["UNKNOWN", "ShareStateSummary", "read_summaries", "lag"]

UNKNOWN = -1  # Kafka's tools print "-" for an offset or lag they do not know

Call = Callable[..., Awaitable]


@dataclass(frozen=True)
class ShareStateSummary:
    start_offset: int  # UNKNOWN: the group has no state on the partition (never consumed it)
    delivery_complete_count: int  # records past the start offset already settled; UNKNOWN
    error: KafkaError | None = None


async def read_summaries(call: Call, group_id: str, partitions: Iterable[tuple[str, str, int]],
                         config: dict) -> dict[TopicPartition, ShareStateSummary]:
    """The summary of each (topic, topic id, partition), one call per share coordinator; a
    coordinator that cannot be reached gives its partitions its error."""
    by_coordinator: dict[str, dict[str, list[tuple[str, int]]]] = {}
    for topic, topic_id, p in partitions:
        coordinator = naming.find_coordinator(naming.CoordinatorType.SHARE,
                                              naming.share_coordinator_key(group_id, topic_id, p), config)
        by_coordinator.setdefault(coordinator, {}).setdefault(topic_id, []).append((topic, p))

    async def read(coordinator: str, topics: dict[str, list[tuple[str, int]]]) -> dict:
        names = {(topic_id, p): TopicPartition(topic, p) for topic_id, ps in topics.items() for topic, p in ps}
        request = ReadShareGroupStateSummaryRequest(group_id, tuple(
            ReadStateSummaryData(topic_id, tuple(ReadStateSummaryPartitionData(p) for _, p in ps))
            for topic_id, ps in topics.items()))
        try:
            response = await call(coordinator, "read_share_group_state_summary", request)
        except KafkaError as e:
            return {tp: ShareStateSummary(UNKNOWN, UNKNOWN, e) for tp in names.values()}
        out = {}
        for result in response.results:
            for p in result.partitions:
                error = KafkaError(Errors.for_code(p.error_code), p.error_message) if p.error_code else None
                out[names[(result.topic_id, p.partition)]] = ShareStateSummary(
                    p.start_offset if p.start_offset >= 0 else UNKNOWN, p.delivery_complete_count, error)
        return out

    found: dict[TopicPartition, ShareStateSummary] = {}
    for part in await asyncio.gather(*(read(c, t) for c, t in by_coordinator.items())):
        found.update(part)
    return dict(sorted(found.items()))


def lag(log_end_offset: int, summary: ShareStateSummary) -> int:
    """Records past the start offset not yet settled (KIP-1226); UNKNOWN where it is not known."""
    if summary.start_offset < 0 or summary.delivery_complete_count < 0:
        return UNKNOWN
    return max(log_end_offset - summary.start_offset - summary.delivery_complete_count, 0)
