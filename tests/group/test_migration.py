"""Online migration between classic and consumer groups (KIP-848), as Kafka's
GroupMetadataManager does it: the upgrade of a live classic group when a member joins with
ConsumerGroupHeartbeat, members of the classic protocol inside a consumer group through
JoinGroup/SyncGroup/Heartbeat/LeaveGroup, the downgrade when the last member of the consumer
protocol leaves, group.consumer.migration.policy, the conversion records and their reload."""
from __future__ import annotations

import pytest

from runtime.coordinator import CoordinatorContext
from runtime.errors import Errors, KafkaError
from runtime.group import records as R
from runtime.group.consumer_group import ConsumerGroupMember
from runtime.group.consumer_protocol import decode_assignment, encode_assignment, encode_subscription
from runtime.group.modern import metadata_hash
from runtime.group.reconcile import MemberState
from runtime.group.shard import GroupCoordinatorShard
from runtime.messages.consumer import (
    ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatRequestTopicPartitions,
)
from runtime.messages.group import (
    HeartbeatRequest, JoinGroupRequest, JoinGroupRequestProtocol, JoinGroupResponse, LeaveGroupRequest,
    MemberIdentity, MemberResponse, OffsetCommitRequest, OffsetCommitRequestPartition, OffsetCommitRequestTopic,
    SyncGroupRequest,
)
from runtime.testing import ShardHarness
from runtime.timer import CoordinatorTimer

from .helpers import join, stable_group, sync

G = "g"
SESSION = 10_000
REBALANCE = 30_000
CONSUMER_SESSION = 45_000
CONFIG = {"group.initial.rebalance.delay.ms": 3000, "group.consumer.assignors": "range",
          "group.consumer.session.timeout.ms": CONSUMER_SESSION}
RIN = Errors.REBALANCE_IN_PROGRESS.code


def harness(tmp_path, **config):
    h = ShardHarness(str(tmp_path), GroupCoordinatorShard, config={**CONFIG, **config})
    h.call(lambda s, now: s.update_topics({"t": 4}, now))
    return h


def tps(**topics) -> tuple:
    return tuple((t, tuple(ps)) for t, ps in sorted(topics.items()))


def protos(owned: dict | None = None, names=("range",), topics=("t",)):
    metadata = encode_subscription(list(topics), None, tps(**(owned or {})))
    return tuple(JoinGroupRequestProtocol(n, metadata) for n in names)


def cjoin(h, member_id="", new_id="new", *, owned=None, names=("range",), instance=None, topics=("t",),
          session=SESSION):
    req = JoinGroupRequest(G, session, member_id, "consumer", protos(owned, names, topics), REBALANCE, instance)
    return h.call(lambda s, now: s.join_group(req, now, new_id, "client", "/127.0.0.1"))


def csync(h, member_id, generation, *, protocol_name="range", instance=None):
    req = SyncGroupRequest(G, generation, member_id, instance, "consumer", protocol_name, ())
    return h.call(lambda s, now: s.sync_group(req, now))


def cheartbeat(h, member_id, generation, instance=None):
    return h.call(lambda s, now: s.heartbeat(HeartbeatRequest(G, generation, member_id, instance), now))


def cleave(h, *identities):
    req = LeaveGroupRequest(G, tuple(MemberIdentity(*i) if isinstance(i, tuple) else MemberIdentity(i)
                                     for i in identities))
    return h.call(lambda s, now: s.leave_group(req, now))


def hb(h, member_id="", epoch=0, *, new_member_id="c", owns=None, instance=None):
    fields = {}
    if epoch == 0:
        fields = {"rebalance_timeout_ms": REBALANCE, "subscribed_topic_names": ("t",)}
        owns = owns or {}
    topic_partitions = None if owns is None else tuple(
        ConsumerGroupHeartbeatRequestTopicPartitions(t, tuple(sorted(ps))) for t, ps in sorted(owns.items()))
    request = ConsumerGroupHeartbeatRequest(G, member_id, epoch, instance_id=instance,
                                            topic_partitions=topic_partitions, **fields)
    return h.call(lambda s, now: s.consumer_group_heartbeat(request, now, new_member_id))


def written(h, operation):
    """Run a write; returns (its response or error, the records it wrote)."""
    start = h.end_offset
    try:
        response = h.call(operation)
    except KafkaError as e:
        response = e
    return response, [r for _, r in h.records(start)]


