"""SCRAM's server side, pure: RFC 7677's vector, and exchanges with a client written apart."""
import base64

import pytest

from runtime.errors import Errors, KafkaError
from runtime.security.scram import ScramExchange, credential, parse_client_first, password_matches

from .scram_client import ScramClient

SALT = b"salt-of-sixteen!"


def exchange(mechanism, cred, client, server_nonce="server-nonce"):
    return ScramExchange(mechanism, parse_client_first(client.first()), cred, server_nonce)


def test_rfc7677_vector():
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    server = ScramExchange("SCRAM-SHA-256", parse_client_first(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"),
                           credential("SCRAM-SHA-256", "pencil", salt, 4096), "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    assert server.server_first() == (b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                                     b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    final = server.client_final(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                                b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert server.complete and server.username == "user"


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_full_exchange_both_sides_prove_themselves(mechanism):
    cred = credential(mechanism, "s3cret", SALT, 4096)
    client = ScramClient(mechanism, "al,i=ce", "s3cret", "client-nonce")
    server = exchange(mechanism, cred, client)
    assert server.username == "al,i=ce"
    assert client.verify(server.client_final(client.final(server.server_first())))


def assert_fails(fn, *args):
    with pytest.raises(KafkaError) as e:
        fn(*args)
    assert e.value.error is Errors.SASL_AUTHENTICATION_FAILED


def test_wrong_password_fails():
    client = ScramClient("SCRAM-SHA-256", "alice", "wrong", "cn")
    server = exchange("SCRAM-SHA-256", credential("SCRAM-SHA-256", "right", SALT, 4096), client)
    assert_fails(server.client_final, client.final(server.server_first()))
    assert not server.complete


def test_unknown_user_fails_at_the_first_message():
    server = exchange("SCRAM-SHA-256", None, ScramClient("SCRAM-SHA-256", "nobody", "x", "cn"))
    assert_fails(server.server_first)


def test_a_wrong_or_replayed_nonce_fails():
    cred = credential("SCRAM-SHA-256", "pw", SALT, 4096)
    client = ScramClient("SCRAM-SHA-256", "alice", "pw", "cn")
    first = exchange("SCRAM-SHA-256", cred, client, "nonce-1")
    recorded = client.final(first.server_first())
    first.client_final(recorded)
    # A second exchange gets a new server nonce: the recorded final message is refused...
    second = exchange("SCRAM-SHA-256", cred, client, "nonce-2")
    second.server_first()
    assert_fails(second.client_final, recorded)
    # ...as is one whose nonce was altered, even with a proof made over it.
    third = exchange("SCRAM-SHA-256", cred, client, "nonce-3")
    assert_fails(third.client_final, client.final(third.server_first(), nonce="cnnonce-X"))
    # And the finished exchange takes no second final message.
    assert_fails(first.client_final, recorded)


@pytest.mark.parametrize("message", [b"", b"p=tls,,n=a,r=b", b"n,,r=b,n=a", b"n,,n=a=b,r=c", b"n,a=bob,n=alice,r=x",
                                     b"\xff\xfe"])
def test_malformed_client_first_is_refused(message):
    with pytest.raises((ValueError, UnicodeDecodeError)):
        parse_client_first(message)


@pytest.mark.parametrize("final", [b"garbage", b"c=biws,r=cnserver-nonce", b"c=biws,r=cnserver-nonce,p=!!",
                                   b"c=eSws,r=cnserver-nonce,p=AAAA"])
def test_malformed_client_final_fails(final):
    client = ScramClient("SCRAM-SHA-256", "alice", "pw", "cn")
    server = exchange("SCRAM-SHA-256", credential("SCRAM-SHA-256", "pw", SALT, 4096), client)
    server.server_first()
    assert_fails(server.client_final, final)


def test_plain_passwords_check_against_the_hashed_credential():
    cred = credential("SCRAM-SHA-512", "pw", SALT, 4096)
    assert password_matches("SCRAM-SHA-512", cred, "pw")
    assert not password_matches("SCRAM-SHA-512", cred, "pw ")
