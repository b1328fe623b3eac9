"""One topic partition's log, as its leader sees it: append, fetch, list offsets, retention,
idempotence and transaction markers.

The high watermark is the durable offset: a record is visible to consumers, and its produce
is acknowledged, only once the flush policy has made it durable. Group commit (many
appends, one flush) is the owner's choice of when to call `flush`.

The producer state (idempotence, ongoing and aborted transactions) is rebuilt from the
batches' headers when the log opens. It follows the appended log, not the durable one. A
failed flush or roll takes the log offline (runtime.log), which cuts it back to its durable
offset and refuses every append until the owner calls `reopen`; that reads the log again and
rebuilds the producer state from what is really there.

A partition's folder names the topic id it holds (`partition.metadata`, as Kafka's): a folder
left by a deleted topic of the same name (its host was away when the topic was deleted) is
not taken for the new topic's data, but removed as the stray it is.
"""
from __future__ import annotations

import logging
import os
import shutil

from ..errors import Errors, KafkaError, raise_if
from ..log import ATTR_CONTROL, ATTR_TRANSACTIONAL, FileLog, LogConfig, OsIO
from ..logformat import OS_IO
from ..messages.topics import (EARLIEST_LOCAL_TIMESTAMP, EARLIEST_PENDING_UPLOAD_TIMESTAMP, EARLIEST_TIMESTAMP,
                               LATEST_TIERED_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP, READ_COMMITTED,
                               AbortedTransaction, FetchedBatch, FetchResponse, ListOffsetsResponse, ProduceRequest)
from .data import decode_entries, encode_control, stored_payload, validate_payload
from .producer_state import DuplicateBatch, ProducerStateManager
from .internal import log_name

log = logging.getLogger(__name__)
PARTITION_METADATA = "partition.metadata"

# Kafka's topic-level defaults.
DEFAULTS = {
    "retention.ms": 604800000,
    "retention.bytes": -1,
    "segment.bytes": 1073741824,
    "max.message.bytes": 1048588,
    "cleanup.policy": "delete",
    "flush.messages": 9223372036854775807,
    "message.timestamp.type": "CreateTime",
    "compression.type": "producer",
    "flush.ms": 9223372036854775807,
    "delete.retention.ms": 86400000,
}


