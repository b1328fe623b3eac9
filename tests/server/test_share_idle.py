"""Idle SharePartition actors go away (group.share.partition.idle.ms) and the next ShareFetch
brings them back from the share coordinator's state, through the real actors: what was
acknowledged is not delivered again, released records keep their delivery counts, the start
offset stays, and a consumer holding the old actor's handle finds the new one."""
import os
import time

import ray

from actors import AcknowledgeType
from tests.conftest import wait_until
from tests.helpers import poll_records, produce, share_partition, share_partition_status

IDLE_MS = 1500
CLUSTER_CONFIG = {"share.auto.offset.reset": "earliest", "group.share.partition.idle.ms": IDLE_MS,
                  "group.share.heartbeat.interval.ms": 200, "group.share.min.heartbeat.interval.ms": 100}
FAST = dict(fetch_max_wait_ms=100)


def folder_bytes(path):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)


def test_an_idle_share_partition_leaves_and_comes_back_with_its_state(cluster):
    cluster.create_topic("idle", 1)
    produce(cluster, "idle", 10)
    c = cluster.share_consumer("g-idle", share_acknowledgement_mode="explicit", **FAST)
    c.subscribe("idle")
    first = sorted(poll_records(c, 10), key=lambda r: r.offset)
    assert [(r.offset, r.delivery_count) for r in first] == [(i, 1) for i in range(10)]
    for r in first[:3]:
        c.acknowledge(r)
    c.acknowledge(first[3], AcknowledgeType.REJECT)
    assert set(c.commit_sync().values()) == {None}
    before = share_partition_status(cluster, "g-idle", "idle")

    # 4-9 are still acquired: the actor stays past the idle time.
    until = time.monotonic() + 2 * IDLE_MS / 1000
    while time.monotonic() < until:
        assert share_partition_status(cluster, "g-idle", "idle")["pid"] == before["pid"]
        time.sleep(0.1)
    # Released while this consumer polls no more (a fetch under way would take them again).
    for r in first[4:]:
        c.acknowledge(r, AcknowledgeType.RELEASE)
    assert set(c.commit_sync().values()) == {None}

    # Nothing acquired and no call: it exits, and writes nothing on the way out.
    state_dir = os.path.join(cluster.data_dir, "__share_group_state-0")
    written = folder_bytes(state_dir)
    wait_until(lambda: share_partition_status(cluster, "g-idle", "idle") is None, timeout_s=30,
               message="the idle SharePartition gone")
    assert folder_bytes(state_dir) == written

    # The same consumer (its background work holds the old handle) fetches again: a new actor
    # loads the state; 0-3 are done, 4-9 come back with their second delivery.
    produce(cluster, "idle", 2, start=10)
    again = sorted(poll_records(c, 8), key=lambda r: r.offset)
    assert [(r.offset, r.delivery_count) for r in again] == [(i, 2) for i in range(4, 10)] + [(10, 1), (11, 1)]
    after = share_partition_status(cluster, "g-idle", "idle")
    assert after["pid"] != before["pid"] and after["state"] == "Active"
    sp = share_partition(cluster, "g-idle", "idle")
    assert ray.get(sp.record_states.remote())["start_offset"] == 4
    for r in again:
        c.acknowledge(r)
    assert set(c.commit_sync().values()) == {None}
    assert ray.get(sp.record_states.remote())["start_offset"] == 12
    c.close()
