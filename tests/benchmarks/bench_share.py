"""Produce, then share-consume 1 KiB records with explicit acknowledgement: 1, 2 and 4 share
consumers (one thread each in this process) on a 4-partition topic, each run in a fresh share
group reading from the earliest offset. The peer is the raw Ray transport in the same run: an
empty async actor method returning the same 500-record payloads, with as many callers in
flight as there are consumers. Goal: 15,700 records/s in total with 4 consumers (Kafka's
share-consumer perf test, one consumer on a single-broker laptop, apache/kafka PR #19928).
Prints JSON.

    python tests/benchmarks/bench_share.py [--records 40000]
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

import ray  # noqa: E402

from actors import AcknowledgeType, Cluster, naming  # noqa: E402
from runtime.topics.data import encode_records  # noqa: E402

RECORD = 1024
BATCH = 500
PARTITIONS = 4
GOAL = 15_700


@ray.remote(num_cpus=0)
class Sink:
    """The raw transport: an actor method that hands back a payload it already holds."""

    async def keep(self, payload: bytes) -> None:
        self._payload = payload

    async def give(self) -> bytes:
        return self._payload


def raw_transport(records: int, callers: int) -> float:
    """Records per second moved as 500-record payloads by `callers` concurrent callers."""
    payload = encode_records([(0, None, os.urandom(RECORD), []) for _ in range(BATCH)])
    sink = Sink.remote()
    ray.get(sink.keep.remote(payload))
    calls = records // BATCH
    started = time.perf_counter()

    def caller(n: int) -> None:
        for _ in range(n):
            ray.get(sink.give.remote())
    threads = [threading.Thread(target=caller, args=(calls // callers,)) for _ in range(callers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - started
    ray.kill(sink)
    return (calls // callers) * callers * BATCH / elapsed


def share_consume(cluster: Cluster, group: str, records: int, consumers: int) -> dict:
    clients = [cluster.share_consumer(group, share_acknowledgement_mode="explicit", max_poll_records=BATCH)
               for _ in range(consumers)]
    for c in clients:
        c.subscribe("bench-share")
    # Assigned and loaded before the clock starts: joining is not the data path.
    deadline = time.monotonic() + 60
    while set().union(*(c.assignment() for c in clients)) != {(("bench-share", p)) for p in range(PARTITIONS)}:
        if time.monotonic() > deadline:
            raise RuntimeError("the share group did not assign every partition")
        time.sleep(0.1)
    counts = [0] * consumers
    lock = threading.Lock()
    total = [0]
    started = [None]  # at the first record: the SharePartitions are made by the first fetches

    def consume(i: int) -> None:
        c = clients[i]
        while True:
            with lock:
                if total[0] >= records:
                    break
            batch = c.poll(0.5)
            for r in batch:
                c.acknowledge(r, AcknowledgeType.ACCEPT)
            counts[i] += len(batch)
            with lock:
                if batch and started[0] is None:
                    started[0] = time.perf_counter()
                total[0] += len(batch)
        c.commit_sync()
    threads = [threading.Thread(target=consume, args=(i,)) for i in range(consumers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - started[0]
    for c in clients:
        c.close()
    for p in range(PARTITIONS):  # free the processes before the next run
        try:
            ray.kill(ray.get_actor(naming.share_partition(group, "bench-share", p), namespace=cluster.namespace))
        except ValueError:
            pass
    return {"consumers": consumers, "records": total[0], "seconds": round(elapsed, 2),
            "records_per_s": round(total[0] / elapsed), "per_consumer": counts}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=40_000)
    args = parser.parse_args()
    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level=logging.WARNING)
    cluster = Cluster.local(config={"log.flush.fsync": False, "share.auto.offset.reset": "earliest",
                                    "group.share.heartbeat.interval.ms": 500,
                                    "group.share.min.heartbeat.interval.ms": 500})
    try:
        cluster.create_topic("bench-share", PARTITIONS)
        value = os.urandom(RECORD)
        started = time.perf_counter()
        with cluster.producer(linger_ms=5, batch_size=BATCH * (RECORD + 16)) as producer:
            for i in range(args.records):
                producer.send("bench-share", value, partition=i % PARTITIONS)
            producer.flush()
        produce_s = time.perf_counter() - started
        runs = []
        for consumers in (1, 2, 4):
            run = share_consume(cluster, f"bench-{consumers}", args.records, consumers)
            raw = raw_transport(args.records, consumers)
            run["raw_ray_records_per_s"] = round(raw)
            run["ratio_to_raw"] = round(run["records_per_s"] / raw, 3)
            runs.append(run)
        four = runs[-1]["records_per_s"]
        print(json.dumps({
            "benchmark": "share_consume_explicit_ack",
            "conditions": {"records": args.records, "record_bytes": RECORD, "partitions": PARTITIONS,
                           "max_poll_records": BATCH, "fsync": False, "cpus": os.cpu_count(),
                           "load_average_1m": round(os.getloadavg()[0], 1)},
            "produce_records_per_s": round(args.records / produce_s),
            "runs": runs,
            "goal_records_per_s_with_4_consumers": GOAL,
            "goal_met": four >= GOAL,
        }, indent=2))
    finally:
        cluster.shutdown()
        ray.shutdown()


if __name__ == "__main__":
    main()
