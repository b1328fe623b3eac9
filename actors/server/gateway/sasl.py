"""SaslHandshake and SaslAuthenticate: the connection's SaslServer (runtime.security.sasl)
decides, this shell looks the user's credentials up in the controller and draws the SCRAM
server nonce. On a listener without SASL both answer ILLEGAL_SASL_STATE, as Kafka's do
once a connection is authenticated.

SaslHandshake v0, after which Kafka takes the SASL tokens unframed by Kafka headers, is not
served: clients since Kafka 1.0 send v1 and SaslAuthenticate.
"""
from __future__ import annotations

import secrets

from runtime.errors import Errors, KafkaError

from ... import naming
from .context import CONNECTION


async def sasl_handshake(gw, event) -> dict:
    sasl = CONNECTION.get().sasl
    if sasl is None:
        return {"error_code": Errors.ILLEGAL_SASL_STATE.code, "mechanisms": []}
    return sasl.handshake(event.request.mechanism)


async def sasl_authenticate(gw, event) -> dict:
    sasl = CONNECTION.get().sasl
    if sasl is None:
        return {"error_code": Errors.ILLEGAL_SASL_STATE.code, "error_message": "not a SASL listener",
                "auth_bytes": b""}
    auth_bytes = bytes(event.request.auth_bytes)
    user = sasl.user_to_look_up(auth_bytes)
    try:
        credentials = await gw.call(naming.CONTROLLER, "scram_credentials", user) if user else {}
        out = sasl.authenticate(auth_bytes, credentials, secrets.token_urlsafe(24))
    except KafkaError as e:
        if not sasl.failed:  # the controller did not answer: the client may try again
            raise
        return {"error_code": e.code, "error_message": e.message, "auth_bytes": b""}
    return {"error_code": 0, "error_message": None, "auth_bytes": out, "session_lifetime": 0}


HANDLERS = {
    17: (1, 1, sasl_handshake),
    36: (0, 2, sasl_authenticate),
}
