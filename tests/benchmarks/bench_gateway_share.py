"""Share groups through the Kafka gateway: confluent-kafka's ShareConsumer (librdkafka's
KIP-932 client, one thread each) with explicit acknowledgement, 1, 2 and 4 consumers on a
4-partition topic of 1 KiB records, beside shoal's own share consumers on the same records in
the same run (bench_share.share_consume). Each run is a fresh share group reading from the
earliest offset. Goal: 15,692 records/s with confluent's client (Kafka's own share consumer
on a single-broker laptop, apache/kafka PR #19928), and its ratio to shoal's own. Prints JSON.

    python tests/benchmarks/bench_gateway_share.py [--records 40000]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

import ray  # noqa: E402
from confluent_kafka import AcknowledgeType, ShareConsumer  # noqa: E402

from actors import Cluster, naming  # noqa: E402
from tests.benchmarks.bench_share import BATCH, RECORD, share_consume  # noqa: E402
from tests.benchmarks.quiet_ray import init_ray  # noqa: E402

GOAL = 15_692
TOPIC = "bench-share"
PARTITIONS = 4


def confluent_consume(cluster: Cluster, group: str, records: int, consumers: int) -> dict:
    clients = [ShareConsumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group,
                              "share.acknowledgement.mode": "explicit", "log_level": 3})
               for _ in range(consumers)]
    for c in clients:
        c.subscribe([TOPIC])
    counts = [0] * consumers
    lock = threading.Lock()
    total = [0]
    first = [None]  # the clock starts at the first record: joining is not the data path

    def consume(i: int) -> None:
        c = clients[i]
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            with lock:
                if total[0] >= records:
                    break
            batch = [m for m in c.poll(0.5) if m.error() is None]
            for m in batch:
                c.acknowledge(m, AcknowledgeType.ACCEPT)
            with lock:
                if batch and first[0] is None:
                    first[0] = time.perf_counter()
                counts[i] += len(batch)
                total[0] += len(batch)
        c.commit_sync(60)
    threads = [threading.Thread(target=consume, args=(i,)) for i in range(consumers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - (first[0] or time.perf_counter())
    for c in clients:
        c.close()
    for p in range(PARTITIONS):  # free the processes before the next run
        try:
            ray.kill(ray.get_actor(naming.share_partition(group, TOPIC, p), namespace=cluster.namespace))
        except ValueError:
            pass
    return {"consumers": consumers, "records": total[0], "seconds": round(elapsed, 2),
            "records_per_s": round(total[0] / elapsed) if elapsed else 0, "per_consumer": counts}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=40_000)
    args = parser.parse_args()
    init_ray(num_cpus=2)
    cluster = Cluster.local(config={"log.flush.fsync": False, "share.auto.offset.reset": "earliest",
                                    "listeners": "PLAINTEXT://127.0.0.1:0",
                                    "group.share.heartbeat.interval.ms": 500,
                                    "group.share.min.heartbeat.interval.ms": 500})
    try:
        cluster.create_topic(TOPIC, PARTITIONS)
        value = os.urandom(RECORD)
        with cluster.producer(linger_ms=5, batch_size=BATCH * (RECORD + 16)) as producer:
            for i in range(args.records):
                producer.send(TOPIC, value, partition=i % PARTITIONS)
            producer.flush()
        runs = []
        for consumers in (1, 2, 4):
            kafka = confluent_consume(cluster, f"bench-kafka-{consumers}", args.records, consumers)
            shoal = share_consume(cluster, f"bench-shoal-{consumers}", TOPIC, PARTITIONS, args.records, consumers)
            runs.append({"consumers": consumers, "confluent": kafka, "shoal": shoal,
                         "ratio_confluent_to_shoal": round(kafka["records_per_s"] / shoal["records_per_s"], 2)})
        best = max(r["confluent"]["records_per_s"] for r in runs)
        complete = all(r["confluent"]["records"] >= args.records for r in runs)  # a stalled consumer fails it
        print(json.dumps({
            "benchmark": "gateway_share_consume_explicit_ack",
            "conditions": {"records": args.records, "record_bytes": RECORD, "partitions": PARTITIONS,
                           "fsync": False, "cpus": os.cpu_count(),
                           "load_average_1m": round(os.getloadavg()[0], 1)},
            "runs": runs,
            "goal_records_per_s": GOAL,
            "every_run_complete": complete,
            "goal_met": complete and best >= GOAL,
        }, indent=2))
    finally:
        cluster.shutdown()
        ray.shutdown()


if __name__ == "__main__":
    main()
