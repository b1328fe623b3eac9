"""State logs as Spark DataFrames.

The driver reads only manifests (which segments exist, and which one is active); every
segment is read and decoded by a Spark task with the runtime's own codec. One row per
record: log, partition, offset, batch_timestamp, record_type, key and value (JSON of the
decoded fields; value is null for a tombstone) and tombstone.

Logs whose name starts with ``__`` hold coordinator records. Any other log is a topic
partition's data; `batch_entries` reads its batches in either form runtime.topics.data
stores, and `data_rows` turns the entries into rows.
"""
from __future__ import annotations

import base64
import importlib
import json
import os
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from runtime import codec
from runtime.errors import CorruptRecordError, KafkaError
from runtime.log import ATTR_COMPACTED, ATTR_CONTROL, Batch, read_manifest, rebuild_manifest, scan_batches
from runtime.logformat import log_dirs
from runtime.topics.data import decode_entries, is_kafka_batch
from runtime.topics.metadata import is_internal

RECORDS_SCHEMA = ("log string, partition int, offset long, batch_timestamp long, record_type string, "
                  "key string, value string, tombstone boolean")
SEGMENTS_SCHEMA = ("log string, partition int, path string, base_offset long, end_offset long, active boolean, "
                   "data boolean")
_LOG_NAME = re.compile(r"^(.+)-(\d+)$")


class CorruptSegmentError(Exception):
    """A closed segment does not decode. Names the segment file and the offset where the
    damage starts; nothing was changed."""

    def __init__(self, path: str, offset: int, detail: str) -> None:
        super().__init__(f"corrupt segment {path} at offset {offset}: {detail}")
        self.path = path
        self.offset = offset
        self.detail = detail


_CORRUPT = re.compile(r"corrupt segment (\S+) at offset (-?\d+): ([^\n]*)")


def raise_corrupt_segment(exc: BaseException) -> None:
    """Spark hands a task's exception back as Java/Python exception text: if it was a
    CorruptSegmentError, raise it again as one on the driver."""
    m = _CORRUPT.search(str(exc))
    if m:
        raise CorruptSegmentError(m.group(1), int(m.group(2)), m.group(3).strip()) from None


@dataclass(frozen=True)
class LogInfo:
    name: str  # the folder name, e.g. "__consumer_offsets-3" or "orders-0"
    topic: str
    partition: int
    directory: str

    @property
    def internal(self) -> bool:
        return is_internal(self.topic)


def find_logs(path: str) -> list[LogInfo]:
    """The logs at `path`: the folder itself if it is a log, else every log folder in it."""
    out = []
    for d in log_dirs(path):
        m = _LOG_NAME.match(os.path.basename(d))
        if m:
            out.append(LogInfo(os.path.basename(d), m.group(1), int(m.group(2)), d))
    return out


def manifest_of(directory: str):
    return read_manifest(directory) or rebuild_manifest(directory)


def segment_rows(logs: list[LogInfo], closed_only: bool = False) -> list[tuple]:
    """One row per live segment (SEGMENTS_SCHEMA), from the manifests only."""
    rows = []
    for log in logs:
        segments = manifest_of(log.directory).segments
        for i, seg in enumerate(segments):
            active = i == len(segments) - 1 and seg.end_offset is None
            if closed_only and active:
                continue
            rows.append((log.name, log.partition, os.path.join(log.directory, seg.file), seg.base_offset,
                         seg.end_offset, active, not log.internal))
    return rows


def record_modules() -> list[str]:
    """The modules that registered record types in this process, so that Spark's Python
    workers can register the same ones (record types a test or an application defines
    outside `codec.RECORD_MODULES` included)."""
    return sorted({rt.key_class.__module__ for rt in codec.record_types()} - {"__main__"})


def import_record_modules(modules: list[str]) -> None:
    codec.load_record_types()
    for module in modules:
        importlib.import_module(module)


# ---------------------------------------------------------------------- inside Spark tasks

