"""The leader of one topic partition, one of the many a partition host carries
(actors/server/partition_host.py): produce, fetch, list offsets, retention, transaction
markers. Not an actor: its host's event loop runs it, and keeps each partition's operations
in the order they arrive.

Produce appends at once and acknowledges after the flush that makes the batch durable; the
host flushes every partition appended to in a turn of its loop together (group commit
across partitions and producers). A retried batch of an idempotent producer is acknowledged
with its original offsets, after the same flush, so never before the original is durable.

A disk error takes the log offline (runtime.log): an append the log did not make durable
fails, with KAFKA_STORAGE_ERROR, once the log has cut it off its file (until then its answer
waits, so that no produce answered with an error is found later), and an append that was
made durable before the error (a segment roll flushes first, then may fail) is answered as
written. Requests get KAFKA_STORAGE_ERROR until the log has been reopened and checked; the
leader reopens it at once and then every OPEN_RETRY_S, as it retries a log that failed to
open. Only this partition goes offline: its host's other partitions go on.

A transactional batch that opens its producer's transaction on this partition is first
verified with the transaction coordinator (a verify-only AddPartitionsToTxn, KIP-890 part 1,
Kafka's AddPartitionsToTxnManager), so that a batch the coordinator does not know about
cannot open a hanging transaction. The later batches of that transaction continue it and
make no call; batches verifying at the same time share one call.
"""
from __future__ import annotations

import asyncio
import logging
import os
import shutil
import time
from typing import Callable

from runtime.errors import CorruptRecordError, Errors, KafkaError
from runtime.log import LogWriteError
from runtime.log_sync import SyncPoint
from runtime.messages.errors import error_response
from runtime.messages.topics import (DeleteRecordsRequest, DeleteRecordsResponse, FetchRequest, FetchResponse,
                                     ListOffsetsRequest, ListOffsetsResponse, ProduceRequest, ProduceResponse)
from runtime.messages.txn import (AddPartitionsToTxnRequest, AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
                                  WritableTxnMarker)
from runtime.topics.internal import log_name
from runtime.topics.partition import PartitionLog

from .. import naming
from ..errors import to_kafka_error
from ..retry import ActorDirectory
from .shard_host import _truthy, log_io, now_ms

log = logging.getLogger(__name__)

# How long a batch that arrived ahead of its predecessor (OUT_OF_ORDER_SEQUENCE_NUMBER) waits
# for it before the error is returned.
REORDER_WAIT_S = 0.2
# How often a log that failed to open, or went offline, is tried again.
OPEN_RETRY_S = 1.0


