"""A request the gateway fails as a whole is answered as Kafka answers it: where the response
carries its errors per topic, partition, group, resource, user or transaction, each item the
request named carries the error (runtime.wire.error_responses); an empty list would read as
success. Here the controller is gone for good (killed without restart), so every request that
needs it fails whole: confluent-kafka's admin client, which knows the controller from before,
and raw requests (tests/gateway/raw.py) for what no client sends without working Metadata;
then one group coordinator goes too, for OffsetFetch's answers by version.
The first test needs no cluster: every API the gateway serves whose response lists items
with errors answers failures on them."""
import uuid

import pytest
from confluent_kafka.admin import (AdminClient, NewPartitions, NewTopic, ScramCredentialInfo, ScramMechanism,
                                   UserScramCredentialDeletion, UserScramCredentialUpsertion)

from actors import naming
from actors.server.gateway.actor import HANDLERS
from runtime.errors import Errors
from runtime.wire.entities import ZERO_UUID, _fields
from runtime.wire.error_responses import TOP_LEVEL_ONLY, answers_per_item
from runtime.wire.versions import response_class
from tests.conftest import wait_until
from tests.helpers import error_code

from .raw import RawClient

pytestmark = pytest.mark.ray

AWAY = Errors.COORDINATOR_NOT_AVAILABLE.code


def _has_item_errors(cls) -> bool:
    """Whether a response lists entries (at any depth) that carry an error code."""
    def errors_below(entity) -> bool:
        return any(kafka_type == "error_code" or (nested is not None and errors_below(nested))
                   for _, kafka_type, nested, _ in _fields(entity))
    return any(nested is not None and array and errors_below(nested) for _, _, nested, array in _fields(cls))


def _has_top_level_error(cls) -> bool:
    return any(kafka_type == "error_code" for _, kafka_type, _, _ in _fields(cls))


def test_every_served_api_with_errors_per_item_answers_a_failure_on_them():
    for api_key, (low, high, _) in HANDLERS.items():
        if api_key == 18:  # ApiVersions: answered by the gateway itself
            continue
        for version in range(low, high + 1):
            cls = response_class(api_key, version)
            if answers_per_item(api_key):
                continue
            where = f"{cls.__name__} v{version}"
            assert _has_top_level_error(cls), f"{where}: no top-level error and no error response per item"
            assert not _has_item_errors(cls) or api_key in TOP_LEVEL_ONLY, f"{where} lists items with errors"


# ------------------------------------------------------------------ the controller gone

@pytest.fixture(scope="module")
def controller_gone(cluster, bootstrap):
    """confluent-kafka's admin client, which found the controller before it went."""
    import ray
    admin = AdminClient({"bootstrap.servers": bootstrap})
    cluster.create_topic("known-before", 2)
    assert "known-before" in admin.list_topics(timeout=30).topics
    ray.kill(cluster.controller, no_restart=True)
    cluster._forget(naming.CONTROLLER)

    def gone():
        try:
            ray.get_actor(naming.CONTROLLER, namespace=cluster.namespace)
        except ValueError:
            return True
        return False
    wait_until(gone, message="the controller gone")
    return admin


@pytest.fixture
def raw(bootstrap, controller_gone):
    client = RawClient(bootstrap)
    yield client
    client.close()


def test_topic_admin_requests_fail_on_each_topic(controller_gone):
    admin = controller_gone
    futures = admin.create_partitions([NewPartitions("t1", 2), NewPartitions("t2", 3)], request_timeout=15)
    assert {topic: error_code(f) for topic, f in futures.items()} == {"t1": AWAY, "t2": AWAY}
    futures = admin.create_topics([NewTopic("t3", 1), NewTopic("t4", 1)], request_timeout=15)
    assert {topic: error_code(f) for topic, f in futures.items()} == {"t3": AWAY, "t4": AWAY}
    futures = admin.delete_topics(["t1", "t2"], request_timeout=15)
    assert {topic: error_code(f) for topic, f in futures.items()} == {"t1": AWAY, "t2": AWAY}


def test_user_requests_fail_on_each_user(controller_gone, raw):
    admin = controller_gone
    futures = admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion("alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"secret"),
        UserScramCredentialDeletion("bob", ScramMechanism.SCRAM_SHA_512)], request_timeout=15)
    assert {user: error_code(f) for user, f in futures.items()} == {"alice": AWAY, "bob": AWAY}
    futures = admin.describe_user_scram_credentials(["alice", "bob"], request_timeout=15)
    assert {user: error_code(f) for user, f in futures.items()} == {"alice": AWAY, "bob": AWAY}
    # Asked for every user, there is none to carry it: the error is at the top.
    answer = raw.request(50, 0, {"users": None})
    assert (answer["error_code"], answer["results"]) == (AWAY, [])


