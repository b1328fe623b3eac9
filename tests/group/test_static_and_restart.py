"""Static membership, reloading from the log, the write-failure path, and the state table."""
from __future__ import annotations

import pytest

from runtime.errors import Errors, KafkaError
from runtime.group.classic_group import (
    VALID_PREVIOUS_STATES, ClassicGroup, ClassicGroupState, IllegalGroupStateTransition,
)
from runtime.messages.group import JoinGroupResponse

from .helpers import G, SESSION, harness, heartbeat, join, leave, protocols, state, sync
from .test_join import records_of


def static_stable_group(h, instances=("i-a", "i-b")):
    waits = []
    for n, inst in enumerate(instances):
        waits.append(join(h, new_id=f"m{n}", instance=inst))
    h.advance(3000 * len(instances))
    gen = waits[0].result().generation_id
    ids = [w.result().member_id for w in waits]
    follower_syncs = [sync(h, m, gen, instance=i) for m, i in zip(ids[1:], instances[1:])]
    sync(h, ids[0], gen, {m: m.encode() for m in ids}, instance=instances[0])
    assert all(s.result().error_code == 0 for s in follower_syncs)
    return gen, ids


def test_static_members_join_without_member_id_required(tmp_path):
    h = harness(tmp_path)
    gen, ids = static_stable_group(h)
    assert ids == ["m0", "m1"] and gen == 1 and state(h) == "Stable"
    assert h.shard.groups[G].static_members == {"i-a": "m0", "i-b": "m1"}


def test_known_instance_restarting_takes_a_new_id_without_rebalance(tmp_path):
    h = harness(tmp_path)
    gen, ids = static_stable_group(h)
    before = len(records_of(h))
    resp = join(h, new_id="m1-new", instance="i-b").result()
    assert resp == JoinGroupResponse(0, gen, "consumer", "range", "m0", False, "m1-new", ())
    assert state(h) == "Stable"
    new = records_of(h)[before:]
    assert len(new) == 1 and [m.member_id for m in new[0].value.members] == ["m0", "m1-new"]
    assert [m.assignment for m in new[0].value.members] == [b"m0", b"m1"]  # assignment kept
    with pytest.raises(KafkaError) as e:
        heartbeat(h, "m1", gen, instance="i-b")
    assert e.value.error is Errors.FENCED_INSTANCE_ID
    assert sync(h, "m1-new", gen, instance="i-b").result().assignment == b"m1"
    # the replacement survives a restart
    h.reload()
    assert list(h.shard.groups[G].members) == ["m0", "m1-new"]


def test_static_leader_restarting_gets_the_members_and_skips_assignment(tmp_path):
    h = harness(tmp_path)
    gen, ids = static_stable_group(h)
    resp = join(h, new_id="m0-new", instance="i-a").result()
    assert resp.skip_assignment and resp.leader == "m0-new"
    assert {m.member_id for m in resp.members} == {"m0-new", "m1"}


def test_static_member_with_changed_protocols_triggers_a_rebalance(tmp_path):
    h = harness(tmp_path)
    static_stable_group(h, ("i-a",))
    join(h, new_id="m0-new", instance="i-a", protos=protocols("range", "roundrobin"))
    assert state(h) == "Stable"  # range still wins the vote: no rebalance needed
    resp = join(h, new_id="m0-newer", instance="i-a", protos=protocols("roundrobin", "range")).result()
    # the only member rejoined at once, so the rebalance went straight through the join phase
    assert (resp.generation_id, resp.protocol_name, state(h)) == (2, "roundrobin", "CompletingRebalance")


def test_old_static_member_waiting_in_join_is_fenced(tmp_path):
    h = harness(tmp_path)
    gen, ids = static_stable_group(h)
    old = join(h, "m0", instance="i-a")  # the leader rejoins: rebalance
    assert not old.done
    join(h, new_id="m0-new", instance="i-a")
    assert old.result() == JoinGroupResponse(Errors.FENCED_INSTANCE_ID.code, member_id="m0")


def test_leave_by_instance_id_removes_the_static_member(tmp_path):
    h = harness(tmp_path)
    static_stable_group(h)
    leave(h, ("", "i-b"))
    assert list(h.shard.groups[G].members) == ["m0"] and state(h) == "PreparingRebalance"
    with pytest.raises(KafkaError) as e:
        join(h, "m0", instance="i-zz")
    assert e.value.error is Errors.UNKNOWN_MEMBER_ID


def test_static_member_that_does_not_rejoin_stays_in_the_group(tmp_path):
    h = harness(tmp_path)
    gen, ids = static_stable_group(h)
    a = join(h, "m0", instance="i-a")
    for _ in range(6):  # m1 is alive but does not rejoin within the rebalance timeout
        h.advance(5000)
        if not a.done:
            heartbeat(h, "m1", gen, instance="i-b")
    assert a.result().generation_id == gen + 1
    assert list(h.shard.groups[G].members) == ["m0", "m1"]


# ---------------------------------------------------------------------- reload

def describe(h):
    return h.read(lambda s: s.describe_groups([G]))


