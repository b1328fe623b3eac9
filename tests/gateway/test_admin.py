"""The admin APIs through the admin clients of kafka-python (KafkaAdminClient),
confluent-kafka (AdminClient) and aiokafka (AIOKafkaAdminClient), each where it offers the
call: committed offsets, groups listed and described, topic and group configs described and
altered, topics deleted and partitions added, offsets and groups deleted; bad input gets
Kafka's error and changes nothing. FindCoordinator's batched keys and OffsetFetch's
require_stable are checked on raw requests (kio), as no client sends them on demand."""
import asyncio
import contextlib
import io
import os
import socket
import struct

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin import NewPartitions as AioNewPartitions
from aiokafka.admin.config_resource import ConfigResource as AioConfigResource
from aiokafka.admin.config_resource import ConfigResourceType as AioConfigResourceType
from confluent_kafka import ConsumerGroupTopicPartitions
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType, AdminClient,
                                   AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions, ResourcePatternType,
                                   ResourceType)
from confluent_kafka.admin import NewTopic as ConfluentNewTopic
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource as KConfigResource
from kafka.admin import ConfigResourceType as KConfigResourceType
from kafka.admin import NewPartitions as KNewPartitions
from kafka.admin import NewTopic as KNewTopic
from kafka.admin import ACL as KACL
from kafka.admin import ACLFilter as KACLFilter
from kafka.admin import ACLOperation as KACLOperation
from kafka.admin import ACLPermissionType as KACLPermissionType
from kafka.admin import NewTopic
from kafka.admin import ResourcePattern as KResourcePattern
from kafka.admin import ResourceType as KResourceType
from kafka.errors import (GroupIdNotFoundError, InvalidRecordError, KafkaStorageError, MessageSizeTooLargeError,
                          SecurityDisabledError)
from kafka.structs import OffsetAndMetadata
from kio.serial import entity_reader, entity_writer

from runtime.errors import Errors
from runtime.messages.txn import TxnOffsetCommitRequest, TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic
from runtime.wire.entities import build, plain
from runtime.wire.versions import request_class, response_class
from tests.conftest import wait_until
from tests.helpers import error_code

pytestmark = pytest.mark.ray

UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST, INVALID_CONFIG, KAFKA_STORAGE_ERROR = 3, 42, 40, 56
OFFSET_OUT_OF_RANGE = 1
GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, GROUP_SUBSCRIBED_TO_TOPIC, UNSTABLE_OFFSET_COMMIT = 69, 68, 86, 88


@pytest.fixture(scope="module")
def kadmin(bootstrap):
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    yield admin
    admin.close()


@pytest.fixture(scope="module")
def cadmin(bootstrap):
    return AdminClient({"bootstrap.servers": bootstrap})


def aio(bootstrap, method, *args, **kwargs):
    """One call on a fresh aiokafka admin client."""
    async def run():
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            return await getattr(admin, method)(*args, **kwargs)
        finally:
            await admin.close()
    return asyncio.run(run())


def done(futures: dict) -> dict:
    return {key: f.result(30) for key, f in futures.items()}