class PartitionLog:
    def __init__(self, directory: str, topic: str, partition: int, configs: dict | None = None, *,
                 fsync: bool = True, io: OsIO | None = None, topic_id: str | None = None) -> None:
        self.topic = topic
        self.partition = partition
        if topic_id is not None:
            claim_folder(directory, topic_id, io or OS_IO)
        self.set_configs(configs or {})
        self.log = FileLog(directory, LogConfig(int(self.configs["segment.bytes"]), fsync), io=io,
                           name=log_name(topic, partition))
        self.producers = self._load_producers()

    def set_configs(self, configs: dict) -> None:
        """The topic's configs over Kafka's defaults. max.message.bytes and retention
        apply from the next append and retention pass; segment.bytes when the log opens."""
        self.configs = {**DEFAULTS, **configs}

    def _load_producers(self) -> ProducerStateManager:
        return ProducerStateManager.load(self._all_batches())

    def _all_batches(self, chunk_bytes: int = 1 << 23):
        """Every batch in the log, read a chunk at a time so a large log is never all in memory."""
        offset, end = self.log_start_offset, self.log.end_offset
        while offset < end:
            batches = self.log.read(offset, end, chunk_bytes)
            if not batches:
                return
            yield from batches
            offset = batches[-1].next_offset

    @property
    def high_watermark(self) -> int:
        return self.log.durable_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.end_offset

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def size(self) -> int:
        """Bytes of the log's segments (Kafka's UnifiedLog.size), the active one included."""
        return sum(s.size for s in self.log.manifest.segments)

    @property
    def last_stable_offset(self) -> int:
        """read_committed consumers see the log below this offset: the high watermark, or
        the first offset of the oldest transaction still open, or ended by a marker the high
        watermark has not passed, if that is lower."""
        return self.producers.last_stable_offset(self.high_watermark)

    # ------------------------------------------------------------------ produce

    def verification_guard(self, request: ProduceRequest) -> object | None:
        """The guard a transactional batch must verify with before `append` (KIP-890 part 1),
        or None when it needs no verification (not transactional, or it continues the
        producer's ongoing transaction here)."""
        if not request.is_transactional or request.producer_id < 0:
            return None
        return self.producers.verification_guard(request.producer_id, request.producer_epoch, request.base_sequence,
                                                 request.transaction_version >= 2)

    def append(self, request: ProduceRequest, now_ms: int, verification_guard: object | None = None) -> int:
        """Validate and append one produced batch; durable only after `flush`. Returns its
        base offset; a retried batch of an idempotent producer that is already in the log is
        not appended again and gets its original base offset. A transactional batch that opens
        the producer's transaction here carries the guard its verification succeeded with."""
        # First: the producer state of an offline log may hold batches that were cut off.
        self.log.raise_if_offline()
        limit = int(self.configs["max.message.bytes"])
        if len(request.records) > limit:
            raise KafkaError(Errors.MESSAGE_TOO_LARGE,
                             f"the batch is {len(request.records)} bytes, over max.message.bytes={limit}")
        if request.record_count <= 0:
            raise KafkaError(Errors.INVALID_RECORD, "a produce request carries at least one record")
        max_ts = validate_payload(request, "compact" in str(self.configs["cleanup.policy"]).split(","))
        checked = self.producers.validate_append(request.producer_id, request.producer_epoch, request.base_sequence,
                                                 request.record_count, request.is_transactional,
                                                 self.log_end_offset, max_ts, verification_guard)
        if isinstance(checked, DuplicateBatch):
            return checked.first_offset
        base = self.log.append(stored_payload(request.records, self.log_end_offset), request.record_count, max_ts,
                               attributes=ATTR_TRANSACTIONAL if request.is_transactional else 0,
                               producer_id=request.producer_id, producer_epoch=request.producer_epoch,
                               base_sequence=request.base_sequence)
        self.producers.apply(checked)
        return base

    def append_control_marker(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                              now_ms: int, transaction_version: int = 1) -> int:
        """Append a transaction's commit or abort marker; durable only after `flush`.
        Raises INVALID_PRODUCER_EPOCH for a marker older than the producer's epoch (under
        transaction version 2, not newer than it) and TRANSACTION_COORDINATOR_FENCED for one
        from an older coordinator."""
        self.log.raise_if_offline()
        self.producers.validate_control_marker(producer_id, producer_epoch, coordinator_epoch, transaction_version)
        offset = self.log.append(encode_control(commit, coordinator_epoch, now_ms), 1, now_ms,
                                 attributes=ATTR_CONTROL | ATTR_TRANSACTIONAL, producer_id=producer_id,
                                 producer_epoch=producer_epoch)
        self.producers.apply_control_marker(producer_id, producer_epoch, commit, offset, coordinator_epoch, now_ms)
        return offset

    def flush(self) -> None:
        self.log.flush()

    def sync_point(self):
        """See FileLog.sync_point: a flush made on another thread."""
        return self.log.sync_point()

    def synced(self, point) -> None:
        self.log.synced(point)

    @property
    def offline(self) -> str | None:
        return self.log.offline

    @property
    def unsettled(self) -> bool:
        return self.log.unsettled

    def reopen(self) -> None:
        """Bring an offline log back: read and check it again, and rebuild the producer
        state from the batches that are really there."""
        self.log.reopen()
        self.producers = self._load_producers()

    # ------------------------------------------------------------------ fetch

    def check_fetch_offset(self, fetch_offset: int) -> None:
        if fetch_offset < self.log_start_offset or fetch_offset > self.log_end_offset:
            raise KafkaError(Errors.OFFSET_OUT_OF_RANGE,
                             f"offset {fetch_offset} is outside [{self.log_start_offset}, {self.log_end_offset}]")

    def fetch(self, fetch_offset: int, max_bytes: int, max_records: int | None = None,
              isolation_level: int = 0, min_one: bool = True) -> FetchResponse:
        """Whole batches from the one holding fetch_offset, up to the high watermark (the
        last stable offset for read_committed), at most max_bytes of records and no more
        batches than cover max_records offsets (but always the first batch, unless `min_one`
        is false: a Fetch whose other partitions filled its max bytes). A read_committed
        response lists the aborted transactions that overlap the batches, for
        `runtime.topics.isolation.filter_aborted`."""
        self.check_fetch_offset(fetch_offset)
        hw = self.high_watermark
        lso = self.last_stable_offset
        out = [FetchedBatch(b.base_offset, b.last_offset, b.payload, b.producer_id, b.is_transactional, b.is_control)
               for b in self.log.read(fetch_offset, lso if isolation_level == READ_COMMITTED else hw, max_bytes,
                                      max_records, min_one)]
        aborted = ()
        if isolation_level == READ_COMMITTED and out:
            aborted = tuple(AbortedTransaction(a.producer_id, a.first_offset)
                            for a in self.producers.aborted_ranges(fetch_offset, out[-1].last_offset + 1))
        return FetchResponse(self.topic, self.partition, 0, hw, lso, self.log_start_offset, tuple(out), aborted)

    # ------------------------------------------------------------------ list offsets

    def list_offsets(self, timestamp: int, isolation_level: int = 0) -> ListOffsetsResponse:
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            return ListOffsetsResponse(self.topic, self.partition, 0, -1, self.log_start_offset)
        if timestamp in (LATEST_TIERED_TIMESTAMP, EARLIEST_PENDING_UPLOAD_TIMESTAMP):
            return ListOffsetsResponse(self.topic, self.partition, 0, -1, -1)  # no tier: none uploaded, none pending
        if timestamp == LATEST_TIMESTAMP:
            latest = self.last_stable_offset if isolation_level == READ_COMMITTED else self.high_watermark
            return ListOffsetsResponse(self.topic, self.partition, 0, -1, latest)
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
        total = self.size
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
            self.producers.truncate_aborted_before(self.log_start_offset)
        return doomed

    def delete_records(self, offset: int) -> int:
        """Kafka's DeleteRecords: the records before `offset` (-1: the high watermark) are
        gone for every reader, durably; returns the log start offset (the low watermark),
        which never moves back. An offset past the high watermark is OFFSET_OUT_OF_RANGE."""
        self.log.raise_if_offline()
        hw = self.high_watermark
        if offset == -1:
            offset = hw
        raise_if(offset < 0 or offset > hw, Errors.OFFSET_OUT_OF_RANGE,
                 f"cannot delete records before {offset}: the high watermark is {hw}")
        if offset > self.log_start_offset:
            self.log.advance_log_start_offset(offset)
            self.producers.truncate_aborted_before(self.log_start_offset)
        return self.log_start_offset

    def close(self) -> None:
        self.log.close()


def claim_folder(directory: str, topic_id: str, io: OsIO) -> None:
    """Make `directory` the folder of topic `topic_id`'s partition: one that names another
    topic id holds a deleted topic's data, and is removed; one that names none (made before
    folders named their topic) is taken as it is."""
    path = os.path.join(directory, PARTITION_METADATA)
    try:
        with open(path) as f:
            found = dict(line.split(": ", 1) for line in f.read().splitlines() if ": " in line).get("topic_id")
    except FileNotFoundError:
        found = None
    if found == topic_id:
        return
    if found is not None:
        log.warning("%s holds the data of topic id %s, a deleted topic: removed for topic id %s",
                    directory, found, topic_id)
        shutil.rmtree(directory)
    os.makedirs(directory, exist_ok=True)
    tmp = path + ".tmp"
    fd = io.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        io.write(fd, f"version: 0\ntopic_id: {topic_id}\n".encode())
        io.fsync(fd)
    finally:
        os.close(fd)
    io.replace(tmp, path)
    io.fsync_dir(directory)
