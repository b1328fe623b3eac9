"""Produce then fetch 1 KiB records in batches of 500, against the raw Ray transport.

The peer is an empty async actor method that receives (for produce) or returns (for fetch)
the same payload, called with the same number of requests in flight, in the same run.
Prints JSON.

    python tests/benchmarks/bench_produce_fetch.py [--records 200000] [--fsync]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

import ray  # noqa: E402

from actors import Cluster  # noqa: E402
from runtime.messages.topics import FetchRequest, ProduceRequest  # noqa: E402
from runtime.topics.data import encode_records  # noqa: E402
from tests.benchmarks.quiet_ray import init_ray  # noqa: E402

RECORD = 1024
BATCH = 500


@ray.remote(num_cpus=0)
class Sink:
    """The raw transport: an actor method that does nothing with what it gets."""

    async def take(self, payload: bytes) -> int:
        return len(payload)

    async def give(self, payload_size: int) -> bytes:
        return self._payload if len(self._payload) == payload_size else b""

    async def keep(self, payload: bytes) -> None:
        self._payload = payload


def pipelined(submit, batches: int, in_flight: int) -> float:
    """Run `batches` calls with up to `in_flight` outstanding; returns seconds."""
    started = time.perf_counter()
    pending = []
    for i in range(batches):
        pending.append(submit(i))
        if len(pending) >= in_flight:
            done, pending = ray.wait(pending, num_returns=1)
            ray.get(done)
    ray.get(pending)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--in-flight", type=int, default=4)
    parser.add_argument("--fsync", action="store_true", help="fsync every flush (the production default)")
    args = parser.parse_args()
    batches = args.records // BATCH
    payload = encode_records([(int(time.time() * 1000), None, os.urandom(RECORD), []) for _ in range(BATCH)])

    init_ray()
    cluster = Cluster.local(config={"log.flush.fsync": args.fsync})
    try:
        cluster.create_topic("bench", 1)
        leader = cluster.partition_leader("bench", 0)
        sink = Sink.remote()
        ray.get(sink.keep.remote(payload))
        ray.get(leader.ready.remote())

        raw_put = pipelined(lambda i: sink.take.remote(payload), batches, args.in_flight)
        produce = pipelined(lambda i: leader.produce.remote(ProduceRequest("bench", 0, payload, BATCH, 0)),
                            batches, args.in_flight)
        raw_get = pipelined(lambda i: sink.give.remote(len(payload)), batches, args.in_flight)
        fetch = pipelined(lambda i: leader.fetch.remote(FetchRequest("bench", 0, i * BATCH, max_wait_ms=0,
                                                                     partition_max_bytes=len(payload))),
                          batches, args.in_flight)

        # The producer client end to end (batching, partitioner, futures), same records.
        value = os.urandom(RECORD)
        producer = cluster.producer(linger_ms=5, batch_size=len(payload))
        started = time.perf_counter()
        for _ in range(args.records):
            producer.send("bench", value, partition=0)
        producer.flush()
        client = time.perf_counter() - started
        producer.close()

        rate = lambda seconds: round(batches * BATCH / seconds)  # noqa: E731
        result = {
            "benchmark": "produce_fetch",
            "conditions": {"records": batches * BATCH, "record_bytes": RECORD, "batch_records": BATCH,
                           "in_flight": args.in_flight, "fsync": args.fsync, "cpus": os.cpu_count(),
                           "load_average": os.getloadavg()[0]},
            "raw_ray_put_records_per_s": rate(raw_put),
            "produce_records_per_s": rate(produce),
            "produce_ratio_to_raw": round(raw_put / produce, 3),
            "raw_ray_get_records_per_s": rate(raw_get),
            "fetch_records_per_s": rate(fetch),
            "fetch_ratio_to_raw": round(raw_get / fetch, 3),
            "producer_client_records_per_s": round(args.records / client),
            "goal": "produce and fetch each at least 0.5 of the raw Ray transport",
        }
        result["goal_met"] = result["produce_ratio_to_raw"] >= 0.5 and result["fetch_ratio_to_raw"] >= 0.5
        print(json.dumps(result, indent=2))
    finally:
        cluster.shutdown()


if __name__ == "__main__":
    main()