def group(h):
    return h.shard.groups[G]


def assigned(member) -> dict:
    return {t: set(ps) for t, ps in member.assigned_partitions.items()}


def classic_ab(h):
    """A Stable classic group: a owns t-0,1 and b t-2,3 (range). Returns the generation."""
    return stable_group(h, ("a", "b"), {"a": encode_assignment(tps(t=(0, 1))), "b": encode_assignment(tps(t=(2, 3)))})


def upgraded(h):
    """The classic group of classic_ab, upgraded by consumer member c. Returns the generation."""
    gen = classic_ab(h)
    hb(h)
    return gen


def all_owners(h) -> dict:
    return dict(group(h).partition_owner)


# ---------------------------------------------------------------------- the upgrade

def test_a_consumer_heartbeat_upgrades_a_live_classic_group(tmp_path):
    h = harness(tmp_path)
    gen = classic_ab(h)
    response, records = written(h, lambda s, now: s.consumer_group_heartbeat(ConsumerGroupHeartbeatRequest(
        G, "", 0, rebalance_timeout_ms=REBALANCE, subscribed_topic_names=("t",), topic_partitions=()), now, "c"))
    g = group(h)
    assert g.type == "consumer"
    a, b, c = g.members["a"], g.members["b"], g.members["c"]
    # the classic members keep their assignment at the generation as member epoch
    assert (a.member_epoch, assigned(a), a.state) == (gen, {"t": {0, 1}}, MemberState.STABLE)
    assert (b.member_epoch, assigned(b)) == (gen, {"t": {2, 3}})
    assert a.use_classic_protocol and a.classic_member_metadata.session_timeout_ms == SESSION
    assert [p.name for p in a.classic_member_metadata.supported_protocols] == ["range"]
    # c joins the next epoch; range gives it t-3, which b still owns
    assert g.group_epoch == gen + 1 and g.target_assignment["c"] == {"t": frozenset({3})}
    assert (response.member_epoch, c.state, assigned(c)) == (gen + 1, MemberState.UNRELEASED_PARTITIONS, {})
    # the records: the classic group's tombstone, the consumer group's, then c's join
    meta = R.ConsumerGroupClassicMemberMetadata(SESSION, (R.ConsumerGroupClassicProtocol(
        "range", encode_subscription(["t"])),))

    def classic(member_id, partitions):
        return ConsumerGroupMember(member_id, client_id="client", client_host="/127.0.0.1",
                                   subscribed_topic_names=frozenset({"t"}), rebalance_timeout_ms=REBALANCE,
                                   member_epoch=gen, previous_member_epoch=gen,
                                   assigned_partitions={"t": frozenset(partitions)}, classic_member_metadata=meta)

    ea, eb = classic("a", {0, 1}), classic("b", {2, 3})
    ec = ConsumerGroupMember("c", subscribed_topic_names=frozenset({"t"}), rebalance_timeout_ms=REBALANCE,
                             member_epoch=gen + 1, state=MemberState.UNRELEASED_PARTITIONS)
    topic_hash = metadata_hash(["t"], {"t": 4})
    assert (a, b, c) == (ea, eb, ec)
    assert records == [
        R.group_metadata_tombstone(G),
        R.consumer_group_member_subscription_record(G, ea), R.consumer_group_member_subscription_record(G, eb),
        R.consumer_group_epoch_record(G, gen, topic_hash),
        R.consumer_group_target_assignment_record(G, "a", {"t": {0, 1}}),
        R.consumer_group_target_assignment_record(G, "b", {"t": {2, 3}}),
        R.consumer_group_target_assignment_epoch_record(G, gen),
        R.consumer_group_current_assignment_record(G, ea), R.consumer_group_current_assignment_record(G, eb),
        R.consumer_group_member_subscription_record(G, ConsumerGroupMember(
            "c", subscribed_topic_names=frozenset({"t"}), rebalance_timeout_ms=REBALANCE)),
        R.consumer_group_epoch_record(G, gen + 1, topic_hash),
        R.consumer_group_target_assignment_record(G, "b", {"t": {2}}),
        R.consumer_group_target_assignment_record(G, "c", {"t": {3}}),
        R.consumer_group_target_assignment_epoch_record(G, gen + 1),
        R.consumer_group_current_assignment_record(G, ec)]
    assert_reload_same(h)


