"""A request that fails as a whole gets Kafka's error response on the wire
(runtime.wire.error_responses): where the response carries its errors per topic, partition,
group, resource, key, user or transaction, each item the request named carries the error.
Every API with a builder, at every version kio knows, encoded and decoded as a client reads
it."""
import io

import pytest
from kio.serial import entity_reader, entity_writer

from runtime.errors import Errors, KafkaError
from runtime.wire.entities import ZERO_UUID, build, plain
from runtime.wire.error_responses import _BUILDERS, error_response
from runtime.wire.versions import kio_range, request_class

ERROR = KafkaError(Errors.COORDINATOR_NOT_AVAILABLE, "the controller is away")
CODE = ERROR.code
A, B = "0b1e4f5c-6d7e-4a8b-9c0d-1e2f3a4b5c6d", "1c2f5a6d-7e8f-4b9c-8d1e-2f3a4b5c6d7e"

# Fields that name the item an entry answers for.
KEYS = ("name", "topic", "topic_name", "topic_id", "group_id", "key", "user", "transactional_id", "resource_name",
        "index", "partition_index", "partition_id")
ERROR_FIELDS = ("error_code", "partition_error_code")


def errors_on_items(value, path=()):
    """(the names of an entry and the entries holding it, its error code) for each entry of
    a list in the response that has an error field."""
    if isinstance(value, list):
        for item in value:
            yield from errors_on_items(item, path)
    elif isinstance(value, dict):
        here = path + tuple(value[k] for k in KEYS if value.get(k) not in (None, ZERO_UUID))
        for field in ERROR_FIELDS:
            if field in value and here != path:
                yield here, value[field]
        for k, v in value.items():
            if isinstance(v, list):
                yield from errors_on_items(v, here)


def answer(api_key, version, data, error=ERROR):
    """The error response to the request of these plain values, as the client decodes it."""
    request = plain(build(request_class(api_key, version), data))  # as the gateway reads it
    response = error_response(api_key, version, request, error)
    if response is None:
        return None
    buf = io.BytesIO()
    entity_writer(type(response))(buf, response)
    decoded, _ = entity_reader(type(response))(memoryview(buf.getvalue()), 0)
    out = plain(decoded)
    out["items"] = sorted(pair for k, v in out.items() if isinstance(v, list) for pair in errors_on_items(v))
    return out


def on(*items):
    return sorted((item, CODE) for item in items)


def records():
    return [{"index": 0, "records": b""}, {"index": 1, "records": b""}]


ACL = {"resource_type": 2, "resource_name": "a", "resource_pattern_type": 3, "principal": "User:x", "host": "*",
       "operation": 3, "permission_type": 3, "resource_type_filter": 2, "resource_name_filter": "a",
       "pattern_type_filter": 3, "principal_filter": None, "host_filter": None}

