"""Kafka's `listeners` and `advertised.listeners` settings, refused before anything is
deployed when a gateway could not serve them."""
import pytest
import ray

from actors import Cluster
from actors.server.gateway import Listener, parse_listeners
from runtime.errors import Errors, KafkaError


def test_listeners_parse_as_kafka_writes_them():
    assert parse_listeners("PLAINTEXT://127.0.0.1:9092") == [Listener("PLAINTEXT", "127.0.0.1", 9092)]
    # An empty host is every interface, as in Kafka; IPv6 hosts come in brackets.
    assert parse_listeners("plaintext://:0, PLAINTEXT://[::1]:9093") == [
        Listener("PLAINTEXT", "0.0.0.0", 0), Listener("PLAINTEXT", "::1", 9093)]


@pytest.mark.parametrize("value", ["", "127.0.0.1:9092", "PLAINTEXT://127.0.0.1", "PLAINTEXT://host:port",
                                   "SSL://127.0.0.1:9093"])
def test_a_listener_a_gateway_cannot_serve_is_refused(value):
    with pytest.raises(ValueError):
        parse_listeners(value)


@pytest.mark.parametrize("key", ["listeners", "advertised.listeners"])
def test_a_bad_listener_is_invalid_config_and_deploys_nothing(ray_session, tmp_path, key):
    config = {"listeners": "PLAINTEXT://127.0.0.1:0", key: "SASL_SSL://127.0.0.1:9094"}
    before = {a["name"] for a in ray.util.list_named_actors(all_namespaces=True)}
    with pytest.raises(KafkaError) as e:
        Cluster.local(data_dir=str(tmp_path / "shoal"), config=config)
    assert e.value.error is Errors.INVALID_CONFIG and key in str(e.value)
    assert {a["name"] for a in ray.util.list_named_actors(all_namespaces=True)} == before
    assert not (tmp_path / "shoal").exists()
