"""One server-side Kafka connection as a state machine: bytes in, requests out; responses
in, bytes out. No sockets: the gateway feeds what it reads and writes what it is given.

Request header v1 precedes a non-flexible request, v2 (with tagged fields) a flexible one;
a response gets header v0, or v1 when flexible (ApiVersions always v0, so that a client can
read the answer whatever version it asked). Clients pipeline requests: responses may be
handed in any order and come out in the order the requests came in.

What Kafka answers and what closes the connection follows its RequestContext: an
ApiVersions request of an unknown version is taken as version 0 and answered
UNSUPPORTED_VERSION; an unknown API key, any other unsupported version, or a header or body
that does not parse is an invalid request and the connection is closed; bytes after a body
are ignored.
"""
from __future__ import annotations

import io
import struct
from collections import deque
from dataclasses import dataclass, field

from kio.serial import entity_reader, entity_writer
from kio.serial.errors import SerialError

from .frames import SOCKET_REQUEST_MAX_BYTES, FrameError, FrameReader, frame
from .versions import API_VERSIONS, check_table, request_class, response_class

_API = struct.Struct(">hh")


class ProtocolError(Exception):
    """The peer sent something Kafka answers by closing the connection."""


@dataclass(frozen=True)
class RequestReceived:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    request: object  # the kio request instance
    # An ApiVersions request of a version this server does not know: the version it asked
    # for. It is answered at version 0 with UNSUPPORTED_VERSION.
    unsupported_version: int | None = None
    _seq: int = field(default=0, compare=False, repr=False)


class ServerConnection:
    def __init__(self, versions: dict[int, tuple[int, int]], max_request_bytes: int = SOCKET_REQUEST_MAX_BYTES):
        self.versions = check_table(versions)
        self._frames = FrameReader(max_request_bytes)
        self._closed: str | None = None
        self._next_seq = 0
        self._awaited: deque[int] = deque()  # seqs of requests not yet answered, in order
        self._ready: dict[int, bytes] = {}  # answered out of order, waiting their turn

    @property
    def closed(self) -> str | None:
        """Why the connection must close, once the peer broke the protocol."""
        return self._closed

    @property
    def partial_request(self) -> bool:
        return self._frames.partial

    def receive_data(self, data: bytes) -> None:
        self._raise_if_closed()
        try:
            self._frames.feed(data)
        except FrameError as e:
            self._fail(str(e))

    def next_event(self) -> RequestReceived | None:
        """The next whole request, or None until more bytes arrive. Raises ProtocolError
        (and stays closed) for anything that closes the connection."""
        self._raise_if_closed()
        payload = self._frames.next_frame()
        if payload is None:
            return None
        try:
            event = self._parse(payload)
        except (SerialError, ValueError, struct.error, UnicodeDecodeError) as e:
            self._fail(f"malformed request: {e!r}")
        self._awaited.append(event._seq)
        return event

    def send_response(self, event: RequestReceived, response: object | None) -> bytes:
        """Hand in the response to `event` (None for a request that gets none, a Produce
        with acks=0). Returns the bytes now due, in request order."""
        self._raise_if_closed()
        self._ready[event._seq] = b"" if response is None else self._encode(event, response)
        out = []
        while self._awaited and self._awaited[0] in self._ready:
            out.append(self._ready.pop(self._awaited.popleft()))
        return b"".join(out)

    # ------------------------------------------------------------------ internals

    def _parse(self, payload: bytes) -> RequestReceived:
        api_key, version = _API.unpack_from(payload)
        seq, self._next_seq = self._next_seq, self._next_seq + 1
        supported = self.versions.get(api_key)
        if supported is None:
            self._fail(f"unknown or unserved API key {api_key}")
        unsupported = None
        if not supported[0] <= version <= supported[1]:
            if api_key != API_VERSIONS:
                self._fail(f"API {api_key} version {version} outside {supported[0]}-{supported[1]}")
            # Kafka reads only the header's fixed part of it: the correlation id.
            unsupported, version = version, 0
        cls = request_class(api_key, version)
        header, offset = entity_reader(cls.__header_schema__)(memoryview(payload), 0)
        if unsupported is not None:
            return RequestReceived(api_key, 0, header.correlation_id, header.client_id, cls(), unsupported, seq)
        # Bytes after the body are left unread, as Kafka's RequestContext leaves them:
        # librdkafka sends three after a Metadata v12 for every topic.
        request, _ = entity_reader(cls)(memoryview(payload), offset)
        return RequestReceived(api_key, version, header.correlation_id, header.client_id, request, None, seq)

    def _encode(self, event: RequestReceived, response: object) -> bytes:
        version = event.api_version
        cls = response_class(event.api_key, version)
        if type(response) is not cls:
            raise TypeError(f"a {type(response).__name__} cannot answer {cls.__name__} v{version}")
        buf = io.BytesIO()
        header = cls.__header_schema__
        entity_writer(header)(buf, header(correlation_id=event.correlation_id))
        entity_writer(cls)(buf, response)
        return frame(buf.getvalue())

    def _fail(self, reason: str):
        self._closed = reason
        raise ProtocolError(reason)

    def _raise_if_closed(self) -> None:
        if self._closed is not None:
            raise ProtocolError(self._closed)
