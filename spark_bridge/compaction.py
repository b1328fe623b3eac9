"""Compaction of a coordinator's state log by a Spark job: Kafka's log cleaner.

Only closed segments are compacted, always the whole closed run from the start of the log,
so that nothing older than a surviving record (or a dropped tombstone) stays behind:

* a "latest" record type keeps its newest record per key;
* a "delta" type (ShareUpdate) keeps every record after the newest record of its snapshot
  type (ShareSnapshot) with the same key fields, and the snapshot keeps only that newest one;
* a tombstone is kept for ``delete.retention.ms`` after its batch's timestamp, then dropped
  (everything it deleted is gone by then, so replaying the log gives the same state);
* the survivors keep their offsets and their order. They are written as ATTR_COMPACTED
  batches (a new batch wherever the original batch timestamp changes, so that retention
  stays exact) into ``<base>-<end>.compacted.log``: a temporary file, fsynced, renamed, and
  swapped into the manifest in place of the segments it replaces.

The whole job runs under the log's compaction lock; the live writer never takes it and
keeps appending to its active segment meanwhile. Nothing the live log uses changes before
the manifest swap, so a job killed at any point leaves the log as it was; the next run
removes its leftovers (a temporary file, or a compacted file the manifest never listed).
"""
from __future__ import annotations

import enum
import hashlib
import json
import os
import time
from dataclasses import dataclass, fields, is_dataclass
from typing import Any, Callable

import msgpack

from runtime import codec
from runtime.coordinator import CoordinatorContext, CoordinatorRuntime, LoadProgress
from runtime.log import ATTR_COMPACTED, FileLog, LogConfig, SegmentInfo, compacted_file_name, encode_batch
from runtime.log_compaction import compaction_lock, swap_segments
from runtime.timer import CoordinatorTimer

from .loader import (CorruptSegmentError, find_logs, import_record_modules, manifest_of, raise_corrupt_segment,
                     record_modules, segment_records, segment_rows, segments_frame)

DEFAULT_DELETE_RETENTION_MS = 86_400_000  # Kafka's delete.retention.ms
MAX_BATCH_BYTES = 1 << 20
COMPACT_SCHEMA = ("offset long, batch_timestamp long, type_id int, group_type int, group_key binary, "
                  "entry binary, tombstone boolean")
WRITTEN_SCHEMA = "file string, size long, max_timestamp long, records long, batches long, tombstones long"
_TMP_SUFFIX = ".tmp"

Progress = Callable[[str, str], None]  # (log name, stage)


@dataclass(frozen=True)
class CompactionResult:
    log: str
    status: str  # "compacted" or "nothing to do"
    reason: str = ""
    segments_in: int = 0
    records_in: int = 0
    records_out: int = 0
    tombstones_out: int = 0  # tombstones still inside their delete.retention.ms
    bytes_in: int = 0
    bytes_out: int = 0
    seconds: float = 0.0
    file: str = ""

    def __str__(self) -> str:
        if self.status != "compacted":
            return f"{self.log}: nothing to do ({self.reason})"
        return (f"{self.log}: {self.segments_in} segments, {self.records_in} records -> {self.records_out} "
                f"({self.tombstones_out} tombstones kept), {self.bytes_in} -> {self.bytes_out} bytes "
                f"in {self.seconds:.1f}s")


# ---------------------------------------------------------------------- inside Spark tasks

def _count_records(batches):
    """mapInArrow: closed segments in, their record counts out (batches unpacked, records
    not decoded)."""
    import pyarrow as pa
    for tasks in batches:
        for task in tasks.to_pylist():
            count = sum(len(offsets) for _batch, offsets, _entries in segment_records(
                task["path"], task["base_offset"], task["end_offset"], False))
            yield pa.RecordBatch.from_arrays([pa.array([count], pa.int64())], ["records"])


