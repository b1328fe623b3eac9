"""Classic group protocol throughput, in process, through the real CoordinatorRuntime and
state log (fsync off, so this measures the coordinator, not the disk). Prints JSON.

Each round rebalances G groups of M members from scratch: every member sends JoinGroup
twice (MEMBER_ID_REQUIRED, then with its id), the join phase ends, every member sends
SyncGroup (the leader with the assignment, which is written to the log), then every member
heartbeats H times. Two write policies: a flush after every operation, and a flush every 64
operations (what append.linger.ms gives a busy coordinator).

Run: python tests/benchmarks/bench_classic.py [--quick]
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
from runtime.group.consumer_protocol import encode_subscription  # noqa: E402
from runtime.messages.group import (  # noqa: E402
    HeartbeatRequest, JoinGroupRequest, JoinGroupRequestProtocol, SyncGroupRequest, SyncGroupRequestAssignment,
)
from runtime.testing import ShardHarness  # noqa: E402

CONFIG = {"group.initial.rebalance.delay.ms": 0}
PROTOCOLS = (JoinGroupRequestProtocol("range", encode_subscription(["topic"])),)


def run(groups: int, members: int, heartbeats: int, flush_every: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        h = ShardHarness(tmp, GroupCoordinatorShard, config=CONFIG, auto_flush=False)
        rt = h.runtime
        counts = {"join": 0, "sync": 0, "heartbeat": 0}
        pending = 0

        def op(kind, fn):
            nonlocal pending
            rt.write(fn, h.clock())
            counts[kind] += 1
            pending += 1
            if pending >= flush_every:
                rt.flush(h.clock())
                pending = 0

        start = time.perf_counter()
        for g in range(groups):
            gid = f"group-{g}"
            ids = [f"m-{g}-{i}" for i in range(members)]
            for mid in ids:
                for member_id in ("", mid):
                    req = JoinGroupRequest(gid, 30_000, member_id, "consumer", PROTOCOLS, 60_000)
                    op("join", lambda s, now, req=req, mid=mid: s.join_group(req, now, mid))
            h.advance(0)  # the (zero) initial delay ends the join phase
            generation = rt.shard.groups[gid].generation_id
            assignment = tuple(SyncGroupRequestAssignment(m, m.encode()) for m in ids)
            for mid in ids[1:] + ids[:1]:  # the leader last, so followers wait for it
                req = SyncGroupRequest(gid, generation, mid, assignments=assignment if mid == ids[0] else ())
                op("sync", lambda s, now, req=req: s.sync_group(req, now))
            for _ in range(heartbeats):
                for mid in ids:
                    req = HeartbeatRequest(gid, generation, mid)
                    op("heartbeat", lambda s, now, req=req: s.heartbeat(req, now))
        rt.flush(h.clock())
        elapsed = time.perf_counter() - start
        assert all(str(rt.shard.groups[f"group-{g}"].state) == "Stable" for g in range(groups))
        total = sum(counts.values())
        h.runtime.close()
    return {"groups": groups, "members_per_group": members, "heartbeats_per_member": heartbeats,
            "flush_every_ops": flush_every, "operations": counts, "seconds": round(elapsed, 4),
            "ops_per_second": round(total / elapsed)}


def main() -> None:
    quick = "--quick" in sys.argv
    sizes = [(20, 10, 5)] if quick else [(100, 10, 10), (10, 100, 10), (2, 1000, 2)]
    results = [run(g, m, hb, flush) for g, m, hb in sizes for flush in (1, 64)]
    print(json.dumps({
        "benchmark": "classic JoinGroup+SyncGroup+Heartbeat through CoordinatorRuntime, in process",
        "conditions": {"python": platform.python_version(), "machine": platform.machine(), "fsync": False,
                       "cpus": os.cpu_count()},
        "results": results,
    }, indent=2))


if __name__ == "__main__":
    main()
