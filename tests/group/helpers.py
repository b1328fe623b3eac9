"""Shared fixtures for the group coordinator tests: a harness over the real runtime and
short request builders."""
from __future__ import annotations

from runtime.group.shard import GroupCoordinatorShard
from runtime.group.consumer_protocol import encode_subscription
from runtime.messages.group import (
    HeartbeatRequest, JoinGroupRequest, JoinGroupRequestProtocol, LeaveGroupRequest, MemberIdentity,
    OffsetCommitRequest, OffsetCommitRequestPartition, OffsetCommitRequestTopic, OffsetFetchRequest,
    OffsetFetchRequestGroup, OffsetFetchRequestTopics, SyncGroupRequest, SyncGroupRequestAssignment,
)
from runtime.testing import ShardHarness

G = "g"
SESSION = 10_000
REBALANCE = 30_000


def harness(tmp_path, **config) -> ShardHarness:
    cfg = {"group.initial.rebalance.delay.ms": 3000}
    cfg.update({k.replace("_", "."): v for k, v in config.items()})
    return ShardHarness(str(tmp_path), GroupCoordinatorShard, config=cfg)


def sub(*topics: str) -> bytes:
    return encode_subscription(list(topics))


def protocols(*names: str, topics=("t",)) -> tuple:
    return tuple(JoinGroupRequestProtocol(n, sub(*topics)) for n in (names or ("range",)))


def join_request(member_id: str = "", *, group: str = G, session: int = SESSION, rebalance: int = REBALANCE,
                 protos=None, instance: str | None = None, protocol_type: str = "consumer") -> JoinGroupRequest:
    return JoinGroupRequest(group, session, member_id, protocol_type, protos if protos is not None else protocols(),
                            rebalance, instance)


def join(h, member_id: str = "", new_id: str = "new", **kw):
    req = join_request(member_id, **kw)
    return h.write(lambda s, now: s.join_group(req, now, new_id, "client", "/127.0.0.1"))


def sync(h, member_id: str, generation: int, assignments: dict | None = None, *, group: str = G,
         instance: str | None = None, protocol_type: str | None = None, protocol_name: str | None = None):
    req = SyncGroupRequest(group, generation, member_id, instance, protocol_type, protocol_name,
                           tuple(SyncGroupRequestAssignment(m, a) for m, a in (assignments or {}).items()))
    return h.write(lambda s, now: s.sync_group(req, now))


def heartbeat(h, member_id: str, generation: int, *, group: str = G, instance: str | None = None):
    req = HeartbeatRequest(group, generation, member_id, instance)
    return h.call(lambda s, now: s.heartbeat(req, now))


def leave(h, *identities, group: str = G):
    req = LeaveGroupRequest(group, tuple(MemberIdentity(*i) if isinstance(i, tuple) else MemberIdentity(i)
                                         for i in identities))
    return h.call(lambda s, now: s.leave_group(req, now))


def commit(h, offsets: dict, *, group: str = G, member_id: str = "", generation: int = -1,
           instance: str | None = None, metadata: str | None = None):
    """offsets: {(topic, partition): offset}"""
    topics = {}
    for (t, p), o in offsets.items():
        topics.setdefault(t, []).append(OffsetCommitRequestPartition(p, o, -1, metadata))
    req = OffsetCommitRequest(group, tuple(OffsetCommitRequestTopic(t, tuple(ps)) for t, ps in topics.items()),
                              generation, member_id, instance)
    return h.call(lambda s, now: s.offset_commit(req, now))


def fetch(h, partitions: dict | None = None, *, group: str = G, require_stable: bool = False):
    """partitions: {topic: [partition, ...]} or None for all."""
    topics = None if partitions is None else tuple(OffsetFetchRequestTopics(t, tuple(ps))
                                                   for t, ps in partitions.items())
    req = OffsetFetchRequest((OffsetFetchRequestGroup(group, topics),), require_stable)
    return h.read(lambda s: s.offset_fetch(req)).groups[0]


def committed(h, group: str = G) -> dict:
    """{(topic, partition): offset} of the group's committed offsets, as a fetch of all sees them."""
    return {(t.name, p.partition_index): p.committed_offset for t in fetch(h, group=group).topics
            for p in t.partitions}


def stable_group(h, members=("a", "b"), assignment: dict | None = None):
    """Build a Stable group of the given member ids (joined in order; the first leads).
    Returns the generation."""
    ids = list(members)
    joins = []
    for m in ids:
        join(h, new_id=m)
        joins.append(join(h, m))
    h.advance(3000 * len(ids))  # the initial rebalance delay, stretched by each newcomer
    gen = joins[0].result().generation_id
    assignment = assignment if assignment is not None else {m: m.encode() for m in ids}
    waits = [sync(h, m, gen) for m in ids[1:]]
    sync(h, ids[0], gen, assignment)
    for w in waits:
        assert w.result().error_code == 0
    return gen


def state(h, group: str = G) -> str:
    g = h.shard.groups.get(group)
    return "Dead" if g is None else str(g.state)
