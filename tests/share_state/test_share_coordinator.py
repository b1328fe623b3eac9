"""The share coordinator shard: every RPC and error, snapshot cadence, reload, a failed disk."""
from __future__ import annotations

import itertools

import pytest

from runtime.codec import Record
from runtime.errors import Errors, KafkaError
from runtime.hashing import partition_for, state_partition_for
from runtime.messages.share_state import (
    DeleteShareGroupStateRequest, DeleteShareGroupStateResponse, DeleteStateData, DeleteStatePartitionData,
    DeleteStatePartitionResult, DeleteStateResult, InitializeShareGroupStateRequest,
    InitializeShareGroupStateResponse, InitializeStateData, InitializeStatePartitionData,
    InitializeStatePartitionResult, InitializeStateResult, ReadShareGroupStateRequest, ReadShareGroupStateResponse,
    ReadShareGroupStateSummaryRequest, ReadShareGroupStateSummaryResponse, ReadStateData, ReadStatePartitionData,
    ReadStatePartitionResult, ReadStateResult, ReadStateSummaryData, ReadStateSummaryPartitionData,
    ReadStateSummaryPartitionResult, ReadStateSummaryResult, WriteShareGroupStateRequest,
    WriteShareGroupStateResponse, WriteStateData, WriteStatePartitionData, WriteStatePartitionResult,
    WriteStateResult,
)
from runtime.share_state.coordinator import ShareCoordinatorShard
from runtime.share.partition import SharePartition, SharePartitionState
from runtime.share_state.records import (
    PersisterStateBatch as B, ShareSnapshotKey, ShareSnapshotValue, ShareUpdateKey, ShareUpdateValue,
)
from runtime.testing import ShardHarness

G, T, T2 = "sg", "topic-id-1", "topic-id-2"
AVAILABLE, ACKED, ARCHIVED = 0, 2, 4
NOW = 1_000
INVALID = Errors.INVALID_REQUEST.code


@pytest.fixture
def h(tmp_path):
    return ShardHarness(str(tmp_path), ShareCoordinatorShard, now_ms=NOW,
                        config={"share.coordinator.snapshot.update.records.per.snapshot": 3})


def run(h, op):
    """Run a write operation; return its response and the exact records it wrote."""
    results = []

    def capture(shard, now):
        results.append(op(shard, now))
        return results[-1]

    response = h.call(capture)
    return response, list(results[0].records)


def state(h):
    s = h.shard
    return dict(s.states), dict(s.updates_since_snapshot), dict(s.leader_epochs), dict(s.state_epochs)


def assert_reload_keeps_state(h):
    before = state(h)
    h.reload()
    assert state(h) == before


def initialize(h, partitions, group=G, topic=T):
    request = InitializeShareGroupStateRequest(group, (InitializeStateData(topic, tuple(
        InitializeStatePartitionData(p, state_epoch, start) for p, state_epoch, start in partitions)),))
    return run(h, lambda s, now: s.initialize_share_group_state(request, now))


def write(h, partition, batches=(), *, start=-1, leader_epoch=0, state_epoch=0, count=-1, topic=T):
    request = WriteShareGroupStateRequest(G, (WriteStateData(topic, (WriteStatePartitionData(
        partition, state_epoch, leader_epoch, start, count, tuple(batches)),)),))
    return run(h, lambda s, now: s.write_share_group_state(request, now))


def read(h, partition, leader_epoch=0, topic=T):
    request = ReadShareGroupStateRequest(G, (ReadStateData(topic, (ReadStatePartitionData(partition, leader_epoch),)),))
    return run(h, lambda s, now: s.read_share_group_state(request, now))


def summary(h, *partitions, topic=T):
    request = ReadShareGroupStateSummaryRequest(G, (ReadStateSummaryData(topic, tuple(
        ReadStateSummaryPartitionData(p, 0) for p in partitions)),))
    return h.read(lambda s: s.read_share_group_state_summary(request))


def delete(h, *partitions):
    request = DeleteShareGroupStateRequest(G, (DeleteStateData(T, tuple(DeleteStatePartitionData(p) for p in partitions)),))
    return run(h, lambda s, now: s.delete_share_group_state(request, now))


def only(response):
    (topic,) = response.results
    (partition,) = topic.partitions
    return partition


def snapshot(partition, value, topic=T):
    return Record(ShareSnapshotKey(G, topic, partition), value)


