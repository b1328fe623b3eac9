"""kio's generated message classes from plain values, and back.

The gateway speaks in plain values (ints for error codes, milliseconds for durations and
timestamps, strings for topic ids, dicts for structs); kio's classes want ErrorCode members,
timedeltas, datetimes and UUIDs. kio's writers only call ``total_seconds()``, ``timestamp()``
and ``.bytes`` on those, so small value types stand in for them here: runtime/ imports
neither datetime nor uuid (tests/runtime/test_purity.py).
"""
from __future__ import annotations

import dataclasses
import functools
import types
import typing

from kio.schema.errors import ErrorCode

_NoneType = type(None)


class Millis(int):
    """A duration in milliseconds, written by kio as a timedelta."""

    def total_seconds(self) -> float:
        return self / 1000


class EpochMillis(int):
    """A timestamp in milliseconds since the epoch, written by kio as a datetime."""

    def timestamp(self) -> float:
        return self / 1000


class Uuid(str):
    """A UUID in its usual string form, written by kio as 16 bytes."""

    @property
    def bytes(self) -> bytes:
        return bytes.fromhex(self.replace("-", ""))


ZERO_UUID = Uuid("00000000-0000-0000-0000-000000000000")


def is_entity(t) -> bool:
    return isinstance(t, type) and dataclasses.is_dataclass(t) and hasattr(t, "__type__")


@functools.cache
def _fields(cls) -> tuple:
    """(name, kafka_type, entity class or None, is_array) of each field of a kio class."""
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        t, array = hints[f.name], False
        if typing.get_origin(t) in (typing.Union, types.UnionType):
            t = next(a for a in typing.get_args(t) if a is not _NoneType)
        if typing.get_origin(t) is tuple:
            t, array = typing.get_args(t)[0], True
        out.append((f.name, f.metadata.get("kafka_type"), t if is_entity(t) else None, array))
    return tuple(out)


def _to_kio(kafka_type: str | None, value):
    if value is None:
        return None
    if kafka_type == "error_code":
        return value if isinstance(value, ErrorCode) else ErrorCode(int(value))
    if kafka_type in ("timedelta_i32", "timedelta_i64"):
        return value if hasattr(value, "total_seconds") else Millis(value)
    if kafka_type == "datetime_i64":
        return value if hasattr(value, "timestamp") else EpochMillis(value)
    if kafka_type == "uuid":
        return value if hasattr(value, "bytes") else Uuid(value)
    return value


def build(cls, data: dict):
    """An instance of the kio class `cls` from a dict of plain values. Nested structs are
    dicts (or already built); keys the schema version does not have are ignored, so one
    dict serves every version; fields left out take the schema's default."""
    kwargs = {}
    for name, kafka_type, entity, array in _fields(cls):
        if name not in data:
            continue
        value = data[name]
        if entity is not None:
            convert = lambda v: v if v is None or isinstance(v, entity) else build(entity, v)  # noqa: E731
        else:
            convert = functools.partial(_to_kio, kafka_type)
        kwargs[name] = None if value is None else tuple(map(convert, value)) if array else convert(value)
    return cls(**kwargs)


def _to_plain(kafka_type: str | None, value):
    if value is None:
        return None
    if kafka_type == "error_code":
        return int(value.value)
    if kafka_type in ("timedelta_i32", "timedelta_i64"):
        return round(value.total_seconds() * 1000)
    if kafka_type == "datetime_i64":
        return round(value.timestamp() * 1000)
    if kafka_type == "uuid":
        return str(value)
    if kafka_type in ("bytes", "records"):
        return bytes(value)
    return value


def plain(entity) -> dict:
    """The fields of a kio instance as plain values, nested structs as dicts."""
    out = {}
    for name, kafka_type, nested, array in _fields(type(entity)):
        value = getattr(entity, name)
        if nested is not None:
            convert = lambda v: None if v is None else plain(v)  # noqa: E731
        else:
            convert = functools.partial(_to_plain, kafka_type)
        out[name] = None if value is None else [convert(v) for v in value] if array else convert(value)
    return out
