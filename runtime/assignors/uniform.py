"""The server-side "uniform" assignor (Kafka's UniformAssignor) for consumer groups.

Balance comes first (partition counts differ by at most one between members that could
take each other's partitions), stickiness second: a member keeps what its current target
assignment gives it unless balance needs it elsewhere. Homogeneous groups (every member
subscribed to the same topics) take a direct quota-based path; the others fill the least
loaded subscribers and then move partitions from the most to the least loaded until no
move improves balance.

When `partition_racks` maps (topic, partition) to the racks holding its replicas and
members have racks, rack alignment sits between the two: within the balance quotas a
partition goes to a member on one of its racks when one has room, even if that moves it.
(Kafka 4's server-side uniform assignor dropped rack awareness; this follows the rack
handling of its client-side sticky assignor instead.)
"""
from __future__ import annotations

import heapq
from collections import defaultdict, deque
from typing import Mapping

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

# Heterogeneous balancing converges in one pass when the subscribers of each topic share
# their subscriptions; overlapping subscriptions can need more. Each pass roughly halves
# the imbalance, so this bounds the work while reaching a near-perfect balance.
_MAX_BALANCE_PASSES = 16

def uniform(
    members: Mapping[str, MemberSubscription],
    topics: Mapping[str, int],
    *,
    partition_racks: PartitionRacks | None = None,
) -> Assignment:
    ids = sorted(members)
    if not ids:
        return {}
    racks = _rack_info(members, partition_racks)
    if is_homogeneous(members, topics):
        return _homogeneous(ids, members, topics, racks)
    return _heterogeneous(ids, members, topics, racks)


def _rack_info(members, partition_racks):
    """Rack matching is on only when both sides have racks."""
    if not partition_racks or not any(s.rack for s in members.values()):
        return None
    return partition_racks


def _matches(racks, rack, topic, partition) -> bool:
    """Whether keeping (topic, partition) on a member in `rack` is rack-aligned; a member or
    a partition without rack information matches anything."""
    if racks is None or not rack:
        return True
    replica_racks = racks.get((topic, partition))
    return not replica_racks or rack in replica_racks


def _claims(ids, members, topics):
    """Each member's still-valid partitions of the existing topics it subscribes to, as
    {member: {topic: partitions}}, and every claimed partition per topic. A partition
    claimed by two members stays with the first in member order (a target assignment never
    has such claims, but the assignor must not hand one partition out twice if given one)."""
    claimed: dict[str, set[int]] = {}
    kept: dict[str, dict[str, frozenset[int]]] = {}
    for m in ids:
        sub = members[m]
        mine = {}
        for t in sorted(sub.owned):
            if t not in topics or t not in sub.topics:
                continue
            parts = valid_owned(sub, t, topics[t])
            seen = claimed.setdefault(t, set())
            if not seen.isdisjoint(parts):
                parts = frozenset(parts) - seen
            if parts:
                seen.update(parts)
                mine[t] = parts
        if mine:
            kept[m] = mine
    return kept, claimed


def _homogeneous(ids, members, topics, racks) -> Assignment:
    result = empty_result(ids)
    sub_topics = subscribed(members[ids[0]], topics)
    total = sum(topics[t] for t in sub_topics)
    if total == 0:
        return result

    # Current holdings, less what rack alignment wants moved.
    kept, claimed = _claims(ids, members, topics)
    misplaced: dict[tuple[str, int], str] = {}
    if racks is not None:
        for m, mine in kept.items():
            rack = members[m].rack
            if rack:
                for t, parts in list(mine.items()):
                    away = [p for p in parts if not _matches(racks, rack, t, p)]
                    if away:
                        misplaced.update(((t, p), m) for p in away)
                        mine[t] = frozenset(parts).difference(away)

    # Quotas: everyone gets `min_quota`, and `extra` members one more. The extra slots go
    # first to members already holding more than the minimum, so that no partition is taken
    # from one member only to fill another's extra slot.
    min_quota, extra = divmod(total, len(ids))
    held_count = {m: sum(map(len, mine.values())) for m, mine in kept.items()}
    big = [m for m in ids if held_count.get(m, 0) > min_quota]
    extra_slot = set(big[:extra])
    if len(extra_slot) < extra:
        extra_slot.update([m for m in ids if m not in extra_slot][: extra - len(extra_slot)])

    # Keep holdings up to the quota; what does not fit goes back to the pool.
    released: set[tuple[str, int]] = set(misplaced)
    room: dict[str, int] = {}
    for m in ids:
        left = min_quota + (m in extra_slot)
        for t, parts in kept.get(m, {}).items():
            if len(parts) > left:
                ordered = sorted(parts)
                released.update((t, p) for p in ordered[left:])
                parts = ordered[:left]
            if parts:
                result[m][t] = set(parts)
                left -= len(parts)
        if left:
            room[m] = left
    taken = {t: claimed.get(t, set()) for t in sub_topics}
    for t, p in released:
        taken[t].discard(p)

    if racks is not None:
        _assign_rack_aligned(ids, members, topics, sub_topics, racks, result, taken, room, misplaced)

    # Whatever remains goes to the members with room, in member order.
    feed = _Feeder([(t, sorted(set(range(topics[t])).difference(taken[t]))) for t in sub_topics])
    for m in ids:
        if m in room:
            for t, parts in feed.take(room[m]):
                add(result, m, t, parts)
    return result


