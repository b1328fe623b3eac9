"""1 KiB records, acks=all, through the Kafka gateway with confluent-kafka (librdkafka)
against shoal's own producer and consumer, in the same run on the same cluster. Then the
cost of the gateway's conversion between Kafka's v2 record batches and the msgpack
batches partition logs store (runtime/wire/storage.py), per MB of records, both
directions, each codec. Prints JSON.

    python tests/benchmarks/bench_gateway_data.py [--records 50000] [--fsync]

Both producers get the same linger (5 ms) and batch size and are idempotent (shoal's is by
default); librdkafka's default, not idempotent, is measured too. An idempotent librdkafka
keeps one Produce of many records in flight per partition (it counts messages, not
requests, against its limit of five in-flight requests: rdkafka_broker.c, as against Kafka),
so that figure is bound by the gateway's latency, the other by its throughput. Both
consumers read one partition from offset 0 without a group.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

from tests.benchmarks.quiet_ray import init_ray  # noqa: E402

RECORD = 1024
BATCH_BYTES = 256 * 1024


def _rates(records: int, seconds: float) -> dict:
    return {"records_per_s": round(records / seconds), "mb_per_s": round(records * RECORD / seconds / 1e6, 1)}


def shoal_clients(cluster, topic: str, records: int, value: bytes) -> dict:
    from kafka import TopicPartition
    producer = cluster.producer(acks="all", linger_ms=5, batch_size=BATCH_BYTES)
    started = time.perf_counter()
    for _ in range(records):
        producer.send(topic, value, partition=0)
    producer.flush()
    produced = time.perf_counter() - started
    producer.close()

    consumer = cluster.consumer(None, auto_offset_reset="earliest")
    consumer.assign([TopicPartition(topic, 0)])
    started, seen = time.perf_counter(), 0
    while seen < records:
        seen += sum(len(batch) for batch in consumer.poll(timeout_ms=1000).values())
    consumed = time.perf_counter() - started
    consumer.close(autocommit=False)
    return {"produce": _rates(records, produced), "consume": _rates(records, consumed)}


def confluent_produce(bootstrap: str, topic: str, records: int, value: bytes, idempotent: bool) -> dict:
    import confluent_kafka
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                                         "batch.size": BATCH_BYTES, "enable.idempotence": idempotent})
    started = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, value, partition=0)
                break
            except BufferError:  # the local queue is full: let deliveries drain it
                producer.poll(0.01)
        producer.poll(0)
    assert producer.flush(120) == 0, "records left undelivered"
    return _rates(records, time.perf_counter() - started)


def confluent_consume(bootstrap: str, topic: str, records: int) -> dict:
    import confluent_kafka
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-confluent",
                                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
    started, seen = time.perf_counter(), 0
    while seen < records:
        for message in consumer.consume(num_messages=10000, timeout=1.0):
            assert message.error() is None, message.error()
            seen += 1
    consumed = time.perf_counter() - started
    consumer.close()
    return _rates(records, consumed)


def conversion_costs(megabytes: int = 8) -> dict:
    """Milliseconds per MB of 1 KiB records to turn a produced v2 batch into a stored batch
    (decode, CRC, decompress, msgpack) and a stored batch into a fetched v2 batch (msgpack
    decode, v2 encode, CRC), and to pass a v2 batch through as is (CRC check only)."""
    from crc32c import crc32c

    from runtime.messages.topics import FetchedBatch
    from runtime.wire.compression import NAMES
    from runtime.wire.records import decode_batch, encode_batch
    from runtime.wire.storage import fetched_records, produce_request

    per_batch = BATCH_BYTES // RECORD
    values = [os.urandom(RECORD // 2) * 2 for _ in range(per_batch)]  # half-compressible
    records = [(1_700_000_000_000 + i, None, v, ()) for i, v in enumerate(values)]
    batches = megabytes * 1_000_000 // (per_batch * RECORD) + 1
    mb = batches * per_batch * RECORD / 1e6
    out = {}
    for codec, name in NAMES.items():
        v2 = encode_batch(records, compression=codec)
        started = time.perf_counter()
        for _ in range(batches):
            batch, _ = decode_batch(v2)
            stored = produce_request("t", 0, batch, -1, 30000, None).records
        produce_ms = (time.perf_counter() - started) * 1000 / mb
        fetched = FetchedBatch(0, per_batch - 1, stored)
        started = time.perf_counter()
        for _ in range(batches):
            fetched_records(fetched)
        fetch_ms = (time.perf_counter() - started) * 1000 / mb
        started = time.perf_counter()
        for _ in range(batches):
            crc32c(memoryview(v2)[21:])
        pass_ms = (time.perf_counter() - started) * 1000 / mb
        out[name] = {"produce_v2_to_stored_ms_per_mb": round(produce_ms, 2),
                     "fetch_stored_to_v2_ms_per_mb": round(fetch_ms, 2),
                     "pass_through_crc_check_ms_per_mb": round(pass_ms, 3),
                     "v2_bytes_per_record": round(len(v2) / per_batch)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--fsync", action="store_true", help="fsync every flush (the production default)")
    args = parser.parse_args()
    value = os.urandom(RECORD)

    from actors import Cluster
    init_ray()
    with tempfile.TemporaryDirectory() as data_dir:
        cluster = Cluster.local(data_dir=data_dir, config={
            "log.flush.fsync": args.fsync, "listeners": "PLAINTEXT://127.0.0.1:0"})
        try:
            cluster.create_topic("bench-shoal", 1)
            cluster.create_topic("bench-confluent", 1)
            cluster.create_topic("bench-confluent-plain", 1)
            shoal = shoal_clients(cluster, "bench-shoal", args.records, value)
            bootstrap = cluster.bootstrap_servers
            confluent = {
                "produce": confluent_produce(bootstrap, "bench-confluent", args.records, value, idempotent=True),
                "produce_not_idempotent": confluent_produce(bootstrap, "bench-confluent-plain", args.records, value,
                                                            idempotent=False),
                "consume": confluent_consume(bootstrap, "bench-confluent", args.records)}
        finally:
            cluster.shutdown()

    result = {
        "benchmark": "gateway_data",
        "conditions": {"records": args.records, "record_bytes": RECORD, "acks": "all", "linger_ms": 5,
                       "batch_bytes": BATCH_BYTES, "fsync": args.fsync, "cpus": os.cpu_count(),
                       "load_average": round(os.getloadavg()[0], 2)},
        "shoal_clients": shoal,
        "confluent_kafka_through_gateway": confluent,
        "produce_ratio": round(confluent["produce"]["records_per_s"] / shoal["produce"]["records_per_s"], 2),
        "produce_not_idempotent_ratio": round(
            confluent["produce_not_idempotent"]["records_per_s"] / shoal["produce"]["records_per_s"], 2),
        "consume_ratio": round(confluent["consume"]["records_per_s"] / shoal["consume"]["records_per_s"], 2),
        "conversion": conversion_costs(),
        "goal": "confluent-kafka through the gateway at least as fast as shoal's own clients",
    }
    result["goal_met"] = result["produce_ratio"] >= 1 and result["consume_ratio"] >= 1
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
