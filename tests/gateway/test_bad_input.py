"""Bad input on raw sockets: what Kafka closes a connection for closes that connection
alone, the downgrade answer to a newer ApiVersions comes back, a connection that stalls
halfway through a request is closed after connections.max.idle.ms, thousands of idle
connections are served beside and closed after that time too, and none of it disturbs
another client."""
import selectors
import socket
import struct
import time

import pytest
from kafka import KafkaConsumer

pytestmark = pytest.mark.ray

# A backlog for the burst of idle connections below (Kafka's default, 50, would drop most).
# auto.create.topics.enable off: a Metadata naming a missing topic must not make it.
CLUSTER_CONFIG = {"connections.max.idle.ms": 1500, "socket.listen.backlog.size": 4096,
                  "auto.create.topics.enable": False}


def connect(bootstrap):
    host, port = bootstrap.split(":")
    s = socket.create_connection((host, int(port)), timeout=10)
    return s


def closed_by_peer(s, timeout_s=10) -> bool:
    s.settimeout(timeout_s)
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True


def request(api_key, version, correlation_id, body=b"", client_id=b"raw"):
    header = struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id
    return header + body


def frame(payload):
    return struct.pack(">i", len(payload)) + payload


def healthy(bootstrap):
    """Another client is served meanwhile."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        return consumer.topics() is not None
    finally:
        consumer.close()


@pytest.mark.parametrize("data", [
    struct.pack(">i", 100 * 1024 * 1024 + 1),  # over socket.request.max.bytes
    struct.pack(">i", -1),  # a negative size
    frame(request(999, 0, 1)),  # an unknown API key
    frame(request(3, 99, 1)),  # Metadata at a version nobody has
    frame(request(3, 4, 1, b"\x00\x00\x00\x05\x00")),  # a truncated body
    frame(b"\x00"),  # shorter than a header
], ids=["oversized", "negative", "unknown-api", "bad-version", "truncated", "tiny"])
def test_bad_frames_close_that_connection_only(bootstrap, data):
    s = connect(bootstrap)
    try:
        s.sendall(data)
        assert closed_by_peer(s)
    finally:
        s.close()
    assert healthy(bootstrap)


def test_a_newer_api_versions_gets_the_v0_downgrade_answer(bootstrap):
    s = connect(bootstrap)
    try:
        s.sendall(frame(request(18, 42, 7) + b"\x00garbage"))
        s.settimeout(10)
        size = struct.unpack(">i", s.recv(4))[0]
        body = b""
        while len(body) < size:
            body += s.recv(size - len(body))
        correlation_id, error, count = struct.unpack_from(">ihi", body)
        assert (correlation_id, error, count) == (7, 35, 1)
        assert struct.unpack_from(">hhh", body, 10) == (18, 0, 4)
    finally:
        s.close()


def test_half_a_request_then_silence_is_closed_after_the_idle_time(bootstrap):
    s = connect(bootstrap)
    try:
        s.sendall(frame(request(3, 4, 1, b"\x00\x00\x00\x00\x00"))[:9])
        assert closed_by_peer(s, timeout_s=20)
    finally:
        s.close()
    assert healthy(bootstrap)


def test_a_client_that_vanishes_mid_request_disturbs_nobody(bootstrap):
    for _ in range(20):
        s = connect(bootstrap)
        s.sendall(frame(request(3, 4, 1, b"\x00\x00\x00\x00\x00"))[:7])
        s.close()
    assert healthy(bootstrap)


def _open_idle(bootstrap, count: int, deadline: float, opened: list[socket.socket]) -> None:
    """`count` connections that send nothing, opened side by side into `opened`."""
    host, port = bootstrap.split(":")
    with selectors.DefaultSelector() as pending:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setblocking(False)
            s.connect_ex((host, int(port)))
            pending.register(s, selectors.EVENT_WRITE)
            opened.append(s)
        while pending.get_map() and time.monotonic() < deadline:
            for key, _ in pending.select(timeout=1):
                assert key.fileobj.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0
                pending.unregister(key.fileobj)
        assert not pending.get_map(), f"{len(pending.get_map())} of {count} connections never opened"


def _all_closed_by_peer(connections: list[socket.socket], deadline: float) -> None:
    with selectors.DefaultSelector() as waiting:
        for s in connections:
            waiting.register(s, selectors.EVENT_READ)
        while waiting.get_map() and time.monotonic() < deadline:
            for key, _ in waiting.select(timeout=1):
                assert closed_by_peer(key.fileobj, timeout_s=0), "an idle connection got bytes it never asked for"
                waiting.unregister(key.fileobj)
        assert not waiting.get_map(), f"{len(waiting.get_map())} idle connections still open"


def test_thousands_of_idle_connections_disturb_nobody_and_are_closed_after_the_idle_time(bootstrap):
    idle = []
    try:
        _open_idle(bootstrap, 2000, time.monotonic() + 60, idle)
        assert healthy(bootstrap)
        # The gateway closes each one connections.max.idle.ms after it last heard from it.
        _all_closed_by_peer(idle, time.monotonic() + 60)
    finally:
        for s in idle:
            s.close()
    assert healthy(bootstrap)


def test_a_produced_batch_with_a_bad_crc_is_corrupt_message_and_not_written(cluster, bootstrap):
    from kafka.protocol.parser import KafkaProtocol
    from kafka.protocol.producer import ProduceRequest
    from kafka.record.default_records import DefaultRecordBatchBuilder

    cluster.create_topic("crc", 1)
    builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 20)
    builder.append(0, timestamp=1, key=b"k", value=b"v", headers=[])
    batch = bytearray(builder.build())
    batch[-1] ^= 0xFF
    P = ProduceRequest[8]
    client = KafkaProtocol(client_id="raw")
    client.send_request(P(transactional_id=None, acks=-1, timeout_ms=10000, topic_data=[
        P.TopicProduceData(name="crc", partition_data=[P.TopicProduceData.PartitionProduceData(
            index=0, records=bytes(batch))])]))
    s = connect(bootstrap)
    try:
        s.sendall(bytes(client.send_bytes()))
        s.settimeout(30)
        responses = []
        while not responses:
            data = s.recv(65536)
            assert data, "the gateway closed the connection"
            responses = client.receive_bytes(data)
    finally:
        s.close()
    [(_, response)] = responses
    [topic] = response.responses
    [partition] = topic.partition_responses
    assert partition.error_code == 2  # CORRUPT_MESSAGE
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        from kafka import TopicPartition
        assert consumer.end_offsets([TopicPartition("crc", 0)]) == {TopicPartition("crc", 0): 0}
    finally:
        consumer.close()


def test_with_auto_create_off_a_missing_topic_stays_unknown_though_the_client_allows(cluster, bootstrap):
    from tests.gateway.raw import RawClient
    raw = RawClient(bootstrap)
    try:
        (t,) = raw.request(3, 12, {"topics": [{"name": "never-made", "topic_id": "00000000-0000-0000-0000-000000000000"}],
                                   "allow_auto_topic_creation": True,
                                   "include_topic_authorized_operations": False})["topics"]
    finally:
        raw.close()
    assert t["error_code"] == 3  # UNKNOWN_TOPIC_OR_PARTITION
    assert "never-made" not in cluster.list_topics()