def update(partition, value, topic=T):
    return Record(ShareUpdateKey(G, topic, partition), value)


# ---------------------------------------------------------------- initialize

def test_initialize_writes_a_snapshot_and_read_returns_it(h):
    response, records = initialize(h, [(0, 3, 100), (1, 3, -1)])
    assert response == InitializeShareGroupStateResponse((InitializeStateResult(T, (
        InitializeStatePartitionResult(0), InitializeStatePartitionResult(1))),))
    assert records == [snapshot(0, ShareSnapshotValue(0, 3, 0, 100, 0, NOW, NOW, ())),
                       snapshot(1, ShareSnapshotValue(0, 3, 0, -1, -1, NOW, NOW, ()))]
    response, records = read(h, 0, leader_epoch=-1)
    assert records == []
    assert response == ReadShareGroupStateResponse((ReadStateResult(T, (
        ReadStatePartitionResult(0, state_epoch=3, start_offset=100),)),))
    assert only(read(h, 1, leader_epoch=-1)[0]).start_offset == -1
    assert_reload_keeps_state(h)


def test_reinitialize_replaces_the_state_with_a_new_snapshot_epoch(h):
    initialize(h, [(0, 1, 0)])
    write(h, 0, [B(0, 9, ACKED, 1)], start=0, leader_epoch=-1, state_epoch=1)
    h.clock.now_ms = NOW + 5
    response, records = initialize(h, [(0, 2, 50)])
    assert only(response).error_code == 0
    assert records == [snapshot(0, ShareSnapshotValue(1, 2, 0, 50, 0, NOW + 5, NOW + 5, ()))]
    assert only(read(h, 0, leader_epoch=-1)[0]) == ReadStatePartitionResult(0, state_epoch=2, start_offset=50)
    assert_reload_keeps_state(h)


def test_initialize_with_an_older_state_epoch_is_fenced(h):
    initialize(h, [(0, 5, 0)])
    before = state(h)
    response, records = initialize(h, [(0, 4, 10)])
    assert records == []
    assert only(response).error_code == Errors.FENCED_STATE_EPOCH.code
    assert state(h) == before


@pytest.mark.parametrize("partition, state_epoch, start", [(-1, 0, 0), (0, -1, 0), (0, 0, -2)])
def test_initialize_rejects_bad_input_and_serves_the_other_partitions(h, partition, state_epoch, start):
    response, records = initialize(h, [(partition, state_epoch, start), (7, 0, 0)])
    bad, good = response.results[0].partitions
    assert (bad.partition, bad.error_code) == (partition, INVALID)
    assert bad.error_message
    assert good == InitializeStatePartitionResult(7)
    assert records == [snapshot(7, ShareSnapshotValue(0, 0, 0, 0, 0, NOW, NOW, ()))]
    assert list(h.shard.states) == [(G, T, 7)]


# ---------------------------------------------------------------- read

def test_read_of_an_uninitialized_share_partition_is_invalid_request(h):
    response, records = read(h, 0)
    assert records == []
    assert only(response) == ReadStatePartitionResult(
        0, INVALID, "Read operation on uninitialized share partition not allowed.")
    assert state(h) == ({}, {}, {}, {})


def test_read_with_a_newer_leader_epoch_records_it_and_fences_the_old_leader(h):
    initialize(h, [(0, 0, 10)])
    write(h, 0, [B(10, 14, AVAILABLE, 1)], start=10, leader_epoch=-1)
    response, records = read(h, 0, leader_epoch=4)
    assert only(response) == ReadStatePartitionResult(0, state_epoch=0, start_offset=10,
                                                      state_batches=(B(10, 14, AVAILABLE, 1),))
    assert records == [update(0, ShareUpdateValue(0, 4, 10, 0, ()))]
    assert h.shard.leader_epochs[(G, T, 0)] == 4

    assert read(h, 0, leader_epoch=-1)[1] == []  # no epoch: never fenced, nothing recorded
    before = state(h)
    response, records = read(h, 0, leader_epoch=3)
    assert records == []
    assert only(response).error_code == Errors.FENCED_LEADER_EPOCH.code
    assert only(response).state_batches == ()
    response, records = write(h, 0, [B(15, 15, ACKED, 1)], leader_epoch=3)
    assert records == []
    assert only(response).error_code == Errors.FENCED_LEADER_EPOCH.code
    assert state(h) == before
    assert_reload_keeps_state(h)


