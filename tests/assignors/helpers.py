"""Invariant checks shared by the assignor tests."""
from __future__ import annotations

from runtime.assignors import MemberSubscription as M


def group(n, topics, prefix="m", owned=None):
    """n members subscribed to `topics`, ids m000, m001, ... (sorted as numbered)."""
    owned = owned or {}
    return {f"{prefix}{i:03d}": M(topics, owned=owned.get(f"{prefix}{i:03d}", {})) for i in range(n)}


def with_owned(members, result, **changes):
    """The same members now owning what `result` gave them."""
    return {m: M(s.topics, owned=result.get(m, {}), rack=s.rack, instance_id=s.instance_id,
                 generation=s.generation, **changes) for m, s in members.items()}


def leave(members, result, leaver):
    """The members but `leaver`, each owning what `result` gave it."""
    left = with_owned(members, result)
    del left[leaver]
    return left


def sizes(result):
    return {m: sum(len(ps) for ps in a.values()) for m, a in result.items()}


def owners(result):
    """(topic, partition) -> list of members holding it."""
    out = {}
    for m, a in result.items():
        for t, ps in a.items():
            for p in ps:
                out.setdefault((t, p), []).append(m)
    return out


def check_exclusive(members, topics, result, complete=True):
    """Every member appears; each partition is held by at most one member, only by a
    subscriber of its topic, only if it exists; with `complete`, every partition of a
    subscribed topic is held."""
    assert set(result) == set(members)
    held = owners(result)
    for (t, p), ms in held.items():
        assert len(ms) == 1, f"{t}-{p} held by {ms}"
        assert t in topics and 0 <= p < topics[t]
        assert t in members[ms[0]].topics
    for a in result.values():
        for ps in a.values():
            assert ps, "empty partition sets are left out"
    if complete:
        wanted = {(t, p) for s in members.values() for t in s.topics if t in topics for p in range(topics[t])}
        assert set(held) == wanted


def moves(before, after):
    """How many partitions changed hands (ignoring partitions that simply disappeared or
    were unassigned before)."""
    was = {tp: ms[0] for tp, ms in owners(before).items()}
    now = {tp: ms[0] for tp, ms in owners(after).items()}
    return sum(1 for tp, m in now.items() if tp in was and was[tp] != m)


def spread(result):
    s = sizes(result)
    vals = list(s.values())
    return max(vals) - min(vals) if vals else 0

