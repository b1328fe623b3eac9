"""1 KiB records, acks=all, through the Kafka gateway with confluent-kafka (librdkafka)
against shoal's own producer and consumer, in the same run on the same cluster. Then what
the partition log's two batch forms cost per MB of records (runtime/topics/data.py): a
Kafka client's v2 batch is checked and stored as it came and served back as stored, shoal's
msgpack batch is encoded as v2 for a Kafka client. Prints JSON.

    python tests/benchmarks/bench_gateway_data.py [--records 200000] [--fsync]

Both producers get the same linger (5 ms) and batch size (256 KiB). The goal, as the issue
puts it, is confluent-kafka's Producer with acks=all, the rest as librdkafka ships it (not
idempotent), and its Consumer, each at least as fast as shoal's own client (shoal's producer
is idempotent by default, as Kafka's Java producer is). An idempotent librdkafka is measured
too, and reported apart: it keeps one Produce of many records in flight per partition (it
counts messages, not requests, against its limit of five in-flight requests: rdkafka_broker.c,
as against Kafka), so its figure is one batch per round trip through the gateway and the
partition leader's Ray call, where the others are bound by throughput. Each producer has
sent one record (so it is connected and has its producer id) before its clock starts. Both
consumers read one partition from offset 0 without a group. Runs shorter than a few seconds
are mostly start-up (librdkafka's first batches, Ray's first calls): keep --records high.
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
    producer.send(topic, value, partition=0)  # connected, with a producer id, before the clock
    producer.flush()
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
    # Connected, with a producer id, before the clock: librdkafka asks for its id only after a
    # timer (about 0.5 s here), a start-up cost that is not throughput.
    producer.produce(topic, value, partition=0)
    assert producer.flush(60) == 0
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


def storage_costs(megabytes: int = 8) -> dict:
    """Milliseconds per MB of 1 KiB records, each codec, on each side of the partition log
    (runtime.topics.data): a Kafka client's v2 batch checked whole by the leader (CRC, every
    record) and stored as it came, against shoal's msgpack batch checked the same way; a
    stored v2 batch served to a Kafka client as stored, against a msgpack one encoded as v2;
    and shoal's consumer decoding a stored v2 batch, against a msgpack one."""
    from runtime.messages.topics import FetchedBatch, ProduceRequest
    from runtime.topics.data import decode_entries, encode_records, stored_payload, validate_payload
    from runtime.wire.compression import NAMES
    from runtime.wire.records import encode_batch
    from runtime.wire.storage import fetched_records, produce_request

    per_batch = BATCH_BYTES // RECORD
    values = [os.urandom(RECORD // 2) * 2 for _ in range(per_batch)]  # half-compressible
    records = [(1_700_000_000_000 + i, None, v, ()) for i, v in enumerate(values)]
    batches = megabytes * 1_000_000 // (per_batch * RECORD) + 1
    mb = batches * per_batch * RECORD / 1e6

    def ms_per_mb(work) -> float:
        started = time.perf_counter()
        for _ in range(batches):
            work()
        return round((time.perf_counter() - started) * 1000 / mb, 3)

    msgpack_payload = encode_records(records)
    msgpack_request = ProduceRequest("t", 0, msgpack_payload, per_batch, records[-1][0])
    msgpack_fetched = FetchedBatch(0, per_batch - 1, msgpack_payload)
    out = {"msgpack (shoal's producer)": {
        "produce_check_ms_per_mb": ms_per_mb(lambda: validate_payload(msgpack_request)),
        "fetch_to_kafka_client_ms_per_mb": ms_per_mb(lambda: fetched_records(msgpack_fetched)),
        "decode_for_shoal_consumer_ms_per_mb": ms_per_mb(lambda: decode_entries(msgpack_payload, 0)),
        "bytes_per_record": round(len(msgpack_payload) / per_batch)}}
    for codec, name in NAMES.items():
        v2 = encode_batch(records, compression=codec)
        request = produce_request("t", 0, v2, -1, 30000, None)
        stored = stored_payload(v2, 0)
        fetched = FetchedBatch(0, per_batch - 1, stored)
        out[f"v2 {name} (a Kafka client's producer)"] = {
            "produce_check_ms_per_mb": ms_per_mb(lambda: (validate_payload(request), stored_payload(v2, 0))),
            "fetch_to_kafka_client_ms_per_mb": ms_per_mb(lambda: fetched_records(fetched)),
            "decode_for_shoal_consumer_ms_per_mb": ms_per_mb(lambda: decode_entries(stored, 0)),
            "bytes_per_record": round(len(v2) / per_batch)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=200_000)
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
                "produce": confluent_produce(bootstrap, "bench-confluent-plain", args.records, value,
                                             idempotent=False),
                "produce_idempotent": confluent_produce(bootstrap, "bench-confluent", args.records, value,
                                                        idempotent=True),
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
        "produce_idempotent_ratio": round(
            confluent["produce_idempotent"]["records_per_s"] / shoal["produce"]["records_per_s"], 2),
        "consume_ratio": round(confluent["consume"]["records_per_s"] / shoal["consume"]["records_per_s"], 2),
        "storage": storage_costs(),
        "goal": "confluent-kafka's Producer (acks=all, otherwise librdkafka's defaults: not idempotent) and "
                "Consumer through the gateway at least as fast as shoal's own clients",
    }
    result["goal_met"] = result["produce_ratio"] >= 1 and result["consume_ratio"] >= 1
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