def test_the_upgrade_answers_pending_joins_with_rebalance_in_progress(tmp_path):
    h = harness(tmp_path)
    gen = classic_ab(h)
    rejoin = h.write(lambda s, now: s.join_group(JoinGroupRequest(G, SESSION, "a", "consumer", protos(),
                                                                  REBALANCE), now, "x"))
    assert not rejoin.done  # the classic group waits for b
    hb(h)
    assert rejoin.result() == JoinGroupResponse(error_code=RIN, member_id="a")
    assert group(h).members["a"].member_epoch == gen


def test_a_new_classic_group_in_its_first_rebalance_is_upgraded_too(tmp_path):
    """A departure from Kafka (README): its members have no protocol chosen yet, and Kafka
    fails the heartbeat with an internal error; here their first protocol's subscription
    counts, and the JoinGroup waiting in the classic group hears REBALANCE_IN_PROGRESS."""
    h = harness(tmp_path)
    waiting = h.write(lambda s, now: s.join_group(JoinGroupRequest(G, SESSION, "", "consumer", protos(), REBALANCE,
                                                                   "i"), now, "a"))
    assert str(group(h).state) == "PreparingRebalance" and group(h).protocol_name is None
    hb(h)
    assert waiting.result().error_code == RIN
    g = group(h)
    assert g.type == "consumer" and g.members["a"].subscribed_topic_names == {"t"}

@pytest.mark.parametrize("policy", ["disabled", "DOWNGRADE"])
def test_the_policy_can_forbid_the_upgrade(tmp_path, policy):
    h = harness(tmp_path, **{"group.consumer.migration.policy": policy})
    classic_ab(h)
    end = h.end_offset
    with pytest.raises(KafkaError) as e:
        hb(h)
    assert e.value.error is Errors.GROUP_ID_NOT_FOUND
    assert group(h).type == "classic" and h.end_offset == end


def test_only_a_joining_member_of_a_consumer_protocol_group_upgrades(tmp_path):
    h = harness(tmp_path)
    classic_ab(h)
    with pytest.raises(KafkaError) as e:
        hb(h, "c", 3)
    assert e.value.error is Errors.GROUP_ID_NOT_FOUND
    h2 = harness(tmp_path / "connect")
    connect = JoinGroupRequest("k", SESSION, "", "connect", (JoinGroupRequestProtocol("v1", b"x"),), REBALANCE,
                               "static")
    h2.write(lambda s, now: s.join_group(connect, now, "k1"))
    h2.advance(3000)
    assert str(h2.shard.groups["k"].state) == "CompletingRebalance"
    with pytest.raises(KafkaError) as e:
        h2.call(lambda s, now: s.consumer_group_heartbeat(ConsumerGroupHeartbeatRequest(
            "k", "", 0, rebalance_timeout_ms=1, subscribed_topic_names=("t",), topic_partitions=()), now, "c"))
    assert e.value.error is Errors.GROUP_ID_NOT_FOUND
    assert h2.shard.groups["k"].type == "classic"


def test_an_upgrade_that_does_not_fit_group_consumer_max_size_is_refused(tmp_path):
    h = harness(tmp_path, **{"group.consumer.max.size": 1})
    classic_ab(h)
    with pytest.raises(KafkaError) as e:
        hb(h)
    assert e.value.error is Errors.GROUP_ID_NOT_FOUND


def test_an_unknown_policy_is_refused(tmp_path):
    with pytest.raises(KafkaError) as e:
        GroupCoordinatorShard(CoordinatorContext("x", 0, CoordinatorTimer(),
                                                 {"group.consumer.migration.policy": "sideways"}))
    assert e.value.error is Errors.INVALID_CONFIG


def test_an_upgrade_of_members_that_hold_one_partition_twice_is_refused(tmp_path):
    """A departure from Kafka (README): GROUP_ID_NOT_FOUND, as for bytes that do not decode,
    where Kafka fails with an internal error."""
    h = harness(tmp_path)
    stable_group(h, ("a", "b"), {"a": encode_assignment(tps(t=(0, 1))), "b": encode_assignment(tps(t=(1, 2)))})
    end = h.end_offset
    with pytest.raises(KafkaError) as e:
        hb(h)
    assert e.value.error is Errors.GROUP_ID_NOT_FOUND
    assert group(h).type == "classic" and h.end_offset == end


