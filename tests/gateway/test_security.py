"""Listeners that let in only who they should, with unmodified clients: SASL PLAIN and
SCRAM-SHA-256/512 with confluent-kafka and kafka-python, TLS with and without client
certificates, users managed through confluent's AdminClient and the CLI; and on raw
sockets, what Kafka refuses: wrong passwords, a request before authentication, a replayed
SCRAM nonce, a plaintext client on a TLS listener."""
import socket
import struct
import time
import uuid

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialDeletion, \
    UserScramCredentialUpsertion
from kafka import KafkaConsumer, KafkaProducer
from kafka.errors import KafkaError as KafkaPythonError

from actors import Cluster
from actors.cli.main import main
from runtime.errors import Errors
from tests.conftest import wait_until
from tests.security.certs import make_certs
from tests.security.scram_client import ScramClient

pytestmark = pytest.mark.ray

MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
PROBE = "probe"


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def cluster(ray_session, tmp_path_factory, certs):
    c = Cluster.local(data_dir=str(tmp_path_factory.mktemp("shoal")), config={
        "log.flush.fsync": False, "log.retention.check.interval.ms": 3600000,
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0,PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "sasl.users": {"alice": "alice-secret"},
        "ssl.keystore.location": certs["server"], "ssl.client.auth": "requested",
        "ssl.truststore.location": certs["ca"]})
    c.create_topic(PROBE, 1)
    yield c
    c.shutdown()


@pytest.fixture(scope="module")
def sasl_bootstrap(cluster):
    return cluster.bootstrap_servers_of("SASL_PLAINTEXT")


