"""KIP-848 heartbeats through the Kafka gateway, with request coalescing and without, in the
same run. Prints JSON. Goal: at least 5,000 heartbeats/s coalesced, and at least 4x the
uncoalesced rate.

A protocol-level load generator in this process (kio encoding over raw asyncio sockets)
plays MEMBERS KIP-848 members over CONNECTIONS connections, all in groups of the one group
coordinator actor. Each member joins, acknowledges its assignment as the protocol asks, and
then keeps one ConsumerGroupHeartbeat in flight (its next leaves as soon as its last is
answered, ignoring the interval), so a connection carries MEMBERS / CONNECTIONS requests at
once, as pipelining Kafka clients do. Two gateways serve the same coordinator: the
cluster's own (coalescing, the default) and a second one started with
gateway.coalesce.requests=false; each drives its own group, passes alternate. Reported per
mode: heartbeats/s (best and median of the passes), latency, the CPU time the gateway's,
the coordinator's and this process's spent per heartbeat (where the time goes), and how many
heartbeats a Ray call carried.

Run: python tests/benchmarks/bench_gateway_heartbeats.py [--quick]
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
import platform
import statistics
import struct
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

import psutil  # noqa: E402
import ray  # noqa: E402

from actors import Cluster, naming  # noqa: E402
from actors.server.gateway.actor import GatewayActor  # noqa: E402
from tests.benchmarks.quiet_ray import init_ray  # noqa: E402
from tests.gateway.raw import AsyncRawClient, encode  # noqa: E402

TOPIC, PARTITIONS = "bench", 8
MEMBERS, CONNECTIONS = 2000, 50
HEARTBEAT = 68
CONFIG = {"listeners": "PLAINTEXT://127.0.0.1:0", "log.flush.fsync": False,
          # Each group idles while the other mode runs: no member may expire meanwhile.
          "group.consumer.session.timeout.ms": 600000, "group.consumer.max.session.timeout.ms": 600000}
CORRELATION_ID_AT = 8  # in a framed request: size (4), api key (2), api version (2)


class Member:
    def __init__(self, group: str, member_id: str) -> None:
        self.group, self.member_id = group, member_id
        self.epoch = 0
        self.ack = None  # the assignment to acknowledge in the next heartbeat
        self.frame: bytearray | None = None  # the steady heartbeat, encoded once per epoch

    def request(self, client: AsyncRawClient) -> bytes:
        correlation_id = client.next_id()
        if self.epoch == 0:
            return encode(HEARTBEAT, 1, correlation_id, {
                "group_id": self.group, "member_id": self.member_id, "member_epoch": 0,
                "rebalance_timeout": 30000, "subscribed_topic_names": [TOPIC], "topic_partitions": []})
        if self.ack is not None:
            return encode(HEARTBEAT, 1, correlation_id, {
                "group_id": self.group, "member_id": self.member_id, "member_epoch": self.epoch,
                "topic_partitions": self.ack})
        if self.frame is None:
            self.frame = bytearray(encode(HEARTBEAT, 1, 0, {
                "group_id": self.group, "member_id": self.member_id, "member_epoch": self.epoch,
                "topic_partitions": None}))
        struct.pack_into(">i", self.frame, CORRELATION_ID_AT, correlation_id)
        return bytes(self.frame)

    def answered(self, r: dict) -> bool:
        """Take a response; True if the member's state changed."""
        if r["error_code"]:
            self.epoch, self.ack, self.frame = 0, None, None  # fenced or unknown: join again
            return True
        changed = r["member_epoch"] != self.epoch or r["assignment"] is not None
        if r["member_epoch"] != self.epoch:
            self.epoch, self.frame = r["member_epoch"], None
        self.ack = r["assignment"]["topic_partitions"] if r["assignment"] is not None else None
        return changed


class Load:
    def __init__(self, bootstrap: str, group: str, members: int, connections: int) -> None:
        self.bootstrap, self.group = bootstrap, group
        self.n_members, self.n_connections = members, connections
        self.counting = False
        self.count = self.errors = 0
        self.latencies: list[float] = []
        self.last_change = time.monotonic()

    async def start(self) -> None:
        self.clients = [await AsyncRawClient.connect(self.bootstrap) for _ in range(self.n_connections)]
        self.members = [Member(self.group, f"{self.group}-{i}") for i in range(self.n_members)]
        self.running = True
        self.tasks = [asyncio.ensure_future(self._member(m, self.clients[i % self.n_connections]))
                      for i, m in enumerate(self.members)]

    async def _member(self, member: Member, client: AsyncRawClient) -> None:
        while self.running:
            started = time.perf_counter()
            r = await client.send(HEARTBEAT, 1, member.request(client))
            if self.counting:
                self.count += 1
                self.errors += r["error_code"] != 0
                self.latencies.append(time.perf_counter() - started)
            if member.answered(r):
                self.last_change = time.monotonic()

    async def settle(self, quiet_s: float = 2.0, timeout_s: float = 300.0) -> float:
        """Wait until no member's epoch or assignment changed for quiet_s; returns the time taken."""
        started = time.monotonic()
        while time.monotonic() - self.last_change < quiet_s:
            if time.monotonic() - started > timeout_s:
                raise TimeoutError(f"{self.group} did not settle in {timeout_s}s")
            await asyncio.sleep(0.2)
        return time.monotonic() - started

    async def measure(self, seconds: float) -> tuple[int, int, list[float]]:
        self.count = self.errors = 0
        self.latencies = []
        self.counting = True
        await asyncio.sleep(seconds)
        self.counting = False
        return self.count, self.errors, self.latencies

    async def pause(self) -> None:
        """Stop sending; the members' last heartbeats are answered before this returns."""
        self.running = False
        await asyncio.gather(*self.tasks)

    async def resume(self) -> None:
        self.running = True
        self.tasks = [asyncio.ensure_future(self._member(m, self.clients[i % self.n_connections]))
                      for i, m in enumerate(self.members)]

    async def close(self) -> None:
        await self.pause()
        for client in self.clients:
            await client.close()


