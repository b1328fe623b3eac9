"""Share groups on real actors: the share consumer in implicit and explicit mode, RENEW,
RELEASE and REJECT, bad acknowledgements, a consumer that dies holding records, and the
SharePartition and share coordinator actors dying with records in flight."""
import pytest
import ray

from actors import AcknowledgeType, Errors, KafkaError, TopicPartition
from runtime.messages.share import (NO_ACQUISITION, AcknowledgeTopic, AcknowledgePartition, AcknowledgementBatch,
                                    ShareAcknowledgeRequest)
from tests.conftest import wait_until
from tests.helpers import poll_records, produce_values, record_states, share_partition

LOCK_MS = 2000
CLUSTER_CONFIG = {"share.auto.offset.reset": "earliest", "group.share.record.lock.duration.ms": LOCK_MS,
                  "group.share.delivery.count.limit": 4,
                  "group.share.heartbeat.interval.ms": 200, "group.share.min.heartbeat.interval.ms": 100,
                  "group.share.session.timeout.ms": 3000, "group.share.min.session.timeout.ms": 1000}
FAST = dict(fetch_max_wait_ms=200)


def test_implicit_mode_accepts_each_poll_at_the_next(cluster):
    cluster.create_topic("s-implicit", 1)
    produce_values(cluster, "s-implicit", [f"v{i}" for i in range(20)])
    with cluster.share_consumer("g-implicit", **FAST) as c:
        c.subscribe(["s-implicit"])
        records = poll_records(c, 20)
        assert [r.value for r in records] == [f"v{i}".encode() for i in range(20)]
        assert {r.delivery_count for r in records} == {1}
        assert c.acquisition_lock_timeout_ms() == LOCK_MS
        assert c.commit_sync() == {TopicPartition("s-implicit", 0): None}
        assert record_states(cluster, "g-implicit", "s-implicit")["start_offset"] == 20
        assert c.poll(0.3) == []


def test_deserializers_shape_what_poll_returns_and_those_records_are_acknowledged(cluster):
    cluster.create_topic("s-deserialized", 1)
    with cluster.producer(linger_ms=1) as producer:
        for i in range(5):
            producer.send("s-deserialized", f"v{i}".encode(), key=f"k{i}".encode())
        producer.flush()
    with cluster.share_consumer("g-deserialized", share_acknowledgement_mode="explicit",
                                key_deserializer=bytes.decode, value_deserializer=lambda b: b.decode().upper(),
                                **FAST) as c:
        c.subscribe("s-deserialized")
        records = poll_records(c, 5)
        assert [(r.key, r.value) for r in records] == [(f"k{i}", f"V{i}") for i in range(5)]
        for r in records:
            c.acknowledge(r)
        assert c.commit_sync() == {TopicPartition("s-deserialized", 0): None}
    assert record_states(cluster, "g-deserialized", "s-deserialized")["start_offset"] == 5


def test_explicit_mode_release_reject_renew(cluster):
    cluster.create_topic("s-explicit", 1)
    produce_values(cluster, "s-explicit", [f"v{i}" for i in range(6)])
    results = []
    with cluster.share_consumer("g-explicit", share_acknowledgement_mode="explicit", **FAST) as c:
        c.set_acknowledgement_commit_callback(lambda offsets, error: results.append((offsets, error)))
        c.subscribe("s-explicit")
        first = poll_records(c, 6)
        assert [(r.offset, r.delivery_count) for r in first] == [(i, 1) for i in range(6)]
        with pytest.raises(KafkaError) as e:
            c.poll(0)
        assert e.value.error is Errors.INVALID_RECORD_STATE
        c.acknowledge(first[0])
        c.acknowledge(first[1], AcknowledgeType.RELEASE)
        c.acknowledge(first[2], AcknowledgeType.REJECT)
        c.acknowledge(first[3], AcknowledgeType.RENEW)
        c.acknowledge_offset("s-explicit", 0, 4, AcknowledgeType.ACCEPT)
        c.acknowledge(first[5], AcknowledgeType.RELEASE)
        # The renewed record comes back at once, the released ones with a second delivery.
        again = poll_records(c, 1)
        assert (again[0].offset, again[0].delivery_count) == (3, 1)
        for r in again:
            c.acknowledge(r, AcknowledgeType.RELEASE if r.offset != 3 else AcknowledgeType.ACCEPT)
        redelivered = []
        while len(redelivered) < 2:
            for r in c.poll(0.2):
                redelivered.append((r.offset, r.delivery_count))
                c.acknowledge(r)
        assert sorted(redelivered)[:2] in ([(1, 2), (5, 2)], [(1, 3), (5, 3)], [(1, 2), (5, 3)], [(1, 3), (5, 2)])
        assert c.commit_sync() in ({TopicPartition("s-explicit", 0): None}, {})
    assert record_states(cluster, "g-explicit", "s-explicit")["start_offset"] == 6
    assert all(error is None for _, error in results)


