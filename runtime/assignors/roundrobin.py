"""The client-side "roundrobin" assignor (the classic consumer's RoundRobinAssignor).

All partitions of all subscribed topics, sorted by topic then partition, are dealt one by
one around the members (static members first by instance id, then by member id), skipping
members not subscribed to the partition's topic.
"""
from __future__ import annotations

from typing import Mapping

from .spec import Assignment, MemberSubscription, PartitionRacks, add, empty_result, member_order


def roundrobin(
    members: Mapping[str, MemberSubscription],
    topics: Mapping[str, int],
    *,
    partition_racks: PartitionRacks | None = None,  # not rack-aware, as in Kafka
) -> Assignment:
    result = empty_result(sorted(members))
    order = member_order(members)
    all_topics = sorted({t for s in members.values() for t in s.topics if t in topics})
    i = 0
    for t in all_topics:
        for p in range(topics[t]):
            while t not in members[order[i]].topics:
                i = (i + 1) % len(order)
            add(result, order[i], t, (p,))
            i = (i + 1) % len(order)
    return result
