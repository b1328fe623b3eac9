"""A share consumer whose group dropped it, and that cannot join again (the group is full),
neither spins on refused fetches nor loses its acknowledgements without a word.

The heartbeat interval is Kafka's default (5 s), so the consumer hears of its removal from a
refused share fetch before its heartbeat tells it."""
import uuid

import ray

from actors import Errors, naming
from runtime.messages.share_group import ShareGroupHeartbeatRequest
from tests.helpers import poll_records, produce
from tests.conftest import wait_until

LOCK_MS = 60000
CLUSTER_CONFIG = {"share.auto.offset.reset": "earliest", "group.share.max.size": 1,
                  "group.share.record.lock.duration.ms": LOCK_MS, "group.share.max.record.lock.duration.ms": LOCK_MS}
FAST = dict(fetch_max_wait_ms=100)


def share_fetches(share_partition) -> float:
    s = ray.get(share_partition.metrics_snapshot.remote())
    return sum(m["value"] for m in s if m["name"] == "shoal_request_count"
               and m["tags"].get("request") == "share_fetch")


def test_a_dropped_member_that_cannot_rejoin_stops_fetching_and_hears_of_its_acknowledgements(cluster):
    cluster.create_topic("shut", 1)
    produce(cluster, "shut", 3)
    outcomes = []
    dropped = cluster.share_consumer("g-shut", share_acknowledgement_mode="explicit", **FAST)
    dropped.set_acknowledgement_commit_callback(lambda offsets, error: outcomes.append(error))
    dropped.subscribe("shut")
    held = poll_records(dropped, 3)
    coordinator = cluster.group_coordinator("g-shut")
    ray.get(coordinator.share_group_heartbeat.remote(
        ShareGroupHeartbeatRequest("g-shut", dropped.member_id, -1)))  # as a session timeout would
    # Another member takes the one place at once (a bare heartbeat, before the dropped consumer
    # can hear of its removal and join again).
    joined = ray.get(coordinator.share_group_heartbeat.remote(ShareGroupHeartbeatRequest(
        "g-shut", str(uuid.uuid4()), 0, subscribed_topic_names=("shut",))))
    assert joined.error_code == 0
    sp = ray.get_actor(naming.share_partition("g-shut", "shut", 0), namespace=cluster.namespace)
    wait_until(lambda: all(s[0] == "AVAILABLE" for o, s in ray.get(sp.record_states.remote()).items()
                           if o != "start_offset"), message="the removed member's records released")
    for r in held:
        dropped.acknowledge(r)
    before = share_fetches(sp)
    got = []
    wait_until(lambda: got.extend(dropped.poll(0.1)) or len(outcomes) > 0, timeout_s=20,
               interval_s=0, message="the outcome of the acknowledgements")
    for _ in range(10):  # a second more of polling: the refused member does not fetch again
        got.extend(dropped.poll(0.1))
    fetched = share_fetches(sp) - before
    assert got == []
    assert [e.error for e in outcomes] == [Errors.UNKNOWN_MEMBER_ID]
    assert dropped.assignment() == set()
    assert fetched <= 2, f"{fetched} share fetches from a refused member"
    states = ray.get(sp.record_states.remote())
    assert [states[o][0] for o in range(3)] == ["AVAILABLE"] * 3  # its acknowledgements were not applied
    dropped.close()
