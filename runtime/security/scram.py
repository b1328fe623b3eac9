"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677), the server side, with Kafka's
credential format: a user's credential per mechanism is its salt, iteration count, stored
key and server key, never the password.

Nothing here is random: the caller draws salts and server nonces and hands them in.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
from dataclasses import dataclass

from ..errors import Errors, KafkaError

# Kafka's ScramMechanism: name -> (hash, the type code of AlterUserScramCredentials).
MECHANISMS = {"SCRAM-SHA-256": ("sha256", 1), "SCRAM-SHA-512": ("sha512", 2)}
MECHANISM_TYPES = {code: name for name, (_, code) in MECHANISMS.items()}
# Kafka's bounds on a credential's iterations (ScramMechanism.minIterations, and the
# AlterUserScramCredentials limit).
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def _hmac(hash_name: str, key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, hash_name).digest()


def hash_name(mechanism: str) -> str:
    try:
        return MECHANISMS[mechanism][0]
    except KeyError:
        raise KafkaError(Errors.UNSUPPORTED_SASL_MECHANISM, f"unknown SCRAM mechanism {mechanism!r}") from None


def mechanism_type(mechanism: str) -> int:
    """The mechanism's code in AlterUserScramCredentials and DescribeUserScramCredentials."""
    hash_name(mechanism)
    return MECHANISMS[mechanism][1]


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """RFC 5802's Hi(password, salt, i): what AlterUserScramCredentials carries."""
    return hashlib.pbkdf2_hmac(hash_name(mechanism), password.encode(), salt, iterations)


def check_iterations(iterations: int) -> None:
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise KafkaError(Errors.UNACCEPTABLE_CREDENTIAL,
                         f"iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}, got {iterations}")


def credential_from_salted(mechanism: str, salted: bytes, salt: bytes, iterations: int) -> ScramCredential:
    h = hash_name(mechanism)
    client_key = _hmac(h, salted, b"Client Key")
    return ScramCredential(salt, hashlib.new(h, client_key).digest(), _hmac(h, salted, b"Server Key"), iterations)


def credential(mechanism: str, password: str, salt: bytes, iterations: int) -> ScramCredential:
    return credential_from_salted(mechanism, salted_password(mechanism, password, salt, iterations), salt,
                                  iterations)


def password_matches(mechanism: str, cred: ScramCredential, password: str) -> bool:
    """Whether `password` is the one `cred` was made from (SASL PLAIN's check)."""
    presented = credential(mechanism, password, cred.salt, cred.iterations)
    return hmac.compare_digest(presented.stored_key, cred.stored_key)


def _unescape_name(value: str) -> str:
    """RFC 5802's saslname: ',' and '=' travel as '=2C' and '=3D', and no other '=' may."""
    if "=" in value.replace("=2C", "").replace("=3D", ""):
        raise ValueError(f"invalid saslname {value!r}")
    return value.replace("=2C", ",").replace("=3D", "=")


def _attributes(message: str) -> dict[str, str]:
    out = {}
    for part in message.split(","):
        key, eq, value = part.partition("=")
        if len(key) != 1 or not eq or key in out:
            raise ValueError(f"malformed SCRAM attribute {part!r}")
        out[key] = value
    return out


@dataclass(frozen=True)
class ClientFirst:
    gs2_header: str
    username: str
    nonce: str
    bare: str  # client-first-message-bare, part of the AuthMessage


def parse_client_first(data: bytes) -> ClientFirst:
    """Raises ValueError for a message that is not a client-first-message."""
    text = data.decode("utf-8")
    cbind, _, rest = text.partition(",")
    authzid, sep, bare = rest.partition(",")
    if not sep or cbind not in ("n", "y"):  # "p=" asks for channel binding, which Kafka refuses too
        raise ValueError("the gs2 header must be 'n,' or 'y,'")
    if authzid and not authzid.startswith("a="):
        raise ValueError(f"malformed authzid {authzid!r}")
    attrs = _attributes(bare)
    if list(attrs)[:2] != ["n", "r"] or not attrs["r"]:
        raise ValueError("a client-first-message starts n=user,r=nonce")
    username = _unescape_name(attrs["n"])
    if authzid and _unescape_name(authzid[2:]) != username:
        raise ValueError("the authorization id must be the user name")
    return ClientFirst(f"{cbind},{authzid},", username, attrs["r"], bare)


class ScramExchange:
    """One SCRAM authentication, server side: client-first in, server-first out; client-final
    in, server-final out. Any failure (malformed message, wrong nonce, wrong proof) raises
    KafkaError(SASL_AUTHENTICATION_FAILED) and ends the exchange."""

    def __init__(self, mechanism: str, client_first: ClientFirst, cred: ScramCredential | None,
                 server_nonce: str) -> None:
        self.mechanism = mechanism
        self._hash = hash_name(mechanism)
        self.username = client_first.username
        self._first = client_first
        self._cred = cred
        self.nonce = client_first.nonce + server_nonce
        self._server_first: str | None = None
        self.complete = False

    def server_first(self) -> bytes:
        if self._cred is None:
            raise KafkaError(Errors.SASL_AUTHENTICATION_FAILED, "Authentication failed: invalid user credentials")
        c = self._cred
        self._server_first = f"r={self.nonce},s={base64.b64encode(c.salt).decode()},i={c.iterations}"
        return self._server_first.encode()

    def client_final(self, data: bytes) -> bytes:
        """Check the client's proof; returns the server-final-message."""
        if self._server_first is None or self.complete:
            raise KafkaError(Errors.SASL_AUTHENTICATION_FAILED, "unexpected SCRAM message")
        try:
            text = data.decode("utf-8")
            without_proof, sep, proof_part = text.rpartition(",p=")
            attrs = _attributes(without_proof)
            proof = base64.b64decode(proof_part, validate=True)
            channel_binding = base64.b64decode(attrs["c"], validate=True).decode()
            nonce = attrs["r"]
        except (ValueError, KeyError, UnicodeDecodeError) as e:
            raise KafkaError(Errors.SASL_AUTHENTICATION_FAILED, f"malformed client-final-message: {e}") from None
        if not sep or list(attrs)[:2] != ["c", "r"]:
            raise KafkaError(Errors.SASL_AUTHENTICATION_FAILED, "malformed client-final-message")
        if channel_binding != self._first.gs2_header:
            raise KafkaError(Errors.SASL_AUTHENTICATION_FAILED, "channel binding does not match the gs2 header")
        if not hmac.compare_digest(nonce.encode(), self.nonce.encode()):
            raise KafkaError(Errors.SASL_AUTHENTICATION_FAILED, "invalid nonce in the client-final-message")
        auth_message = f"{self._first.bare},{self._server_first},{without_proof}".encode()
        client_signature = _hmac(self._hash, self._cred.stored_key, auth_message)
        if len(proof) != len(client_signature):
            raise KafkaError(Errors.SASL_AUTHENTICATION_FAILED, "invalid client proof")
        client_key = bytes(a ^ b for a, b in zip(proof, client_signature))
        if not hmac.compare_digest(hashlib.new(self._hash, client_key).digest(), self._cred.stored_key):
            raise KafkaError(Errors.SASL_AUTHENTICATION_FAILED,
                             f"Authentication failed: invalid credentials with SASL mechanism {self.mechanism}")
        self.complete = True
        server_signature = _hmac(self._hash, self._cred.server_key, auth_message)
        return b"v=" + base64.b64encode(server_signature)
