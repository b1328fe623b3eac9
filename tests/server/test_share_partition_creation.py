"""The controller creates a group's SharePartition actor on demand (the first ShareFetch of any
member). Members of a new group ask at the same moment; they must share one creation."""
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