def commit(bootstrap, group, topic, offsets):
    """Offsets committed by a kafka-python consumer that assigns itself the partitions."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        consumer.assign([TopicPartition(topic, p) for p in offsets])
        consumer.commit({TopicPartition(topic, p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()})
    finally:
        consumer.close()


def offsets(kadmin, group) -> dict:
    return {(tp.topic, tp.partition): o.offset for tp, o in kadmin.list_group_offsets(group)[group].items()}


def kio_call(bootstrap, api_key, version, data) -> dict:
    """One request on a raw socket, encoded and its answer decoded by kio."""
    cls, response_cls = request_class(api_key, version), response_class(api_key, version)
    buf = io.BytesIO()
    entity_writer(cls.__header_schema__)(buf, cls.__header_schema__(
        request_api_key=api_key, request_api_version=version, correlation_id=7, client_id="raw"))
    entity_writer(cls)(buf, build(cls, data))
    host, port = bootstrap.split(":")
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(struct.pack(">i", buf.tell()) + buf.getvalue())
        reader = s.makefile("rb")
        (size,) = struct.unpack(">i", reader.read(4))
        payload = memoryview(reader.read(size))
    _, offset = entity_reader(response_cls.__header_schema__)(payload, 0)
    return plain(entity_reader(response_cls)(payload, offset)[0])


def topic_configs(cadmin, topic) -> dict:
    (entries,) = done(cadmin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)])).values()
    return {name: (e.value, e.is_default) for name, e in entries.items()}


def group_configs(cadmin, group) -> dict:
    (entries,) = done(cadmin.describe_configs([ConfigResource(ResourceType.GROUP, group)])).values()
    return {name: (e.value, e.is_default) for name, e in entries.items()}


# ------------------------------------------------------------------ offsets and groups

def test_committed_offsets_listed_and_groups_described_by_each_admin_client(cluster, bootstrap, kadmin, cadmin):
    cluster.create_topic("offsets", 2)
    commit(bootstrap, "committed", "offsets", {0: 5, 1: 7})
    want = {("offsets", 0): 5, ("offsets", 1): 7}

    assert offsets(kadmin, "committed") == want
    (result,) = done(cadmin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("committed")])).values()
    assert {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions} == want
    got = aio(bootstrap, "list_consumer_group_offsets", "committed")
    assert {(tp.topic, tp.partition): o.offset for tp, o in got.items()} == want

    assert "committed" in [g["group_id"] for g in kadmin.list_groups()]
    listed = cadmin.list_consumer_groups().result(30)
    assert "committed" in [g.group_id for g in listed.valid]
    assert "committed" in [g[0] for g in aio(bootstrap, "list_consumer_groups")]

    assert kadmin.describe_groups(["committed"])["committed"]["group_state"] == "Empty"
    (described,) = done(cadmin.describe_consumer_groups(["committed"])).values()
    assert (described.group_id, str(described.state)) == ("committed", "ConsumerGroupState.EMPTY")
    (response,) = aio(bootstrap, "describe_consumer_groups", ["committed"])
    assert [g[1:3] for g in response.groups] == [("committed", "Empty")]


def test_offset_delete_and_delete_groups_refused_while_a_member_consumes(cluster, bootstrap, kadmin, cadmin):
    cluster.create_topic("consumed", 1)
    cluster.create_topic("other", 1)
    commit(bootstrap, "busy", "other", {0: 3})
    consumer = KafkaConsumer("consumed", bootstrap_servers=bootstrap, group_id="busy", auto_offset_reset="earliest",
                             enable_auto_commit=False)
    try:
        wait_until(lambda: consumer.poll(100) is not None and consumer.assignment(), message="an assignment")
        consumer.commit({TopicPartition("consumed", 0): OffsetAndMetadata(2, "", -1)})

        refused = kadmin.delete_group_offsets("busy", [TopicPartition("consumed", 0)])
        assert refused[TopicPartition("consumed", 0)].errno == GROUP_SUBSCRIBED_TO_TOPIC
        (f,) = cadmin.delete_consumer_groups(["busy"]).values()
        assert error_code(f) == NON_EMPTY_GROUP
        assert kadmin.delete_groups(["busy"]) == {"busy": "NonEmptyGroupError"}
        # Offsets of a topic no member consumes go.
        deleted = kadmin.delete_group_offsets("busy", [TopicPartition("other", 0)])
        assert deleted[TopicPartition("other", 0)].errno == 0
        assert offsets(kadmin, "busy") == {("consumed", 0): 2}
    finally:
        consumer.close()

    wait_until(lambda: kadmin.describe_groups(["busy"])["busy"]["group_state"] == "Empty", message="an empty group")
    assert kadmin.delete_group_offsets("busy", [TopicPartition("consumed", 0)])[TopicPartition("consumed", 0)].errno == 0
    assert offsets(kadmin, "busy") == {}
    (f,) = cadmin.delete_consumer_groups(["busy"]).values()
    f.result(30)
    assert "busy" not in [g["group_id"] for g in kadmin.list_groups()]


def test_groups_deleted_by_kafka_python(bootstrap, cluster, kadmin):
    cluster.create_topic("gone-group", 1)
    commit(bootstrap, "to-delete", "gone-group", {0: 1})
    assert kadmin.delete_groups(["to-delete"]) == {"to-delete": "OK"}
    assert "to-delete" not in [g["group_id"] for g in kadmin.list_groups()]


# ------------------------------------------------------------------ configs

def test_topic_configs_described_and_altered(cluster, bootstrap, kadmin, cadmin):
    cluster.create_topic("configured", 1, {"retention.ms": 100000})
    assert topic_configs(cadmin, "configured")["retention.ms"] == ("100000", False)
    assert topic_configs(cadmin, "configured")["max.message.bytes"] == ("1048588", True)
    described = kadmin.describe_configs([KConfigResource(KConfigResourceType.TOPIC, "configured")])
    assert described["topic"]["configured"]["retention.ms"]["value"] == "100000"
    assert "max.message.bytes" not in described["topic"]["configured"]  # a default, not modified
    (response,) = aio(bootstrap, "describe_configs", [AioConfigResource(AioConfigResourceType.TOPIC, "configured")])
    entries = {c[0]: c[1] for c in response.resources[0][4]}
    assert entries["retention.ms"] == "100000"

    resource = ConfigResource(ResourceType.TOPIC, "configured", incremental_configs=[
        ConfigEntry("max.message.bytes", "2048", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE)])
    done(cadmin.incremental_alter_configs([resource]))
    configs = topic_configs(cadmin, "configured")
    assert configs["max.message.bytes"] == ("2048", False)
    assert configs["retention.ms"] == ("604800000", True)
    kadmin.alter_configs([KConfigResource(KConfigResourceType.TOPIC, "configured", {"segment.bytes": "1048576"})])
    assert topic_configs(cadmin, "configured")["segment.bytes"] == ("1048576", False)

    # The partition leader applies the new max.message.bytes.
    producer = KafkaProducer(bootstrap_servers=bootstrap, retries=0)
    try:
        with pytest.raises(MessageSizeTooLargeError):
            producer.send("configured", b"x" * 4096).get(30)
    finally:
        producer.close()


def test_the_brokers_configs_described_by_each_admin_client(bootstrap, kadmin, cadmin):
    configs = kadmin.describe_configs([KConfigResource(KConfigResourceType.BROKER, 0)], config_filter="all")
    listeners = configs["broker"]["0"]["advertised.listeners"]
    # set by the deployment (Kafka's server.properties), fixed while it runs
    assert (listeners["config_source"], listeners["read_only"], listeners["value"]) == (
        "STATIC_BROKER_CONFIG", True, "PLAINTEXT://127.0.0.1:0")
    assert configs["broker"]["0"]["num.partitions"]["config_source"] == "DEFAULT_CONFIG"
    (f,) = cadmin.describe_configs([ConfigResource(ResourceType.BROKER, "0")]).values()
    entries = f.result(30)
    assert entries["log.flush.fsync"].value == "false" and not entries["log.flush.fsync"].is_default
    assert entries["auto.create.topics.enable"].value == "true" and entries["auto.create.topics.enable"].is_default


@pytest.mark.parametrize("name,expected", [
    ("", 0),  # the cluster-wide dynamic defaults: none
    ("x", INVALID_REQUEST),  # Kafka: "Broker id must be an integer"
    ("7", INVALID_REQUEST),  # another broker's configs are that broker's to describe
])
def test_broker_config_resources_named_as_kafka_takes_them(bootstrap, name, expected):
    (result,) = kio_call(bootstrap, 32, 4, {"resources": [{"resource_type": 4, "resource_name": name,
                                                           "configuration_keys": None}],
                                            "include_synonyms": False, "include_documentation": False})["results"]
    assert (result["error_code"], result["configs"]) == (expected, [])


def test_acls_are_refused_as_by_a_broker_with_no_authorizer(kadmin, cadmin):
    """shoal authenticates but does not authorize: the ACL APIs answer SECURITY_DISABLED, as a
    Kafka broker without authorizer.class.name does, to every admin client."""
    pattern = KResourcePattern(KResourceType.TOPIC, "topic")
    acl = KACL(principal="User:test", host="*", operation=KACLOperation.READ,
               permission_type=KACLPermissionType.ALLOW, resource_pattern=pattern)
    acl_filter = KACLFilter(principal=None, host="*", operation=KACLOperation.ANY,
                            permission_type=KACLPermissionType.ANY, resource_pattern=pattern)
    with pytest.raises(SecurityDisabledError):
        kadmin.describe_acls(acl_filter)
    (failed,) = kadmin.create_acls([acl])["failed"]
    assert failed is SecurityDisabledError
    # librdkafka reads DescribeAcls' error but hands out the (empty) bindings alone
    assert cadmin.describe_acls(AclBindingFilter(ResourceType.TOPIC, "topic", ResourcePatternType.LITERAL, None,
                                                 None, AclOperation.ANY, AclPermissionType.ANY)).result(30) == []
    binding = AclBinding(ResourceType.TOPIC, "topic", ResourcePatternType.LITERAL, "User:test", "*",
                         AclOperation.READ, AclPermissionType.ALLOW)
    (f,) = cadmin.create_acls([binding]).values()
    assert error_code(f) == Errors.SECURITY_DISABLED.code


def test_group_config_altered_and_described_back(cadmin, kadmin):
    resource = ConfigResource(ResourceType.GROUP, "tuned", incremental_configs=[
        ConfigEntry("consumer.session.timeout.ms", "50000", incremental_operation=AlterConfigOpType.SET)])
    done(cadmin.incremental_alter_configs([resource], validate_only=True))
    assert group_configs(cadmin, "tuned")["consumer.session.timeout.ms"] == ("45000", True)
    done(cadmin.incremental_alter_configs([resource]))
    configs = group_configs(cadmin, "tuned")
    assert configs["consumer.session.timeout.ms"] == ("50000", False)
    assert configs["share.record.lock.duration.ms"] == ("30000", True)

    kadmin.alter_configs([KConfigResource(KConfigResourceType.GROUP, "tuned",
                                          {"share.record.lock.duration.ms": "20000"})])
    described = kadmin.describe_configs([KConfigResource(KConfigResourceType.GROUP, "tuned")])["group"]["tuned"]
    assert {k: v["value"] for k, v in described.items()} == {"share.record.lock.duration.ms": "20000",
                                                             "consumer.session.timeout.ms": "50000"}


# ------------------------------------------------------------------ topics

def partitions_of(kadmin, topic) -> int:
    (described,) = kadmin.describe_topics([topic])
    return len(described["partitions"])


def test_partitions_added_by_each_admin_client(cluster, bootstrap, kadmin, cadmin):
    cluster.create_topic("growing", 1)
    done(cadmin.create_partitions([NewPartitions("growing", 2)]))
    assert partitions_of(kadmin, "growing") == 2
    kadmin.create_partitions({"growing": KNewPartitions(3)})
    assert partitions_of(kadmin, "growing") == 3
    aio(bootstrap, "create_partitions", {"growing": AioNewPartitions(4)})
    assert partitions_of(kadmin, "growing") == 4
    # The new partitions have leaders: a record goes to the last one.
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    try:
        assert producer.send("growing", b"v", partition=3).get(30).offset == 0
    finally:
        producer.close()


def test_manual_assignments_place_new_partitions_on_the_brokers_named(bootstrap, kadmin, cadmin):
    done(cadmin.create_topics([ConfluentNewTopic("placed", 2, replica_assignment=[[0], [0]])]))
    assert partitions_of(kadmin, "placed") == 2
    kadmin.create_partitions({"placed": KNewPartitions(4, [[0], [0]])})
    assert partitions_of(kadmin, "placed") == 4
    producer = KafkaProducer(bootstrap_servers=bootstrap, retries=0)
    try:
        assert [producer.send("placed", b"v", partition=p).get(30).offset for p in range(4)] == [0] * 4
    finally:
        producer.close()


@pytest.mark.parametrize("assignments,words", [
    ([[0]], "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified."),
    ([[0], [12]], "The manual partition assignment includes broker 12, but no such broker is registered."),
    ([[0], [0, 0]], "The manual partition assignment includes the broker 0 more than once."),
])
def test_a_bad_manual_assignment_is_refused_and_adds_nothing(kadmin, cadmin, assignments, words):
    topic = f"unplaced-{len(assignments[-1])}-{assignments[-1][-1]}-{len(assignments)}"
    done(cadmin.create_topics([ConfluentNewTopic(topic, 1)]))
    (f,) = cadmin.create_partitions([NewPartitions(topic, 3, replica_assignment=assignments)]).values()
    with pytest.raises(Exception) as e:
        f.result(30)
    assert e.value.args[0].code() == Errors.INVALID_REPLICA_ASSIGNMENT.code and e.value.args[0].str() == words
    (f,) = cadmin.create_topics([ConfluentNewTopic(topic + "-new", 2, replica_assignment=[[0], [12]])]).values()
    with pytest.raises(Exception) as e:
        f.result(30)
    assert e.value.args[0].code() == Errors.INVALID_REPLICA_ASSIGNMENT.code
    assert partitions_of(kadmin, topic) == 1
    assert topic + "-new" not in kadmin.list_topics()


def _grow_with_kafka_python(kadmin, cadmin, topic, count):
    kadmin.create_partitions({topic: KNewPartitions(count)})


def _grow_with_confluent(kadmin, cadmin, topic, count):
    done(cadmin.create_partitions([NewPartitions(topic, count)]))


@pytest.mark.parametrize("grow", [_grow_with_kafka_python, _grow_with_confluent], ids=["kafka-python", "confluent"])
def test_a_topic_made_through_the_gateway_grown_by_an_admin_client_serves_every_partition(
        cluster, bootstrap, kadmin, cadmin, grow):
    """The existing partitions keep their leaders when the topic grows: the gateway starts
    leaders for the new partitions only (it owns the leaders of a topic it created, and a
    leader whose owning handle is dropped is ended by Ray)."""
    topic = f"regrown-{grow.__name__.split('_')[-1]}"
    kadmin.create_topics([NewTopic(topic, 3, 1)])
    try:
        grow(kadmin, cadmin, topic, 4)
        assert partitions_of(kadmin, topic) == 4
        producer = KafkaProducer(bootstrap_servers=bootstrap, retries=0)
        try:
            sent = [producer.send(topic, b"kafka-%d" % p, partition=p).get(30) for p in range(4)]
        finally:
            producer.close()
        assert [(m.partition, m.offset) for m in sent] == [(p, 0) for p in range(4)]
        with cluster.producer() as ours:
            sent = [ours.send(topic, b"shoal-%d" % p, partition=p).get(30) for p in range(4)]
        assert [(m.partition, m.offset) for m in sent] == [(p, 1) for p in range(4)]

        consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=500)
        got = []
        try:
            consumer.assign([TopicPartition(topic, p) for p in range(4)])
            wait_until(lambda: got.extend(consumer) or len(got) >= 8, timeout_s=60, message="8 records")
        finally:
            consumer.close()
        assert sorted((r.partition, r.offset, r.value) for r in got) == sorted(
            [(p, 0, b"kafka-%d" % p) for p in range(4)] + [(p, 1, b"shoal-%d" % p) for p in range(4)])
    finally:
        kadmin.delete_topics([topic])


def test_topics_deleted_by_each_admin_client(cluster, bootstrap, kadmin, cadmin):
    for name in ("doomed-c", "doomed-k", "doomed-a"):
        cluster.create_topic(name, 2)
    done(cadmin.delete_topics(["doomed-c"]))
    kadmin.delete_topics(["doomed-k"])
    aio(bootstrap, "delete_topics", ["doomed-a"])
    topics = set(cadmin.list_topics(timeout=30).topics)
    assert not topics & {"doomed-c", "doomed-k", "doomed-a"}
    assert not set(kadmin.list_topics()) & {"doomed-c", "doomed-k", "doomed-a"}
    # A topic of the same name starts empty.
    cluster.create_topic("doomed-c", 1)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        low, high = consumer.end_offsets([TopicPartition("doomed-c", 0)]).popitem()
    finally:
        consumer.close()
    assert high == 0


def test_describe_cluster_by_each_admin_client(bootstrap, kadmin, cadmin):
    host, port = bootstrap.split(":")
    described = cadmin.describe_cluster().result(30)
    assert [(n.host, n.port) for n in described.nodes] == [(host, int(port))]
    assert [(b["host"], b["port"]) for b in kadmin.describe_cluster()["brokers"]] == [(host, int(port))]
    assert [(b["host"], b["port"]) for b in aio(bootstrap, "describe_cluster")["brokers"]] == [(host, int(port))]


# ------------------------------------------------------------------ bad input

def test_cleanup_policy_is_a_list_config_that_appends_and_subtracts(cluster, cadmin):
    """Kafka's APPEND and SUBTRACT on a list config (librdkafka's 0011_produce_batch makes a
    topic compacted so); the leaders apply it: a record without a key is refused then."""
    cluster.create_topic("policy", 1)

    def alter(op, value):
        done(cadmin.incremental_alter_configs([ConfigResource(ResourceType.TOPIC, "policy", incremental_configs=[
            ConfigEntry("cleanup.policy", value, incremental_operation=op)])]))
        return topic_configs(cadmin, "policy")["cleanup.policy"]
    assert alter(AlterConfigOpType.APPEND, "compact") == ("delete,compact", False)
    assert alter(AlterConfigOpType.APPEND, "compact") == ("delete,compact", False)  # already there
    assert alter(AlterConfigOpType.SUBTRACT, "delete") == ("compact", False)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, retries=0)
    try:
        with pytest.raises(InvalidRecordError):
            producer.send("policy", b"no key").get(30)
        assert producer.send("policy", b"keyed", key=b"k").get(30).offset == 0
    finally:
        producer.close()


def test_bad_topic_input_gets_kafkas_errors_and_changes_nothing(cluster, cadmin):
    cluster.create_topic("steady", 2, {"retention.ms": 100000})
    before = topic_configs(cadmin, "steady")
    topics_before = set(cadmin.list_topics(timeout=30).topics)

    (f,) = cadmin.describe_configs([ConfigResource(ResourceType.TOPIC, "nowhere")]).values()
    assert error_code(f) == UNKNOWN_TOPIC_OR_PARTITION
    for entry in (ConfigEntry("no.such.config", "1", incremental_operation=AlterConfigOpType.SET),
                  ConfigEntry("retention.ms", "soon", incremental_operation=AlterConfigOpType.SET),
                  ConfigEntry("cleanup.policy", "sometimes", incremental_operation=AlterConfigOpType.SET),
                  ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.APPEND),
                  ConfigEntry("cleanup.policy", "sometimes", incremental_operation=AlterConfigOpType.APPEND)):
        # One invalid entry fails the resource whole: the valid one beside it is not applied.
        resource = ConfigResource(ResourceType.TOPIC, "steady", incremental_configs=[
            ConfigEntry("max.message.bytes", "4096", incremental_operation=AlterConfigOpType.SET), entry])
        (f,) = cadmin.incremental_alter_configs([resource]).values()
        assert error_code(f) == INVALID_CONFIG
    resource = ConfigResource(ResourceType.TOPIC, "nowhere", incremental_configs=[
        ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.SET)])
    (f,) = cadmin.incremental_alter_configs([resource]).values()
    assert error_code(f) == UNKNOWN_TOPIC_OR_PARTITION
    (f,) = cadmin.delete_topics(["nowhere"]).values()
    assert error_code(f) == UNKNOWN_TOPIC_OR_PARTITION
    (f,) = cadmin.create_partitions([NewPartitions("nowhere", 3)]).values()
    assert error_code(f) == UNKNOWN_TOPIC_OR_PARTITION
    (f,) = cadmin.create_partitions([NewPartitions("steady", 1)]).values()
    assert error_code(f) == 37  # INVALID_PARTITIONS: the count only grows

    assert topic_configs(cadmin, "steady") == before
    assert set(cadmin.list_topics(timeout=30).topics) == topics_before
    assert len(cadmin.list_topics(topic="steady", timeout=30).topics["steady"].partitions) == 2


@contextlib.contextmanager
def leaders_that_cannot_start(cluster, partitions):
    """A file where each partition's log directory goes: the host cannot open those logs."""
    from runtime.topics.internal import log_name
    paths = [os.path.join(cluster.data_dir, log_name(topic, p)) for topic, p in partitions]
    for path in paths:
        with open(path, "w"):
            pass
    try:
        yield
    finally:
        for path in paths:
            os.remove(path)


