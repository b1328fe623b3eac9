"""Random runs of the classic protocol with a manual clock: the model's bookkeeping stays
consistent after every step, and a reload gives back every Stable or Empty group and every
offset exactly."""
from __future__ import annotations

import random
from collections import Counter

import pytest

from runtime.errors import KafkaError
from runtime.group.classic_group import ClassicGroupState

from .helpers import commit, harness, heartbeat, join, leave, protocols, sync
from .test_shard import snapshot

GROUPS = ("g1", "g2")
CFG = {"offsets.retention.minutes": 1, "offsets.retention.check.interval.ms": 20_000}


def check_model(shard) -> None:
    for g in shard.groups.values():
        members = g.members
        assert g._num_awaiting_join == sum(m.awaiting_join for m in members.values())
        assert (g.leader_id is None) == (not members) and (g.leader_id is None or g.leader_id in members)
        assert g.static_members == {m.group_instance_id: m.member_id for m in members.values()
                                    if m.group_instance_id is not None}
        votes = Counter(n for m in members.values() for n in m.protocol_names)
        assert +g._votes == votes
        assert not (g.pending_join_members & set(members))
        assert g.pending_sync_members <= set(members)
        if g.state is ClassicGroupState.EMPTY:
            assert not members


def durable_view(shard) -> dict:
    snap = snapshot(shard)
    keep = {gid for gid, g in shard.groups.items()
            if g.state in (ClassicGroupState.STABLE, ClassicGroupState.EMPTY)}
    return {"groups": {k: v for k, v in snap["groups"].items() if k in keep},
            "offsets": {g: {t: {p: o[:5] for p, o in ps.items()} for t, ps in topics.items()}
                        for g, topics in snap["offsets"].items()}}, keep


def step(h, rnd: random.Random, known: dict, n: int) -> None:
    gid = rnd.choice(GROUPS)
    group = h.shard.groups.get(gid)
    members = list(group.members) if group is not None and group.type == "classic" else []
    gen = group.generation_id if group is not None else -1
    kind = rnd.choice(["new", "new", "rejoin", "sync", "sync_all", "sync_all", "heartbeat", "heartbeat", "leave",
                       "commit", "commit", "advance", "advance", "static", "delete"])
    if kind == "new":
        new_id = f"{gid}-m{n}"
        resp = join(h, group=gid, new_id=new_id).result()
        if resp.error_code == 79:
            known[gid].append(join(h, new_id, group=gid))
    elif kind == "static":
        known[gid].append(join(h, group=gid, new_id=f"{gid}-s{n}", instance=f"inst-{rnd.randint(0, 2)}"))
    elif kind == "rejoin" and members:
        m = rnd.choice(members)
        names = rnd.choice([("range",), ("range", "roundrobin")])
        known[gid].append(join(h, m, group=gid, protos=protocols(*names),
                               instance=group.members[m].group_instance_id))
    elif kind == "sync" and members:
        m = rnd.choice(members)
        assignment = {x: x.encode() for x in members} if m == group.leader_id else None
        sync(h, m, gen, assignment, group=gid, instance=group.members[m].group_instance_id)
    elif kind == "sync_all" and members:
        for m in sorted(members, key=lambda x: x == group.leader_id):  # the leader last
            assignment = {x: x.encode() for x in members} if m == group.leader_id else None
            sync(h, m, gen, assignment, group=gid, instance=group.members[m].group_instance_id)
    elif kind == "heartbeat":
        for m in members:
            heartbeat(h, m, gen, group=gid, instance=group.members[m].group_instance_id)
    elif kind == "leave" and members:
        leave(h, rnd.choice(members), group=gid)
    elif kind == "commit":
        if members and rnd.random() < 0.7:
            m = rnd.choice(members)
            commit(h, {(rnd.choice("tu"), rnd.randint(0, 2)): n}, group=gid, member_id=m, generation=gen,
                   instance=group.members[m].group_instance_id)
        else:
            commit(h, {(rnd.choice("tu"), rnd.randint(0, 2)): n}, group=gid)
    elif kind == "delete":
        h.call(lambda s, now: s.delete_groups([gid], now))
    elif kind == "advance":
        h.advance(rnd.choice([100, 1000, 3000, 7000, 15000]))


@pytest.mark.parametrize("seed", range(25))
def test_random_runs_keep_the_model_consistent_and_reload_exactly(tmp_path, seed):
    rnd = random.Random(seed)
    h = harness(tmp_path, **CFG)
    known = {g: [] for g in GROUPS}
    for n in range(120):
        try:
            step(h, rnd, known, n)
        except KafkaError:
            pass
        check_model(h.shard)
        if n % 40 == 39:
            before, keep = durable_view(h.shard)
            h.reload()
            after, _ = durable_view(h.shard)
            assert after["offsets"] == before["offsets"]
            assert {k: v for k, v in after["groups"].items() if k in keep} == before["groups"]
            check_model(h.shard)
