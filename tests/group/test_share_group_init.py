"""Share-group state initialisation on the group coordinator: the initialising records a
heartbeat writes, the hand-off to the owner, success, failure, the retry timer, late
answers, the transition table and reload."""
from __future__ import annotations

import pytest

from runtime.codec import Record
from runtime.errors import Errors, KafkaError
from runtime.group import records as R
from runtime.group.share import INIT_TRANSITIONS, InitState, PendingShareInitialization, _transition

from runtime.messages.share_group import ShareGroupHeartbeatRequest

from .test_share_group import harness as share_harness
from .test_share_group import RETRY_MS, G, assignment, group, hb, raises, sent, snapshot, written


def harness(tmp_path):
    # sessions outlive every retry here, so that only the initialisation moves the epochs
    return share_harness(tmp_path, **{"group.share.session.timeout.ms": 10**9})


def state_record(initializing=(), initialized=()):
    return Record(R.ShareGroupStatePartitionMetadataKey(G), R.ShareGroupStatePartitionMetadataValue(
        tuple(R.ShareGroupStateTopicPartitions(*t) for t in initializing),
        tuple(R.ShareGroupStateTopicPartitions(*t) for t in initialized)))


def pending(h):
    return h.shard.pending_share_initializations()


def test_a_second_subscriber_asks_for_nothing_new(tmp_path):
    h = harness(tmp_path)
    hb(h, new_member_id="a")
    assert pending(h) == [PendingShareInitialization(G, "T", "t", (0, 1), 1)]
    _, records = sent(h, ShareGroupHeartbeatRequest(G, "", 0, None, ("t",)), "b")
    assert not any(isinstance(r.key, R.ShareGroupStatePartitionMetadataKey) for r in records)
    assert pending(h) == []


def test_partitions_still_initialising_are_asked_for_again_after_the_retry_interval(tmp_path):
    h = harness(tmp_path)
    hb(h, new_member_id="a")
    pending(h)
    start = h.end_offset
    h.advance(RETRY_MS - 1)
    assert h.end_offset == start and pending(h) == []
    h.advance(1)
    assert [r for _, r in h.records(start)] == [state_record([("T", "t", (0, 1), RETRY_MS)])]
    assert pending(h) == [PendingShareInitialization(G, "T", "t", (0, 1), 1)]
    h.advance(RETRY_MS)
    assert pending(h) == [PendingShareInitialization(G, "T", "t", (0, 1), 1)]


def test_initialised_partitions_are_not_retried(tmp_path):
    h = harness(tmp_path)
    hb(h, new_member_id="a")
    for p in pending(h):
        h.call(lambda s, now, p=p: s.share_group_initialized(p.group_id, p.topic_id, p.partitions, now))
    end = h.end_offset
    h.advance(RETRY_MS * 3)
    assert h.end_offset == end and pending(h) == []


def test_a_failure_waits_a_full_interval_from_the_failure(tmp_path):
    h = harness(tmp_path)
    hb(h, new_member_id="a")
    pending(h)
    h.advance(10_000)
    _, records = written(h, lambda s, now: s.share_group_initialize_failed(G, "T", (0, 1), now))
    assert records == [state_record([("T", "t", (0, 1), 10_000)])]
    h.advance(RETRY_MS - 1)
    assert pending(h) == []
    h.advance(1)
    assert pending(h) == [PendingShareInitialization(G, "T", "t", (0, 1), 1)]


def test_partial_success_assigns_what_was_initialised(tmp_path):
    h = harness(tmp_path)
    hb(h, new_member_id="a")
    pending(h)
    _, records = written(h, lambda s, now: s.share_group_initialized(G, "T", (1,), now))
    assert records == [state_record([("T", "t", (0,), 0)], [("T", "t", (1,))]),
                       R.share_group_epoch_record(G, 2, group(h).metadata_hash)]
    assert hb(h, "a", 1).assignment == assignment(t=[1])
    h.advance(RETRY_MS)
    assert pending(h) == [PendingShareInitialization(G, "T", "t", (0,), 2)]