def sasl_config(cluster, mechanism, user="alice", password="alice-secret", protocol="SASL_PLAINTEXT"):
    return {"bootstrap.servers": cluster.bootstrap_servers_of(protocol), "security.protocol": protocol,
            "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password}


def round_trip(config: dict, topic: str, n: int = 10) -> list[bytes]:
    """Produce n records with confluent-kafka under `config`, then read them back."""
    producer = ck.Producer({**config, "linger.ms": 5})
    for i in range(n):
        producer.produce(topic, b"v%d" % i)
    assert producer.flush(30) == 0
    consumer = ck.Consumer({**config, "group.id": f"g-{uuid.uuid4().hex[:6]}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got = []
    try:
        def read():
            m = consumer.poll(0.5)
            if m is not None and not m.error():
                got.append(m.value())
            return len(got) >= n
        wait_until(read, timeout_s=60, interval_s=0, message=f"{n} records")
    finally:
        consumer.close()
    return got


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_confluent_each_mechanism(cluster, mechanism):
    topic = f"ck-{mechanism.lower()}"
    cluster.create_topic(topic, 1)
    assert sorted(round_trip(sasl_config(cluster, mechanism), topic)) == sorted(b"v%d" % i for i in range(10))


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kafka_python_each_mechanism(cluster, sasl_bootstrap, mechanism):
    topic = f"kp-{mechanism.lower()}"
    cluster.create_topic(topic, 1)
    auth = dict(bootstrap_servers=sasl_bootstrap, security_protocol="SASL_PLAINTEXT", sasl_mechanism=mechanism,
                sasl_plain_username="alice", sasl_plain_password="alice-secret")
    producer = KafkaProducer(**auth)
    for i in range(10):
        producer.send(topic, b"v%d" % i)
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(topic, group_id=f"g-{mechanism}", auto_offset_reset="earliest",
                             consumer_timeout_ms=20000, **auth)
    got = []
    for m in consumer:
        got.append(m.value)
        if len(got) == 10:
            break
    consumer.close()
    assert sorted(got) == sorted(b"v%d" % i for i in range(10))


def refused(config: dict) -> bool:
    """Whether a confluent client under `config` is refused the metadata of PROBE (nothing
    is served to it): it hears of a failed authentication, or gets nothing within 4 s."""
    errors = []
    producer = ck.Producer({**config, "socket.timeout.ms": 3000, "error_cb": errors.append})
    deadline = time.monotonic() + 4
    while time.monotonic() < deadline:
        try:
            producer.list_topics(topic=PROBE, timeout=0.5)
            return False
        except ck.KafkaException:
            producer.poll(0)  # serves error_cb
            if any(e.code() == ck.KafkaError._AUTHENTICATION for e in errors):
                return True
    return True


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_wrong_passwords_are_refused(cluster, sasl_bootstrap, mechanism):
    assert not refused(sasl_config(cluster, mechanism))
    assert refused(sasl_config(cluster, mechanism, password="wrong"))
    assert refused(sasl_config(cluster, mechanism, user="mallory"))
    with pytest.raises(KafkaPythonError):
        KafkaProducer(bootstrap_servers=sasl_bootstrap, security_protocol="SASL_PLAINTEXT", sasl_mechanism=mechanism,
                      sasl_plain_username="alice", sasl_plain_password="wrong", max_block_ms=2000,
                      bootstrap_timeout_ms=2000)  # kafka-python retries a refused bootstrap for 30 s by default


# ------------------------------------------------------------------ raw sockets

def connect(bootstrap):
    host, port = bootstrap.split(",")[0].split(":")
    return socket.create_connection((host, int(port)), timeout=10)


def send(s, api_key, version, correlation_id, body=b""):
    payload = struct.pack(">hhih", api_key, version, correlation_id, 3) + b"raw" + body
    s.sendall(struct.pack(">i", len(payload)) + payload)


def receive(s) -> bytes:
    """The next response's body (after its correlation id), or b"" once the peer closed."""
    data = b""
    while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
        try:
            chunk = s.recv(65536)
        except ConnectionResetError:
            chunk = b""
        if not chunk:
            return b""
        data += chunk
    return data[8:]


def handshake(s, mechanism):
    send(s, 17, 1, 1, struct.pack(">h", len(mechanism)) + mechanism.encode())
    assert struct.unpack(">h", receive(s)[:2])[0] == 0


def authenticate(s, auth_bytes: bytes, correlation_id=2) -> tuple[int, bytes]:
    """SaslAuthenticate v0: (error code, auth bytes)."""
    send(s, 36, 0, correlation_id, struct.pack(">i", len(auth_bytes)) + auth_bytes)
    body = receive(s)
    error, = struct.unpack(">h", body[:2])
    (n,) = struct.unpack(">h", body[2:4])
    rest = body[4 + max(n, 0):]
    (size,) = struct.unpack(">i", rest[:4])
    return error, rest[4:4 + size]


def closed(s) -> bool:
    return receive(s) == b""


def metadata_v1(s):
    send(s, 3, 1, 9, struct.pack(">i", -1))


def test_a_wrong_password_gets_sasl_authentication_failed_then_nothing(sasl_bootstrap):
    s = connect(sasl_bootstrap)
    handshake(s, "PLAIN")
    assert authenticate(s, b"\0alice\0wrong")[0] == Errors.SASL_AUTHENTICATION_FAILED.code
    metadata_v1(s)
    assert closed(s)


def test_a_disabled_mechanism_is_unsupported(sasl_bootstrap):
    s = connect(sasl_bootstrap)
    send(s, 17, 1, 1, struct.pack(">h", 6) + b"GSSAPI")
    assert struct.unpack(">h", receive(s)[:2])[0] == Errors.UNSUPPORTED_SASL_MECHANISM.code
    assert closed(s)


def test_a_request_before_authentication_closes_the_connection_and_changes_nothing(cluster, sasl_bootstrap):
    s = connect(sasl_bootstrap)
    # CreateTopics v0 of topic "sneaky", 1 partition, replication 1, no assignments or configs.
    body = struct.pack(">ih", 1, 6) + b"sneaky" + struct.pack(">ihii", 1, 1, 0, 0) + struct.pack(">i", 5000)
    send(s, 19, 0, 1, body)
    assert closed(s)
    s = connect(sasl_bootstrap)
    handshake(s, "PLAIN")
    send(s, 19, 0, 2, body)  # after the handshake, still only SaslAuthenticate
    assert closed(s)
    assert "sneaky" not in cluster.list_topics()


def test_a_replayed_scram_nonce_is_refused(sasl_bootstrap):
    client = ScramClient("SCRAM-SHA-256", "alice", "alice-secret", "fixed-client-nonce")
    s = connect(sasl_bootstrap)
    handshake(s, "SCRAM-SHA-256")
    error, server_first = authenticate(s, client.first())
    assert error == 0
    recorded = client.final(server_first)
    error, server_final = authenticate(s, recorded, 3)
    assert error == 0 and client.verify(server_final)
    metadata_v1(s)
    assert receive(s)  # authenticated: served
    s.close()

    s = connect(sasl_bootstrap)
    handshake(s, "SCRAM-SHA-256")
    assert authenticate(s, client.first())[0] == 0  # a new server nonce
    assert authenticate(s, recorded, 3)[0] == Errors.SASL_AUTHENTICATION_FAILED.code
    assert closed(s)


def test_a_plaintext_client_on_a_tls_listener_gets_nothing(cluster):
    s = connect(cluster.bootstrap_servers_of("SSL"))
    send(s, 18, 0, 1)
    assert closed(s)
    assert refused({"bootstrap.servers": cluster.bootstrap_servers_of("SSL")})
    assert not refused({"bootstrap.servers": cluster.bootstrap_servers_of("PLAINTEXT")})


# ------------------------------------------------------------------ TLS

def test_tls_without_and_with_a_client_certificate(cluster, certs):
    cluster.create_topic("tls", 1)
    base = {"bootstrap.servers": cluster.bootstrap_servers_of("SSL"), "security.protocol": "SSL",
            "ssl.ca.location": certs["ca"]}
    assert len(round_trip(base, "tls", 5)) == 5
    with_cert = {**base, "ssl.certificate.location": certs["client_cert"], "ssl.key.location": certs["client_key"]}
    assert len(round_trip(with_cert, "tls", 10)) == 10
    # (The clients went on to the brokers Metadata gave them: TLS endpoints.)
    # A client certificate from another CA is refused.
    rogue = {**base, "ssl.certificate.location": certs["rogue_cert"], "ssl.key.location": certs["rogue_key"]}
    assert refused(rogue)


def test_sasl_ssl_scram(cluster, certs):
    cluster.create_topic("sasl-ssl", 1)
    config = {**sasl_config(cluster, "SCRAM-SHA-512", protocol="SASL_SSL"), "ssl.ca.location": certs["ca"]}
    assert len(round_trip(config, "sasl-ssl", 5)) == 5
    assert refused({**config, "sasl.password": "wrong"})


# ------------------------------------------------------------------ users

def test_users_through_the_admin_client(cluster):
    admin = AdminClient(sasl_config(cluster, "SCRAM-SHA-256"))
    futures = admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion("bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), b"bob-pw"),
        UserScramCredentialUpsertion("carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 1000), b"x")])
    futures["bob"].result(10)
    with pytest.raises(ck.KafkaException) as e:
        futures["carol"].result(10)
    assert e.value.args[0].code() == Errors.UNACCEPTABLE_CREDENTIAL.code

    described = admin.describe_user_scram_credentials(["bob"])["bob"].result(10)
    assert [(i.mechanism, i.iterations) for i in described.scram_credential_infos] == [
        (ScramMechanism.SCRAM_SHA_256, 8192)]
    assert {"alice", "bob"} <= set(admin.describe_user_scram_credentials().result(10))
    assert not refused(sasl_config(cluster, "SCRAM-SHA-256", "bob", "bob-pw"))
    assert not refused(sasl_config(cluster, "PLAIN", "bob", "bob-pw"))

    admin.alter_user_scram_credentials([UserScramCredentialDeletion("bob", ScramMechanism.SCRAM_SHA_256)])[
        "bob"].result(10)
    assert refused(sasl_config(cluster, "SCRAM-SHA-256", "bob", "bob-pw"))
    assert refused(sasl_config(cluster, "PLAIN", "bob", "bob-pw"))
    with pytest.raises(ck.KafkaException) as e:
        admin.describe_user_scram_credentials(["bob"])["bob"].result(10)
    assert e.value.args[0].code() == Errors.RESOURCE_NOT_FOUND.code


def test_users_through_the_cli(cluster, capsys):
    def shoal(*argv):
        code = main(["--namespace", cluster.namespace, *argv])
        return code, capsys.readouterr()

    assert shoal("users", "add", "dave", "--password", "dave-pw", "--mechanism", "SCRAM-SHA-512")[0] == 0
    code, (out, _) = shoal("users", "list")
    assert code == 0 and any(line.split() == ["dave", "SCRAM-SHA-512", "4096"] for line in out.splitlines())
    assert not refused(sasl_config(cluster, "SCRAM-SHA-512", "dave", "dave-pw"))
    assert shoal("users", "delete", "dave")[0] == 0
    assert "dave" not in shoal("users", "list")[1][0]
    assert refused(sasl_config(cluster, "SCRAM-SHA-512", "dave", "dave-pw"))
    code, (_, err) = shoal("users", "delete", "dave")
    assert code == 1 and "RESOURCE_NOT_FOUND" in err
    code, (_, err) = shoal("users", "add", "erin", "--password", "pw", "--iterations", "10")
    assert code == 1 and "UNACCEPTABLE_CREDENTIAL" in err
    assert "erin" not in shoal("users", "list")[1][0]


def test_config_users_are_stored_hashed(cluster):
    assert {"user": "alice", "mechanism": "SCRAM-SHA-256", "iterations": 4096} in cluster.list_users()
    assert "sasl.users" not in cluster.config
