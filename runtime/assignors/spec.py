"""What every assignor takes in and gives back, and the bookkeeping they share.

An assignor is a plain function `assign(members, topics) -> {member_id: {topic: set}}`:
`members` maps a member id to its MemberSubscription, `topics` maps a topic name to its
partition count. Topics a member subscribes to that are not in `topics` are ignored (Kafka
resolves subscriptions against the metadata image before it assigns), and so are owned
partitions that no longer exist.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping

Assignment = dict[str, dict[str, set[int]]]

# (topic, partition) -> the racks holding its replicas. Every assignor takes it as an
# optional keyword so that callers can treat them alike; only uniform and the sticky ones
# use it.
PartitionRacks = Mapping[tuple[str, int], "set[str] | frozenset[str]"]


@dataclass(frozen=True, slots=True)
class MemberSubscription:
    """One member as an assignor sees it.

    `owned` is what the member holds now: for the server assignors, its current target
    assignment; for the client assignors, the partitions it reported in its subscription.
    `generation` is the classic-protocol generation those partitions were owned in; the
    sticky assignors use it to settle two members claiming the same partition.
    """

    topics: frozenset[str]
    owned: Mapping[str, frozenset[int]] = field(default_factory=dict)
    rack: str | None = None
    instance_id: str | None = None
    generation: int = -1

    def __post_init__(self) -> None:
        if isinstance(self.topics, str):
            raise TypeError("topics must be a collection of topic names, not a string")
        object.__setattr__(self, "topics", frozenset(self.topics))
        object.__setattr__(
            self, "owned", {t: frozenset(ps) for t, ps in self.owned.items() if ps}
        )


def member_order(members: Mapping[str, MemberSubscription]) -> list[str]:
    """Static members first by instance id, then the others by member id: the order in
    which Kafka's range assignors hand out ranges, so a restarted static member keeps its
    range under a new member id."""
    return sorted(
        members,
        key=lambda m: (0, members[m].instance_id, m) if members[m].instance_id is not None else (1, "", m),
    )


def subscribed(sub: MemberSubscription, topics: Mapping[str, int]) -> list[str]:
    """The member's topics that exist, sorted."""
    return sorted(t for t in sub.topics if t in topics)


def valid_owned(sub: MemberSubscription, topic: str, count: int) -> Iterable[int]:
    """The partitions of `topic` the member owns that still exist."""
    owned = sub.owned.get(topic)
    if not owned:
        return ()
    if max(owned) < count and min(owned) >= 0:
        return owned
    return [p for p in owned if 0 <= p < count]


def empty_result(members: Iterable[str]) -> Assignment:
    return {m: {} for m in members}


def add(result: Assignment, member: str, topic: str, partitions: Iterable[int]) -> None:
    parts = result[member].get(topic)
    if parts is None:
        parts = result[member][topic] = set()
    parts.update(partitions)


def is_homogeneous(members: Mapping[str, MemberSubscription], topics: Mapping[str, int]) -> bool:
    seen = None
    for sub in members.values():
        mine = sub.topics & topics.keys()
        if seen is None:
            seen = mine
        elif mine != seen:
            return False
    return True
