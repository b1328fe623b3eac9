"""Coordinator metrics after a known workload, read back through `metrics_snapshot()` (the
values the actor gave `ray.util.metrics`)."""
import ray

from actors import AcknowledgeType, naming
from runtime.messages.group import (HeartbeatRequest, JoinGroupRequest, JoinGroupRequestProtocol,
                                    OffsetCommitRequest, OffsetCommitRequestPartition, OffsetCommitRequestTopic,
                                    SyncGroupRequest, SyncGroupRequestAssignment)
from tests.conftest import wait_until
from tests.helpers import poll_records, produce

CLUSTER_CONFIG = {"group.min.session.timeout.ms": 200, "group.initial.rebalance.delay.ms": 0,
                  "share.auto.offset.reset": "earliest", "metrics.export.interval.ms": 3600000,
                  "group.share.min.record.lock.duration.ms": 1000}
CLUSTER_TOPICS = {"m": 2}


def snapshot(handle) -> dict:
    """{(name, tags without the coordinator): value}"""
    return {(m["name"], tuple(sorted((k, v) for k, v in m["tags"].items() if k != "coordinator"))): m["value"]
            for m in ray.get(handle.metrics_snapshot.remote(), timeout=30)}


def snapshot_when(handle, ready, message: str) -> dict:
    """The first snapshot for which ready(snapshot) holds."""
    return wait_until(lambda: (lambda s: s if ready(s) else None)(snapshot(handle)), message=message)


def test_group_coordinator_metrics_after_a_known_workload(cluster):
    coordinator = cluster.group_coordinator("g-metrics")
    protocols = (JoinGroupRequestProtocol("range", b""),)
    first = ray.get(coordinator.join_group.remote(JoinGroupRequest("g-metrics", 10000, "", "consumer", protocols)))
    joined = ray.get(coordinator.join_group.remote(
        JoinGroupRequest("g-metrics", 10000, first.member_id, "consumer", protocols)))
    member, generation = joined.member_id, joined.generation_id
    assert ray.get(coordinator.sync_group.remote(SyncGroupRequest(
        "g-metrics", generation, member, assignments=(SyncGroupRequestAssignment(member, b""),)))).error_code == 0
    for _ in range(3):
        assert ray.get(coordinator.heartbeat.remote(HeartbeatRequest("g-metrics", generation, member))).error_code == 0
    ray.get(coordinator.offset_commit.remote(OffsetCommitRequest("g-metrics", (OffsetCommitRequestTopic("m", (
        OffsetCommitRequestPartition(0, 5), OffsetCommitRequestPartition(1, 7))),), generation, member)))

    s = snapshot(coordinator)
    requests = {dict(tags)["request"]: v for (name, tags), v in s.items() if name == "shoal_request_count"}
    assert {k: requests.get(k) for k in ("join_group", "sync_group", "heartbeat", "offset_commit")} == {
        "join_group": 2, "sync_group": 1, "heartbeat": 3, "offset_commit": 1}
    join_latency = s[("shoal_request_latency_ms", (("request", "join_group"),))]
    assert join_latency["count"] == 2 and join_latency["sum"] > 0
    assert s[("shoal_request_latency_ms", (("request", "sync_group"),))]["count"] == 1
    assert s[("shoal_group_count", (("protocol", "classic"),))] == 1
    assert s[("shoal_classic_group_count", (("state", "Stable"),))] == 1
    assert s[("shoal_group_completed_rebalance_count", ())] == 1
    assert s[("shoal_offset_count", ())] == 2
    assert s[("shoal_offset_commit_count", ())] == 2
    rebalance = s[("shoal_group_rebalance_duration_ms", (("protocol", "classic"),))]
    assert rebalance["count"] == 1 and rebalance["sum"] >= 0
    assert s[("shoal_partition_load_time_ms", ())]["count"] == 1
    assert s[("shoal_batch_flush_time_ms", ())]["count"] >= 2  # the join and the commit were written

    # a second rebalance: another member joins, the first rejoins
    second = ray.get(coordinator.join_group.remote(JoinGroupRequest("g-metrics", 10000, "", "consumer", protocols)))
    refs = [coordinator.join_group.remote(JoinGroupRequest("g-metrics", 10000, second.member_id, "consumer",
                                                           protocols)),
            coordinator.join_group.remote(JoinGroupRequest("g-metrics", 10000, member, "consumer", protocols))]
    assert {r.generation_id for r in ray.get(refs, timeout=30)} == {2}
    s = snapshot(coordinator)
    assert s[("shoal_group_completed_rebalance_count", ())] == 2
    assert s[("shoal_classic_group_count", (("state", "CompletingRebalance"),))] == 1
    assert s[("shoal_classic_group_count", (("state", "Stable"),))] == 0
    assert s[("shoal_group_rebalance_duration_ms", (("protocol", "classic"),))]["count"] == 1  # not over yet
    assert ray.get(coordinator.sync_group.remote(SyncGroupRequest(
        "g-metrics", 2, member, assignments=(SyncGroupRequestAssignment(member, b""),
                                             SyncGroupRequestAssignment(second.member_id, b""))))).error_code == 0
    s = snapshot(coordinator)
    assert s[("shoal_group_rebalance_duration_ms", (("protocol", "classic"),))]["count"] == 2


