"""Transactional versus plain (idempotent) produce of 1 KiB records, with a commit every
100 ms, through the Producer client on one Cluster.local(). Kafka loses about 3% of its
throughput in this setting (Confluent, "Transactions in Apache Kafka"); the goal here is
under 10%. Prints JSON.

    python tests/benchmarks/bench_transactions.py [--seconds 4] [--runs 10] [--partitions 1] [--fsync]

Runs come in pairs, one of each kind, and each pair swaps the order of the one before, so that
a noisy neighbour or a drift of the machine costs both kinds alike. The loss reported is the
median of the pairs' losses (each pair measured under the same conditions), with the loss of all
records over all seconds of each kind and the quartiles of the pairs' losses beside it; the rates
are the medians of their runs, and every run is printed.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

from actors import Cluster  # noqa: E402
from runtime.messages.topics import LATEST_TIMESTAMP, READ_COMMITTED, FetchRequest, ListOffsetsRequest  # noqa: E402
from runtime.topics.isolation import filter_aborted  # noqa: E402
from tests.benchmarks.quiet_ray import init_ray  # noqa: E402

RECORD = 1024


def produce(cluster: Cluster, topic: str, seconds: float, commit_every_s: float | None, config: dict) -> dict:
    """Send as fast as the producer takes records for `seconds`; with a commit interval, in
    transactions of that length. Returns records acknowledged per second."""
    value = os.urandom(RECORD)
    transactional = commit_every_s is not None
    producer = cluster.producer(transactional_id=f"bench-{time.monotonic_ns()}" if transactional else None,
                                **config)
    if transactional:
        producer.init_transactions()
    sent = 0
    commit_ms: list[float] = []
    window = 1000  # records between flow-control checks: the producer has no buffer.memory bound
    outstanding: list = []
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        if transactional:
            producer.begin_transaction()
        txn_started = time.perf_counter()
        while True:
            outstanding += [producer.send(topic, value) for _ in range(window)]
            sent += window
            if len(outstanding) > 4 * window:
                outstanding[-3 * window].result()  # at most ~3 windows queued
                del outstanding[:-3 * window]
            now = time.perf_counter()
            if now - started >= seconds or (transactional and now - txn_started >= commit_every_s):
                break
        if transactional:
            commit_started = time.perf_counter()
            producer.commit_transaction()
            commit_ms.append((time.perf_counter() - commit_started) * 1000)
    producer.flush()
    elapsed = time.perf_counter() - started
    producer.close()
    return {"records": sent, "seconds": round(elapsed, 3), "records_per_s": round(sent / elapsed),
            "mb_per_s": round(sent * RECORD / elapsed / 1e6, 1), "commits": len(commit_ms),
            "commit_ms_median": round(statistics.median(commit_ms), 2) if commit_ms else None}


def end_offsets(cluster: Cluster, topic: str, partitions: int) -> list[int]:
    import ray
    return [ray.get(cluster.partition_leader(topic, p).list_offsets.remote(
        ListOffsetsRequest(topic, p, LATEST_TIMESTAMP))).offset for p in range(partitions)]


def committed_records(cluster: Cluster, topic: str, start_offsets: list[int]) -> int:
    """Records a read_committed consumer sees from `start_offsets` on."""
    import ray
    total = 0
    for p, offset in enumerate(start_offsets):
        leader = cluster.partition_leader(topic, p)
        while True:
            r = ray.get(leader.fetch.remote(FetchRequest(topic, p, offset, max_wait_ms=0,
                                                         isolation_level=READ_COMMITTED)))
            if not r.batches:
                break
            total += sum(b.last_offset - b.base_offset + 1 for b in filter_aborted(r.batches, r.aborted_transactions))
            offset = r.batches[-1].last_offset + 1
    return total


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=4.0, help="length of each run")
    parser.add_argument("--runs", type=int, default=10, help="runs of each kind")
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--commit-ms", type=int, default=100)
    parser.add_argument("--fsync", action="store_true", help="fsync every flush (the production default)")
    parser.add_argument("--batch-kb", type=int, default=256,
                        help="the producer's batch_size; under Ray's 100 KiB limit a request travels inline, "
                             "above it through the object store")
    parser.add_argument("--data-parent", default="/dev/shm" if os.path.isdir("/dev/shm") else None,
                        help="where the cluster's data folder goes (default: /dev/shm if there is one)")
    args = parser.parse_args()
    config = {"linger_ms": 5, "batch_size": args.batch_kb * 1024}
    init_ray()
    # Gigabytes of records, in memory where the machine has a tmpfs: the page cache's
    # write-back otherwise stalls the leaders at random and swamps the difference measured.
    with tempfile.TemporaryDirectory(prefix="shoal-bench-txn-", dir=args.data_parent) as data_dir, \
            Cluster.local(data_dir, {"log.flush.fsync": args.fsync,
                                     "log.retention.check.interval.ms": 3600000}) as cluster:
        runs: dict[str, list[dict]] = {"plain": [], "transactional": []}
        for kind in runs:  # one topic (one leader actor) per kind, for every run
            cluster.create_topic(kind, args.partitions)
        pair_losses = []
        for i in range(args.runs):
            for kind in (("plain", "transactional") if i % 2 == 0 else ("transactional", "plain")):
                start = end_offsets(cluster, kind, args.partitions)
                result = produce(cluster, kind, args.seconds, args.commit_ms / 1000 if kind != "plain" else None,
                                 config)
                if kind == "transactional":
                    result["read_committed_records"] = committed_records(cluster, kind, start)
                runs[kind].append(result)
            pair_losses.append(round(1 - runs["transactional"][-1]["records_per_s"]
                                     / runs["plain"][-1]["records_per_s"], 3))
        plain = statistics.median(r["records_per_s"] for r in runs["plain"])
        txn = statistics.median(r["records_per_s"] for r in runs["transactional"])

        def overall(kind: str) -> float:
            return sum(r["records"] for r in runs[kind]) / sum(r["seconds"] for r in runs[kind])
        print(json.dumps({
            "benchmark": "transactional vs plain produce",
            "conditions": {"record_bytes": RECORD, "commit_interval_ms": args.commit_ms,
                           "seconds_per_run": args.seconds,
                           "runs": args.runs, "partitions": args.partitions, "fsync": args.fsync,
                           "producer": config, "plain": "idempotent producer (the default)", "cpus": os.cpu_count()},
            "plain_records_per_s": plain,
            "transactional_records_per_s": txn,
            "throughput_loss": statistics.median(pair_losses),
            # How far apart pairs of the same code land on this machine: a difference of the
            # loss smaller than this spread needs many pairs before it means anything.
            "pair_loss_quartiles": ([round(q, 3) for q in statistics.quantiles(pair_losses, n=4)]
                                    if len(pair_losses) > 1 else None),
            # Every record over every second of each kind: a check on the median, which a
            # few wild pairs cannot move but which ignores how far they go.
            "overall_throughput_loss": round(1 - overall("transactional") / overall("plain"), 3),
            "commit_ms_median": statistics.median(r["commit_ms_median"] for r in runs["transactional"]),
            "every_committed_record_readable": all(r["read_committed_records"] == r["records"]
                                                   for r in runs["transactional"]),
            "pair_losses": pair_losses,
            "goal": "loss under 0.10 (Kafka: about 0.03)",
            "runs": runs,
        }, indent=2))


if __name__ == "__main__":
    main()
