"""Footprint: the memory of a deployment as topics, partitions, groups and members grow, per
actor kind, with and without SharePartition idle expiry; and the largest share-group
deployment that fits in this machine's memory, extrapolated from the measurements.

Each actor is a process; its memory is read from /proc/<pid>/smaps_rollup: private (clean +
dirty pages only it maps: what killing it frees) and proportional (PSS: private plus its
share of pages shared with other processes, such as Ray's and Python's libraries). Actor pids
come from Ray's actor table (`ray._private.state.actors()`, a private API). Steps build on
each other in one deployment:

  base            the controller and one actor per coordinator state partition
  topics          + TOPICS topics of PARTITIONS partitions (on the partition hosts)
  groups          + a classic group and a KIP-848 group of MEMBERS consumers each
  share           + SHARE_GROUPS share groups of MEMBERS members, each over one topic
  share idle      the share consumers closed, after group.share.partition.idle.ms

Run: .venv/bin/python tests/benchmarks/bench_footprint.py  (prints JSON)
"""
from __future__ import annotations

import contextlib
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

import ray  # noqa: E402

from actors import Cluster  # noqa: E402
from tests.benchmarks.quiet_ray import init_ray  # noqa: E402

TOPICS, PARTITIONS, MEMBERS, SHARE_GROUPS = 3, 2, 2, 2
IDLE_MS = 5000
MACHINE_GB = 24
RESERVE_GB = 3  # the OS, Ray's own processes (GCS, raylet, dashboard agent), the drivers: not measured here

KINDS = {"ControllerActor": "controller", "GroupCoordinatorActor": "group coordinator",
         "ShareCoordinatorActor": "share coordinator", "TransactionCoordinatorActor": "transaction coordinator",
         "PartitionHostActor": "partition host", "SharePartitionActor": "share partition",
         "ConsumerActor": "consumer client", "ModernConsumerActor": "consumer client"}


