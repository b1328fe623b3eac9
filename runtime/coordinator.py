"""The write path of every coordinator: Kafka's CoordinatorRuntime, without threads.

A shard is the state machine of one coordinator partition. Only records change its hard
state, through ``replay(offset, record)``; the same ``replay`` runs when records are written
and when a log is loaded. A write operation takes (shard, now) and returns a ``Result``
(records, response) without touching hard state; the runtime replays the records at once
(so the next operation sees them), adds them to the current batch, and releases the
response through the ``PendingWrite`` only when the batch is durable.

Reverting a failed batch: the shard is rebuilt by reloading the log, whose durable prefix is
by definition the last durable point. That is the simplest mechanism that is correct for
every shard (no undo log to keep in step with each replay handler), and it is the same code
path as a restart. Its cost, a reload, is paid only when the disk fails. A log that failed
goes offline (runtime.log) and is reopened by that reload. The responses of the failed batch
are answered with a retriable error once its bytes are off the file: while the log could not
yet cut them (``unsettled``), they wait, so that no write answered with an error is found
whole by a later load.

Nothing here reads a clock or does I/O other than through the log.
"""
from __future__ import annotations

import enum
import gc
import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, Hashable, Iterator, TypeVar

import msgpack

from .codec import Record, decode_entries, encode_record, replay_entries, unpack
from .errors import CorruptRecordError, Errors, KafkaError
from .log import ATTR_COMPACTED, FileLog, LogWriteError, read_batches
from .timer import CoordinatorTimer

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Deferred:
    """A response that a later operation will give (a long poll such as JoinGroup). The
    operation returns it as its response; a later Result names the key in `completions`."""
    key: Hashable


@dataclass(frozen=True, slots=True)
class Result:
    """What an operation produced (Kafka's CoordinatorResult): records to persist, the
    response to release once they are durable, and the deferred responses this operation
    completes, as (key, response or KafkaError) pairs, released with the same batch."""
    records: tuple | list = ()
    response: Any = None
    completions: tuple | list = ()


class CoordinatorShard:
    """The base of every shard (Kafka's CoordinatorShard): `replay` applies one record, and
    the lifecycle hooks, which do nothing unless a shard overrides them, tell it where its
    runtime is."""

    def replay(self, offset: int, record: Record) -> None:
        raise NotImplementedError

    def on_loaded(self, now_ms: int) -> None:
        """Its log is replayed: rebuild soft state (timers, say) from the hard state."""

    def on_unloaded(self) -> None:
        """Its runtime closes: it serves nothing more."""

    def records_applied(self, now_ms: int) -> None:
        """A write's records are replayed: the time of a change, which records do not carry,
        for soft state such as metrics."""


S = TypeVar("S", bound=CoordinatorShard)


@dataclass
class CoordinatorContext:
    """What a shard gets from its runtime when it is built."""
    name: str  # the log's name, e.g. "__consumer_offsets-3"
    partition: int
    timer: CoordinatorTimer
    config: dict = field(default_factory=dict)


class CoordinatorState(enum.Enum):
    INITIAL = "initial"
    LOADING = "loading"
    ACTIVE = "active"
    FAILED = "failed"
    CLOSED = "closed"


class PendingWrite:
    """The response of a write operation, released when its records are durable."""

    __slots__ = ("response", "error", "done", "_callbacks")

    def __init__(self, response: Any) -> None:
        self.response = response
        self.error: KafkaError | None = None
        self.done = False
        self._callbacks: list[Callable[["PendingWrite"], None]] = []

    def add_done_callback(self, fn: Callable[["PendingWrite"], None]) -> None:
        if self.done:
            fn(self)
        else:
            self._callbacks.append(fn)

    def _finish(self, error: KafkaError | None) -> None:
        if self.done:
            return
        self.error = error
        self.done = True
        callbacks, self._callbacks = self._callbacks, []
        for fn in callbacks:
            try:
                fn(self)
            except Exception:
                # One owner's broken callback must not keep the rest of a batch waiting.
                log.exception("a PendingWrite callback failed")

    def result(self) -> Any:
        if not self.done:
            raise RuntimeError("the write is not durable yet")
        if self.error is not None:
            raise self.error
        return self.response


@dataclass(frozen=True)
class LoadProgress:
    batches: int
    records: int
    bytes: int
    total_bytes: int
    done: bool


