"""A share consumer that dies is fenced when its session times out, and the records it held
are released then, not only when their (long) acquisition locks expire."""
import gc
import time

import ray

from tests.conftest import wait_until
from tests.helpers import ShareConsumerProcess, poll_records, produce

LOCK_MS = 60000
CLUSTER_CONFIG = {"share.auto.offset.reset": "earliest", "group.share.record.lock.duration.ms": LOCK_MS,
                  "group.share.max.record.lock.duration.ms": LOCK_MS,
                  "group.share.heartbeat.interval.ms": 200, "group.share.min.heartbeat.interval.ms": 100,
                  "group.share.session.timeout.ms": 2000, "group.share.min.session.timeout.ms": 1000}
FAST = dict(fetch_max_wait_ms=100)


def test_records_of_a_fenced_member_come_back_before_their_lock_expires(cluster):
    cluster.create_topic("fenced", 1)
    produce(cluster, "fenced", 5)
    holder = ShareConsumerProcess.remote(cluster.namespace, "g-fenced", "fenced", share_acknowledgement_mode="explicit",
                                         **FAST)
    held = ray.get(holder.poll_records.remote(5))
    killed_at = time.monotonic()
    ray.kill(holder)  # the process dies: no acknowledgement, no leave; only the session timeout tells
    with cluster.share_consumer("g-fenced", share_acknowledgement_mode="explicit", **FAST) as other:
        other.subscribe("fenced")
        back = poll_records(other, 5, timeout_s=40, acknowledge=True)
        waited = time.monotonic() - killed_at
        other.commit_sync()
    assert sorted(r.offset for r in back) == [r.offset for r in held]
    assert waited < LOCK_MS / 1000 - 10  # released at the fence, long before the locks expire
    # Kafka gives the delivery back on release: the records go out again as first deliveries.
    assert {r.delivery_count for r in back} == {1}


def test_a_share_consumer_dropped_without_close_stops_heartbeating_and_is_fenced(cluster):
    """Its background work runs on the process's network thread: dropping the consumer ends
    it, as a process that dies ends a consumer, and the group does not keep a ghost member."""
    cluster.create_topic("dropped", 1)
    produce(cluster, "dropped", 3)
    dropped = cluster.share_consumer("g-dropped", share_acknowledgement_mode="explicit", **FAST)
    dropped.subscribe("dropped")
    held = poll_records(dropped, 3)
    member_id = dropped.member_id
    del dropped
    gc.collect()

    def members():
        with cluster.admin() as admin:
            return {m.member_id for m in admin.describe_groups(["g-dropped"])["g-dropped"].members}
    wait_until(lambda: member_id not in members(), timeout_s=20, message="the dropped member fenced")
    with cluster.share_consumer("g-dropped", share_acknowledgement_mode="explicit", **FAST) as other:
        other.subscribe("dropped")
        back = poll_records(other, 3, acknowledge=True)
        other.commit_sync()
    assert sorted(r.offset for r in back) == sorted(r.offset for r in held)
