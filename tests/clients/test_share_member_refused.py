"""A share fetch or acknowledgement from a member id the share group does not have is refused
with UNKNOWN_MEMBER_ID, and nothing is acquired or acknowledged for it.

In Kafka 4.2 such a member has no share session any more (the session goes when the member
leaves or is fenced), so its fetches fail until it joins again; shoal, which has no share
sessions yet, asks the group coordinator (README, design notes). Members in the group are
served as before, and a member the group fenced while it was alive joins again and goes on."""
import ray

from actors import AcknowledgeType, Errors, TopicPartition
from runtime.messages.share import (AcknowledgementBatch, AcknowledgePartition, AcknowledgeTopic,
                                    ShareAcknowledgeRequest, ShareFetchRequest, ShareFetchRequestPartition,
                                    ShareFetchRequestTopic)
from runtime.messages.share_group import ShareGroupHeartbeatRequest
from tests.helpers import poll_records, produce, record_states, share_partition
from tests.conftest import wait_until

LOCK_MS = 60000  # longer than any test: only a release gives records back
CLUSTER_CONFIG = {"share.auto.offset.reset": "earliest", "group.share.record.lock.duration.ms": LOCK_MS,
                  "group.share.max.record.lock.duration.ms": LOCK_MS,
                  "group.share.heartbeat.interval.ms": 200, "group.share.min.heartbeat.interval.ms": 100,
                  "group.share.session.timeout.ms": 2000, "group.share.min.session.timeout.ms": 1000}
FAST = dict(fetch_max_wait_ms=100)


def fetch(cluster, group, topic, member_id, acks=()):
    """One ShareFetch on partition 0, straight to its SharePartition actor."""
    topic_id = cluster.describe_topic(topic).topic_id
    request = ShareFetchRequest(group, member_id, max_wait_ms=100, max_bytes=1 << 20, max_records=100, topics=(
        ShareFetchRequestTopic(topic_id, (ShareFetchRequestPartition(0, tuple(acks)),)),))
    return ray.get(share_partition(cluster, group, topic).share_fetch.remote(request))


def acknowledge(cluster, group, topic, member_id, first, last):
    topic_id = cluster.describe_topic(topic).topic_id
    request = ShareAcknowledgeRequest(group, member_id, topics=(AcknowledgeTopic(topic_id, (AcknowledgePartition(
        0, (AcknowledgementBatch(first, last, (int(AcknowledgeType.ACCEPT),)),)),)),))
    return ray.get(share_partition(cluster, group, topic).share_acknowledge.remote(request))


def members(cluster, group):
    with cluster.admin() as admin:
        return {m.member_id for m in admin.describe_groups([group])[group].members}


def test_a_member_id_the_group_never_had_acquires_nothing(cluster):
    cluster.create_topic("r-stranger", 1)
    produce(cluster, "r-stranger", 3)
    with cluster.share_consumer("g-stranger", share_acknowledgement_mode="explicit", **FAST) as c:
        c.subscribe("r-stranger")
        held = poll_records(c, 3)  # a member of the group is served
        assert [r.delivery_count for r in held] == [1, 1, 1]
        response = fetch(cluster, "g-stranger", "r-stranger", "stranger",
                         acks=(AcknowledgementBatch(0, 2, (int(AcknowledgeType.ACCEPT),)),))
        assert Errors.for_code(response.error_code) is Errors.UNKNOWN_MEMBER_ID
        assert response.responses == ()
        refused = acknowledge(cluster, "g-stranger", "r-stranger", "stranger", 0, 2)
        assert Errors.for_code(refused.error_code) is Errors.UNKNOWN_MEMBER_ID
        # the stranger's acknowledgements changed nothing: the member still holds its records
        assert [record_states(cluster, "g-stranger", "r-stranger")[o] for o in range(3)] == [
            ("ACQUIRED", 1, c.member_id)] * 3
        for r in held:
            c.acknowledge(r)
        assert c.commit_sync() == {TopicPartition("r-stranger", 0): None}


def test_a_member_that_left_or_was_fenced_cannot_acquire(cluster):
    cluster.create_topic("r-gone", 1)
    produce(cluster, "r-gone", 4)
    left = cluster.share_consumer("g-gone", share_acknowledgement_mode="explicit", **FAST)
    left.subscribe("r-gone")
    poll_records(left, 4)
    left_id = left.member_id
    left.close()  # leaves: what it held goes back
    killed = cluster.share_consumer("g-gone", share_acknowledgement_mode="explicit", **FAST)
    killed.subscribe("r-gone")
    held = poll_records(killed, 4)
    killed_id = killed.member_id
    killed._abandon()  # as if its process died, no leave: the session timeout fences it, and its records go back
    wait_until(lambda: killed_id not in members(cluster, "g-gone"), timeout_s=20, message="the fence")
    wait_until(lambda: all(record_states(cluster, "g-gone", "r-gone")[o][0] == "AVAILABLE" for o in range(4)),
               message="the fenced member's records released")
    for gone in (left_id, killed_id):
        response = fetch(cluster, "g-gone", "r-gone", gone)
        assert Errors.for_code(response.error_code) is Errors.UNKNOWN_MEMBER_ID
        assert [record_states(cluster, "g-gone", "r-gone")[o][0] for o in range(4)] == ["AVAILABLE"] * 4
    with cluster.share_consumer("g-gone", share_acknowledgement_mode="explicit", **FAST) as other:
        other.subscribe("r-gone")
        back = poll_records(other, 4, acknowledge=True)
        assert sorted(r.offset for r in back) == [r.offset for r in held]
        assert other.commit_sync() == {TopicPartition("r-gone", 0): None}


def test_a_live_member_the_group_fenced_joins_again_and_is_told_of_its_lost_acknowledgements(cluster):
    cluster.create_topic("r-fenced", 1)
    produce(cluster, "r-fenced", 3)
    outcomes = []
    with cluster.share_consumer("g-fenced-live", share_acknowledgement_mode="explicit", **FAST) as c:
        c.set_acknowledgement_commit_callback(lambda offsets, error: outcomes.append(error))
        c.subscribe("r-fenced")
        held = poll_records(c, 3)
        # The group removes the member behind its back (as a session timeout would).
        coordinator = cluster.group_coordinator("g-fenced-live")
        ray.get(coordinator.share_group_heartbeat.remote(
            ShareGroupHeartbeatRequest("g-fenced-live", c.member_id, -1)))
        wait_until(lambda: all(record_states(cluster, "g-fenced-live", "r-fenced")[o][0] == "AVAILABLE"
                               for o in range(3)), message="the removed member's records released")
        for r in held:
            c.acknowledge(r)
        result = c.commit_sync()[TopicPartition("r-fenced", 0)]
        # Refused (UNKNOWN_MEMBER_ID), or, when the member was back already, no longer its
        # records (INVALID_RECORD_STATE): either way the consumer hears of it.
        assert result is not None and result.error in (Errors.UNKNOWN_MEMBER_ID, Errors.INVALID_RECORD_STATE)
        assert outcomes and outcomes[-1] is result
        # It joins again under the same id and gets the released records as first deliveries.
        back = poll_records(c, 3, acknowledge=True)
        assert sorted((r.offset, r.delivery_count) for r in back) == [(0, 1), (1, 1), (2, 1)]
        assert c.commit_sync() == {TopicPartition("r-fenced", 0): None}
        assert c.member_id in members(cluster, "g-fenced-live")