def _compaction_rows(modules: list[str]):
    """mapInArrow: closed segments in; out, one row per record that its own segment does
    not already supersede, with its compaction group (the snapshot type, for a delta type),
    its packed key and its raw entry, ready to be written back. Dropping what a later
    record of the same segment replaces is safe (it is replaced in the whole log too) and
    spares the shuffle most of a busy log."""

    def decode(batches):
        import pyarrow as pa
        import_record_modules(modules)
        packb = msgpack.Packer(use_bin_type=True).pack
        for tasks in batches:
            for task in tasks.to_pylist():
                groups: dict[int, int] = {}
                bases: dict[tuple, tuple] = {}  # (group, key) -> newest record of the group's own type
                deltas: dict[tuple, list] = {}  # (group, key) -> delta records after that one
                for batch, offsets, entries in segment_records(task["path"], task["base_offset"],
                                                               task["end_offset"], False):
                    for offset, entry in zip(offsets, entries):
                        try:
                            type_id, _version, key, value = entry
                            group = groups.get(type_id)
                            if group is None:
                                rt = codec.record_type(type_id)
                                group = groups[type_id] = rt.snapshot_of if rt.compaction == "delta" else type_id
                        except Exception as e:
                            raise CorruptSegmentError(task["path"], offset, f"cannot compact record: {e}") from None
                        row = (offset, batch.timestamp, type_id, group, entry, value is None)
                        group_key = (group, packb(key))
                        if type_id == group:
                            bases[group_key] = row
                            deltas.pop(group_key, None)
                        else:
                            deltas.setdefault(group_key, []).append(row)
                cols: list[list] = [[] for _ in range(7)]
                for (_, key), row in [*bases.items(), *((k, r) for k, rs in deltas.items() for r in rs)]:
                    offset, ts, type_id, group, entry, tombstone = row
                    for col, v in zip(cols, (offset, ts, type_id, group, key, packb(entry), tombstone)):
                        col.append(v)
                yield pa.RecordBatch.from_arrays(
                    [pa.array(cols[0], pa.int64()), pa.array(cols[1], pa.int64()), pa.array(cols[2], pa.int32()),
                     pa.array(cols[3], pa.int32()), pa.array(cols[4], pa.binary()), pa.array(cols[5], pa.binary()),
                     pa.array(cols[6], pa.bool_())],
                    names=["offset", "batch_timestamp", "type_id", "group_type", "group_key", "entry", "tombstone"])

    return decode


