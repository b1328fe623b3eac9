"""The admin API (`cluster.admin()`) against real actors: groups listed and described with
their members and assignments, offsets with log end offsets and lag, resets refused while a
group is active and applied once it is empty, offsets and groups deleted, members removed,
share-group offsets, transactions, and the async variants."""
import asyncio

import pytest
import ray

from actors import AcknowledgeType, Errors, KafkaError, OffsetAndMetadata, TopicPartition, naming
from actors.clients.admin import ListedOffset, OffsetReset, SharePartitionOffset
from runtime.messages.group import (JoinGroupRequest, JoinGroupRequestProtocol, MemberIdentity, SyncGroupRequest,
                                    SyncGroupRequestAssignment)
from tests.conftest import wait_until

CLUSTER_CONFIG = {"group.min.session.timeout.ms": 200, "group.consumer.session.timeout.ms": 3000,
                  "group.consumer.heartbeat.interval.ms": 150, "group.initial.rebalance.delay.ms": 0,
                  "share.auto.offset.reset": "earliest"}
FAST = dict(session_timeout_ms=3000, heartbeat_interval_ms=150, fetch_max_wait_ms=200, auto_offset_reset="earliest",
            enable_auto_commit=False, max_poll_interval_ms=20000)
T = "orders"
TP = [TopicPartition(T, p) for p in range(3)]


@pytest.fixture(scope="module")
def cluster(cluster):
    """The module's cluster, with 10, 20 and 30 records in T's partitions."""
    cluster.create_topic(T, 3)
    with cluster.producer(linger_ms=1) as producer:
        for p, count in enumerate((10, 20, 30)):
            for i in range(count):
                producer.send(T, f"{p}-{i}".encode(), partition=p, timestamp_ms=1_000_000 + i * 1000)
        producer.flush()
    return cluster


@pytest.fixture(scope="module")
def admin(cluster):
    with cluster.admin() as a:
        yield a


def consume_and_commit(cluster, group, offsets):
    """A consumer that owns every partition and commits `offsets`; the caller closes it."""
    c = cluster.consumer(group, client_id=f"{group}-client", **FAST)
    c.subscribe([T])
    wait_until(lambda: c.poll(timeout_ms=50) is not None and c.assignment() == set(TP), message="assigned")
    c.commit({tp: OffsetAndMetadata(o) for tp, o in offsets.items()})
    return c


def test_a_classic_group_listed_described_and_its_offsets_with_lag(cluster, admin):
    c = consume_and_commit(cluster, "g-admin", {TP[0]: 4, TP[1]: 20})
    try:
        listing = [g for g in admin.list_groups() if g.group_id == "g-admin"]
        assert [(g.type, g.protocol_type, g.state) for g in listing] == [("classic", "consumer", "Stable")]
        assert [g.group_id for g in admin.list_groups(types=["classic"], states=["stable"])] == ["g-admin"]
        assert admin.list_groups(types=["share"]) == []
        (group,) = admin.describe_groups(["g-admin"]).values()
        assert (group.type, group.state, group.protocol_type, group.protocol) == ("classic", "Stable", "consumer",
                                                                                 "range")
        (member,) = group.members
        assert member.client_id == "g-admin-client" and member.host
        assert member.assignment == frozenset(TP)
        assert admin.list_group_offsets("g-admin") == {
            TP[0]: ListedOffset(4, 10, 6, ""), TP[1]: ListedOffset(20, 20, 0, "")}
        assert admin.list_group_offsets("g-admin", [TP[2]]) == {TP[2]: ListedOffset(-1, 30, -1, "")}

        # offsets of an active group are not the admin's to change
        for change in (lambda: admin.alter_group_offsets("g-admin", {TP[0]: 0}),
                       lambda: admin.reset_group_offsets("g-admin", OffsetReset(to_earliest=True))):
            with pytest.raises(KafkaError) as e:
                change()
            assert e.value.error is Errors.NON_EMPTY_GROUP and "Stable" in e.value.message
        assert admin.list_group_offsets("g-admin")[TP[0]].committed_offset == 4
        with pytest.raises(KafkaError) as e:
            admin.delete_groups(["g-admin"])
        assert e.value.error is Errors.NON_EMPTY_GROUP
    finally:
        c.close()
    wait_until(lambda: admin.describe_groups(["g-admin"])["g-admin"].state == "Empty", message="empty group")


