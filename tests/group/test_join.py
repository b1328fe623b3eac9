"""JoinGroup: validation, pending members, the initial delay, protocol selection, the join
phase and its completion (the leader gets the members' metadata)."""
from __future__ import annotations

import pytest

from runtime.errors import Errors, KafkaError
from runtime.group.records import group_metadata_record
from runtime.messages.group import JoinGroupResponse, JoinGroupResponseMember

from .helpers import G, REBALANCE, SESSION, harness, join, join_request, protocols, state, sub


def records_of(h):
    """Every record in the log, in order."""
    from runtime.codec import decode_records
    from runtime.log_read import read_batches
    out = []
    for batch in read_batches(h.runtime.log.directory, 0, h.runtime.log.end_offset):
        out.extend(decode_records(batch.payload, batch.base_offset))
    return out


def test_empty_group_id_and_bad_session_timeouts_are_refused(tmp_path):
    h = harness(tmp_path)
    with pytest.raises(KafkaError) as e:
        join(h, group="")
    assert e.value.error is Errors.INVALID_GROUP_ID
    for timeout in (5999, 1800001):
        with pytest.raises(KafkaError) as e:
            join(h, session=timeout)
        assert e.value.error is Errors.INVALID_SESSION_TIMEOUT
    assert h.shard.groups == {} and records_of(h) == []


def test_session_timeout_bounds_come_from_config(tmp_path):
    h = harness(tmp_path, **{"group.min.session.timeout.ms": 100})
    assert join(h, session=100).result().error_code == Errors.MEMBER_ID_REQUIRED.code


def test_unknown_member_gets_an_id_and_the_new_group_is_made_durable(tmp_path):
    h = harness(tmp_path, now_ms=0)
    h.clock.now_ms = 1000
    resp = join(h, new_id="c-1").result()
    assert resp == JoinGroupResponse(error_code=Errors.MEMBER_ID_REQUIRED.code, member_id="c-1")
    assert records_of(h) == [group_metadata_record(G, "", 0, None, None, 1000, ())]
    group = h.shard.groups[G]
    assert group.pending_join_members == {"c-1"} and state(h) == "Empty"


def test_known_member_of_missing_group_is_unknown(tmp_path):
    h = harness(tmp_path)
    with pytest.raises(KafkaError) as e:
        join(h, "ghost")
    assert e.value.error is Errors.UNKNOWN_MEMBER_ID


def test_first_generation_waits_for_the_initial_delay_and_stretches_it_for_newcomers(tmp_path):
    h = harness(tmp_path)
    join(h, new_id="a")
    a = join(h, "a")
    assert not a.done and state(h) == "PreparingRebalance"
    h.advance(2000)
    join(h, new_id="b")
    b = join(h, "b")
    h.advance(1000)  # 3000: the delay ends, but b arrived meanwhile: wait another delay
    assert not a.done and state(h) == "PreparingRebalance"
    h.advance(2999)
    assert not a.done
    h.advance(1)
    ra, rb = a.result(), b.result()
    meta = sub("t")
    assert ra == JoinGroupResponse(0, 1, "consumer", "range", "a", False, "a",
                                   (JoinGroupResponseMember("a", None, meta), JoinGroupResponseMember("b", None, meta)))
    assert rb == JoinGroupResponse(0, 1, "consumer", "range", "a", False, "b", ())
    assert state(h) == "CompletingRebalance"


def test_initial_delay_is_capped_by_the_rebalance_timeout(tmp_path):
    h = harness(tmp_path)
    join(h, new_id="a", rebalance=4000)
    a = join(h, "a", rebalance=4000)
    for i in range(5):
        h.advance(1000)
        join(h, new_id=f"n{i}", rebalance=4000)
        join(h, f"n{i}", rebalance=4000)
    # delay 3000 then at most 1000 more (rebalance timeout 4000)
    assert a.done and a.result().generation_id == 1


def test_protocol_is_chosen_by_vote_among_protocols_every_member_supports(tmp_path):
    h = harness(tmp_path)
    prefs = {"a": ("roundrobin", "range"), "b": ("range", "roundrobin"), "c": ("range", "sticky", "roundrobin")}
    pending = {}
    for m, names in prefs.items():
        join(h, new_id=m, protos=protocols(*names))
        pending[m] = join(h, m, protos=protocols(*names))
    h.advance(20_000)
    assert {p.result().protocol_name for p in pending.values()} == {"range"}


def test_member_without_a_common_protocol_or_with_another_type_is_inconsistent(tmp_path):
    h = harness(tmp_path)
    join(h, new_id="a")
    join(h, "a")
    for kw in ({"protos": protocols("sticky")}, {"protocol_type": "connect"}, {"protos": ()}):
        with pytest.raises(KafkaError) as e:
            join(h, new_id="x", **kw)
        assert e.value.error is Errors.INCONSISTENT_GROUP_PROTOCOL
    assert list(h.shard.groups[G].members) == ["a"] and h.shard.groups[G].pending_join_members == set()