def test_an_upgrade_that_would_lose_a_custom_assignors_user_data_is_refused(tmp_path):
    h = harness(tmp_path)
    stable_group(h, ("a",), {"a": encode_assignment(tps(t=(0, 1, 2, 3)), user_data=b"custom")})
    with pytest.raises(KafkaError) as e:
        hb(h)
    assert e.value.error is Errors.GROUP_ID_NOT_FOUND
    assert group(h).type == "classic"

def test_an_upgrade_of_members_whose_subscription_does_not_decode_is_refused(tmp_path):
    h = harness(tmp_path)
    bad = (JoinGroupRequestProtocol("range", b"\x00"),)
    join(h, new_id="a", protos=bad)
    joined = join(h, "a", protos=bad)
    h.advance(3000)
    sync(h, "a", joined.result().generation_id, {"a": b""})
    assert str(group(h).state) == "Stable"
    with pytest.raises(KafkaError) as e:
        hb(h)
    assert e.value.error is Errors.GROUP_ID_NOT_FOUND
    assert group(h).type == "classic"


# ---------------------------------------------------------------------- classic members in a consumer group

def test_classic_members_rejoin_and_revoke_before_the_consumer_member_gets_their_partitions(tmp_path):
    h = harness(tmp_path)
    gen = upgraded(h)
    assert cheartbeat(h, "a", gen).error_code == RIN  # the group epoch moved on
    # an eager member revoked everything before joining (it owns nothing)
    joined = cjoin(h, "a")
    assert joined == JoinGroupResponse(generation_id=gen + 1, protocol_type="consumer", protocol_name="range",
                                       member_id="a")
    synced = csync(h, "a", gen + 1)
    assert (synced.error_code, decode_assignment(synced.assignment).assigned_partitions) == (0, tps(t=(0, 1)))
    assert cheartbeat(h, "a", gen + 1).error_code == 0
    # a cooperative member still owns t-3, which moves to c: it keeps its epoch until it gives it up
    assert cheartbeat(h, "b", gen).error_code == RIN
    joined = cjoin(h, "b", owned={"t": (2, 3)})
    assert joined.generation_id == gen
    b = group(h).members["b"]
    assert (b.state, assigned(b), dict(b.partitions_pending_revocation)) == (
        MemberState.UNREVOKED_PARTITIONS, {"t": {2}}, {"t": frozenset({3})})
    synced = csync(h, "b", gen)  # not a rebalance in progress: b is revoking
    assert decode_assignment(synced.assignment).assigned_partitions == tps(t=(2,))
    assert hb(h, "c", gen + 1).assignment is None  # t-3 is still b's
    assert all_owners(h)[("t", 3)] == "b"
    assert cheartbeat(h, "b", gen).error_code == RIN  # revoke, then join again
    assert cjoin(h, "b", owned={"t": (2,)}).generation_id == gen + 1
    assert csync(h, "b", gen + 1).error_code == 0
    response = hb(h, "c", gen + 1)
    assert [(tp.topic_name, tp.partitions) for tp in response.assignment.topic_partitions] == [("t", (3,))]
    assert group(h).state.value == "Stable"
    assert all_owners(h) == {("t", 0): "a", ("t", 1): "a", ("t", 2): "b", ("t", 3): "c"}
    assert_reload_same(h)


def test_a_new_classic_member_joins_a_consumer_group(tmp_path):
    h = harness(tmp_path)
    hb(h, new_member_id="c")
    first = cjoin(h, new_id="d")
    assert (first.error_code, first.member_id) == (Errors.MEMBER_ID_REQUIRED.code, "d")
    assert "d" not in group(h).members
    joined = cjoin(h, "d")
    assert (joined.error_code, joined.generation_id) == (0, 2)
    d = group(h).members["d"]
    assert d.use_classic_protocol and group(h).target_assignment["d"] == {"t": frozenset({2, 3})}
    assert assigned(d) == {}  # c still owns t-2,3
    assert cheartbeat(h, "d", 2).error_code == 0  # it waits for them
    hb(h, "c", 1, owns={"t": {0, 1}})  # c revokes
    assert cheartbeat(h, "d", 2).error_code == RIN  # they are free: join again to get them
    cjoin(h, "d")
    assert decode_assignment(csync(h, "d", 2).assignment).assigned_partitions == tps(t=(2, 3))