class PartitionLeader:
    """`directory` reaches the transaction coordinators; `wants_flush(leader)` asks the host
    for a flush of this leader's appends; `on_data()` tells the host's fetch waiters that a
    high watermark moved; `room_to_open()` is None when the host has the file descriptors
    for one more log, or why not."""

    def __init__(self, data_dir: str, topic: str, partition: int, topic_id: str, topic_configs: dict, config: dict,
                 directory: ActorDirectory, wants_flush: Callable[["PartitionLeader"], None],
                 on_data: Callable[[], None], room_to_open: Callable[[], str | None]) -> None:
        self.topic = topic
        self.partition = partition
        self.topic_id = topic_id
        self._dir = os.path.join(data_dir, log_name(topic, partition))
        self._topic_configs = dict(topic_configs)
        self._config = dict(config)
        self._plog: PartitionLog | None = None
        self._open_error: str | None = None
        self._retry_open_at = 0.0
        self._deleted = False
        # Appended, waiting for the flush: (the log's end offset after the append, its answer).
        self._waiters: list[tuple[int, asyncio.Future]] = []
        # Appends whose flush failed, answered once the offline log has cut them off.
        self._unsettled: list[asyncio.Future] = []
        self._appended = asyncio.Event()  # set when a batch is appended
        self._recovery: asyncio.Task | None = None
        # Producer id -> (verification guard, its coordinator call): at most one per producer.
        self._verifications: dict[int, tuple[object, asyncio.Future]] = {}
        self._actors = directory
        self._wants_flush = wants_flush
        self._on_data = on_data
        self._room_to_open = room_to_open
        self.written_at = time.monotonic()  # the last append: an idle log parks its active segment

    def open(self) -> None:
        """Open the log (a restarted host opens its partitions' logs on threads, in
        parallel: nothing else touches this leader until it is open); a failure is kept and
        answered as KAFKA_STORAGE_ERROR, and opening is tried again by the next request."""
        try:
            self._ensure_open()
        except KafkaError:
            pass

    def _ensure_open(self) -> PartitionLog:
        """The log, opened (or reopened after it went offline) if need be; raises
        KAFKA_STORAGE_ERROR while it cannot be, and tries again after OPEN_RETRY_S."""
        plog = self._plog
        if plog is not None and not plog.offline:
            return plog
        if self._deleted or time.monotonic() < self._retry_open_at:
            raise KafkaError(Errors.KAFKA_STORAGE_ERROR, self._open_error)
        if plog is None:
            refused = self._room_to_open()
            if refused is not None:
                self._open_error = f"{self.topic}-{self.partition} not opened: {refused}"
                self._retry_open_at = time.monotonic() + OPEN_RETRY_S
                raise KafkaError(Errors.KAFKA_STORAGE_ERROR, self._open_error)
        try:
            if plog is None:
                self._plog = PartitionLog(self._dir, self.topic, self.partition, self._topic_configs,
                                          fsync=_truthy(self._config.get("log.flush.fsync", True)),
                                          topic_id=self.topic_id, **log_io(self._config, f"{self.topic}-{self.partition}"))
            else:
                plog.reopen()
        except Exception as e:
            self._open_error = f"cannot open {self._dir}: {e}"
            self._retry_open_at = time.monotonic() + OPEN_RETRY_S
            log.exception("%s", self._open_error)
            self._settle()
            raise KafkaError(Errors.KAFKA_STORAGE_ERROR, self._open_error) from e
        self._open_error = None
        for line in self._plog.log.recovered:
            log.warning("%s-%d: %s", self.topic, self.partition, line)
        self._settle()
        return self._plog

    def _log_failed(self, error: LogWriteError) -> None:
        """An append or flush failed. If the log went offline, the appends waiting for a
        flush that it did not make durable can no longer become so: they fail once the log
        has cut them off, and the log is reopened. Those it made durable before the failure
        (a roll flushes, then opens the next segment) are answered as written."""
        if self._plog is None or not self._plog.offline:
            return  # one append failed and was cut back; the log goes on
        log.error("%s-%d: the log is offline: %s", self.topic, self.partition, error)
        self._open_error = str(error)
        self._answer_durable(self._plog.high_watermark)
        self._unsettled.extend(w for _, w in self._waiters)
        self._waiters = []
        self._settle()
        if self._recovery is None or self._recovery.done():
            self._recovery = asyncio.get_running_loop().create_task(self._recover())

    def _answer_durable(self, durable: int) -> None:
        """Answer the waiters whose appends are below `durable` (the log's durable offset)."""
        done = [w for end, w in self._waiters if end <= durable]
        if not done:
            return
        self._waiters = [(end, w) for end, w in self._waiters if end > durable]
        for w in done:
            if not w.done():
                w.set_result(None)
        self._on_data()

    def _settle(self) -> None:
        if self._unsettled and (self._plog is None or not self._plog.unsettled):
            unsettled, self._unsettled = self._unsettled, []
            for w in unsettled:
                if not w.done():
                    w.set_result(self._open_error or "the log went offline")

    async def _recover(self) -> None:
        while self._plog is not None and self._plog.offline and not self._deleted:
            try:
                self._ensure_open()
            except KafkaError:
                await asyncio.sleep(max(self._retry_open_at - time.monotonic(), 0.0))

    async def status(self) -> dict:
        p = self._plog
        state = "offline" if p is not None and p.offline else "active" if p else "initial"
        return {"name": f"{self.topic}-{self.partition}", "state": state, "error": self._open_error,
                "log_start_offset": p.log_start_offset if p else None,
                "high_watermark": p.high_watermark if p else None, "size": p.size if p else None}

    # ------------------------------------------------------------------ produce

    async def produce(self, request: ProduceRequest) -> ProduceResponse:
        give_up = time.monotonic() + REORDER_WAIT_S
        while True:
            try:
                plog = self._ensure_open()
                guard = await self._verified(plog, request)
                base = plog.append(request, now_ms(), guard)
                break
            except KafkaError as e:
                # Ray may start an idempotent producer's calls out of order: a batch that
                # arrives before its predecessor waits a little for it.
                remaining = give_up - time.monotonic()
                if e.error is not Errors.OUT_OF_ORDER_SEQUENCE_NUMBER or remaining <= 0:
                    return error_response(request, e)
                appended = self._appended
                try:
                    await asyncio.wait_for(appended.wait(), remaining)
                except asyncio.TimeoutError:
                    pass
            except LogWriteError as e:
                # This batch's own bytes are not in the log (a failed write leaves at most a
                # torn tail): it can be answered now. Those before it wait for the cut, or
                # are answered as written if the log made them durable before it failed.
                self._log_failed(e)
                return error_response(request, KafkaError(Errors.KAFKA_STORAGE_ERROR, str(e)))
        self._appended.set()
        self._appended = asyncio.Event()
        self.written_at = time.monotonic()
        error = await self.flushed()
        if error is not None:
            return error_response(request, KafkaError(Errors.KAFKA_STORAGE_ERROR, error))
        return ProduceResponse(self.topic, self.partition, 0, base, -1, plog.log_start_offset)

    async def _verified(self, plog: PartitionLog, request: ProduceRequest) -> object | None:
        """The guard of a successful verification for a batch that needs one (None if it does
        not); raises the KafkaError the producer is answered with otherwise."""
        guard = plog.verification_guard(request)
        if guard is None:
            self._verifications.pop(request.producer_id, None)
            return None
        known = self._verifications.get(request.producer_id)
        failed = known is not None and known[1].done() and (known[1].cancelled() or known[1].exception() is not None)
        if known is None or known[0] is not guard or failed:
            known = (guard, asyncio.ensure_future(self._verify(request)))
            self._verifications[request.producer_id] = known
        await asyncio.shield(known[1])
        return guard

    async def _verify(self, request: ProduceRequest) -> None:
        """Ask the producer's transaction coordinator whether this partition is in its
        transaction, with Kafka's mapping of the answer for the producer: PRODUCER_FENCED
        becomes INVALID_PRODUCER_EPOCH, and TRANSACTION_ABORTABLE becomes INVALID_TXN_STATE
        for a client older than transaction version 2."""
        if not request.transactional_id:
            raise KafkaError(Errors.INVALID_REQUEST, "a transactional batch needs its transactional id")
        name = naming.find_coordinator(naming.CoordinatorType.TRANSACTION, request.transactional_id, self._config)
        ask = AddPartitionsToTxnRequest((AddPartitionsToTxnTransaction(
            request.transactional_id, request.producer_id, request.producer_epoch, True,
            (AddPartitionsToTxnTopic(self.topic, (self.partition,)),)),))
        try:
            response = await self._actors.send(name, "add_partitions_to_txn", ask,
                                                    timeout_s=int(self._config.get("request.timeout.ms", 30000)) / 1000)
        except KafkaError:
            raise
        except Exception as e:
            why = "timed out" if isinstance(e, asyncio.TimeoutError) else to_kafka_error(e).message
            raise KafkaError(Errors.COORDINATOR_NOT_AVAILABLE, f"verifying with {name}: {why}") from None
        codes = [p.partition_error_code for r in response.results_by_transaction for t in r.topic_results
                 for p in t.results_by_partition]
        error = Errors.for_code(response.error_code or next((c for c in codes if c), 0))
        if error is Errors.PRODUCER_FENCED:
            error = Errors.INVALID_PRODUCER_EPOCH
        elif error is Errors.TRANSACTION_ABORTABLE and request.transaction_version < 2:
            error = Errors.INVALID_TXN_STATE
        if error is not Errors.NONE:
            raise KafkaError(error, f"{self.topic}-{self.partition} is not in the transaction of "
                                    f"{request.transactional_id}: {error.name}")

    def flushed(self) -> asyncio.Future:
        """The flush of everything appended so far: its error, or None. Asked right after
        the append, in the same turn of the loop, so that the waiter names that append."""
        future = asyncio.get_running_loop().create_future()
        self._waiters.append((self._plog.log_end_offset, future))
        if len(self._waiters) == 1:
            self._wants_flush(self)
        return future

    def append_txn_marker(self, marker: WritableTxnMarker) -> int:
        """Append a commit or abort marker (durable with the next flush); its error code."""
        try:
            self._ensure_open().append_control_marker(
                marker.producer_id, marker.producer_epoch, marker.transaction_result,
                marker.coordinator_epoch, now_ms(), marker.transaction_version)
        except KafkaError as e:
            return e.code
        except LogWriteError as e:
            self._log_failed(e)
            return Errors.KAFKA_STORAGE_ERROR.code
        self.written_at = time.monotonic()
        return Errors.NONE.code

    def begin_flush(self) -> SyncPoint | None:
        """The first half of a flush of the waiting appends (the host runs the fsync off
        its loop, for many partitions at once): its sync point, or None when there is
        nothing to fsync (those durable already are answered now) or the log failed."""
        if not self._waiters or self._plog is None:
            return None
        try:
            point = self._plog.sync_point()
        except LogWriteError as e:
            self._log_failed(e)
            return None
        if point is None:
            self._answer_durable(self._plog.high_watermark)
        return point

    def end_flush(self, point: SyncPoint) -> None:
        """The fsync of `point` is over: answer what it made durable, and ask for another
        flush for what was appended meanwhile."""
        if self._plog is None:
            return  # deleted meanwhile: its waiters were answered
        try:
            self._plog.synced(point)
        except LogWriteError as e:
            self._log_failed(e)
            return
        self._answer_durable(self._plog.high_watermark)
        if self._waiters:
            self._wants_flush(self)

    # ------------------------------------------------------------------ fetch

    def read(self, request: FetchRequest, max_bytes: int | None = None, min_one: bool = True) -> FetchResponse:
        """What the log holds for the fetch now, without waiting: at most `max_bytes` (the
        request's partition max bytes by default), the first batch whole unless `min_one` is
        false."""
        try:
            return self._ensure_open().fetch(request.fetch_offset,
                                             request.partition_max_bytes if max_bytes is None else max_bytes,
                                             request.max_records, request.isolation_level, min_one)
        except KafkaError as e:
            error = e
        except CorruptRecordError as e:  # a closed segment's batch fails its check: as Kafka answers it
            error = KafkaError(Errors.CORRUPT_MESSAGE, str(e))
        except OSError as e:  # out of descriptors, or the disk: this read only, the log stays as it is
            error = KafkaError(Errors.KAFKA_STORAGE_ERROR, f"reading {self.topic}-{self.partition}: {e}")
        p = self._plog
        return FetchResponse(self.topic, self.partition, error.code,
                             p.high_watermark if p else -1, p.high_watermark if p else -1,
                             p.log_start_offset if p else -1, error_message=error.message)

    @property
    def parked(self) -> bool:
        return self._plog is not None and self._plog.log.parked

    def park(self, idle_before: float) -> bool:
        """Close the active segment's file if nothing was written since `idle_before` (a
        monotonic time) and nothing waits for a flush; whether it did."""
        p = self._plog
        return p is not None and not self._waiters and self.written_at < idle_before and p.log.park()

    async def list_offsets(self, request: ListOffsetsRequest) -> ListOffsetsResponse:
        try:
            return self._ensure_open().list_offsets(request.timestamp, request.isolation_level)
        except KafkaError as e:
            return error_response(request, e)

    async def delete_records(self, request: DeleteRecordsRequest) -> DeleteRecordsResponse:
        """Kafka's DeleteRecords: answered once the new log start offset is durable."""
        try:
            low = self._ensure_open().delete_records(request.offset)
        except KafkaError as e:
            return error_response(request, e)
        except LogWriteError as e:
            self._log_failed(e)
            return error_response(request, KafkaError(Errors.KAFKA_STORAGE_ERROR, str(e)))
        return DeleteRecordsResponse(self.topic, self.partition, 0, low)

    # ------------------------------------------------------------------ retention and lifecycle

    async def apply_retention(self) -> list[str]:
        try:
            deleted = self._ensure_open().apply_retention(now_ms())
        except Exception as e:
            log.exception("%s-%d: retention failed", self.topic, self.partition)
            if isinstance(e, LogWriteError):
                self._log_failed(e)
            return []
        if deleted:
            log.info("%s-%d: retention deleted %s", self.topic, self.partition, deleted)
        return deleted

    def alter_configs(self, topic_configs: dict) -> None:
        """The topic's configs after the controller changed them."""
        self._topic_configs = dict(topic_configs)
        if self._plog is not None:
            self._plog.set_configs(self._topic_configs)

    def delete_data(self) -> None:
        """The topic was deleted: close the log and remove its folder."""
        self._deleted = True
        self._open_error = "the topic was deleted"
        if self._plog is not None:
            self._plog.close()
            self._plog = None
        self._unsettled.extend(w for _, w in self._waiters)
        self._waiters = []
        self._settle()
        shutil.rmtree(self._dir, ignore_errors=True)