def test_a_failed_create_partitions_is_an_error_on_each_topic_for_each_admin_client(cluster, kadmin, cadmin):
    """A CreatePartitions that fails as a whole (here a new partition's leader cannot
    start) has the error on every topic it named, as Kafka answers: an answer without them
    reads as success."""
    names = ["unready-k1", "unready-k2", "unready-c1", "unready-c2"]
    kadmin.create_topics([NewTopic(name, 1, 1) for name in names])
    try:
        with leaders_that_cannot_start(cluster, [(name, 1) for name in names] + [("unready-k1", 2)]):
            with pytest.raises(KafkaStorageError):
                kadmin.create_partitions({"unready-k1": 2})
            response = kadmin.create_partitions({"unready-k1": 3, "unready-k2": 2}, raise_errors=False)
            assert sorted((r.name, r.error_code) for r in response.results) == [
                ("unready-k1", KAFKA_STORAGE_ERROR), ("unready-k2", KAFKA_STORAGE_ERROR)]
            futures = cadmin.create_partitions([NewPartitions("unready-c1", 2), NewPartitions("unready-c2", 2)])
            assert {topic: error_code(f) for topic, f in futures.items()} == {
                "unready-c1": KAFKA_STORAGE_ERROR, "unready-c2": KAFKA_STORAGE_ERROR}
    finally:
        kadmin.delete_topics(names)


