"""Share groups on real actors: the share consumer in implicit and explicit mode, RENEW,
RELEASE and REJECT, bad acknowledgements, a consumer that dies holding records, and the
SharePartition and share coordinator actors dying with records in flight."""
import pytest
import ray

from actors import AcknowledgeType, Cluster, Errors, KafkaError, TopicPartition
from actors import naming
from runtime.messages.share import (AcknowledgeTopic, AcknowledgePartition, AcknowledgementBatch,
                                    ShareAcknowledgeRequest)
from tests.conftest import wait_until

LOCK_MS = 2000
CONFIG = {"log.flush.fsync": False, "log.retention.check.interval.ms": 3600000,
          "share.auto.offset.reset": "earliest", "group.share.record.lock.duration.ms": LOCK_MS,
          "group.share.delivery.count.limit": 4}
FAST = dict(fetch_max_wait_ms=200)


@pytest.fixture(scope="module")
def cluster(ray_session, tmp_path_factory):
    c = Cluster.local(data_dir=str(tmp_path_factory.mktemp("shoal")), config=CONFIG)
    yield c
    c.shutdown()


def produce(cluster, topic, values, partition=None):
    with cluster.producer(linger_ms=1) as producer:
        for v in values:
            producer.send(topic, v.encode(), partition=partition)
        producer.flush()


def poll_until(consumer, count, timeout_s=20):
    """Poll until `count` records came back (explicit consumers must acknowledge in between)."""
    got = []

    def step():
        got.extend(consumer.poll(0.2))
        return len(got) >= count
    wait_until(step, timeout_s=timeout_s, interval_s=0, message=f"{count} records")
    return got


def share_partition(cluster, group, topic, partition=0):
    return ray.get_actor(naming.share_partition(group, topic, partition), namespace=cluster.namespace)


def states(cluster, group, topic, partition=0):
    return ray.get(share_partition(cluster, group, topic, partition).record_states.remote())


def test_implicit_mode_accepts_each_poll_at_the_next(cluster):
    cluster.create_topic("s-implicit", 1)
    produce(cluster, "s-implicit", [f"v{i}" for i in range(20)])
    with cluster.share_consumer("g-implicit", **FAST) as c:
        c.subscribe(["s-implicit"])
        records = poll_until(c, 20)
        assert [r.value for r in records] == [f"v{i}".encode() for i in range(20)]
        assert {r.delivery_count for r in records} == {1}
        assert c.acquisition_lock_timeout_ms() == LOCK_MS
        assert c.commit_sync() == {TopicPartition("s-implicit", 0): None}
        assert states(cluster, "g-implicit", "s-implicit")["start_offset"] == 20
        assert c.poll(0.3) == []
