"""A tiny shard for testing the runtime: a durable dict whose entries may expire."""
from __future__ import annotations

from typing import NamedTuple

from runtime.codec import Record, register
from runtime.coordinator import CoordinatorContext, CoordinatorShard, Deferred, Result
from runtime.errors import Errors, raise_if


class KvKey(NamedTuple):
    key: str


class KvValue(NamedTuple):
    value: int
    note: str = ""
    expires_at: int = -1  # -1: never


register(900, KvKey, KvValue)


def expiry_key(key: str) -> str:
    return f"expire-{key}"


class KvShard(CoordinatorShard):
    def __init__(self, context: CoordinatorContext) -> None:
        self.context = context
        self.data: dict[str, int] = {}
        self.expiries: dict[str, int] = {}
        self.offsets: list[int] = []
        self.loaded_at: int | None = None
        self.unloaded = False

    def replay(self, offset: int, record: Record) -> None:
        self.offsets.append(offset)
        key = record.key.key
        if record.value is None:
            self.data.pop(key, None)
            self.expiries.pop(key, None)
        else:
            self.data[key] = record.value.value
            if record.value.expires_at >= 0:
                self.expiries[key] = record.value.expires_at
            else:
                self.expiries.pop(key, None)

    def on_loaded(self, now_ms: int) -> None:
        # Timers are soft state: rebuild them from the hard state, as Kafka's onLoaded does
        # for session timeouts.
        self.loaded_at = now_ms
        for key, deadline in self.expiries.items():
            self._schedule_expiry(key, deadline)

    def on_unloaded(self) -> None:
        self.unloaded = True

    def state(self) -> tuple:
        return dict(self.data), dict(self.expiries)

    # write operations
    def put(self, key: str, value: int, now_ms: int, expires_at: int = -1) -> Result:
        raise_if(not key, Errors.INVALID_REQUEST, "empty key")
        if expires_at >= 0:
            self._schedule_expiry(key, expires_at)
        else:
            self.context.timer.cancel(expiry_key(key))
        return Result([Record(KvKey(key), KvValue(value, "", expires_at))], f"put {key}")

    def put_many(self, items: dict[str, int]) -> Result:
        raise_if(any(not k for k in items), Errors.INVALID_REQUEST, "empty key")
        return Result([Record(KvKey(k), KvValue(v)) for k, v in items.items()], len(items))

    def delete(self, key: str) -> Result:
        raise_if(key not in self.data, Errors.RESOURCE_NOT_FOUND, key)
        self.context.timer.cancel(expiry_key(key))
        return Result([Record(KvKey(key))], f"deleted {key}")

    def get(self, key: str) -> Result:
        """A write operation without records: its answer rests on the pending batch."""
        raise_if(key not in self.data, Errors.RESOURCE_NOT_FOUND, key)
        return Result([], self.data[key])

    def expire_later(self, key: str, deadline_ms: int) -> Result:
        self._schedule_expiry(key, deadline_ms)
        return Result([], "scheduled")

    def _schedule_expiry(self, key: str, deadline_ms: int) -> None:
        self.context.timer.schedule(expiry_key(key), deadline_ms, lambda now: self._expire(key))

    def _expire(self, key: str) -> Result:
        if key not in self.data:
            return Result()
        return Result([Record(KvKey(key))], None, [(("wait", key), f"{key} expired")])

    def wait_for_expiry(self, key: str) -> Result:
        return Result([], Deferred(("wait", key)))

    def fail_wait(self, key: str) -> Result:
        return Result([], "failed", [(("wait", key), Errors.REBALANCE_IN_PROGRESS.exception("woken"))])
