"""A lock that expires while the share coordinator is down, on real actors. As in Kafka
(SharePartition.releaseAcquisitionLockOnTimeout goes ahead whether or not its state write
succeeds), the records go to the next member at once and the old holder's late
acknowledgement is refused; once the share coordinator is back, the writes go through."""
import ray

from actors import naming
from actors.server.share_coordinator import ShareCoordinatorActor
from runtime.errors import Errors
from runtime.messages.share_state import ReadShareGroupStateRequest, ReadStateData, ReadStatePartitionData
from runtime.hashing import state_partition_for
from runtime.share_state.records import PersisterStateBatch, RecordState
from tests.helpers import poll_records, produce, share_start_offset
from tests.conftest import wait_until

LOCK_MS = 1500
CLUSTER_CONFIG = {"share.auto.offset.reset": "earliest", "group.share.record.lock.duration.ms": LOCK_MS,
                  "group.share.heartbeat.interval.ms": 200, "group.share.min.heartbeat.interval.ms": 100}
FAST = dict(fetch_max_wait_ms=100)


def restart_share_coordinator(cluster, group, topic, partition):
    """A new share coordinator actor on the same state log, as a redeployment would make."""
    count = int(cluster.config["share.coordinator.state.topic.num.partitions"])
    state_partition = state_partition_for(group, cluster.describe_topic(topic).topic_id, partition, count)
    actor = ray.remote(ShareCoordinatorActor).options(
        name=naming.share_coordinator(state_partition), namespace=cluster.namespace, num_cpus=0,
        max_concurrency=1000, max_restarts=-1).remote(cluster.data_dir, state_partition, cluster.config)
    ray.get(actor.ready.remote())
    return actor


def persisted_batches(cluster, coordinator, group, topic, partition=0):
    topic_id = cluster.describe_topic(topic).topic_id
    response = ray.get(coordinator.read_share_group_state.remote(ReadShareGroupStateRequest(
        group, (ReadStateData(topic_id, (ReadStatePartitionData(partition, -1),)),))))
    return tuple(response.results[0].partitions[0].state_batches)


def test_an_expired_lock_releases_the_records_while_the_share_coordinator_is_down(cluster):
    cluster.create_topic("down", 1)
    produce(cluster, "down", 5)
    holder = cluster.share_consumer("g-down", share_acknowledgement_mode="explicit", **FAST)
    holder.subscribe("down")
    held = poll_records(holder, 5)
    assert {r.delivery_count for r in held} == {1}
    # The next delivery's lock outlasts the test (the holder's, taken before, stays short).
    cluster.admin().alter_group_config("g-down", {"share.record.lock.duration.ms": "30000"})
    ray.kill(cluster.share_coordinator("g-down", "down", 0), no_restart=True)

    with cluster.share_consumer("g-down", share_acknowledgement_mode="explicit", **FAST) as other:
        other.subscribe("down")
        # The lock runs out and its write cannot be made: the records come back all the same.
        back = poll_records(other, 5, timeout_s=LOCK_MS / 1000 + 15)
        assert sorted((r.offset, r.delivery_count) for r in back) == [(i, 2) for i in range(5)]
        for r in held:
            holder.acknowledge(r)
        (error,) = holder.commit_sync().values()
        assert error is not None and error.error is Errors.INVALID_RECORD_STATE

        coordinator = restart_share_coordinator(cluster, "g-down", "down", 0)
        # The expiry's write goes through once the share coordinator is back.
        wait_until(lambda: persisted_batches(cluster, coordinator, "g-down", "down") == (
            PersisterStateBatch(0, 4, int(RecordState.AVAILABLE), 1),), timeout_s=30, message="the expiry's write")
        for r in back:
            other.acknowledge(r)
        assert set(other.commit_sync(timeout=60).values()) == {None}
    assert share_start_offset(cluster, "g-down", "down") == 5
    # The durable state agrees: every record is done, nothing is left to deliver.
    (offset,) = cluster.admin().describe_share_group_offsets("g-down").values()
    assert offset.lag == 0
    holder.close()
    ray.kill(coordinator)
