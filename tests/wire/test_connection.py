"""A server connection against kafka-python's own client-side protocol code (KafkaProtocol),
no sockets: the requests are the bytes a real client sends, the responses are read by the
client's parser. Bad input follows Kafka's RequestContext: the downgrade answer for a newer
ApiVersions, the connection closed for everything else it cannot parse."""
import struct

import pytest
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest
from kafka.protocol.parser import KafkaProtocol

from runtime.wire.connection import ProtocolError, ServerConnection
from runtime.wire.entities import build, plain
from runtime.wire.frames import frame
from runtime.wire.versions import api_versions_response, check_table, response_class

TABLE = {18: (0, 4), 3: (0, 12)}


def client_bytes(*requests):
    client = KafkaProtocol(client_id="tester")
    for r in requests:
        client.send_request(r)
    return client, bytes(client.send_bytes())


def metadata_response(version):
    return build(response_class(3, version), {
        "throttle_time": 0, "cluster_id": "shoal", "controller_id": 0,
        "brokers": [{"node_id": 0, "host": "127.0.0.1", "port": 9092}], "topics": []})


def serve_one(conn):
    event = conn.next_event()
    assert event is not None
    if event.api_key == 18:
        return event, api_versions_response(conn.versions, event.api_version, event.unsupported_version is not None)
    return event, metadata_response(event.api_version)


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_api_versions_at_every_version(version):
    args = {"client_software_name": "kafka-python", "client_software_version": "3"} if version >= 3 else {}
    client, data = client_bytes(ApiVersionsRequest[version](**args))
    conn = ServerConnection(TABLE)
    conn.receive_data(data)
    event, response = serve_one(conn)
    assert (event.api_key, event.api_version, event.client_id) == (18, version, "tester")
    [(correlation_id, decoded)] = client.receive_bytes(conn.send_response(event, response))
    assert correlation_id == event.correlation_id
    assert decoded.error_code == 0
    assert {(k.api_key, k.min_version, k.max_version) for k in decoded.api_keys} == {(18, 0, 4), (3, 0, 12)}


def test_a_newer_api_versions_gets_the_version_0_downgrade_answer():
    # ApiVersions v9 does not exist: header v2 (flexible), then a body nobody can read.
    body = struct.pack(">hhi", 18, 9, 77) + struct.pack(">h", 2) + b"me" + b"\x00" + b"\xff\xfe"
    conn = ServerConnection(TABLE)
    conn.receive_data(frame(body))
    event = conn.next_event()
    assert (event.api_version, event.unsupported_version, event.correlation_id) == (0, 9, 77)
    out = conn.send_response(event, api_versions_response(TABLE, 0, unsupported=True))
    # Response header v0, then ApiVersionsResponse v0: error, [api_key, min, max].
    size, correlation_id, error, count = struct.unpack_from(">iihi", out)
    assert (size, correlation_id, error, count) == (len(out) - 4, 77, 35, 1)
    assert struct.unpack_from(">hhh", out, 14) == (18, 0, 4)


def test_a_flexible_response_is_read_by_the_client():
    client, data = client_bytes(MetadataRequest[12](topics=None, allow_auto_topic_creation=False,
                                                   include_topic_authorized_operations=False))
    conn = ServerConnection(TABLE)
    conn.receive_data(data)
    event, response = serve_one(conn)
    assert event.api_version == 12 and plain(event.request)["topics"] is None
    [(_, decoded)] = client.receive_bytes(conn.send_response(event, response))
    assert decoded.brokers[0].port == 9092


def test_pipelined_responses_leave_in_request_order():
    requests = [MetadataRequest[9](topics=None, allow_auto_topic_creation=False) for _ in range(3)]
    client, data = client_bytes(*requests)
    conn = ServerConnection(TABLE)
    conn.receive_data(data)
    served = [serve_one(conn) for _ in requests]
    assert conn.next_event() is None
    assert conn.send_response(*served[2]) == b""
    assert conn.send_response(served[1][0], None) == b""  # as a Produce with acks=0: no response
    out = conn.send_response(*served[0])
    correlation_ids = []
    while out:
        size, correlation_id = struct.unpack_from(">ii", out)
        correlation_ids.append(correlation_id)
        out = out[4 + size:]
    assert correlation_ids == [served[0][0].correlation_id, served[2][0].correlation_id]


def closes(data: bytes, table=TABLE):
    conn = ServerConnection(table)
    with pytest.raises(ProtocolError):
        conn.receive_data(data)
        conn.next_event()
    assert conn.closed
    with pytest.raises(ProtocolError):
        conn.receive_data(b"")
    return conn


def test_an_unknown_api_key_closes():
    closes(frame(struct.pack(">hhih", 999, 0, 1, -1)))


def test_an_api_the_server_does_not_serve_closes():
    closes(frame(struct.pack(">hhih", 0, 9, 1, -1)), table={18: (0, 4)})  # Produce not served


def test_an_unsupported_version_closes():
    closes(frame(struct.pack(">hhih", 3, 13, 1, -1)))  # Metadata v13 when 12 is the max


def test_a_truncated_body_closes():
    _, data = client_bytes(MetadataRequest[4](topics=["a-topic"], allow_auto_topic_creation=False))
    payload = data[4:-6]
    closes(frame(payload))


def test_bytes_after_the_body_are_ignored_as_kafka_does():
    # librdkafka 2.16's Metadata v12 for every topic, as it sends it: three bytes follow the
    # body. Kafka's RequestContext parses the schema and leaves the rest; so does the gateway.
    payload = bytes.fromhex("0003000c00000003000772646b61666b610000000000010000")
    conn = ServerConnection(TABLE)
    conn.receive_data(frame(payload))
    event = conn.next_event()
    assert (event.api_key, event.api_version, event.correlation_id) == (3, 12, 3)
    assert event.request.topics is None and not conn.closed


def test_a_frame_shorter_than_a_header_closes():
    closes(frame(b"\x00\x03"))


def test_an_oversized_frame_closes_before_its_body():
    closes(struct.pack(">i", 100 * 1024 * 1024 + 1))
    closes(struct.pack(">i", -5))


def test_a_table_kio_cannot_encode_is_refused():
    with pytest.raises(ValueError):
        check_table({18: (0, 9)})
    with pytest.raises(ValueError):
        check_table({3: (0, 12)})
