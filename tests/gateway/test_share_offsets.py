"""Share-group offsets administered over the wire (DescribeShareGroupOffsets v0-1,
AlterShareGroupOffsets, DeleteShareGroupOffsets; confluent-kafka 2.16's AdminClient has no such
calls, so the requests are Kafka's own messages on a raw connection) with a group that
confluent's ShareConsumer consumed."""
import pytest

from confluent_kafka import AcknowledgeType

from runtime.errors import Errors
from tests.conftest import wait_until
from tests.gateway.raw import RawClient
from tests.gateway.test_share_groups import poll_until, share_consumer
from tests.helpers import produce_through_gateway

CLUSTER_CONFIG = {"share.auto.offset.reset": "earliest", "group.share.heartbeat.interval.ms": 500,
                  "group.share.min.heartbeat.interval.ms": 100}
DESCRIBE, ALTER, DELETE = 90, 91, 92


@pytest.fixture(scope="module")
def raw(bootstrap):
    client = RawClient(bootstrap)
    yield client
    client.sock.close()


def consume(bootstrap, group, topic, count):
    """A confluent ShareConsumer accepts `count` records and leaves; their values."""
    c = share_consumer(bootstrap, group)
    try:
        c.subscribe([topic])
        got = poll_until(c, count, AcknowledgeType.ACCEPT)
        assert all(v is None for v in c.commit_sync(30).values())
        return [m.value() for m in got]
    finally:
        c.close()


def describe(raw, group, topics=None, version=1):
    asked = None if topics is None else [{"topic_name": t, "partitions": ps} for t, ps in topics.items()]
    (g,) = raw.request(DESCRIBE, version, {"groups": [{"group_id": group, "topics": asked}]})["groups"]
    return g


def starts(g):
    return {(t["topic_name"], p["partition_index"]): (p["start_offset"], p.get("lag"), p["error_code"])
            for t in g["topics"] for p in t["partitions"]}


def test_apis_are_advertised(raw):
    keys = {k["api_key"]: (k["min_version"], k["max_version"]) for k in raw.request(18, 3, {"client_software_name": "raw", "client_software_version": "1"})["api_keys"]}
    assert keys[DESCRIBE] == (0, 1) and keys[ALTER] == (0, 0) and keys[DELETE] == (0, 0)


def test_describe_shows_where_the_group_is_and_its_lag(cluster, bootstrap, raw):
    cluster.create_topic("so1", 1)
    produce_through_gateway(bootstrap, "so1", 10)
    consume(bootstrap, "sog1", "so1", 10)
    produce_through_gateway(bootstrap, "so1", 5)  # not consumed yet: the lag
    g = describe(raw, "sog1")
    # KIP-1226: records settled past the persisted start offset (Kafka persists the start a
    # write moved with the next write) are not lag
    ((start, lag, error),) = starts(g).values()
    assert g["error_code"] == error == 0 and list(starts(g)) == [("so1", 0)] and 0 <= start <= 10 and lag == 5
    assert g["topics"][0]["topic_id"] == cluster.describe_topic("so1").topic_id
    assert starts(describe(raw, "sog1", version=0)) == {("so1", 0): (start, None, 0)}  # v0 has no lag
    # asked by name: partitions the cluster does not have are named so, one by one
    asked = starts(describe(raw, "sog1", {"so1": [0, 7], "nope": [0]}))
    assert asked[("so1", 0)] == (start, 5, 0)
    assert asked[("so1", 7)][2] == asked[("nope", 0)][2] == Errors.UNKNOWN_TOPIC_OR_PARTITION.code


def members(cluster, group):
    return cluster.admin().describe_groups([group])[group].members


def test_alter_moves_an_empty_group_and_refuses_one_with_members(cluster, bootstrap, raw):
    cluster.create_topic("so2", 1)
    produce_through_gateway(bootstrap, "so2", 10)
    consume(bootstrap, "sog2", "so2", 10)
    # while a member is in the group nothing moves: NON_EMPTY_GROUP
    member = share_consumer(bootstrap, "sog2")
    try:
        member.subscribe(["so2"])
        wait_until(lambda: member.poll(0.2) is not None and members(cluster, "sog2"), message="a member")
        refused = raw.request(ALTER, 0, {"group_id": "sog2", "topics": [
            {"topic_name": "so2", "partitions": [{"partition_index": 0, "start_offset": 8}]}]})
        assert refused["error_code"] == Errors.NON_EMPTY_GROUP.code
        assert refused["responses"][0]["partitions"][0]["error_code"] == Errors.NON_EMPTY_GROUP.code
    finally:
        member.close()
    assert starts(describe(raw, "sog2"))[("so2", 0)][1] == 0  # unchanged: nothing left to deliver
    wait_until(lambda: not members(cluster, "sog2"), message="the member left")
    moved = raw.request(ALTER, 0, {"group_id": "sog2", "topics": [
        {"topic_name": "so2", "partitions": [{"partition_index": 0, "start_offset": 8},
                                             {"partition_index": 3, "start_offset": 0}]},
        {"topic_name": "nope", "partitions": [{"partition_index": 0, "start_offset": 0}]}]})
    assert moved["error_code"] == 0
    errors = {(t["topic_name"], p["partition_index"]): p["error_code"] for t in moved["responses"] for p in t["partitions"]}
    assert errors == {("so2", 0): 0, ("so2", 3): Errors.UNKNOWN_TOPIC_OR_PARTITION.code,
                      ("nope", 0): Errors.UNKNOWN_TOPIC_OR_PARTITION.code}
    assert starts(describe(raw, "sog2"))[("so2", 0)][:2] == (8, 2)
    assert sorted(consume(bootstrap, "sog2", "so2", 2)) == [b"v8", b"v9"]  # the group starts over at 8


def test_delete_starts_the_group_over_at_the_reset_point(cluster, bootstrap, raw):
    cluster.create_topic("so3", 1)
    produce_through_gateway(bootstrap, "so3", 6)
    consume(bootstrap, "sog3", "so3", 6)
    deleted = raw.request(DELETE, 0, {"group_id": "sog3", "topics": [{"topic_name": "so3"}, {"topic_name": "nope"}]})
    assert deleted["error_code"] == 0
    assert {t["topic_name"]: t["error_code"] for t in deleted["responses"]} == {
        "so3": 0, "nope": Errors.UNKNOWN_TOPIC_OR_PARTITION.code}
    assert starts(describe(raw, "sog3")) == {}  # no state: the next consumer starts at share.auto.offset.reset
    assert sorted(consume(bootstrap, "sog3", "so3", 6)) == sorted(f"v{i}".encode() for i in range(6))


def test_group_errors(raw):
    assert describe(raw, "")["error_code"] == Errors.INVALID_GROUP_ID.code
    unknown = raw.request(ALTER, 0, {"group_id": "no-such-group", "topics": []})
    assert unknown["error_code"] == 0  # nothing asked, nothing to refuse (as Kafka)
    absent = raw.request(DELETE, 0, {"group_id": "no-such-group", "topics": [{"topic_name": "nope"}]})
    assert absent["responses"][0]["error_code"] == Errors.UNKNOWN_TOPIC_OR_PARTITION.code