def test_empty_protocols_cannot_create_a_group(tmp_path):
    h = harness(tmp_path)
    with pytest.raises(KafkaError) as e:
        join(h, protos=())
    assert e.value.error is Errors.INCONSISTENT_GROUP_PROTOCOL
    assert h.shard.groups == {}


def test_group_max_size(tmp_path):
    h = harness(tmp_path, **{"group.max.size": 2})
    for m in ("a", "b"):
        join(h, new_id=m)
        join(h, m)
    join(h, new_id="c")
    resp = join(h, "c").result()
    assert resp.error_code == Errors.GROUP_MAX_SIZE_REACHED.code
    assert list(h.shard.groups[G].members) == ["a", "b"]


def test_pending_member_expires_after_its_session_timeout(tmp_path):
    h = harness(tmp_path)
    join(h, new_id="p")
    h.advance(SESSION - 1)
    assert "p" in h.shard.groups[G].pending_join_members
    h.advance(1)
    assert h.shard.groups[G].pending_join_members == set()
    with pytest.raises(KafkaError) as e:
        join(h, "p")
    assert e.value.error is Errors.UNKNOWN_MEMBER_ID


def test_member_that_does_not_rejoin_is_removed_when_the_rebalance_times_out(tmp_path):
    from .helpers import heartbeat, stable_group
    h = harness(tmp_path)
    gen = stable_group(h, ("a", "b"))
    join(h, new_id="c")
    c = join(h, "c")
    assert state(h) == "PreparingRebalance"
    assert heartbeat(h, "a", gen).error_code == Errors.REBALANCE_IN_PROGRESS.code
    a = join(h, "a")
    for _ in range(REBALANCE // 5000 - 1):  # b stays alive but never rejoins
        h.advance(5000)
        assert heartbeat(h, "b", gen).error_code == Errors.REBALANCE_IN_PROGRESS.code
    h.advance(4999)
    assert not a.done
    h.advance(1)
    assert a.result().generation_id == gen + 1
    assert [m.member_id for m in a.result().members] == ["a", "c"]
    assert c.result().leader == "a"
    assert list(h.shard.groups[G].members) == ["a", "c"]


def test_member_whose_session_ends_during_the_rebalance_is_removed(tmp_path):
    from .helpers import stable_group
    h = harness(tmp_path)
    gen = stable_group(h, ("a", "b"))
    a = join(h, "a")
    h.advance(SESSION)  # b neither heartbeats nor rejoins
    assert a.result().generation_id == gen + 1 and a.result().members == (
        JoinGroupResponseMember("a", None, sub("t")),)


def test_join_phase_completes_as_soon_as_every_member_rejoined(tmp_path):
    from .helpers import stable_group
    h = harness(tmp_path)
    gen = stable_group(h, ("a", "b"))
    b = join(h, "b", protos=protocols("range", "roundrobin"))  # new metadata: rebalance
    assert not b.done and state(h) == "PreparingRebalance"
    a = join(h, "a")
    assert a.result().generation_id == b.result().generation_id == gen + 1
    assert state(h) == "CompletingRebalance"


def test_follower_rejoining_a_stable_group_unchanged_gets_the_current_generation(tmp_path):
    from .helpers import stable_group
    h = harness(tmp_path)
    gen = stable_group(h, ("a", "b"))
    resp = join(h, "b").result()
    assert resp == JoinGroupResponse(0, gen, "consumer", "range", "a", False, "b", ())
    assert state(h) == "Stable"


def test_leader_rejoining_a_stable_group_forces_a_rebalance(tmp_path):
    from .helpers import stable_group
    h = harness(tmp_path)
    stable_group(h, ("a", "b"))
    join(h, "a")
    assert state(h) == "PreparingRebalance"


def test_rejoin_with_same_metadata_while_completing_gets_the_same_answer(tmp_path):
    h = harness(tmp_path)
    join(h, new_id="a")
    first = join(h, "a")
    h.advance(3000)
    again = join(h, "a").result()
    assert again == first.result() and state(h) == "CompletingRebalance"


def test_join_to_a_group_of_another_type_is_inconsistent(tmp_path):
    h = harness(tmp_path)

    class Other:
        type = "share"
        state = "Stable"
    h.shard.groups[G] = Other()
    with pytest.raises(KafkaError) as e:
        join(h)
    assert e.value.error is Errors.INCONSISTENT_GROUP_PROTOCOL


def test_join_request_defaults_rebalance_timeout_to_session_timeout():
    from runtime.group.classic import _rebalance_timeout
    assert _rebalance_timeout(join_request(rebalance=-1)) == SESSION
