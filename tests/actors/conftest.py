import pytest

from actors import Cluster


@pytest.fixture(scope="module")
def cluster(ray_session, tmp_path_factory):
    c = Cluster.local(data_dir=str(tmp_path_factory.mktemp("shoal")),
                      config={"log.flush.fsync": False, "log.retention.check.interval.ms": 3600000})
    yield c
    c.shutdown()