def test_reload_keeps_stable_groups_and_members_must_heartbeat(tmp_path):
    from .helpers import stable_group
    h = harness(tmp_path)
    gen = stable_group(h, ("a", "b"))
    before = describe(h)
    h.advance(5000)
    h.reload()
    assert describe(h) == before and state(h) == "Stable"
    assert sync(h, "b", gen).result().assignment == b"b"
    for _ in range(3):
        h.advance(SESSION - 1)
        heartbeat(h, "a", gen)
    assert list(h.shard.groups[G].members) == ["a"] and state(h) == "PreparingRebalance"


def test_reload_of_an_empty_group_keeps_its_generation(tmp_path):
    from .helpers import stable_group
    h = harness(tmp_path)
    gen = stable_group(h, ("a",))
    leave(h, "a")
    h.reload()
    g = h.shard.groups[G]
    assert (str(g.state), g.generation_id, g.protocol_type) == ("Empty", gen + 1, "consumer")


def test_reload_during_a_rebalance_returns_to_the_last_durable_generation(tmp_path):
    from .helpers import stable_group
    h = harness(tmp_path)
    gen = stable_group(h, ("a", "b"))
    join(h, new_id="c")
    join(h, "c")
    h.reload()
    assert state(h) == "Stable" and h.shard.groups[G].generation_id == gen
    assert list(h.shard.groups[G].members) == ["a", "b"]


def test_failed_write_of_the_assignment_fails_every_member_and_the_group_rejoins(tmp_path):
    from .helpers import stable_group
    h = harness(tmp_path)
    gen = stable_group(h, ("a", "b"))
    join(h, new_id="c")
    waits = [join(h, m) for m in ("c", "a", "b")]
    new_gen = waits[1].result().generation_id
    b = sync(h, "b", new_gen)
    c = sync(h, "c", new_gen)
    h.io.fail_after_bytes = 0  # the disk is full
    a = sync(h, "a", new_gen, {"a": b"A2", "b": b"B2", "c": b"C2"})
    for w in (a, b, c):
        with pytest.raises(KafkaError) as e:
            w.result()
        assert e.value.error is Errors.NOT_COORDINATOR and e.value.retriable
    h.io.fail_after_bytes = None
    # the shard reloaded its durable state: the previous generation, old assignment
    g = h.shard.groups[G]
    assert (str(g.state), g.generation_id, g.assignment()) == ("Stable", gen, {"a": b"a", "b": b"b"})
    # members rejoin; the leader's rejoin starts the rebalance again
    with pytest.raises(KafkaError) as e:
        join(h, "c")
    assert e.value.error is Errors.UNKNOWN_MEMBER_ID
    join(h, "a")
    assert state(h) == "PreparingRebalance"


# ---------------------------------------------------------------------- the state table

S = ClassicGroupState


@pytest.mark.parametrize("frm", list(S))
@pytest.mark.parametrize("to", list(S))
def test_every_transition_follows_the_table(frm, to):
    g = ClassicGroup("x", frm, current_state_timestamp=5)
    if frm in VALID_PREVIOUS_STATES[to]:
        g._transition(to, 9)
        assert (g.state, g.previous_state, g.current_state_timestamp) == (to, frm, 9)
    else:
        with pytest.raises(IllegalGroupStateTransition):
            g._transition(to, 9)
        assert (g.state, g.previous_state, g.current_state_timestamp) == (frm, None, 5)


def test_table_is_kafkas():
    assert VALID_PREVIOUS_STATES == {
        S.EMPTY: {S.PREPARING_REBALANCE},
        S.PREPARING_REBALANCE: {S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY},
        S.COMPLETING_REBALANCE: {S.PREPARING_REBALANCE},
        S.STABLE: {S.COMPLETING_REBALANCE},
        S.DEAD: set(S),
    }


def test_select_protocol_and_supports_protocols():
    from runtime.group.classic_group import ClassicGroupMember
    g = ClassicGroup("x")
    assert g.supports_protocols("consumer", {"range"}) and not g.supports_protocols("", {"range"})
    for mid, names in (("a", ("b", "a")), ("b", ("a", "b", "c")), ("c", ("d", "b", "a"))):
        g.add(ClassicGroupMember(mid, None, "", "", 1, 1, "consumer", tuple((n, b"") for n in names)))
    g._transition(S.PREPARING_REBALANCE, 0)
    assert g.select_protocol() == "b"  # b gets two votes, a one
    assert g.supports_protocols("consumer", {"a"}) and not g.supports_protocols("consumer", {"c"})
    assert not g.supports_protocols("connect", {"a"})
    g.remove("a")
    assert g.leader_id == "b"


def test_group_over_a_lowered_max_size_rebalances_after_loading(tmp_path):
    from runtime.testing import ShardHarness
    from runtime.group.shard import GroupCoordinatorShard
    from .helpers import stable_group
    h = harness(tmp_path)
    stable_group(h, ("a", "b"))
    h.runtime.close()
    h2 = ShardHarness(str(tmp_path), GroupCoordinatorShard, config={"group.max.size": 1})
    assert str(h2.shard.groups[G].state) == "PreparingRebalance"
