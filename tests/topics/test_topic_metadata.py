"""The controller's topic metadata shard with a manual clock."""
import pytest

from runtime.errors import Errors, KafkaError
from runtime.messages.topics import (AlterTopicConfigRequest, CreatableTopic, CreatableTopicConfig, CreatePartitionsRequest,
                                     CreatePartitionsTopic, CreateTopicsRequest, DeleteTopicsRequest, MetadataRequest)
from runtime.testing import ShardHarness
from runtime.topics.metadata import TopicInfo, TopicMetadataShard
from runtime.topics.records import TopicKey, TopicValue


def create(h, *topics, ids=None):
    ids = ids or [f"id-{t.name}" for t in topics]
    return h.call(lambda s, now: s.create_topics(CreateTopicsRequest(tuple(topics)), now, ids))


def test_create_describe_delete_and_reload(tmp_path):
    h = ShardHarness(str(tmp_path), TopicMetadataShard)
    r = create(h, CreatableTopic("orders", 3, configs=(CreatableTopicConfig("retention.ms", "1000"),)))
    assert r.topics[0].error_code == 0 and r.topics[0].topic_id == "id-orders"
    assert r.topics[0].configs == {"retention.ms": 1000}
    assert h.shard.topics["orders"].partitions == 3
    h.reload()
    (t,) = h.read(lambda s: s.metadata(MetadataRequest(("orders",)))).topics
    assert (t.name, t.topic_id, len(t.partitions), t.configs) == ("orders", "id-orders", 3, {"retention.ms": 1000})
    d = h.call(lambda s, now: s.delete_topics(DeleteTopicsRequest(("orders",)), now))
    assert d.responses[0].error_code == 0
    h.reload()
    assert h.shard.topics == {}


def test_bad_topics_get_kafka_errors_and_write_nothing(tmp_path):
    h = ShardHarness(str(tmp_path), TopicMetadataShard)
    create(h, CreatableTopic("a", 1))
    end = h.runtime.log.end_offset
    r = create(h, CreatableTopic("a", 1), CreatableTopic("bad name!", 1), CreatableTopic("b", 0),
               CreatableTopic("__internal", 1), CreatableTopic("c", 1, configs=(CreatableTopicConfig("nope", "1"),)),
               CreatableTopic("d", 1, configs=(CreatableTopicConfig("retention.ms", "soon"),)))
    assert [t.error_code for t in r.topics] == [Errors.TOPIC_ALREADY_EXISTS.code, Errors.INVALID_TOPIC_EXCEPTION.code,
                                                 Errors.INVALID_PARTITIONS.code, Errors.INVALID_TOPIC_EXCEPTION.code,
                                                 Errors.INVALID_CONFIG.code, Errors.INVALID_CONFIG.code]
    assert h.runtime.log.end_offset == end
    assert h.call(lambda s, now: s.delete_topics(DeleteTopicsRequest(("zzz",)), now)).responses[0].error_code == \
        Errors.UNKNOWN_TOPIC_OR_PARTITION.code


def test_partitions_only_grow(tmp_path):
    h = ShardHarness(str(tmp_path), TopicMetadataShard)
    create(h, CreatableTopic("a", 2))
    r = h.call(lambda s, now: s.create_partitions(CreatePartitionsRequest((CreatePartitionsTopic("a", 1),)), now))
    assert r.results[0].error_code == Errors.INVALID_PARTITIONS.code
    r = h.call(lambda s, now: s.create_partitions(CreatePartitionsRequest((CreatePartitionsTopic("a", 4),)), now))
    assert r.results[0].error_code == 0
    assert h.reload().topics["a"].partitions == 4 and h.shard.topics["a"].topic_id == "id-a"


def test_records_are_exact(tmp_path):
    h = ShardHarness(str(tmp_path), TopicMetadataShard)
    result = h.shard.create_topics(CreateTopicsRequest((CreatableTopic("a", 2),)), 0, ["id-a"])
    assert [(r.key, r.value) for r in result.records] == [(TopicKey("a"), TopicValue("id-a", 2, {}))]


