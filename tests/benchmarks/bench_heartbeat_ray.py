"""Steady-state KIP-848 heartbeats through Ray, against an empty async actor method measured
the same way in the same run. Prints JSON. Goal: at least 70% of the empty method's rate.

One async driver actor plays every member of a consumer group: it joins them, reconciles
and acknowledges their assignments (so each is STABLE with its partitions), then keeps one
steady-state ConsumerGroupHeartbeat per member in flight (each member sends its next as
soon as its last is answered, ignoring the interval) to the real group coordinator actor
(real state log, fsync off) for a fixed time. The peer is an actor whose
`consumer_group_heartbeat` takes the same arguments and returns a prepared response at
once, driven by the same loop. Passes alternate between the two; best and median reported,
and the CPU time the target actor's process spent per call (the share of a core a
heartbeat costs the coordinator, beyond what any Ray call costs).

Run: python tests/benchmarks/bench_heartbeat_ray.py [--quick]
"""
from __future__ import annotations

import asyncio
import json
import os
import platform
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

import psutil  # noqa: E402
import ray  # noqa: E402

from actors import Cluster  # noqa: E402
from runtime.messages.consumer import (  # noqa: E402
    ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatRequestTopicPartitions, ConsumerGroupHeartbeatResponse,
)
from runtime.messages.topics import CreatableTopic, CreateTopicsRequest  # noqa: E402
from tests.benchmarks.quiet_ray import init_ray  # noqa: E402

TOPIC, PARTITIONS = "bench", 200
GROUP = "bench-heartbeats"


class EmptyCoordinator:
    """The peer: the same method, nothing behind it."""

    def __init__(self) -> None:
        self.response = ConsumerGroupHeartbeatResponse(member_id="m", member_epoch=1, heartbeat_interval_ms=5000)

    async def consumer_group_heartbeat(self, request, client_id: str = "", client_host: str = ""):
        return self.response

    async def status(self) -> dict:
        return {"pid": os.getpid()}


class Driver:
    def __init__(self, members: int, group: str = GROUP) -> None:
        self.n = members
        self.group = group
        self.epochs: dict[str, int] = {}

    async def form(self, coordinator) -> dict:
        """Join every member, then heartbeat until each owns its target and acknowledged it."""
        ids = [f"member-{i}" for i in range(self.n)]
        owned: dict[str, tuple] = {}
        pending = set(ids)
        first = True
        for _ in range(50):
            requests = [ConsumerGroupHeartbeatRequest(
                self.group, mid, 0, rebalance_timeout_ms=60000, subscribed_topic_names=(TOPIC,), topic_partitions=())
                if first else ConsumerGroupHeartbeatRequest(self.group, mid, self.epochs[mid],
                                                            topic_partitions=owned[mid])
                for mid in ids]
            responses = await asyncio.gather(*(coordinator.consumer_group_heartbeat.remote(r, "bench", "localhost")
                                               for r in requests))
            first = False
            for mid, response in zip(ids, responses):
                assert response.error_code == 0, response
                self.epochs[mid] = response.member_epoch
                if response.assignment is not None:
                    target = tuple(ConsumerGroupHeartbeatRequestTopicPartitions(tp.topic_name, tuple(tp.partitions))
                                   for tp in response.assignment.topic_partitions)
                    if owned.get(mid) != target:
                        owned[mid] = target
                        pending.add(mid)
                        continue
                pending.discard(mid)
            if not pending and len(set(self.epochs.values())) == 1:
                break
        owned_partitions = sum(len(tp.partitions) for o in owned.values() for tp in o)
        return {"members": self.n, "epoch": max(self.epochs.values()), "owned_partitions": owned_partitions}

    async def run(self, target, seconds: float) -> dict:
        """Every member heartbeats back to back for `seconds`; returns the rate."""
        done = 0
        deadline = time.perf_counter() + seconds
        requests = [ConsumerGroupHeartbeatRequest(self.group, mid, epoch) for mid, epoch in self.epochs.items()]

        async def member(request):
            nonlocal done
            while time.perf_counter() < deadline:
                response = await target.consumer_group_heartbeat.remote(request, "bench", "localhost")
                assert response.error_code == 0, response
                done += 1

        started = time.perf_counter()
        await asyncio.gather(*(member(r) for r in requests))
        elapsed = time.perf_counter() - started
        return {"calls": done, "seconds": elapsed, "per_second": done / elapsed}


def main() -> None:
    quick = "--quick" in sys.argv
    passes, seconds, members = (2, 2.0, 50) if quick else (5, 4.0, 100)
    init_ray(num_cpus=2)
    # sessions far longer than the run: the figure is heartbeats, not expiries (the cluster's
    # own temporary folder, removed at shutdown)
    cluster = Cluster.local(config={"log.flush.fsync": False, "group.consumer.session.timeout.ms": 600000,
                                    "group.consumer.max.size": 10000})
    try:
        # The topic's metadata only: its partition leaders (an actor each) play no part here.
        ray.get(cluster.controller.create_topics.remote(CreateTopicsRequest((CreatableTopic(TOPIC, PARTITIONS),))))
        coordinator = cluster.group_coordinator(GROUP)
        ray.get(coordinator.notify_topics.remote())
        empty = ray.remote(num_cpus=0, max_concurrency=1000)(EmptyCoordinator).remote()
        driver = ray.remote(num_cpus=0, max_concurrency=1000)(Driver).remote(members)
        group = ray.get(driver.form.remote(coordinator), timeout=300)
        ray.get(driver.run.remote(empty, 0.5))  # warm up both paths
        ray.get(driver.run.remote(coordinator, 0.5))
        targets = {"empty": empty, "heartbeat": coordinator}
        processes = {k: psutil.Process(ray.get(t.status.remote())["pid"]) for k, t in targets.items()}
        rates: dict[str, list[float]] = {"heartbeat": [], "empty": []}
        cpu_us: dict[str, list[float]] = {"heartbeat": [], "empty": []}
        for _ in range(passes):
            for kind in ("empty", "heartbeat"):
                before = sum(processes[kind].cpu_times()[:2])
                run = ray.get(driver.run.remote(targets[kind], seconds))
                rates[kind].append(run["per_second"])
                cpu_us[kind].append((sum(processes[kind].cpu_times()[:2]) - before) / run["calls"] * 1e6)
        load = os.getloadavg()
    finally:
        cluster.shutdown()
        ray.shutdown()

    def summary(kind):
        return {"best_per_second": round(max(rates[kind])), "median_per_second": round(statistics.median(rates[kind])),
                "target_cpu_us_per_call_median": round(statistics.median(cpu_us[kind]), 1)}

    hb, peer = summary("heartbeat"), summary("empty")
    print(json.dumps({
        "benchmark": "steady-state ConsumerGroupHeartbeat through Ray vs an empty async actor method",
        "conditions": f"one async driver actor, {members} members each with one heartbeat in flight; "
                      f"{PARTITIONS}-partition topic, every member STABLE; {passes} alternating passes of "
                      f"{seconds}s each; fsync off; 2 CPUs for Ray",
        "group": group,
        "heartbeat": hb, "empty_method": peer,
        "ratio_best": round(hb["best_per_second"] / peer["best_per_second"], 3),
        "ratio_median": round(hb["median_per_second"] / peer["median_per_second"], 3),
        "goal_ratio": 0.7,
        "load_average_1m": round(load[0], 2), "python": platform.python_version(), "cpus": os.cpu_count(),
    }, indent=2))


if __name__ == "__main__":
    main()
