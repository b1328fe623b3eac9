"""Heartbeats per second of a group coordinator whose disk is slow (every fsync 50 ms longer),
against a coordinator of the same deployment on the plain disk, while offset commits (which
wait for an fsync) run in parallel. Prints JSON. Goal: on the slow disk, heartbeats keep at
least 80% of their rate on the plain one.

Two group coordinators (offsets.topic.num.partitions = 2), their logs fsynced
(`log.flush.fsync`); the log of partition 0 is on `actors.testing.SlowFsyncIO` through the
`log.io.class` setting, that of partition 1 (and every other log) on the plain disk. On each,
the members of a KIP-848 consumer group heartbeat back to back, as in bench_heartbeat_ray.py
(its driver), for a fixed time, in three conditions:
* alone;
* while another group of the same coordinator commits: `COMMITTERS` committers, each
  committing every `COMMIT_INTERVAL_S` (or as soon as its last commit is answered, if that
  took longer), so both disks get the same commit load as long as they keep up;
* while `COMMITTERS` of the heartbeating members commit their own offsets that way.
Each pass runs every condition on the plain disk and then on the slow one, so that the
load of the machine weighs on both alike; medians reported, with the commits' rate and mean
latency.

Run: python tests/benchmarks/bench_slow_disk.py [--quick]
"""
from __future__ import annotations

import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.dirname(__file__))

import ray  # noqa: E402

from actors import Cluster  # noqa: E402
from bench_heartbeat_ray import PARTITIONS, TOPIC, Driver  # noqa: E402
from runtime.messages.group import (OffsetCommitRequest, OffsetCommitRequestPartition,  # noqa: E402
                                    OffsetCommitRequestTopic)
from runtime.hashing import partition_for  # noqa: E402
from runtime.messages.topics import CreatableTopic, CreateTopicsRequest  # noqa: E402
from tests.benchmarks.quiet_ray import init_ray  # noqa: E402

FSYNC_DELAY_MS = 50
COMMITTERS = 20
COMMIT_INTERVAL_S = 0.2
PARTITIONS_OF_OFFSETS = 2
SLOW, PLAIN = 0, 1  # the __consumer_offsets partitions on the slow and the plain disk


def group_on(prefix: str, partition: int) -> str:
    return next(g for g in (f"{prefix}-{i}" for i in range(1000))
                if partition_for(g, PARTITIONS_OF_OFFSETS) == partition)


class Members(Driver):
    """The heartbeating members, who can also say who they are (to commit as themselves)."""

    async def identities(self) -> dict:
        return dict(self.epochs)


class Committer:
    """`n` committers, each committing every COMMIT_INTERVAL_S for a fixed time."""

    async def run(self, coordinator, seconds: float, n: int, group: str, members: dict | None = None) -> dict:
        done, latency = 0, 0.0
        deadline = time.perf_counter() + seconds

        def topics(offset: int):
            return (OffsetCommitRequestTopic(TOPIC, (OffsetCommitRequestPartition(offset % PARTITIONS, offset),)),)

        if members:  # the heartbeating group's members commit as themselves
            requests = [lambda o, m=m, e=e: OffsetCommitRequest(group, topics(o), e, m)
                        for m, e in list(members.items())[:n]]
        else:  # another group's commits, by an admin (no members)
            requests = [lambda o: OffsetCommitRequest(group, topics(o)) for _ in range(n)]

        async def loop(make):
            nonlocal done, latency
            offset = 0
            while time.perf_counter() < deadline:
                started = time.perf_counter()
                response = await coordinator.offset_commit.remote(make(offset))
                assert all(p.error_code == 0 for t in response.topics for p in t.partitions), response
                took = time.perf_counter() - started
                latency += took
                done += 1
                offset += 1
                await asyncio.sleep(max(COMMIT_INTERVAL_S - took, 0))

        started = time.perf_counter()
        await asyncio.gather(*(loop(r) for r in requests))
        elapsed = time.perf_counter() - started
        return {"commits_per_second": done / elapsed, "commit_latency_ms": latency / max(done, 1) * 1000}


