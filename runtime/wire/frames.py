"""Size-prefixed frames: a 4-byte big-endian size, then that many bytes.

The declared size is checked as soon as its four bytes are in, before any of the frame is
buffered, so a frame declaring a negative size or one above ``socket.request.max.bytes``
costs nothing: the connection is closed.
"""
from __future__ import annotations

import struct

# Kafka's socket.request.max.bytes default (100 MiB).
SOCKET_REQUEST_MAX_BYTES = 104857600

_SIZE = struct.Struct(">i")


class FrameError(Exception):
    """The peer broke framing; the connection can only be closed."""


class FrameReader:
    def __init__(self, max_bytes: int = SOCKET_REQUEST_MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self._buffer = bytearray()
        self._size: int | None = None

    def feed(self, data: bytes) -> None:
        self._buffer += data
        if self._size is None and len(self._buffer) >= 4:
            (size,) = _SIZE.unpack_from(self._buffer)
            if size < 0 or size > self.max_bytes:
                self._buffer.clear()
                raise FrameError(f"a frame declares {size} bytes, outside [0, {self.max_bytes}]")
            self._size = size

    def next_frame(self) -> bytes | None:
        """The next whole frame's payload, or None until more bytes arrive."""
        if self._size is None or len(self._buffer) < 4 + self._size:
            return None
        end = 4 + self._size
        frame = bytes(self._buffer[4:end])
        del self._buffer[:end]
        self._size = None
        self.feed(b"")  # the next frame's size may already be here
        return frame

    @property
    def partial(self) -> bool:
        """Part of a frame has arrived but not all of it."""
        return bool(self._buffer)


def frame(payload: bytes) -> bytes:
    return _SIZE.pack(len(payload)) + payload