# api key -> (request, the items that carry the error at `version` (None: the top-level error alone))
CASES = {
    0: ({"acks": -1, "timeout": 1000, "transactional_id": None, "topic_data": [
        {"name": "a", "topic_id": A, "partition_data": records()},
        {"name": "b", "topic_id": B, "partition_data": records()[:1]}]},
        lambda v: on((A, 0), (A, 1), (B, 0)) if v >= 13 else on(("a", 0), ("a", 1), ("b", 0))),
    1: ({"max_wait": 500, "min_bytes": 1, "session_id": 7, "session_epoch": 1, "forgotten_topics_data": [],
         "rack_id": "", "topics": [
        {"topic": "a", "topic_id": A, "partitions": [{"partition": 0, "fetch_offset": 3, "partition_max_bytes": 1}]}]},
        lambda v: None if v >= 13 else on(("a", 0))),
    2: ({"replica_id": -1, "isolation_level": 0, "timeout": 1000, "topics": [
        {"name": "a", "partitions": [{"partition_index": 0, "timestamp": -1},
                                     {"partition_index": 2, "timestamp": -2}]}]},
        lambda v: on(("a", 0), ("a", 2))),
    3: ({"topics": [{"name": "a", "topic_id": ZERO_UUID}, {"name": "b", "topic_id": ZERO_UUID}],
         "allow_auto_topic_creation": False, "include_topic_authorized_operations": False,
         "include_cluster_authorized_operations": False},
        lambda v: on(("a",), ("b",))),
    8: ({"group_id": "g", "generation_id_or_member_epoch": 1, "member_id": "m", "group_instance_id": None, "topics": [
        {"name": "a", "topic_id": A, "partitions": [
            {"partition_index": 0, "committed_offset": 5, "committed_metadata": ""},
            {"partition_index": 1, "committed_offset": 5, "committed_metadata": ""}]}]},
        lambda v: on((A, 0), (A, 1)) if v >= 10 else on(("a", 0), ("a", 1))),
    9: ({"group_id": "g", "topics": [{"name": "a", "partition_indexes": [0, 1]}], "require_stable": False,
         "groups": [{"group_id": "g", "member_id": None,
                     "topics": [{"name": "a", "topic_id": A, "partition_indexes": [0, 1]}]},
                    {"group_id": "h", "member_id": None, "topics": None}]},
        lambda v: on(("g",), ("h",)) if v >= 8 else None if v >= 2 else on(("a", 0), ("a", 1))),
    10: ({"key": "g", "key_type": 0, "coordinator_keys": ["g", "h"]},
         lambda v: None if v < 4 else on(("g",), ("h",))),
    15: ({"groups": ["g", "h"], "include_authorized_operations": False}, lambda v: on(("g",), ("h",))),
    19: ({"topics": [{"name": "a", "num_partitions": 3, "replication_factor": 1, "assignments": [], "configs": []},
                     {"name": "b", "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}],
          "timeout": 1000, "validate_only": False},
         lambda v: on(("a",), ("b",))),
    20: ({"topic_names": ["a", "b"], "topics": [{"name": "a", "topic_id": ZERO_UUID}, {"name": None, "topic_id": B}],
          "timeout": 1000},
         lambda v: on(("a",), (B,)) if v >= 6 else on(("a",), ("b",))),
    21: ({"topics": [{"name": "a", "partitions": [{"partition_index": 0, "offset": 5},
                                                  {"partition_index": 1, "offset": -1}]}], "timeout": 1000},
         lambda v: on(("a", 0), ("a", 1))),
    24: ({"v3_and_below_transactional_id": "t", "v3_and_below_producer_id": 1, "v3_and_below_producer_epoch": 0,
          "v3_and_below_topics": [{"name": "a", "partitions": [0, 1]}],
          "transactions": [{"transactional_id": "t", "producer_id": 1, "producer_epoch": 0,
                            "topics": [{"name": "a", "partitions": [0, 1]}]}]},
         lambda v: None if v >= 4 else on(("a", 0), ("a", 1))),
    28: ({"transactional_id": "t", "group_id": "g", "producer_id": 1, "producer_epoch": 0, "topics": [
        {"name": "a", "partitions": [{"partition_index": 0, "committed_offset": 5, "committed_metadata": ""}]}]},
        lambda v: on(("a", 0))),
    30: ({"creations": [ACL, ACL]}, lambda v: []),  # results name nothing: see the ACL test below
    31: ({"filters": [ACL]}, lambda v: []),
    34: ({"dirs": [{"path": "/d", "topics": [{"name": "a", "partitions": [0, 1]}]}]},
         lambda v: on(("a", 0), ("a", 1))),
    35: ({"topics": [{"topic": "a", "partitions": [0]}]}, lambda v: None if v >= 3 else []),
    43: ({"election_type": 0, "topic_partitions": [{"topic": "a", "partitions": [0, 1]}], "timeout": 1000},
         lambda v: on(("a", 0), ("a", 1))),
    45: ({"timeout": 1000, "allow_replication_factor_change": True, "topics": [
        {"name": "a", "partitions": [{"partition_index": 0, "replicas": [0]}]}]},
        lambda v: on(("a", 0))),
    46: ({"timeout": 1000, "topics": [{"name": "a", "partition_indexes": [0]}]}, lambda v: None),
    75: ({"topics": [{"name": "a"}, {"name": "b"}], "response_partition_limit": 10, "cursor": None},
         lambda v: on(("a",), ("b",))),
    32: ({"resources": [{"resource_type": 2, "resource_name": "a", "configuration_keys": None},
                        {"resource_type": 32, "resource_name": "g", "configuration_keys": ["x"]}],
          "include_synonyms": False},
         lambda v: on(("a",), ("g",))),
    37: ({"topics": [{"name": "a", "count": 4, "assignments": None}, {"name": "b", "count": 2, "assignments": None}],
          "timeout": 1000, "validate_only": False},
         lambda v: on(("a",), ("b",))),
    42: ({"groups_names": ["g", "h"]}, lambda v: on(("g",), ("h",))),
    44: ({"resources": [{"resource_type": 2, "resource_name": "a", "configs": [
        {"name": "retention.ms", "config_operation": 0, "value": "1"}]}], "validate_only": False},
        lambda v: on(("a",))),
    50: ({"users": [{"name": "alice"}, {"name": "bob"}]}, lambda v: on(("alice",), ("bob",))),
    51: ({"deletions": [{"name": "bob", "mechanism": 1}], "upsertions": [
        {"name": "alice", "mechanism": 1, "iterations": 4096, "salt": b"s", "salted_password": b"p"},
        {"name": "bob", "mechanism": 2, "iterations": 4096, "salt": b"s", "salted_password": b"p"}]},
        lambda v: on(("alice",), ("bob",))),
    65: ({"transactional_ids": ["t", "u"]}, lambda v: on(("t",), ("u",))),
    69: ({"group_ids": ["g", "h"], "include_authorized_operations": False}, lambda v: on(("g",), ("h",))),
    77: ({"group_ids": ["g"], "include_authorized_operations": False}, lambda v: on(("g",))),
    90: ({"groups": [{"group_id": "g", "topics": [{"topic_name": "a", "partitions": [0]}]},
                     {"group_id": "h", "topics": None}]},
         lambda v: on(("g",), ("h",))),
    91: ({"group_id": "g", "topics": [{"topic_name": "a", "partitions": [
        {"partition_index": 0, "start_offset": 5}, {"partition_index": 1, "start_offset": 0}]}]},
        lambda v: on(("a", 0), ("a", 1))),
}


def versions(api_key):
    low, high = kio_range(api_key)
    return [(api_key, v) for v in range(low, high + 1)]


def test_every_api_answered_per_item_has_a_case():
    assert set(CASES) == set(_BUILDERS)


@pytest.mark.parametrize("api_key,version", [kv for k in sorted(CASES) for kv in versions(k)],
                         ids=lambda x: str(x))
def test_each_item_the_request_named_carries_the_error(api_key, version):
    data, expected = CASES[api_key]
    out = answer(api_key, version, data)
    items = expected(version)
    if items is None:
        assert out["items"] == [] and out["error_code"] == CODE
    else:
        assert out["items"] == items


@pytest.mark.parametrize("api_key,results", [(30, "results"), (31, "filter_results")])
def test_each_acl_creation_and_filter_carries_the_error(api_key, results):
    for _, version in versions(api_key):
        out = answer(api_key, version, CASES[api_key][0])
        assert [r["error_code"] for r in out[results]] == [CODE] * len(next(iter(CASES[api_key][0].values())))


def test_kafkas_values_beside_the_error():
    produced = answer(0, 9, CASES[0][0])["responses"][0]["partition_responses"][0]
    assert (produced["base_offset"], produced["log_start_offset"], produced["error_message"]) == (
        -1, -1, "the controller is away")
    listed = answer(2, 9, CASES[2][0])["topics"][0]["partitions"][0]
    assert (listed["offset"], listed["timestamp"]) == (-1, -1)
    fetched = answer(1, 12, CASES[1][0])
    assert (fetched["error_code"], fetched["session_id"], fetched["responses"][0]["partitions"][0]["high_watermark"]) \
        == (CODE, 7, -1)
    for version in (3, 6):
        found = answer(10, version, CASES[10][0])
        node = found if version < 4 else found["coordinators"][0]
        assert (node["node_id"], node["host"], node["port"]) == (-1, "", -1)
    fetched = answer(9, 1, CASES[9][0])["topics"][0]["partitions"][0]
    assert (fetched["committed_offset"], fetched["metadata"]) == (-1, "")
    # No top-level error on Metadata (from v13 it would ask the client to re-bootstrap) and no brokers.
    described = answer(3, 13, CASES[3][0])
    assert (described["error_code"], described["brokers"]) == (0, [])
    # Where the response has both, the error is at the top too; but DescribeUserScramCredentials
    # has it at the top only when it named no user (librdkafka aborts on a top-level error).
    assert answer(91, 0, CASES[91][0])["error_code"] == CODE
    assert answer(50, 0, CASES[50][0])["error_code"] == 0
    assert answer(50, 0, {"users": None})["error_code"] == CODE


def test_messages_go_with_the_error_but_not_the_internals_of_an_unknown_one():
    created = answer(37, 3, CASES[37][0])["results"]
    assert [r["error_message"] for r in created] == ["the controller is away"] * 2
    unknown = KafkaError(Errors.UNKNOWN_SERVER_ERROR, "KeyError: 'secret'")
    created = answer(37, 3, CASES[37][0], unknown)["results"]
    assert [(r["error_code"], r["error_message"]) for r in created] == [(Errors.UNKNOWN_SERVER_ERROR.code, None)] * 2


def test_a_produce_with_acks_0_gets_no_answer():
    assert answer(0, 9, {**CASES[0][0], "acks": 0}) is None


def test_an_api_answered_at_the_top_gets_its_error_there():
    joined = answer(11, 9, {"group_id": "g", "session_timeout": 10000, "rebalance_timeout": 10000, "member_id": "",
                            "protocol_type": "consumer", "protocols": []})
    assert joined["error_code"] == CODE
    deleted = answer(47, 0, {"group_id": "g", "topics": [{"name": "a", "partitions": [{"partition_index": 0}]}]})
    assert (deleted["error_code"], deleted["topics"]) == (CODE, [])
