"""SyncGroup, Heartbeat and LeaveGroup: every answer per state, the leader's assignment
made durable before anyone hears of it, session expiry, pending sync expiry."""
from __future__ import annotations

import pytest

from runtime.errors import Errors, KafkaError
from runtime.group.records import GroupMetadataMember, group_metadata_record
from runtime.messages.group import HeartbeatResponse, LeaveGroupResponse, MemberResponse, SyncGroupResponse

from .helpers import G, REBALANCE, SESSION, harness, heartbeat, join, leave, stable_group, state, sub, sync
from .test_join import records_of


def completing_group(h, members=("a", "b")):
    waits = []
    for m in members:
        join(h, new_id=m)
        waits.append(join(h, m))
    h.advance(3000 * len(members))
    return waits[0].result().generation_id


def test_leader_assignment_is_written_then_every_member_gets_its_own(tmp_path):
    h = harness(tmp_path)
    gen = completing_group(h, ("a", "b", "c"))
    b = sync(h, "b", gen)
    assert not b.done
    before = len(records_of(h))
    a = sync(h, "a", gen, {"a": b"A", "b": b"B"})  # c is left out
    ok = dict(protocol_type="consumer", protocol_name="range")
    assert a.result() == SyncGroupResponse(0, assignment=b"A", **ok)
    assert b.result() == SyncGroupResponse(0, assignment=b"B", **ok)
    ts = h.shard.groups[G].current_state_timestamp
    assert records_of(h)[before:] == [group_metadata_record(G, "consumer", gen, "range", "a", ts, tuple(
        GroupMetadataMember(m, None, "client", "/127.0.0.1", REBALANCE, SESSION, sub("t"), x)
        for m, x in (("a", b"A"), ("b", b"B"), ("c", b""))))]
    assert state(h) == "Stable"
    # c syncs late and gets the empty assignment from the Stable group
    assert sync(h, "c", gen).result() == SyncGroupResponse(0, assignment=b"", **ok)


def test_sync_errors(tmp_path):
    h = harness(tmp_path)
    gen = completing_group(h)

    def err(**kw):
        member = kw.pop("member", "b")
        generation = kw.pop("generation", gen)
        with pytest.raises(KafkaError) as e:
            sync(h, member, generation, **kw).result()
        return e.value.error

    assert err(group="") is Errors.INVALID_GROUP_ID
    assert err(group="nope") is Errors.UNKNOWN_MEMBER_ID
    assert err(member="zz") is Errors.UNKNOWN_MEMBER_ID
    assert err(generation=gen + 1) is Errors.ILLEGAL_GENERATION
    assert err(protocol_type="connect") is Errors.INCONSISTENT_GROUP_PROTOCOL
    assert err(protocol_name="sticky") is Errors.INCONSISTENT_GROUP_PROTOCOL
    assert err(instance="i-1") is Errors.UNKNOWN_MEMBER_ID
    join(h, new_id="c")
    join(h, "c")  # a newcomer starts a rebalance
    assert err() is Errors.REBALANCE_IN_PROGRESS
    assert state(h) == "PreparingRebalance"


def test_a_new_rebalance_sends_members_waiting_for_sync_back_to_join(tmp_path):
    h = harness(tmp_path)
    gen = completing_group(h)
    b = sync(h, "b", gen)
    join(h, new_id="c")
    join(h, "c")
    assert b.result() == SyncGroupResponse(Errors.REBALANCE_IN_PROGRESS.code)


def test_heartbeat_answers_per_state(tmp_path):
    h = harness(tmp_path)
    join(h, new_id="a")
    join(h, "a")
    assert heartbeat(h, "a", 0) == HeartbeatResponse(Errors.REBALANCE_IN_PROGRESS.code)  # first join phase
    h.advance(3000)
    assert heartbeat(h, "a", 1) == HeartbeatResponse()  # CompletingRebalance
    sync(h, "a", 1, {"a": b"x"})
    assert heartbeat(h, "a", 1) == HeartbeatResponse()  # Stable
    join(h, new_id="b")
    join(h, "b")
    assert heartbeat(h, "a", 1) == HeartbeatResponse(Errors.REBALANCE_IN_PROGRESS.code)
    for member, gen, instance, error in (("zz", 1, None, Errors.UNKNOWN_MEMBER_ID),
                                         ("a", 7, None, Errors.ILLEGAL_GENERATION),
                                         ("a", 1, "i", Errors.UNKNOWN_MEMBER_ID)):
        with pytest.raises(KafkaError) as e:
            heartbeat(h, member, gen, instance=instance)
        assert e.value.error is error
    with pytest.raises(KafkaError) as e:
        heartbeat(h, "a", 1, group="")
    assert e.value.error is Errors.INVALID_GROUP_ID
    with pytest.raises(KafkaError) as e:
        heartbeat(h, "a", 1, group="other")
    assert e.value.error is Errors.UNKNOWN_MEMBER_ID


