"""Share groups as a work queue: how much they drain and how long a record waits. Prints JSON.

Throughput: produce, then share-consume 1 KiB records with explicit acknowledgement (500 a
poll) with 1, 2, 4 and 8 share consumers (one thread each in this process) on 4 and 16
partitions, fsync off and on, each run in a fresh share group reading from the earliest
offset. The peers, measured right after each run, with as many callers as there are
consumers: the raw Ray transport, an async actor method handing back a 500-record payload it
holds; and the layout's ceiling, the three Ray calls a share poll makes with no work in them
(caller to a SharePartition stand-in, which asks a leader stand-in for the payload and a share
coordinator stand-in for a write side by side, one stand-in SharePartition and leader per
partition and one coordinator, as deployed), which no share code on this layout can pass.
Goals: 50,000 records/s with four consumers on four partitions (fsync off), no fall as
consumers are added up to the partition count, and at least 0.3 of the raw transport.

Each throughput run lasts several seconds (200,000 records by default): a run of a second
or so is mostly its first and last polls, and read about half the steady rate.

Latency: a producer at a steady 5,000 records/s on four partitions, four share consumers that
acknowledge each poll at once (commit_sync). Per record, from its produce being acknowledged
to the producer, the time until a consumer's poll returned it (delivery) and until its
acknowledgement was durable (commit_sync returned). Goal (fsync off): p50 under 10 ms, p99
under 50 ms. Beside it, the same at 20 records/s with one consumer on one partition: the
path's own latency, with nothing queued. And the goal's load once more with a producer that
batches (100 ms linger, 1 MiB batches: about 40 produce calls/s instead of some 800): it
tells the share path's cost from the producer's, whose calls to the partition leaders take
most of the two cores at Kafka's default linger.

The load average (1 minute) is given beside each figure, for the machine may be shared, and
the share of the machine's CPU that was busy during the run (`cpu_busy`, 1.0: every core);
beside each latency run, the cores each kind of process kept busy while the producer ran
(`cores_by_process`: the driver holds the producer and the share consumers, with their
network thread).

    python tests/benchmarks/bench_share.py [--records 200000] [--latency-s 5]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

import psutil  # noqa: E402
import ray  # noqa: E402

from actors import AcknowledgeType, Cluster, naming  # noqa: E402
from runtime.topics.data import encode_records  # noqa: E402
from tests.benchmarks.quiet_ray import init_ray  # noqa: E402

RECORD = 1024
BATCH = 500
GOAL = 50_000
GOAL_RATIO = 0.3
LATENCY_RATE = 5_000
LATENCY_PARTITIONS = 4
LATENCY_CONSUMERS = 4
# The same measure with a queue that keeps up easily: what a record waits for the path alone.
LIGHT = {"rate": 20, "partitions": 1, "consumers": 1}
# Kafka 4's default linger.ms. Each batch is a Ray call to its partition's leader, and at 2 ms
# (about two records a call) the calls alone held the two cores: the producer reached only
# 3,200-3,800 of its 5,000 records/s.
DEFAULT_PRODUCER = {"linger_ms": 5}
BATCHING = {"producer_config": {"linger_ms": 100, "batch_size": 1 << 20}}


@ray.remote(num_cpus=0)
class Sink:
    """The raw transport: an actor method that hands back a payload it already holds (with
    a request, the leader's stand-in in the layout's ceiling)."""

    async def keep(self, payload: bytes) -> None:
        self._payload = payload

    async def give(self, request=None) -> bytes:
        return self._payload


@ray.remote(num_cpus=0)
class StandInCoordinator:
    async def write(self, request) -> int:
        return 0


@ray.remote(num_cpus=0)
class StandInSharePartition:
    def __init__(self, leader, coordinator) -> None:
        self._leader, self._coordinator = leader, coordinator

    async def share_fetch(self, request) -> bytes:
        payload, _ = await asyncio.gather(self._leader.give.remote(request), self._coordinator.write.remote(request))
        return payload


def _load() -> float:
    return round(os.getloadavg()[0], 1)


def _cpu_times() -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine, from /proc/stat."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle and iowait
    return sum(fields) - idle, sum(fields)


def _cpu_busy(since: tuple[int, int]) -> float:
    """The share of the machine's CPU time that was busy since `since` (1.0: every core)."""
    busy, total = _cpu_times()
    return round((busy - since[0]) / max(total - since[1], 1), 2)


