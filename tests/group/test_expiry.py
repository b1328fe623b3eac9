"""Offset expiry every offsets.retention.check.interval.ms, by seed 003's rules, and the
removal of empty groups that have no offsets left."""
from __future__ import annotations

from runtime.group.records import group_metadata_tombstone, offset_commit_tombstone

from .helpers import G, commit, committed, harness, heartbeat, join, leave, protocols, stable_group, state, sync
from .test_join import records_of

MINUTE = 60_000
CFG = {"offsets.retention.minutes": 1, "offsets.retention.check.interval.ms": 10_000,
       "group.max.session.timeout.ms": 3_600_000}


def test_simple_group_offsets_expire_from_their_commit_then_the_group_dies(tmp_path):
    h = harness(tmp_path, **CFG)
    commit(h, {("t", 0): 1})
    h.advance(30_000)
    commit(h, {("t", 1): 2})
    before = len(records_of(h))
    h.advance(30_000)  # 60 s after the first commit, at a check
    assert records_of(h)[before:] == [offset_commit_tombstone(G, "t", 0)]
    assert committed(h) == {("t", 1): 2} and state(h) == "Empty"
    h.advance(30_000)
    assert records_of(h)[-2:] == [offset_commit_tombstone(G, "t", 1), group_metadata_tombstone(G)]
    assert state(h) == "Dead"
    h.reload()
    assert state(h) == "Dead" and committed(h) == {}


def test_empty_group_offsets_count_from_when_the_group_became_empty(tmp_path):
    h = harness(tmp_path, **CFG)
    gen = stable_group(h, ("a",))  # at 3000
    commit(h, {("t", 0): 5}, member_id="a", generation=gen)
    for _ in range(10):  # the member stays 100 s: its offsets of subscribed topics stay
        h.advance(9_000)
        heartbeat(h, "a", gen)
    assert committed(h) == {("t", 0): 5}
    leave(h, "a")  # Empty at 93 s
    h.advance(MINUTE - 1_000)
    assert committed(h) == {("t", 0): 5}
    h.advance(10_000)
    assert committed(h) == {} and state(h) == "Dead"


def test_active_group_keeps_subscribed_topics_and_expires_others(tmp_path):
    h = harness(tmp_path, **CFG)
    gen = stable_group(h, ("a",))  # subscribes to "t"
    commit(h, {("t", 0): 5, ("old", 0): 6}, member_id="a", generation=gen)
    for _ in range(8):
        h.advance(9_000)
        heartbeat(h, "a", gen)
    assert committed(h) == {("t", 0): 5} and state(h) == "Stable"


def test_active_group_of_another_protocol_keeps_every_offset(tmp_path):
    h = harness(tmp_path, **CFG)
    join(h, new_id="a", protocol_type="connect", protos=protocols("default"), session=3_600_000)
    join(h, "a", protocol_type="connect", protos=protocols("default"), session=3_600_000)
    h.advance(3000)
    sync(h, "a", 1, {"a": b""})
    commit(h, {("x", 0): 1}, member_id="a", generation=1)
    h.advance(5 * MINUTE)
    assert committed(h) == {("x", 0): 1}


def test_expiry_keeps_running_after_a_reload(tmp_path):
    h = harness(tmp_path, **CFG)
    commit(h, {("t", 0): 1})
    h.advance(20_000)
    h.reload()
    h.advance(40_000)
    assert committed(h) == {} and state(h) == "Dead"
