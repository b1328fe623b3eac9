import pytest

from actors import Cluster

CONFIG = {"log.flush.fsync": False, "log.retention.check.interval.ms": 3600000,
          "listeners": "PLAINTEXT://127.0.0.1:0"}


@pytest.fixture(scope="module")
def cluster(ray_session, tmp_path_factory, request):
    """One Cluster.local with a Kafka gateway per test module; CLUSTER_CONFIG adds settings."""
    c = Cluster.local(data_dir=str(tmp_path_factory.mktemp("shoal")),
                      config={**CONFIG, **getattr(request.module, "CLUSTER_CONFIG", {})})
    yield c
    c.shutdown()


@pytest.fixture(scope="module")
def bootstrap(cluster):
    return cluster.bootstrap_servers
