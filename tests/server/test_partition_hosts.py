"""Partition hosts under real faults: a damaged log takes only its partition offline while
the host's other partitions reload and serve, and a topic deleted while its host was away
leaves no data behind for a new topic of the same name. And a Fetch across a host's
partitions reads no more than its max bytes, as Kafka's broker does."""
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


def test_a_fetch_across_partitions_reads_no_more_than_its_max_bytes(cluster):
    """Kafka's fetch.max.bytes: partitions are filled in request order, the first batch of
    the first partition with records whole even when larger (progress), and the partitions
    past the limit answer with no records but with where their logs stand."""
    cluster.create_topic("fmb", 3)
    with cluster.producer(acks="all", linger_ms=0) as producer:
        for p in range(3):
            for n in range(2):
                producer.send("fmb", b"v" * 300, partition=p).get(30)
    assert len({naming.partition_host_of("fmb", p, cluster.config) for p in range(3)}) == 1  # one host leads all
    host = cluster.partition_host("fmb", 0)
    requests = [FetchRequest("fmb", p, 0, max_wait_ms=0) for p in range(3)]

    def fetch(*max_bytes):
        answers = ray.get(host.fetch_many.remote(requests, 0, 1, *max_bytes), timeout=60)
        assert all(a.error_code == 0 and a.high_watermark == 2 for a in answers), answers
        return [len(a.batches) for a in answers], [len(b.records) for a in answers for b in a.batches]

    counts, sizes = fetch()
    assert counts == [2, 2, 2] and len(set(sizes)) == 1
    one = sizes[0]
    assert fetch(3 * one)[0] == [2, 1, 0]
    assert fetch(3 * one - 1)[0] == [2, 0, 0]
    assert fetch(1)[0] == [1, 0, 0]  # smaller than a batch: the first still goes
