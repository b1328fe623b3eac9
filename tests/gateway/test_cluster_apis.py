"""The admin APIs on the cluster's shape, answered as a Kafka 4.2 cluster whose partitions
each have one replica on their leader's broker: ElectLeaders, DescribeLogDirs,
AlterReplicaLogDirs, DescribeQuorum, AlterPartitionReassignments, ListPartitionReassignments,
DescribeTopicPartitions and ListConfigResources, through kafka-python's KafkaAdminClient
and confluent-kafka's AdminClient where they have the call, and raw requests (kio) for the
error paths: bad input gets Kafka's error and changes nothing."""
import contextlib
import os

import pytest
from confluent_kafka import ElectionType, TopicPartition as CTopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient, TopicPartition
from kafka.errors import LogDirNotFoundError, NoError, UnknownTopicOrPartitionError
from kafka.structs import TopicPartitionReplica

from tests.gateway.raw import RawClient
from tests.helpers import produce_through_gateway

pytestmark = pytest.mark.ray

UNKNOWN_TOPIC_OR_PARTITION, INVALID_TOPIC_EXCEPTION, UNSUPPORTED_VERSION, INVALID_REQUEST = 3, 17, 35, 42
INVALID_REPLICA_ASSIGNMENT, LOG_DIR_NOT_FOUND, ELECTION_NOT_NEEDED, NO_REASSIGNMENT_IN_PROGRESS = 39, 57, 84, 85
TOPIC, BROKER, BROKER_LOGGER, GROUP = 2, 4, 8, 32
TWO, ONE = "shape-a", "shape-b"  # topics of 2 and 1 partitions
CONFIGURED_GROUP = "shape-configured"


@pytest.fixture(scope="module")
def setup(cluster, bootstrap):
    cluster.create_topic(TWO, partitions=2)
    cluster.create_topic(ONE, partitions=1)
    produce_through_gateway(bootstrap, TWO, 4, partitions=1)  # partition 0 only
    with contextlib.closing(RawClient(bootstrap)) as raw:
        answer = raw.request(44, 0, {"validate_only": False, "resources": [
            {"resource_type": GROUP, "resource_name": CONFIGURED_GROUP, "configs": [
                {"name": "consumer.session.timeout.ms", "config_operation": 0, "value": "50000"}]}]})
    assert answer["responses"][0]["error_code"] == 0
    return cluster


@pytest.fixture(scope="module")
def kadmin(setup, bootstrap):
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    yield admin
    admin.close()


@pytest.fixture(scope="module")
def raw(setup, bootstrap):
    with contextlib.closing(RawClient(bootstrap)) as client:
        yield client


def replicas(raw, topic: str) -> list:
    (t,) = raw.request(3, 12, {"topics": [{"name": topic, "topic_id": None}], "allow_auto_topic_creation": False,
                               "include_topic_authorized_operations": False})["topics"]
    return [(p["partition_index"], p["leader_id"], p["replica_nodes"]) for p in t["partitions"]]


# ------------------------------------------------------------------ ElectLeaders

def test_no_election_is_needed_for_a_partition_with_one_replica(kadmin, bootstrap):
    cadmin = AdminClient({"bootstrap.servers": bootstrap})
    response = kadmin.elect_leaders(0, {TWO: [0, 1]})
    assert [(t, sorted((p, e) for p, e, _ in parts)) for t, parts in response.replica_election_results] == [
        (TWO, [(0, ELECTION_NOT_NEEDED), (1, ELECTION_NOT_NEEDED)])]
    results = cadmin.elect_leaders(ElectionType.UNCLEAN, [CTopicPartition(TWO, 0), CTopicPartition(ONE, 0)]).result(30)
    assert {tp.topic: e.code() for tp, e in results.items()} == {TWO: ELECTION_NOT_NEEDED,
                                                                           ONE: ELECTION_NOT_NEEDED}


def test_elect_leaders_of_every_partition_lists_each_topic_with_none_elected(raw):
    answer = raw.request(43, 2, {"election_type": 0, "topic_partitions": None, "timeout": 30000})
    assert answer["error_code"] == 0
    listed = {r["topic"]: r["partition_result"] for r in answer["replica_election_results"]}
    assert listed[TWO] == [] and listed[ONE] == []


def test_elect_leaders_of_unknown_partitions_and_an_unknown_election_type(raw):
    answer = raw.request(43, 2, {"election_type": 1, "timeout": 30000, "topic_partitions": [
        {"topic": TWO, "partitions": [2]}, {"topic": "shape-missing", "partitions": [0]}]})
    assert [[(p["partition_id"], p["error_code"]) for p in r["partition_result"]]
            for r in answer["replica_election_results"]] == [[(2, UNKNOWN_TOPIC_OR_PARTITION)],
                                                              [(0, UNKNOWN_TOPIC_OR_PARTITION)]]
    refused = raw.request(43, 2, {"election_type": 2, "timeout": 30000,
                                  "topic_partitions": [{"topic": TWO, "partitions": [0]}]})
    assert refused["error_code"] == INVALID_REQUEST
    assert refused["replica_election_results"][0]["partition_result"][0]["error_code"] == INVALID_REQUEST