@pytest.mark.parametrize("op", ["share_group_initialized", "share_group_initialize_failed"])
def test_late_or_unknown_answers_change_nothing(tmp_path, op):
    h = harness(tmp_path)
    hb(h, new_member_id="a")
    pending(h)
    h.call(lambda s, now: s.share_group_initialized(G, "T", (0, 1), now))
    before, end = snapshot(h.shard), h.end_offset
    for topic, partitions in (("T", (0, 1)), ("T", (7,)), ("X", (0,))):
        assert written(h, lambda s, now: getattr(s, op)(G, topic, partitions, now)) == (None, [])
    raises(Errors.GROUP_ID_NOT_FOUND, lambda: h.call(lambda s, now: getattr(s, op)("nope", "T", (0,), now)))
    assert snapshot(h.shard) == before and h.end_offset == end


def test_a_deleted_group_is_not_listed(tmp_path):
    h = harness(tmp_path)
    hb(h, new_member_id="a")
    hb(h, "a", -1)
    h.call(lambda s, now: s.delete_groups([G], now))
    assert pending(h) == []


def test_a_deleted_topic_is_not_listed(tmp_path):
    h = harness(tmp_path)
    hb(h, new_member_id="a")
    h.call(lambda s, now: s.update_topics({"u": 1}, now, {"u": "U"}))
    assert pending(h) == []
    assert group(h).initializing == {}


def test_the_transition_table_refuses_illegal_moves_and_changes_nothing(tmp_path):
    h = harness(tmp_path)
    hb(h, new_member_id="a")
    h.call(lambda s, now: s.share_group_initialized(G, "T", (0,), now))
    before = snapshot(h.shard)
    g = group(h)
    assert g.init_state("T", 0) is InitState.INITIALIZED and g.init_state("T", 1) is InitState.INITIALIZING
    assert g.init_state("T", 2) is InitState.UNINITIALIZED
    # (an initialised partition goes back to initialising only when an offset alter starts it over)
    for partition, to in ((0, InitState.INITIALIZED), (2, InitState.INITIALIZED), (2, InitState.UNINITIALIZED)):
        assert to not in INIT_TRANSITIONS[g.init_state("T", partition)]
        with pytest.raises(KafkaError) as e:
            _transition(g, "T", [1, partition], to)
        assert e.value.error is Errors.INVALID_REQUEST
    assert snapshot(h.shard) == before


def test_reload_asks_again_for_what_was_initialising(tmp_path):
    h = harness(tmp_path)
    hb(h, new_member_id="a")
    hb(h, new_member_id="b", topics=("t", "u"))
    for p in pending(h):
        if p.topic_id == "T":
            h.call(lambda s, now, p=p: s.share_group_initialized(G, p.topic_id, p.partitions, now))
    h.advance(5_000)
    before = snapshot(h.shard)
    h.reload()
    assert snapshot(h.shard) == before
    epoch = group(h).group_epoch
    assert pending(h) == [PendingShareInitialization(G, "U", "u", (0,), epoch)]
    # the retry timer counts from the last time it was asked for (at 0)
    h.advance(RETRY_MS - 5_000)
    assert pending(h) == [PendingShareInitialization(G, "U", "u", (0,), epoch)]


def test_the_partitions_to_delete_with_the_group(tmp_path):
    h = harness(tmp_path)
    hb(h, new_member_id="a", topics=("t", "u"))
    h.call(lambda s, now: s.share_group_initialized(G, "T", (1,), now))
    assert h.read(lambda s: s.share_group_state_partitions(G)) == [("T", "t", (0, 1)), ("U", "u", (0,))]
    with pytest.raises(KafkaError) as e:
        h.read(lambda s: s.share_group_state_partitions("nope"))
    assert e.value.error is Errors.GROUP_ID_NOT_FOUND


def test_a_pending_initialization_unpacks_as_a_tuple(tmp_path):
    h = harness(tmp_path)
    hb(h, new_member_id="a")
    [(group_id, topic_id, topic_name, partitions, group_epoch, start_offsets)] = pending(h)
    assert (group_id, topic_id, topic_name, partitions, group_epoch, start_offsets) == (G, "T", "t", (0, 1), 1, ())


