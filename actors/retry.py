"""Calling actors the way Kafka clients call brokers: retriable failures (actor death or
restart, NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS, and the
response's own retriable error codes, or its partitions' ones) are retried with exponential
backoff until a deadline. `Retry` decides around each attempt; `call` and `call_async` are
only its two loops, one that blocks and one that awaits."""
from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import threading
import time
from typing import Any, Awaitable, Callable, Iterator

import ray

from runtime.errors import Errors, KafkaError

from .errors import RETRIABLE_COORDINATOR_ERRORS, to_kafka_error


class Backoff:
    """Kafka's exponential backoff (retry.backoff.ms doubling up to retry.backoff.max.ms)."""

    def __init__(self, initial_ms: int = 100, max_ms: int = 1000) -> None:
        self.initial_ms = initial_ms
        self.max_ms = max_ms
        self.attempts = 0

    def next_s(self) -> float:
        delay = min(self.initial_ms * (2 ** self.attempts), self.max_ms)
        self.attempts += 1
        return delay / 1000


class Retry:
    """The decisions of one retried call, apart from its I/O (the loops of `call` and
    `call_async` only send, wait and sleep): Kafka's exponential backoff until a deadline.
    A response is final unless its error code is in `retry_on`, or, with `per_partition`,
    the code of any partition (group, topic) it answers for is; then the whole request is
    sent again, and at the deadline the caller gets the response as it is, each partition
    with its error. A failed call (actor death, NOT_COORDINATOR...) is retried while its
    error is retriable; at the deadline it ends in REQUEST_TIMED_OUT."""

    def __init__(self, method: str, timeout_s: float, retry_on: frozenset = RETRIABLE_COORDINATOR_ERRORS,
                 per_partition: bool = False, backoff: Backoff | None = None,
                 on_failure: Callable[[], None] | None = None) -> None:
        self.method = method
        self.timeout_s = timeout_s
        self.retry_on = retry_on
        self.per_partition = per_partition
        self.deadline = time.monotonic() + timeout_s
        self.backoff = backoff or Backoff()
        self.on_failure = on_failure
        self.response: Any = None
        self.pause: float | None = None

    @contextlib.contextmanager
    def attempt(self) -> Iterator["Retry"]:
        """Around one send, which puts its answer in `response`. Afterwards `pause` is None
        when the call is over (its answer is `response`), else the seconds to wait before
        sending again; a failure that ends the call comes out of here as a KafkaError."""
        self.response, self.pause = None, None
        try:
            yield self
        except Exception as e:
            if self.on_failure is not None:
                self.on_failure()
            self.pause = self.after_failure(e)
        else:
            self.pause = self.after_response(self.response)

    def remaining_s(self) -> float:
        """How long the next attempt may wait for its answer."""
        return max(self.deadline - time.monotonic(), 0.001)

    def after_response(self, response: Any) -> float | None:
        """None: `response` is the answer; else the seconds to wait before sending again."""
        code = getattr(response, "error_code", 0)
        if code:
            error = Errors.for_code(code)
            if error in self.retry_on:
                return self._pause(KafkaError(error, getattr(response, "error_message", None)))
            return None
        if self.per_partition:
            retriable = next((c for c in error_codes(response) if Errors.for_code(c) in self.retry_on), None)
            if retriable is not None:
                pause = self.backoff.next_s()
                return pause if time.monotonic() + pause <= self.deadline else None
        return None

    def after_failure(self, exc: BaseException) -> float:
        """The seconds to wait before sending again; raises the KafkaError that ends the call."""
        if type(exc) is TimeoutError:  # asyncio's wait_for: Ray's own timeouts are RayErrors
            error = KafkaError(Errors.REQUEST_TIMED_OUT, f"{self.method} timed out")
        else:
            error = to_kafka_error(exc)
        if not (error.retriable or error.error in self.retry_on):
            raise error from exc
        return self._pause(error)

    def _pause(self, error: KafkaError) -> float:
        pause = self.backoff.next_s()
        if time.monotonic() + pause > self.deadline:
            raise KafkaError(Errors.REQUEST_TIMED_OUT,
                             f"{self.method} did not succeed within {self.timeout_s}s: {error}")
        return pause


