"""The write path of every coordinator: Kafka's CoordinatorRuntime, without threads.

A shard is the state machine of one coordinator partition. Only records change its hard
state, through ``replay(offset, record)``; the same ``replay`` runs when records are written
and when a log is loaded. A write operation takes (shard, now) and returns a ``Result``
(records, response) without touching hard state; the runtime replays the records at once
(so the next operation sees them), adds them to the current batch, and releases the
response through the ``PendingWrite`` only when the batch is durable.

Who writes: by default the runtime writes and flushes its batches itself, on the caller's
thread (tests, benchmarks, tools). An owner that does its I/O elsewhere (the actor's shard
host, on a writer thread) builds it with ``owner_writes=True``: the runtime then only hands
out the next ``WriteBatch`` (``take_batch``) and takes its outcome back (``batch_durable`` or
``batch_failed``), as Kafka's CoordinatorRuntime hands its batches to the partition writer and
completes its deferred events when the high watermark passes them. One batch is out at a
time; records replayed meanwhile go to the next one, so the log's single writer never sees
two flushes at once and batches reach it in offset order.

A response without records rests on state that may not be durable yet: it waits for the
records written before it (Kafka's rule), or, when the operation names the ``key`` of the
state it reads and writes (a group id), only for the records written under that key and
for those written under no key.

Reverting a failed batch: the shard is rebuilt by reloading the log, whose durable prefix is
by definition the last durable point. That is the simplest mechanism that is correct for
every shard (no undo log to keep in step with each replay handler), and it is the same code
path as a restart. Its cost, a reload, is paid only when the disk fails. A log that failed
goes offline (runtime.log) and is reopened by that reload. The responses of the failed batch
are answered with a retriable error once its bytes are off the file: while the log could not
yet cut them (``unsettled``), they wait, so that no write answered with an error is found
whole by a later load. The writes of later batches, computed on top of the failed one, fail
at once: none of their records reached the log.

Nothing here reads a clock or does I/O other than through the log.
"""
from __future__ import annotations

import enum
import gc
import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, Hashable, Iterator, NamedTuple, TypeVar

import msgpack

from .codec import Record, decode_entries, encode_record, replay_entries, unpack
from .errors import CorruptRecordError, Errors, KafkaError
from .log import ATTR_COMPACTED, FileLog, LogWriteError
from .log_read import read_batches
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


class WriteBatch(NamedTuple):
    """A batch the owner writes: append it to the log (it lands at `base_offset`), flush it,
    and report the outcome to the runtime that handed it out (see `write_batch`)."""
    base_offset: int
    payload: bytes
    count: int
    timestamp: int

    @property
    def end_offset(self) -> int:
        return self.base_offset + self.count


class _Batch:
    """Records replayed but not yet durable, and the responses released when they are."""

    __slots__ = ("base_offset", "records", "size", "started_ms", "waiters")

    def __init__(self, base_offset: int, started_ms: int) -> None:
        self.base_offset = base_offset
        self.records: list[bytes] = []
        self.size = 0
        self.started_ms = started_ms
        self.waiters: list[PendingWrite] = []

    @property
    def end_offset(self) -> int:
        return self.base_offset + len(self.records)


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
    # append.linger.ms: how long a batch waits for more writes. -1, Kafka 4.2's default
    # (KAFKA-19826), is adaptive: the batch is due at once, so the owner writes it as soon as
    # the operations already queued have run; those arriving together share it, those
    # arriving while a batch is being written share the next, and a lone write waits for
    # nothing. 0 behaves the same here (the owner writes after its queue, never inside an
    # operation).
    linger_ms: int = -1
    max_batch_bytes: int = 1024 * 1024  # a batch is flushed at once when it reaches this

    @classmethod
    def from_config(cls, config: dict | None) -> "RuntimeConfig":
        config = config or {}
        linger_ms = int(config.get("append.linger.ms", cls.linger_ms))
        if linger_ms < -1:
            raise KafkaError(Errors.INVALID_CONFIG, f"append.linger.ms must be -1 (adaptive) or at least 0, not {linger_ms}")
        return cls(linger_ms, int(config.get("append.max.batch.bytes", cls.max_batch_bytes)))


_pack = msgpack.Packer(use_bin_type=True).pack
_array_header = msgpack.Packer().pack_array_header
_KEEP = object()  # a waiter's response stays as it is


