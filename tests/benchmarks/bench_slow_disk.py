"""Heartbeats per second of a group coordinator whose disk is slow (every fsync 50 ms longer),
against the same coordinator on the plain disk, while offset commits (which wait for an
fsync) run in parallel. Prints JSON. Goal: on the slow disk, heartbeats keep at least 80% of
their rate on the plain one.

One group coordinator (offsets.topic.num.partitions = 1, so every group is on it) with its
log fsynced (`log.flush.fsync`), on the plain disk and then on `actors.testing.SlowFsyncIO`
through the `log.io.class` setting (every coordinator log of the deployment is on it). The
members of a KIP-848 consumer group heartbeat back to back, as in bench_heartbeat_ray.py
(its driver), for a fixed time, in three conditions:
* alone;
* while another group's commits run (a second actor keeps `COMMITTERS` offset commits in
  flight, each the next as soon as the last is answered);
* while the heartbeating members commit their own offsets (each of `COMMITTERS` of them
  keeps one commit in flight): a heartbeat of that group may rest on a commit not yet
  durable, so it waits for it (Kafka's rule).
Passes alternate; medians reported, with the commits' rate and mean latency.

Run: python tests/benchmarks/bench_slow_disk.py [--quick]
"""
from __future__ import annotations

import asyncio
import json
import logging
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
from bench_heartbeat_ray import GROUP, PARTITIONS, TOPIC, Driver  # noqa: E402
from runtime.messages.group import (OffsetCommitRequest, OffsetCommitRequestPartition,  # noqa: E402
                                    OffsetCommitRequestTopic)
from runtime.messages.topics import CreatableTopic, CreateTopicsRequest  # noqa: E402

FSYNC_DELAY_MS = 50
COMMITTERS = 20
SLOW_DISK = {"log.io.class": "actors.testing:SlowFsyncIO", "log.io.fsync.delay.ms": FSYNC_DELAY_MS}


class Members(Driver):
    """The heartbeating members, who can also say who they are (to commit as themselves)."""

    async def identities(self) -> dict:
        return dict(self.epochs)


class Committer:
    """Keeps `n` offset commits in flight for a fixed time."""

    async def run(self, coordinator, seconds: float, n: int, members: dict | None = None) -> dict:
        done, latency = 0, 0.0
        deadline = time.perf_counter() + seconds
        if members:  # the heartbeating group's members commit as themselves
            ids = list(members.items())[:n]
            requests = [lambda o, m=m, e=e: OffsetCommitRequest(GROUP, topics(o), e, m) for m, e in ids]
        else:  # another group's commits, by an admin (no members)
            requests = [lambda o: OffsetCommitRequest("bench-commits", topics(o)) for _ in range(n)]

        def topics(offset: int):
            return (OffsetCommitRequestTopic(TOPIC, (OffsetCommitRequestPartition(offset % PARTITIONS, offset),)),)

        async def loop(make):
            nonlocal done, latency
            offset = 0
            while time.perf_counter() < deadline:
                started = time.perf_counter()
                response = await coordinator.offset_commit.remote(make(offset))
                assert all(p.error_code == 0 for t in response.topics for p in t.partitions), response
                latency += time.perf_counter() - started
                done += 1
                offset += 1

        started = time.perf_counter()
        await asyncio.gather(*(loop(r) for r in requests))
        elapsed = time.perf_counter() - started
        return {"commits_per_second": done / elapsed, "commit_latency_ms": latency / max(done, 1) * 1000}


def measure(disk: str, passes: int, seconds: float, members: int) -> dict:
    config = {"log.flush.fsync": True, "offsets.topic.num.partitions": 1,
              "group.consumer.session.timeout.ms": 600000, "group.consumer.max.size": 10000,
              **(SLOW_DISK if disk == "slow" else {})}
    with tempfile.TemporaryDirectory(prefix="bench-slow-disk-") as data_dir:
        cluster = Cluster.local(data_dir=data_dir, config=config)
        try:
            ray.get(cluster.controller.create_topics.remote(
                CreateTopicsRequest((CreatableTopic(TOPIC, PARTITIONS),))))
            coordinator = cluster.group_coordinator(GROUP)
            ray.get(coordinator.notify_topics.remote())
            driver = ray.remote(num_cpus=0, max_concurrency=1000)(Members).remote(members)
            committer = ray.remote(num_cpus=0, max_concurrency=1000)(Committer).remote()
            ray.get(driver.form.remote(coordinator), timeout=300)
            identities = ray.get(driver.identities.remote())
            ray.get(driver.run.remote(coordinator, 0.5))  # warm up
            ray.get(committer.run.remote(coordinator, 0.5, COMMITTERS))
            results: dict[str, list[dict]] = {"alone": [], "other_group_commits": [], "same_group_commits": []}
            for _ in range(passes):
                for condition in results:
                    commits = None
                    if condition != "alone":
                        commits = committer.run.remote(coordinator, seconds, COMMITTERS,
                                                       identities if condition == "same_group_commits" else None)
                    run = ray.get(driver.run.remote(coordinator, seconds))
                    entry = {"heartbeats_per_second": run["per_second"]}
                    if commits is not None:
                        entry.update(ray.get(commits))
                    results[condition].append(entry)
        finally:
            cluster.shutdown()
    return {condition: {key: round(statistics.median(e[key] for e in entries), 1) for key in entries[0]}
            for condition, entries in results.items()}


def main() -> None:
    quick = "--quick" in sys.argv
    passes, seconds, members = (1, 2.0, 50) if quick else (3, 4.0, 100)
    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level=logging.WARNING)
    load_before = os.getloadavg()[0]
    try:
        plain = measure("plain", passes, seconds, members)
        slow = measure("slow", passes, seconds, members)
    finally:
        ray.shutdown()

    def ratio(condition: str) -> float:
        return round(slow[condition]["heartbeats_per_second"] / plain[condition]["heartbeats_per_second"], 3)

    print(json.dumps({
        "benchmark": "KIP-848 heartbeats per second of a group coordinator on a slow disk vs the plain disk, "
                     "with offset commits in parallel",
        "conditions": f"one group coordinator, log fsynced; slow disk: every fsync {FSYNC_DELAY_MS} ms longer "
                      f"(actors.testing.SlowFsyncIO); {members} members each with one heartbeat in flight; "
                      f"{COMMITTERS} commits in flight (another group's, or {COMMITTERS} of the members'); "
                      f"{passes} passes of {seconds}s per condition, medians; 2 CPUs for Ray",
        "plain_disk": plain, "slow_disk": slow,
        "heartbeat_ratio_slow_to_plain": {c: ratio(c) for c in plain},
        "goal_ratio": 0.8,
        "load_average_1m": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "python": platform.python_version(), "cpus": os.cpu_count(),
    }, indent=2))


if __name__ == "__main__":
    main()
