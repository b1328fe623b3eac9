"""One topic partition's log, as its leader sees it: append, fetch, list offsets, retention.

The high watermark is the durable offset: a record is visible to consumers, and its produce
is acknowledged, only once the flush policy has made it durable. Group commit (many
appends, one flush) is the owner's choice of when to call `flush`.
"""
from __future__ import annotations

from ..errors import Errors, KafkaError
from ..log import ATTR_TRANSACTIONAL, FileLog, LogConfig, OsIO
from ..messages.topics import (EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP, FetchedBatch, FetchResponse,
                               ListOffsetsResponse, ProduceRequest)
from .data import decode_entries, validate_payload

# Kafka's topic-level defaults.
DEFAULTS = {
    "retention.ms": 604800000,
    "retention.bytes": -1,
    "segment.bytes": 1073741824,
    "max.message.bytes": 1048588,
}


class PartitionLog:
    def __init__(self, directory: str, topic: str, partition: int, configs: dict | None = None, *,
                 fsync: bool = True, io: OsIO | None = None) -> None:
        self.topic = topic
        self.partition = partition
        self.configs = {**DEFAULTS, **(configs or {})}
        self.log = FileLog(directory, LogConfig(int(self.configs["segment.bytes"]), fsync), io=io,
                           name=f"{topic}-{partition}")

    @property
    def high_watermark(self) -> int:
        return self.log.durable_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.end_offset

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    # ------------------------------------------------------------------ produce

    def append(self, request: ProduceRequest, now_ms: int) -> int:
        """Validate and append one produced batch; durable only after `flush`."""
        limit = int(self.configs["max.message.bytes"])
        if len(request.records) > limit:
            raise KafkaError(Errors.MESSAGE_TOO_LARGE,
                             f"the batch is {len(request.records)} bytes, over max.message.bytes={limit}")
        if request.record_count <= 0:
            raise KafkaError(Errors.INVALID_RECORD, "a produce request carries at least one record")
        max_ts = validate_payload(request.records, request.record_count)
        return self.log.append(request.records, request.record_count, max_ts,
                               attributes=ATTR_TRANSACTIONAL if request.is_transactional else 0,
                               producer_id=request.producer_id, producer_epoch=request.producer_epoch,
                               base_sequence=request.base_sequence)

    def flush(self) -> None:
        self.log.flush()

    # ------------------------------------------------------------------ fetch

    def check_fetch_offset(self, fetch_offset: int) -> None:
        if fetch_offset < self.log_start_offset or fetch_offset > self.log_end_offset:
            raise KafkaError(Errors.OFFSET_OUT_OF_RANGE,
                             f"offset {fetch_offset} is outside [{self.log_start_offset}, {self.log_end_offset}]")

    def fetch(self, fetch_offset: int, max_bytes: int, max_records: int | None = None,
              upto: int | None = None) -> FetchResponse:
        """Whole batches from the one holding fetch_offset, up to the high watermark (or
        ``upto``), at most max_bytes of records (but always the first batch)."""
        self.check_fetch_offset(fetch_offset)
        hw = self.high_watermark
        out, records = [], 0
        for b in self.log.read(fetch_offset, min(hw, upto) if upto is not None else hw, max_bytes):
            out.append(FetchedBatch(b.base_offset, b.last_offset, b.payload, b.producer_id,
                                    b.is_transactional, b.is_control))
            records += b.last_offset - max(b.base_offset, fetch_offset) + 1
            if max_records is not None and records >= max_records:
                break
        return FetchResponse(self.topic, self.partition, 0, hw, hw, self.log_start_offset, tuple(out))

    # ------------------------------------------------------------------ list offsets

    def list_offsets(self, timestamp: int) -> ListOffsetsResponse:
        if timestamp == EARLIEST_TIMESTAMP:
            return ListOffsetsResponse(self.topic, self.partition, 0, -1, self.log_start_offset)
        if timestamp == LATEST_TIMESTAMP:
            return ListOffsetsResponse(self.topic, self.partition, 0, -1, self.high_watermark)
        if timestamp == MAX_TIMESTAMP:
            best = (-1, -1)
            for record in self._records():
                if record.timestamp > best[0]:
                    best = (record.timestamp, record.offset)
            return ListOffsetsResponse(self.topic, self.partition, 0, best[0], best[1])
        if timestamp < 0:
            raise KafkaError(Errors.INVALID_REQUEST, f"unknown special timestamp {timestamp}")
        for seg in self.log.manifest.segments:
            if seg.end_offset is not None and seg.max_timestamp < timestamp:
                continue
            for record in self._records(seg.base_offset, seg.end_offset):
                if record.timestamp >= timestamp:
                    return ListOffsetsResponse(self.topic, self.partition, 0, record.timestamp, record.offset)
        return ListOffsetsResponse(self.topic, self.partition, 0, -1, -1)

    def _records(self, start: int | None = None, end: int | None = None):
        start = self.log_start_offset if start is None else start
        end = self.high_watermark if end is None else min(end, self.high_watermark)
        if start >= end:
            return
        for b in self.log.read(start, end):
            if b.is_control:
                continue
            for r in decode_entries(b.payload, b.base_offset):
                if start <= r.offset < end:
                    yield r

    # ------------------------------------------------------------------ retention

    def apply_retention(self, now_ms: int) -> list[str]:
        """Delete whole closed segments past retention.ms (by their newest timestamp) or
        beyond retention.bytes (oldest first). Returns the deleted files."""
        retention_ms = int(self.configs["retention.ms"])
        retention_bytes = int(self.configs["retention.bytes"])
        segments = self.log.manifest.segments
        total = sum(s.size for s in segments)
        doomed = []
        for seg in segments[:-1]:  # never the active segment
            expired = retention_ms >= 0 and now_ms - seg.max_timestamp > retention_ms
            oversized = retention_bytes >= 0 and total - seg.size >= retention_bytes
            if not (expired or oversized):
                break
            doomed.append(seg.file)
            total -= seg.size
        if doomed:
            self.log.delete_segments(doomed)
        return doomed

    def close(self) -> None:
        self.log.close()
