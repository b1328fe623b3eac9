"""Transactions through the Kafka gateway: confluent-kafka's transactional producer, committing
every 100 ms, against its idempotent producer, 1 KiB records, in alternating pairs of runs of
the same length in the same run (so both see the same machine). The overhead is 1 - the
transactional rate / the idempotent rate of a pair; the median pair is reported. Kafka's own
overhead is about 3%; goal: under 5% (the C client has its own sender thread, which shoal's
Python producer, at 10-19%, does not). Prints JSON.

    python tests/benchmarks/bench_gateway_txn.py [--seconds 5] [--pairs 3]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

import ray  # noqa: E402
from confluent_kafka import Producer  # noqa: E402

from actors import Cluster  # noqa: E402
from tests.benchmarks.quiet_ray import init_ray  # noqa: E402

RECORD = 1024
PARTITIONS = 4
COMMIT_EVERY_S = 0.1
GOAL = 0.05


def run(bootstrap: str, seconds: float, transactional_id: str | None) -> float:
    """Records/s acknowledged by one producer over `seconds`."""
    config = {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5, "acks": "all"}
    if transactional_id:
        config["transactional.id"] = transactional_id
    p = Producer(config)
    if transactional_id:
        p.init_transactions(30)
        p.begin_transaction()
    value = os.urandom(RECORD)
    sent = 0
    started = time.perf_counter()
    last_commit = started
    while time.perf_counter() - started < seconds:
        try:
            p.produce("bench-txn", value, partition=sent % PARTITIONS)
            sent += 1
        except BufferError:
            p.poll(0.001)
        now = time.perf_counter()
        if transactional_id and now - last_commit >= COMMIT_EVERY_S:
            p.commit_transaction(30)
            p.begin_transaction()
            last_commit = now
        if sent % 1000 == 0:
            p.poll(0)
    if transactional_id:
        p.commit_transaction(30)
    else:
        p.flush(30)
    return sent / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--pairs", type=int, default=3)
    args = parser.parse_args()
    init_ray(num_cpus=2)
    cluster = Cluster.local(config={"log.flush.fsync": False, "listeners": "PLAINTEXT://127.0.0.1:0"})
    try:
        cluster.create_topic("bench-txn", PARTITIONS)
        bootstrap = cluster.bootstrap_servers
        run(bootstrap, 1.0, None)  # warm: connections, partition leaders, the coordinator
        pairs = []
        for i in range(args.pairs):
            idempotent = run(bootstrap, args.seconds, None)
            transactional = run(bootstrap, args.seconds, f"bench-txn-{i}")
            pairs.append({"idempotent_records_per_s": round(idempotent),
                          "transactional_records_per_s": round(transactional),
                          "overhead": round(1 - transactional / idempotent, 3)})
        overhead = statistics.median(p["overhead"] for p in pairs)
        print(json.dumps({
            "benchmark": "gateway_transactions_overhead",
            "conditions": {"record_bytes": RECORD, "partitions": PARTITIONS, "commit_every_ms": 100,
                           "seconds_per_run": args.seconds, "fsync": False, "cpus": os.cpu_count(),
                           "load_average_1m": round(os.getloadavg()[0], 1)},
            "pairs": pairs,
            "median_overhead": overhead,
            "goal_overhead": GOAL,
            "goal_met": overhead < GOAL,
        }, indent=2))
    finally:
        cluster.shutdown()
        ray.shutdown()


if __name__ == "__main__":
    main()
