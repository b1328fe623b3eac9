"""The controller creates a group's SharePartition actor on demand (the first ShareFetch of any
member). Members of a new group ask at the same moment; they must share one creation."""
import pytest
import ray

from actors import naming


def test_a_share_partition_asked_for_by_many_at_once_is_created_once_and_stays(cluster):
    cluster.create_topic("asked", 1)
    topic_id = cluster.describe_topic("asked").topic_id
    controller = ray.get_actor(naming.CONTROLLER, namespace=cluster.namespace)
    ray.get([controller.ensure_share_partition.remote("g-asked", "asked", topic_id, 0) for _ in range(8)],
            timeout=60)
    actor = ray.get_actor(naming.share_partition("g-asked", "asked", 0), namespace=cluster.namespace)
    first = ray.get(actor.status.remote(), timeout=30)
    # Asked again, with the actor running: the same process answers every time.
    ray.get([controller.ensure_share_partition.remote("g-asked", "asked", topic_id, 0) for _ in range(4)],
            timeout=60)
    again = [ray.get(ray.get_actor(naming.share_partition("g-asked", "asked", 0),
                                   namespace=cluster.namespace).status.remote(), timeout=30) for _ in range(20)]
    assert {s["pid"] for s in again} == {first["pid"]}


def test_a_deleted_topics_share_partitions_end_and_a_topic_of_its_name_gets_new_ones(cluster):
    """Deleting a topic ends its SharePartitions (Kafka removes them with the replica): asked
    for again with the old id, the controller refuses UNKNOWN_TOPIC_ID and creates nothing; a
    topic made again under the name gets SharePartitions of its own id (the share state is
    the id's, so none of the old one's)."""
    from runtime.errors import Errors, KafkaError
    cluster.create_topic("gone", 2)
    old_id = cluster.describe_topic("gone").topic_id
    controller = ray.get_actor(naming.CONTROLLER, namespace=cluster.namespace)
    ray.get([controller.ensure_share_partition.remote("g-gone", "gone", old_id, p) for p in (0, 1)], timeout=60)
    cluster.delete_topic("gone")
    for p in (0, 1):
        with pytest.raises(ValueError):
            ray.get_actor(naming.share_partition("g-gone", "gone", p), namespace=cluster.namespace)
    with pytest.raises(KafkaError) as refused:
        ray.get(controller.ensure_share_partition.remote("g-gone", "gone", old_id, 0), timeout=60)
    assert refused.value.error is Errors.UNKNOWN_TOPIC_ID
    with pytest.raises(ValueError):
        ray.get_actor(naming.share_partition("g-gone", "gone", 0), namespace=cluster.namespace)

    cluster.create_topic("gone", 1)
    new_id = cluster.describe_topic("gone").topic_id
    with pytest.raises(KafkaError) as refused:  # a partition the new topic lacks
        ray.get(controller.ensure_share_partition.remote("g-gone", "gone", new_id, 1), timeout=60)
    assert refused.value.error is Errors.UNKNOWN_TOPIC_OR_PARTITION
    ray.get(controller.ensure_share_partition.remote("g-gone", "gone", new_id, 0), timeout=60)
    actor = ray.get_actor(naming.share_partition("g-gone", "gone", 0), namespace=cluster.namespace)
    assert ray.get(actor.status.remote(), timeout=30)["topic_id"] == new_id


def test_a_share_partition_left_from_an_older_topic_of_the_name_is_replaced(cluster):
    """A SharePartition of a deleted topic that outlived it (the controller was away at the
    deletion) answers requests for the new topic UNKNOWN_TOPIC_ID, changing nothing, and the
    controller, asked with the topic's id, replaces it."""
    from actors.placement import remote
    from actors.server.share_partition import SharePartitionActor
    from runtime.errors import Errors
    from runtime.messages.share import (AcknowledgementBatch, AcknowledgePartition, AcknowledgeTopic,
                                        ShareAcknowledgeRequest)
    cluster.create_topic("twice", 1)
    topic_id = cluster.describe_topic("twice").topic_id
    name = naming.share_partition("g-twice", "twice", 0)
    config = ray.get(ray.get_actor(naming.CONTROLLER, namespace=cluster.namespace).deployment.remote(),
                     timeout=30)["config"]
    stale = remote(SharePartitionActor, name, cluster.namespace, False, config).remote(
        cluster.namespace, "g-twice", "twice", "an-older-topic-id", 0, config)
    request = ShareAcknowledgeRequest("g-twice", "m1", 1, False, (AcknowledgeTopic(topic_id, (
        AcknowledgePartition(0, (AcknowledgementBatch(0, 0, (1,)),)),)),))
    answer = ray.get(stale.share_acknowledge.remote(request), timeout=30)
    assert (answer.error_code, answer.responses) == (Errors.UNKNOWN_TOPIC_ID.code, ())
    controller = ray.get_actor(naming.CONTROLLER, namespace=cluster.namespace)
    ray.get(controller.ensure_share_partition.remote("g-twice", "twice", topic_id, 0), timeout=60)
    assert ray.get(ray.get_actor(name, namespace=cluster.namespace).status.remote(), timeout=30)["topic_id"] == topic_id