# ---------------------------------------------------------------------- offset alters

def empty_group(h):
    """A share group whose one member consumed from initialised partitions, then left."""
    hb(h, new_member_id="a")
    for p in pending(h):
        h.call(lambda s, now, p=p: s.share_group_initialized(G, p.topic_id, p.partitions, now))
    hb(h, "a", -1)
    return group(h).group_epoch


def alter(h, offsets):
    return written(h, lambda s, now: s.alter_share_group_offsets(G, offsets, now))


def test_an_offset_alter_starts_the_partitions_over_under_the_group_epoch(tmp_path):
    h = harness(tmp_path)
    epoch = empty_group(h)
    h.advance(1_000)
    _, records = alter(h, {"t": {0: 10}})
    assert records == [state_record([("T", "t", (0,), 1_000)], [("T", "t", (1,), -1)])]
    g = group(h)
    assert (g.init_state("T", 0), g.init_state("T", 1)) == (InitState.INITIALIZING, InitState.INITIALIZED)
    assert pending(h) == [PendingShareInitialization(G, "T", "t", (0,), epoch, (10,))]
    # a member joining meanwhile gets only what is initialised
    assert hb(h, new_member_id="b").assignment == assignment(t=[1])
    h.call(lambda s, now: s.share_group_initialized(G, "T", (0,), now))
    assert group(h).init_state("T", 0) is InitState.INITIALIZED
    assert hb(h, "b", group(h).members["b"].member_epoch).assignment == assignment(t=[0, 1])


def test_deleting_offsets_starts_over_at_the_reset_policy(tmp_path):
    h = harness(tmp_path)
    epoch = empty_group(h)
    alter(h, {"t": {0: -1, 1: -1}})
    assert pending(h) == [PendingShareInitialization(G, "T", "t", (0, 1), epoch, (-1, -1))]


def test_a_failed_alter_is_asked_for_again_at_its_offsets_until_it_succeeds(tmp_path):
    h = harness(tmp_path)
    epoch = empty_group(h)
    alter(h, {"t": {1: 7}})
    pending(h)
    h.call(lambda s, now: s.share_group_initialize_failed(G, "T", (1,), now))
    h.advance(RETRY_MS)
    assert pending(h) == [PendingShareInitialization(G, "T", "t", (1,), epoch, (7,))]
    h.call(lambda s, now: s.share_group_initialized(G, "T", (1,), now))
    # a later initialisation of the partition (a new subscription after a topic grows, say)
    # no longer carries the alter's offset
    assert group(h).init_state("T", 1) is InitState.INITIALIZED and pending(h) == []


@pytest.mark.parametrize("offsets, error", [
    ({"nope": {0: 1}}, Errors.UNKNOWN_TOPIC_OR_PARTITION),
    ({"t": {2: 1}}, Errors.UNKNOWN_TOPIC_OR_PARTITION),
    ({"t": {0: 1}, "nope": {0: 1}}, Errors.UNKNOWN_TOPIC_OR_PARTITION),
    ({"t": {0: -2}}, Errors.INVALID_REQUEST),
])
def test_bad_alters_change_nothing(tmp_path, offsets, error):
    h = harness(tmp_path)
    empty_group(h)
    before, end = snapshot(h.shard), h.end_offset
    raises(error, lambda: h.call(lambda s, now: s.alter_share_group_offsets(G, offsets, now)))
    assert snapshot(h.shard) == before and h.end_offset == end and pending(h) == []


def test_a_group_with_members_or_no_group_cannot_be_altered(tmp_path):
    h = harness(tmp_path)
    hb(h, new_member_id="a")
    pending(h)
    before, end = snapshot(h.shard), h.end_offset
    raises(Errors.NON_EMPTY_GROUP, lambda: h.call(lambda s, now: s.alter_share_group_offsets(G, {"t": {0: 1}}, now)))
    raises(Errors.GROUP_ID_NOT_FOUND,
           lambda: h.call(lambda s, now: s.alter_share_group_offsets("other", {"t": {0: 1}}, now)))
    assert snapshot(h.shard) == before and h.end_offset == end and pending(h) == []
