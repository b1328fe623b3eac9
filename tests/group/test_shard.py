"""The router: record dispatch, type conflicts, whole-request errors, loading, and that a
reload rebuilds every group and offset exactly."""
from __future__ import annotations

import pytest

from runtime.codec import Record
from runtime.errors import Errors, KafkaError
from runtime.group.consumer_protocol import (
    decode_assignment, decode_subscription, encode_assignment, encode_subscription,
)
from runtime.group.registry import find_group
from runtime.messages.group import (
    HeartbeatRequest, HeartbeatResponse, JoinGroupResponse, OffsetCommitRequest, OffsetCommitRequestPartition,
    OffsetCommitRequestTopic, OffsetCommitResponse, OffsetCommitResponsePartition, OffsetCommitResponseTopic,
    SyncGroupRequest, SyncGroupResponse, error_response,
)
from tests.runtime.kv_shard import KvKey, KvValue

from .helpers import G, commit, harness, join, leave, stable_group


def snapshot(shard) -> dict:
    """Everything a reload must give back: durable group fields and offsets."""
    groups = {}
    for gid, g in shard.groups.items():
        groups[gid] = (g.type, str(g.state), g.generation_id, g.protocol_type, g.protocol_name, g.leader_id,
                       g.current_state_timestamp, g.subscribed_topics,
                       [(m.member_id, m.group_instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                         m.session_timeout_ms, dict(m.protocols).get(g.protocol_name), m.assignment)
                        for m in g.members.values()])
    return {"groups": groups, "offsets": shard.offsets.offsets}


def test_reload_rebuilds_groups_and_offsets_exactly(tmp_path):
    h = harness(tmp_path)
    gen = stable_group(h, ("a", "b"))
    commit(h, {("t", 0): 1, ("t", 1): 2}, member_id="a", generation=gen, metadata="meta")
    commit(h, {("x", 3): 30}, group="simple")
    stable_group_other = "other"
    join(h, new_id="z", group=stable_group_other)
    z = join(h, "z", group=stable_group_other)
    h.advance(3000)
    from .helpers import sync
    sync(h, "z", z.result().generation_id, {"z": b"Z"}, group=stable_group_other)
    leave(h, "z", group=stable_group_other)  # an Empty group at generation 2
    before = snapshot(h.shard)
    h.reload()
    assert snapshot(h.shard) == before


def test_unknown_record_keys_are_rejected(tmp_path):
    h = harness(tmp_path)
    with pytest.raises(ValueError):
        h.shard.replay(0, Record(KvKey("k"), KvValue(1)))


def test_groups_of_another_type_are_reported_with_the_callers_error():
    class Share:
        type = "share"
    groups = {"s": Share()}
    assert find_group(groups, "none", "classic") is None
    with pytest.raises(KafkaError) as e:
        find_group(groups, "s", "classic", Errors.UNKNOWN_MEMBER_ID)
    assert e.value.error is Errors.UNKNOWN_MEMBER_ID
    with pytest.raises(KafkaError) as e:
        find_group(groups, "s", "consumer")
    assert e.value.error is Errors.GROUP_ID_NOT_FOUND


def test_error_responses():
    assert error_response(SyncGroupRequest(G, 1, "m"), Errors.COORDINATOR_LOAD_IN_PROGRESS) == \
        SyncGroupResponse(Errors.REBALANCE_IN_PROGRESS.code)
    assert error_response(HeartbeatRequest(G, 1, "m"), Errors.COORDINATOR_LOAD_IN_PROGRESS) == HeartbeatResponse()
    assert error_response(HeartbeatRequest(G, 1, "m"), Errors.NOT_COORDINATOR) == \
        HeartbeatResponse(Errors.NOT_COORDINATOR.code)
    from .helpers import join_request
    assert error_response(join_request("m"), Errors.INVALID_SESSION_TIMEOUT) == \
        JoinGroupResponse(Errors.INVALID_SESSION_TIMEOUT.code, member_id="m")
    req = OffsetCommitRequest(G, (OffsetCommitRequestTopic("t", (OffsetCommitRequestPartition(0, 1),
                                                                 OffsetCommitRequestPartition(1, 1))),))
    code = Errors.ILLEGAL_GENERATION.code
    assert error_response(req, Errors.ILLEGAL_GENERATION) == OffsetCommitResponse((OffsetCommitResponseTopic(
        "t", (OffsetCommitResponsePartition(0, code), OffsetCommitResponsePartition(1, code))),))


def test_a_loading_coordinator_answers_load_in_progress(tmp_path):
    h = harness(tmp_path)
    stable_group(h, ("a",))
    h.runtime.close()
    from runtime.coordinator import CoordinatorRuntime
    rt = CoordinatorRuntime(h.runtime.name, 0, h.runtime._shard_factory, h.runtime._open_log, h.runtime.config)
    loading = rt.load(h.clock(), progress_every=1)
    next(loading)
    with pytest.raises(KafkaError) as e:
        rt.write(lambda s, now: s.heartbeat(HeartbeatRequest(G, 1, "a"), now), h.clock())
    assert e.value.error is Errors.COORDINATOR_LOAD_IN_PROGRESS
    for _ in loading:
        pass
    assert rt.write(lambda s, now: s.heartbeat(HeartbeatRequest(G, 1, "a"), now), h.clock()).response == \
        HeartbeatResponse()


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_consumer_protocol_bytes_are_kafkas():
    from kafka.protocol.old.consumer_protocol import (
        ConsumerProtocolMemberAssignment_v0, ConsumerProtocolMemberMetadata_v0,
    )
    theirs = ConsumerProtocolMemberMetadata_v0(0, ["a", "b"], b"ud").encode()
    assert encode_subscription(["a", "b"], b"ud", version=0) == theirs
    assert decode_subscription(theirs).topics == ("a", "b")
    sub = decode_subscription(encode_subscription(["t"], None, [("t", [0, 2])], 7, "rack-1"))
    assert sub == (("t",), None, (("t", (0, 2)),), 7, "rack-1")
    theirs = ConsumerProtocolMemberAssignment_v0(0, [("t", [0, 1])], b"").encode()
    assert encode_assignment([("t", [0, 1])], b"", version=0) == theirs
    assert decode_assignment(theirs).assigned_partitions == (("t", (0, 1)),)
    assert decode_assignment(b"").assigned_partitions == ()
    with pytest.raises(ValueError):
        decode_subscription(b"\x00")
