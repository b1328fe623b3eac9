"""The "range" assignor, server side (Kafka's group-coordinator RangeAssignor) and client
side (the classic consumer's RangeAssignor): both give each subscriber of a topic one
contiguous range of its partitions, the first `count % subscribers` members one partition
more, in the same member order. When every member subscribes to the same topics and the
topics have equal partition counts, a member gets the same partition numbers of every
topic (co-partitioning, for joins).

It is sticky only through static membership: members with an instance id come first, in
instance id order, so a static member that rejoins under a new member id finds its range
again.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Mapping

from .spec import Assignment, MemberSubscription, PartitionRacks, empty_result, member_order, subscribed


def range_assign(
    members: Mapping[str, MemberSubscription],
    topics: Mapping[str, int],
    *,
    partition_racks: PartitionRacks | None = None,  # not rack-aware, as in Kafka
) -> Assignment:
    result = empty_result(sorted(members))
    subscribers: dict[str, list[str]] = defaultdict(list)
    for m in member_order(members):
        for t in subscribed(members[m], topics):
            subscribers[t].append(m)
    for t, subs in subscribers.items():
        quota, extra = divmod(topics[t], len(subs))
        start = 0
        for i, m in enumerate(subs):
            end = start + quota + (1 if i < extra else 0)
            if end > start:
                result[m][t] = set(range(start, end))
            start = end
    return result
