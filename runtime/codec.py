"""Typed, versioned coordinator records and their msgpack encoding.

A record is a key and a value, each a NamedTuple registered under a record type id (Kafka's
CoordinatorRecordType). A null value is a tombstone. On disk a record is the msgpack array
``[type_id, version, key_fields, value_fields | nil]``; nested NamedTuples are plain arrays.
Nothing persisted is ever pickled.

Every coordinator keeps its record types in its own ``records.py`` and registers them with
`register`. `RECORD_MODULES` below is the one place that lists those modules, so that any
process (an actor, a Spark worker) can decode any log.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable, Iterable, NamedTuple

import msgpack

from .errors import CorruptRecordError

# The modules that define record types. Importing them fills the registry.
RECORD_MODULES = (
    "runtime.topics.records",
    "runtime.security.users",
    "runtime.group.records",
    "runtime.share_state.records",
    "runtime.txn.records",
)


class Record(NamedTuple):
    """A coordinator record. A NamedTuple rather than a dataclass because loading builds
    millions of them and a tuple is several times cheaper to construct."""
    key: Any  # a registered key NamedTuple
    value: Any = None  # a registered value NamedTuple, or None for a tombstone

    @property
    def type(self) -> "RecordType":
        return _BY_KEY_CLASS[type(self.key)]

    @property
    def is_tombstone(self) -> bool:
        return self.value is None


@dataclass(frozen=True)
class RecordType:
    type_id: int
    name: str
    key_class: type
    value_class: type
    version: int
    # How compaction keeps this type: "latest" keeps the newest record per key (Kafka's
    # log cleaner); "delta" keeps every record after the newest record of `snapshot_of`
    # with the same key fields (ShareUpdate deltas on top of a ShareSnapshot).
    compaction: str
    snapshot_of: int | None
    decode_key: Callable[[tuple], Any]
    decode_value: Callable[[tuple], Any]
    decode: Callable[[tuple, tuple | None], Record]  # (key fields, value fields) -> Record


_BY_ID: dict[int, RecordType] = {}
_BY_KEY_CLASS: dict[type, RecordType] = {}
_DECODE: dict[int, Callable[[tuple, tuple | None], Record]] = {}
_loaded = False


def _decoder(cls: type, nested: dict[str, Any]) -> Callable[[tuple], Any]:
    """A decoder for a NamedTuple: older versions (fewer fields) take the defaults;
    fields listed in `nested` (name -> NamedTuple class, or [class] for a list of them,
    or {class} / {key: class} for a dict whose values are them) are rebuilt too."""
    n = len(cls._fields)
    new = tuple.__new__
    if not nested:
        def decode(fields: tuple) -> Any:
            if type(fields) is not tuple:
                raise ValueError(f"{cls.__name__} must be an array, got {type(fields).__name__}")
            if len(fields) == n:
                return new(cls, fields)
            if len(fields) > n:
                raise ValueError(f"{cls.__name__} has {n} fields, got {len(fields)}")
            return cls(*fields)
        return decode

    plan = []
    for name, spec in nested.items():
        idx = cls._fields.index(name)
        if isinstance(spec, list):
            inner = _decoder(spec[0], getattr(spec[0], "__nested__", {}))
            plan.append((idx, lambda v, inner=inner: tuple(inner(x) for x in v) if v is not None else None))
        elif isinstance(spec, dict):
            (inner_cls,) = spec.values()
            inner = _decoder(inner_cls, getattr(inner_cls, "__nested__", {}))
            plan.append((idx, lambda v, inner=inner: {k: inner(x) for k, x in v.items()} if v is not None else None))
        else:
            inner = _decoder(spec, getattr(spec, "__nested__", {}))
            plan.append((idx, lambda v, inner=inner: inner(v) if v is not None else None))

    flat = _decoder(cls, {})

    def decode_nested(fields: tuple) -> Any:
        fields = list(fields)
        for idx, conv in plan:
            if idx < len(fields):
                fields[idx] = conv(fields[idx])
        return flat(tuple(fields))

    return decode_nested


def _record_decoder(key_class: type, value_class: type, decode_key: Callable[[tuple], Any],
                    decode_value: Callable[[tuple], Any]) -> Callable[[tuple, tuple | None], Record]:
    """(key fields, value fields or None) -> Record. Loading calls this once per record,
    so flat types of the current shape take a path of three tuple constructions."""
    def general(key: tuple, value: tuple | None) -> Record:
        return Record(decode_key(key), None if value is None else decode_value(value))

    if getattr(key_class, "__nested__", None) or getattr(value_class, "__nested__", None):
        return general
    nk, nv = len(key_class._fields), len(value_class._fields)
    new = tuple.__new__

    def flat(key: tuple, value: tuple | None) -> Record:
        if type(key) is tuple and len(key) == nk:
            if value is None:
                return new(Record, (new(key_class, key), None))
            if type(value) is tuple and len(value) == nv:
                return new(Record, (new(key_class, key), new(value_class, value)))
        return general(key, value)

    return flat


def register(type_id: int, key_class: type, value_class: type, *, version: int = 0,
             compaction: str = "latest", snapshot_of: int | None = None) -> RecordType:
    """Register a record type. Nested NamedTuple fields are declared on the class as
    ``__nested__ = {"field": Cls | [Cls] | {"": Cls}}``."""
    if compaction not in ("latest", "delta"):
        raise ValueError(f"unknown compaction {compaction!r}")
    existing = _BY_ID.get(type_id)
    if existing is not None and existing.key_class is not key_class:
        raise ValueError(f"record type id {type_id} is taken by {existing.name}")
    name = key_class.__name__.removesuffix("Key")
    decode_key = _decoder(key_class, getattr(key_class, "__nested__", {}))
    decode_value = _decoder(value_class, getattr(value_class, "__nested__", {}))
    rt = RecordType(type_id, name, key_class, value_class, version, compaction, snapshot_of, decode_key, decode_value,
                    _record_decoder(key_class, value_class, decode_key, decode_value))
    _BY_ID[type_id] = rt
    _DECODE[type_id] = rt.decode
    _BY_KEY_CLASS[key_class] = rt
    return rt


def load_record_types() -> None:
    global _loaded
    if not _loaded:
        for module in RECORD_MODULES:
            try:
                importlib.import_module(module)
            except ModuleNotFoundError as e:
                # A coordinator that does not exist yet has no records to decode.
                if not module.startswith(e.name or "\0"):
                    raise
        _loaded = True


def record_type(type_id: int) -> RecordType:
    load_record_types()
    try:
        return _BY_ID[type_id]
    except KeyError:
        raise CorruptRecordError(f"unknown record type {type_id}") from None


def record_types() -> list[RecordType]:
    load_record_types()
    return sorted(_BY_ID.values(), key=lambda rt: rt.type_id)


def encode_record(record: Record) -> list:
    rt = _BY_KEY_CLASS.get(type(record.key))
    if rt is None:
        raise TypeError(f"{type(record.key).__name__} is not a registered record key")
    if record.value is not None and type(record.value) is not rt.value_class:
        raise TypeError(f"{rt.name} takes a {rt.value_class.__name__} value, got {type(record.value).__name__}")
    return [rt.type_id, rt.version, record.key, record.value]


def encode_records(records: Iterable[Record]) -> bytes:
    return msgpack.packb([encode_record(r) for r in records], use_bin_type=True)


def unpack(payload: bytes) -> Any:
    return msgpack.unpackb(payload, use_list=False, raw=False, strict_map_key=False)


def decode_entries(entries: tuple, base_offset: int, log: str | None = None) -> list[Record]:
    """Decode one batch's entries (already unpacked) into Records; the i-th entry is at
    offset base_offset + i. Errors name the log and the offset."""
    load_record_types()
    if not isinstance(entries, tuple):
        raise CorruptRecordError("batch payload is not a list", log=log, offset=base_offset)
    decoders = _DECODE
    try:
        return [decoders[type_id](key, value) for type_id, _version, key, value in entries]
    except Exception:
        # Find the bad entry again, one at a time, to say where and what it is.
        return _decode_entries_checked(entries, base_offset, log)


def replay_entries(entries: tuple, base_offset: int, replay: Callable[[int, Record], None],
                   log: str | None = None) -> int:
    """Decode one batch's entries and hand each record to ``replay(offset, record)`` as it
    is decoded (loading's hot loop: no list in between). Returns the number of records.
    Decoding errors name the log and the offset; errors raised by ``replay`` pass as they are."""
    load_record_types()
    if not isinstance(entries, tuple):
        raise CorruptRecordError("batch payload is not a list", log=log, offset=base_offset)
    decoders = _DECODE
    offset = base_offset
    for entry in entries:
        try:
            type_id, _version, key, value = entry
            record = decoders[type_id](key, value)
        except Exception:
            _decode_entries_checked((entry,), offset, log)  # raises, saying what is wrong
            raise
        replay(offset, record)
        offset += 1
    return offset - base_offset


def _decode_entries_checked(entries: tuple, base_offset: int, log: str | None) -> list[Record]:
    out = []
    for i, entry in enumerate(entries):
        try:
            type_id, _version, key, value = entry
            rt = _BY_ID[type_id]
        except KeyError:
            raise CorruptRecordError(f"unknown record type {entry[0]}", log=log, offset=base_offset + i) from None
        except (TypeError, ValueError):
            raise CorruptRecordError("malformed record", log=log, offset=base_offset + i) from None
        try:
            out.append(rt.decode(key, value))
        except Exception as e:
            raise CorruptRecordError(f"corrupt {rt.name} record: {e}", log=log, offset=base_offset + i) from None
    return out


def decode_records(payload: bytes, base_offset: int, log: str | None = None) -> list[Record]:
    try:
        entries = unpack(payload)
    except Exception as e:  # msgpack raises several unrelated types for bad bytes
        raise CorruptRecordError(f"undecodable batch: {e}", log=log, offset=base_offset) from None
    return decode_entries(entries, base_offset, log)


def as_dict(value: Any) -> Any:
    """A record key or value as plain Python data (for reports, Spark rows and digests)."""
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return {f: as_dict(getattr(value, f)) for f in value._fields}
    if isinstance(value, (list, tuple)):
        return [as_dict(v) for v in value]
    if isinstance(value, dict):
        return {k: as_dict(v) for k, v in value.items()}
    return value