# ------------------------------------------------------------------ DescribeLogDirs, AlterReplicaLogDirs

def _partitions(log_dirs: list) -> dict:
    (broker,) = log_dirs
    (log_dir,) = broker["log_dirs"]
    return {(t["name"], p["partition_index"]): p for t in log_dir["topics"] for p in t["partitions"]}


def test_describe_log_dirs_lists_the_data_directory_with_each_partition_size(kadmin, setup):
    (broker,) = kadmin.describe_log_dirs()
    (log_dir,) = broker["log_dirs"]
    assert log_dir["log_dir"] == os.path.abspath(setup.data_dir) and log_dir["error_code"] == 0
    assert log_dir["total_bytes"] >= log_dir["usable_bytes"] > 0
    partitions = _partitions([broker])
    assert partitions[TWO, 0]["partition_size"] > 0 and partitions[TWO, 1]["partition_size"] == 0
    assert {(p["offset_lag"], p["is_future_key"]) for p in partitions.values()} == {(0, False)}
    asked = _partitions(kadmin.describe_log_dirs({TWO: [1, 7], "shape-missing": [0]}))
    assert list(asked) == [(TWO, 1)]


def test_a_replica_moves_only_to_the_log_dir_it_is_in(kadmin, setup, raw):
    here = os.path.abspath(setup.data_dir)
    before = _partitions(kadmin.describe_log_dirs())
    assert kadmin.alter_replica_log_dirs({TopicPartitionReplica(TWO, 0, 0): here,
                                          TopicPartitionReplica(TWO, 1, 0): "/elsewhere"}) == {
        TopicPartitionReplica(TWO, 0, 0): NoError, TopicPartitionReplica(TWO, 1, 0): LogDirNotFoundError}
    assert kadmin.alter_replica_log_dirs({TopicPartitionReplica(TWO, 5, 0): here}) == {
        TopicPartitionReplica(TWO, 5, 0): UnknownTopicOrPartitionError}
    too_long = "t" * 249
    answer = raw.request(34, 2, {"dirs": [{"path": here, "topics": [{"name": too_long, "partitions": [0]}]}]})
    assert answer["results"][0]["partitions"][0]["error_code"] == INVALID_TOPIC_EXCEPTION
    assert _partitions(kadmin.describe_log_dirs()) == before


# ------------------------------------------------------------------ DescribeQuorum

def test_the_metadata_quorum_is_the_controller_alone(kadmin, bootstrap):
    quorum = kadmin.describe_metadata_quorum()
    (topic,) = quorum["topics"]
    (p,) = topic["partitions"]
    assert (topic["topic_name"], p["partition_index"], p["error"], p["leader_id"], p["leader_epoch"]) == (
        "__cluster_metadata", 0, None, 0, 0)
    assert p["high_watermark"] > 0  # the topics created are in it
    (voter,) = p["current_voters"]
    assert voter["replica_id"] == 0 and voter["log_end_offset"] >= p["high_watermark"] and p["observers"] == []
    (node,) = quorum["nodes"]
    assert node["node_id"] == 0 and [(x["name"], f"{x['host']}:{x['port']}") for x in node["listeners"]] == [
        ("PLAINTEXT", bootstrap)]


def test_describe_quorum_of_another_partition_is_unknown(raw):
    answer = raw.request(55, 2, {"topics": [{"topic_name": "__cluster_metadata", "partitions": [
        {"partition_index": 1}]}]})
    assert answer["error_code"] == 0
    assert [(p["partition_index"], p["error_code"]) for p in answer["topics"][0]["partitions"]] == [
        (1, UNKNOWN_TOPIC_OR_PARTITION)]


# ------------------------------------------------------------------ partition reassignments

def test_reassigning_a_partition_to_its_leader_is_a_no_op(kadmin, raw):
    assert kadmin.alter_partition_reassignments({TopicPartition(TWO, 0): [0]}) == {TopicPartition(TWO, 0): None}
    assert kadmin.list_partition_reassignments() == {}
    assert kadmin.list_partition_reassignments([TopicPartition(TWO, 0)]) == {}
    assert replicas(raw, TWO) == [(0, 0, [0]), (1, 0, [0])]