@dataclass(frozen=True)
class RuntimeConfig:
    linger_ms: int = 5  # append.linger.ms: how long a batch waits for more writes
    max_batch_bytes: int = 1024 * 1024  # a batch is flushed at once when it reaches this

    @classmethod
    def from_config(cls, config: dict | None) -> "RuntimeConfig":
        config = config or {}
        return cls(int(config.get("append.linger.ms", cls.linger_ms)),
                   int(config.get("append.max.batch.bytes", cls.max_batch_bytes)))


_pack = msgpack.Packer(use_bin_type=True).pack
_array_header = msgpack.Packer().pack_array_header
_KEEP = object()  # a waiter's response stays as it is


class CoordinatorRuntime(Generic[S]):
    def __init__(self, name: str, partition: int, shard_factory: Callable[[CoordinatorContext], S],
                 open_log: Callable[[], FileLog], config: dict | None = None) -> None:
        self.name = name
        self.partition = partition
        self.config = dict(config or {})
        self.settings = RuntimeConfig.from_config(self.config)
        self._shard_factory = shard_factory
        self._open_log = open_log
        self.timer = CoordinatorTimer()
        self.state = CoordinatorState.INITIAL
        self.shard: S | None = None
        self.log: FileLog | None = None
        self._batch: list[bytes] = []
        self._batch_bytes = 0
        self._batch_started_ms: int | None = None
        self._batch_waiters: list[PendingWrite] = []
        self._deferred: dict[Hashable, PendingWrite] = {}
        # Responses of a failed batch whose records the log could not yet cut off its file.
        self._unsettled: list[tuple[PendingWrite, KafkaError]] = []
        # Bumped by every revert: an operation computed before one must not be applied after.
        self._reverts = 0
        self._loads = 0

    # ------------------------------------------------------------------ loading

    def load(self, now_ms: int, progress_every: int = 256) -> Iterator[LoadProgress]:
        """Open the log and replay it into a fresh shard. A generator, so that the owner can
        answer COORDINATOR_LOAD_IN_PROGRESS between steps; exhaust it to finish. Anything
        still pending from before fails with NOT_COORDINATOR."""
        self._fail_batch(KafkaError(Errors.NOT_COORDINATOR, f"{self.name} is reloading"))
        self._loads += 1
        load_id = self._loads
        self.state = CoordinatorState.LOADING
        self.timer.clear()
        self.shard = None
        # Loading allocates millions of small tuples that all stay alive; the cyclic
        # collector would scan them over and over (it made loading 3-5x slower). It is
        # off while a step runs and back on whenever control returns to the owner.
        gc_was_enabled = gc.isenabled()
        try:
            gc.disable()
            if self.log is None:
                self.log = self._open_log()
            elif self.log.offline or self.log.closed:
                self.log.reopen()
            self._settle()
            for line in self.log.recovered:
                log.warning("%s: %s", self.name, line)
            shard = self._shard_factory(CoordinatorContext(self.name, self.partition, self.timer, self.config))
            replay = shard.replay
            total = sum(s.size for s in self.log.manifest.segments)
            batches = records = nbytes = 0
            for batch in read_batches(self.log.directory, 0, self.log.end_offset):
                records += replay_batch(replay, batch, self.name)
                batches += 1
                nbytes += batch.size
                if batches % progress_every == 0:
                    if gc_was_enabled:
                        gc.enable()
                    yield LoadProgress(batches, records, nbytes, total, False)
                    if self.state is not CoordinatorState.LOADING or self._loads != load_id:
                        return  # closed, or loaded again, while this load was paused
                    gc.disable()
            shard.on_loaded(now_ms)
        except BaseException:
            if self.state is not CoordinatorState.LOADING or self._loads != load_id:
                raise  # a stale load, abandoned: the runtime belongs to another now
            self.state = CoordinatorState.FAILED
            self.timer.clear()
            if self.log is not None:
                # The next load reopens the folder, after an operator has repaired it.
                self.log.close()
            raise
        finally:
            if gc_was_enabled:
                gc.enable()
        self.shard = shard
        self.state = CoordinatorState.ACTIVE
        yield LoadProgress(batches, records, nbytes, total, True)

    def load_all(self, now_ms: int) -> LoadProgress:
        progress = None
        for progress in self.load(now_ms):
            pass
        return progress

    def close(self) -> None:
        """Unload: pending writes fail with NOT_COORDINATOR, timers stop, the log closes."""
        self._fail_batch(KafkaError(Errors.NOT_COORDINATOR, f"{self.name} is unloading"))
        if self.shard is not None:
            self.shard.on_unloaded()
        self.timer.clear()
        self.shard = None
        if self.log is not None:
            self.log.close()
        self.state = CoordinatorState.CLOSED

    # ------------------------------------------------------------------ operations

    def _raise_if_not_active(self) -> None:
        if self.state is CoordinatorState.ACTIVE:
            return
        if self.state is CoordinatorState.LOADING:
            raise KafkaError(Errors.COORDINATOR_LOAD_IN_PROGRESS, f"{self.name} is loading")
        if self.state is CoordinatorState.FAILED:
            raise KafkaError(Errors.COORDINATOR_NOT_AVAILABLE, f"{self.name} failed to load its log")
        raise KafkaError(Errors.NOT_COORDINATOR, f"{self.name} is not active")

    def write(self, operation: Callable[[S, int], Result], now_ms: int) -> PendingWrite:
        """Run a write operation. A KafkaError raised by the operation's validators reaches
        the caller and nothing has changed."""
        self._raise_if_not_active()
        result = operation(self.shard, now_ms)
        return self._append(result, now_ms)

    def _append(self, result: Result, now_ms: int) -> PendingWrite:
        pending = PendingWrite(result.response)
        records = result.records
        if not records:
            # Nothing to persist, but the response may rest on state that is not durable
            # yet: release it with the current batch, as Kafka does.
            self._release(pending, result)
            return pending
        encoded = [_pack(encode_record(r)) for r in records]  # a bad record fails before replay
        size = sum(len(e) for e in encoded)
        if self._batch and self._batch_bytes + size > self.settings.max_batch_bytes:
            reverts = self._reverts
            self.flush(now_ms)
            if self._reverts != reverts:
                # The flush failed and the shard went back to the durable state: these
                # records were computed from state that no longer exists.
                pending._finish(KafkaError(Errors.NOT_COORDINATOR, f"{self.name} reverted a failed batch"))
                return pending
        offset = self.log.end_offset + len(self._batch)
        try:
            for record in records:
                self.shard.replay(offset, record)
                offset += 1
        except Exception as e:
            # Half a result is in memory: go back to the durable state.
            log.exception("%s: replay failed", self.name)
            pending._finish(KafkaError(Errors.UNKNOWN_SERVER_ERROR, f"replay failed: {e}"))
            self._revert(KafkaError(Errors.NOT_COORDINATOR, f"{self.name} reverted after a failed replay"), now_ms)
            return pending
        self.shard.records_applied(now_ms)
        if not self._batch:
            self._batch_started_ms = now_ms
        self._batch.extend(encoded)
        self._batch_bytes += size
        self._release(pending, result)
        if self._batch_bytes >= self.settings.max_batch_bytes:
            self.flush(now_ms)
        return pending

    def _release(self, pending: PendingWrite, result: Result) -> None:
        """Queue the operation's own response and the deferred ones it completes behind the
        current batch (or release them now if nothing is pending)."""
        ready: list[tuple[PendingWrite, Any]] = []  # (waiter, its completion or _KEEP)
        if isinstance(result.response, Deferred):
            old = self._deferred.pop(result.response.key, None)
            if old is not None:
                old._finish(KafkaError(Errors.UNKNOWN_SERVER_ERROR, "superseded by a newer request"))
            self._deferred[result.response.key] = pending
        else:
            ready.append((pending, _KEEP))
        for key, response in result.completions:
            waiter = self._deferred.pop(key, None)
            if waiter is not None:
                ready.append((waiter, response))
        for waiter, response in ready:
            if response is not _KEEP:
                if isinstance(response, KafkaError):
                    waiter.error = response
                else:
                    waiter.response = response
            if self._batch:
                self._batch_waiters.append(waiter)
            else:
                waiter._finish(waiter.error)

    @property
    def deferred_keys(self) -> list:
        return list(self._deferred)

    def read(self, operation: Callable[[S], Any], now_ms: int) -> Any:
        """Run a read operation on durable state: a pending batch is flushed first."""
        self._raise_if_not_active()
        if self._batch:
            self.flush(now_ms)
            self._raise_if_not_active()
        return operation(self.shard)

    # ------------------------------------------------------------------ batches and time

    @property
    def pending_records(self) -> int:
        return len(self._batch)

    def flush_deadline(self) -> int | None:
        if self._batch_started_ms is None:
            return None
        return self._batch_started_ms + max(self.settings.linger_ms, 0)

    def next_deadline(self) -> int | None:
        deadlines = [d for d in (self.flush_deadline(), self.timer.next_deadline()) if d is not None]
        return min(deadlines) if deadlines else None

    def poll(self, now_ms: int) -> None:
        """Fire the timers that are due, then flush the batch if its linger is over."""
        if self.state is not CoordinatorState.ACTIVE:
            return
        reverts = self._reverts
        for key, operation in self.timer.expire(now_ms):
            try:
                self._append(operation(now_ms), now_ms)
            except KafkaError as e:
                log.info("%s: timer %s: %s", self.name, key, e)
            except Exception:
                log.exception("%s: timer %s failed", self.name, key)
            if self.state is not CoordinatorState.ACTIVE or self._reverts != reverts:
                # The shard was reloaded (or closed) and on_loaded rescheduled its timers;
                # the ones still in this round belong to the old shard.
                break
        deadline = self.flush_deadline()
        if deadline is not None and deadline <= now_ms:
            self.flush(now_ms)

    def flush(self, now_ms: int) -> None:
        """Write and flush the current batch; release its responses, or on failure revert
        to the durable state and fail them with a retriable error."""
        if not self._batch:
            return
        payload = _array_header(len(self._batch)) + b"".join(self._batch)
        try:
            self.log.append(payload, len(self._batch), now_ms)
            self.log.flush()
        except LogWriteError as e:
            log.error("%s: state log write failed: %s", self.name, e)
            self._revert(KafkaError(Errors.NOT_COORDINATOR, f"state log write failed: {e}"), now_ms)
            return
        waiters = self._batch_waiters
        self._reset_batch()
        for w in waiters:
            w._finish(w.error)

    def _reset_batch(self) -> None:
        self._batch = []
        self._batch_bytes = 0
        self._batch_started_ms = None
        self._batch_waiters = []

    def _fail_batch(self, error: KafkaError) -> None:
        """Fail every response not yet released: the batch's and the deferred ones."""
        waiters = self._batch_waiters + list(self._deferred.values())
        self._reset_batch()
        self._deferred = {}
        for w in waiters:
            w._finish(error)

    def _revert(self, error: KafkaError, now_ms: int) -> None:
        """Go back to the last durable point: the batch's responses fail (once the log has
        cut its records off, see `_settle`), the deferred ones fail, and the shard is
        reloaded from the log, which is reopened first if it went offline. If that fails,
        the runtime is FAILED (COORDINATOR_NOT_AVAILABLE) until its owner calls load() again."""
        self._reverts += 1
        self._unsettled.extend((w, error) for w in self._batch_waiters)
        self._batch_waiters = []
        self._fail_batch(error)
        try:
            self._settle()
            self.load_all(now_ms)
        except Exception as e:
            log.error("%s: could not go back to the durable state: %s", self.name, e)
            self.state = CoordinatorState.FAILED
            self.shard = None
            self.timer.clear()

    def _settle(self) -> None:
        """Answer the responses of failed batches once nothing of theirs is left in the file."""
        if self._unsettled and not self.log.unsettled:
            unsettled, self._unsettled = self._unsettled, []
            for w, error in unsettled:
                w._finish(error)


def replay_batch(replay: Callable[[int, Record], None], batch, name: str) -> int:
    """Decode one batch and replay its records; returns how many there were."""
    payload = _unpack_checked(batch.payload, batch.base_offset, name)
    base = batch.base_offset
    if batch.attributes & ATTR_COMPACTED:
        # Compaction kept some offsets of the original batches: [offset_deltas, entries].
        try:
            deltas, entries = payload
            if len(deltas) != len(entries):
                raise ValueError(f"{len(deltas)} offset deltas for {len(entries)} records")
        except (TypeError, ValueError) as e:
            raise CorruptRecordError(f"malformed compacted batch: {e}", log=name, offset=base) from None
        decoded = decode_entries(entries, base, name)
        for delta, record in zip(deltas, decoded):
            replay(base + delta, record)
        return len(decoded)
    return replay_entries(payload, base, replay, name)


def _unpack_checked(payload: bytes, base_offset: int, name: str) -> Any:
    try:
        return unpack(payload)
    except Exception as e:
        raise CorruptRecordError(f"undecodable batch: {e}", log=name, offset=base_offset) from None