def test_a_join_whose_protocols_the_classic_members_do_not_share_is_refused(tmp_path):
    h = harness(tmp_path)
    gen = upgraded(h)
    with pytest.raises(KafkaError) as e:
        cjoin(h, "e", names=("roundrobin",))
    assert e.value.error is Errors.INCONSISTENT_GROUP_PROTOCOL
    bad = JoinGroupRequest(G, SESSION, "e", "connect", protos(), REBALANCE)
    with pytest.raises(KafkaError) as e:
        h.call(lambda s, now: s.join_group(bad, now, "x"))
    assert e.value.error is Errors.INCONSISTENT_GROUP_PROTOCOL
    assert cjoin(h, "a", names=("roundrobin", "range")).generation_id == gen + 1
    assert cjoin(h, "e", names=("roundrobin", "range")).protocol_name == "roundrobin"


def test_classic_requests_are_checked_against_the_member(tmp_path):
    h = harness(tmp_path)
    gen = upgraded(h)

    def err(fn):
        with pytest.raises(KafkaError) as e:
            fn()
        return e.value.error

    assert err(lambda: cheartbeat(h, "a", gen + 5)) is Errors.ILLEGAL_GENERATION
    assert err(lambda: cheartbeat(h, "zz", gen)) is Errors.UNKNOWN_MEMBER_ID
    assert err(lambda: cheartbeat(h, "c", 1)) is Errors.UNKNOWN_MEMBER_ID  # c speaks the consumer protocol
    assert err(lambda: csync(h, "a", gen, protocol_name="roundrobin")) is Errors.INCONSISTENT_GROUP_PROTOCOL
    assert err(lambda: csync(h, "a", gen + 1)) is Errors.ILLEGAL_GENERATION
    assert csync(h, "a", gen).error_code == RIN  # the group epoch moved on since a joined


def test_a_classic_member_commits_with_its_generation(tmp_path):
    h = harness(tmp_path)
    gen = upgraded(h)

    def commit(generation):
        req = OffsetCommitRequest(G, (OffsetCommitRequestTopic("t", (OffsetCommitRequestPartition(0, 7),)),),
                                  generation, "a")
        return h.call(lambda s, now: s.offset_commit(req, now))

    with pytest.raises(KafkaError) as e:
        commit(gen + 1)
    assert e.value.error is Errors.ILLEGAL_GENERATION
    assert commit(gen).topics[0].partitions[0].error_code == 0


def test_classic_members_leave_a_consumer_group(tmp_path):
    h = harness(tmp_path)
    upgraded(h)
    epoch = group(h).group_epoch
    response, records = written(h, lambda s, now: s.leave_group(LeaveGroupRequest(
        G, (MemberIdentity("a"), MemberIdentity("zz"), MemberIdentity("a"))), now))
    assert response.members == (MemberResponse("a"), MemberResponse("zz", None, Errors.UNKNOWN_MEMBER_ID.code),
                                MemberResponse("a"))
    assert records == [R.consumer_group_current_assignment_tombstone(G, "a"),
                       R.consumer_group_target_assignment_tombstone(G, "a"),
                       R.consumer_group_member_subscription_tombstone(G, "a"),
                       R.consumer_group_epoch_record(G, epoch + 1, metadata_hash(["t"], {"t": 4}))]
    assert set(group(h).members) == {"b", "c"}


def test_a_leave_group_that_removes_the_last_consumer_protocol_member_downgrades(tmp_path):
    """As Kafka 4.x, LeaveGroup removes a member of either protocol (an admin's
    removeMembersFromConsumerGroup); with only members of the classic protocol left, the
    group goes back to a classic group."""
    h = harness(tmp_path)
    gen = upgraded(h)
    response = cleave(h, "c")
    assert response.members == (MemberResponse("c"),)
    g = group(h)
    assert (g.type, set(g.members), g.generation_id, str(g.state)) == ("classic", {"a", "b"}, gen + 1,
                                                                         "PreparingRebalance")


