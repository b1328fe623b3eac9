"""Calling actors the way Kafka clients call brokers: retriable failures (actor death or
restart, NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS, and the
response's own retriable error codes) are retried with exponential backoff until a deadline."""
from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, Awaitable, Callable

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


def _retriable_response(response: Any, retry_on: frozenset) -> KafkaError | None:
    code = getattr(response, "error_code", 0)
    if code:
        error = Errors.for_code(code)
        if error in retry_on:
            return KafkaError(error, getattr(response, "error_message", None))
    return None


def call(get_handle: Callable[[], Any], method: str, *args, timeout_s: float = 30.0,
         on_failure: Callable[[], None] | None = None, retry_on: frozenset = RETRIABLE_COORDINATOR_ERRORS) -> Any:
    """Blocking call with retries. ``get_handle`` may look the actor up again after
    ``on_failure`` dropped a cached handle."""
    deadline = time.monotonic() + timeout_s
    backoff = Backoff()
    while True:
        try:
            ref = getattr(get_handle(), method).remote(*args)
            response = ray.get(ref, timeout=max(deadline - time.monotonic(), 0.001))
            error = _retriable_response(response, retry_on)
            if error is None:
                return response
        except Exception as e:
            error = to_kafka_error(e)
            if on_failure is not None:
                on_failure()
            if not (error.retriable or error.error in retry_on):
                raise error from e
        pause = backoff.next_s()
        if time.monotonic() + pause > deadline:
            raise KafkaError(Errors.REQUEST_TIMED_OUT, f"{method} did not succeed within {timeout_s}s: {error}")
        time.sleep(pause)


class ActorNotFound(KafkaError):
    """No actor has the name (yet, or any more); its error is COORDINATOR_NOT_AVAILABLE, as
    Kafka answers for a coordinator that is not there."""


async def call_async(get_handle: Callable[[], Any], method: str, *args, timeout_s: float = 30.0,
                     on_failure: Callable[[], None] | None = None,
                     retry_on: frozenset = RETRIABLE_COORDINATOR_ERRORS,
                     on_missing: Callable[[], Awaitable[None]] | None = None) -> Any:
    """The same, for callers inside async actors. `on_missing` (re)creates an actor that is
    created on demand, when no actor has its name."""
    deadline = time.monotonic() + timeout_s
    backoff = Backoff()
    while True:
        try:
            if on_missing is not None:
                try:
                    get_handle()
                except ActorNotFound:
                    await on_missing()
            response = await asyncio.wait_for(getattr(get_handle(), method).remote(*args),
                                              max(deadline - time.monotonic(), 0.001))
            error = _retriable_response(response, retry_on)
            if error is None:
                return response
        except asyncio.CancelledError:
            raise
        except Exception as e:
            error = to_kafka_error(e) if not isinstance(e, asyncio.TimeoutError) else KafkaError(
                Errors.REQUEST_TIMED_OUT, f"{method} timed out")
            if on_failure is not None:
                on_failure()
            if not (error.retriable or error.error in retry_on):
                raise error from e
        pause = backoff.next_s()
        if time.monotonic() + pause > deadline:
            raise KafkaError(Errors.REQUEST_TIMED_OUT, f"{method} did not succeed within {timeout_s}s: {error}")
        await asyncio.sleep(pause)


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
             retry_on: frozenset = RETRIABLE_COORDINATOR_ERRORS) -> Any:
        return call(lambda: self.get(name), method, *args, timeout_s=timeout_s,
                    on_failure=lambda: self.forget(name), retry_on=retry_on)

    async def call_async(self, name: str, method: str, *args, timeout_s: float = 30.0,
                         retry_on: frozenset = RETRIABLE_COORDINATOR_ERRORS,
                         on_missing: Callable[[], Awaitable[None]] | None = None) -> Any:
        return await call_async(lambda: self.get(name), method, *args, timeout_s=timeout_s,
                                on_failure=lambda: self.forget(name), retry_on=retry_on, on_missing=on_missing)