def test_a_reinitialised_partition_keeps_fencing_old_leaders(h):
    initialize(h, [(0, 0, 0)])
    read(h, 0, leader_epoch=6)
    initialize(h, [(0, 1, 0)])
    # The new snapshot carries the highest leader epoch (Kafka writes 0 and keeps the fence
    # only in memory, where a compaction of the log would lose it).
    assert h.shard.states[(G, T, 0)].leader_epoch == 6
    assert only(read(h, 0, leader_epoch=5)[0]).error_code == Errors.FENCED_LEADER_EPOCH.code
    h.reload()
    assert only(read(h, 0, leader_epoch=5)[0]).error_code == Errors.FENCED_LEADER_EPOCH.code


def load(h, partition=0):
    """A SharePartition loading as the SharePartition actor does: it claims the leader epoch
    after the one the summary shows, reads with it, and loads what it read. Returns it and
    the records its read wrote."""
    sp = SharePartition(G, T, partition, leader_epoch=only(summary(h, partition)).leader_epoch + 1)
    response, records = run(h, lambda s, now: s.read_share_group_state(sp.read_request(), now))
    sp.initialize(only(response), NOW, reset_offset=0)
    return sp, records


def test_a_read_with_the_recorded_leader_epoch_is_fenced(h):
    """Two SharePartitions that load from one summary claim the same leader epoch: the first
    read records it, the second is fenced, writes nothing, and the SharePartition that made
    it does not load (NOT_LEADER_OR_FOLLOWER), so it never writes as a second owner."""
    initialize(h, [(0, 0, 10)])
    first = SharePartition(G, T, 0, leader_epoch=only(summary(h, 0)).leader_epoch + 1)
    second = SharePartition(G, T, 0, leader_epoch=only(summary(h, 0)).leader_epoch + 1)
    assert first.leader_epoch == second.leader_epoch == 1

    response, records = run(h, lambda s, now: s.read_share_group_state(first.read_request(), now))
    assert records == [update(0, ShareUpdateValue(0, 1, 10, 0, ()))]
    first.initialize(only(response), NOW)
    before = state(h)
    response, records = run(h, lambda s, now: s.read_share_group_state(second.read_request(), now))
    assert records == []
    assert response == ReadShareGroupStateResponse((ReadStateResult(T, (ReadStatePartitionResult(
        0, Errors.FENCED_LEADER_EPOCH.code,
        "Leader epoch 1 is the current leader's already: a new leader reads with a newer one."),)),))
    assert state(h) == before
    with pytest.raises(KafkaError) as e:
        second.initialize(only(response), NOW)
    assert e.value.error is Errors.NOT_LEADER_OR_FOLLOWER
    assert (first.state, second.state) == (SharePartitionState.ACTIVE, SharePartitionState.FAILED)
    # The first is the one owner: its writes are taken, with the epoch it read with.
    assert only(write(h, 0, [B(10, 12, ACKED, 1)], start=10, leader_epoch=1, count=3)[0]).error_code == 0
    assert_reload_keeps_state(h)
    # The recorded epoch survives a restart of the share coordinator.
    assert only(read(h, 0, leader_epoch=1)[0]).error_code == Errors.FENCED_LEADER_EPOCH.code


def test_a_share_partition_loading_after_a_restart_takes_over(h):
    """The load path still works: a fresh SharePartition (after its actor, or the share
    coordinator, restarted) claims the next epoch, loads, and fences the one before it."""
    initialize(h, [(0, 0, 0)])
    old, records = load(h)
    assert (old.leader_epoch, old.state, records) == (1, SharePartitionState.ACTIVE,
                                                      [update(0, ShareUpdateValue(0, 1, 0, 0, ()))])
    write(h, 0, [B(0, 4, ACKED, 1), B(5, 9, AVAILABLE, 1)], start=0, leader_epoch=1, count=5)
    h.reload()  # the share coordinator restarts as well
    new, records = load(h)
    assert (new.leader_epoch, new.state, new.start_offset) == (2, SharePartitionState.ACTIVE, 5)
    assert records == [update(0, ShareUpdateValue(0, 2, 0, 5, ()))]  # the stored start offset
    assert only(write(h, 0, [B(5, 5, ACKED, 2)], start=5, leader_epoch=1)[0]).error_code == (
        Errors.FENCED_LEADER_EPOCH.code)
    assert only(write(h, 0, [B(5, 5, ACKED, 2)], start=5, leader_epoch=2)[0]).error_code == 0
    # And once more, with the coordinator up all along.
    assert load(h)[0].leader_epoch == 3


