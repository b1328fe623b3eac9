"""The leader of one topic partition: produce, fetch (long poll), list offsets, retention,
transaction markers.

Produce appends at once and acknowledges after the flush that makes the batch durable; the
flush runs when the loop has processed every request that arrived with it, so concurrent
producers share one fsync (group commit). A retried batch of an idempotent producer is
acknowledged with its original offsets, after the same flush, so never before the original is
durable. Fetch long-polls on the high watermark (the last stable offset for read_committed).

A disk error takes the log offline (runtime.log): every append not yet durable fails, with
KAFKA_STORAGE_ERROR, once the log has cut it off its file (until then its answer waits, so
that no produce answered with an error is found later), and requests get
KAFKA_STORAGE_ERROR until the log has been reopened and checked. The leader reopens it at
once and then every OPEN_RETRY_S, as it retries a log that failed to open.

A transactional batch that opens its producer's transaction on this partition is first
verified with the transaction coordinator (a verify-only AddPartitionsToTxn, KIP-890 part 1,
Kafka's AddPartitionsToTxnManager), so that a batch the coordinator does not know about
cannot open a hanging transaction. The later batches of that transaction continue it and
make no call; batches verifying at the same time share one call.

Ray restarts a leader with the arguments it was created with, whose topic configs may be
older than the controller's (IncrementalAlterConfigs): a restarted leader asks the controller
for them before it serves (and keeps asking, every OPEN_RETRY_S, while it cannot reach it).
"""
from __future__ import annotations

import asyncio
import logging
import os
import shutil
import time

import ray

from runtime.errors import Errors, KafkaError
from runtime.log import LogWriteError
from runtime.messages.errors import error_response
from runtime.messages.topics import (DeleteRecordsRequest, DeleteRecordsResponse, FetchRequest, FetchResponse,
                                     ListOffsetsRequest, ListOffsetsResponse, MetadataRequest, ProduceRequest,
                                     ProduceResponse)
from runtime.messages.txn import (AddPartitionsToTxnRequest, AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
                                  WriteTxnMarkersRequest, WriteTxnMarkersResponse)
from runtime.topics.internal import log_name
from runtime.topics.partition import PartitionLog

from .. import naming
from ..errors import to_kafka_error
from ..placement import current_node, restarted_actor
from ..retry import ActorDirectory
from .coalescing import run_batched
from .shard_host import _truthy, log_io, now_ms

log = logging.getLogger(__name__)

# How long a batch that arrived ahead of its predecessor (OUT_OF_ORDER_SEQUENCE_NUMBER) waits
# for it before the error is returned.
REORDER_WAIT_S = 0.2
# How often a log that failed to open, or went offline, is tried again.
OPEN_RETRY_S = 1.0
# How long a restarted leader's request waits for the controller's configs before it serves
# with those it was created with.
CONFIGS_TIMEOUT_S = 5.0