def test_a_consumer_group_described_with_epochs_and_target_assignment(cluster, admin):
    c = cluster.consumer("g-848", client_id="kip848", group_protocol="consumer", fetch_max_wait_ms=200,
                         auto_offset_reset="earliest", enable_auto_commit=False, max_poll_interval_ms=20000)
    try:
        c.subscribe([T])
        wait_until(lambda: c.poll(timeout_ms=50) is not None and c.assignment() == set(TP), message="assigned")
        c.commit({TP[2]: OffsetAndMetadata(30)})
        (listing,) = [g for g in admin.list_groups(types=["consumer"]) if g.group_id == "g-848"]
        assert (listing.type, listing.protocol_type) == ("consumer", "consumer")
        group = admin.describe_groups(["g-848"])["g-848"]
        assert (group.type, group.state, group.protocol) == ("consumer", "Stable", "uniform")
        assert group.group_epoch >= 1
        (member,) = group.members
        assert (member.client_id, member.assignment, member.target_assignment) == ("kip848", frozenset(TP),
                                                                                   frozenset(TP))
        assert member.member_epoch == group.group_epoch
        assert admin.list_group_offsets("g-848") == {TP[2]: ListedOffset(30, 30, 0, "")}
        with pytest.raises(KafkaError) as e:
            admin.alter_group_offsets("g-848", {TP[2]: 0})
        assert e.value.error is Errors.NON_EMPTY_GROUP
    finally:
        c.close()


def test_resets_on_an_empty_group(cluster, admin):
    consume_and_commit(cluster, "g-reset", {TP[0]: 4, TP[1]: 20}).close()
    plan = admin.plan_offset_reset("g-reset", OffsetReset(to_earliest=True))
    assert plan == {TP[0]: 0, TP[1]: 0}
    assert admin.list_group_offsets("g-reset")[TP[0]].committed_offset == 4  # a plan changes nothing
    assert admin.plan_offset_reset("g-reset", OffsetReset(shift_by=-3)) == {TP[0]: 1, TP[1]: 17}
    assert admin.plan_offset_reset("g-reset", OffsetReset(shift_by=100)) == {TP[0]: 10, TP[1]: 20}  # clamped
    assert admin.plan_offset_reset("g-reset", OffsetReset(to_offset=15)) == {TP[0]: 10, TP[1]: 15}
    assert admin.plan_offset_reset("g-reset", OffsetReset(to_timestamp=1_000_000 + 7 * 1000), TP) == {
        TP[0]: 7, TP[1]: 7, TP[2]: 7}
    assert admin.plan_offset_reset("g-reset", OffsetReset(to_timestamp=9_000_000_000), [TP[2]]) == {TP[2]: 30}
    assert admin.reset_group_offsets("g-reset", OffsetReset(to_latest=True), TP) == {TP[0]: 10, TP[1]: 20, TP[2]: 30}
    assert {tp: o.lag for tp, o in admin.list_group_offsets("g-reset").items()} == {tp: 0 for tp in TP}
    admin.alter_group_offsets("g-reset", {TP[2]: OffsetAndMetadata(25, "by hand")})
    assert admin.list_group_offsets("g-reset")[TP[2]] == ListedOffset(25, 30, 5, "by hand")

    admin.delete_group_offsets("g-reset", [TP[0]])
    assert set(admin.list_group_offsets("g-reset")) == {TP[1], TP[2]}
    admin.delete_groups(["g-reset"])
    assert "g-reset" not in {g.group_id for g in admin.list_groups()}
    with pytest.raises(KafkaError) as e:
        admin.describe_groups(["g-reset"])
    assert e.value.error is Errors.GROUP_ID_NOT_FOUND
    with pytest.raises(KafkaError) as e:
        admin.delete_groups(["g-reset"])
    assert e.value.error is Errors.GROUP_ID_NOT_FOUND


