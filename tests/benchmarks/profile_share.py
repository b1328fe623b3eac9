"""Where a share poll's time goes: produce, then share-consume 1 KiB records with explicit
acknowledgement (500 a poll) and report, per process of the path (this process, where the
share consumers and their network thread run, the SharePartitions, the partition leaders, the
share coordinators, Ray's own raylet and GCS), the CPU seconds it spent per 500-record batch, next
to the wall time per batch. With --py-spy, py-spy samples every one of those processes for
the whole run and the report adds each one's busiest functions (own time).

    python tests/benchmarks/profile_share.py [--records 20000] [--consumers 1] [--py-spy]
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

import psutil  # noqa: E402
import ray  # noqa: E402

from actors import AcknowledgeType, Cluster, naming  # noqa: E402
from tests.benchmarks.quiet_ray import init_ray  # noqa: E402

RECORD = 1024
BATCH = 500
PARTITIONS = 4


def _role(p: psutil.Process) -> str:
    """A process's part in the path: the actor class of a Ray worker (its title is
    ray::Class.method while a call runs), else the program's name."""
    try:
        cmd = p.cmdline()
    except psutil.Error:
        return "gone"
    first = cmd[0] if cmd else p.name()
    if first.startswith("ray::"):
        return first[5:].split(".")[0].split(" ")[0]
    return os.path.basename(first) if "python" not in first else os.path.basename(cmd[1] if len(cmd) > 1 else first)


def _processes() -> dict[int, psutil.Process]:
    return {p.pid: p for p in psutil.Process().children(recursive=True)}


def _cpu(procs: dict[int, psutil.Process]) -> dict[int, float]:
    out = {}
    for pid, p in procs.items():
        try:
            t = p.cpu_times()
            out[pid] = t.user + t.system
        except psutil.Error:
            pass
    return out


def _py_spy_top(path: str, top: int = 8) -> list:
    """The functions with the most own samples in a py-spy raw (collapsed stacks) file."""
    own: collections.Counter = collections.Counter()
    total = 0
    with open(path) as f:
        for line in f:
            stack, _, count = line.rstrip().rpartition(" ")
            if not stack:
                continue
            n = int(count)
            total += n
            own[stack.split(";")[-1]] += n
    return [(fn, round(n / total, 3)) for fn, n in own.most_common(top)] if total else []


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--consumers", type=int, default=1)
    parser.add_argument("--py-spy", action="store_true")
    args = parser.parse_args()
    init_ray(num_cpus=2)
    cluster = Cluster.local(config={"log.flush.fsync": False, "share.auto.offset.reset": "earliest",
                                    "group.share.heartbeat.interval.ms": 500,
                                    "group.share.min.heartbeat.interval.ms": 500})
    spies = []
    out_dir = tempfile.mkdtemp(prefix="profile-share-")  # py-spy's files
    try:
        cluster.create_topic("profile-share", PARTITIONS)
        value = os.urandom(RECORD)
        with cluster.producer(linger_ms=5, batch_size=BATCH * (RECORD + 16)) as producer:
            for i in range(args.records):
                producer.send("profile-share", value, partition=i % PARTITIONS)
            producer.flush()
        clients = [cluster.share_consumer("profile", share_acknowledgement_mode="explicit", max_poll_records=BATCH)
                   for _ in range(args.consumers)]
        for c in clients:
            c.subscribe("profile-share")
        deadline = time.monotonic() + 60
        while set().union(*(c.assignment() for c in clients)) != {("profile-share", p) for p in range(PARTITIONS)}:
            if time.monotonic() > deadline:
                raise RuntimeError("the share group did not assign every partition")
            time.sleep(0.1)
        controller = ray.get_actor(naming.CONTROLLER, namespace=cluster.namespace)
        topic_id = cluster.describe_topic("profile-share").topic_id
        for p in range(PARTITIONS):  # created and loaded before the clock starts
            ray.get(controller.ensure_share_partition.remote("profile", "profile-share", topic_id, p))
            ray.get(ray.get_actor(naming.share_partition("profile", "profile-share", p),
                                  namespace=cluster.namespace).ready.remote())
        procs = _processes()
        roles = {pid: _role(p) for pid, p in procs.items()}
        if args.py_spy:
            for pid in procs:
                spies.append((pid, subprocess.Popen(
                    [os.path.join(os.path.dirname(sys.executable), "py-spy"), "record", "--pid", str(pid),
                     "--format", "raw", "--nonblocking", "--gil", "-r", "100", "-o", os.path.join(out_dir, f"{pid}.txt")],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)))
            time.sleep(2)  # attached before the clock starts
        me = psutil.Process()
        before, me_before = _cpu(procs), sum(me.cpu_times()[:2])
        polls = [0]
        total = [0]
        lock = threading.Lock()
        started = time.perf_counter()

        def consume(c) -> None:
            while True:
                with lock:
                    if total[0] >= args.records:
                        break
                batch = c.poll(0.5)
                for r in batch:
                    c.acknowledge(r, AcknowledgeType.ACCEPT)
                with lock:
                    total[0] += len(batch)
                    polls[0] += 1
            c.commit_sync()
        threads = [threading.Thread(target=consume, args=(c,)) for c in clients]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - started
        after, me_after = _cpu(procs), sum(me.cpu_times()[:2])
        for _, spy in spies:
            spy.send_signal(2)  # SIGINT: py-spy writes its file and exits
        for _, spy in spies:
            spy.wait(timeout=60)
        batches = total[0] / BATCH
        per_role: dict[str, float] = collections.defaultdict(float)
        per_role["share consumers (this process)"] = me_after - me_before
        for pid, t in after.items():
            per_role[roles[pid]] += t - before.get(pid, t)
        hops = {role: round(1000 * s / batches, 2) for role, s in sorted(per_role.items(), key=lambda kv: -kv[1])
                if s > 0.005}
        report = {"records": total[0], "consumers": args.consumers, "polls": polls[0],
                  "records_per_s": round(total[0] / elapsed),
                  "wall_ms_per_batch": round(1000 * elapsed / batches, 2),
                  "cpu_ms_per_batch": hops, "cpu_ms_per_batch_total": round(sum(hops.values()), 2),
                  "load_average_1m": round(os.getloadavg()[0], 1)}
        if spies:
            report["py_spy_own_time"] = {}
            for pid, _ in spies:
                path = os.path.join(out_dir, f"{pid}.txt")
                if os.path.exists(path) and after.get(pid, 0) - before.get(pid, 0) > 0.05:
                    report["py_spy_own_time"][f"{roles[pid]}:{pid}"] = _py_spy_top(path)
        print(json.dumps(report, indent=2))
        for c in clients:
            c.close()
    finally:
        for _, spy in spies:
            if spy.poll() is None:
                spy.kill()
        shutil.rmtree(out_dir, ignore_errors=True)
        cluster.shutdown()
        ray.shutdown()


if __name__ == "__main__":
    main()
