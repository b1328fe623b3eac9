"""The client-side "sticky" and "cooperative-sticky" assignors (the classic consumer's
StickyAssignor and CooperativeStickyAssignor).

Both keep the partitions members report as owned as far as balance allows, and differ
only in how a move is delivered:

- "sticky" (eager protocol: every member gives up everything before it rejoins) hands a
  moved partition straight to its new owner;
- "cooperative-sticky" (members keep their partitions across the rebalance) leaves a
  partition that another member still owns out of this generation's assignment: its
  owner sees it missing, revokes it and asks for a follow-up rebalance, in which nobody
  claims it any more and it goes to its new owner. So a partition is never owned by two
  members in one generation.

Two members claiming one partition are settled by generation, as Kafka does: the newer
generation keeps it; in the same generation neither does. Once claims are settled the
balancing itself is the uniform assignor's (homogeneous quotas, or fill-and-balance for
heterogeneous subscriptions), which has the same balance-then-stickiness order.
"""
from __future__ import annotations

from typing import Mapping

from .spec import Assignment, MemberSubscription, PartitionRacks, valid_owned
from .uniform import uniform


def sticky(
    members: Mapping[str, MemberSubscription],
    topics: Mapping[str, int],
    *,
    partition_racks: PartitionRacks | None = None,
) -> Assignment:
    return uniform(_settle_claims(members, topics), topics, partition_racks=partition_racks)


def cooperative_sticky(
    members: Mapping[str, MemberSubscription],
    topics: Mapping[str, int],
    *,
    partition_racks: PartitionRacks | None = None,
) -> Assignment:
    result = sticky(members, topics, partition_racks=partition_racks)
    for t in topics:
        claims = [(m, s.generation, frozenset(valid_owned(s, t, topics[t]))) for m, s in members.items() if t in s.owned]
        if not claims:
            continue
        claimed: set[int] = set()
        contested: set[int] = set()
        for _, _, parts in claims:
            contested |= claimed & parts
            claimed |= parts
        for m, assignment in result.items():
            given = assignment.get(t)
            if not given:
                continue
            mine = members[m].owned.get(t, frozenset())
            # Taken from another member: wait until that member has revoked it.
            withheld = (given - mine) & claimed
            # Claimed by this member and others: only a strictly newer generation keeps it.
            for p in given & mine & contested:
                if any(o != m and p in parts and gen >= members[m].generation for o, gen, parts in claims):
                    withheld.add(p)
            if withheld:
                given -= withheld
                if not given:
                    del assignment[t]
    return result


def _settle_claims(members: Mapping[str, MemberSubscription], topics: Mapping[str, int]) -> dict[str, MemberSubscription]:
    """The members with `owned` cut down to what each may keep: partitions of topics it
    still subscribes to that exist, and that no member of a newer or the same generation
    also claims."""
    keep: dict[str, dict[str, frozenset[int]]] = {m: {} for m in members}
    for t in topics:
        claims = [(m, members[m].generation, frozenset(valid_owned(members[m], t, topics[t])))
                  for m in sorted(members) if t in members[m].owned and t in members[m].topics]
        claimed: set[int] = set()
        contested: set[int] = set()
        for _, _, parts in claims:
            contested |= claimed & parts
            claimed |= parts
        for m, gen, parts in claims:
            if parts & contested:
                parts = frozenset(p for p in parts if p not in contested or _wins(m, gen, p, claims))
            if parts:
                keep[m][t] = parts
    return {
        m: MemberSubscription(s.topics, owned=keep[m], rack=s.rack, instance_id=s.instance_id, generation=s.generation)
        for m, s in members.items()
    }


def _wins(member, generation, partition, claims) -> bool:
    return all(gen < generation for o, gen, parts in claims if o != member and partition in parts)
