"""A deployment starts its actors side by side; one that cannot start leaves none behind."""
import pytest

from actors import Cluster, Errors, KafkaError

pytestmark = pytest.mark.ray


def shoal_actors(ray) -> set:
    return {(a["namespace"], a["name"]) for a in ray.util.list_named_actors(all_namespaces=True)
            if a["name"].startswith("shoal/")}


def test_a_controller_that_cannot_load_fails_the_start_and_leaves_no_actor(ray_session, tmp_path):
    data_dir = str(tmp_path / "data")
    with Cluster.local(data_dir=data_dir) as cluster:
        cluster.create_topic("a", 1)
        cluster.create_topic("b", 1)
    # Damage the first of the controller's two records: acknowledged state follows it, so the
    # log fails closed instead of cutting it off as a torn tail.
    segment = tmp_path / "data" / "__cluster_metadata-0" / "00000000000000000000.log"
    data = bytearray(segment.read_bytes())
    data[30] ^= 0xFF
    segment.write_bytes(bytes(data))
    before = shoal_actors(ray_session)

    with pytest.raises(KafkaError) as raised:
        Cluster.local(data_dir=data_dir)
    assert raised.value.error is Errors.COORDINATOR_NOT_AVAILABLE
    assert "the controller did not load" in str(raised.value) and "CorruptRecordError" in str(raised.value)
    # The coordinators started beside the controller went with it.
    assert shoal_actors(ray_session) == before