def test_bad_input_is_refused_and_changes_nothing(cluster, admin):
    admin.alter_group_offsets("g-bad", {TP[0]: 3})  # an empty group's first commit creates it
    for bad, error in [
        (lambda: admin.alter_group_offsets("g-bad", {TopicPartition("nope", 0): 1}), Errors.UNKNOWN_TOPIC_OR_PARTITION),
        (lambda: admin.alter_group_offsets("g-bad", {TopicPartition(T, 7): 1}), Errors.UNKNOWN_TOPIC_OR_PARTITION),
        (lambda: admin.alter_group_offsets("g-bad", {TP[0]: -5}), Errors.INVALID_REQUEST),
        (lambda: admin.list_group_offsets("g-bad", [TopicPartition("nope", 0)]), Errors.UNKNOWN_TOPIC_OR_PARTITION),
        (lambda: OffsetReset(to_earliest=True, shift_by=2), Errors.INVALID_REQUEST),
        (lambda: OffsetReset(), Errors.INVALID_REQUEST),
        (lambda: admin.plan_offset_reset("g-none", OffsetReset(to_latest=True)), Errors.INVALID_REQUEST),
        (lambda: admin.describe_groups([""]), Errors.INVALID_GROUP_ID),
    ]:
        with pytest.raises(KafkaError) as e:
            bad()
        assert e.value.error is error
    assert admin.list_group_offsets("g-bad") == {TP[0]: ListedOffset(3, 10, 7, "")}


def test_remove_group_members(cluster, admin):
    coordinator = cluster.group_coordinator("g-members")
    protocol = (JoinGroupRequestProtocol("range", b""),)

    def join(member_id="", instance=None):
        return ray.get(coordinator.join_group.remote(JoinGroupRequest(
            "g-members", 30000, member_id, "consumer", protocol, 30000, instance), "raw", "10.0.0.1"))
    first = join()
    joined = join(first.member_id)
    assignments = (SyncGroupRequestAssignment(joined.member_id),)
    ray.get(coordinator.sync_group.remote(SyncGroupRequest("g-members", joined.generation_id, joined.member_id,
                                                           assignments=assignments)))
    (member,) = admin.describe_groups(["g-members"])["g-members"].members
    assert (member.client_id, member.host) == ("raw", "10.0.0.1")
    with pytest.raises(KafkaError) as e:
        admin.remove_group_members("g-members", [MemberIdentity("not-a-member")])
    assert e.value.error is Errors.UNKNOWN_MEMBER_ID
    admin.remove_group_members("g-members")
    group = admin.describe_groups(["g-members"])["g-members"]
    assert (group.state, group.members) == ("Empty", ())


def test_share_group_offsets(cluster, admin):
    cluster.create_topic("work", 1)
    with cluster.producer(linger_ms=1) as producer:
        for i in range(12):
            producer.send("work", f"w{i}".encode(), partition=0)
        producer.flush()
    assert admin.describe_share_group_offsets("g-share") == {}
    with cluster.share_consumer("g-share", share_acknowledgement_mode="explicit", fetch_max_wait_ms=200) as c:
        c.subscribe(["work"])
        got = []
        wait_until(lambda: got.extend(c.poll(0.2)) or len(got) >= 12, message="12 records")
        for r in got[:5]:
            c.acknowledge(r)
        for r in got[5:]:
            c.acknowledge(r, AcknowledgeType.RELEASE)
        c.commit_sync()
        wp = TopicPartition("work", 0)
        # KIP-1226: records completed beyond the persisted start offset do not count as lag
        # (Kafka persists the start offset that a write moves with the next write)
        (offset,) = admin.describe_share_group_offsets("g-share", ["work"]).values()
        assert offset.lag == 7 and 0 <= offset.start_offset <= 5
        group = admin.describe_groups(["g-share"])["g-share"]
        assert (group.type, group.protocol_type, len(group.members)) == ("share", "share", 1)
        (member,) = group.members
        assert member.member_epoch >= 1 and member.assignment == frozenset({wp})  # ShareGroupDescribe
        with pytest.raises(KafkaError) as e:
            admin.alter_share_group_offsets("g-share", {wp: 0})
        assert e.value.error is Errors.NON_EMPTY_GROUP

    def left():  # a member's leave is a heartbeat of its own, after close returns
        return not admin.describe_groups(["g-share"])["g-share"].members
    wait_until(left, message="the member left")
    sp = cluster.directory.get(naming.share_partition("g-share", "work", 0))
    pid = ray.get(sp.status.remote())["pid"]
    admin.alter_share_group_offsets("g-share", {wp: 10})
    assert admin.describe_share_group_offsets("g-share") == {wp: SharePartitionOffset(10, 2)}
    # the group coordinator had the SharePartition load the new state: it was not restarted
    status = ray.get(sp.status.remote())
    assert status["pid"] == pid and ray.get(sp.record_states.remote())["start_offset"] == 10
    with cluster.share_consumer("g-share", fetch_max_wait_ms=200) as c:  # starts at offset 10
        c.subscribe(["work"])
        got = []
        wait_until(lambda: got.extend(c.poll(0.2)) or len(got) >= 2, message="2 records")
        assert [r.offset for r in got] == [10, 11]
    wait_until(left, message="the member left")
    admin.delete_share_group_offsets("g-share", ["work"])
    assert admin.describe_share_group_offsets("g-share") == {}
    with cluster.share_consumer("g-share", fetch_max_wait_ms=200) as c:  # starts over: share.auto.offset.reset
        c.subscribe(["work"])
        got = []
        wait_until(lambda: got.extend(c.poll(0.2)) or len(got) >= 12, message="12 records")
        assert [r.offset for r in got] == list(range(12))