def _process_cpu() -> dict:
    """{pid: (kind, CPU seconds)} of this process ("driver") and of every Ray process: an
    actor's kind is its class, as its process title says ("ray::SharePartitionActor.fetch")."""
    out = {}
    for proc in psutil.process_iter(["pid", "cmdline", "cpu_times"]):
        cmdline = " ".join(proc.info["cmdline"] or ())
        if proc.info["pid"] == os.getpid():
            kind = "driver"
        elif cmdline.startswith("ray::"):
            kind = cmdline[5:].split(".")[0].split(" ")[0]
        elif "ray" in cmdline:
            kind = "ray_system"  # raylet, GCS, log monitor...
        else:
            continue
        times = proc.info["cpu_times"]
        if times is not None:
            out[proc.info["pid"]] = (kind, times.user + times.system)
    return out


def _cpu_by_kind(since: dict, seconds: float) -> dict:
    """The cores each kind of process kept busy since `since` (1.0: one whole core)."""
    totals: dict = {}
    for pid, (kind, cpu) in _process_cpu().items():
        totals[kind] = totals.get(kind, 0.0) + cpu - since.get(pid, (kind, 0.0))[1]
    return {k: round(v / seconds, 2) for k, v in sorted(totals.items(), key=lambda kv: -kv[1]) if v / seconds >= 0.01}


