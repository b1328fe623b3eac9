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
    # Every claim counts here, subscribed or not: a member owns what it owns until it
    # revokes it.
    claims = _claims_by_topic(members, topics, subscribed_only=False)
    for m, assignment in result.items():
        generation = members[m].generation
        for t in list(assignment):
            if t not in claims:
                continue
            topic_claims, claimed, contested = claims[t]
            given = assignment[t]
            mine = members[m].owned.get(t, frozenset())
            # Taken from another member: wait until that member has revoked it.
            withheld = (given - mine) & claimed
            # Claimed by this member and others: only a strictly newer generation keeps it.
            withheld.update(p for p in given & mine & contested if not _wins(m, generation, p, topic_claims))
            given -= withheld
            if not given:
                del assignment[t]
    return result


Claims = list[tuple[str, int, frozenset[int]]]


def _claims_by_topic(members, topics, subscribed_only: bool) -> dict[str, tuple[Claims, set[int], set[int]]]:
    """Per topic: who claims which of its partitions (member, generation, partitions), every
    claimed partition, and the partitions claimed more than once."""
    by_topic: dict[str, Claims] = {}
    for m in sorted(members):
        sub = members[m]
        for t in sub.owned:
            if t in topics and (t in sub.topics or not subscribed_only):
                parts = frozenset(valid_owned(sub, t, topics[t]))
                if parts:
                    by_topic.setdefault(t, []).append((m, sub.generation, parts))
    out = {}
    for t, topic_claims in by_topic.items():
        claimed: set[int] = set()
        contested: set[int] = set()
        for _, _, parts in topic_claims:
            contested |= claimed & parts
            claimed |= parts
        out[t] = (topic_claims, claimed, contested)
    return out


def _settle_claims(members: Mapping[str, MemberSubscription], topics: Mapping[str, int]) -> dict[str, MemberSubscription]:
    """The members with `owned` cut down to what each may keep: partitions of topics it
    still subscribes to that exist, and that no member of a newer or the same generation
    also claims."""
    keep: dict[str, dict[str, frozenset[int]]] = {m: {} for m in members}
    for t, (topic_claims, _, contested) in _claims_by_topic(members, topics, subscribed_only=True).items():
        for m, gen, parts in topic_claims:
            if parts & contested:
                parts = frozenset(p for p in parts if p not in contested or _wins(m, gen, p, topic_claims))
            if parts:
                keep[m][t] = parts
    return {
        m: MemberSubscription(s.topics, owned=keep[m], rack=s.rack, instance_id=s.instance_id, generation=s.generation)
        for m, s in members.items()
    }


def _wins(member, generation, partition, claims) -> bool:
    """Whether `member` claims `partition` in a newer generation than everyone else who does."""
    return all(gen < generation for o, gen, parts in claims if o != member and partition in parts)