def test_a_failed_create_topics_is_an_error_on_each_topic_for_each_admin_client(cluster, kadmin, cadmin):
    """The same for CreateTopics: the first topic's leader cannot start, and the request
    fails on both topics it named."""
    with leaders_that_cannot_start(cluster, [("unready-new-k", 0), ("unready-new-c", 0)]):
        one = {"num_partitions": 1, "replication_factor": 1}
        response = kadmin.create_topics({"unready-new-k": one, "unready-new-k2": one}, raise_errors=False)
        assert sorted((t["name"], t["error_code"]) for t in response["topics"]) == [
            ("unready-new-k", KAFKA_STORAGE_ERROR), ("unready-new-k2", KAFKA_STORAGE_ERROR)]
        futures = cadmin.create_topics([ConfluentNewTopic("unready-new-c", 1), ConfluentNewTopic("unready-new-c2", 1)])
        assert {topic: error_code(f) for topic, f in futures.items()} == {
            "unready-new-c": KAFKA_STORAGE_ERROR, "unready-new-c2": KAFKA_STORAGE_ERROR}
    # The controller made the first topic of each before its leader failed.
    kadmin.delete_topics(["unready-new-k", "unready-new-c"])
    assert not {"unready-new-k", "unready-new-k2", "unready-new-c", "unready-new-c2"} & set(kadmin.list_topics())