def cpu_s(process: psutil.Process) -> float:
    return sum(process.cpu_times()[:2])


async def run(quick: bool) -> dict:
    passes, window_s = (2, 5.0) if quick else (3, 10.0)
    init_ray()
    cluster = Cluster.local(config=CONFIG)
    try:
        cluster.create_topic(TOPIC, PARTITIONS)
        bootstrap = cluster.bootstrap_servers  # before the second gateway: it is no broker of the cluster
        plain = ray.remote(GatewayActor).options(name="shoal/bench/gateway-uncoalesced", namespace=cluster.namespace,
                                                 num_cpus=0).remote(
            {**cluster._deployment, "config": {**cluster._deployment["config"], "gateway.coalesce.requests": False}})
        address = ray.get(plain.start.remote(), timeout=60)
        gateways = {"coalesced": (bootstrap, cluster._actor(naming.gateway(0))),
                    "uncoalesced": (f"{address['host']}:{address['port']}", plain)}
        # offsets.topic.num.partitions is 1: both groups live in this one coordinator actor.
        coordinator = cluster.group_coordinator("heartbeats-coalesced")
        processes = {"coordinator": psutil.Process(ray.get(coordinator.status.remote())["pid"]),
                     "driver": psutil.Process()}
        loads, settle_s = {}, {}
        for mode, (bootstrap, _) in gateways.items():
            load = Load(bootstrap, f"heartbeats-{mode}", MEMBERS, CONNECTIONS)
            await load.start()
            settle_s[mode] = round(await load.settle(), 1)
            await load.pause()
            loads[mode] = load
        results = {mode: [] for mode in gateways}
        for _ in range(passes):
            for mode, (_, gateway) in gateways.items():
                load = loads[mode]
                await load.resume()
                await load.settle(quiet_s=1.0)
                gw_process = psutil.Process(ray.get(gateway.status.remote())["pid"])
                coalesced_before = ray.get(gateway.status.remote())["coalesced"]
                cpu_before = {k: cpu_s(p) for k, p in {**processes, "gateway": gw_process}.items()}
                wall = time.perf_counter()
                count, errors, latencies = await load.measure(window_s)
                wall = time.perf_counter() - wall
                cpu = {k: cpu_s(p) - cpu_before[k] for k, p in {**processes, "gateway": gw_process}.items()}
                coalesced_after = ray.get(gateway.status.remote())["coalesced"]
                await load.pause()
                latencies.sort()
                run_result = {
                    "heartbeats_per_s": round(count / wall), "errors": errors,
                    "latency_ms_p50": round(latencies[len(latencies) // 2] * 1000, 2),
                    "latency_ms_p99": round(latencies[int(len(latencies) * 0.99)] * 1000, 2),
                    "cpu_us_per_heartbeat": {k: round(v / max(count, 1) * 1e6, 1) for k, v in cpu.items()},
                }
                if coalesced_after is not None:
                    calls = coalesced_after["calls"] - coalesced_before["calls"]
                    batches = coalesced_after["batches"] - coalesced_before["batches"]
                    run_result["heartbeats_per_ray_call"] = round(calls / max(batches, 1), 1)
                results[mode].append(run_result)
        for load in loads.values():
            await load.close()
    finally:
        cluster.shutdown()

    def summary(runs):
        rates = [r["heartbeats_per_s"] for r in runs]
        best = max(runs, key=lambda r: r["heartbeats_per_s"])
        # The CPU the three processes spend per heartbeat: what the machine's other load
        # (shared cores) does not change, unlike the rate.
        cpu = statistics.median(sum(r["cpu_us_per_heartbeat"].values()) for r in runs)
        return {"heartbeats_per_s_best": max(rates), "heartbeats_per_s_median": round(statistics.median(rates)),
                "cpu_us_per_heartbeat_median": round(cpu, 1), "best_pass": best, "passes": rates}
    out = {mode: summary(runs) for mode, runs in results.items()}
    ratio = out["coalesced"]["heartbeats_per_s_median"] / max(out["uncoalesced"]["heartbeats_per_s_median"], 1)
    cpu_ratio = out["uncoalesced"]["cpu_us_per_heartbeat_median"] / out["coalesced"]["cpu_us_per_heartbeat_median"]
    return {
        "benchmark": "gateway_heartbeats",
        "conditions": {"members": MEMBERS, "connections": CONNECTIONS, "groups": "one per mode, same coordinator",
                       "topic_partitions": PARTITIONS, "window_s": window_s, "passes": passes,
                       "fsync": False, "cpus": os.cpu_count(), "python": platform.python_version(),
                       "settle_s": settle_s},
        **out,
        "ratio_coalesced_to_uncoalesced": round(ratio, 2),
        "cpu_ratio_uncoalesced_to_coalesced": round(cpu_ratio, 2),
        "load_average_1m": round(os.getloadavg()[0], 1),
        "goal": {"heartbeats_per_s": 5000, "ratio": 4,
                 "met": out["coalesced"]["heartbeats_per_s_median"] >= 5000 and ratio >= 4},
    }


def main() -> None:
    logging.basicConfig(level=logging.WARNING)
    print(json.dumps(asyncio.run(run("--quick" in sys.argv)), indent=2))


if __name__ == "__main__":
    main()
