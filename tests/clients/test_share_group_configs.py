"""Dynamic group configs on real actors: set on the group coordinator, validated, and used
by the group's SharePartitions, including ones already running."""
import time

import ray

from runtime.errors import Errors
from runtime.messages.share_group import AlterGroupConfigRequest, DescribeGroupConfigRequest
from tests.helpers import poll_records, produce

CLUSTER_CONFIG = {"share.auto.offset.reset": "earliest", "group.share.record.lock.duration.ms": 60000,
                  "group.share.min.record.lock.duration.ms": 1000, "group.share.max.record.lock.duration.ms": 60000,
                  "group.share.heartbeat.interval.ms": 200, "group.share.min.heartbeat.interval.ms": 100,
                  "group.share.session.timeout.ms": 30000, "group.share.min.session.timeout.ms": 1000}
FAST = dict(fetch_max_wait_ms=100)


def alter(cluster, group, configs):
    return ray.get(cluster.group_coordinator(group).alter_group_config.remote(AlterGroupConfigRequest(group, configs)))


def described(cluster, group):
    response = ray.get(cluster.group_coordinator(group).describe_group_config.remote(DescribeGroupConfigRequest(group)))
    assert response.error_code == 0
    return {e.name: e.value for e in response.configs if not e.is_default}


def test_an_altered_lock_duration_reaches_a_running_share_partition(cluster):
    cluster.create_topic("cfg", 1)
    produce(cluster, "cfg", 3)
    with cluster.share_consumer("g-cfg", share_acknowledgement_mode="explicit", **FAST) as first:
        first.subscribe("cfg")
        for r in poll_records(first, 3):
            first.acknowledge(r)
        first.commit_sync()  # the SharePartition now runs with the cluster's 60 s lock

    bad = alter(cluster, "g-cfg", {"share.record.lock.duration.ms": 10})
    assert bad.error_code == Errors.INVALID_CONFIG.code
    assert described(cluster, "g-cfg") == {}
    assert alter(cluster, "g-cfg", {"share.record.lock.duration.ms": 1500}).error_code == 0
    assert described(cluster, "g-cfg") == {"share.record.lock.duration.ms": 1500}

    produce(cluster, "cfg", 3)
    holder = cluster.share_consumer("g-cfg", share_acknowledgement_mode="explicit", **FAST)
    holder.subscribe("cfg")
    held = poll_records(holder, 3)
    killed_at = time.monotonic()
    holder._abandon()  # no leave; its session (30 s) outlives the group's 1.5 s lock
    with cluster.share_consumer("g-cfg", share_acknowledgement_mode="explicit", **FAST) as other:
        other.subscribe("cfg")
        back = poll_records(other, 3, timeout_s=25, acknowledge=True)
        other.commit_sync()
    assert time.monotonic() - killed_at < 25
    assert sorted(r.offset for r in back) == sorted(r.offset for r in held)
    assert {r.delivery_count for r in back} == {2}