def test_a_classic_member_that_does_not_rejoin_in_time_is_fenced(tmp_path):
    h = harness(tmp_path)
    gen = upgraded(h)
    assert cheartbeat(h, "a", gen).error_code == RIN
    for _ in range(REBALANCE // (SESSION // 2) - 1):
        h.advance(SESSION // 2)
        assert cheartbeat(h, "a", gen).error_code == RIN  # asked again: the join deadline stays
    h.advance(SESSION // 2)
    assert "a" not in group(h).members


def test_a_classic_member_that_does_not_sync_in_time_is_fenced(tmp_path):
    h = harness(tmp_path)
    gen = upgraded(h)
    cjoin(h, "a")
    for _ in range(3):
        h.advance(SESSION // 2)
        cheartbeat(h, "a", gen + 1)
        hb(h, "c", gen + 1)
        cheartbeat(h, "b", gen)
    assert "a" in group(h).members
    h.advance(REBALANCE - 3 * (SESSION // 2))
    assert "a" not in group(h).members


def test_a_classic_member_has_its_own_session_timeout(tmp_path):
    h = harness(tmp_path)
    upgraded(h)
    h.advance(SESSION // 2)
    hb(h, "c", group(h).group_epoch)
    h.advance(SESSION // 2)  # neither a nor b heartbeat: their session is the JoinGroup's
    assert set(group(h).members) == {"c"}


def test_a_classic_member_that_rejoins_and_syncs_in_time_stays(tmp_path):
    h = harness(tmp_path)
    gen = stable_group(h, ("a",), {"a": encode_assignment(tps(t=(0, 1, 2, 3)))})
    hb(h)
    assert cheartbeat(h, "a", gen).error_code == RIN
    h.advance(SESSION // 2)
    cjoin(h, "a")
    h.advance(SESSION // 2)
    assert csync(h, "a", gen + 1).error_code == 0
    for _ in range(2 * REBALANCE // SESSION + 1):  # past the join and sync timeouts
        h.advance(SESSION // 2)
        assert cheartbeat(h, "a", gen + 1).error_code == 0
        hb(h, "c", gen + 1)
    assert set(group(h).members) == {"a", "c"}


def test_a_classic_static_member_back_under_a_new_id_replaces_itself(tmp_path):
    h = harness(tmp_path)
    gen = upgraded(h)
    cjoin(h, "", "s1", instance="i")
    epoch = group(h).group_epoch
    joined = cjoin(h, "", "s2", instance="i")
    g = group(h)
    assert g.type == "consumer" and "s1" not in g.members and g.static_members["i"] == "s2"
    assert joined.generation_id == epoch == g.group_epoch  # no rebalance for the same subscription
    with pytest.raises(KafkaError) as e:
        cheartbeat(h, "s1", epoch, instance="i")
    assert e.value.error is Errors.FENCED_INSTANCE_ID
    # an admin removes it by its instance id alone
    assert cleave(h, ("", "i")).members == (MemberResponse("", "i"),)
    assert "s2" not in group(h).members and gen < epoch


def test_the_upgrade_answers_pending_syncs_with_rebalance_in_progress(tmp_path):
    h = harness(tmp_path)
    gen = classic_ab(h)
    h.write(lambda s, now: s.join_group(JoinGroupRequest(G, SESSION, "a", "consumer", protos(), REBALANCE), now,
                                        "x"))
    h.write(lambda s, now: s.join_group(JoinGroupRequest(G, SESSION, "b", "consumer", protos(), REBALANCE), now,
                                        "x"))
    assert str(group(h).state) == "CompletingRebalance"
    waiting = h.write(lambda s, now: s.sync_group(SyncGroupRequest(G, gen + 1, "b", None, "consumer", "range", ()),
                                                  now))
    assert not waiting.done
    hb(h)
    assert waiting.result().error_code == RIN
    assert group(h).members["b"].member_epoch == gen + 1

def test_a_loaded_classic_member_keeps_its_own_session_timeout(tmp_path):
    h = harness(tmp_path)
    upgraded(h)
    h.reload()
    h.call(lambda s, now: s.update_topics({"t": 4}, now))
    assert group(h).members["a"].classic_member_metadata.session_timeout_ms == SESSION
    h.advance(SESSION // 2)
    hb(h, "c", group(h).group_epoch)
    h.advance(SESSION // 2)
    assert set(group(h).members) == {"c"}

def test_describe_tells_the_member_type(tmp_path):
    h = harness(tmp_path)
    upgraded(h)
    described = h.read(lambda s: s.consumer_group_describe([G]))[0]
    assert {m.member_id: m.member_type for m in described.members} == {"a": 0, "b": 0, "c": 1}


def test_a_consumer_static_member_replaces_a_classic_one_without_it_leaving(tmp_path):
    h = harness(tmp_path)
    gen = upgraded(h)
    cjoin(h, "", "s1", instance="i")
    assert group(h).static_members["i"] == "s1"
    response = hb(h, "", 0, new_member_id="s2", instance="i")
    assert response.member_id == "s2" and "s1" not in group(h).members
    s2 = group(h).members["s2"]
    assert not s2.use_classic_protocol and s2.member_epoch == gen + 2


# ---------------------------------------------------------------------- the downgrade

def test_the_last_consumer_member_leaving_downgrades_the_group(tmp_path):
    h = harness(tmp_path)
    gen = upgraded(h)
    # a and b reconcile to the new epoch (eager: they own nothing when they join)
    for m in ("a", "b"):
        cjoin(h, m)
        csync(h, m, gen + 1)
    hb(h, "c", gen + 1)
    epoch = group(h).group_epoch
    targets = dict(group(h).target_assignment)
    response, records = written(h, lambda s, now: s.consumer_group_heartbeat(
        ConsumerGroupHeartbeatRequest(G, "c", -1), now, "x"))
    assert response.member_epoch == -1
    g = group(h)
    assert g.type == "classic" and str(g.state) == "PreparingRebalance"
    assert (g.generation_id, g.protocol_type, g.protocol_name) == (epoch, "consumer", "range")
    assert {m: decode_assignment(g.members[m].assignment).assigned_partitions for m in g.members} == {
        "a": tps(t=sorted(targets["a"]["t"])), "b": tps(t=sorted(targets["b"]["t"]))}
    # the records: the consumer group's tombstones, then the classic group's record
    assert records[-1].key == R.GroupMetadataKey(G) and records[-1].value.generation == epoch
    assert all(r.value is None for r in records[:-1])
    assert {type(r.key).__name__ for r in records[:-1]} == {
        "ConsumerGroupCurrentMemberAssignmentKey", "ConsumerGroupTargetAssignmentMemberKey",
        "ConsumerGroupTargetAssignmentMetadataKey", "ConsumerGroupMemberMetadataKey", "ConsumerGroupMetadataKey"}
    # the members learn of the rebalance from their heartbeat and rejoin the classic way
    assert cheartbeat(h, "a", epoch).error_code == RIN
    ja = h.write(lambda s, now: s.join_group(JoinGroupRequest(G, SESSION, "a", "consumer", protos(), REBALANCE),
                                            now, "x"))
    jb = h.write(lambda s, now: s.join_group(JoinGroupRequest(G, SESSION, "b", "consumer", protos(), REBALANCE),
                                            now, "x"))
    assert ja.result().generation_id == epoch + 1 and jb.result().generation_id == epoch + 1
    loaded = h.reload()
    assert loaded.groups[G].type == "classic" and loaded.groups[G].generation_id == epoch


def test_the_downgraded_group_reloads_as_the_classic_record_says(tmp_path):
    h = harness(tmp_path)
    gen = upgraded(h)
    hb(h, "c", -1)
    loaded = h.reload()
    g = loaded.groups[G]
    assert (g.type, str(g.state), g.generation_id, set(g.members)) == ("classic", "Stable", gen + 1, {"a", "b"})


def test_a_consumer_member_whose_session_ends_downgrades_the_group(tmp_path):
    h = harness(tmp_path)
    gen = upgraded(h)
    for m in ("a", "b"):
        cjoin(h, m)
        csync(h, m, gen + 1)
    for _ in range(CONSUMER_SESSION // (SESSION // 2)):
        h.advance(SESSION // 2)
        for m in ("a", "b"):
            g = group(h)
            if g.type == "classic":
                break
            cheartbeat(h, m, g.members[m].member_epoch)
    assert group(h).type == "classic"


def test_the_policy_can_forbid_the_downgrade(tmp_path):
    h = harness(tmp_path, **{"group.consumer.migration.policy": "upgrade"})
    upgraded(h)
    hb(h, "c", -1)
    assert group(h).type == "consumer" and set(group(h).members) == {"a", "b"}


def test_no_downgrade_beyond_group_max_size(tmp_path):
    h = harness(tmp_path, **{"group.max.size": 2})
    upgraded(h)
    cjoin(h, "d")  # a third member of the classic protocol
    hb(h, "c", -1)
    assert group(h).type == "consumer"


def test_a_classic_static_member_replacing_the_last_consumer_member_downgrades(tmp_path):
    h = harness(tmp_path)
    gen = classic_ab(h)
    hb(h, new_member_id="s1", instance="i")
    target = group(h).target_assignment["s1"]
    joined = cjoin(h, "", "s2", instance="i")
    g = group(h)
    assert g.type == "classic" and set(g.members) == {"a", "b", "s2"} and str(g.state) == "Stable"
    assert g.static_member_id("i") == "s2" and joined.member_id == "s2"
    assert decode_assignment(g.members["s2"].assignment).assigned_partitions == tps(
        **{t: sorted(ps) for t, ps in target.items()})
    assert gen < g.generation_id == joined.generation_id
    synced = csync(h, "s2", joined.generation_id, instance="i")  # the group is Stable: no rebalance
    assert synced.assignment == g.members["s2"].assignment
    assert h.reload().groups[G].static_member_id("i") == "s2"


def test_a_classic_static_member_with_another_subscription_downgrades_and_rebalances(tmp_path):
    h = harness(tmp_path)
    gen = classic_ab(h)
    hb(h, new_member_id="s1", instance="i")
    epoch = group(h).group_epoch
    cjoin(h, "", "s2", instance="i", topics=("t", "u"))
    g = group(h)
    assert (g.type, set(g.members), str(g.state)) == ("classic", {"a", "b", "s2"}, "PreparingRebalance")
    assert g.generation_id == epoch > gen  # the consumer group's epoch before the new subscription


def test_a_group_left_with_only_classic_members_downgrades_when_the_policy_allows_it(tmp_path):
    h = harness(tmp_path, **{"group.consumer.migration.policy": "upgrade"})
    gen = upgraded(h)
    hb(h, "c", -1)
    assert group(h).type == "consumer" and group(h).num_classic_members == 2
    h.runtime.config["group.consumer.migration.policy"] = "bidirectional"  # a restart with the new policy
    h.reload()
    h.call(lambda s, now: s.update_topics({"t": 4}, now))
    cleave(h, "a")
    g = group(h)
    assert (g.type, set(g.members), g.generation_id) == ("classic", {"b"}, gen + 2)

def test_an_empty_consumer_group_gives_way_to_a_classic_group(tmp_path):
    h = harness(tmp_path)
    hb(h)
    hb(h, "c", -1)
    assert group(h).type == "consumer" and group(h).is_empty()
    start = h.end_offset
    joined = h.write(lambda s, now: s.join_group(
        JoinGroupRequest(G, SESSION, "", "consumer", protos(), REBALANCE, "i"), now, "k"))
    records = [r for _, r in h.records(start)]
    assert group(h).type == "classic" and set(group(h).members) == {"k"}
    assert records[-1].key == R.GroupMetadataKey(G)
    assert [type(r.key).__name__ for r in records[:-1]] == [
        "ConsumerGroupTargetAssignmentMetadataKey", "ConsumerGroupMetadataKey"]
    h.advance(3000)
    assert joined.result().generation_id == 1 and str(group(h).state) == "CompletingRebalance"
    assert h.reload().groups[G].type == "classic"


def test_the_replaced_empty_consumer_group_keeps_its_dynamic_configs(tmp_path):
    h = harness(tmp_path)
    hb(h)
    hb(h, "c", -1)
    h.call(lambda s, now: s.alter_group_config(G, {"consumer.session.timeout.ms": 50_000}, now))
    h.write(lambda s, now: s.join_group(JoinGroupRequest(G, SESSION, "", "consumer", protos(), REBALANCE, "i"),
                                        now, "k"))
    assert group(h).type == "classic"
    configs = {e.name: e.value for e in h.read(lambda s: s.describe_group_config(G))}
    assert configs["consumer.session.timeout.ms"] in (50_000, "50000")


# ---------------------------------------------------------------------- reload

def snapshot(shard) -> dict:
    g = shard.groups[G]
    return (g.type, g.group_epoch, g.assignment_epoch, g.metadata_hash, dict(g.members), dict(g.target_assignment),
            dict(g.partition_owner), dict(g.static_members), g.num_classic_members, dict(g.classic_protocol_counts))


def assert_reload_same(h):
    before = snapshot(h.shard)
    h.reload()
    h.call(lambda s, now: s.update_topics({"t": 4}, now))
    assert snapshot(h.shard) == before