def test_dynamic_group_configs(cluster, admin):
    before = admin.describe_group_config("g-configs")
    assert before["share.record.lock.duration.ms"].is_default
    admin.alter_group_config("g-configs", {"share.record.lock.duration.ms": 15000,
                                           "share.auto.offset.reset": "latest"})
    after = admin.describe_group_config("g-configs")
    assert (after["share.record.lock.duration.ms"].value, after["share.record.lock.duration.ms"].is_default) == (
        15000, False)
    assert after["share.auto.offset.reset"].value == "latest"
    with pytest.raises(KafkaError) as e:
        admin.alter_group_config("g-configs", {"share.auto.offset.reset": "earliest", "no.such.config": 1})
    assert e.value.error is Errors.INVALID_CONFIG
    assert admin.describe_group_config("g-configs") == after  # nothing changed
    admin.alter_group_config("g-configs", {"share.record.lock.duration.ms": None})
    assert admin.describe_group_config("g-configs")["share.record.lock.duration.ms"] == \
        before["share.record.lock.duration.ms"]


def test_transactions(cluster, admin):
    with cluster.producer(transactional_id="tx-admin", linger_ms=1) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(T, b"in a transaction", partition=0)
        producer.flush()
        (listed,) = admin.list_transactions(transactional_id_pattern="^tx-admin$")
        assert (listed.transactional_id, listed.transaction_state) == ("tx-admin", "Ongoing")
        assert [s.transactional_id for s in admin.list_transactions(states=["Ongoing"])] == ["tx-admin"]
        state = admin.describe_transactions(["tx-admin"])["tx-admin"]
        assert (state.transaction_state, [(t.topic, t.partitions) for t in state.topics]) == ("Ongoing", [(T, (0,))])
        producer.commit_transaction()
    assert admin.describe_transactions(["tx-admin"])["tx-admin"].transaction_state == "CompleteCommit"
    assert admin.list_transactions(states=["Ongoing"]) == []
    with pytest.raises(KafkaError) as e:
        admin.describe_transactions(["tx-unknown"])
    assert e.value.error is Errors.TRANSACTIONAL_ID_NOT_FOUND


def test_async_variants(cluster, admin):
    async def run():
        await admin.alter_group_offsets_async("g-async", {TP[1]: 5})
        groups = await admin.list_groups_async(types=["classic"], states=["Empty"])
        described = await admin.describe_groups_async(["g-async"])
        return groups, described, await admin.list_group_offsets_async("g-async")
    groups, described, offsets = asyncio.run(run())
    assert "g-async" in {g.group_id for g in groups}
    assert (described["g-async"].state, described["g-async"].members) == ("Empty", ())
    assert offsets == {TP[1]: ListedOffset(5, 20, 15, "")}
