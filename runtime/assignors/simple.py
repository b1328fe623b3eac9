"""The server-side "simple" assignor for share groups (Kafka's SimpleAssignor, KIP-932).

Share groups may put one partition in several members' assignments. With M members and P
partitions, each partition is shared by desiredSharing = ceil(M / P) members (so while
M <= P nothing is shared), and member i of the ordered member list should hold
ceil(x * (i + 1)) - ceil(x * i) partitions, x = desiredSharing * P / M, so that the counts
add up to desiredSharing * P and differ by at most one.

Balance comes first and stickiness second: from what each member holds, the assignor
revokes the partitions it can no longer have (unsubscribed or gone), then partitions of
members holding more than their desired count, then sharers of partitions shared by more
than desiredSharing members; then it hands the partitions still short of sharers to the
members short of partitions, round robin. The homogeneous builder does this once over all
subscribed partitions; the heterogeneous builder does it per topic among that topic's
subscribers.

One refinement over Kafka: the desired counts come from the formula above in member-id
order, but a member already holding the larger count swaps with one that would have to be
topped up to it, so that balance never moves a partition needlessly.
"""
from __future__ import annotations

from collections import deque
from typing import Collection, Mapping

from .spec import (
    Assignment,
    MemberSubscription,
    PartitionRacks,
    add,
    empty_result,
    is_homogeneous,
    subscribed,
    valid_owned,
)

TopicPartition = tuple[str, int]


def simple(
    members: Mapping[str, MemberSubscription],
    topics: Mapping[str, int],
    *,
    partition_racks: PartitionRacks | None = None,  # not rack-aware, as in Kafka
    assignable: Mapping[str, Collection[int]] | None = None,
) -> Assignment:
    """`assignable`, when given, limits each topic to the listed partitions: Kafka assigns
    a share group only the partitions whose share-group state is initialised."""
    ids = sorted(members)
    result = empty_result(ids)
    if not ids:
        return result

    def targets(t):
        if assignable is None:
            return [(t, p) for p in range(topics[t])]
        return [(t, p) for p in sorted(assignable.get(t, ())) if 0 <= p < topics[t]]

    if is_homogeneous(members, topics):
        sub_topics = subscribed(members[ids[0]], topics)
        _merge(result, _share([tp for t in sub_topics for tp in targets(t)], ids, members, topics))
        return result
    by_topic: dict[str, list[str]] = {}
    for m in ids:
        for t in subscribed(members[m], topics):
            by_topic.setdefault(t, []).append(m)
    for t in sorted(by_topic):
        _merge(result, _share(targets(t), by_topic[t], members, topics))
    return result


def desired_sharing(num_members: int, num_partitions: int) -> int:
    """How many members share each partition: ceil(members / partitions)."""
    return _ceil_div(num_members, num_partitions) if num_partitions else 0


def desired_counts(num_members: int, num_partitions: int) -> list[int]:
    """The seed's per-member desired partition counts, in member order (exact integer
    arithmetic for ceil(x * i) with x = desiredSharing * partitions / members)."""
    total = desired_sharing(num_members, num_partitions) * num_partitions
    return [_ceil_div(total * (i + 1), num_members) - _ceil_div(total * i, num_members) for i in range(num_members)]


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _merge(result: Assignment, part: dict[str, set[TopicPartition]]) -> None:
    for m, tps in part.items():
        for t, p in tps:
            add(result, m, t, (p,))


def _share(partitions: list[TopicPartition], ids: list[str], members, topics) -> dict[str, set[TopicPartition]]:
    if not partitions:
        return {}
    sharing = desired_sharing(len(ids), len(partitions))
    wanted = set(partitions)

    # What each member may keep: its owned partitions among these (unassignable ones are
    # simply not carried over).
    held: dict[str, set[TopicPartition]] = {}
    for m in ids:
        sub = members[m]
        mine = set()
        for t in {t for t, _ in partitions} & sub.owned.keys():
            mine.update((t, p) for p in valid_owned(sub, t, topics[t]) if (t, p) in wanted)
        held[m] = mine

    counts = desired_counts(len(ids), len(partitions))
    desired = dict(zip(ids, counts))
    high = max(counts)
    upgrade = [m for m in ids if desired[m] < high and len(held[m]) >= high]
    downgrade = [m for m in ids if desired[m] == high and len(held[m]) < high]
    for up, down in zip(upgrade, downgrade):
        desired[up], desired[down] = desired[down], desired[up]

    sharers: dict[TopicPartition, list[str]] = {tp: [] for tp in partitions}
    for m in ids:
        for tp in held[m]:
            sharers[tp].append(m)

    # Overfilled members give up their most shared partitions first.
    for m in ids:
        excess = len(held[m]) - desired[m]
        if excess > 0:
            for tp in sorted(held[m], key=lambda tp: (-len(sharers[tp]), tp))[:excess]:
                held[m].discard(tp)
                sharers[tp].remove(m)

    # Overshared partitions are given up by the members holding the fewest: such a member
    # has the most partitions it could take instead, so the refill below can top it up.
    for tp in partitions:
        excess = len(sharers[tp]) - sharing
        if excess > 0:
            for m in sorted(sharers[tp], key=lambda m: (len(held[m]), m))[:excess]:
                held[m].discard(tp)
                sharers[tp].remove(m)

    # Partitions short of sharers go round robin to members short of partitions. A
    # partition every unfilled member already holds stays short: a slight imbalance Kafka
    # tolerates too.
    queue = deque(m for m in ids if len(held[m]) < desired[m])
    for tp in partitions:
        need = sharing - len(sharers[tp])
        tries = 0
        while need > 0 and queue and tries < len(queue):
            m = queue[0]
            if tp in held[m]:
                queue.rotate(-1)
                tries += 1
                continue
            held[m].add(tp)
            sharers[tp].append(m)
            need -= 1
            tries = 0
            if len(held[m]) >= desired[m]:
                queue.popleft()
            else:
                queue.rotate(-1)
    return held