class PartitionLeaderActor:
    def __init__(self, data_dir: str, topic: str, partition: int, topic_configs: dict, config: dict) -> None:
        self.topic = topic
        self.partition = partition
        self._dir = os.path.join(data_dir, log_name(topic, partition))
        self._topic_configs = dict(topic_configs)
        self._config = dict(config)
        self._plog: PartitionLog | None = None
        self._open_error: str | None = None
        self._retry_open_at = 0.0
        self._deleted = False
        self._waiters: list[asyncio.Future] = []  # appended, waiting for the next flush
        # Appends whose flush failed, answered once the offline log has cut them off.
        self._unsettled: list[asyncio.Future] = []
        self._flush_scheduled = False
        self._data = asyncio.Event()  # set when the high watermark moves
        self._appended = asyncio.Event()  # set when a batch is appended
        self._retention_task = None
        self._recovery: asyncio.Task | None = None
        # Producer id -> (verification guard, its coordinator call): at most one per producer.
        self._verifications: dict[int, tuple[object, asyncio.Future]] = {}
        self._actors: ActorDirectory | None = None
        self._stale_configs = restarted_actor()
        self._configs_asked: asyncio.Task | None = None
        self._ask_configs_at = 0.0

    def _ensure_open(self) -> PartitionLog:
        """The log, opened (or reopened after it went offline) if need be; raises
        KAFKA_STORAGE_ERROR while it cannot be, and tries again after OPEN_RETRY_S."""
        plog = self._plog
        if plog is not None and not plog.offline:
            return plog
        if self._deleted or time.monotonic() < self._retry_open_at:
            raise KafkaError(Errors.KAFKA_STORAGE_ERROR, self._open_error)
        try:
            if plog is None:
                self._plog = PartitionLog(self._dir, self.topic, self.partition, self._topic_configs,
                                          fsync=_truthy(self._config.get("log.flush.fsync", True)),
                                          **log_io(self._config, f"{self.topic}-{self.partition}"))
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
        if self._retention_task is None:
            interval = int(self._config.get("log.retention.check.interval.ms", 300000)) / 1000
            self._retention_task = asyncio.get_running_loop().create_task(self._retention_loop(interval))
        return self._plog

    def _log_failed(self, error: LogWriteError) -> None:
        """An append or flush failed. If the log went offline, the appends waiting for a
        flush can no longer become durable: they fail once the log has cut them off, and
        the log is reopened."""
        if self._plog is None or not self._plog.offline:
            return  # one append failed and was cut back; the log goes on
        log.error("%s-%d: the log is offline: %s", self.topic, self.partition, error)
        self._open_error = str(error)
        self._unsettled.extend(self._waiters)
        self._waiters = []
        self._settle()
        if self._recovery is None or self._recovery.done():
            self._recovery = asyncio.get_running_loop().create_task(self._recover())

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

    def _directory(self) -> ActorDirectory:
        if self._actors is None:
            self._actors = ActorDirectory(self._config.get(naming.NAMESPACE_KEY) or ray.get_runtime_context().namespace)
        return self._actors

    async def _current_configs(self) -> None:
        """After a restart, before serving: the topic's configs as the controller has them."""
        if not self._stale_configs or time.monotonic() < self._ask_configs_at:
            return
        if self._configs_asked is None or self._configs_asked.done():
            self._configs_asked = asyncio.get_running_loop().create_task(self._ask_configs())
        await asyncio.shield(self._configs_asked)

    async def _ask_configs(self) -> None:
        try:
            response = await self._directory().call_async(naming.CONTROLLER, "metadata",
                                                          MetadataRequest((self.topic,)), timeout_s=CONFIGS_TIMEOUT_S)
        except KafkaError as e:
            self._ask_configs_at = time.monotonic() + OPEN_RETRY_S
            log.warning("%s-%d: serving with the configs it was created with: the controller did not answer: %s",
                        self.topic, self.partition, e)
            return
        for topic in response.topics:
            if topic.name == self.topic and not topic.error_code:
                await self.alter_configs(topic.configs)
        self._stale_configs = False

    async def ready(self) -> dict:
        await self._current_configs()
        self._ensure_open()
        return await self.status()

    async def status(self) -> dict:
        p = self._plog
        state = "offline" if p is not None and p.offline else "active" if p else "initial"
        return {"name": f"{self.topic}-{self.partition}", "state": state, "error": self._open_error,
                "log_start_offset": p.log_start_offset if p else None,
                "high_watermark": p.high_watermark if p else None, "size": p.size if p else None,
                "pid": os.getpid(), "node_id": current_node()}

    # ------------------------------------------------------------------ produce

    async def batched(self, method: str, calls: list[tuple]) -> list:
        """Many produces in one Ray call (the gateway gathers those bound for this partition),
        appended in the order given and made durable by one flush."""
        return await run_batched(self, method, calls)

    async def produce(self, request: ProduceRequest) -> ProduceResponse:
        await self._current_configs()
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
                # torn tail): it can be answered now. Those before it wait for the cut.
                self._log_failed(e)
                return error_response(request, KafkaError(Errors.KAFKA_STORAGE_ERROR, str(e)))
        self._appended.set()
        self._appended = asyncio.Event()
        error = await self._durable()
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
            response = await self._directory().send(name, "add_partitions_to_txn", ask,
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

    async def _durable(self) -> str | None:
        """Wait for the flush of everything appended so far; the error if it failed."""
        future = asyncio.get_running_loop().create_future()
        self._waiters.append(future)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)
        return await future

    async def write_txn_markers(self, request: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse:
        """Append the commit or abort markers addressed to this partition (a marker naming
        another partition gets NOT_LEADER_OR_FOLLOWER) and answer once they are durable."""
        results: list[tuple[int, str, int, int]] = []  # (producer id, topic, partition, error code)
        appended = False
        for marker in request.markers:
            for topic in marker.topics:
                for partition in topic.partition_indexes:
                    code = Errors.NONE.code
                    if (topic.name, partition) != (self.topic, self.partition):
                        code = Errors.NOT_LEADER_OR_FOLLOWER.code
                    else:
                        try:
                            self._ensure_open().append_control_marker(
                                marker.producer_id, marker.producer_epoch, marker.transaction_result,
                                marker.coordinator_epoch, now_ms(), marker.transaction_version)
                            appended = True
                        except KafkaError as e:
                            code = e.code
                        except LogWriteError as e:
                            self._log_failed(e)
                            code = Errors.KAFKA_STORAGE_ERROR.code
                    results.append((marker.producer_id, topic.name, partition, code))
        if appended and await self._durable() is not None:
            results = [(pid, t, p, Errors.KAFKA_STORAGE_ERROR.code if code == 0 else code)
                       for pid, t, p, code in results]
        return WriteTxnMarkersResponse.from_results(results)

    def _flush(self) -> None:
        self._flush_scheduled = False
        if self._plog is None:
            self._unsettled.extend(self._waiters)
            self._waiters = []
            self._settle()
            return
        waiters, self._waiters = self._waiters, []
        try:
            self._plog.flush()
        except LogWriteError as e:
            self._waiters[:0] = waiters
            self._log_failed(e)
            return
        for w in waiters:
            if not w.done():
                w.set_result(None)
        self._data.set()
        self._data = asyncio.Event()

    # ------------------------------------------------------------------ fetch

    async def fetch(self, request: FetchRequest) -> FetchResponse:
        await self._current_configs()
        deadline = time.monotonic() + max(request.max_wait_ms, 0) / 1000
        try:
            plog = self._ensure_open()
            while True:
                data = self._data
                response = plog.fetch(request.fetch_offset, request.partition_max_bytes, request.max_records,
                                      request.isolation_level)
                size = sum(len(b.records) for b in response.batches)
                remaining = deadline - time.monotonic()
                if size >= max(request.min_bytes, 1) or remaining <= 0:
                    return response
                try:
                    await asyncio.wait_for(data.wait(), remaining)
                except asyncio.TimeoutError:
                    pass
        except KafkaError as e:
            p = self._plog
            return FetchResponse(self.topic, self.partition, e.code,
                                 p.high_watermark if p else -1, p.high_watermark if p else -1,
                                 p.log_start_offset if p else -1, error_message=e.message)

    async def list_offsets(self, request: ListOffsetsRequest) -> ListOffsetsResponse:
        await self._current_configs()
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

    async def _retention_loop(self, interval_s: float) -> None:
        while True:
            await asyncio.sleep(interval_s)
            await self.apply_retention()

    async def apply_retention(self) -> list[str]:
        await self._current_configs()
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

    async def alter_configs(self, topic_configs: dict) -> None:
        """The topic's configs after the controller changed them."""
        self._topic_configs = dict(topic_configs)
        if self._plog is not None:
            self._plog.set_configs(self._topic_configs)

    async def delete_data(self) -> None:
        """The topic was deleted: close the log and remove its folder."""
        if self._retention_task is not None:
            self._retention_task.cancel()
        self._deleted = True
        self._open_error = "the topic was deleted"
        if self._plog is not None:
            self._plog.close()
            self._plog = None
        self._unsettled.extend(self._waiters)
        self._waiters = []
        self._settle()
        shutil.rmtree(self._dir, ignore_errors=True)