class CoordinatorRuntime(Generic[S]):
    def __init__(self, name: str, partition: int, shard_factory: Callable[[CoordinatorContext], S],
                 open_log: Callable[[], FileLog], config: dict | None = None, *, owner_writes: bool = False) -> None:
        self.name = name
        self.partition = partition
        self.config = dict(config or {})
        self.settings = RuntimeConfig.from_config(self.config)
        self.owner_writes = owner_writes
        self._shard_factory = shard_factory
        self._open_log = open_log
        self.timer = CoordinatorTimer()
        self.state = CoordinatorState.INITIAL
        self.shard: S | None = None
        self.log: FileLog | None = None
        self._open: _Batch | None = None  # the batch that takes new records
        self._sealed: list[_Batch] = []  # full batches waiting for their turn to be written
        self._inflight: tuple[WriteBatch, _Batch] | None = None  # handed out, outcome not known yet
        self._next_offset = 0  # the offset of the next record replayed
        self._committed = 0  # everything below is durable (Kafka's last committed offset)
        self._key_end: dict[Hashable, int] = {}  # the end of the last records written under a key
        self._unkeyed_end = 0  # the end of the last records written under no key
        self._deferred: dict[Hashable, PendingWrite] = {}
        # Responses of a failed batch whose records the log could not yet cut off its file.
        self._unsettled: list[tuple[PendingWrite, KafkaError]] = []
        # A revert that waits for the batch in flight to come back before reloading.
        self._revert_due = False
        # Bumped by every revert: an operation computed before one must not be applied after.
        self._reverts = 0
        self._loads = 0

    # ------------------------------------------------------------------ loading

    def load(self, now_ms: int, progress_every: int = 256) -> Iterator[LoadProgress]:
        """Open the log and replay it into a fresh shard. A generator, so that the owner can
        answer COORDINATOR_LOAD_IN_PROGRESS between steps; exhaust it to finish. Anything
        still pending from before fails with NOT_COORDINATOR."""
        self._raise_if_writing()
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
        self._next_offset = self._committed = self.log.end_offset
        self._key_end = {}
        self._unkeyed_end = 0
        self.state = CoordinatorState.ACTIVE
        yield LoadProgress(batches, records, nbytes, total, True)

    def load_all(self, now_ms: int) -> LoadProgress:
        progress = None
        for progress in self.load(now_ms):
            pass
        return progress

    def close(self) -> None:
        """Unload: pending writes fail with NOT_COORDINATOR, timers stop, the log closes."""
        self._raise_if_writing()
        self._fail_batch(KafkaError(Errors.NOT_COORDINATOR, f"{self.name} is unloading"))
        if self.shard is not None:
            self.shard.on_unloaded()
        self.timer.clear()
        self.shard = None
        if self.log is not None:
            self.log.close()
        self.state = CoordinatorState.CLOSED

    def _raise_if_writing(self) -> None:
        if self._inflight is not None:
            # Its outcome decides how its responses are answered, and the log is the
            # writer's until then.
            raise RuntimeError(f"{self.name}: a batch is being written; report its outcome first")

    # ------------------------------------------------------------------ operations

    def _raise_if_not_active(self) -> None:
        if self.state is CoordinatorState.ACTIVE:
            return
        if self.state is CoordinatorState.LOADING:
            raise KafkaError(Errors.COORDINATOR_LOAD_IN_PROGRESS, f"{self.name} is loading")
        if self.state is CoordinatorState.FAILED:
            raise KafkaError(Errors.COORDINATOR_NOT_AVAILABLE, f"{self.name} failed to load its log")
        raise KafkaError(Errors.NOT_COORDINATOR, f"{self.name} is not active")

    def write(self, operation: Callable[[S, int], Result], now_ms: int, key: Hashable = None) -> PendingWrite:
        """Run a write operation. A KafkaError raised by the operation's validators reaches
        the caller and nothing has changed. `key`, if given, names the only part of the
        shard's state the operation reads and writes (a group id): a response without
        records then waits only for the records of that key and those of no key."""
        self._raise_if_not_active()
        result = operation(self.shard, now_ms)
        return self._append(result, now_ms, key)

    def _append(self, result: Result, now_ms: int, key: Hashable = None) -> PendingWrite:
        pending = PendingWrite(result.response)
        records = result.records
        if not records:
            # Nothing to persist, but the response may rest on state that is not durable
            # yet: release it once the records it may have seen are, as Kafka does.
            if key is None:
                after = self._next_offset
            else:
                after = max(self._key_end.get(key, 0), self._unkeyed_end)
            self._release(pending, result, after)
            return pending
        encoded = [_pack(encode_record(r)) for r in records]  # a bad record fails before replay
        size = sum(len(e) for e in encoded)
        if self._open is not None and self._open.size + size > self.settings.max_batch_bytes:
            reverts = self._reverts
            self._seal(now_ms)
            if self._reverts != reverts:
                # The flush failed and the shard went back to the durable state: these
                # records were computed from state that no longer exists.
                pending._finish(KafkaError(Errors.NOT_COORDINATOR, f"{self.name} reverted a failed batch"))
                return pending
        offset = self._next_offset
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
        if self._open is None:
            self._open = _Batch(self._next_offset, now_ms)
        self._open.records.extend(encoded)
        self._open.size += size
        self._next_offset = offset
        if key is None:
            self._unkeyed_end = offset
        else:
            self._key_end[key] = offset
        self._release(pending, result, offset)
        if self._open.size >= self.settings.max_batch_bytes:
            self._seal(now_ms)
        return pending

    def _release(self, pending: PendingWrite, result: Result, after: int) -> None:
        """Queue the operation's own response and the deferred ones it completes until the
        records below offset `after` are durable (or release them now if they are)."""
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
        if after <= self._committed:
            holder = None
        elif self._open is not None and after > self._open.base_offset:
            holder = self._open  # the common case: the records just replayed
        else:
            holder = self._batch_holding(after - 1)
        for waiter, response in ready:
            if response is not _KEEP:
                if isinstance(response, KafkaError):
                    waiter.error = response
                else:
                    waiter.response = response
            if holder is not None:
                holder.waiters.append(waiter)
            else:
                waiter._finish(waiter.error)

    def _batch_holding(self, offset: int) -> _Batch:
        """The batch, not durable yet, that holds this offset."""
        batches = ([self._inflight[1]] if self._inflight else []) + self._sealed + ([self._open] if self._open else [])
        for batch in batches:
            if offset < batch.end_offset:
                return batch
        raise AssertionError(f"{self.name}: offset {offset} is in no pending batch")

    @property
    def deferred_keys(self) -> list:
        return list(self._deferred)

    def read(self, operation: Callable[[S], Any], now_ms: int) -> Any:
        """Run a read operation on durable state: a pending batch is flushed first. An owner
        that writes (owner_writes) reads through `write` instead: a response without
        records waits for what it saw to be durable."""
        self._raise_if_not_active()
        if self.pending_records:
            if self.owner_writes:
                raise RuntimeError(f"{self.name}: records are not durable yet; read through write()")
            self.flush(now_ms)
            self._raise_if_not_active()
        return operation(self.shard)

    # ------------------------------------------------------------------ batches and time

    @property
    def pending_records(self) -> int:
        """Records replayed but not durable yet (being written, or waiting to be)."""
        return self._next_offset - self._committed

    @property
    def last_committed_offset(self) -> int:
        """Every record below this offset is durable."""
        return self._committed

    @property
    def writing(self) -> bool:
        """A batch has been handed out and its outcome is not known yet."""
        return self._inflight is not None

    def flush_deadline(self) -> int | None:
        """When the next batch is due to be written (None while one is being written: the
        owner hears again when it reports the outcome)."""
        if self._inflight is not None:
            return None
        if self._sealed:
            return self._sealed[0].started_ms
        if self._open is None:
            return None
        return self._open.started_ms + max(self.settings.linger_ms, 0)

    def next_deadline(self) -> int | None:
        deadlines = [d for d in (self.flush_deadline(), self.timer.next_deadline()) if d is not None]
        return min(deadlines) if deadlines else None

    def poll(self, now_ms: int) -> None:
        """Fire the timers that are due, then (unless the owner writes) flush the batch if
        its linger is over."""
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
        if self.owner_writes:
            return
        deadline = self.flush_deadline()
        if deadline is not None and deadline <= now_ms:
            self.flush(now_ms)

    def _seal(self, now_ms: int) -> None:
        """The open batch is full: it waits for its turn, and the next records start another."""
        if self._open is not None:
            self._sealed.append(self._open)
            self._open = None
        if not self.owner_writes:
            self.flush(now_ms)

    def take_batch(self, now_ms: int, force: bool = False) -> WriteBatch | None:
        """The next batch to write, if one is due (full, or its linger over; any with
        `force`) and none is being written. The owner writes it (`write_batch`) and reports
        `batch_durable` or `batch_failed`; records replayed meanwhile go to later batches."""
        if self._inflight is not None or self.state is not CoordinatorState.ACTIVE:
            return None
        if self._sealed:
            batch = self._sealed.pop(0)
        elif self._open is not None and (force or self._open.started_ms + max(self.settings.linger_ms, 0) <= now_ms):
            batch, self._open = self._open, None
        else:
            return None
        write = WriteBatch(batch.base_offset, _array_header(len(batch.records)) + b"".join(batch.records),
                           len(batch.records), now_ms)
        self._inflight = (write, batch)
        return write

    def _take_inflight(self, write: WriteBatch) -> _Batch:
        if self._inflight is None or self._inflight[0] is not write:
            raise RuntimeError(f"{self.name}: batch at {write.base_offset} is not the one being written")
        batch = self._inflight[1]
        self._inflight = None
        return batch

    def batch_durable(self, write: WriteBatch, now_ms: int) -> None:
        """The owner's report: the batch is in the log and flushed. Its responses go out."""
        batch = self._take_inflight(write)
        self._committed = batch.end_offset
        if self._key_end:
            # Keys whose records are all durable need no entry: a missing key waits for nothing.
            self._key_end = {k: end for k, end in self._key_end.items() if end > self._committed}
        for w in batch.waiters:
            w._finish(w.error)
        if self._revert_due:
            self._reload(now_ms)

    def batch_failed(self, write: WriteBatch, error: Exception, now_ms: int) -> None:
        """The owner's report: the batch could not be made durable (the log went offline).
        The runtime goes back to the durable state; the batch's responses fail once its
        records are off the file, every later one at once."""
        batch = self._take_inflight(write)
        log.error("%s: state log write failed: %s", self.name, error)
        failure = KafkaError(Errors.NOT_COORDINATOR, f"state log write failed: {error}")
        self._unsettled.extend((w, failure) for w in batch.waiters)
        self._revert(failure, now_ms)

    def flush(self, now_ms: int) -> None:
        """Write and flush every pending batch now, on the caller's thread; release their
        responses, or on failure revert to the durable state and fail them with a
        retriable error. (An owner that writes takes the batches instead.)"""
        while self._open is not None or self._sealed:
            write = self.take_batch(now_ms, force=True)
            if write is None:
                return  # one is out already, or the runtime is not active
            try:
                write_batch(self.log, write)
            except LogWriteError as e:
                self.batch_failed(write, e, now_ms)
            else:
                self.batch_durable(write, now_ms)

    def _fail_batch(self, error: KafkaError) -> None:
        """Fail every response not yet released that waits for no batch being written: the
        open and sealed batches' (none of their records reached the log) and the deferred ones."""
        waiters = [w for b in self._sealed + ([self._open] if self._open else []) for w in b.waiters]
        waiters += list(self._deferred.values())
        self._open = None
        self._sealed = []
        self._next_offset = self._inflight[1].end_offset if self._inflight else self._committed
        self._deferred = {}
        for w in waiters:
            w._finish(error)

    def _revert(self, error: KafkaError, now_ms: int) -> None:
        """Go back to the last durable point: the pending responses fail (a failed batch's
        once the log has cut its records off, see `_settle`), the deferred ones fail, and
        the shard is reloaded from the log, which is reopened first if it went offline. If
        a batch is being written, the reload waits for its outcome, and the runtime answers
        COORDINATOR_NOT_AVAILABLE meanwhile. If the reload fails, the runtime is FAILED
        until its owner calls load() again."""
        self._reverts += 1
        self._fail_batch(error)
        if self._inflight is not None:
            self._revert_due = True
            self.state = CoordinatorState.FAILED
            self.shard = None
            self.timer.clear()
            return
        self._reload(now_ms)

    def _reload(self, now_ms: int) -> None:
        self._revert_due = False
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


def write_batch(file_log: FileLog, write: WriteBatch) -> None:
    """The I/O of one batch: append it to the log, then flush it. Returns once it is
    durable; raises LogWriteError (the log offline) if it cannot be made so. Runs wherever
    the owner does its I/O: the runtime's own `flush`, or the actor's writer thread, which
    alone touches the log while the batch is out."""
    file_log.append(write.payload, write.count, write.timestamp)
    file_log.flush()


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