def test_bad_group_input_gets_kafkas_errors_and_changes_nothing(bootstrap, cluster, cadmin, kadmin):
    cluster.create_topic("kept", 1)
    commit(bootstrap, "kept-group", "kept", {0: 4})
    before = group_configs(cadmin, "kept-group")
    for entry in (ConfigEntry("consumer.session.timeout.ms", "1", incremental_operation=AlterConfigOpType.SET),
                  ConfigEntry("consumer.no.such", "1", incremental_operation=AlterConfigOpType.SET),
                  ConfigEntry("share.isolation.level", "sometimes", incremental_operation=AlterConfigOpType.SET)):
        resource = ConfigResource(ResourceType.GROUP, "kept-group", incremental_configs=[
            ConfigEntry("share.record.lock.duration.ms", "20000", incremental_operation=AlterConfigOpType.SET), entry])
        (f,) = cadmin.incremental_alter_configs([resource]).values()
        assert error_code(f) == INVALID_CONFIG
    (f,) = cadmin.delete_consumer_groups(["no-such-group"]).values()
    assert error_code(f) == GROUP_ID_NOT_FOUND
    with pytest.raises(GroupIdNotFoundError):
        kadmin.delete_group_offsets("no-such-group", [TopicPartition("kept", 0)])
    # Offsets of a topic the cluster does not have: UNKNOWN_TOPIC_OR_PARTITION, the rest untouched.
    refused = kadmin.delete_group_offsets("kept-group", [TopicPartition("nowhere", 0)])
    assert refused[TopicPartition("nowhere", 0)].errno == UNKNOWN_TOPIC_OR_PARTITION

    assert group_configs(cadmin, "kept-group") == before
    assert offsets(kadmin, "kept-group") == {("kept", 0): 4}


