"""KIP-848 steady-state heartbeats per second on one group coordinator shard, in process,
through the real CoordinatorRuntime and state log (fsync off). Prints JSON.

G groups of M members join topic "topic" (M * 2 partitions) with the uniform assignor and
reconcile until every group is Stable; then every member heartbeats H times with its
current epoch and nothing changed (what a live consumer sends every
group.consumer.heartbeat.interval.ms), the clock moving 1 ms per round so that every
heartbeat reschedules its session timer. Goal: at least 20,000 heartbeats per second.
The machine is shared, so each figure is measured in several passes and reported as the
best and the median pass.

Run: python tests/benchmarks/bench_consumer_group.py [--quick]
"""
from __future__ import annotations

import json
import os
import platform
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

from runtime.group.shard import GroupCoordinatorShard  # noqa: E402
from runtime.messages.consumer import (  # noqa: E402
    ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatRequestTopicPartitions,
)
from runtime.testing import ShardHarness  # noqa: E402

GOAL = 20_000
PASSES = 5


def _stable_groups(h: ShardHarness, groups: int, members: int) -> dict:
    """Join and reconcile every member; returns (group, member) -> (epoch, request)."""
    epochs = {}
    owned: dict = {}
    for g in range(groups):
        for i in range(members):
            gid, mid = f"group-{g}", f"m-{g}-{i}"
            req = ConsumerGroupHeartbeatRequest(gid, mid, 0, rebalance_timeout_ms=60_000,
                                                subscribed_topic_names=("topic",), topic_partitions=())
            epochs[(gid, mid)] = h.call(lambda s, now, req=req, mid=mid: s.consumer_group_heartbeat(req, now, mid))
    for _ in range(4):  # revoke, then assign: a few rounds settle every member
        for (gid, mid), response in list(epochs.items()):
            if response.assignment is not None:
                owned[(gid, mid)] = tuple(ConsumerGroupHeartbeatRequestTopicPartitions(tp.topic_name, tp.partitions)
                                          for tp in response.assignment.topic_partitions)
            req = ConsumerGroupHeartbeatRequest(gid, mid, response.member_epoch,
                                                topic_partitions=owned.get((gid, mid), ()))
            epochs[(gid, mid)] = h.call(lambda s, now, req=req, mid=mid: s.consumer_group_heartbeat(req, now, mid))
    assert all(str(g.state) == "Stable" for g in h.shard.groups.values())
    return {key: ConsumerGroupHeartbeatRequest(key[0], key[1], response.member_epoch,
                                               topic_partitions=owned.get(key, ()))
            for key, response in epochs.items()}


def run(groups: int, members: int, heartbeats: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        h = ShardHarness(tmp, GroupCoordinatorShard, config={"group.consumer.assignors": "uniform"})
        h.call(lambda s, now: s.update_topics({"topic": members * 2}, now))
        requests = list(_stable_groups(h, groups, members).items())
        rt = h.runtime
        ops = [lambda s, now, req=req, mid=key[1]: s.consumer_group_heartbeat(req, now, mid)
               for key, req in requests]

        def through_runtime() -> float:
            start = time.perf_counter()
            for _ in range(heartbeats):
                h.clock.now_ms += 1
                now = h.clock.now_ms
                for op in ops:
                    pending = rt.write(op, now)
            elapsed = time.perf_counter() - start
            assert pending.done and pending.result().assignment is None
            assert rt.pending_records == 0  # steady heartbeats write nothing
            return elapsed

        def shard_only() -> float:
            shard = rt.shard
            start = time.perf_counter()
            for _ in range(heartbeats):
                h.clock.now_ms += 1
                now = h.clock.now_ms
                for op in ops:
                    op(shard, now)
            return time.perf_counter() - start

        runtime_passes = sorted(through_runtime() for _ in range(PASSES))
        shard_passes = sorted(shard_only() for _ in range(PASSES))
        h.runtime.close()
    total = groups * members * heartbeats
    best, median = total / runtime_passes[0], total / runtime_passes[PASSES // 2]
    return {"groups": groups, "members_per_group": members, "heartbeats_per_member_per_pass": heartbeats,
            "heartbeats_per_pass": total, "passes": PASSES,
            "heartbeats_per_second_best": round(best), "heartbeats_per_second_median": round(median),
            "heartbeats_per_second_shard_only_best": round(total / shard_passes[0]),
            "goal": GOAL, "ratio_to_goal_median": round(median / GOAL, 2)}


def main() -> None:
    quick = "--quick" in sys.argv
    sizes = [(5, 20, 20)] if quick else [(1, 100, 200), (100, 10, 20), (1, 2000, 10)]
    print(json.dumps({
        "benchmark": "KIP-848 steady-state ConsumerGroupHeartbeat through CoordinatorRuntime, one shard, in process",
        "conditions": {"python": platform.python_version(), "machine": platform.machine(), "fsync": False,
                       "cpus": os.cpu_count(), "load_average_1m": round(os.getloadavg()[0], 1),
                       "assignor": "uniform"},
        "results": [run(g, m, hb) for g, m, hb in sizes],
    }, indent=2))


if __name__ == "__main__":
    main()
