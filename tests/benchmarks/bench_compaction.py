"""Compaction of a group coordinator log by Spark on RayDP, and what it does to load time.

A __consumer_offsets log holds 10,000 offset keys (100 groups x 100 partitions) each
committed 100 times: 1,000,000 OffsetCommit records over closed segments. Measured: the
compaction job's time and records/s, the log's size before and after, and the time a group
coordinator takes to load the log before and after. Prints JSON.

    python tests/benchmarks/bench_compaction.py [--keys 10000] [--updates 100]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from runtime.codec import encode_records  # noqa: E402
from runtime.group.records import offset_commit_record  # noqa: E402
from runtime.log import FileLog, LogConfig  # noqa: E402
from spark_bridge.compaction import compact_log, load_shard, state_differences, state_digest  # noqa: E402
from spark_bridge.session import spark_session  # noqa: E402
from tests.benchmarks.quiet_ray import init_ray  # noqa: E402

T0 = 1_700_000_000_000
BATCH = 500  # records per batch, about what a busy coordinator's linger gathers


def write_log(directory: str, keys: int, updates: int, segment_bytes: int) -> FileLog:
    log = FileLog(directory, LogConfig(segment_bytes=segment_bytes, fsync=False))
    groups = max(1, keys // 100)
    for u in range(updates):
        now = T0 + u * 1000
        records = [offset_commit_record(f"group-{k % groups}", "events", k // groups, u * 10 + k % 7, 0, "",
                                        now) for k in range(keys)]
        for i in range(0, keys, BATCH):
            chunk = records[i:i + BATCH]
            log.append(encode_records(chunk), len(chunk), now)
    log.flush()
    log.roll()  # every record in a closed segment: the whole log is compactable
    log.close()
    return log


def shard_factory():
    try:
        from runtime.group.shard import GroupCoordinatorShard
        return GroupCoordinatorShard, "GroupCoordinatorShard"
    except ImportError:
        raise SystemExit("the group coordinator (runtime.group.shard) is needed for this benchmark")


def log_bytes(directory: str) -> int:
    return sum(os.path.getsize(os.path.join(directory, n)) for n in os.listdir(directory) if n.endswith(".log"))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--updates", type=int, default=100)
    parser.add_argument("--segment-bytes", type=int, default=8 * 1024 * 1024)
    parser.add_argument("--executor-cores", type=int, default=2)
    args = parser.parse_args()
    factory, shard_name = shard_factory()

    import ray
    init_ray(num_cpus=max(2, args.executor_cores))
    with tempfile.TemporaryDirectory() as tmp:
        directory = os.path.join(tmp, "__consumer_offsets-0")
        started = time.perf_counter()
        write_log(directory, args.keys, args.updates, args.segment_bytes)
        write_seconds = time.perf_counter() - started
        size_before = log_bytes(directory)
        shard, before, load_before = load_shard(directory, factory)
        digest_before = state_digest(shard)

        started = time.perf_counter()
        with spark_session("bench-compaction", num_executors=1, executor_cores=args.executor_cores) as spark:
            spark_start = time.perf_counter() - started
            result = compact_log(spark, directory, now_ms=T0 + args.updates * 1000)
        size_after = log_bytes(directory)
        compacted, after, load_after = load_shard(directory, factory)
        same_state = state_digest(compacted) == digest_before
        differences = state_differences(shard, compacted, limit=3)
    ray.shutdown()

    print(json.dumps({
        "benchmark": "compaction",
        "conditions": {"keys": args.keys, "updates_per_key": args.updates, "records": args.keys * args.updates,
                       "record_type": "OffsetCommit", "records_per_batch": BATCH,
                       "segment_bytes": args.segment_bytes, "spark_executors": 1,
                       "executor_cores": args.executor_cores, "machine_cpus": os.cpu_count(), "shard": shard_name},
        "write_seconds": round(write_seconds, 2),
        "spark_start_seconds": round(spark_start, 2),
        "compaction": {"seconds": round(result.seconds, 2),
                       "records_per_second": round(result.records_in / result.seconds),
                       "segments_in": result.segments_in, "records_in": result.records_in,
                       "records_out": result.records_out},
        "log_bytes": {"before": size_before, "after": size_after, "ratio": round(size_before / size_after, 1)},
        "load": {"seconds_before": round(load_before, 3), "seconds_after": round(load_after, 3),
                 "records_before": before.records, "records_after": after.records,
                 "speedup": round(load_before / load_after, 1), "goal_speedup": 10},
        "same_state_after_load": same_state,
        "state_differences": differences,
    }, indent=1))


if __name__ == "__main__":
    main()
