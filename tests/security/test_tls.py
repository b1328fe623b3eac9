"""The TLS context of SSL listeners from Kafka's ssl.* settings, over a local socket pair
(no cluster): the server certificate from a file or inline PEM, and ssl.client.auth."""
import socket
import ssl
import threading

import pytest

from actors.server.tls import server_context

from .certs import make_certs


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certs(tmp_path_factory.mktemp("certs"))


def handshake(server_ctx, client_cert=None, certs=None):
    """Whether a TLS handshake between this server context and a client trusting the CA
    (offering `client_cert`, a (cert, key) pair) succeeds on both sides."""
    client_ctx = ssl.create_default_context(cafile=certs["ca"])
    if client_cert:
        client_ctx.load_cert_chain(*client_cert)
    a, b = socket.socketpair()
    outcome = {}

    def serve():
        try:
            with server_ctx.wrap_socket(a, server_side=True) as s:
                outcome["peer"] = s.getpeercert()
                s.sendall(b"ok")
        except (ssl.SSLError, OSError) as e:
            outcome["server_error"] = e

    t = threading.Thread(target=serve)
    t.start()
    try:
        with client_ctx.wrap_socket(b, server_hostname="localhost") as s:
            ok = s.recv(2) == b"ok"
    except (ssl.SSLError, OSError):
        ok = False
    t.join(10)
    return ok and "server_error" not in outcome, outcome.get("peer")


def test_keystore_file_and_no_client_auth(certs):
    ok, peer = handshake(server_context({"ssl.keystore.location": certs["server"]}), certs=certs)
    assert ok and not peer


def test_inline_pem_keystore(certs):
    config = {"ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": open(certs["server_cert"]).read(),
              "ssl.keystore.key": open(certs["server_key"]).read()}
    assert handshake(server_context(config), certs=certs)[0]


def test_client_auth_required(certs):
    ctx = server_context({"ssl.keystore.location": certs["server"], "ssl.client.auth": "required",
                          "ssl.truststore.location": certs["ca"]})
    ok, peer = handshake(ctx, (certs["client_cert"], certs["client_key"]), certs)
    assert ok and dict(x[0] for x in peer["subject"])["commonName"] == "client"
    assert not handshake(ctx, certs=certs)[0]
    assert not handshake(ctx, (certs["rogue_cert"], certs["rogue_key"]), certs)[0]


def test_client_auth_requested(certs):
    ctx = server_context({"ssl.keystore.location": certs["server"], "ssl.client.auth": "requested",
                          "ssl.truststore.location": certs["ca"]})
    assert handshake(ctx, (certs["client_cert"], certs["client_key"]), certs)[0]
    assert handshake(ctx, certs=certs)[0]


@pytest.mark.parametrize("config, words", [
    ({}, "ssl.keystore.location"),
    ({"ssl.keystore.type": "JKS", "ssl.keystore.location": "x"}, "PEM"),
    ({"ssl.keystore.location": "/nonexistent.pem"}, "do not load"),
    ({"ssl.client.auth": "sometimes"}, "ssl.client.auth"),
    ({"ssl.client.auth": "required"}, "ssl.truststore.location")])
def test_bad_settings_say_which(certs, config, words):
    config = {"ssl.keystore.location": certs["server"], **config} if "ssl.keystore.location" not in config and config else config
    with pytest.raises(ValueError, match=words):
        server_context(config)
