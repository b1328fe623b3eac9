"""Fetch through the gateway on the wire (kafka-python's own request and response code over
a socket): the long poll waits for data up to max wait and answers as soon as a record
lands, and a response holds at most max_bytes of records, the first partition's always."""
import socket
import threading
import time

import pytest
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.parser import KafkaProtocol

from tests.helpers import produce_record_through_gateway

pytestmark = pytest.mark.ray

F = FetchRequest[11]


def fetch(bootstrap, topic, partitions, max_wait_ms, min_bytes=1, max_bytes=50 * 1024 * 1024):
    client = KafkaProtocol(client_id="raw")
    client.send_request(F(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes,
                          isolation_level=0, session_id=0, session_epoch=-1, rack_id="", forgotten_topics_data=[],
                          topics=[F.FetchTopic(topic=topic, partitions=[F.FetchTopic.FetchPartition(
                              partition=p, current_leader_epoch=-1, fetch_offset=0, log_start_offset=-1,
                              partition_max_bytes=1 << 20) for p in partitions])]))
    host, port = bootstrap.split(":")
    with socket.create_connection((host, int(port)), timeout=60) as s:
        s.sendall(bytes(client.send_bytes()))
        responses = []
        while not responses:
            data = s.recv(1 << 20)
            assert data, "the gateway closed the connection"
            responses = client.receive_bytes(data)
    [(_, response)] = responses
    [topic_response] = response.responses
    return {p.partition_index: p for p in topic_response.partitions}


def test_an_empty_fetch_waits_max_wait(cluster, bootstrap):
    cluster.create_topic("quiet", 1)
    start = time.monotonic()
    parts = fetch(bootstrap, "quiet", [0], max_wait_ms=1500)
    assert time.monotonic() - start >= 1.4
    assert parts[0].error_code == 0 and not parts[0].records


def test_the_long_poll_answers_when_a_record_lands(cluster, bootstrap):
    cluster.create_topic("poll", 1)
    out = {}
    waiter = threading.Thread(target=lambda: out.update(fetch(bootstrap, "poll", [0], max_wait_ms=60000)))
    start = time.monotonic()
    waiter.start()
    produce_record_through_gateway(bootstrap, "poll", 0, b"wake up")
    waiter.join(60)
    assert not waiter.is_alive() and time.monotonic() - start < 45
    assert out[0].high_watermark == 1 and out[0].records


def test_max_bytes_serves_the_first_partition_with_records_only(cluster, bootstrap):
    cluster.create_topic("wide", 2)
    produce_record_through_gateway(bootstrap, "wide", 0, b"a" * 2000)
    produce_record_through_gateway(bootstrap, "wide", 1, b"b" * 2000)
    parts = fetch(bootstrap, "wide", [0, 1], max_wait_ms=0, max_bytes=100)
    assert parts[0].records and not parts[1].records
    parts = fetch(bootstrap, "wide", [0, 1], max_wait_ms=0)
    assert parts[0].records and parts[1].records


def test_max_bytes_stops_inside_the_first_partition_at_a_batch(cluster, bootstrap):
    """librdkafka's 0082_fetch_max_bytes: partition_max_bytes far above max_bytes; the
    response stops at the batch that would pass max_bytes, even inside one partition."""
    cluster.create_topic("deep", 2)
    for p in (0, 1):
        for _ in range(4):
            produce_record_through_gateway(bootstrap, "deep", p, b"d" * 2000)
    whole = fetch(bootstrap, "deep", [0, 1], max_wait_ms=0)
    batch = len(whole[0].records) // 4
    assert len(whole[1].records) == 4 * batch
    parts = fetch(bootstrap, "deep", [0, 1], max_wait_ms=0, max_bytes=2 * batch + 10)
    assert len(parts[0].records) == 2 * batch and not parts[1].records
    first_only = fetch(bootstrap, "deep", [0, 1], max_wait_ms=0, max_bytes=10)
    assert len(first_only[0].records) == batch and not first_only[1].records