def error_codes(response: Any) -> Iterator[int]:
    """Every error code a response carries below its own: those of the partitions, groups or
    topics it answers for (fields named error_code or partition_error_code, in nested
    dataclasses and tuples of them)."""
    for f in dataclasses.fields(response):
        value = getattr(response, f.name)
        if f.name in ("error_code", "partition_error_code"):
            if value:
                yield value
        elif isinstance(value, tuple):
            if value and dataclasses.is_dataclass(value[0]):
                for item in value:
                    yield from error_codes(item)
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            yield from error_codes(value)


def call(get_handle: Callable[[], Any], method: str, *args, timeout_s: float = 30.0,
         on_failure: Callable[[], None] | None = None, retry_on: frozenset = RETRIABLE_COORDINATOR_ERRORS,
         per_partition: bool = False) -> Any:
    """Blocking call with retries (see Retry). ``get_handle`` may look the actor up again
    after ``on_failure`` dropped a cached handle."""
    retry = Retry(method, timeout_s, retry_on, per_partition, on_failure=on_failure)
    while True:
        with retry.attempt():
            retry.response = ray.get(getattr(get_handle(), method).remote(*args), timeout=retry.remaining_s())
        if retry.pause is None:
            return retry.response
        time.sleep(retry.pause)


class ActorNotFound(KafkaError):
    """No actor has the name (yet, or any more); its error is COORDINATOR_NOT_AVAILABLE, as
    Kafka answers for a coordinator that is not there."""


async def call_async(get_handle: Callable[[], Any], method: str, *args, timeout_s: float = 30.0,
                     on_failure: Callable[[], None] | None = None,
                     retry_on: frozenset = RETRIABLE_COORDINATOR_ERRORS, per_partition: bool = False,
                     on_missing: Callable[[], Awaitable[None]] | None = None) -> Any:
    """The same, for callers inside async actors. `on_missing` (re)creates an actor that is
    created on demand, when no actor has its name."""
    retry = Retry(method, timeout_s, retry_on, per_partition, on_failure=on_failure)
    while True:
        with retry.attempt():
            if on_missing is not None:
                try:
                    get_handle()
                except ActorNotFound:
                    await on_missing()
            retry.response = await asyncio.wait_for(getattr(get_handle(), method).remote(*args), retry.remaining_s())
        if retry.pause is None:
            return retry.response
        await asyncio.sleep(retry.pause)


class ActorDirectory:
    """The named actors of one namespace as one process reaches them: each looked up once,
    dropped from the cache when a call through it fails (so that a restarted or re-created
    actor is found again), and the ones this process created kept for good, because a
    non-detached actor ends when its owner drops its last handle, even while Ray restarts it."""

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        self._cache: dict[str, Any] = {}
        self._kept: dict[str, Any] = {}
        self._lock = threading.Lock()

    def get(self, name: str) -> Any:
        with self._lock:
            handle = self._cache.get(name)
        if handle is None:
            try:
                handle = ray.get_actor(name, namespace=self.namespace)
            except ValueError:
                raise ActorNotFound(Errors.COORDINATOR_NOT_AVAILABLE, f"no actor {name} in {self.namespace}") from None
            with self._lock:
                self._cache[name] = handle
        return handle

    def keep(self, name: str, handle: Any) -> None:
        """A handle of an actor this process created."""
        with self._lock:
            self._cache[name] = handle
            self._kept[name] = handle

    def forget(self, name: str) -> None:
        with self._lock:
            self._cache.pop(name, None)

    def clear(self) -> None:
        with self._lock:
            self._cache.clear()
            self._kept.clear()

    def call(self, name: str, method: str, *args, timeout_s: float = 30.0,
             retry_on: frozenset = RETRIABLE_COORDINATOR_ERRORS, per_partition: bool = False) -> Any:
        return call(lambda: self.get(name), method, *args, timeout_s=timeout_s,
                    on_failure=lambda: self.forget(name), retry_on=retry_on, per_partition=per_partition)

    async def call_async(self, name: str, method: str, *args, timeout_s: float = 30.0,
                         retry_on: frozenset = RETRIABLE_COORDINATOR_ERRORS, per_partition: bool = False,
                         on_missing: Callable[[], Awaitable[None]] | None = None) -> Any:
        return await call_async(lambda: self.get(name), method, *args, timeout_s=timeout_s,
                                on_failure=lambda: self.forget(name), retry_on=retry_on, per_partition=per_partition,
                                on_missing=on_missing)