def test_consumer_group_rebalance_duration(cluster):
    with cluster.consumer("g-848", group_protocol="consumer", auto_offset_reset="earliest") as c:
        c.subscribe(["m"])
        wait_until(lambda: c.poll(0.1) is not None and len(c.assignment()) == 2, message="both partitions assigned")
        key = ("shoal_group_rebalance_duration_ms", (("protocol", "consumer"),))
        s = snapshot_when(cluster.group_coordinator("g-848"), lambda s: key in s, "a consumer group rebalance timed")
    rebalance = s[key]
    assert rebalance["count"] >= 1 and rebalance["sum"] >= 0


def test_share_records_acknowledged_archived_released(cluster):
    cluster.create_topic("mq", 1)
    produce(cluster, "mq", 10)
    with cluster.share_consumer("g-mq", share_acknowledgement_mode="explicit", fetch_max_wait_ms=200) as c:
        c.subscribe(["mq"])
        for r in poll_records(c, 10)[:10]:
            c.acknowledge(r, AcknowledgeType.ACCEPT if r.offset < 5 else
                          AcknowledgeType.REJECT if r.offset < 7 else AcknowledgeType.RELEASE)
        c.commit_sync()
    share_coordinator = ray.get_actor(naming.share_coordinator(0), namespace=cluster.namespace)
    s = snapshot(share_coordinator)
    assert s[("shoal_share_records_acknowledged_count", ())] == 5
    assert s[("shoal_share_records_archived_count", ())] == 2
    assert s[("shoal_share_records_released_count", ())] >= 3
    requests = {dict(tags)["request"]: v for (name, tags), v in s.items() if name == "shoal_request_count"}
    assert requests["write_share_group_state"] >= 1 and requests["initialize_share_group_state"] == 1


def test_share_partition_fetches_acquisitions_and_lock_timeouts(cluster):
    cluster.create_topic("mlock", 1)
    cluster.admin().alter_group_config("g-lock", {"share.record.lock.duration.ms": 1000})
    produce(cluster, "mlock", 6)
    with cluster.share_consumer("g-lock", share_acknowledgement_mode="explicit", fetch_max_wait_ms=200) as c:
        c.subscribe(["mlock"])
        poll_records(c, 6)
        # nothing acknowledged: every lock runs out after a second
        share_partition = ray.get_actor(naming.share_partition("g-lock", "mlock", 0), namespace=cluster.namespace)
        s = snapshot_when(share_partition, lambda s: s.get(("shoal_share_acquisition_lock_timeout_count", ())) == 6,
                          "6 acquisition lock timeouts")
    assert s[("shoal_share_records_acquired_count", ())] == 6
    requests = {dict(tags)["request"]: v for (name, tags), v in s.items() if name == "shoal_request_count"}
    assert requests["share_fetch"] >= 1
    assert s[("shoal_share_in_flight_records", ())] == 6  # available again, still in the window


def test_the_metrics_reach_rays_prometheus_endpoint(cluster):
    """What Prometheus scrapes: Ray prefixes the names with `ray_`."""
    import urllib.request
    port = ray._private.worker.global_worker.node.metrics_export_port

    def exported():
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
        return [line for line in body.splitlines()
                if line.startswith("ray_shoal_request_count") and 'request="offset_commit"' in line]
    lines = wait_until(exported, timeout_s=60, interval_s=1, message="shoal metrics at the endpoint")
    assert max(float(line.rsplit(" ", 1)[1]) for line in lines) >= 1  # one line per coordinator process
