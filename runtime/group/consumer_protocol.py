"""Kafka's ConsumerProtocol: the bytes a classic consumer puts in JoinGroup's protocol
metadata (its subscription) and in SyncGroup's assignments.

The layout is Kafka's (ConsumerProtocolSubscription v0-v3 and ConsumerProtocolAssignment
v0-v3, big-endian, after an int16 version), so kafka-python and Java clients read the same
bytes. The coordinator only needs the subscribed topics (offsets of subscribed topics do not
expire, and cannot be deleted); the client uses all of it.
"""
from __future__ import annotations

import struct
from typing import NamedTuple

__all__ = [
    "PROTOCOL_TYPE", "ConsumerProtocolSubscription", "ConsumerProtocolAssignment",
    "encode_subscription", "decode_subscription", "encode_assignment", "decode_assignment",
]

PROTOCOL_TYPE = "consumer"
_VERSION = 3


class ConsumerProtocolSubscription(NamedTuple):
    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: tuple[tuple[str, tuple[int, ...]], ...] = ()
    generation_id: int = -1
    rack_id: str | None = None


class ConsumerProtocolAssignment(NamedTuple):
    assigned_partitions: tuple[tuple[str, tuple[int, ...]], ...]
    user_data: bytes | None = None


class _Writer:
    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def int16(self, v: int) -> None:
        self.parts.append(struct.pack(">h", v))

    def int32(self, v: int) -> None:
        self.parts.append(struct.pack(">i", v))

    def string(self, s: str | None) -> None:
        if s is None:
            self.int16(-1)
        else:
            b = s.encode()
            self.int16(len(b))
            self.parts.append(b)

    def bytes_(self, b: bytes | None) -> None:
        if b is None:
            self.int32(-1)
        else:
            self.int32(len(b))
            self.parts.append(bytes(b))

    def partitions(self, topic_partitions) -> None:
        self.int32(len(topic_partitions))
        for topic, partitions in topic_partitions:
            self.string(topic)
            self.int32(len(partitions))
            for p in partitions:
                self.int32(p)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = memoryview(data)
        self.pos = 0

    def _take(self, fmt: str, n: int) -> int:
        if self.pos + n > len(self.data):
            raise ValueError("consumer protocol bytes end early")
        (v,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += n
        return v

    def int16(self) -> int:
        return self._take(">h", 2)

    def int32(self) -> int:
        return self._take(">i", 4)

    def at_end(self) -> bool:
        return self.pos >= len(self.data)

    def raw(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ValueError("consumer protocol bytes end early")
        b = bytes(self.data[self.pos:self.pos + n])
        self.pos += n
        return b

    def string(self) -> str | None:
        n = self.int16()
        return None if n < 0 else self.raw(n).decode()

    def bytes_(self) -> bytes | None:
        n = self.int32()
        return None if n < 0 else self.raw(n)

    def partitions(self) -> tuple[tuple[str, tuple[int, ...]], ...]:
        out = []
        for _ in range(self.int32()):
            topic = self.string()
            out.append((topic, tuple(self.int32() for _ in range(self.int32()))))
        return tuple(out)


def encode_subscription(topics, user_data: bytes | None = None, owned_partitions=(), generation_id: int = -1,
                        rack_id: str | None = None, version: int = _VERSION) -> bytes:
    w = _Writer()
    w.int16(version)
    w.int32(len(topics))
    for t in topics:
        w.string(t)
    w.bytes_(user_data)
    if version >= 1:
        w.partitions(tuple(owned_partitions))
    if version >= 2:
        w.int32(generation_id)
    if version >= 3:
        w.string(rack_id)
    return b"".join(w.parts)


def decode_subscription(data: bytes) -> ConsumerProtocolSubscription:
    """Raises ValueError on bytes that are not a subscription. Later versions than 3 are read
    by their v3 prefix, as Kafka reads every version by its prefix."""
    r = _Reader(data)
    version = r.int16()
    if version < 0:
        raise ValueError(f"bad consumer protocol version {version}")
    topics = tuple(r.string() for _ in range(r.int32()))
    user_data = r.bytes_()
    owned = r.partitions() if version >= 1 and not r.at_end() else ()
    generation = r.int32() if version >= 2 and not r.at_end() else -1
    rack = r.string() if version >= 3 and not r.at_end() else None
    return ConsumerProtocolSubscription(topics, user_data, owned, generation, rack)


def encode_assignment(assigned_partitions, user_data: bytes | None = None, version: int = _VERSION) -> bytes:
    w = _Writer()
    w.int16(version)
    w.partitions(tuple(assigned_partitions))
    w.bytes_(user_data)
    return b"".join(w.parts)


def decode_assignment(data: bytes) -> ConsumerProtocolAssignment:
    """An empty byte string is the empty assignment (what the coordinator gives a member the
    leader left out)."""
    if not data:
        return ConsumerProtocolAssignment(())
    r = _Reader(data)
    if r.int16() < 0:
        raise ValueError("bad consumer protocol version")
    partitions = r.partitions()
    return ConsumerProtocolAssignment(partitions, r.bytes_() if not r.at_end() else None)