def test_metadata_fails_on_each_topic_it_never_learnt_and_still_lists_the_brokers(raw):
    """A Kafka broker answers Metadata from its cache whatever its controller does; an answer
    without brokers would make clients drop their connections (librdkafka its share sessions)."""
    for version in (1, 12):
        answer = raw.request(3, version, {"topics": [{"name": "m1", "topic_id": ZERO_UUID},
                                                     {"name": "m2", "topic_id": ZERO_UUID}],
                                          "allow_auto_topic_creation": True,
                                          "include_topic_authorized_operations": False})
        assert [(t["name"], t["error_code"]) for t in answer["topics"]] == [("m1", AWAY), ("m2", AWAY)]
        assert [b["node_id"] for b in answer["brokers"]] == [0]


def test_metadata_answers_the_topics_it_learnt_before_from_its_cache(raw, controller_gone):
    for version in (1, 12):
        answer = raw.request(3, version, {"topics": [{"name": "known-before", "topic_id": ZERO_UUID}],
                                          "allow_auto_topic_creation": True,
                                          "include_topic_authorized_operations": False})
        (topic,) = answer["topics"]
        assert (topic["name"], topic["error_code"]) == ("known-before", 0)
        assert [(p["partition_index"], p["error_code"], p["leader_id"]) for p in topic["partitions"]] == [
            (0, 0, 0), (1, 0, 0)]
    everything = controller_gone.list_topics(timeout=30)
    assert everything.brokers and "known-before" in everything.topics


def test_a_produce_by_topic_id_fails_on_each_partition(raw):
    """A topic id the gateway has not seen is looked up at the controller, which is gone."""
    topic_id = str(uuid.uuid4())
    answer = raw.request(0, 13, {"transactional_id": None, "acks": -1, "timeout": 5000, "topic_data": [
        {"topic_id": topic_id, "partition_data": [{"index": 0, "records": b""}, {"index": 1, "records": b""}]}]})
    assert [(t["topic_id"], p["index"], p["error_code"], p["base_offset"]) for t in answer["responses"]
            for p in t["partition_responses"]] == [(topic_id, 0, AWAY, -1), (topic_id, 1, AWAY, -1)]


def test_share_group_offsets_requests_fail_on_each_group_and_partition(raw):
    answer = raw.request(90, 1, {"groups": [{"group_id": "s1", "topics": [{"topic_name": "a", "partitions": [0]}]},
                                            {"group_id": "s2", "topics": None}]})
    assert [(g["group_id"], g["error_code"]) for g in answer["groups"]] == [("s1", AWAY), ("s2", AWAY)]
    answer = raw.request(91, 0, {"group_id": "s1", "topics": [{"topic_name": "a", "partitions": [
        {"partition_index": 0, "start_offset": 0}, {"partition_index": 1, "start_offset": 3}]}]})
    assert [(t["topic_name"], p["partition_index"], p["error_code"]) for t in answer["responses"]
            for p in t["partitions"]] == [("a", 0, AWAY), ("a", 1, AWAY)]


# ------------------------------------------------------------------ a group coordinator gone

LOST_GROUP = "lost-group"


@pytest.fixture(scope="module")
def group_coordinator_gone(cluster):
    """The group coordinator of LOST_GROUP killed without restart."""
    import ray
    name = naming.find_coordinator(naming.CoordinatorType.GROUP, LOST_GROUP, cluster.config)
    ray.kill(cluster.directory.get(name), no_restart=True)
    cluster._forget(name)

    def gone():
        try:
            ray.get_actor(name, namespace=cluster.namespace)
        except ValueError:
            return True
        return False
    wait_until(gone, message=f"{name} gone")


def test_offset_fetch_fails_on_each_partition_before_v2_on_each_group_from_v8(group_coordinator_gone, raw):
    asked = [{"name": "a", "partition_indexes": [0, 1]}]
    answer = raw.request(9, 1, {"group_id": LOST_GROUP, "topics": asked})
    assert [(t["name"], p["partition_index"], p["error_code"], p["committed_offset"]) for t in answer["topics"]
            for p in t["partitions"]] == [("a", 0, AWAY, -1), ("a", 1, AWAY, -1)]
    answer = raw.request(9, 5, {"group_id": LOST_GROUP, "topics": asked, "require_stable": False})
    assert (answer["error_code"], answer["topics"]) == (AWAY, [])
    answer = raw.request(9, 9, {"groups": [{"group_id": LOST_GROUP, "member_id": None, "member_epoch": -1,
                                            "topics": asked}], "require_stable": False})
    assert [(g["group_id"], g["error_code"]) for g in answer["groups"]] == [(LOST_GROUP, AWAY)]
