"""Compaction pipeline: a workload commits offsets for a while, a Spark job on Ray compacts
the group coordinator's log, the coordinator restarts and loads faster, and the lag report
is printed.

    python examples/compaction_pipeline.py [--data-dir DIR] [--commits 500]

The workload drives the group coordinator shard through its CoordinatorRuntime and writes
topic data the way a partition leader does, into the same folders a `shoal up` deployment
uses; point `shoal compact --all` and `shoal report lag` at the data dir to do the same
from the command line.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from runtime.coordinator import CoordinatorRuntime  # noqa: E402
from runtime.group.shard import GroupCoordinatorShard  # noqa: E402
from runtime.log import FileLog, LogConfig  # noqa: E402
from runtime.messages.group import (OffsetCommitRequest, OffsetCommitRequestPartition,  # noqa: E402
                                    OffsetCommitRequestTopic)
from runtime.topics.data import encode_records  # noqa: E402
from spark_bridge.compaction import compact_all, load_shard  # noqa: E402
from spark_bridge.session import spark_session  # noqa: E402

TOPIC, PARTITIONS, GROUPS = "orders", 8, 20
OFFSETS_LOG = "__consumer_offsets-0"


def produce(data_dir: str, records_per_partition: int, now_ms: int) -> None:
    for p in range(PARTITIONS):
        log = FileLog(os.path.join(data_dir, f"{TOPIC}-{p}"), LogConfig(fsync=False))
        for start in range(0, records_per_partition, 100):
            batch = [(now_ms, f"key-{i}".encode(), b"order") for i in range(start, min(start + 100, records_per_partition))]
            log.append(encode_records((ts, k, v, []) for ts, k, v in batch), len(batch), now_ms)
        log.flush()
        log.close()


def commit_for_a_while(data_dir: str, commits: int, now_ms: int) -> int:
    """Every group commits its position on every partition, `commits` times over."""
    directory = os.path.join(data_dir, OFFSETS_LOG)
    runtime = CoordinatorRuntime(OFFSETS_LOG, 0, GroupCoordinatorShard,
                                 lambda: FileLog(directory, LogConfig(segment_bytes=256 * 1024, fsync=False)))
    runtime.load_all(now_ms)
    for step in range(commits):
        now_ms += 100
        for g in range(GROUPS):
            request = OffsetCommitRequest(f"billing-{g}", (OffsetCommitRequestTopic(TOPIC, tuple(
                OffsetCommitRequestPartition(p, step * (g + 1) // GROUPS + p) for p in range(PARTITIONS))),))
            runtime.write(lambda shard, now: shard.offset_commit(request, now), now_ms)
        runtime.flush(now_ms)
    runtime.log.roll()  # the segment being written is closed, so all of it can be compacted
    runtime.close()
    return now_ms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", help="default: a temporary directory")
    parser.add_argument("--commits", type=int, default=500)
    args = parser.parse_args()
    data_dir = args.data_dir or tempfile.mkdtemp(prefix="shoal-compaction-")
    now_ms = 1_700_000_000_000

    produce(data_dir, 2 * args.commits, now_ms)
    now_ms = commit_for_a_while(data_dir, args.commits, now_ms)
    directory = os.path.join(data_dir, OFFSETS_LOG)
    _, before, load_before = load_shard(directory, GroupCoordinatorShard)
    print(f"workload: {before.records} offset commits in {before.bytes} bytes; the coordinator loads in "
          f"{load_before * 1000:.0f} ms")

    with spark_session("compaction-pipeline") as spark:
        for result in compact_all(spark, data_dir, now_ms=now_ms):
            print("compaction:", result)
        _, after, load_after = load_shard(directory, GroupCoordinatorShard)
        print(f"restart: {after.records} records in {after.bytes} bytes; the coordinator loads in "
              f"{load_after * 1000:.0f} ms ({load_before / load_after:.0f}x faster)")

        from spark_bridge.analytics import consumer_group_lag
        lag = consumer_group_lag(spark, data_dir)
        print("the 10 partitions that lag most:")
        lag.orderBy(lag["LAG"].desc(), "GROUP", "PARTITION").show(10, truncate=False)
    print(f"data dir: {data_dir}")


if __name__ == "__main__":
    main()
