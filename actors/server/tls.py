"""The TLS context of SSL and SASL_SSL listeners, from Kafka's ssl.* settings (PEM only):

- the server certificate and key: `ssl.keystore.location`, one PEM file holding the key and
  the certificate chain; or `ssl.keystore.certificate.chain` and `ssl.keystore.key`, the PEM
  text itself; `ssl.key.password` if the key is encrypted;
- client certificates: `ssl.client.auth` none (the default), requested or required, checked
  against the CA certificates of `ssl.truststore.location` (or `ssl.truststore.certificates`,
  PEM text).
"""
from __future__ import annotations

import os
import ssl
import tempfile

CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


def server_context(config: dict) -> ssl.SSLContext:
    """Raises ValueError naming the setting that is missing or wrong."""
    store_type = str(config.get("ssl.keystore.type", "PEM")).upper()
    if store_type != "PEM":
        raise ValueError(f"ssl.keystore.type {store_type}: only PEM is supported")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    password = config.get("ssl.key.password")
    try:
        if config.get("ssl.keystore.location"):
            context.load_cert_chain(config["ssl.keystore.location"], password=password)
        elif config.get("ssl.keystore.certificate.chain") and config.get("ssl.keystore.key"):
            _load_pem_text(context, config["ssl.keystore.certificate.chain"], config["ssl.keystore.key"], password)
        else:
            raise ValueError("an SSL listener needs ssl.keystore.location, or ssl.keystore.certificate.chain "
                             "and ssl.keystore.key")
    except (OSError, ssl.SSLError) as e:
        raise ValueError(f"the server certificate and key do not load: {e}") from None
    client_auth = str(config.get("ssl.client.auth", "none")).lower()
    if client_auth not in CLIENT_AUTH:
        raise ValueError(f"ssl.client.auth {client_auth!r}: one of {sorted(CLIENT_AUTH)}")
    context.verify_mode = CLIENT_AUTH[client_auth]
    if context.verify_mode != ssl.CERT_NONE:
        try:
            if config.get("ssl.truststore.location"):
                context.load_verify_locations(cafile=config["ssl.truststore.location"])
            elif config.get("ssl.truststore.certificates"):
                context.load_verify_locations(cadata=config["ssl.truststore.certificates"])
            else:
                raise ValueError(f"ssl.client.auth={client_auth} needs ssl.truststore.location")
        except (OSError, ssl.SSLError) as e:
            raise ValueError(f"the truststore does not load: {e}") from None
    return context


def _load_pem_text(context: ssl.SSLContext, chain: str, key: str, password) -> None:
    """ssl loads certificates only from files: a private one, removed once read."""
    fd, path = tempfile.mkstemp(suffix=".pem")  # mode 0600
    try:
        with os.fdopen(fd, "w") as f:
            f.write(f"{key.strip()}\n{chain.strip()}\n")
        context.load_cert_chain(path, password=password)
    finally:
        os.unlink(path)