# ---------------------------------------------------------------- write

def test_write_of_an_uninitialized_share_partition_is_invalid_request(h):
    response, records = write(h, 0, [B(0, 0, ACKED, 1)], start=0)
    assert records == []
    assert only(response) == WriteStatePartitionResult(
        0, INVALID, "Write operation on uninitialized share partition not allowed.")


def test_write_records_an_update_with_merged_pruned_batches(h):
    initialize(h, [(0, 0, 0)])
    batches = [B(8, 12, ACKED, 1), B(0, 9, AVAILABLE, 1), B(13, 20, ACKED, 1)]
    response, records = write(h, 0, batches, start=5, count=3)
    assert response == WriteShareGroupStateResponse((WriteStateResult(T, (WriteStatePartitionResult(0),)),))
    assert records == [update(0, ShareUpdateValue(0, 0, 5, 3, (B(5, 7, AVAILABLE, 1), B(8, 20, ACKED, 1))))]
    assert h.shard.states[(G, T, 0)] == ShareSnapshotValue(
        0, 0, 0, 5, 3, NOW, NOW, (B(5, 7, AVAILABLE, 1), B(8, 20, ACKED, 1)))

    # A later write: the newer state of each offset wins; -1 keeps the start offset and count.
    write(h, 0, [B(5, 6, AVAILABLE, 2), B(7, 7, ARCHIVED, 1)])
    assert h.shard.states[(G, T, 0)].state_batches == (
        B(5, 6, AVAILABLE, 2), B(7, 7, ARCHIVED, 1), B(8, 20, ACKED, 1))
    assert h.shard.states[(G, T, 0)].delivery_complete_count == 3
    # Moving the start offset drops what lies below it.
    write(h, 0, [], start=8, count=0)
    assert h.shard.states[(G, T, 0)].state_batches == (B(8, 20, ACKED, 1),)
    assert only(summary(h, 0)) == ReadStateSummaryPartitionResult(
        0, state_epoch=0, leader_epoch=0, start_offset=8, delivery_complete_count=0)
    assert_reload_keeps_state(h)


def test_a_late_write_does_not_take_the_start_offset_back(h):
    """Writes retried across a coordinator restart arrive in any order: the older one's lower
    start offset and its states below the newer start offset are not taken."""
    initialize(h, [(0, 0, 0)])
    write(h, 0, [B(10, 19, ACKED, 1)], start=10, count=10)  # sent second, arrived first
    write(h, 0, [B(5, 12, AVAILABLE, 1)], start=5, count=0)  # sent first
    state = h.shard.states[(G, T, 0)]
    assert state.start_offset == 10
    assert state.state_batches == (B(10, 19, ACKED, 1),)  # acknowledged beats available at one count
    assert_reload_keeps_state(h)


def test_a_late_write_does_not_take_the_delivery_complete_count_back(h):
    """The count is of the records past the start offset that are ACKNOWLEDGED or ARCHIVED, as
    the SharePartition saw them when it began the write. At one start offset it only grows (a
    settled record stays settled), so the larger count is the newer; a write with a higher
    start offset was begun later (the start offset never moves back) and its count is taken
    even when smaller; one with a lower start offset is older and its count is not taken."""
    initialize(h, [(0, 0, 0)])
    # Offset 0 is held; 1-3 are acknowledged, then 4-6: the second write's count has both.
    write(h, 0, [B(4, 6, ACKED, 1)], start=0, count=6)  # begun second, applied first
    response, records = write(h, 0, [B(1, 3, ACKED, 1)], start=0, count=3)
    assert only(response).error_code == 0
    assert records == [update(0, ShareUpdateValue(0, 0, 0, 3, (B(1, 3, ACKED, 1),)))]  # what was written
    assert only(summary(h, 0)) == ReadStateSummaryPartitionResult(
        0, state_epoch=0, leader_epoch=0, start_offset=0, delivery_complete_count=6)
    # 0 is acknowledged: the start offset moves to 7, and 7 is held. 8 is rejected: a write
    # begun at start offset 7 with a count of 1, below the stored 7, and taken.
    write(h, 0, [B(0, 0, ACKED, 1)], start=0, count=7)
    write(h, 0, [B(8, 8, ARCHIVED, 1)], start=7, count=1)
    assert only(summary(h, 0)).delivery_complete_count == 1
    # The write that acknowledged 0 is applied again (retried across a restart): still 1.
    write(h, 0, [B(0, 0, ACKED, 1)], start=0, count=7)
    assert (only(summary(h, 0)).start_offset, only(summary(h, 0)).delivery_complete_count) == (7, 1)
    assert_reload_keeps_state(h)
    # A write that moves the start offset without a count leaves the count unknown, rather
    # than one that counted records the start offset has passed.
    write(h, 0, [B(7, 7, ACKED, 1)], start=9)
    assert (only(summary(h, 0)).start_offset, only(summary(h, 0)).delivery_complete_count) == (9, -1)
    assert_reload_keeps_state(h)