class SegmentWriter:
    """Writes survivors, in offset order, as ATTR_COMPACTED batches into a temporary file;
    `finish` fsyncs it and renames it to its final name."""

    def __init__(self, directory: str, base_offset: int, end_offset: int) -> None:
        self.file = compacted_file_name(base_offset, end_offset)
        self.path = os.path.join(directory, self.file)
        self._out = open(self.path + _TMP_SUFFIX, "wb")
        self._pending: list[bytes] = []
        self._offsets: list[int] = []
        self._pending_bytes = 0
        self._timestamp: int | None = None
        self.size = self.records = self.batches = self.tombstones = 0
        self.max_timestamp = -1

    def add(self, offset: int, timestamp: int, entry: bytes, tombstone: bool) -> None:
        if self._pending and (timestamp != self._timestamp or self._pending_bytes + len(entry) > MAX_BATCH_BYTES):
            self._flush_batch()
        self._timestamp = timestamp
        self._offsets.append(offset)
        self._pending.append(entry)
        self._pending_bytes += len(entry)
        self.records += 1
        self.tombstones += tombstone
        self.max_timestamp = max(self.max_timestamp, timestamp)

    def _flush_batch(self) -> None:
        base = self._offsets[0]
        deltas = [o - base for o in self._offsets]
        # The payload is msgpack [offset_deltas, entries] (log_compaction.encode_compacted_payload);
        # the entries are already packed, so the array is framed around them as they are.
        payload = (b"\x92" + msgpack.packb(deltas) + _array_header(len(self._pending)) + b"".join(self._pending))
        data = encode_batch(base, payload, deltas[-1] + 1, self._timestamp, ATTR_COMPACTED)
        self._out.write(data)
        self.size += len(data)
        self.batches += 1
        self._pending, self._offsets, self._pending_bytes = [], [], 0

    def finish(self) -> dict:
        if self._pending:
            self._flush_batch()
        self._out.flush()
        os.fsync(self._out.fileno())
        self._out.close()
        os.replace(self.path + _TMP_SUFFIX, self.path)
        fd = os.open(os.path.dirname(self.path), os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        return {"file": self.file, "size": self.size, "max_timestamp": self.max_timestamp, "records": self.records,
                "batches": self.batches, "tombstones": self.tombstones}


def _array_header(n: int) -> bytes:
    return msgpack.Packer().pack_array_header(n)


def _write_survivors(directory: str, base_offset: int, end_offset: int):
    """mapInArrow over the single, offset-sorted partition of survivors."""

    def write(batches):
        import pyarrow as pa
        writer = SegmentWriter(directory, base_offset, end_offset)
        for b in batches:
            for offset, ts, entry, tomb in zip(*(b.column(n).to_pylist() for n in
                                                 ("offset", "batch_timestamp", "entry", "tombstone"))):
                writer.add(offset, ts, entry, tomb)
        written = writer.finish()
        yield pa.RecordBatch.from_pylist([written])

    return write


# ---------------------------------------------------------------------- the driver

def survivors(records, now_ms: int, delete_retention_ms: int):
    """The records that compaction keeps (see the module docstring), from COMPACT_SCHEMA rows."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    group = Window.partitionBy("group_type", "group_key")
    newest_base = F.max(F.when(F.col("type_id") == F.col("group_type"), F.col("offset"))).over(group)
    records = records.withColumn("newest_base", newest_base)
    is_base = F.col("type_id") == F.col("group_type")
    keep = ((is_base & (F.col("offset") == F.col("newest_base")))
            | (~is_base & (F.col("newest_base").isNull() | (F.col("offset") > F.col("newest_base")))))
    expired = F.col("tombstone") & (F.col("batch_timestamp") + F.lit(delete_retention_ms) <= F.lit(now_ms))
    return records.where(keep & ~expired).select("offset", "batch_timestamp", "entry", "tombstone")


def _remove_leftovers(directory: str, live: set[str]) -> None:
    """Files of an earlier compaction that was killed before its swap."""
    for name in os.listdir(directory):
        if name.endswith(".compacted.log" + _TMP_SUFFIX) or (name.endswith(".compacted.log") and name not in live):
            os.unlink(os.path.join(directory, name))


def compact_log(spark, directory: str, *, now_ms: int | None = None,
                delete_retention_ms: int = DEFAULT_DELETE_RETENTION_MS,
                progress: Progress | None = None) -> CompactionResult:
    """Compact the closed segments of one coordinator state log. Raises CompactionInProgress
    if another compaction holds the log, CorruptSegmentError (naming the file and offset)
    if a closed segment does not decode; in both cases the log is unchanged."""
    directory = os.path.abspath(directory)
    logs = find_logs(directory)
    if len(logs) != 1 or logs[0].directory != directory:
        raise FileNotFoundError(f"{directory} is not a log folder")
    log = logs[0]
    if not log.internal:
        raise ValueError(f"{log.name} holds topic data, not coordinator records: only state logs are compacted")
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    report = progress or (lambda _log, _stage: None)
    started = time.monotonic()
    with compaction_lock(directory):
        manifest = manifest_of(directory)
        closed = [s for s in manifest.segments if s.end_offset is not None]
        if not closed:
            return CompactionResult(log.name, "nothing to do", "no closed segments")
        if len(closed) == 1 and closed[0].file.endswith(".compacted.log"):
            # Its replacement would have its very name. Tombstones in it that expire later
            # go with the next compaction, once another segment has closed.
            return CompactionResult(log.name, "nothing to do", "the closed segments are compacted already")
        _remove_leftovers(directory, {s.file for s in manifest.segments})
        report(log.name, f"compacting {len(closed)} closed segments")
        rows = segment_rows([log], closed_only=True)
        # Counted by a job of its own: accumulator updates from Arrow UDFs were seen lost
        # when many Spark jobs ran in one session.
        try:
            records_in = segments_frame(spark, rows).mapInArrow(_count_records, "records long").agg(
                {"records": "sum"}).collect()[0][0] or 0
        except Exception as e:
            raise_corrupt_segment(e)
            raise
        compacted = segments_frame(spark, rows).mapInArrow(_compaction_rows(record_modules()), COMPACT_SCHEMA)
        kept = survivors(compacted, now_ms, delete_retention_ms).repartition(1).sortWithinPartitions("offset")
        base, end = closed[0].base_offset, closed[-1].end_offset
        try:
            written = kept.mapInArrow(_write_survivors(directory, base, end), WRITTEN_SCHEMA).collect()
        except Exception as e:
            raise_corrupt_segment(e)
            raise
        if written:
            out = written[0].asDict()
        else:  # no partition at all: every record was dropped
            out = SegmentWriter(directory, base, end).finish()
        report(log.name, "written")
        replacement = SegmentInfo(out["file"], base, end, out["max_timestamp"], out["size"])
        try:
            swap_segments(directory, [s.file for s in closed], [replacement])
        except BaseException:
            if out["file"] not in {s.file for s in manifest_of(directory).segments}:
                os.unlink(os.path.join(directory, out["file"]))
            raise
        report(log.name, "swapped")
    return CompactionResult(log.name, "compacted", "", len(closed), records_in, out["records"],
                            out["tombstones"], sum(s.size for s in closed), out["size"],
                            time.monotonic() - started, out["file"])


def compact_all(spark, data_dir: str, **kwargs) -> list[CompactionResult]:
    """Compact every coordinator state log under a data directory, one after the other."""
    return [compact_log(spark, log.directory, **kwargs) for log in find_logs(data_dir) if log.internal]


# ---------------------------------------------------------------------- equivalence

def load_shard(directory: str, shard_factory: Callable[[CoordinatorContext], Any], *, config: dict | None = None,
               now_ms: int = 0) -> tuple[Any, LoadProgress, float]:
    """Load a coordinator from a log folder, the way an actor does on restart: returns the
    shard, the load's progress counters and the seconds it took. The folder must not have
    a live writer (the load opens it as its writer)."""
    name = os.path.basename(os.path.normpath(directory))
    runtime = CoordinatorRuntime(name, _partition_of(name), shard_factory,
                                 lambda: FileLog(directory, LogConfig(fsync=False), name=name), config)
    started = time.perf_counter()
    progress = runtime.load_all(now_ms)
    seconds = time.perf_counter() - started
    shard = runtime.shard
    runtime.log.close()
    return shard, progress, seconds


def _partition_of(name: str) -> int:
    head, _, tail = name.rpartition("-")
    return int(tail) if head and tail.isdigit() else 0


def state_digest(shard: Any, exclude: tuple[str, ...] = ()) -> str:
    """A SHA-256 over a shard's state: every attribute reachable from it, dicts and sets
    taken in sorted order (their insertion order depends on the replay history, which
    compaction changes), lists in order. `exclude` names attributes that are not state,
    such as a list of replayed offsets; the context and timers are never state."""
    canonical = _canonical(shard, frozenset(exclude), set())
    return hashlib.sha256(json.dumps(canonical, sort_keys=True, default=repr).encode()).hexdigest()


def state_differences(a: Any, b: Any, exclude: tuple[str, ...] = (), limit: int = 10) -> list[str]:
    """Where two shards' states differ (paths into the state, as `state_digest` sees it),
    to explain a digest mismatch."""
    out: list[str] = []
    _diff(_canonical(a, frozenset(exclude), set()), _canonical(b, frozenset(exclude), set()), "", out, limit)
    return out


def _diff(a: Any, b: Any, where: str, out: list[str], limit: int) -> None:
    if len(out) >= limit or a == b:
        return
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            _diff(a.get(k), b.get(k), f"{where}.{k}" if k.isidentifier() else f"{where}[{k}]", out, limit)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            _diff(x, y, f"{where}[{i}]", out, limit)
    else:
        out.append(f"{where or '.'}: {_text(a)[:100]} != {_text(b)[:100]}")


def _canonical(obj: Any, exclude: frozenset, path: set) -> Any:
    """Plain JSON data: objects become {attribute: value} (plus their class), dicts
    {key as JSON text: value}, sets sorted lists, enums "Class.NAME"."""
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, bytes):
        return "0x" + obj.hex()
    if isinstance(obj, enum.Enum):
        return f"{type(obj).__name__}.{obj.name}"
    if isinstance(obj, (int, float)):
        return obj
    if id(obj) in path:  # a back reference (a manager pointing at its shard)
        return f"<ref {type(obj).__name__}>"
    path = path | {id(obj)}
    if isinstance(obj, dict):
        return {_text(_canonical(k, exclude, path)): _canonical(v, exclude, path) for k, v in obj.items()}
    if isinstance(obj, (set, frozenset)):
        return sorted((_canonical(v, exclude, path) for v in obj), key=_text)
    if isinstance(obj, (list, tuple)):
        return [_canonical(v, exclude, path) for v in obj]
    if isinstance(obj, (CoordinatorContext, CoordinatorTimer)) or callable(obj):
        return None
    state = {k: _canonical(v, exclude, path) for k, v in _attributes(obj).items()
             if k not in exclude and not callable(v)}
    state["__class__"] = type(obj).__name__
    return state


def _attributes(obj: Any) -> dict:
    if is_dataclass(obj):
        return {f.name: getattr(obj, f.name) for f in fields(obj)}
    attrs = dict(getattr(obj, "__dict__", {}))
    for cls in type(obj).__mro__:
        for slot in getattr(cls, "__slots__", ()):
            if hasattr(obj, slot):
                attrs[slot] = getattr(obj, slot)
    return attrs


def _text(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v, default=repr, sort_keys=True)
