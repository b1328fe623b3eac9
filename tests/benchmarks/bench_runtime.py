"""Benchmark of the runtime core: group-commit appends and log loading.

    python tests/benchmarks/bench_runtime.py [--records N] [--quick]

Prints one JSON document. Everything runs on the real CoordinatorRuntime over a real
FileLog in a temporary folder (on the disk of the system's temp dir).

* append: each write operation commits one offset-commit-like record; the batch is flushed
  (written, and fsynced when fsync is on) after 1, 10 or 100 operations, which is what
  append.linger.ms gathers under that load. Responses are released at the flush.
* load: a 1,000,000-record log (batches of 100, 100,000 distinct keys each committed ten
  times) replayed into a shard that keeps the newest value per key in a dict, as Kafka's
  OffsetMetadataManager does. Kafka's figure (apache/kafka PR #20547) is for its Java loader
  on a mocked log, so the ratio compares our whole path (file read, CRC, msgpack, replay)
  with Java's replay alone.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from typing import NamedTuple

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

from runtime.codec import Record, encode_records, register  # noqa: E402
from runtime.coordinator import CoordinatorRuntime, CoordinatorShard, Result  # noqa: E402
from runtime.log import FileLog, LogConfig  # noqa: E402

# apache/kafka PR #20547: the Java loader replays about 4.4 million records/s (mocked log).
KAFKA_LOAD_RECORDS_PER_S = 4_400_000
LOAD_GOAL_RECORDS_PER_S = 300_000


class BenchOffsetKey(NamedTuple):
    group: str
    topic: str
    partition: int


class BenchOffsetValue(NamedTuple):
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int


register(990, BenchOffsetKey, BenchOffsetValue)


class OffsetShard(CoordinatorShard):
    """Keeps the newest offset per (group, topic, partition), like OffsetMetadataManager."""

    def __init__(self, context) -> None:
        self.offsets: dict[BenchOffsetKey, BenchOffsetValue] = {}

    def replay(self, offset: int, record: Record) -> None:
        if record.value is None:
            self.offsets.pop(record.key, None)
        else:
            self.offsets[record.key] = record.value


DISTINCT_KEYS = 100_000  # 1,000 groups x 5 topics x 20 partitions


def offset_record(i: int) -> Record:
    """The i-th commit: every (group, topic, partition) is committed once per 100,000."""
    return Record(BenchOffsetKey(f"group-{i % 1000}", f"topic-{(i // 1000) % 5}", (i // 5000) % 20),
                  BenchOffsetValue(i, 5, "", 1_700_000_000_000 + i))


def bench_append(directory: str, ops_per_batch: int, fsync: bool, total_ops: int) -> dict:
    """Each operation commits one offset; a batch is flushed after `ops_per_batch` of them
    (what append.linger.ms gathers under load)."""
    runtime = CoordinatorRuntime("__bench-0", 0, OffsetShard,
                                 lambda: FileLog(directory, LogConfig(fsync=fsync)),
                                 {"append.linger.ms": 1_000_000})
    runtime.load_all(0)
    records = [offset_record(i) for i in range(total_ops)]
    start = time.perf_counter()
    pending = []
    for i, record in enumerate(records):
        pending.append(runtime.write(lambda shard, now, r=record: Result([r], None), i))
        if (i + 1) % ops_per_batch == 0:
            runtime.flush(i)
    runtime.flush(total_ops)
    elapsed = time.perf_counter() - start
    assert all(p.done and p.error is None for p in pending)
    runtime.close()
    return {"ops_per_batch": ops_per_batch, "fsync": fsync, "records": total_ops, "records_per_op": 1,
            "seconds": round(elapsed, 4), "records_per_s": round(total_ops / elapsed),
            "batches_per_s": round(total_ops / ops_per_batch / elapsed)}


def write_load_log(directory: str, records: int, per_batch: int) -> int:
    log = FileLog(directory, LogConfig(fsync=False))
    for start in range(0, records, per_batch):
        batch = [offset_record(i) for i in range(start, min(start + per_batch, records))]
        log.append(encode_records(batch), len(batch), start)
    log.flush()
    size = sum(s.size for s in log.manifest.segments)
    log.close()
    return size


def bench_load(directory: str, records: int, per_batch: int, repeats: int) -> dict:
    size = write_load_log(directory, records, per_batch)
    times, cpu_times = [], []
    load_average = os.getloadavg()[0]
    for _ in range(repeats):
        runtime = CoordinatorRuntime("__bench-0", 0, OffsetShard,
                                     lambda: FileLog(directory, LogConfig(fsync=False)))
        start, cpu_start = time.perf_counter(), time.process_time()
        progress = runtime.load_all(0)
        elapsed = time.perf_counter() - start
        cpu_times.append(time.process_time() - cpu_start)
        assert progress.records == records
        assert len(runtime.shard.offsets) == min(records, DISTINCT_KEYS)
        runtime.close()
        times.append(elapsed)
    best = min(times)
    rate = records / best
    return {"records": records, "distinct_keys": min(records, DISTINCT_KEYS), "records_per_batch": per_batch,
            "log_bytes": size,
            "seconds": round(best, 4), "records_per_s": round(rate),
            "goal_records_per_s": LOAD_GOAL_RECORDS_PER_S, "meets_goal": rate >= LOAD_GOAL_RECORDS_PER_S,
            "kafka_records_per_s": KAFKA_LOAD_RECORDS_PER_S,
            "ratio_to_kafka": round(rate / KAFKA_LOAD_RECORDS_PER_S, 4),
            "median_records_per_s": round(records / statistics.median(times)),
            "records_per_cpu_s": round(records / min(cpu_times)),
            "load_average_1m": round(load_average, 2),
            "repeats": repeats, "figure": "records_per_s is wall clock, the best of the repeats; "
                                          "records_per_cpu_s counts this process's CPU time only, "
                                          "which other work on the machine disturbs less"}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=1_000_000, help="records in the load test")
    parser.add_argument("--quick", action="store_true", help="smaller runs, for a smoke test")
    args = parser.parse_args()
    append_ops = {1: 2_000, 10: 20_000, 100: 100_000}
    if args.quick:
        append_ops = {k: v // 10 for k, v in append_ops.items()}
        args.records = min(args.records, 100_000)
    results = {"machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                           "platform": platform.platform()},
               "append": [], "load": None}
    with tempfile.TemporaryDirectory(prefix="shoal-bench-") as tmp:
        for fsync in (True, False):
            for ops_per_batch, total in append_ops.items():
                d = os.path.join(tmp, f"append-{ops_per_batch}-{fsync}")
                results["append"].append(bench_append(d, ops_per_batch, fsync, total))
        results["load"] = bench_load(os.path.join(tmp, "load"), args.records, 100, repeats=3)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
