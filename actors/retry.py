"""Calling actors the way Kafka clients call brokers: retriable failures (actor death or
restart, NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS, and the
response's own retriable error codes) are retried with exponential backoff until a deadline."""
from __future__ import annotations

import asyncio
import time
from typing import Any, Callable

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


async def call_async(get_handle: Callable[[], Any], method: str, *args, timeout_s: float = 30.0,
                     on_failure: Callable[[], None] | None = None,
                     retry_on: frozenset = RETRIABLE_COORDINATOR_ERRORS) -> Any:
    """The same, for callers inside async actors."""
    deadline = time.monotonic() + timeout_s
    backoff = Backoff()
    while True:
        try:
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