def test_bad_acknowledgements_are_refused_and_change_nothing(cluster):
    cluster.create_topic("s-bad", 1)
    produce_values(cluster, "s-bad", ["a", "b", "c"])
    with cluster.share_consumer("g-bad", share_acknowledgement_mode="explicit", **FAST) as c:
        c.subscribe("s-bad")
        records = poll_records(c, 3)
        with pytest.raises(KafkaError) as e:
            c.acknowledge(records[0], 7)
        assert e.value.error is Errors.INVALID_REQUEST
        with pytest.raises(KafkaError):
            c.acknowledge(records[0], AcknowledgeType.GAP)
        c.acknowledge(records[0])
        with pytest.raises(KafkaError) as e:  # RENEW after ACCEPT
            c.acknowledge(records[0], AcknowledgeType.RENEW)
        assert e.value.error is Errors.INVALID_RECORD_STATE and "already acknowledged" in e.value.message
        before = record_states(cluster, "g-bad", "s-bad")
        # The broker's own checks: an offset never delivered, and records another member holds.
        c.acknowledge_offset("s-bad", 0, 50)
        assert c.commit_sync()[TopicPartition("s-bad", 0)].error is Errors.INVALID_REQUEST
        sp = share_partition(cluster, "g-bad", "s-bad")
        topic_id = cluster.describe_topic("s-bad").topic_id

        delivery = ray.get(sp.acquisitions.remote())[0]

        def acknowledge(member, first, last, ack_type, acquisition_id=delivery):
            request = ShareAcknowledgeRequest("g-bad", member, topics=(AcknowledgeTopic(topic_id, (
                AcknowledgePartition(0, (AcknowledgementBatch(first, last, (ack_type,), acquisition_id),)),)),))
            response = ray.get(sp.share_acknowledge.remote(request))
            if response.error_code:  # refused as a whole
                return Errors.for_code(response.error_code)
            (p,) = response.responses[0].partitions
            return Errors.for_code(p.error_code)
        # A member id the group does not have is refused before its acknowledgements are
        # looked at (a member of the group acknowledging records another holds gets
        # INVALID_RECORD_STATE: tests/share/test_share_partition.py).
        assert acknowledge("intruder", 1, 2, AcknowledgeType.ACCEPT) is Errors.UNKNOWN_MEMBER_ID
        # An acknowledgement must name the delivery it is for (the fetch's acquisition id).
        assert acknowledge(c.member_id, 0, 0, AcknowledgeType.ACCEPT, NO_ACQUISITION) is Errors.INVALID_RECORD_STATE
        assert acknowledge(c.member_id, 0, 0, AcknowledgeType.ACCEPT, delivery + 1) is Errors.INVALID_RECORD_STATE
        # The commit carried offset 0's accept with offset 50: all or nothing, so 0 is still held.
        assert acknowledge(c.member_id, 0, 0, AcknowledgeType.ACCEPT) is Errors.NONE
        assert acknowledge(c.member_id, 0, 0, AcknowledgeType.RENEW) is Errors.INVALID_RECORD_STATE
        assert acknowledge(c.member_id, 1, 2, 9) is Errors.INVALID_REQUEST
        after = record_states(cluster, "g-bad", "s-bad")
        assert (after[1], after[2]) == (before[1], before[2]) == (("ACQUIRED", 1, c.member_id),) * 2
        c.acknowledge(records[1])
        c.acknowledge(records[2])
        c.commit_sync()
    assert record_states(cluster, "g-bad", "s-bad")["start_offset"] == 3


def test_close_leaves_and_releases_what_the_member_holds(cluster):
    cluster.create_topic("s-close", 1)
    produce_values(cluster, "s-close", [f"v{i}" for i in range(4)])
    first = cluster.share_consumer("g-close", share_acknowledgement_mode="explicit", **FAST)
    first.subscribe("s-close")
    second = cluster.share_consumer("g-close", share_acknowledgement_mode="explicit", **FAST)
    second.subscribe("s-close")
    everything = {TopicPartition("s-close", 0)}
    # The simple assignor shares a partition when members outnumber partitions.
    wait_until(lambda: first.assignment() == everything and second.assignment() == everything,
               message="both members share the partition")
    held = poll_records(first, 4)
    first.acknowledge(held[0])
    first.close()  # sends the accept, leaves, and the rest is released with its delivery given back
    wait_until(lambda: second.assignment() == everything, message="the group settled")
    again = poll_records(second, 3)
    assert sorted((r.offset, r.delivery_count) for r in again) == [(1, 1), (2, 1), (3, 1)]
    for r in again:
        second.acknowledge(r)
    assert second.commit_sync() == {TopicPartition("s-close", 0): None}
    second.close()
    assert record_states(cluster, "g-close", "s-close")["start_offset"] == 4


def test_commit_async_reports_through_the_callback(cluster):
    cluster.create_topic("s-async", 1)
    produce_values(cluster, "s-async", ["a", "b"])
    outcomes = []
    with cluster.share_consumer("g-async", share_acknowledgement_mode="explicit", **FAST) as c:
        c.set_acknowledgement_commit_callback(lambda offsets, error: outcomes.append((offsets, error)))
        c.subscribe("s-async")
        records = poll_records(c, 2)
        c.acknowledge(records[0])
        c.acknowledge(records[1], AcknowledgeType.REJECT)
        c.commit_async()
        wait_until(lambda: c.poll(0.05) == [] and outcomes, message="the callback ran")
    assert outcomes == [({TopicPartition("s-async", 0): {0, 1}}, None)]