def _moved_per_s(records: int, callers: int, call) -> float:
    """Records per second moved as 500-record payloads by `callers` threads, each making
    `call(i)` (a Ray call, waited for) over and over."""
    calls = max(records // BATCH // callers, 1)

    def caller(i: int) -> None:
        for _ in range(calls):
            ray.get(call(i))
    threads = [threading.Thread(target=caller, args=(i,)) for i in range(callers)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return calls * callers * BATCH / (time.perf_counter() - started)


def raw_transport(records: int, callers: int) -> float:
    """Records per second moved by an actor method that hands back a payload it holds."""
    payload = encode_records([(0, None, os.urandom(RECORD), []) for _ in range(BATCH)])
    sink = Sink.remote()
    ray.get(sink.keep.remote(payload))
    try:
        return _moved_per_s(records, callers, lambda i: sink.give.remote())
    finally:
        ray.kill(sink)


def layout_ceiling(records: int, callers: int, partitions: int) -> float:
    """Records per second through the share poll's three Ray calls with no work in them."""
    payload = encode_records([(0, None, os.urandom(RECORD), []) for _ in range(BATCH)])
    coordinator = StandInCoordinator.remote()
    leaders = [Sink.remote() for _ in range(partitions)]
    ray.get([leader.keep.remote(payload) for leader in leaders])
    chains = [StandInSharePartition.remote(leader, coordinator) for leader in leaders]
    request = {"member_id": "m", "acknowledgement_batches": [(0, BATCH - 1, 1)]}
    try:
        ray.get([chain.share_fetch.remote(request) for chain in chains])  # every process up before the clock
        return _moved_per_s(records, callers, lambda i: chains[i % partitions].share_fetch.remote(request))
    finally:
        for actor in [*chains, *leaders, coordinator]:
            ray.kill(actor)


def _subscribed(cluster: Cluster, group: str, topic: str, partitions: int, consumers: int) -> list:
    """`consumers` share consumers of `group`, the assignment settled and every SharePartition
    loaded: joining is not the data path."""
    clients = [cluster.share_consumer(group, share_acknowledgement_mode="explicit", max_poll_records=BATCH)
               for _ in range(consumers)]
    for c in clients:
        c.subscribe(topic)
    # Settled: the simple assignor shares each partition among ceil(M / P) members, and the
    # members' counts differ by one at most. Members that join one by one first get
    # everything and give it back, which is the group's start, not its throughput.
    sharing = -(-consumers // partitions)
    deadline = time.monotonic() + 120
    while True:
        assigned = [c.assignment() for c in clients]
        counts = [len(a) for a in assigned]
        if (set().union(*assigned) == {(topic, p) for p in range(partitions)}
                and sum(counts) == sharing * partitions and max(counts) - min(counts) <= 1):
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"the share group's assignment did not settle: {counts}")
        time.sleep(0.1)
    controller = ray.get_actor(naming.CONTROLLER, namespace=cluster.namespace)
    topic_id = cluster.describe_topic(topic).topic_id
    ray.get([controller.ensure_share_partition.remote(group, topic, topic_id, p) for p in range(partitions)])
    ray.get([_share_partition(cluster, group, topic, p).ready.remote() for p in range(partitions)])
    return clients


def _share_partition(cluster: Cluster, group: str, topic: str, partition: int):
    return ray.get_actor(naming.share_partition(group, topic, partition), namespace=cluster.namespace)


def _finish(cluster: Cluster, clients: list, group: str, topic: str, partitions: int) -> None:
    for c in clients:
        c.close()
    for p in range(partitions):  # free the processes before the next run
        try:
            ray.kill(_share_partition(cluster, group, topic, p))
        except ValueError:
            pass


def produce(cluster: Cluster, topic: str, partitions: int, records: int) -> None:
    value = os.urandom(RECORD)
    with cluster.producer(linger_ms=5, batch_size=BATCH * (RECORD + 16)) as producer:
        for i in range(records):
            producer.send(topic, value, partition=i % partitions)
        producer.flush()


def share_consume(cluster: Cluster, group: str, topic: str, partitions: int, records: int, consumers: int) -> dict:
    clients = _subscribed(cluster, group, topic, partitions, consumers)
    counts = [0] * consumers
    lock = threading.Lock()
    total = [0]
    cpu = _cpu_times()
    cpu_of = _process_cpu()
    started = time.perf_counter()

    def consume(i: int) -> None:
        c = clients[i]
        while True:
            with lock:
                if total[0] >= records:
                    break
            batch = c.poll(0.5)
            for r in batch:
                c.acknowledge(r, AcknowledgeType.ACCEPT)
            counts[i] += len(batch)
            with lock:
                total[0] += len(batch)
        c.commit_sync()
    threads = [threading.Thread(target=consume, args=(i,)) for i in range(consumers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - started
    busy = _cpu_busy(cpu)
    cores = _cpu_by_kind(cpu_of, elapsed)
    load = _load()
    _finish(cluster, clients, group, topic, partitions)
    return {"partitions": partitions, "consumers": consumers, "records": total[0], "seconds": round(elapsed, 2),
            "records_per_s": round(total[0] / elapsed), "per_consumer": counts, "cpu_busy": busy,
            "cores_by_process": cores, "load_average_1m": load}


def _percentiles(samples_ms: list[float]) -> dict:
    if not samples_ms:
        return {}
    s = sorted(samples_ms)
    return {"p50_ms": round(s[len(s) // 2], 2), "p99_ms": round(s[min(len(s) - 1, int(len(s) * 0.99))], 2),
            "max_ms": round(s[-1], 2), "count": len(s)}


def latency(cluster: Cluster, group: str, seconds: float, rate: int = LATENCY_RATE,
            partitions: int = LATENCY_PARTITIONS, consumers: int = LATENCY_CONSUMERS,
            producer_config: dict = DEFAULT_PRODUCER) -> dict:
    topic = f"{group}-topic"
    cluster.create_topic(topic, partitions)
    clients = _subscribed(cluster, group, topic, partitions, consumers)
    acked: dict = {}      # (partition, offset) -> when the producer learnt its produce was acknowledged
    delivered: dict = {}  # ... -> when a consumer's poll returned it
    durable: dict = {}    # ... -> when its acknowledgement's commit_sync returned
    total = int(seconds * rate)
    producing = threading.Event()
    producing.set()

    def consume(c) -> None:
        while producing.is_set() or len(durable) < total:
            batch = c.poll(0.1)
            now = time.perf_counter()
            keys = [(r.partition, r.offset) for r in batch]
            for r in batch:
                c.acknowledge(r, AcknowledgeType.ACCEPT)
            for k in keys:
                delivered[k] = now
            if batch:
                c.commit_sync()
                now = time.perf_counter()
                for k in keys:
                    durable[k] = now
            elif not producing.is_set() and len(delivered) >= total:
                break

    def on_acked(future) -> None:
        meta = future.result()
        acked[(meta.partition, meta.offset)] = time.perf_counter()

    threads = [threading.Thread(target=consume, args=(c,)) for c in clients]
    for t in threads:
        t.start()
    value = os.urandom(RECORD)
    cpu = _cpu_times()
    cpu_of = _process_cpu()
    with cluster.producer(**producer_config) as producer:
        started = time.perf_counter()
        for i in range(total):
            due = started + i / rate
            ahead = due - time.perf_counter()
            if ahead > 0.001:
                time.sleep(ahead)  # pacing the producer, not waiting for a result
            producer.send(topic, value, partition=i % partitions).add_done_callback(on_acked)
        producer.flush()
        produce_s = time.perf_counter() - started
    busy = _cpu_busy(cpu)
    cores = _cpu_by_kind(cpu_of, produce_s)
    producing.clear()
    for t in threads:
        t.join(timeout=120)
    load = _load()
    _finish(cluster, clients, group, topic, partitions)
    early = sum(1 for k, t in delivered.items() if k in acked and t < acked[k])
    return {"records": total, "target_records_per_s": rate, "produced_records_per_s": round(total / produce_s),
            "producer": producer_config,
            "consumers": consumers, "partitions": partitions,
            "delivery": _percentiles([max(t - acked[k], 0) * 1000 for k, t in delivered.items() if k in acked]),
            "acknowledgement_durable": _percentiles([max(t - acked[k], 0) * 1000 for k, t in durable.items()
                                                     if k in acked]),
            "delivered_before_produce_acknowledged": early, "cpu_busy": busy, "cores_by_process": cores,
            "load_average_1m": load}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--latency-s", type=float, default=5.0)
    parser.add_argument("--partitions", type=int, nargs="*", default=[4, 16])
    parser.add_argument("--consumers", type=int, nargs="*", default=[1, 2, 4, 8])
    parser.add_argument("--fsync", choices=["off", "on", "both"], default="both")
    args = parser.parse_args()
    init_ray(num_cpus=2)
    out = {"benchmark": "share_groups",
           "conditions": {"records": args.records, "record_bytes": RECORD, "max_poll_records": BATCH,
                          "cpus": os.cpu_count()},
           "throughput": [], "latency": []}
    try:
        for fsync in {"off": (False,), "on": (True,), "both": (False, True)}[args.fsync]:
            cluster = Cluster.local(config={"log.flush.fsync": fsync, "share.auto.offset.reset": "earliest",
                                            "group.share.heartbeat.interval.ms": 500,
                                            "group.share.min.heartbeat.interval.ms": 500})
            try:
                for partitions in args.partitions:
                    topic = f"bench-share-{partitions}"
                    cluster.create_topic(topic, partitions)
                    produce(cluster, topic, partitions, args.records)
                    for consumers in args.consumers:
                        run = share_consume(cluster, f"bench-{partitions}-{consumers}", topic, partitions,
                                            args.records, consumers)
                        raw = raw_transport(args.records, consumers)
                        ceiling = layout_ceiling(args.records, consumers, partitions)
                        run.update(fsync=fsync, raw_ray_records_per_s=round(raw),
                                   ratio_to_raw=round(run["records_per_s"] / raw, 3),
                                   layout_ceiling_records_per_s=round(ceiling),
                                   layout_ceiling_ratio_to_raw=round(ceiling / raw, 3),
                                   ratio_to_layout_ceiling=round(run["records_per_s"] / ceiling, 3))
                        out["throughput"].append(run)
                        print(json.dumps(run), file=sys.stderr, flush=True)
                if args.latency_s > 0:
                    for name, shape in (("goal", {}), ("goal_batching_producer", BATCHING),
                                        ("light", LIGHT)):
                        run = latency(cluster, f"latency-{name}-{int(fsync)}", args.latency_s, **shape)
                        run.update(fsync=fsync, load=name)
                        out["latency"].append(run)
                        print(json.dumps(run), file=sys.stderr, flush=True)
            finally:
                cluster.shutdown()
        four = [r for r in out["throughput"] if r["partitions"] == 4 and r["consumers"] == 4 and not r["fsync"]]
        if four:
            out["goal_records_per_s_with_4_consumers_on_4_partitions"] = GOAL
            out["goal_met"] = four[0]["records_per_s"] >= GOAL
        print(json.dumps(out, indent=2))
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