def alter(h, name, configs, validate_only=False):
    return h.call(lambda s, now: s.alter_topic_config(AlterTopicConfigRequest(name, configs, validate_only), now))


def test_topic_configs_set_and_removed_incrementally(tmp_path):
    h = ShardHarness(str(tmp_path), TopicMetadataShard)
    create(h, CreatableTopic("a", 2, configs=(CreatableTopicConfig("retention.ms", "1000"),)))
    r = alter(h, "a", {"max.message.bytes": "2048", "retention.ms": None})
    assert r.configs == {"max.message.bytes": 2048}
    assert h.reload().topics["a"] == TopicInfo("a", "id-a", 2, {"max.message.bytes": 2048})
    end = h.runtime.log.end_offset
    assert alter(h, "a", {"cleanup.policy": "compact"}, validate_only=True).configs == {
        "max.message.bytes": 2048, "cleanup.policy": "compact"}
    assert alter(h, "a", {"retention.ms": None}).configs == {"max.message.bytes": 2048}  # no change, no record
    assert h.runtime.log.end_offset == end
    assert alter(h, "a", {"compression.type": "lz4", "delete.retention.ms": "900", "flush.ms": "0"}).configs == {
        "max.message.bytes": 2048, "compression.type": "lz4", "delete.retention.ms": 900, "flush.ms": 0}


@pytest.mark.parametrize("name,configs,error", [
    ("a", {"max.message.bytes": "2048", "no.such": "1"}, Errors.INVALID_CONFIG),
    ("a", {"max.message.bytes": "2048", "retention.ms": "soon"}, Errors.INVALID_CONFIG),
    ("a", {"max.message.bytes": "2048", "cleanup.policy": "sometimes"}, Errors.INVALID_CONFIG),
    ("a", {"segment.bytes": "0"}, Errors.INVALID_CONFIG),
    ("a", {"compression.type": "brotli"}, Errors.INVALID_CONFIG),
    ("a", {"delete.retention.ms": "-1"}, Errors.INVALID_CONFIG),
    ("a", {"retention.ms": "-2"}, Errors.INVALID_CONFIG),
    ("nowhere", {"retention.ms": "1"}, Errors.UNKNOWN_TOPIC_OR_PARTITION),
])
def test_bad_topic_configs_change_nothing(tmp_path, name, configs, error):
    h = ShardHarness(str(tmp_path), TopicMetadataShard)
    create(h, CreatableTopic("a", 1, configs=(CreatableTopicConfig("retention.ms", "1000"),)))
    end = h.runtime.log.end_offset
    with pytest.raises(KafkaError) as e:
        alter(h, name, configs)
    assert e.value.error is error
    assert h.runtime.log.end_offset == end and h.shard.topics["a"].configs == {"retention.ms": 1000}


def test_partitions_past_the_limit_are_a_policy_violation_and_create_nothing(tmp_path):
    h = ShardHarness(str(tmp_path), TopicMetadataShard, config={"max.partitions": 10})
    r = create(h, CreatableTopic("six", 6), CreatableTopic("five", 5), CreatableTopic("four", 4))
    assert [t.error_code for t in r.topics] == [0, Errors.POLICY_VIOLATION.code, 0]
    assert "over the deployment's limit of 10" in r.topics[1].error_message
    end = h.runtime.log.end_offset
    grow = h.call(lambda s, now: s.create_partitions(CreatePartitionsRequest((CreatePartitionsTopic("six", 7),)), now))
    assert grow.results[0].error_code == Errors.POLICY_VIOLATION.code
    assert h.runtime.log.end_offset == end and sorted(h.shard.topics) == ["four", "six"]
    # Without max.partitions, the limit is 4,000 per partition host the deployment runs.
    h2 = ShardHarness(str(tmp_path / "hosts"), TopicMetadataShard, config={"shoal.partition.hosts": 2})
    assert [t.error_code for t in create(h2, CreatableTopic("a", 8000), CreatableTopic("b", 1)).topics] == [
        0, Errors.POLICY_VIOLATION.code]
