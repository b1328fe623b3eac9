"""TLS and SASL through the Kafka gateway: confluent-kafka producing then consuming 1 KiB
records over PLAINTEXT, SSL and SASL_SSL (SCRAM-SHA-256) listeners of one deployment, in the
same run, alternating rounds so that the machine's load falls on all alike. Prints JSON:
records/s of each, and each secured listener's throughput as a ratio of PLAINTEXT's.

    python tests/benchmarks/bench_gateway_tls.py [--records 20000] [--rounds 2]
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import statistics
import sys
import tempfile
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

import ray  # noqa: E402
import confluent_kafka as ck  # noqa: E402

from actors import Cluster  # noqa: E402
from tests.security.certs import make_certs  # noqa: E402
from tests.benchmarks.quiet_ray import init_ray  # noqa: E402

RECORD = b"x" * 1024


def produce(config: dict, topic: str, records: int) -> float:
    producer = ck.Producer({**config, "linger.ms": 5, "batch.size": 256 * 1024, "acks": "all"})
    start = time.perf_counter()
    for i in range(records):
        while True:
            try:
                producer.produce(topic, RECORD)
                break
            except BufferError:
                producer.poll(0.01)
    assert producer.flush(120) == 0
    return records / (time.perf_counter() - start)


def consume(config: dict, topic: str, records: int) -> float:
    consumer = ck.Consumer({**config, "group.id": f"bench-{uuid.uuid4().hex[:8]}", "auto.offset.reset": "earliest",
                            "enable.auto.commit": False, "fetch.max.bytes": 8 * 1024 * 1024})
    consumer.subscribe([topic])
    got, start, deadline = 0, None, time.monotonic() + 300
    while got < records and time.monotonic() < deadline:
        for m in consumer.consume(1000, 1.0):
            if not m.error():
                start = start or time.perf_counter()
                got += 1
    elapsed = time.perf_counter() - start
    consumer.close()
    assert got >= records, f"consumed {got} of {records}"
    return records / elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    work = pathlib.Path(tempfile.mkdtemp(prefix="bench-tls-"))
    try:
        certs = make_certs(work)
        init_ray()
        cluster = Cluster.local(data_dir=str(work / "shoal"), config={
            "log.flush.fsync": False,
            "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
            "ssl.keystore.location": certs["server"], "sasl.enabled.mechanisms": "SCRAM-SHA-256",
            "sasl.users": {"bench": "bench-secret"}})
        listeners = {
            "PLAINTEXT": {"bootstrap.servers": cluster.bootstrap_servers_of("PLAINTEXT")},
            "SSL": {"bootstrap.servers": cluster.bootstrap_servers_of("SSL"), "security.protocol": "SSL",
                    "ssl.ca.location": certs["ca"]},
            "SASL_SSL": {"bootstrap.servers": cluster.bootstrap_servers_of("SASL_SSL"), "security.protocol": "SASL_SSL",
                         "ssl.ca.location": certs["ca"], "sasl.mechanism": "SCRAM-SHA-256",
                         "sasl.username": "bench", "sasl.password": "bench-secret"}}
        results = {name: {"produce": [], "consume": []} for name in listeners}
        for r in range(args.rounds):
            for name, config in listeners.items():
                topic = f"bench-{name.lower()}-{r}"
                cluster.create_topic(topic, 1)
                results[name]["produce"].append(produce(config, topic, args.records))
                results[name]["consume"].append(consume(config, topic, args.records))
        out = {"records": args.records, "record_bytes": len(RECORD), "rounds": args.rounds, "client": f"confluent-kafka {ck.version()}",
               "records_per_s": {n: {k: round(statistics.median(v)) for k, v in r.items()}
                                                    for n, r in results.items()}}
        base = out["records_per_s"]["PLAINTEXT"]
        out["ratio_to_plaintext"] = {n: {k: round(v / base[k], 3) for k, v in r.items()}
                                     for n, r in out["records_per_s"].items() if n != "PLAINTEXT"}
        print(json.dumps(out, indent=2))
        cluster.shutdown()
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
