"""What `Producer.send` returns: a record's future, completed with its batch.

As in Kafka's producer, the records of a batch share one `ProduceRequestResult` (one latch
per batch) and each `FutureRecordMetadata` holds only its place in the batch. A future per
record that owns a lock and a condition, as `concurrent.futures.Future` does, costs the
sender a wake-up per record and the garbage collector ten objects per record; at tens of
thousands of records a second, full collections then stop the producer for a third of its time.

The futures keep `concurrent.futures.Future`'s methods (`result`, `exception`, `done`,
`add_done_callback`) and kafka-python's `get`.
"""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Callable

from runtime.errors import Errors, KafkaError

log = logging.getLogger(__name__)

__all__ = ["RecordMetadata", "ProduceRequestResult", "FutureRecordMetadata"]


@dataclass(frozen=True)
class RecordMetadata:
    topic: str
    partition: int
    offset: int
    timestamp: int
    serialized_key_size: int
    serialized_value_size: int


class ProduceRequestResult:
    """The outcome of one batch: its base offset, or the error it failed with."""

    __slots__ = ("topic", "partition", "base_offset", "error", "_done", "_lock", "_callbacks")

    def __init__(self, topic: str, partition: int) -> None:
        self.topic = topic
        self.partition = partition
        self.base_offset = -1
        self.error: KafkaError | None = None
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._callbacks: list[tuple[Callable, "FutureRecordMetadata"]] | None = []

    def complete(self, base_offset: int) -> None:
        self.base_offset = base_offset
        self._finish()

    def fail(self, error: KafkaError) -> None:
        self.error = error
        self._finish()

    def _finish(self) -> None:
        with self._lock:
            callbacks, self._callbacks = self._callbacks, None
        self._done.set()
        for fn, future in callbacks or ():
            _call(fn, future)

    def wait(self, timeout: float | None) -> None:
        if not self._done.wait(timeout):
            raise KafkaError(Errors.REQUEST_TIMED_OUT, f"no answer for {self.topic}-{self.partition} "
                                                       f"within {timeout} s")

    def add_callback(self, fn: Callable, future: "FutureRecordMetadata") -> None:
        with self._lock:
            if self._callbacks is not None:
                self._callbacks.append((fn, future))
                return
        _call(fn, future)


def _call(fn: Callable, future: "FutureRecordMetadata") -> None:
    try:
        fn(future)
    except Exception:  # as concurrent.futures: a callback's error is logged, not raised
        log.exception("a send callback failed")


class FutureRecordMetadata:
    """The metadata of one sent record, once its batch is acknowledged (or its error)."""

    __slots__ = ("_result", "_index", "_timestamp", "_key_size", "_value_size")

    def __init__(self, result: ProduceRequestResult, index: int, timestamp: int, key_size: int,
                 value_size: int) -> None:
        self._result = result
        self._index = index
        self._timestamp = timestamp
        self._key_size = key_size
        self._value_size = value_size

    def result(self, timeout: float | None = None) -> RecordMetadata:
        self._result.wait(timeout)
        if self._result.error is not None:
            raise self._result.error
        r = self._result
        return RecordMetadata(r.topic, r.partition, r.base_offset + self._index, self._timestamp,
                              self._key_size, self._value_size)

    def get(self, timeout: float | None = None) -> RecordMetadata:
        """kafka-python's name for waiting on the result."""
        return self.result(timeout)

    def exception(self, timeout: float | None = None) -> KafkaError | None:
        self._result.wait(timeout)
        return self._result.error

    def done(self) -> bool:
        return self._result._done.is_set()

    def add_done_callback(self, fn: Callable[["FutureRecordMetadata"], None]) -> None:
        """Call ``fn(future)`` once the record is acknowledged or failed: at once if it is,
        otherwise on the producer's sender thread."""
        self._result.add_callback(fn, self)

    def cancel(self) -> bool:
        return False  # a record handed to the producer is sent

    def cancelled(self) -> bool:
        return False

    def running(self) -> bool:
        return not self.done()