def test_the_delivery_complete_count_is_the_newest_whatever_order_writes_arrive_in(tmp_path):
    """One SharePartition's writes, in the order it began them, each with the start offset and
    count it had then (offsets 0-9 acquired, 9 held throughout). Applied in any order, the
    share coordinator ends with the newest start offset and count: the lag never goes back to
    an older write's."""
    begun = [
        ([B(1, 3, ACKED, 1)], 0, 3),
        ([B(4, 6, ACKED, 1)], 0, 6),  # its count has the first write's records, still pending
        ([B(0, 0, ACKED, 1)], 0, 7),  # all three commit: the start offset moves to 7
        ([B(8, 8, ARCHIVED, 1)], 7, 1),
        ([B(7, 7, ACKED, 1)], 7, 2),
    ]
    for i, order in enumerate(itertools.permutations(begun)):
        h = ShardHarness(str(tmp_path / str(i)), ShareCoordinatorShard, now_ms=NOW,
                         config={"share.coordinator.snapshot.update.records.per.snapshot": 3})
        initialize(h, [(0, 0, 0)])
        for batches, start, count in order:
            write(h, 0, batches, start=start, count=count)
        assert only(summary(h, 0)) == ReadStateSummaryPartitionResult(
            0, state_epoch=0, leader_epoch=0, start_offset=7, delivery_complete_count=2), order
        assert h.shard.states[(G, T, 0)].state_batches == (B(7, 7, ACKED, 1), B(8, 8, ARCHIVED, 1))
        assert_reload_keeps_state(h)
        h.runtime.close()


def test_write_does_not_raise_the_leader_epoch(h):
    # Kafka 4.2 (KAFKA-19456, apache/kafka#20079): only a read records a leader epoch; a
    # write is fenced by it but keeps the recorded one, in its update and in a snapshot.
    initialize(h, [(0, 0, 0)])
    read(h, 0, leader_epoch=2)
    response, records = write(h, 0, [B(0, 0, ACKED, 1)], leader_epoch=9)
    assert only(response).error_code == 0
    assert records[0].value.leader_epoch == 2
    assert h.shard.leader_epochs[(G, T, 0)] == 2
    assert only(write(h, 0, [B(1, 1, ACKED, 1)], leader_epoch=5)[0]).error_code == 0
    assert only(write(h, 0, [B(2, 2, ACKED, 1)], leader_epoch=1)[0]).error_code == Errors.FENCED_LEADER_EPOCH.code
    # Past the snapshot cadence: the snapshot keeps the read's epoch too.
    written = [r for _ in range(3) for r in write(h, 0, [B(3, 3, ACKED, 1)], leader_epoch=9)[1]]
    snapshots = [r.value for r in written if type(r.key) is ShareSnapshotKey]
    assert snapshots and {v.leader_epoch for v in snapshots} == {2}
    assert h.shard.states[(G, T, 0)].leader_epoch == 2
    assert only(summary(h, 0)).leader_epoch == 2
    assert_reload_keeps_state(h)


def test_write_with_a_stale_state_epoch_is_fenced_and_changes_nothing(h):
    initialize(h, [(0, 2, 0)])
    before = state(h)
    response, records = write(h, 0, [B(0, 5, ACKED, 1)], state_epoch=1)
    assert records == []
    assert only(response).error_code == Errors.FENCED_STATE_EPOCH.code
    assert state(h) == before
    # A newer or unspecified state epoch is accepted.
    assert only(write(h, 0, [B(0, 0, ACKED, 1)], state_epoch=3)[0]).error_code == 0
    assert only(write(h, 0, [B(1, 1, ACKED, 1)], state_epoch=-1)[0]).error_code == 0