def test_read_committed_share_group_skips_aborted_records(cluster):
    cluster.create_topic("s-txn", 1)
    with cluster.producer(transactional_id="s-txn-producer", linger_ms=1) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        for v in ("x0", "x1", "x2"):
            producer.send("s-txn", v.encode())
        producer.abort_transaction()
        producer.begin_transaction()
        for v in ("c0", "c1"):
            producer.send("s-txn", v.encode())
        producer.commit_transaction()
    from runtime.messages.share_group import AlterGroupConfigRequest
    altered = ray.get(cluster.group_coordinator("g-txn").alter_group_config.remote(
        AlterGroupConfigRequest("g-txn", {"share.isolation.level": "read_committed"})))
    assert altered.error_code == 0
    with cluster.share_consumer("g-txn", **FAST) as c:
        c.subscribe("s-txn")
        records = poll_records(c, 2)
        assert [r.value for r in records] == [b"c0", b"c1"]
        c.commit_sync()
        # Aborted records, markers and gaps all end settled: the start offset is at the end.
        assert c.poll(0.2) == []
        assert record_states(cluster, "g-txn", "s-txn")["start_offset"] == 7


def test_a_waiting_read_committed_fetch_gets_a_transaction_once_it_commits(cluster):
    # The share fetch waits at the end of the log; the SharePartition's long poll on the
    # leader brings the records it then acquires, and under read_committed only once the
    # transaction is over (an aborted one never).
    cluster.create_topic("s-txn-wait", 1)
    from runtime.messages.share_group import AlterGroupConfigRequest
    altered = ray.get(cluster.group_coordinator("g-txn-wait").alter_group_config.remote(
        AlterGroupConfigRequest("g-txn-wait", {"share.isolation.level": "read_committed"})))
    assert altered.error_code == 0
    with cluster.share_consumer("g-txn-wait", fetch_max_wait_ms=1000) as c:
        c.subscribe("s-txn-wait")

        def loaded():
            assert c.poll(0.2) == []
            try:
                sp = share_partition(cluster, "g-txn-wait", "s-txn-wait")
            except ValueError:  # not created yet
                return False
            return ray.get(sp.status.remote())["state"] == "Active"
        wait_until(loaded, interval_s=0, message="the share partition loaded")
        with cluster.producer(transactional_id="s-txn-wait-producer", linger_ms=1) as producer:
            producer.init_transactions()
            producer.begin_transaction()
            producer.send("s-txn-wait", b"open")
            producer.flush()
            assert c.poll(0.5) == []
            producer.abort_transaction()
            assert c.poll(0.5) == []
            producer.begin_transaction()
            producer.send("s-txn-wait", b"committed")
            producer.flush()
            assert c.poll(0.5) == []
            producer.commit_transaction()
        assert [r.value for r in poll_records(c, 1)] == [b"committed"]


def test_share_coordinator_actor_answers_each_partition_of_a_batch(cluster):
    from runtime.messages.share_state import (
        InitializeShareGroupStateRequest, InitializeStateData, InitializeStatePartitionData,
        ReadShareGroupStateSummaryRequest, ReadStateSummaryData, ReadStateSummaryPartitionData,
        WriteShareGroupStateRequest, WriteStateData, WriteStatePartitionData)
    from runtime.share_state.records import PersisterStateBatch
    cluster.create_topic("s-coord", 1)
    coordinator = cluster.share_coordinator("g-coord", "s-coord", 0)  # the only state partition here
    init = InitializeShareGroupStateRequest("g-coord", (InitializeStateData("t1", (
        InitializeStatePartitionData(0, 3, 10), InitializeStatePartitionData(1, 3, -1))),))
    (result,) = ray.get(coordinator.initialize_share_group_state.remote(init)).results
    assert [p.error_code for p in result.partitions] == [0, 0]
    write = WriteShareGroupStateRequest("g-coord", (WriteStateData("t1", (
        WriteStatePartitionData(0, 3, 0, 10, 1, (PersisterStateBatch(10, 12, 2, 1),)),
        WriteStatePartitionData(2, 3, 0, 0, 0, ()),  # never initialised
        WriteStatePartitionData(1, 2, 0, 0, 0, ()))),))  # stale state epoch
    (result,) = ray.get(coordinator.write_share_group_state.remote(write)).results
    assert [Errors.for_code(p.error_code) for p in result.partitions] == [
        Errors.NONE, Errors.INVALID_REQUEST, Errors.FENCED_STATE_EPOCH]
    summary = ReadShareGroupStateSummaryRequest("g-coord", (ReadStateSummaryData("t1", (
        ReadStateSummaryPartitionData(0), ReadStateSummaryPartitionData(1))),))
    (result,) = ray.get(coordinator.read_share_group_state_summary.remote(summary)).results
    assert [(p.state_epoch, p.start_offset, p.delivery_complete_count) for p in result.partitions] == [
        (3, 10, 1), (3, -1, -1)]
