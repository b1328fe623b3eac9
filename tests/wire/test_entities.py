"""Plain values in and out of kio's generated classes, encoded as Kafka encodes them."""
import io

from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.index import load_response_schema

from runtime.wire.entities import build, plain

METADATA = 3


def roundtrip(entity):
    buf = io.BytesIO()
    entity_writer(type(entity))(buf, entity)
    decoded, size = entity_reader(type(entity))(memoryview(buf.getvalue()), 0)
    assert size == len(buf.getvalue())
    return decoded


def test_a_metadata_response_from_plain_values():
    data = {
        "throttle_time": 0, "cluster_id": "c", "controller_id": 0,
        "brokers": [{"node_id": 0, "host": "127.0.0.1", "port": 9092, "rack": None}],
        "topics": [{"error_code": 0, "name": "t", "topic_id": "0b1e4f5c-6d7e-4a8b-9c0d-1e2f3a4b5c6d",
                    "is_internal": False, "topic_authorized_operations": -2147483648,
                    "partitions": [{"error_code": 0, "partition_index": 0, "leader_id": 0, "leader_epoch": 0,
                                    "replica_nodes": [0], "isr_nodes": [0], "offline_replicas": []}]}],
    }
    for version in (1, 5, 9, 12):
        cls = load_response_schema(METADATA, version)
        decoded = roundtrip(build(cls, data))
        out = plain(decoded)
        assert out["brokers"][0]["port"] == 9092
        assert out["topics"][0]["partitions"][0]["replica_nodes"] == [0]
        assert decoded.topics[0].error_code is ErrorCode.none
        if version >= 10:
            assert out["topics"][0]["topic_id"] == "0b1e4f5c-6d7e-4a8b-9c0d-1e2f3a4b5c6d"


def test_durations_are_milliseconds():
    cls = load_response_schema(18, 3)  # ApiVersions: throttle_time is a duration
    decoded = roundtrip(build(cls, {"error_code": 35, "api_keys": [], "throttle_time": 250}))
    assert plain(decoded)["throttle_time"] == 250
    assert plain(decoded)["error_code"] == 35
