import pytest

from actors import Cluster

# What every module's cluster runs with; a module adds or overrides settings with its own
# CLUSTER_CONFIG, and names the topics to create with CLUSTER_TOPICS ({name: partitions}).
BASE_CONFIG = {"log.flush.fsync": False, "log.retention.check.interval.ms": 3600000}


@pytest.fixture(scope="module")
def cluster(ray_session, tmp_path_factory, request):
    """One Cluster.local per test module. A module that needs data in it before its tests
    overrides this fixture, asking for it by the same name."""
    config = {**BASE_CONFIG, **getattr(request.module, "CLUSTER_CONFIG", {})}
    c = Cluster.local(data_dir=str(tmp_path_factory.mktemp("shoal")), config=config)
    for topic, partitions in getattr(request.module, "CLUSTER_TOPICS", {}).items():
        c.create_topic(topic, partitions)
    yield c
    c.shutdown()
