"""SCRAM's client side as RFC 5802 gives it, written apart from the server's code so that the
tests check one against the other (and both against RFC 7677's vector)."""
import base64
import hashlib
import hmac


class ScramClient:
    def __init__(self, mechanism: str, user: str, password: str, nonce: str) -> None:
        self.hash = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}[mechanism]
        self.user, self.password, self.nonce = user, password, nonce

    def first(self) -> bytes:
        self.bare = f"n={self.user.replace('=', '=3D').replace(',', '=2C')},r={self.nonce}"
        return f"n,,{self.bare}".encode()

    def final(self, server_first: bytes, nonce: str | None = None) -> bytes:
        """`nonce`: send this one instead of the server's (a wrong or replayed nonce)."""
        self.server_first = server_first.decode()
        attrs = dict(p.split("=", 1) for p in self.server_first.split(","))
        salted = hashlib.pbkdf2_hmac(self.hash, self.password.encode(), base64.b64decode(attrs["s"]), int(attrs["i"]))
        client_key = hmac.new(salted, b"Client Key", self.hash).digest()
        stored_key = hashlib.new(self.hash, client_key).digest()
        without_proof = f"c=biws,r={nonce or attrs['r']}"
        self.auth_message = f"{self.bare},{self.server_first},{without_proof}".encode()
        signature = hmac.new(stored_key, self.auth_message, self.hash).digest()
        self.server_key = hmac.new(salted, b"Server Key", self.hash).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> bool:
        expected = hmac.new(self.server_key, self.auth_message, self.hash).digest()
        return server_final == b"v=" + base64.b64encode(expected)