def _assign_rack_aligned(ids, members, topics, sub_topics, racks, result, taken, room, misplaced):
    """Place unassigned partitions on members of a matching rack while they have room,
    the partitions with the fewest candidate members first; then give misplaced partitions
    nobody on their racks could take back to their previous owner if it still has room."""
    by_rack: dict[str, deque[str]] = defaultdict(deque)
    for m in ids:
        if m in room and members[m].rack:
            by_rack[members[m].rack].append(m)

    def candidates(tp):
        return sum(len(by_rack.get(r, ())) for r in racks.get(tp, ()))

    pending = [(t, p) for t in sub_topics for p in range(topics[t]) if p not in taken[t] and (t, p) in racks]
    pending.sort(key=candidates)
    for t, p in pending:
        for r in sorted(racks[(t, p)]):
            queue = by_rack.get(r)
            while queue and room.get(queue[0], 0) == 0:
                queue.popleft()
            if queue:
                m = queue[0]
                queue.rotate(-1)
                _give(result, taken, room, m, t, p)
                break

    for (t, p), m in sorted(misplaced.items()):
        if p not in taken[t] and room.get(m, 0) > 0:
            _give(result, taken, room, m, t, p)


def _give(result, taken, room, member, topic, partition):
    add(result, member, topic, (partition,))
    taken[topic].add(partition)
    room[member] -= 1
    if room[member] == 0:
        del room[member]


class _Feeder:
    """Hands out partitions from per-topic lists in order, in slices."""

    def __init__(self, segments: list[tuple[str, list[int]]]) -> None:
        self._segments = [(t, ps) for t, ps in segments if ps]
        self._i = 0
        self._pos = 0

    def take(self, n: int) -> list[tuple[str, list[int]]]:
        out = []
        while n > 0 and self._i < len(self._segments):
            topic, parts = self._segments[self._i]
            chunk = parts[self._pos : self._pos + n]
            out.append((topic, chunk))
            n -= len(chunk)
            self._pos += len(chunk)
            if self._pos >= len(parts):
                self._i += 1
                self._pos = 0
        return out


def _heterogeneous(ids, members, topics, racks) -> Assignment:
    result = empty_result(ids)
    index = {m: i for i, m in enumerate(ids)}
    subscribers: dict[str, list[int]] = defaultdict(list)
    for m in ids:
        for t in subscribed(members[m], topics):
            subscribers[t].append(index[m])
    load = [0] * len(ids)
    # held[t][i]: the partitions of t that member i holds; taken[t]: all held ones.
    held: dict[str, dict[int, set[int]]] = {t: defaultdict(set) for t in subscribers}
    kept, claimed = _claims(ids, members, topics)
    taken = {t: claimed.get(t, set()) for t in subscribers}
    for m, mine in kept.items():
        for t, parts in mine.items():
            held[t][index[m]].update(parts)
            load[index[m]] += len(parts)

    def order(t):
        # The topics with the most partitions per subscriber are the hardest to balance.
        return (-topics[t] / len(subscribers[t]), len(subscribers[t]), t)

    sorted_topics = sorted(subscribers, key=order)

    for t in sorted_topics:
        heap = [(load[i], i) for i in subscribers[t]]
        heapq.heapify(heap)
        for p in range(topics[t]):
            if p in taken[t]:
                continue
            i = _least_loaded(heap, load, members, ids, racks, t, p)
            held[t][i].add(p)
            load[i] += 1
            heapq.heappush(heap, (load[i], i))

    for _ in range(_MAX_BALANCE_PASSES):
        moved = 0
        for t in sorted_topics:
            if len(subscribers[t]) > 1:
                moved += _balance_topic(t, subscribers[t], held[t], load)
        if not moved:
            break
    member_topics = [[] for _ in ids]
    for t in sorted_topics:
        for i in subscribers[t]:
            member_topics[i].append(t)
    _balance_along_chains(member_topics, subscribers, held, load)

    for t in sorted_topics:
        for i, parts in held[t].items():
            if parts:
                result[ids[i]][t] = parts
    return result


