"""Kafka's ConsumerProtocol: the bytes a classic consumer puts in JoinGroup's protocol
metadata (its subscription) and in SyncGroup's assignments, for protocol type "consumer".

The bytes are an int16 version followed by Kafka's ConsumerProtocolSubscription or
ConsumerProtocolAssignment at that version, written and read by kio's classes generated
from Kafka's schemas, so shoal's consumers, kafka-python, librdkafka and Java clients share
one group. The coordinator only needs the subscribed topics (offsets of subscribed topics do
not expire, and cannot be deleted); clients and describe use all of it. This module is the
only place that encodes or decodes them.
"""
from __future__ import annotations

import functools
import importlib
import io
import struct
from typing import NamedTuple

__all__ = [
    "PROTOCOL_TYPE", "ConsumerProtocolSubscription", "ConsumerProtocolAssignment",
    "encode_subscription", "decode_subscription", "encode_assignment", "decode_assignment",
]

PROTOCOL_TYPE = "consumer"
_VERSION = 3
_SUBSCRIPTION = "consumer_protocol_subscription"
_ASSIGNMENT = "consumer_protocol_assignment"
_INT16 = struct.Struct(">h")

TopicPartitions = tuple[tuple[str, tuple[int, ...]], ...]


class ConsumerProtocolSubscription(NamedTuple):
    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: TopicPartitions = ()
    generation_id: int = -1
    rack_id: str | None = None


class ConsumerProtocolAssignment(NamedTuple):
    assigned_partitions: TopicPartitions
    user_data: bytes | None = None


@functools.cache
def _schemas(schema: str) -> tuple:
    """kio's generated modules of versions 0-3 of the schema, indexed by version. Loaded on
    first use: kio (with the libraries it brings) costs some 0.2 s of every process that
    imports it, and most actors that import the group coordinator's code never read these
    bytes."""
    return tuple(importlib.import_module(f"kio.schema.{schema}.v{v}.data") for v in range(_VERSION + 1))


def _encode(module, cls_name: str, version: int, **fields) -> bytes:
    from kio.serial import entity_writer
    cls = getattr(module, cls_name)
    names = {f for f in cls.__dataclass_fields__}
    buf = io.BytesIO()
    buf.write(_INT16.pack(version))
    entity_writer(cls)(buf, cls(**{k: v for k, v in fields.items() if k in names}))
    return buf.getvalue()


def _decode(modules, cls_name: str, data: bytes):
    """Kafka reads a newer version than it knows by that prefix; so does this."""
    from kio.serial import entity_reader
    if len(data) < 2:
        raise ValueError("consumer protocol bytes end early")
    (version,) = _INT16.unpack_from(data)
    if version < 0:
        raise ValueError(f"bad consumer protocol version {version}")
    cls = getattr(modules[min(version, len(modules) - 1)], cls_name)
    try:
        value, _ = entity_reader(cls)(memoryview(data), 2)
    except Exception as e:  # kio raises struct, index and its own errors on short bytes
        raise ValueError(f"consumer protocol bytes do not parse: {e!r}") from None
    return value


def _partitions(module, topic_partitions) -> tuple:
    return tuple(module.TopicPartition(topic=t, partitions=tuple(ps)) for t, ps in topic_partitions)


def _plain(topic_partitions) -> TopicPartitions:
    return tuple((tp.topic, tuple(tp.partitions)) for tp in topic_partitions)


def encode_subscription(topics, user_data: bytes | None = None, owned_partitions=(), generation_id: int = -1,
                        rack_id: str | None = None, version: int = _VERSION) -> bytes:
    module = _schemas(_SUBSCRIPTION)[version]
    return _encode(module, "ConsumerProtocolSubscription", version, topics=tuple(topics), user_data=user_data,
                   owned_partitions=_partitions(module, owned_partitions), generation_id=generation_id,
                   rack_id=rack_id)


def decode_subscription(data: bytes) -> ConsumerProtocolSubscription:
    """Raises ValueError on bytes that are not a subscription."""
    s = _decode(_schemas(_SUBSCRIPTION), "ConsumerProtocolSubscription", data)
    return ConsumerProtocolSubscription(tuple(s.topics), s.user_data, _plain(getattr(s, "owned_partitions", ())),
                                        getattr(s, "generation_id", -1), getattr(s, "rack_id", None))


def encode_assignment(assigned_partitions, user_data: bytes | None = None, version: int = _VERSION) -> bytes:
    module = _schemas(_ASSIGNMENT)[version]
    return _encode(module, "ConsumerProtocolAssignment", version,
                   assigned_partitions=_partitions(module, assigned_partitions), user_data=user_data)


def decode_assignment(data: bytes) -> ConsumerProtocolAssignment:
    """An empty byte string is the empty assignment (what the coordinator gives a member the
    leader left out). Raises ValueError on bytes that are not an assignment."""
    if not data:
        return ConsumerProtocolAssignment(())
    a = _decode(_schemas(_ASSIGNMENT), "ConsumerProtocolAssignment", data)
    return ConsumerProtocolAssignment(_plain(a.assigned_partitions), a.user_data)
