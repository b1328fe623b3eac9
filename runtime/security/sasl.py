"""One connection's SASL authentication, server side, as Kafka's SaslServerAuthenticator runs
it: before a client is authenticated only ApiVersions, SaslHandshake and SaslAuthenticate
are served, in that order; anything else is an illegal SASL state and closes the connection.

The caller looks credentials up between the steps (`user_to_look_up` says whose are needed)
and draws the SCRAM server nonce; this machine decides everything else.
"""
from __future__ import annotations

import enum

from ..errors import Errors, KafkaError
from . import scram

PLAIN = "PLAIN"
MECHANISMS = (PLAIN, *scram.MECHANISMS)
# Kafka's default is GSSAPI, which shoal does not implement: every mechanism it does.
DEFAULT_MECHANISMS = ",".join(MECHANISMS)

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36


class SaslState(enum.Enum):
    HANDSHAKE = "handshake"  # ApiVersions or SaslHandshake expected
    AUTHENTICATE = "authenticate"  # SaslAuthenticate expected
    COMPLETE = "complete"
    FAILED = "failed"  # the answer to the failing request goes out, then the connection closes


def parse_mechanisms(value) -> tuple[str, ...]:
    """`sasl.enabled.mechanisms`: a comma-separated string or a list; ValueError for one this
    server does not implement."""
    names = [m.strip().upper() for m in (value.split(",") if isinstance(value, str) else value)]
    names = [m for m in names if m]
    unknown = [m for m in names if m not in MECHANISMS]
    if unknown:
        raise ValueError(f"unsupported SASL mechanisms {unknown}; shoal implements {list(MECHANISMS)}")
    if not names:
        raise ValueError("no SASL mechanism enabled")
    return tuple(dict.fromkeys(names))


def parse_plain(data: bytes) -> tuple[str, str]:
    """RFC 4616's message [authzid] NUL authcid NUL passwd: (user, password)."""
    parts = data.decode("utf-8").split("\x00")
    if len(parts) != 3 or not parts[1] or not parts[2]:
        raise ValueError("a PLAIN message is [authzid] NUL user NUL password")
    authzid, user, password = parts
    if authzid and authzid != user:
        raise ValueError("the authorization id must be the user name")
    return user, password


class SaslServer:
    def __init__(self, enabled_mechanisms) -> None:
        self.enabled = parse_mechanisms(enabled_mechanisms)
        self.state = SaslState.HANDSHAKE
        self.mechanism: str | None = None
        self.principal: str | None = None  # the authenticated user
        self._exchange: scram.ScramExchange | None = None

    @property
    def complete(self) -> bool:
        return self.state is SaslState.COMPLETE

    @property
    def failed(self) -> bool:
        return self.state is SaslState.FAILED

    def check_request(self, api_key: int) -> None:
        """Raises KafkaError(ILLEGAL_SASL_STATE) for a request this state does not serve: the
        connection is then closed unanswered."""
        if self.state is SaslState.COMPLETE:
            return
        allowed = {SaslState.HANDSHAKE: (API_VERSIONS, SASL_HANDSHAKE),
                   SaslState.AUTHENTICATE: (SASL_AUTHENTICATE,)}.get(self.state, ())
        if api_key not in allowed:
            state, self.state = self.state, SaslState.FAILED
            raise KafkaError(Errors.ILLEGAL_SASL_STATE,
                             f"unexpected request of API {api_key} in SASL state {state.value}")

    def handshake(self, mechanism: str) -> dict:
        """The SaslHandshake response data; an unknown or disabled mechanism fails the
        connection after this answer."""
        data = {"mechanisms": list(self.enabled)}
        if self.state is not SaslState.HANDSHAKE:
            self.state = SaslState.FAILED
            return {**data, "error_code": Errors.ILLEGAL_SASL_STATE.code}
        if mechanism not in self.enabled:
            self.state = SaslState.FAILED
            return {**data, "error_code": Errors.UNSUPPORTED_SASL_MECHANISM.code}
        self.mechanism = mechanism
        self.state = SaslState.AUTHENTICATE
        return {**data, "error_code": 0}

    def user_to_look_up(self, auth_bytes: bytes) -> str | None:
        """Whose credentials `authenticate(auth_bytes, ...)` needs (None: none, or the
        message is malformed, which `authenticate` then reports)."""
        if self.state is not SaslState.AUTHENTICATE or self._exchange is not None:
            return None
        try:
            if self.mechanism == PLAIN:
                return parse_plain(auth_bytes)[0]
            return scram.parse_client_first(auth_bytes).username
        except (ValueError, UnicodeDecodeError):
            return None

    def authenticate(self, auth_bytes: bytes, credentials: dict[str, scram.ScramCredential],
                     server_nonce: str) -> bytes:
        """One SaslAuthenticate step: the bytes to answer. `credentials` are the looked-up
        user's, by SCRAM mechanism. Raises KafkaError: SASL_AUTHENTICATION_FAILED (the
        connection closes after the answer), ILLEGAL_SASL_STATE."""
        if self.state is not SaslState.AUTHENTICATE:
            self.state = SaslState.FAILED
            raise KafkaError(Errors.ILLEGAL_SASL_STATE, "SaslAuthenticate before SaslHandshake")
        try:
            if self.mechanism == PLAIN:
                return self._plain(auth_bytes, credentials)
            if self._exchange is None:
                first = scram.parse_client_first(auth_bytes)
                self._exchange = scram.ScramExchange(self.mechanism, first, credentials.get(self.mechanism),
                                                     server_nonce)
                return self._exchange.server_first()
            out = self._exchange.client_final(auth_bytes)
            self._complete(self._exchange.username)
            return out
        except (ValueError, UnicodeDecodeError) as e:
            self.state = SaslState.FAILED
            raise KafkaError(Errors.SASL_AUTHENTICATION_FAILED, f"malformed {self.mechanism} message: {e}") from None
        except KafkaError:
            self.state = SaslState.FAILED
            raise

    def _plain(self, auth_bytes: bytes, credentials: dict[str, scram.ScramCredential]) -> bytes:
        user, password = parse_plain(auth_bytes)
        if not any(scram.password_matches(m, c, password) for m, c in credentials.items()):
            raise KafkaError(Errors.SASL_AUTHENTICATION_FAILED,
                             "Authentication failed: Invalid username or password")
        self._complete(user)
        return b""

    def _complete(self, user: str) -> None:
        self.principal = user
        self.state = SaslState.COMPLETE
