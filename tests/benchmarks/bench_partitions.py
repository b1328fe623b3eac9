"""Partitions per node: what topic partitions cost now that partition hosts carry them.

- create: a fresh deployment per size; the wall time to create 10, 100, 1,000 and 2,000
  partitions (topics of at most 100 partitions, as the controller and the hosts see them),
  and the PSS of every actor of the deployment above the base deployment's (as
  bench_footprint measures it), once the partitions hold a record each.
- throughput: 1 KiB records, acks=all, spread over 4 and over 1,000 partitions, produced and
  then consumed by shoal's producer and consumer, and by confluent-kafka through the gateway;
  each partition is written once before the clock (its files created, the client's metadata
  known), so the rates are steady ones, not a first write's.
- reload: a host with 1,000 partitions killed (SIGKILL), the seconds until it serves again
  and the seconds its reload says it took.

Run: .venv/bin/python tests/benchmarks/bench_partitions.py [--records 100000] [--sizes 10,100,1000,2000]
(prints JSON)
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

import ray  # noqa: E402

from actors import Cluster  # noqa: E402
from tests.benchmarks.bench_footprint import measure, settle  # noqa: E402
from tests.benchmarks.quiet_ray import init_ray  # noqa: E402

RECORD = 1024
TOPIC_PARTITIONS = 100


def topics_of(partitions: int, prefix: str) -> list[tuple[str, int]]:
    out, left = [], partitions
    while left:
        n = min(left, TOPIC_PARTITIONS)
        out.append((f"{prefix}-{len(out)}", n))
        left -= n
    return out


def create(cluster: Cluster, partitions: int, prefix: str) -> tuple[float, list[tuple[str, int]]]:
    topics = topics_of(partitions, prefix)
    started = time.perf_counter()
    for name, n in topics:
        cluster.create_topic(name, n)
    return time.perf_counter() - started, topics


def one_record_each(cluster: Cluster, topics: list[tuple[str, int]]) -> None:
    with cluster.producer(linger_ms=5) as producer:
        for name, n in topics:
            for p in range(n):
                producer.send(name, b"x" * RECORD, partition=p)
        producer.flush()


def creation(sizes: list[int]) -> list[dict]:
    out = []
    for size in sizes:
        cluster = Cluster.local()
        try:
            settle()
            base = measure(cluster.namespace)["pss_mb_total"]
            seconds, topics = create(cluster, size, "c")
            one_record_each(cluster, topics)
            settle()
            after = measure(cluster.namespace)["pss_mb_total"]
            out.append({"partitions": size, "seconds": round(seconds, 2), "pss_mb_above_base": round(after - base, 1),
                        "base_pss_mb": base})
        finally:
            cluster.shutdown()
    return out


def _rates(records: int, seconds: float) -> dict:
    return {"records_per_s": round(records / seconds), "mb_per_s": round(records * RECORD / seconds / 1e6, 1)}


def _sends(topics: list[tuple[str, int]], keyless: bool) -> list[tuple[str, int | None]]:
    """Where each send goes in turn: every partition round the topics (a batch of one record
    each at a thousand partitions), or, keyless, the topics in turn and the partitioner's
    choice (Kafka's sticky partitioner fills one partition's batch, then moves on)."""
    if keyless:
        return [(name, None) for name, _ in topics]
    return [(name, p) for name, n in topics for p in range(n)]


def shoal_throughput(cluster: Cluster, topics: list[tuple[str, int]], records: int, keyless: bool = False) -> dict:
    value = os.urandom(RECORD)
    sends = _sends(topics, keyless)
    targets = [(name, p) for name, n in topics for p in range(n)]
    with cluster.producer(acks="all", linger_ms=5) as producer:
        for name, p in targets:  # warm: every partition written once before the clock
            producer.send(name, value, partition=p)
        producer.flush()
        started = time.perf_counter()
        for i in range(records):
            name, p = sends[i % len(sends)]
            producer.send(name, value, partition=p)
        producer.flush()
        produced = time.perf_counter() - started
    consumer = cluster.consumer(None, auto_offset_reset="earliest", enable_auto_commit=False)
    consumer.assign(targets)
    started, seen, wanted = time.perf_counter(), 0, records + len(targets)
    while seen < wanted:
        seen += sum(len(rs) for rs in consumer.poll(timeout_ms=1000, max_records=10000).values())
    consumed = time.perf_counter() - started
    consumer.close(autocommit=False)
    return {"produce": _rates(records, produced), "consume": _rates(wanted, consumed)}


def confluent_throughput(bootstrap: str, topics: list[tuple[str, int]], records: int, keyless: bool = False) -> dict:
    import confluent_kafka
    value = os.urandom(RECORD)
    sends = _sends(topics, keyless)
    targets = [(name, p) for name, n in topics for p in range(n)]
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for name, p in targets:  # warm: connected, and every partition written once before the clock
        producer.produce(name, value, partition=p)
    assert producer.flush(60) == 0
    started = time.perf_counter()
    for i in range(records):
        name, p = sends[i % len(sends)]
        while True:
            try:
                producer.produce(name, value, **({} if p is None else {"partition": p}))
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    assert producer.flush(300) == 0, "records left undelivered"
    produced = time.perf_counter() - started
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{topics[0][0]}",
                                         "enable.auto.commit": False})
    consumer.assign([confluent_kafka.TopicPartition(name, p, 0) for name, p in targets])
    started, seen = time.perf_counter(), 0
    wanted = records + len(targets)  # and those sent before the clock
    while seen < wanted:
        for message in consumer.consume(num_messages=10000, timeout=1.0):
            assert message.error() is None, message.error()
            seen += 1
    consumed = time.perf_counter() - started
    consumer.close()
    return {"produce": _rates(records, produced), "consume": _rates(wanted, consumed)}


def throughput_and_reload(records: int) -> dict:
    cluster = Cluster.local(config={"listeners": "PLAINTEXT://127.0.0.1:0", "max.partitions": 10000})
    try:
        _, four = create(cluster, 4, "t4")
        _, wide = create(cluster, 1000, "t1000")
        _, wide_sticky = create(cluster, 1000, "s1000")
        _, four_k = create(cluster, 4, "k4")
        _, wide_k = create(cluster, 1000, "k1000")
        _, wide_sticky_k = create(cluster, 1000, "ks1000")
        bootstrap = cluster.bootstrap_servers
        out = {"shoal": {"4 partitions": shoal_throughput(cluster, four, records),
                         "1000 partitions": shoal_throughput(cluster, wide, records),
                         "1000 partitions, keyless": shoal_throughput(cluster, wide_sticky, records, keyless=True)},
               "confluent-kafka through the gateway": {
                   "4 partitions": confluent_throughput(bootstrap, four_k, records),
                   "1000 partitions": confluent_throughput(bootstrap, wide_k, records),
                   "1000 partitions, keyless": confluent_throughput(bootstrap, wide_sticky_k, records, keyless=True)}}
        for client in out.values():
            for wide_case in ("1000 partitions", "1000 partitions, keyless"):
                for side in ("produce", "consume"):
                    client[f"{side}: {wide_case} over 4"] = round(
                        client[wide_case][side]["records_per_s"] / client["4 partitions"][side]["records_per_s"], 2)
        out["reload"] = reload(cluster)
        return out
    finally:
        cluster.shutdown()


def reload(cluster: Cluster) -> dict:
    host = cluster.partition_host("t1000-0", 0)
    before = ray.get(host.status.remote(), timeout=60)
    started = time.perf_counter()
    os.kill(before["pid"], signal.SIGKILL)
    while True:
        try:
            status = ray.get(host.ready.remote(), timeout=120)
            if status["pid"] != before["pid"]:
                break
        except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError, ray.exceptions.GetTimeoutError):
            pass
        time.sleep(0.05)
    return {"partitions": status["partitions"], "seconds_until_serving": round(time.perf_counter() - started, 2),
            "reload_seconds": round(status["reload_seconds"], 2)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=100000)
    parser.add_argument("--sizes", default="10,100,1000,2000")
    args = parser.parse_args()
    with contextlib.redirect_stdout(sys.stderr):
        init_ray()
        summary = {"create": creation([int(s) for s in args.sizes.split(",")]),
                   **throughput_and_reload(args.records)}
        ray.shutdown()
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