@pytest.mark.parametrize("target, error", [
    (None, NO_REASSIGNMENT_IN_PROGRESS), ([], INVALID_REPLICA_ASSIGNMENT), ([7], INVALID_REPLICA_ASSIGNMENT),
    ([0, 0], INVALID_REPLICA_ASSIGNMENT), ([0, 7], INVALID_REPLICA_ASSIGNMENT),
])
def test_a_reassignment_shoal_cannot_carry_out_gets_kafkas_error_and_changes_nothing(raw, target, error):
    answer = raw.request(45, 1, {"timeout": 30000, "allow_replication_factor_change": True, "topics": [
        {"name": TWO, "partitions": [{"partition_index": 1, "replicas": target}]},
        {"name": "shape-missing", "partitions": [{"partition_index": 0, "replicas": [0]}]}]})
    assert answer["error_code"] == 0 and answer["allow_replication_factor_change"] is True
    assert [[(p["partition_index"], p["error_code"]) for p in t["partitions"]] for t in answer["responses"]] == [
        [(1, error)], [(0, UNKNOWN_TOPIC_OR_PARTITION)]]
    assert answer["responses"][0]["partitions"][0]["error_message"]
    assert replicas(raw, TWO) == [(0, 0, [0]), (1, 0, [0])]
    listed = raw.request(46, 0, {"timeout": 30000, "topics": [{"name": TWO, "partition_indexes": [0, 1]},
                                                             {"name": "shape-missing", "partition_indexes": [0]}]})
    assert (listed["error_code"], listed["topics"]) == (0, [])


# ------------------------------------------------------------------ DescribeTopicPartitions

def test_describe_topic_partitions_pages_by_the_partition_limit(kadmin):
    (t,) = kadmin.describe_topic_partitions([TWO])["topics"]
    assert (t["name"], t["error_code"], t["is_internal"]) == (TWO, 0, False)
    assert [(p["partition_index"], p["leader_id"], p["replica_nodes"], p["isr_nodes"], p["offline_replicas"])
            for p in t["partitions"]] == [(0, 0, [0], [0], []), (1, 0, [0], [0], [])]
    first = kadmin.describe_topic_partitions([TWO, ONE], response_partition_limit=1)
    assert [[p["partition_index"] for p in t["partitions"]] for t in first["topics"]] == [[0]]
    assert first["next_cursor"] == {"topic_name": TWO, "partition_index": 1}
    second = kadmin.describe_topic_partitions([TWO, ONE], response_partition_limit=1, cursor=first["next_cursor"])
    assert [[p["partition_index"] for p in t["partitions"]] for t in second["topics"]] == [[1]]
    assert second["next_cursor"] == {"topic_name": ONE, "partition_index": 0}
    last = kadmin.describe_topic_partitions([TWO, ONE], response_partition_limit=5, cursor=second["next_cursor"])
    assert [(t["name"], len(t["partitions"])) for t in last["topics"]] == [(ONE, 1)] and last["next_cursor"] is None


def test_describe_topic_partitions_of_unknown_topics_and_a_bad_cursor(raw):
    answer = raw.request(75, 0, {"response_partition_limit": 10, "cursor": None, "topics": [
        {"name": ONE}, {"name": "shape-missing"}, {"name": "bad name"}]})
    assert [(t["name"], t["error_code"]) for t in answer["topics"]] == [
        ("bad name", INVALID_TOPIC_EXCEPTION), (ONE, 0), ("shape-missing", UNKNOWN_TOPIC_OR_PARTITION)]
    every = raw.request(75, 0, {"response_partition_limit": 10, "cursor": None, "topics": []})
    assert {TWO, ONE} <= {t["name"] for t in every["topics"]}
    for cursor in ({"topic_name": TWO, "partition_index": 0}, {"topic_name": ONE, "partition_index": -1}):
        refused = raw.request(75, 0, {"response_partition_limit": 10, "cursor": cursor, "topics": [{"name": ONE}]})
        assert [(t["name"], t["error_code"], t["partitions"]) for t in refused["topics"]] == [
            (ONE, INVALID_REQUEST, [])]


# ------------------------------------------------------------------ ListConfigResources

def test_list_config_resources_lists_brokers_topics_and_configured_groups(kadmin, raw):
    listed = kadmin.list_config_resources()
    assert listed["broker"] == ["0"] and listed["broker_logger"] == ["0"] and listed["group"] == [CONFIGURED_GROUP]
    assert {TWO, ONE} <= set(listed["topic"])
    assert set(kadmin.list_config_resources(["TOPIC"])) == {"topic"}
    refused = raw.request(74, 1, {"resource_types": [TOPIC, 64]})
    assert (refused["error_code"], refused["config_resources"]) == (UNSUPPORTED_VERSION, [])
    assert raw.request(74, 0, {}) == {"throttle_time": 0, "error_code": 0, "config_resources": []}