@pytest.mark.parametrize("api_key,version,data,results", [
    (32, 4, {"resources": [{"resource_type": 99, "resource_name": "x", "configuration_keys": None}],
             "include_synonyms": False, "include_documentation": False}, "results"),
    (44, 1, {"resources": [{"resource_type": 99, "resource_name": "x", "configs": [
        {"name": "retention.ms", "config_operation": 0, "value": "1"}]}], "validate_only": False}, "responses"),
], ids=["describe", "alter"])
def test_an_unknown_resource_type_is_an_invalid_request(bootstrap, api_key, version, data, results):
    (result,) = kio_call(bootstrap, api_key, version, data)[results]
    assert (result["resource_type"], result["error_code"]) == (99, INVALID_REQUEST)


def test_an_empty_group_name_is_an_invalid_request(bootstrap):
    (result,) = kio_call(bootstrap, 32, 4, {"resources": [{"resource_type": 32, "resource_name": "",
                                                           "configuration_keys": None}],
                                            "include_synonyms": False, "include_documentation": False})["results"]
    assert result["error_code"] == INVALID_REQUEST


# ------------------------------------------------------------------ FindCoordinator and OffsetFetch

def test_find_coordinator_answers_each_batched_key(bootstrap):
    host, port = bootstrap.split(":")
    answer = kio_call(bootstrap, 10, 6, {"key_type": 0, "coordinator_keys": ["a", "b", "c"]})
    assert [(c["key"], c["host"], c["port"], c["error_code"]) for c in answer["coordinators"]] == [
        (k, host, int(port), 0) for k in "abc"]
    # A share key before v6 fails alone; an unknown key type fails every key.
    answer = kio_call(bootstrap, 10, 5, {"key_type": 2, "coordinator_keys": ["g:id:0"]})
    assert [(c["error_code"], c["node_id"]) for c in answer["coordinators"]] == [(INVALID_REQUEST, -1)]
    answer = kio_call(bootstrap, 10, 6, {"key_type": 7, "coordinator_keys": ["a", "b"]})
    assert [c["error_code"] for c in answer["coordinators"]] == [INVALID_REQUEST, INVALID_REQUEST]
    for version, data in ((3, {"key_type": 0, "key": "a"}), (0, {"key": "a"})):
        answer = kio_call(bootstrap, 10, version, data)
        assert (answer["error_code"], answer["host"], answer["port"]) == (0, host, int(port))