def segment_batches(path: str, base_offset: int, active: bool) -> list[Batch]:
    """The whole batches of one segment. A closed segment must be whole; the active one may
    end in a torn tail (a write in progress), where reading stops."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise FileNotFoundError(f"segment {path} was replaced while it was being read; run again") from None
    try:
        batches, _ = scan_batches(data, strict=not active, name=path)
    except CorruptRecordError as e:
        raise CorruptSegmentError(path, e.offset if e.offset is not None else base_offset, str(e)) from None
    return batches


def segment_records(path: str, base_offset: int, end_offset: int | None, active: bool
                    ) -> Iterator[tuple[Batch, list[int], tuple]]:
    """(batch, offsets, raw entries) of the segment that held [base_offset, end_offset)
    when the manifest was read. If a compaction has swapped it out since, the same offsets
    are read from what replaced it: a newer, compacted view of that range."""
    try:
        batches = segment_batches(path, base_offset, active)
    except FileNotFoundError:
        yield from _replacement_records(os.path.dirname(path), base_offset, end_offset)
        return
    for batch in batches:
        yield (batch, *batch_entries(batch, path))


def _replacement_records(directory: str, base: int, end: int | None) -> Iterator[tuple[Batch, list[int], tuple]]:
    segments = manifest_of(directory).segments
    for i, seg in enumerate(segments):
        if (end is not None and seg.base_offset >= end) or (seg.end_offset is not None and seg.end_offset <= base):
            continue
        path = os.path.join(directory, seg.file)
        for batch in segment_batches(path, seg.base_offset, i == len(segments) - 1 and seg.end_offset is None):
            offsets, entries = batch_entries(batch, path)
            keep = [j for j, o in enumerate(offsets) if o >= base and (end is None or o < end)]
            if keep:
                yield batch, [offsets[j] for j in keep], tuple(entries[j] for j in keep)


def batch_entries(batch: Batch, path: str) -> tuple[list[int], tuple]:
    """(offsets, raw msgpack entries) of one batch; compacted batches keep their offsets. A
    topic data batch a Kafka client produced (a record batch v2, runtime.topics.data) gives
    the entries a msgpack one would."""
    if is_kafka_batch(batch.payload):
        try:
            records = decode_entries(batch.payload, batch.base_offset)
        except KafkaError as e:
            raise CorruptSegmentError(path, batch.base_offset, f"undecodable batch: {e}") from None
        return [r.offset for r in records], tuple((r.timestamp, r.key, r.value, r.headers) for r in records)
    try:
        payload = codec.unpack(batch.payload)
    except Exception as e:  # msgpack raises several unrelated types for bad bytes
        raise CorruptSegmentError(path, batch.base_offset, f"undecodable batch: {e}") from None
    if batch.attributes & ATTR_COMPACTED:
        deltas, entries = payload
        return [batch.base_offset + d for d in deltas], entries
    return list(range(batch.base_offset, batch.base_offset + len(payload))), payload


def _json_default(v: Any) -> Any:
    if isinstance(v, bytes):
        try:
            return v.decode()
        except UnicodeDecodeError:
            return "base64:" + base64.b64encode(v).decode()
    raise TypeError(f"{type(v).__name__} is not JSON serialisable")


def to_json(value: Any) -> str:
    return json.dumps(codec.as_dict(value), default=_json_default, sort_keys=True)


def data_rows(batch: Batch, offsets: list[int], entries: tuple) -> Iterator[tuple[int, str, str, str | None, bool]]:
    """(offset, record_type, key, value, tombstone) for the entries of a topic data batch:
    ``[timestamp, key, value, headers]`` entries, or a transaction marker in a control batch."""
    if batch.attributes & ATTR_CONTROL:
        for offset, (kind, coordinator_epoch, _ts) in zip(offsets, entries):
            yield offset, "control", to_json({"commit": kind == 1}), to_json(
                {"coordinator_epoch": coordinator_epoch}), False
        return
    for offset, (timestamp, key, value, headers) in zip(offsets, entries):
        yield offset, "data", to_json({"key": key}), to_json(
            {"timestamp": timestamp, "value": value, "headers": [list(h) for h in headers]}), value is None


def record_rows(batch: Batch, offsets: list[int], entries: tuple, path: str
                ) -> Iterator[tuple[int, str, str, str | None, bool]]:
    """(offset, record_type, key, value, tombstone) for the records of a coordinator batch."""
    try:
        records = codec.decode_entries(entries, offsets[0] if offsets else batch.base_offset, path)
    except CorruptRecordError as e:
        raise CorruptSegmentError(path, e.offset if e.offset is not None else batch.base_offset, str(e)) from None
    for offset, r in zip(offsets, records):
        yield offset, r.type.name, to_json(r.key), None if r.value is None else to_json(r.value), r.value is None


def _decode_segments(modules: list[str]) -> Callable:
    """The mapInArrow function: segment rows in, record rows out."""

    def decode(batches):
        import pyarrow as pa
        import_record_modules(modules)
        names = ["log", "partition", "offset", "batch_timestamp", "record_type", "key", "value", "tombstone"]
        for tasks in batches:
            for task in tasks.to_pylist():
                cols: list[list] = [[] for _ in names]
                for batch, offsets, entries in segment_records(task["path"], task["base_offset"],
                                                               task["end_offset"], task["active"]):
                    rows = (data_rows(batch, offsets, entries) if task["data"]
                            else record_rows(batch, offsets, entries, task["path"]))
                    for offset, rtype, key, value, tombstone in rows:
                        for col, v in zip(cols, (task["log"], task["partition"], offset, batch.timestamp,
                                                 rtype, key, value, tombstone)):
                            col.append(v)
                yield pa.RecordBatch.from_arrays([pa.array(c, t) for c, t in zip(cols, _ARROW_TYPES)], names=names)

    return decode


def _arrow_types():
    import pyarrow as pa
    return [pa.string(), pa.int32(), pa.int64(), pa.int64(), pa.string(), pa.string(), pa.string(), pa.bool_()]


_ARROW_TYPES = _arrow_types()


def segments_frame(spark, rows: list[tuple]):
    """A DataFrame of segment rows, one Spark partition per segment."""
    return spark.createDataFrame(rows, SEGMENTS_SCHEMA).repartition(max(1, len(rows)))


def load_logs(spark, path: str):
    """Every record of the log at `path`, or of every log under a data directory, as a
    DataFrame (RECORDS_SCHEMA). Lazy: a corrupt segment fails the action that reads it,
    with a message naming the file and offset (see `raise_corrupt_segment`)."""
    logs = find_logs(path)
    if not logs:
        raise FileNotFoundError(f"no logs under {path}")
    return records_frame(spark, logs)


def records_frame(spark, logs: list[LogInfo]):
    """The records of these logs (RECORDS_SCHEMA); an empty frame for no logs."""
    if not logs:
        return spark.createDataFrame([], RECORDS_SCHEMA)
    return segments_frame(spark, segment_rows(logs)).mapInArrow(_decode_segments(record_modules()), RECORDS_SCHEMA)


def log_end_offset(directory: str) -> int:
    """The offset the next record of this log will get: the end of its active segment."""
    segments = manifest_of(directory).segments
    if not segments:
        return 0
    last = segments[-1]
    if last.end_offset is not None:
        return last.end_offset
    batches = segment_batches(os.path.join(directory, last.file), last.base_offset, active=True)
    return batches[-1].next_offset if batches else last.base_offset