def _balance_along_chains(member_topics, subscribers, held, load) -> None:
    """Per-topic balancing cannot see that A may pass a partition of t1 to B while B passes
    one of t2 to C. Find such chains, shortest first, from a member to one holding at least
    two partitions fewer, and shift one partition along each link (the members in between
    keep their counts), until no chain is left."""
    for _ in range(len(load)):
        chain = _find_chain(member_topics, subscribers, held, load)
        if chain is None:
            return
        for giver, topic, taker in chain:
            p = max(held[topic][giver])
            held[topic][giver].discard(p)
            held[topic][taker].add(p)
        load[chain[0][0]] -= 1
        load[chain[-1][2]] += 1


def _find_chain(member_topics, subscribers, held, load):
    """Breadth-first from the most loaded members down. A member already reached from a
    source at least as loaded need not be searched from again: whatever it reaches was
    already checked against a looser bound."""
    lowest = min(load)
    parent: dict[int, tuple[int, str] | None] = {}
    expanded: set[str] = set()
    for source in sorted(range(len(load)), key=lambda i: (-load[i], i)):
        bound = load[source] - 2
        if bound < lowest:
            return None
        if source in parent:
            continue
        parent[source] = None
        queue = deque([source])
        while queue:
            giver = queue.popleft()
            for t in member_topics[giver]:
                # A topic's subscribers are all reached the first time it is expanded.
                if t in expanded or not held[t].get(giver):
                    continue
                expanded.add(t)
                for taker in subscribers[t]:
                    if taker in parent:
                        continue
                    parent[taker] = (giver, t)
                    if load[taker] <= bound:
                        return _unwind(parent, taker)
                    queue.append(taker)
    return None


def _unwind(parent, end):
    chain = []
    while parent[end] is not None:
        giver, topic = parent[end]
        chain.append((giver, topic, end))
        end = giver
    return chain[::-1]


def _least_loaded(heap, load, members, ids, racks, topic, partition):
    """Pop the least loaded subscriber (stale heap entries skipped); with racks, prefer an
    equally loaded subscriber on one of the partition's racks."""
    while True:
        lo, i = heapq.heappop(heap)
        if load[i] == lo:
            break
    if racks is None or _matches(racks, members[ids[i]].rack, topic, partition):
        return i
    skipped = [(lo, i)]
    chosen = i
    while heap and heap[0][0] == lo:
        l2, j = heapq.heappop(heap)
        if load[j] != l2:
            continue
        if members[ids[j]].rack and _matches(racks, members[ids[j]].rack, topic, partition):
            chosen = j
            break
        skipped.append((l2, j))
    for entry in skipped:
        heapq.heappush(heap, entry)
    return chosen


def _balance_topic(topic, subs, held, load) -> int:
    """Move partitions of `topic` from its most to its least loaded subscribers until the
    two differ by at most one; returns how many moved."""
    moved = 0
    low = [(load[i], i) for i in subs]
    high = [(-load[i], i) for i in subs if held.get(i)]
    heapq.heapify(low)
    heapq.heapify(high)
    while low and high:
        hi_load, hi = high[0]
        if -hi_load != load[hi] or not held.get(hi):
            heapq.heappop(high)
            continue
        lo_load, lo = low[0]
        if lo_load != load[lo]:
            heapq.heappop(low)
            continue
        if load[hi] - load[lo] <= 1:
            break
        heapq.heappop(high)
        heapq.heappop(low)
        p = max(held[hi])
        held[hi].discard(p)
        held[lo].add(p)
        load[hi] -= 1
        load[lo] += 1
        moved += 1
        heapq.heappush(low, (load[lo], lo))
        heapq.heappush(low, (load[hi], hi))
        if held[hi]:
            heapq.heappush(high, (-load[hi], hi))
        heapq.heappush(high, (-load[lo], lo))
    return moved