def test_session_expiry_removes_the_member_and_rebalances(tmp_path):
    h = harness(tmp_path)
    gen = stable_group(h, ("a", "b"))
    for _ in range(3):
        h.advance(SESSION - 1000)
        heartbeat(h, "a", gen)
    assert state(h) == "PreparingRebalance"  # b stopped heartbeating
    assert list(h.shard.groups[G].members) == ["a"]
    a = join(h, "a")
    assert a.result().generation_id == gen + 1 and a.result().leader == "a"


def test_offset_commit_keeps_the_session_alive(tmp_path):
    from .helpers import commit
    h = harness(tmp_path)
    gen = stable_group(h, ("a",))
    for _ in range(3):
        h.advance(SESSION - 1)
        commit(h, {("t", 0): 1}, member_id="a", generation=gen)
    assert state(h) == "Stable"


def test_member_that_does_not_sync_in_time_is_removed(tmp_path):
    h = harness(tmp_path)
    gen = completing_group(h)
    heartbeat(h, "b", gen)
    sync(h, "a", gen, {"a": b"A", "b": b"B"})
    # b received its join response but never syncs; the group is Stable meanwhile
    assert state(h) == "Stable"
    for _ in range(REBALANCE // 5000 - 1):  # both stay alive
        h.advance(5000)
        heartbeat(h, "a", gen)
        heartbeat(h, "b", gen)
    h.advance(4999)
    assert "b" in h.shard.groups[G].members
    h.advance(1)  # the rebalance timeout since the join phase ended
    assert list(h.shard.groups[G].members) == ["a"]
    assert state(h) == "PreparingRebalance"


def test_leave_by_member_id_and_by_instance_id(tmp_path):
    h = harness(tmp_path)
    gen = stable_group(h, ("a", "b"))
    resp = leave(h, "b", "zz", ("", "i-9"))
    assert resp == LeaveGroupResponse(members=(
        MemberResponse("b"), MemberResponse("zz", None, Errors.UNKNOWN_MEMBER_ID.code),
        MemberResponse("", "i-9", Errors.UNKNOWN_MEMBER_ID.code)))
    assert state(h) == "PreparingRebalance"
    a = join(h, "a")
    assert a.result().generation_id == gen + 1
    assert leave(h, "a") == LeaveGroupResponse(members=(MemberResponse("a"),))
    assert state(h) == "Empty" and h.shard.groups[G].generation_id == gen + 2


def test_last_member_leaving_a_stable_group_empties_it(tmp_path):
    h = harness(tmp_path)
    gen = stable_group(h, ("a",))
    before = len(records_of(h))
    leave(h, "a")
    assert state(h) == "Empty"
    ts = h.shard.groups[G].current_state_timestamp
    assert records_of(h)[before:] == [group_metadata_record(G, "consumer", gen + 1, None, None, ts, ())]


def test_leave_group_unknown_group_and_pending_member(tmp_path):
    h = harness(tmp_path)
    assert leave(h, "x", group="none") == LeaveGroupResponse(members=(
        MemberResponse("x", None, Errors.UNKNOWN_MEMBER_ID.code),))
    join(h, new_id="p")
    assert leave(h, "p") == LeaveGroupResponse(members=(MemberResponse("p"),))
    assert h.shard.groups[G].pending_join_members == set()


def test_leaving_member_waiting_in_join_is_answered(tmp_path):
    h = harness(tmp_path)
    join(h, new_id="a")
    a = join(h, "a")
    leave(h, "a")
    assert a.result().error_code == Errors.UNKNOWN_MEMBER_ID.code
    h.advance(3000)
    assert state(h) == "Empty" and h.shard.groups[G].generation_id == 1


def test_no_member_hears_of_the_assignment_before_it_is_durable(tmp_path):
    h = harness(tmp_path)
    gen = completing_group(h)
    h.auto_flush = False
    b = sync(h, "b", gen)
    a = sync(h, "a", gen, {"a": b"A", "b": b"B"})
    assert not a.done and not b.done and h.runtime.pending_records == 1
    h.runtime.flush(h.clock())
    assert a.result().assignment == b"A" and b.result().assignment == b"B"