def smaps_mb(pid: int) -> tuple[float, float] | None:
    """(private MB, PSS MB) of a process, or None if it is gone."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            kb = {}
            for line in f:
                parts = line.split()
                if len(parts) >= 2 and parts[0].endswith(":") and parts[1].isdigit():
                    kb[parts[0][:-1]] = int(parts[1])
    except OSError:
        return None
    return (kb.get("Private_Clean", 0) + kb.get("Private_Dirty", 0)) / 1024, kb.get("Pss", 0) / 1024


def measure(namespace: str) -> dict:
    by_kind: dict = {}
    for a in ray._private.state.actors().values():
        if a["State"] != "ALIVE" or a.get("Pid") in (None, 0):
            continue
        kind = KINDS.get(a["ActorClassName"])
        if kind is None or (a.get("Name") or "").find("shoal/") != 0:
            continue
        mem = smaps_mb(a["Pid"])
        if mem is not None:
            by_kind.setdefault(kind, []).append(mem)
    out = {}
    for kind, mems in sorted(by_kind.items()):
        out[kind] = {"actors": len(mems),
                     "private_mb_mean": round(sum(m[0] for m in mems) / len(mems), 1),
                     "pss_mb_mean": round(sum(m[1] for m in mems) / len(mems), 1),
                     "pss_mb_total": round(sum(m[1] for m in mems), 1)}
    total_pss = sum(k["pss_mb_total"] for k in out.values())
    return {"kinds": out, "actors": sum(k["actors"] for k in out.values()), "pss_mb_total": round(total_pss, 1),
            "private_mb_total": round(sum(k["private_mb_mean"] * k["actors"] for k in out.values()), 1)}


def settle(s: float = 3.0) -> None:
    """Let new actors finish starting and their first garbage settle before reading /proc."""
    time.sleep(s)


def main() -> None:
    # Ray prints its raylet's warnings on this process's stdout: keep them off the JSON.
    with contextlib.redirect_stdout(sys.stderr):
        summary = footprint()
    print(json.dumps(summary, indent=2))


def footprint() -> dict:
    init_ray()
    cluster = Cluster.local(config={"log.flush.fsync": False, "share.auto.offset.reset": "earliest",
                                    "group.share.partition.idle.ms": IDLE_MS,
                                    "group.share.heartbeat.interval.ms": 500,
                                    "group.share.min.heartbeat.interval.ms": 100})
    steps = []
    clients = []
    try:
        settle()
        steps.append({"step": "base", **measure(cluster.namespace)})

        topics = [f"fp-{t}" for t in range(TOPICS)]
        for t in topics:
            cluster.create_topic(t, PARTITIONS)
        with cluster.producer(linger_ms=5) as p:
            for t in topics:
                for i in range(200):
                    p.send(t, f"v{i}".encode(), partition=i % PARTITIONS)
            p.flush()
        settle()
        steps.append({"step": f"topics: {TOPICS}x{PARTITIONS} partitions", **measure(cluster.namespace)})

        for protocol in ("classic", "consumer"):
            for n in range(MEMBERS):
                c = cluster.consumer(f"fp-{protocol}", group_protocol=protocol, auto_offset_reset="earliest",
                                     session_timeout_ms=10000, heartbeat_interval_ms=1000)
                c.subscribe(topics)
                clients.append(c)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not all(c.assignment() for c in clients):
            for c in clients:
                c.poll(100)
        settle()
        steps.append({"step": f"groups: classic and KIP-848, {MEMBERS} members each", **measure(cluster.namespace)})

        shares = []
        for g in range(SHARE_GROUPS):
            for n in range(MEMBERS):
                s = cluster.share_consumer(f"fp-share-{g}", fetch_max_wait_ms=200)
                s.subscribe(topics[g % TOPICS])
                shares.append(s)
        deadline = time.monotonic() + 60
        got = 0
        while time.monotonic() < deadline and got < SHARE_GROUPS * 200:
            for s in shares:
                got += len(s.poll(0.1))
        settle()
        steps.append({"step": f"share: {SHARE_GROUPS} share groups x {MEMBERS} members", **measure(cluster.namespace)})

        for s in shares:
            s.close()
        deadline = time.monotonic() + 60 + IDLE_MS / 1000
        while time.monotonic() < deadline and "share partition" in measure(cluster.namespace)["kinds"]:
            time.sleep(1)
        steps.append({"step": f"share idle: consumers closed, {IDLE_MS} ms later", **measure(cluster.namespace)})
    finally:
        for c in clients:
            try:
                c.close()
            except Exception:
                pass
        cluster.shutdown()
        ray.shutdown()

    share_step = steps[3]["kinds"]
    sp = share_step["share partition"]["pss_mb_mean"]
    base = steps[0]["pss_mb_total"]
    budget_mb = (MACHINE_GB - RESERVE_GB) * 1024 - base
    # A share-group deployment: P partitions, each with one group's SharePartition (the
    # partitions themselves live in the base deployment's partition host: a few kilobytes
    # each, bench_partitions.py). Share consumers run in their users' processes.
    per_partition = sp
    summary = {
        "benchmark": "footprint",
        "conditions": {"machine_gb": MACHINE_GB, "cpus": os.cpu_count(), "python": sys.version.split()[0],
                       "ray": ray.__version__, "topics": TOPICS, "partitions": PARTITIONS, "members": MEMBERS,
                       "share_groups": SHARE_GROUPS, "idle_ms": IDLE_MS},
        "steps": steps,
        "actors_per_gb": {kind: round(1024 / v["pss_mb_mean"], 1) for kind, v in share_step.items()},
        # Without idle expiry the share step's SharePartitions would still be there.
        "idle_expiry_freed_mb": round(share_step["share partition"]["pss_mb_total"]
                                      if "share partition" not in steps[4]["kinds"] else 0.0, 1),
        "largest_share_deployment_in_24gb": {
            "extrapolated": True,
            "assumes": (f"{RESERVE_GB} GB for the OS and Ray's own processes; the base deployment "
                        f"({base} MB, its partition host included); per partition one share group's "
                        f"SharePartition ({sp} MB); the share consumers' own processes not counted; PSS figures"),
            "partitions_with_one_busy_share_group": int(budget_mb // per_partition),
        },
    }
    return summary


if __name__ == "__main__":
    main()