def main() -> None:
    quick = "--quick" in sys.argv
    passes, seconds, members = (1, 2.0, 50) if quick else (3, 4.0, 100)
    init_ray(num_cpus=2)
    load_before = os.getloadavg()[0]
    config = {"log.flush.fsync": True, "offsets.topic.num.partitions": PARTITIONS_OF_OFFSETS,
              "group.consumer.session.timeout.ms": 600000, "group.consumer.max.size": 10000,
              "log.io.class": "actors.testing.SlowFsyncIO", "log.io.fsync.delay.ms": FSYNC_DELAY_MS,
              "log.io.slow.logs": f"__consumer_offsets-{SLOW}"}
    conditions = ("alone", "other_group_commits", "same_group_commits")
    results = {disk: {c: [] for c in conditions} for disk in ("plain", "slow")}
    try:
        with tempfile.TemporaryDirectory(prefix="bench-slow-disk-") as data_dir:
            cluster = Cluster.local(data_dir=data_dir, config=config)
            try:
                ray.get(cluster.controller.create_topics.remote(
                    CreateTopicsRequest((CreatableTopic(TOPIC, PARTITIONS),))))
                setups = {}
                for disk, partition in (("plain", PLAIN), ("slow", SLOW)):
                    group = group_on("bench-heartbeats", partition)
                    coordinator = cluster.group_coordinator(group)
                    ray.get(coordinator.notify_topics.remote())
                    driver = ray.remote(num_cpus=0, max_concurrency=1000)(Members).remote(members, group)
                    committer = ray.remote(num_cpus=0, max_concurrency=1000)(Committer).remote()
                    ray.get(driver.form.remote(coordinator), timeout=300)
                    setups[disk] = (coordinator, driver, committer, group, group_on("bench-commits", partition),
                                    ray.get(driver.identities.remote()))
                    ray.get(driver.run.remote(coordinator, 0.5))  # warm up
                for _ in range(passes):
                    for condition in conditions:
                        for disk, (coordinator, driver, committer, group, other, identities) in setups.items():
                            commits = None
                            if condition == "other_group_commits":
                                commits = committer.run.remote(coordinator, seconds, COMMITTERS, other)
                            elif condition == "same_group_commits":
                                commits = committer.run.remote(coordinator, seconds, COMMITTERS, group, identities)
                            run = ray.get(driver.run.remote(coordinator, seconds))
                            entry = {"heartbeats_per_second": run["per_second"]}
                            if commits is not None:
                                entry.update(ray.get(commits))
                            results[disk][condition].append(entry)
            finally:
                cluster.shutdown()
    finally:
        ray.shutdown()

    summary = {disk: {c: {key: round(statistics.median(e[key] for e in entries), 1) for key in entries[0]}
                      for c, entries in by_condition.items()} for disk, by_condition in results.items()}

    def ratio(condition: str) -> float:
        return round(summary["slow"][condition]["heartbeats_per_second"]
                     / summary["plain"][condition]["heartbeats_per_second"], 3)

    print(json.dumps({
        "benchmark": "KIP-848 heartbeats per second of a group coordinator on a slow disk vs one on the plain disk, "
                     "with offset commits in parallel",
        "conditions": f"two group coordinators of one deployment, logs fsynced; slow disk: every fsync "
                      f"{FSYNC_DELAY_MS} ms longer (actors.testing.SlowFsyncIO); {members} members each with one "
                      f"heartbeat in flight; {COMMITTERS} committers each committing every {COMMIT_INTERVAL_S}s "
                      f"(another group's, or members of the heartbeating group); {passes} passes of {seconds}s per "
                      f"condition and disk, alternating; medians; 2 CPUs for Ray",
        "plain_disk": summary["plain"], "slow_disk": summary["slow"],
        "heartbeat_ratio_slow_to_plain": {c: ratio(c) for c in conditions},
        "goal_ratio": 0.8,
        "load_average_1m": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "python": platform.python_version(), "cpus": os.cpu_count(),
    }, indent=2))


if __name__ == "__main__":
    main()
