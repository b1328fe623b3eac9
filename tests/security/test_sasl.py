"""A connection's SASL state machine, pure: what is served before authentication, each
mechanism's steps, and every way authentication fails."""
import pytest
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest
from kafka.protocol.parser import KafkaProtocol

from runtime.errors import Errors, KafkaError
from runtime.security.sasl import SaslServer, SaslState, parse_mechanisms
from runtime.security.scram import credential
from runtime.wire.connection import ProtocolError, ServerConnection
from runtime.wire.versions import api_versions_response

from .scram_client import ScramClient

SALT = b"0123456789abcdef"
CREDS = {"alice": {m: credential(m, "alice-secret", SALT, 4096) for m in ("SCRAM-SHA-256", "SCRAM-SHA-512")}}


def authenticate(sasl, auth_bytes, nonce="snonce"):
    user = sasl.user_to_look_up(auth_bytes)
    return sasl.authenticate(auth_bytes, CREDS.get(user, {}), nonce)


def fails(sasl, auth_bytes, error=Errors.SASL_AUTHENTICATION_FAILED):
    with pytest.raises(KafkaError) as e:
        authenticate(sasl, auth_bytes)
    assert e.value.error is error
    assert sasl.failed and sasl.principal is None


def test_plain():
    sasl = SaslServer("PLAIN")
    assert sasl.handshake("PLAIN")["error_code"] == 0
    assert authenticate(sasl, b"\x00alice\x00alice-secret") == b""
    assert sasl.complete and sasl.principal == "alice"


@pytest.mark.parametrize("message", [b"\x00alice\x00wrong", b"\x00bob\x00alice-secret", b"alice-secret",
                                     b"mallory\x00alice\x00alice-secret", b"\x00\x00", b"\xff\x00\xff"])
def test_plain_failures(message):
    sasl = SaslServer("PLAIN")
    sasl.handshake("PLAIN")
    fails(sasl, message)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram(mechanism):
    sasl = SaslServer(["PLAIN", mechanism])
    sasl.handshake(mechanism)
    client = ScramClient(mechanism, "alice", "alice-secret", "cnonce")
    server_first = authenticate(sasl, client.first())
    assert sasl.state is SaslState.AUTHENTICATE
    assert client.verify(authenticate(sasl, client.final(server_first)))
    assert sasl.complete and sasl.principal == "alice"


def test_scram_wrong_password_and_replayed_nonce():
    sasl = SaslServer("SCRAM-SHA-256")
    sasl.handshake("SCRAM-SHA-256")
    client = ScramClient("SCRAM-SHA-256", "alice", "wrong", "cnonce")
    fails(sasl, client.final(authenticate(sasl, client.first())))

    good = ScramClient("SCRAM-SHA-256", "alice", "alice-secret", "cnonce")
    first = SaslServer("SCRAM-SHA-256")
    first.handshake("SCRAM-SHA-256")
    recorded = good.final(authenticate(first, good.first(), "nonce-1"))
    authenticate(first, recorded)
    replay = SaslServer("SCRAM-SHA-256")
    replay.handshake("SCRAM-SHA-256")
    authenticate(replay, good.first(), "nonce-2")
    fails(replay, recorded)


def test_unknown_or_disabled_mechanism():
    sasl = SaslServer("PLAIN,SCRAM-SHA-256")
    answer = sasl.handshake("SCRAM-SHA-512")
    assert answer == {"error_code": Errors.UNSUPPORTED_SASL_MECHANISM.code, "mechanisms": ["PLAIN", "SCRAM-SHA-256"]}
    assert sasl.failed
    assert SaslServer("PLAIN").handshake("GSSAPI")["error_code"] == Errors.UNSUPPORTED_SASL_MECHANISM.code


def test_enabled_mechanisms_are_checked():
    assert parse_mechanisms(" plain , SCRAM-SHA-512,PLAIN") == ("PLAIN", "SCRAM-SHA-512")
    for bad in ("GSSAPI", "", "OAUTHBEARER,PLAIN"):
        with pytest.raises(ValueError):
            parse_mechanisms(bad)


def test_order_of_steps():
    sasl = SaslServer("PLAIN")
    sasl.check_request(18)
    sasl.check_request(17)
    with pytest.raises(KafkaError) as e:
        sasl.authenticate(b"\x00alice\x00alice-secret", CREDS["alice"], "n")
    assert e.value.error is Errors.ILLEGAL_SASL_STATE
    sasl = SaslServer("PLAIN")
    sasl.handshake("PLAIN")
    assert sasl.handshake("PLAIN")["error_code"] == Errors.ILLEGAL_SASL_STATE.code


@pytest.mark.parametrize("api_key", [3, 0, 1, 10, 36])
def test_any_other_request_before_the_handshake_is_illegal(api_key):
    sasl = SaslServer("PLAIN")
    with pytest.raises(KafkaError) as e:
        sasl.check_request(api_key)
    assert e.value.error is Errors.ILLEGAL_SASL_STATE and sasl.failed


@pytest.mark.parametrize("api_key", [3, 18, 17])
def test_only_sasl_authenticate_after_the_handshake(api_key):
    sasl = SaslServer("PLAIN")
    sasl.handshake("PLAIN")
    with pytest.raises(KafkaError):
        sasl.check_request(api_key)


def client_bytes(*requests):
    client = KafkaProtocol(client_id="tester")
    for r in requests:
        client.send_request(r)
    return bytes(client.send_bytes())


def test_a_connection_closes_on_a_request_before_authentication():
    conn = ServerConnection({18: (0, 4), 3: (0, 12), 17: (0, 1), 36: (0, 2)}, sasl=SaslServer("PLAIN"))
    conn.receive_data(client_bytes(ApiVersionsRequest[0](), MetadataRequest[1](topics=None)))
    assert conn.next_event().api_key == 18
    with pytest.raises(ProtocolError, match="ILLEGAL_SASL_STATE"):
        conn.next_event()
    assert conn.closed


def test_a_connection_closes_after_answering_a_failed_authentication():
    sasl = SaslServer("PLAIN")
    conn = ServerConnection({18: (0, 4), 3: (0, 12), 17: (0, 1), 36: (0, 2)}, sasl=sasl)
    conn.receive_data(client_bytes(ApiVersionsRequest[0]()))
    event = conn.next_event()
    sasl.state = SaslState.FAILED  # as a failed SaslAuthenticate leaves it
    assert conn.send_response(event, api_versions_response(conn.versions, 0))
    assert conn.closed
