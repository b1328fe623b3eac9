"""Kafka requests on raw sockets, encoded and decoded with kio (the classes generated from
Kafka's schemas), for tests and benchmarks that speak the protocol themselves."""
from __future__ import annotations

import asyncio
import io
import socket
import struct

from kio.serial import entity_reader, entity_writer

from runtime.wire.entities import build, plain
from runtime.wire.frames import frame
from runtime.wire.versions import request_class, response_class


def encode(api_key: int, version: int, correlation_id: int, data: dict, client_id: str = "raw") -> bytes:
    """One framed request of plain values (runtime.wire.entities.build)."""
    cls = request_class(api_key, version)
    buf = io.BytesIO()
    header = cls.__header_schema__
    entity_writer(header)(buf, header(request_api_key=api_key, request_api_version=version,
                                      correlation_id=correlation_id, client_id=client_id))
    entity_writer(cls)(buf, build(cls, data))
    return frame(buf.getvalue())


def decode(api_key: int, version: int, payload: bytes) -> tuple[int, dict]:
    """(correlation id, response as plain values) of one response frame's payload."""
    cls = response_class(api_key, version)
    header, offset = entity_reader(cls.__header_schema__)(memoryview(payload), 0)
    response, _ = entity_reader(cls)(memoryview(payload), offset)
    return header.correlation_id, plain(response)


class RawClient:
    """One connection, one request at a time."""

    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.split(":")
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        self.correlation_id = 0

    def request(self, api_key: int, version: int, data: dict) -> dict:
        self.correlation_id += 1
        self.sock.sendall(encode(api_key, version, self.correlation_id, data))
        (size,) = struct.unpack(">i", self._read(4))
        correlation_id, response = decode(api_key, version, self._read(size))
        assert correlation_id == self.correlation_id
        return response

    def _read(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("the gateway closed the connection")
            out += chunk
        return out

    def close(self) -> None:
        self.sock.close()


class AsyncRawClient:
    """One connection carrying many requests at once (pipelined, as Kafka clients do)."""

    def __init__(self, reader, writer) -> None:
        self.reader, self.writer = reader, writer
        self.correlation_id = 0
        self.waiting: dict[int, tuple[int, int, asyncio.Future]] = {}
        self.task = asyncio.ensure_future(self._read_loop())

    @classmethod
    async def connect(cls, bootstrap: str) -> "AsyncRawClient":
        host, port = bootstrap.split(":")
        return cls(*await asyncio.open_connection(host, int(port)))

    async def request(self, api_key: int, version: int, data: dict) -> dict:
        return await self.send(api_key, version, encode(api_key, version, self.next_id(), data))

    def next_id(self) -> int:
        self.correlation_id += 1
        return self.correlation_id

    async def send(self, api_key: int, version: int, framed: bytes) -> dict:
        """A request already encoded; its correlation id is the one last drawn by next_id()."""
        future = asyncio.get_running_loop().create_future()
        self.waiting[self.correlation_id] = (api_key, version, future)
        self.writer.write(framed)
        return await future

    async def _read_loop(self) -> None:
        try:
            while True:
                (size,) = struct.unpack(">i", await self.reader.readexactly(4))
                payload = await self.reader.readexactly(size)
                (correlation_id,) = struct.unpack_from(">i", payload)
                api_key, version, future = self.waiting.pop(correlation_id)
                future.set_result(decode(api_key, version, payload)[1])
        except (asyncio.IncompleteReadError, ConnectionError) as e:
            for _, _, future in self.waiting.values():
                if not future.done():
                    future.set_exception(ConnectionError(f"the gateway closed the connection: {e!r}"))

    async def close(self) -> None:
        self.task.cancel()
        self.writer.close()
