"""The Ray shell around one runtime shard (Kafka's CoordinatorRuntime event loop).

A host owns a CoordinatorRuntime and runs everything on its actor's event loop: write
operations one at a time (each runs to completion before the next starts), the linger and
timer deadlines, and the load at start. The only awaits are for durability and for long
polls. Protocol decisions stay in the shard: the host never looks at group state.

The log's I/O is the host's: it takes each batch the runtime hands out and writes and
flushes it on the log's own writer thread, so a slow disk stalls no request. While a batch
is being written the loop goes on taking requests, replaying their records into the next
batch and answering those that wait for nothing; a response that rests on records being
written waits for them (Kafka's CoordinatorRuntime and its deferred event queue). The
writer thread alone touches the log while a batch is out.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import importlib
import logging
import os
import time
from typing import Any, Callable, Hashable

from runtime.coordinator import CoordinatorRuntime, CoordinatorState, LoadProgress, Result, WriteBatch, write_batch
from runtime.log import FileLog, LogConfig
from runtime.messages import error_response

from .. import metrics
from ..errors import to_kafka_error
from ..placement import current_node
from .coalescing import run_batched

log = logging.getLogger(__name__)


# How often a runtime that failed (its log offline, or a load that failed) is loaded again.
RELOAD_RETRY_S = 1.0


def now_ms() -> int:
    return int(time.time() * 1000)


class ShardHost:
    """Mixin for async actors that host one shard. Subclasses expose Kafka's RPCs and call
    `_write` / `_read`; `_start` is awaited by every call so loading begins with the first
    one (or with `ready()`). Every RPC a subclass defines counts and times itself (metrics.py)."""

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        metrics.instrument_rpcs(cls, lambda host: host.runtime.name)

    def __init__(self, log_name: str, partition: int, shard_factory: Callable, data_dir: str, config: dict,
                 segment_bytes_key: str = "offsets.topic.segment.bytes") -> None:
        self._log_dir = os.path.join(data_dir, log_name)
        log_config = LogConfig(int(config.get(segment_bytes_key, LogConfig.segment_bytes)),
                               _truthy(config.get("log.flush.fsync", True)))
        io = log_io(config, log_name)
        self.runtime = CoordinatorRuntime(
            log_name, partition, shard_factory,
            lambda: metrics.TimedLog(FileLog(self._log_dir, log_config, name=log_name, **io), log_name), config,
            owner_writes=True)
        self._writer: concurrent.futures.ThreadPoolExecutor | None = None
        self._writing: asyncio.Task | None = None
        self._metrics_interval_s = int(config.get("metrics.export.interval.ms", 10000)) / 1000
        self._sampler = metrics.ShardSampler(log_name)
        self._exporter: asyncio.Task | None = None
        self._wake: asyncio.Event | None = None
        self._started: asyncio.Task | None = None
        self._progress: LoadProgress | None = None
        self._load_error: str | None = None
        self._reload_after = 0.0
        self.load_time_ms: float | None = None

    # ------------------------------------------------------------------ lifecycle

    async def _start(self) -> None:
        if self._started is None:
            self._wake = asyncio.Event()
            self._started = asyncio.get_running_loop().create_task(self._load_then_poll())
            await asyncio.sleep(0)
        elif (self.runtime.state is CoordinatorState.FAILED and not self.runtime.writing
              and time.monotonic() >= self._reload_after):
            # A load, or the reload after a failed flush, failed (a disk fault): try again,
            # at most once a second, rather than stay unavailable until Ray restarts us.
            self._reload_after = time.monotonic() + RELOAD_RETRY_S
            if self._started.done():
                self._started = asyncio.get_running_loop().create_task(self._load_then_poll())
            else:
                self._reload()

    async def _load_then_poll(self) -> None:
        started = time.monotonic()
        try:
            for progress in self.runtime.load(now_ms()):
                self._progress = progress
                await asyncio.sleep(0)  # answer COORDINATOR_LOAD_IN_PROGRESS meanwhile
        except Exception as e:
            self._load_error = f"{type(e).__name__}: {e}"
            log.exception("%s: load failed", self.runtime.name)
            return
        self._load_error = None
        self.load_time_ms = (time.monotonic() - started) * 1000
        metrics.registry.observe("shoal_partition_load_time_ms", self.load_time_ms, coordinator=self.runtime.name)
        if self._exporter is None:
            self._exporter = asyncio.get_running_loop().create_task(self._export_metrics_loop())
        self._on_active()
        while self.runtime.state is not CoordinatorState.CLOSED:
            deadline = self.runtime.next_deadline()
            timeout = None if deadline is None else max(0.0, (deadline - now_ms()) / 1000)
            if self.runtime.state is CoordinatorState.FAILED:
                # The log went offline and could not be reopened yet: retry on our own, so
                # that the writes waiting for the cut are answered without another request.
                timeout = max(self._reload_after - time.monotonic(), 0.0)
            try:
                await asyncio.wait_for(self._wake.wait(), timeout)
            except asyncio.TimeoutError:
                pass
            self._wake.clear()
            if (self.runtime.state is CoordinatorState.FAILED and not self.runtime.writing
                    and time.monotonic() >= self._reload_after):
                self._reload_after = time.monotonic() + RELOAD_RETRY_S
                self._reload()
                continue
            try:
                self.runtime.poll(now_ms())
                self._write_due()
                self._on_active()
            except Exception:
                log.exception("%s: poll failed", self.runtime.name)

    # ------------------------------------------------------------------ the log's I/O

    def _write_due(self) -> None:
        """Hand the batch that is due, if any, to the writer thread (one at a time)."""
        if self._writing is not None:
            return
        batch = self.runtime.take_batch(now_ms())
        if batch is not None:
            if self._writer is None:
                self._writer = concurrent.futures.ThreadPoolExecutor(
                    1, thread_name_prefix=f"{self.runtime.name}-writer")
            self._writing = asyncio.get_running_loop().create_task(self._write_batch(batch))

    async def _write_batch(self, batch: WriteBatch) -> None:
        error: Exception | None = None
        try:
            await asyncio.get_running_loop().run_in_executor(self._writer, write_batch, self.runtime.log, batch)
        except Exception as e:
            error = e
        self._writing = None
        # The log is the judge: a batch it holds as durable is, whatever failed after.
        if self.runtime.log.durable_offset >= batch.end_offset:
            if error is not None:
                log.error("%s: batch at %d is durable, but its write raised: %r", self.runtime.name,
                          batch.base_offset, error)
            self.runtime.batch_durable(batch, now_ms())
        else:
            self.runtime.batch_failed(batch, error or RuntimeError("not durable"), now_ms())
        self._kick()  # the next batch may be due, or the runtime may need loading again
        if self.runtime.state is CoordinatorState.ACTIVE:
            try:
                self._on_active()
            except Exception:
                log.exception("%s: after a batch, _on_active failed", self.runtime.name)

    def _reload(self) -> None:
        try:
            for progress in self.runtime.load(now_ms()):
                self._progress = progress
            self._load_error = None
            self._on_active()
        except Exception as e:
            self._load_error = f"{type(e).__name__}: {e}"
            log.exception("%s: reload failed", self.runtime.name)

    def _on_active(self) -> None:
        """Hook: work the shell must do after timers fired or a batch became durable
        (for instance sending transaction markers). Synchronous; schedule tasks for I/O."""

    async def _export_metrics_loop(self) -> None:
        while self.runtime.state is not CoordinatorState.CLOSED:
            self._export_metrics()
            await asyncio.sleep(self._metrics_interval_s)

    def _export_metrics(self) -> None:
        """The shard's protocol metrics as they are in memory (not necessarily durable yet):
        a gauge need not wait for a flush, and a read would force one."""
        if self.runtime.state is CoordinatorState.ACTIVE:
            try:
                self._sampler.export(metrics.shard_metrics(self.runtime.shard))
            except Exception:
                log.exception("%s: metrics export failed", self.runtime.name)

    async def metrics_snapshot(self) -> list[dict]:
        """The values this actor's process gave Ray's metrics, exported afresh."""
        await self._start()
        self._export_metrics()
        return metrics.registry.snapshot()

    def _kick(self) -> None:
        if self._wake is not None:
            self._wake.set()

    async def ready(self, timeout_s: float = 60.0) -> dict:
        """Wait until the shard is loaded (or failed to load)."""
        await self._start()
        deadline = time.monotonic() + timeout_s
        while self.runtime.state is not CoordinatorState.ACTIVE and self._load_error is None:
            if time.monotonic() > deadline:
                break
            await asyncio.sleep(0.01)
        return await self.status()

    async def status(self) -> dict:
        p = self._progress
        return {
            "name": self.runtime.name,
            "state": "failed" if self._load_error else self.runtime.state.value,
            "error": self._load_error,
            "loaded_records": p.records if p else 0,
            "load_time_ms": self.load_time_ms,
            "pending_records": self.runtime.pending_records,
            # Every record below it is durable: Kafka's high watermark of the shard's log.
            "high_watermark": self.runtime.last_committed_offset,
            "pid": os.getpid(),
            "node_id": current_node(),
        }

    # ------------------------------------------------------------------ operations

    async def _write(self, operation: Callable[[Any, int], Result], key: Hashable = None) -> Any:
        """Run a write operation and wait until its response is released (its records
        durable, or a long poll completed). Raises KafkaError. `key` names the only state
        the operation touches (a group id; see CoordinatorRuntime.write)."""
        await self._start()
        pending = self.runtime.write(operation, now_ms(), key)
        if not pending.done:
            future = asyncio.get_running_loop().create_future()
            pending.add_done_callback(lambda _: future.done() or future.set_result(None))
            self._kick()
            await future
        return pending.result()

    async def _read(self, operation: Callable[[Any], Any]) -> Any:
        """Run a read operation; its answer goes out once the state it saw is durable."""
        return await self._write(lambda shard, now: Result((), operation(shard)))

    async def _answer(self, request, operation: Callable, read: bool = False, key: Hashable = None) -> Any:
        """Serve `request` with a write operation (with `read`, a read one). The one place
        where a host turns an error into a response: whatever the operation fails with
        becomes the response Kafka gives `request` for it (runtime.messages.error_response)."""
        try:
            return await (self._read(operation) if read else self._write(operation, key))
        except Exception as e:
            return error_response(request, to_kafka_error(e))

    async def batched(self, method: str, calls: list[tuple]) -> list:
        """Many calls of one RPC in one Ray call (the gateway's request coalescing): their
        records share a batch of the log."""
        return await run_batched(self, method, calls)

    async def shutdown(self) -> None:
        """Unload: pending operations fail with NOT_COORDINATOR (a batch being written is
        let finish first: its outcome decides its answers)."""
        while self._writing is not None:
            await asyncio.shield(self._writing)
        self.runtime.close()
        if self._writer is not None:
            self._writer.shutdown(wait=False)
            self._writer = None
        self._kick()


def log_io(config: dict, log_name: str) -> dict:
    """FileLog's `io` argument: `log.io.class`, a dotted path of a `runtime.log.OsIO`
    subclass built with the cluster config and the log's name, puts an actor's logs on
    another disk (the soak's failing one, a benchmark's slow one); unset, FileLog's own."""
    path = config.get("log.io.class")
    if not path:
        return {}
    module, _, name = path.rpartition(".")
    return {"io": getattr(importlib.import_module(module), name)(config, log_name)}


def _truthy(v) -> bool:
    return v.strip().lower() in ("1", "true", "yes") if isinstance(v, str) else bool(v)