def test_offset_fetch_require_stable_with_a_pending_transactional_commit(cluster, bootstrap):
    import ray
    cluster.create_topic("stable", 1)
    commit(bootstrap, "txn-group", "stable", {0: 1})
    pending = TxnOffsetCommitRequest("tx", "txn-group", producer_id=4242, producer_epoch=0, topics=(
        TxnOffsetCommitRequestTopic("stable", (TxnOffsetCommitRequestPartition(0, 9),)),))
    ray.get(cluster.group_coordinator("txn-group").txn_offset_commit.remote(pending), timeout=30)

    def fetch(version, require_stable):
        group = {"group_id": "txn-group", "topics": [{"name": "stable", "partition_indexes": [0]}]}
        data = ({"groups": [{**group, "member_id": None, "member_epoch": -1}], "require_stable": require_stable}
                if version >= 8 else {**group, "require_stable": require_stable})
        answer = kio_call(bootstrap, 9, version, data)
        topics = answer["groups"][0]["topics"] if version >= 8 else answer["topics"]
        (p,) = topics[0]["partitions"]
        return p["error_code"], p["committed_offset"]

    for version in (7, 9):
        assert fetch(version, True)[0] == UNSTABLE_OFFSET_COMMIT
        assert fetch(version, False) == (0, 1)


