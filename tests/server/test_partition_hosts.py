"""Partition hosts under real faults: a damaged log takes only its partition offline while
the host's other partitions reload and serve, and a topic deleted while its host was away
leaves no data behind for a new topic of the same name."""
import os
import signal

import ray

from actors import naming
from actors.server.deployment import start_partition_hosts
from runtime.errors import Errors
from runtime.messages.topics import FetchRequest
from runtime.topics.data import decode_entries
from runtime.topics.internal import log_name
from tests.conftest import wait_until

PARTITIONS = 8
DAMAGED = 3


def values(cluster, topic: str, partition: int) -> tuple[int, list[bytes]]:
    r = ray.get(cluster.partition_leader(topic, partition).fetch.remote(
        FetchRequest(topic, partition, 0, max_wait_ms=0)), timeout=60)
    return r.error_code, [rec.value for b in r.batches for rec in decode_entries(b.records, b.base_offset)]


def produce(cluster, topic: str, partitions, tag: str) -> None:
    with cluster.producer(acks="all") as producer:
        for p in partitions:
            producer.send(topic, f"{tag}-{p}".encode(), partition=p)
        producer.flush()


def host_status(cluster, topic: str):
    try:
        return ray.get(cluster.partition_host(topic, 0).status.remote(), timeout=10)
    except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError, ray.exceptions.GetTimeoutError):
        return None


def test_a_damaged_partition_goes_offline_alone_while_its_host_reloads_the_others(cluster):
    cluster.create_topic("many", PARTITIONS)
    produce(cluster, "many", range(PARTITIONS), "before")
    before = host_status(cluster, "many")
    # Damage the first batch of one partition's segment, with a valid batch after it: not a
    # torn tail, so the log refuses to open rather than cut acknowledged records.
    segment = os.path.join(cluster.data_dir, log_name("many", DAMAGED), "00000000000000000000.log")
    produce(cluster, "many", [DAMAGED], "second")
    with open(segment, "r+b") as f:
        f.seek(20)
        f.write(b"\xff" * 8)
    os.kill(before["pid"], signal.SIGKILL)
    wait_until(lambda: (host_status(cluster, "many") or {}).get("pid") not in (None, before["pid"])
               and host_status(cluster, "many")["state"] == "active", timeout_s=60, message="the host reloaded")
    status = host_status(cluster, "many")
    assert status["partitions"] == before["partitions"]
    assert status["offline_partitions"] == [f"many-{DAMAGED}"] and status["reload_seconds"] >= 0
    code, _ = values(cluster, "many", DAMAGED)
    assert code == Errors.KAFKA_STORAGE_ERROR.code
    others = [p for p in range(PARTITIONS) if p != DAMAGED]
    produce(cluster, "many", others, "after")
    for p in others:
        assert values(cluster, "many", p) == (0, [f"before-{p}".encode(), f"after-{p}".encode()])


def test_a_topic_deleted_while_its_host_was_away_leaves_nothing_to_a_new_one_of_its_name(cluster):
    cluster.create_topic("gone", 1)
    produce(cluster, "gone", [0], "old")
    ray.kill(cluster.partition_host("gone", 0), no_restart=True)
    cluster.delete_topic("gone")  # the host cannot be told: its folder stays on disk
    assert os.path.isdir(os.path.join(cluster.data_dir, log_name("gone", 0)))
    cluster._forget(naming.partition_host_of("gone", 0, cluster.config))
    ray.get(start_partition_hosts(cluster.directory, cluster._deployment, []), timeout=120)
    cluster.create_topic("gone", 1)
    assert values(cluster, "gone", 0) == (0, [])
    produce(cluster, "gone", [0], "new")
    assert values(cluster, "gone", 0) == (0, [b"new-0"])
