"""Compaction of a real group coordinator log: the loaded state is the same after."""
from __future__ import annotations

import pytest

from runtime.group.shard import GroupCoordinatorShard
from runtime.log import read_manifest
from runtime.testing import ShardHarness
from spark_bridge.compaction import compact_log, load_shard, state_differences, state_digest
from tests.group.helpers import commit, leave, stable_group

pytestmark = pytest.mark.spark

T0 = 1_700_000_000_000
LOG = "__consumer_offsets-5"


def group_log(tmp_path) -> str:
    h = ShardHarness(str(tmp_path / LOG), GroupCoordinatorShard, name=LOG, partition=5, now_ms=T0,
                     config={"segment.bytes": 800})
    gen = stable_group(h, ("a", "b"))
    for i in range(40):
        commit(h, {("events", i % 4): i, ("audit", 0): 2 * i}, member_id="a" if i % 2 else "b", generation=gen)
        h.advance(50)
    leave(h, "b")
    h.advance(10_000)
    h.runtime.close()
    return str(tmp_path / LOG)


def test_compacted_group_log_loads_the_same_state(spark, tmp_path):
    directory = group_log(tmp_path)
    before, loaded, _ = load_shard(directory, GroupCoordinatorShard, now_ms=T0 + 60_000)
    assert len(read_manifest(directory).segments) > 3

    result = compact_log(spark, directory, now_ms=T0 + 60_000)

    after, reloaded, _ = load_shard(directory, GroupCoordinatorShard, now_ms=T0 + 60_000)
    assert result.status == "compacted" and reloaded.records < loaded.records
    assert state_differences(before, after) == []
    assert state_digest(after) == state_digest(before)


def test_simple_group_state_survives_compaction(spark, tmp_path):
    h = ShardHarness(str(tmp_path / LOG), GroupCoordinatorShard, name=LOG, partition=5, now_ms=T0,
                     config={"segment.bytes": 600})
    for i in range(20):
        commit(h, {("events", 0): i}, group="simple")
        h.advance(100)
    h.runtime.close()
    before = load_shard(str(tmp_path / LOG), GroupCoordinatorShard)[0]
    compact_log(spark, str(tmp_path / LOG), now_ms=T0)
    assert state_differences(before, load_shard(str(tmp_path / LOG), GroupCoordinatorShard)[0]) == []
