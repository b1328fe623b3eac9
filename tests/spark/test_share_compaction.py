"""Compaction of a real share-group state log (ShareSnapshot + ShareUpdate deltas): the
share coordinator loads the same state after."""
from __future__ import annotations

import pytest

from runtime.log import read_manifest
from runtime.messages.share_state import (InitializeShareGroupStateRequest, InitializeStateData,
                                          InitializeStatePartitionData, ReadShareGroupStateRequest, ReadStateData,
                                          ReadStatePartitionData, WriteShareGroupStateRequest, WriteStateData,
                                          WriteStatePartitionData)
from runtime.share_state.coordinator import ShareCoordinatorShard
from runtime.share_state.records import PersisterStateBatch
from runtime.testing import ShardHarness
from spark_bridge.compaction import compact_log, load_shard, state_differences

pytestmark = pytest.mark.spark

T0 = 1_700_000_000_000
LOG = "__share_group_state-2"
G, TOPIC = "sg", "topic-id-1"
CONFIG = {"share.coordinator.snapshot.update.records.per.snapshot": 4, "segment.bytes": 600}


def initialize(h, partition, state_epoch):
    request = InitializeShareGroupStateRequest(G, (InitializeStateData(TOPIC, (
        InitializeStatePartitionData(partition, state_epoch, 0),)),))
    h.call(lambda s, now: s.initialize_share_group_state(request, now))


def read(h, partition, leader_epoch):
    request = ReadShareGroupStateRequest(G, (ReadStateData(TOPIC, (ReadStatePartitionData(partition, leader_epoch),)),))
    h.call(lambda s, now: s.read_share_group_state(request, now))


def write(h, partition, step, leader_epoch, state_epoch=1):
    batches = (PersisterStateBatch(step, step + 1, 2, 1), PersisterStateBatch(step + 2, step + 4, 0, 1 + step % 3))
    request = WriteShareGroupStateRequest(G, (WriteStateData(TOPIC, (WriteStatePartitionData(
        partition, state_epoch, leader_epoch, step, -1, batches),)),))
    h.call(lambda s, now: s.write_share_group_state(request, now))


def share_log(tmp_path) -> ShardHarness:
    h = ShardHarness(str(tmp_path / LOG), ShareCoordinatorShard, name=LOG, partition=2, now_ms=T0, config=CONFIG)
    for p in (0, 1):
        initialize(h, p, 1)
        read(h, p, 1)
    for step in range(30):
        write(h, step % 2, step, 1)
        if step == 15:
            read(h, 0, 2)
        h.advance(10)
    return h


def compacted_differences(spark, h) -> list[str]:
    h.runtime.close()
    directory = h.directory
    before = load_shard(directory, ShareCoordinatorShard, config=CONFIG)[0]
    assert len(read_manifest(directory).segments) > 3
    result = compact_log(spark, directory, now_ms=h.clock())
    assert result.status == "compacted" and result.records_out < result.records_in
    return state_differences(before, load_shard(directory, ShareCoordinatorShard, config=CONFIG)[0])


def test_compacted_share_state_log_loads_the_same_state(spark, tmp_path):
    assert compacted_differences(spark, share_log(tmp_path)) == []


def test_reinitialised_share_partition_keeps_its_fencing_epoch(spark, tmp_path):
    h = share_log(tmp_path)
    initialize(h, 0, 2)  # a new state epoch: a fresh snapshot with leader epoch 0
    for step in range(30, 40):
        write(h, 1, step, 1)
    assert compacted_differences(spark, h) == []
