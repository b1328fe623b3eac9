"""Share groups under random joins, subscription changes, leaves, expiries, initialisation
answers, topic changes and restarts: epochs stay ordered, only initialised partitions are
assigned, a reload gives the same state, and a settled group covers every partition."""
from __future__ import annotations

import random

import pytest

from runtime.errors import KafkaError

from .test_share_group import G, group, harness, hb, snapshot

TOPIC_NAMES = ("t", "u", "v")


def settle(h):
    """Answer every initialisation (those that failed come back with the retry timer) and
    let every member heartbeat every 5 s until nothing changes."""
    for _ in range(20):
        for p in h.shard.pending_share_initializations():
            h.call(lambda s, now, p=p: s.share_group_initialized(p.group_id, p.topic_id, p.partitions, now))
        start = h.end_offset
        for member_id, member in sorted(group(h).members.items()):
            hb(h, member_id, member.member_epoch)
        if h.end_offset == start and not group(h).initializing:
            return
        h.advance(5_000)
    raise AssertionError("the group did not settle")


def check(h):
    g = h.shard.groups.get(G)
    if g is None:
        return
    assert g.assignment_epoch <= g.group_epoch
    assignable = g.assignable(h.shard.share.topic_ids)
    for m in g.members.values():
        assert m.member_epoch <= g.assignment_epoch
        if m.member_epoch == g.group_epoch:
            for topic, partitions in m.assigned_partitions.items():
                assert partitions <= assignable.get(topic, frozenset()), (m, assignable)
                assert topic in m.subscribed_topic_names


@pytest.mark.parametrize("seed", range(20))
def test_random_share_group(tmp_path, seed):
    rng = random.Random(seed)
    topics = {"t": 2, "u": 3, "v": 1}
    ids = {name: f"{name}0" for name in topics}
    h = harness(tmp_path, topics, ids)
    next_id = 0
    for _ in range(120):
        g = h.shard.groups.get(G)
        members = sorted(g.members) if g is not None else []
        action = rng.random()
        try:
            if action < 0.2 or not members:
                next_id += 1
                hb(h, new_member_id=f"m{next_id}", topics=tuple(rng.sample(TOPIC_NAMES, rng.randint(1, 3))))
            elif action < 0.5:
                m = rng.choice(members)
                change = tuple(rng.sample(TOPIC_NAMES, rng.randint(1, 3))) if rng.random() < 0.3 else None
                hb(h, m, g.members[m].member_epoch, topics=change)
            elif action < 0.6:
                hb(h, rng.choice(members), -1)
            elif action < 0.7:
                h.advance(rng.randint(1, 12_000))
            elif action < 0.85:
                for p in h.shard.pending_share_initializations():
                    op = "share_group_initialized" if rng.random() < 0.7 else "share_group_initialize_failed"
                    h.call(lambda s, now, p=p, op=op: getattr(s, op)(p.group_id, p.topic_id, p.partitions, now))
            elif action < 0.93:
                name = rng.choice(sorted(topics))
                if rng.random() < 0.5:
                    topics[name] += 1
                else:
                    ids[name] = ids[name] + "x"  # deleted and created again
                h.call(lambda s, now: s.update_topics(topics, now, ids))
            else:
                before = snapshot(h.shard)
                h.reload()
                assert snapshot(h.shard) == before
                h.call(lambda s, now: s.update_topics(topics, now, ids))
        except KafkaError as e:
            raise AssertionError(f"seed {seed}: {e}") from e
        check(h)
    if G in h.shard.groups and group(h).members:
        settle(h)
        check(h)
        g = group(h)
        assignable = g.assignable(h.shard.share.topic_ids)
        for topic in g.subscribed_topic_counts:
            held = set().union(*(m.assigned_partitions.get(topic, ()) for m in g.members.values()))
            assert held == set(range(topics[topic])) == set(assignable[topic])
    before = snapshot(h.shard)
    h.reload()
    assert snapshot(h.shard) == before
