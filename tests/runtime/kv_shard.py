"""A tiny shard for testing the runtime: a durable dict with an expiry timer."""
from __future__ import annotations

from typing import NamedTuple

from runtime.codec import Record, register
from runtime.coordinator import CoordinatorContext, Deferred, Result
from runtime.errors import Errors, raise_if


class KvKey(NamedTuple):
    key: str


class KvValue(NamedTuple):
    value: int
    note: str = ""


register(900, KvKey, KvValue)


class KvShard:
    def __init__(self, context: CoordinatorContext) -> None:
        self.context = context
        self.data: dict[str, int] = {}
        self.offsets: list[int] = []
        self.loaded_at: int | None = None

    def replay(self, offset: int, record: Record) -> None:
        self.offsets.append(offset)
        if record.value is None:
            self.data.pop(record.key.key, None)
        else:
            self.data[record.key.key] = record.value.value

    def on_loaded(self, now_ms: int) -> None:
        self.loaded_at = now_ms

    # write operations
    def put(self, key: str, value: int, now_ms: int) -> Result:
        raise_if(not key, Errors.INVALID_REQUEST, "empty key")
        return Result([Record(KvKey(key), KvValue(value))], f"put {key}")

    def delete(self, key: str) -> Result:
        raise_if(key not in self.data, Errors.RESOURCE_NOT_FOUND, key)
        return Result([Record(KvKey(key))], f"deleted {key}")

    def expire_later(self, key: str, deadline_ms: int) -> Result:
        self.context.timer.schedule(f"expire-{key}", deadline_ms, lambda now: self._expire(key))
        return Result([], "scheduled")

    def _expire(self, key: str) -> Result:
        if key not in self.data:
            return Result()
        return Result([Record(KvKey(key))], None, [(("wait", key), f"{key} expired")])

    def wait_for_expiry(self, key: str) -> Result:
        return Result([], Deferred(("wait", key)))
