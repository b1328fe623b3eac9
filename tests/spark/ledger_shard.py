"""A test shard with both compaction modes: balances (one record per account, "latest")
and counters (a snapshot plus delta updates, "delta")."""
from __future__ import annotations

from typing import NamedTuple

from runtime.codec import Record, register
from runtime.coordinator import CoordinatorContext, CoordinatorShard, Result


class BalanceKey(NamedTuple):
    account: str


class BalanceValue(NamedTuple):
    amount: int
    note: str = ""


class CounterSnapshotKey(NamedTuple):
    name: str


class CounterSnapshotValue(NamedTuple):
    total: int


class CounterUpdateKey(NamedTuple):
    name: str


class CounterUpdateValue(NamedTuple):
    add: int


register(950, BalanceKey, BalanceValue)
register(951, CounterSnapshotKey, CounterSnapshotValue)
register(952, CounterUpdateKey, CounterUpdateValue, compaction="delta", snapshot_of=951)


class LedgerShard(CoordinatorShard):
    def __init__(self, context: CoordinatorContext) -> None:
        self.context = context
        self.balances: dict[str, int] = {}
        self.counters: dict[str, int] = {}
        self.offsets: list[int] = []  # replay history: not state, compaction changes it

    def replay(self, offset: int, record: Record) -> None:
        self.offsets.append(offset)
        key, value = record.key, record.value
        if type(key) is BalanceKey:
            if value is None:
                self.balances.pop(key.account, None)
            else:
                self.balances[key.account] = value.amount
        elif type(key) is CounterSnapshotKey:
            if value is None:
                self.counters.pop(key.name, None)
            else:
                self.counters[key.name] = value.total
        elif type(key) is CounterUpdateKey:
            if value is not None:
                self.counters[key.name] = self.counters.get(key.name, 0) + value.add
        else:
            raise ValueError(f"unexpected record {type(key).__name__}")

    # write operations
    def set_balances(self, amounts: dict[str, int | None]) -> Result:
        return Result([Record(BalanceKey(a), None if v is None else BalanceValue(v)) for a, v in amounts.items()])

    def bump(self, name: str, add: int, snapshot: bool) -> Result:
        """A full snapshot of the counter, or a delta on top of the last one."""
        if snapshot:
            return Result([Record(CounterSnapshotKey(name), CounterSnapshotValue(self.counters.get(name, 0) + add))])
        return Result([Record(CounterUpdateKey(name), CounterUpdateValue(add))])

    def drop_counter(self, name: str) -> Result:
        return Result([Record(CounterSnapshotKey(name)), Record(CounterUpdateKey(name))])


DIGEST_EXCLUDE = ("offsets",)