def test_records_deleted_by_each_admin_client(cluster, bootstrap, kadmin, cadmin):
    """DeleteRecords moves each partition's log start offset: a reader from the earliest
    offset starts there; -1 is the high watermark; past it is OFFSET_OUT_OF_RANGE and a
    partition the cluster lacks UNKNOWN_TOPIC_OR_PARTITION, changing nothing."""
    from confluent_kafka import TopicPartition as CTopicPartition
    cluster.create_topic("trimmed", 2)
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    try:
        for i in range(10):
            producer.send("trimmed", b"v%d" % i, partition=i % 2)
        producer.flush(30)
    finally:
        producer.close()
    (f,) = cadmin.delete_records([CTopicPartition("trimmed", 0, 3)]).values()
    assert f.result(30).low_watermark == 3
    answer = kadmin.delete_records({TopicPartition("trimmed", 1): -1})
    assert answer[TopicPartition("trimmed", 1)]["low_watermark"] == 5
    futures = cadmin.delete_records([CTopicPartition("trimmed", 0, 99), CTopicPartition("untrimmed", 0, 1)])
    assert {(tp.topic, tp.partition): error_code(f) for tp, f in futures.items()} == {
        ("trimmed", 0): OFFSET_OUT_OF_RANGE, ("untrimmed", 0): UNKNOWN_TOPIC_OR_PARTITION}
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=2000)
    try:
        consumer.assign([TopicPartition("trimmed", 0), TopicPartition("trimmed", 1)])
        assert consumer.beginning_offsets([TopicPartition("trimmed", 0)]) == {TopicPartition("trimmed", 0): 3}
        assert sorted(m.value for m in consumer) == [b"v6", b"v8"]
    finally:
        consumer.close()


def test_a_topic_created_with_the_brokers_default_partition_count(cluster, kadmin):
    """CreateTopics with num_partitions -1 takes the broker's num.partitions (KIP-464)."""
    kadmin.create_topics([NewTopic("defaulted", num_partitions=-1, replication_factor=-1)])
    (described,) = cluster.describe_topics(["defaulted"])
    assert described.partitions == int(cluster.config.get("num.partitions", 1))


def test_create_topics_validate_only_checks_each_topic_and_makes_none(cluster, kadmin):
    """librdkafka's 0081_admin: validate_only answers what creating would answer, per topic
    (an unknown config INVALID_CONFIG, an existing name TOPIC_ALREADY_EXISTS), and nothing is
    made."""
    cluster.create_topic("validated-exists", 1)
    response = kadmin.create_topics([KNewTopic("validated-ok", 3, 1, topic_configs={"compression.type": "lz4"}),
                                     KNewTopic("validated-bad", 1, 1, topic_configs={"dummy.doesntexist": "x"}),
                                     KNewTopic("validated-exists", 1, 1)], validate_only=True, raise_errors=False)
    assert {t["name"]: t["error_code"] for t in response["topics"]} == {
        "validated-ok": 0, "validated-bad": Errors.INVALID_CONFIG.code,
        "validated-exists": Errors.TOPIC_ALREADY_EXISTS.code}
    assert not {"validated-ok", "validated-bad"} & set(kadmin.list_topics())