@pytest.mark.parametrize("kwargs, batches", [
    ({"start": -2}, []),
    ({"leader_epoch": -2}, []),
    ({"state_epoch": -5}, []),
    ({"count": -2}, []),
    ({}, [B(-1, 3, ACKED, 1)]),
    ({}, [B(5, 3, ACKED, 1)]),
    ({}, [B(0, 3, 3, 1)]),  # 3 is no delivery state
    ({}, [B(0, 3, 7, 1)]),
    ({}, [B(0, 3, ACKED, -1)]),
    ({}, [B(0, 3, ACKED, 40000)]),
    ({}, [B(0, 3, ACKED, 1), B(4, 2, ACKED, 1)]),
])
def test_write_rejects_bad_input_and_changes_nothing(h, kwargs, batches):
    initialize(h, [(0, 0, 0)])
    write(h, 0, [B(0, 3, AVAILABLE, 1)])
    before = state(h)
    response, records = write(h, 0, batches, **kwargs)
    assert records == []
    assert only(response).error_code == INVALID
    assert only(response).error_message
    assert state(h) == before
    assert_reload_keeps_state(h)


def test_one_request_carries_many_topics_and_partitions(h):
    request = InitializeShareGroupStateRequest(G, (
        InitializeStateData(T, (InitializeStatePartitionData(0, 0, 0), InitializeStatePartitionData(1, 0, 0))),
        InitializeStateData(T2, (InitializeStatePartitionData(0, 0, 0),))))
    run(h, lambda s, now: s.initialize_share_group_state(request, now))
    request = WriteShareGroupStateRequest(G, (
        WriteStateData(T, (WriteStatePartitionData(0, 0, 0, -1, -1, (B(0, 0, ACKED, 1),)),
                           WriteStatePartitionData(1, 0, 0, -1, -1, (B(1, 1, ACKED, 1),)),
                           WriteStatePartitionData(0, 0, 0, -1, -1, (B(2, 2, ACKED, 1),)),
                           WriteStatePartitionData(5, 0, 0, -1, -1, ()))),
        WriteStateData(T2, (WriteStatePartitionData(0, 0, 0, -1, -1, (B(3, 3, ACKED, 1),)),))))
    response, records = run(h, lambda s, now: s.write_share_group_state(request, now))
    assert [[(p.partition, p.error_code) for p in t.partitions] for t in response.results] == [
        [(0, 0), (1, 0), (0, INVALID), (5, INVALID)], [(0, 0)]]
    assert [(r.key.topic_id, r.key.partition, r.value.state_batches) for r in records] == [
        (T, 0, (B(0, 0, ACKED, 1),)), (T, 1, (B(1, 1, ACKED, 1),)), (T2, 0, (B(3, 3, ACKED, 1),))]
    assert response.results[0].partitions[2].error_message == "Partition 0 appears twice."


def test_a_request_without_a_group_id_gets_an_empty_answer(h):
    request = WriteShareGroupStateRequest("", (WriteStateData(T, (WriteStatePartitionData(0),)),))
    assert run(h, lambda s, now: s.write_share_group_state(request, now)) == (WriteShareGroupStateResponse(), [])


def test_a_null_topic_id_is_invalid(h):
    response, records = write(h, 0, topic="")
    assert records == []
    assert only(response).error_message == "The topic id cannot be null."


# ---------------------------------------------------------------- snapshot cadence

def test_a_snapshot_follows_every_n_updates(h):
    initialize(h, [(0, 0, 0)])
    kinds = []
    for i in range(8):
        h.clock.now_ms = NOW + i
        kinds.append(type(write(h, 0, [B(i, i, ACKED, 1)], start=0)[1][0].key).__name__)
    assert kinds == ["ShareUpdateKey"] * 3 + ["ShareSnapshotKey"] + ["ShareUpdateKey"] * 3 + ["ShareSnapshotKey"]
    stored = h.shard.states[(G, T, 0)]
    assert stored == ShareSnapshotValue(2, 0, 0, 0, 0, NOW + 7, NOW + 7, (B(0, 7, ACKED, 1),))
    assert h.shard.updates_since_snapshot[(G, T, 0)] == 0
    assert_reload_keeps_state(h)


