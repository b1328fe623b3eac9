"""Wall time of a classic-protocol rebalance through Ray, for groups of 10 and 50 members.
Prints JSON.

The members are lightweight raw protocol callers, not consumer actors: one async driver
actor issues every member's JoinGroup, Heartbeat and SyncGroup calls to the real group
coordinator actor (real state log, fsync off), so the figure is the coordinator and Ray's
share of a rebalance, without 50 consumer processes (~140 MB each) on a 2-core machine.

One rebalance, as a live group goes through it: the leader rejoins (as it does when it sees
metadata change); every other member learns of the rebalance from its next heartbeat
(sent at once: no heartbeat interval is waited for) and rejoins; the join phase completes;
the leader computes a range assignment of a 100-partition topic with the client assignor
and every member syncs. The time runs from the leader's JoinGroup to the last SyncGroup
response. Each size is measured over several rebalances; best and median are reported.

Run: python tests/benchmarks/bench_rebalance.py [--quick]
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

import ray  # noqa: E402

from actors import Cluster  # noqa: E402
from runtime.assignors import MemberSubscription, client_assignor  # noqa: E402
from runtime.errors import Errors  # noqa: E402
from runtime.group.consumer_protocol import decode_subscription, encode_assignment, encode_subscription  # noqa: E402
from runtime.messages.group import (  # noqa: E402
    HeartbeatRequest, JoinGroupRequest, JoinGroupRequestProtocol, SyncGroupRequest, SyncGroupRequestAssignment,
)
from tests.benchmarks.quiet_ray import init_ray  # noqa: E402

TOPICS = {"bench": 100}
SESSION_MS = 30000


class Driver:
    """Plays every member of one group against the coordinator actor."""

    def __init__(self, coordinator, group_id: str, members: int) -> None:
        self.c = coordinator
        self.group_id = group_id
        self.n = members
        self.ids: list[str] = [""] * members
        self.generation = -1
        self.metadata = encode_subscription(("bench",))

    def _join(self, i: int):
        return self.c.join_group.remote(JoinGroupRequest(
            self.group_id, SESSION_MS, self.ids[i], "consumer", (JoinGroupRequestProtocol("range", self.metadata),),
            SESSION_MS), f"m{i}")

    def _assign(self, joined) -> tuple:
        members = {m.member_id: MemberSubscription(decode_subscription(m.metadata).topics) for m in joined.members}
        result = client_assignor(joined.protocol_name)(members, TOPICS)
        return tuple(SyncGroupRequestAssignment(mid, encode_assignment(
            tuple((t, tuple(sorted(ps))) for t, ps in sorted(result[mid].items())))) for mid in members)

    async def _join_then_sync(self, i: int):
        joined = await self._join(i)
        if joined.error_code:
            raise RuntimeError(f"join: {Errors.for_code(joined.error_code).name}")
        assignments = self._assign(joined) if joined.leader == joined.member_id else ()
        synced = await self.c.sync_group.remote(SyncGroupRequest(
            self.group_id, joined.generation_id, joined.member_id, assignments=assignments))
        if synced.error_code:
            raise RuntimeError(f"sync: {Errors.for_code(synced.error_code).name}")
        return joined

    async def form(self) -> int:
        """Every member joins the new group (within group.initial.rebalance.delay.ms)."""
        first = await asyncio.gather(*(self._join(i) for i in range(self.n)))
        self.ids = [r.member_id for r in first]
        joined = await asyncio.gather(*(self._join_then_sync(i) for i in range(self.n)))
        generations = {r.generation_id for r in joined}
        assert len(generations) == 1, generations
        self.leader = self.ids.index(joined[0].leader)
        self.generation = generations.pop()
        return self.generation

    async def _follower(self, i: int):
        beat = await self.c.heartbeat.remote(HeartbeatRequest(self.group_id, self.generation, self.ids[i]))
        assert beat.error_code == Errors.REBALANCE_IN_PROGRESS.code, beat
        return await self._join_then_sync(i)

    async def rebalance(self) -> float:
        started = time.perf_counter()
        leader = asyncio.ensure_future(self._join_then_sync(self.leader))
        await asyncio.sleep(0)
        rest = await asyncio.gather(*(self._follower(i) for i in range(self.n) if i != self.leader))
        joined = [await leader, *rest]
        elapsed = time.perf_counter() - started
        generations = {r.generation_id for r in joined}
        assert generations == {self.generation + 1}, generations
        self.generation += 1
        return elapsed


def main() -> None:
    quick = "--quick" in sys.argv
    rounds = 3 if quick else 10
    init_ray(num_cpus=2)
    cluster = Cluster.local(config={"log.flush.fsync": False, "group.initial.rebalance.delay.ms": 1500,
                                    "group.min.session.timeout.ms": 1000})
    driver_cls = ray.remote(num_cpus=0)(Driver)
    results = []
    try:
        for size in (10, 50):
            group_id = f"bench-{size}"
            driver = driver_cls.remote(cluster.group_coordinator(group_id), group_id, size)
            ray.get(driver.form.remote())
            ray.get(driver.rebalance.remote())  # warm up
            times = [ray.get(driver.rebalance.remote()) * 1000 for _ in range(rounds)]
            results.append({
                "members": size, "rebalances": rounds,
                "best_ms": round(min(times), 2), "median_ms": round(statistics.median(times), 2),
                "ray_calls_per_rebalance": 3 * size - 1,
                "conditions": "one driver actor plays every member (JoinGroup, Heartbeat, SyncGroup through Ray); "
                              "range assignment of 100 partitions by the leader; fsync off; heartbeats sent at once",
            })
            ray.kill(driver)
    finally:
        cluster.shutdown()
        ray.shutdown()
    print(json.dumps({"benchmark": "classic rebalance through Ray", "members_are": "raw protocol callers in one "
                      "async driver actor, not consumer actor processes", "python": platform.python_version(),
                      "cpus": os.cpu_count(), "results": results}, indent=2))


if __name__ == "__main__":
    main()
