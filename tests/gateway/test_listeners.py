"""Kafka's `listeners` and `advertised.listeners` settings, refused before anything is
deployed when a gateway could not serve them."""
import pytest
import ray

from actors import Cluster
from actors.server.gateway.actor import Listener, parse_listeners
from runtime.errors import Errors, KafkaError


def test_listeners_parse_as_kafka_writes_them():
    assert parse_listeners("PLAINTEXT://127.0.0.1:9092") == [Listener("PLAINTEXT", "127.0.0.1", 9092, "PLAINTEXT")]
    # An empty host is every interface, as in Kafka; IPv6 hosts come in brackets.
    assert parse_listeners("plaintext://:0, SASL_SSL://[::1]:9093") == [
        Listener("PLAINTEXT", "0.0.0.0", 0, "PLAINTEXT"), Listener("SASL_SSL", "::1", 9093, "SASL_SSL")]
    # Other names take their protocol from listener.security.protocol.map.
    assert parse_listeners("CLIENT://:9092,SSL://:9093", "CLIENT:SASL_PLAINTEXT") == [
        Listener("CLIENT", "0.0.0.0", 9092, "SASL_PLAINTEXT"), Listener("SSL", "0.0.0.0", 9093, "SSL")]


@pytest.mark.parametrize("value", ["", "127.0.0.1:9092", "PLAINTEXT://127.0.0.1", "PLAINTEXT://host:port",
                                   "TLS://127.0.0.1:9093", "PLAINTEXT://:1,PLAINTEXT://:2"])
def test_a_listener_a_gateway_cannot_serve_is_refused(value):
    with pytest.raises(ValueError):
        parse_listeners(value)


@pytest.mark.parametrize("key", ["listeners", "advertised.listeners"])
def test_a_bad_listener_is_invalid_config_and_deploys_nothing(ray_session, tmp_path, key):
    config = {"listeners": "PLAINTEXT://127.0.0.1:0", key: "BOGUS://127.0.0.1:9094"}
    before = {a["name"] for a in ray.util.list_named_actors(all_namespaces=True)}
    with pytest.raises(KafkaError) as e:
        Cluster.local(data_dir=str(tmp_path / "shoal"), config=config)
    assert e.value.error is Errors.INVALID_CONFIG and key in str(e.value)
    assert {a["name"] for a in ray.util.list_named_actors(all_namespaces=True)} == before
    assert not (tmp_path / "shoal").exists()


def test_a_tls_listener_without_a_certificate_is_invalid_config(ray_session, tmp_path):
    with pytest.raises(KafkaError) as e:
        Cluster.local(data_dir=str(tmp_path / "shoal"), config={"listeners": "SSL://127.0.0.1:0"})
    assert e.value.error is Errors.INVALID_CONFIG and "ssl.keystore.location" in str(e.value)
    assert not (tmp_path / "shoal").exists()