def test_a_leader_epoch_read_counts_towards_the_cadence(h):
    initialize(h, [(0, 0, 0)])
    for i in range(3):
        write(h, 0, [B(i, i, ACKED, 1)])
    response, records = read(h, 0, leader_epoch=1)
    assert records == [snapshot(0, ShareSnapshotValue(1, 0, 1, 0, 0, NOW, NOW, (B(0, 2, ACKED, 1),)))]
    assert only(response).state_batches == (B(0, 2, ACKED, 1),)
    assert_reload_keeps_state(h)


def test_the_default_cadence_is_500_updates(tmp_path):
    h = ShardHarness(str(tmp_path), ShareCoordinatorShard)
    assert h.shard.snapshot_every == 500


def test_reload_after_snapshots_and_updates_of_many_keys(h):
    initialize(h, [(p, 1, 0) for p in range(4)])
    for i in range(11):
        p = i % 4
        write(h, p, [B(i, i + 2, ARCHIVED if i % 3 else ACKED, 1 + i % 2)], start=i // 2, count=i)
        if i == 6:
            read(h, 2, leader_epoch=3)
            delete(h, 3)
    assert_reload_keeps_state(h)
    assert (G, T, 3) not in h.shard.states


# ---------------------------------------------------------------- delete and summary

def test_delete_tombstones_the_snapshot_key(h):
    initialize(h, [(0, 0, 0), (1, 0, 0)])
    write(h, 0, [B(0, 0, ACKED, 1)])
    response, records = delete(h, 0, 2)
    assert response == DeleteShareGroupStateResponse((DeleteStateResult(T, (
        DeleteStatePartitionResult(0), DeleteStatePartitionResult(2))),))
    assert records == [Record(ShareSnapshotKey(G, T, 0))]
    assert list(h.shard.states) == [(G, T, 1)]
    assert only(read(h, 0)[0]).error_code == INVALID
    assert_reload_keeps_state(h)
    assert (G, T, 0) not in h.shard.leader_epochs
    # The key starts over.
    assert initialize(h, [(0, 0, 5)])[1] == [snapshot(0, ShareSnapshotValue(0, 0, 0, 5, 0, NOW, NOW, ()))]


def test_delete_of_a_negative_partition_is_invalid(h):
    response, records = delete(h, -1)
    assert records == []
    assert only(response).error_code == INVALID


def test_summary(h):
    initialize(h, [(0, 2, 10)])
    write(h, 0, [B(10, 12, ACKED, 1)], start=11, count=2, state_epoch=2)
    read(h, 0, leader_epoch=7)
    assert summary(h, 0, 1, -1) == ReadShareGroupStateSummaryResponse((ReadStateSummaryResult(T, (
        ReadStateSummaryPartitionResult(0, state_epoch=2, leader_epoch=7, start_offset=11, delivery_complete_count=2),
        ReadStateSummaryPartitionResult(1, start_offset=-1, delivery_complete_count=-1),
        ReadStateSummaryPartitionResult(-1, INVALID, "The partition id cannot be a negative number."),
    )),))


# ---------------------------------------------------------------- faults and routing

def test_a_failed_write_leaves_the_durable_state(h):
    initialize(h, [(0, 0, 0)])
    write(h, 0, [B(0, 4, AVAILABLE, 1)])
    durable = state(h)
    h.io.fail_after_bytes = 0  # the disk is full
    request = WriteShareGroupStateRequest(G, (WriteStateData(T, (
        WriteStatePartitionData(0, 0, 0, -1, -1, (B(0, 4, ACKED, 1),)),)),))
    pending = h.write(lambda s, now: s.write_share_group_state(request, now))
    with pytest.raises(KafkaError) as e:
        pending.result()
    assert e.value.retriable
    assert state(h) == durable
    h.io.fail_after_bytes = None
    h.reload()
    assert state(h) == durable
    assert only(write(h, 0, [B(0, 4, ACKED, 1)])[0]).error_code == 0
    assert h.shard.states[(G, T, 0)].state_batches == (B(0, 4, ACKED, 1),)


def test_replay_rejects_records_of_other_coordinators(h):
    from tests.runtime.kv_shard import KvKey, KvValue
    with pytest.raises(ValueError):
        h.shard.replay(0, Record(KvKey("k"), KvValue(1)))


def test_state_partition_for_hashes_the_coordinator_key():
    assert state_partition_for(G, T, 3, 50) == partition_for(f"{G}:{T}:3", 50)
    assert {state_partition_for(G, T, p, 50) for p in range(200)} <= set(range(50))
