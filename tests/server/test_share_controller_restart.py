"""In Cluster.local the controller owns the SharePartition actors it creates (on the first
ShareFetch), so when Ray restarts the controller they end with its old process. As after a
leader change in Kafka, what they held goes back to the group (acquisitions are not
persisted) and what was acknowledged stays, since every acknowledgement is written to the
share coordinator before it is answered. The next ShareFetch has the restarted controller
make the SharePartition again, and it loads that state."""
import ray

from actors import AcknowledgeType, TopicPartition, naming
from runtime.errors import Errors
from tests.conftest import wait_until
from tests.helpers import poll_records, produce, share_partition_status

# A lock that outlasts the test: a stale acknowledgement is judged by the SharePartition,
# not refused by the consumer for a lock it counts as run out.
LOCK_MS = 120000
CLUSTER_CONFIG = {"share.auto.offset.reset": "earliest", "group.share.record.lock.duration.ms": LOCK_MS,
                  "group.share.heartbeat.interval.ms": 200, "group.share.min.heartbeat.interval.ms": 100}
FAST = dict(fetch_max_wait_ms=100)
GROUP, TOPIC = "g-controller", "controller-restart"
TP = TopicPartition(TOPIC, 0)


def record_states(cluster) -> dict:
    sp = ray.get_actor(naming.share_partition(GROUP, TOPIC, 0), namespace=cluster.namespace)
    return ray.get(sp.record_states.remote(), timeout=30)


def members(admin) -> set:
    return {m.member_id for m in admin.describe_groups([GROUP])[GROUP].members}


def test_a_controller_restart_gives_held_records_back_and_keeps_acknowledged_ones(cluster):
    cluster.create_topic(TOPIC, 1)
    produce(cluster, TOPIC, 10)
    admin = cluster.admin()
    holder = cluster.share_consumer(GROUP, share_acknowledgement_mode="explicit", **FAST)
    other = None
    settled: dict[int, list] = {o: [] for o in range(10)}  # offset -> (who, ack type) acknowledged successfully

    def commit(consumer, name, acks):
        for r, ack_type in acks.items():
            consumer.acknowledge(r, ack_type)
        error = consumer.commit_sync()[TP]
        if error is None:
            for r, ack_type in acks.items():
                settled[r.offset].append((name, ack_type))
        return error

    try:
        holder.subscribe(TOPIC)
        first = {r.offset: r for r in poll_records(holder, 10)}
        assert sorted((o, r.delivery_count) for o, r in first.items()) == [(o, 1) for o in range(10)]
        # 3-5 accepted and 6 rejected, durably; 0-2 and 7-9 held (acquired, not acknowledged).
        acked = {first[3]: AcknowledgeType.ACCEPT, first[4]: AcknowledgeType.ACCEPT,
                 first[5]: AcknowledgeType.ACCEPT, first[6]: AcknowledgeType.REJECT}
        assert commit(holder, "holder", acked) is None
        held = [first[o] for o in (0, 1, 2, 7, 8, 9)]
        before = record_states(cluster)
        assert {o: before[o][0] for o in range(10)} == {
            **{o: "ACQUIRED" for o in (0, 1, 2, 7, 8, 9)}, 3: "ACKNOWLEDGED", 4: "ACKNOWLEDGED",
            5: "ACKNOWLEDGED", 6: "ARCHIVED"}
        assert before["start_offset"] == 0
        old = share_partition_status(cluster, GROUP, TOPIC)
        assert old is not None and old["state"] == "Active"
        joins = holder._call("state")["joins"]

        controller = ray.get_actor(naming.CONTROLLER, namespace=cluster.namespace)
        ray.kill(controller, no_restart=False)  # Ray restarts it; its SharePartitions end with it
        wait_until(lambda: share_partition_status(cluster, GROUP, TOPIC) is None, timeout_s=60,
                   message="the controller's SharePartition ended")
        cluster.directory.call(naming.CONTROLLER, "deployment", timeout_s=120)  # answered once it is back

        # The group keeps the holder (the group coordinator did not restart); another member
        # joins, shares the partition, and its first fetch has the SharePartition made again.
        other = cluster.share_consumer(GROUP, share_acknowledgement_mode="explicit", **FAST)
        other.subscribe(TOPIC)
        wait_until(lambda: members(admin) == {holder.member_id, other.member_id}, timeout_s=60,
                   message="both members in the group")
        back = poll_records(other, 6)
        new = share_partition_status(cluster, GROUP, TOPIC)
        assert new is not None and new["pid"] != old["pid"] and new["state"] == "Active"
        assert new["leader_epoch"] > old["leader_epoch"]
        # What was held comes back (KIP-932 takes the delivery count as a lower bound: an
        # acquisition is not persisted); what was acknowledged stays as it was.
        assert sorted(r.offset for r in back) == [0, 1, 2, 7, 8, 9]
        assert all(r.delivery_count >= 1 for r in back)
        after = record_states(cluster)
        assert {o: after[o] for o in (3, 4, 5, 6)} == {o: before[o] for o in (3, 4, 5, 6)}
        assert {o: (after[o][0], after[o][2]) for o in (0, 1, 2, 7, 8, 9)} == {
            o: ("ACQUIRED", other.member_id) for o in (0, 1, 2, 7, 8, 9)}
        assert after["start_offset"] == 0

        # The holder's acknowledgement of its copies, from before the restart, changes nothing
        # (its old SharePartition's handle is dead: the call finds the new one).
        stale = commit(holder, "holder", {r: AcknowledgeType.ACCEPT for r in held})
        assert stale is not None and stale.error is Errors.INVALID_RECORD_STATE
        now = record_states(cluster)
        assert {o: now[o] for o in range(10)} == {o: after[o] for o in range(10)}
        assert commit(other, "other", {r: AcknowledgeType.ACCEPT for r in back}) is None
        # Every record acknowledged exactly once: 3-6 by the holder before the restart, the
        # rest by the member they went to after it.
        assert settled == {o: [("holder", acked[first[o]])] if o in (3, 4, 5, 6)
                           else [("other", AcknowledgeType.ACCEPT)] for o in range(10)}
        assert record_states(cluster)["start_offset"] == 10

        # Nothing of 0-9 is delivered again: the next record produced is the first either
        # member gets, and both are still members (the holder without joining again).
        produce(cluster, TOPIC, 1, start=10)
        later = []

        def polled_the_next():
            for c in (holder, other):
                for r in c.poll(0.1):
                    later.append(r)
                    c.acknowledge(r)
                c.commit_sync()
            return any(r.offset == 10 for r in later)
        wait_until(polled_the_next, timeout_s=60, interval_s=0, message="the next record")
        assert [(r.offset, r.delivery_count) for r in later] == [(10, 1)]
        assert record_states(cluster)["start_offset"] == 11
        state = holder._call("state")
        assert state["member_id"] == holder.member_id and state["joins"] == joins, (joins, state)
        assert members(admin) == {holder.member_id, other.member_id}
    finally:
        for c in (holder, other):
            if c is not None:
                c.close()
        wait_until(lambda: not members(admin), timeout_s=60, message="the members gone")
        admin.delete_groups([GROUP])
        admin.close()
        cluster.delete_topic(TOPIC)
