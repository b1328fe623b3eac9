"""A raw Kafka connection for tests: requests built with kio from plain values, sent on a
socket, responses read back as plain values."""
import io
import socket
import struct

from kio.serial import entity_reader, entity_writer

from runtime.wire.entities import build, plain
from runtime.wire.versions import request_class, response_class


class KioConnection:
    def __init__(self, bootstrap: str, timeout_s: float = 60):
        host, port = bootstrap.split(":")
        self.sock = socket.create_connection((host, int(port)), timeout=timeout_s)
        self._correlation_id = 0

    def request(self, api_key: int, version: int, data: dict) -> dict:
        cls = request_class(api_key, version)
        self._correlation_id += 1
        buf = io.BytesIO()
        header = cls.__header_schema__
        entity_writer(header)(buf, header(request_api_key=api_key, request_api_version=version,
                                          correlation_id=self._correlation_id, client_id="kio-test"))
        entity_writer(cls)(buf, build(cls, data))
        payload = buf.getvalue()
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)
        body = memoryview(self._read(struct.unpack(">i", self._read(4))[0]))
        response = response_class(api_key, version)
        header, offset = entity_reader(response.__header_schema__)(body, 0)
        assert header.correlation_id == self._correlation_id
        return plain(entity_reader(response)(body, offset)[0])

    def _read(self, size: int) -> bytes:
        out = bytearray()
        while len(out) < size:
            chunk = self.sock.recv(size - len(out))
            assert chunk, "the gateway closed the connection"
            out += chunk
        return bytes(out)

    def close(self) -> None:
        self.sock.close()
