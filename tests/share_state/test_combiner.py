"""Merging persisted state batches (Kafka's PersisterStateBatchCombiner cases)."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.share_state.combiner import combine_state_batches
from runtime.share_state.records import PersisterStateBatch as B, RecordState

AVAILABLE, ACQUIRED, ACKED, ARCHIVED = (int(s) for s in RecordState)


def test_empty_and_single():
    assert combine_state_batches([], [], -1) == []
    assert combine_state_batches([B(0, 9, AVAILABLE, 1)], [], -1) == [B(0, 9, AVAILABLE, 1)]
    assert combine_state_batches([], [B(0, 9, AVAILABLE, 1)], 5) == [B(5, 9, AVAILABLE, 1)]


def test_disjoint_batches_stay_apart_and_sorted():
    assert combine_state_batches([B(20, 29, ACKED, 1)], [B(0, 9, AVAILABLE, 1)], -1) == [
        B(0, 9, AVAILABLE, 1), B(20, 29, ACKED, 1)]


def test_contiguous_equal_batches_coalesce_and_different_ones_do_not():
    assert combine_state_batches([B(0, 9, AVAILABLE, 1)], [B(10, 19, AVAILABLE, 1)], -1) == [B(0, 19, AVAILABLE, 1)]
    assert combine_state_batches([B(0, 9, AVAILABLE, 1)], [B(10, 19, AVAILABLE, 2)], -1) == [
        B(0, 9, AVAILABLE, 1), B(10, 19, AVAILABLE, 2)]
    assert combine_state_batches([B(0, 9, AVAILABLE, 1)], [B(10, 19, ACKED, 1)], -1) == [
        B(0, 9, AVAILABLE, 1), B(10, 19, ACKED, 1)]


def test_overlapping_equal_batches_merge():
    assert combine_state_batches([B(0, 9, ACKED, 2)], [B(5, 14, ACKED, 2)], -1) == [B(0, 14, ACKED, 2)]
    assert combine_state_batches([B(0, 20, ACKED, 2)], [B(5, 9, ACKED, 2)], -1) == [B(0, 20, ACKED, 2)]
    assert combine_state_batches([B(0, 9, ACKED, 2)], [B(0, 9, ACKED, 2)], -1) == [B(0, 9, ACKED, 2)]


def test_newer_state_wins_inside_an_older_batch():
    # An older batch swallows a newer one: it splits around it.
    assert combine_state_batches([B(0, 20, AVAILABLE, 1)], [B(5, 9, ACKED, 1)], -1) == [
        B(0, 4, AVAILABLE, 1), B(5, 9, ACKED, 1), B(10, 20, AVAILABLE, 1)]
    # An older batch inside a newer one disappears.
    assert combine_state_batches([B(5, 9, AVAILABLE, 1)], [B(0, 20, ARCHIVED, 1)], -1) == [B(0, 20, ARCHIVED, 1)]


def test_newer_state_wins_on_aligned_edges():
    # Same first offset, new one shorter / longer; same last offset; identical span.
    assert combine_state_batches([B(0, 20, AVAILABLE, 1)], [B(0, 9, ACKED, 1)], -1) == [
        B(0, 9, ACKED, 1), B(10, 20, AVAILABLE, 1)]
    assert combine_state_batches([B(0, 9, AVAILABLE, 1)], [B(0, 20, AVAILABLE, 2)], -1) == [B(0, 20, AVAILABLE, 2)]
    assert combine_state_batches([B(0, 20, AVAILABLE, 1)], [B(11, 20, ARCHIVED, 1)], -1) == [
        B(0, 10, AVAILABLE, 1), B(11, 20, ARCHIVED, 1)]
    assert combine_state_batches([B(0, 20, AVAILABLE, 1)], [B(0, 20, AVAILABLE, 3)], -1) == [B(0, 20, AVAILABLE, 3)]


def test_partial_overlap_either_way():
    assert combine_state_batches([B(0, 10, AVAILABLE, 1)], [B(5, 15, ACKED, 1)], -1) == [
        B(0, 4, AVAILABLE, 1), B(5, 15, ACKED, 1)]
    assert combine_state_batches([B(5, 15, AVAILABLE, 1)], [B(0, 10, AVAILABLE, 2)], -1) == [
        B(0, 10, AVAILABLE, 2), B(11, 15, AVAILABLE, 1)]


def test_winner_is_the_higher_delivery_count_then_the_later_state():
    # A stale write (lower count) does not undo a newer state, whatever the order of arrival.
    stored = [B(0, 9, AVAILABLE, 2)]
    stale = [B(3, 4, ACKED, 1)]
    assert combine_state_batches(stored, stale, -1) == [B(0, 9, AVAILABLE, 2)]
    assert combine_state_batches(stale, stored, -1) == [B(0, 9, AVAILABLE, 2)]
    # At one delivery count ARCHIVED > ACKNOWLEDGED > ACQUIRED > AVAILABLE.
    assert combine_state_batches([B(0, 3, ACKED, 1)], [B(0, 3, ACQUIRED, 1), B(2, 3, ARCHIVED, 1)], -1) == [
        B(0, 1, ACKED, 1), B(2, 3, ARCHIVED, 1)]


def test_pruning_below_the_start_offset():
    batches = [B(0, 4, ACKED, 1), B(5, 9, AVAILABLE, 1), B(10, 14, ARCHIVED, 1)]
    assert combine_state_batches(batches, [], 7) == [B(7, 9, AVAILABLE, 1), B(10, 14, ARCHIVED, 1)]
    assert combine_state_batches(batches, [], 10) == [B(10, 14, ARCHIVED, 1)]
    assert combine_state_batches(batches, [], 15) == []
    assert combine_state_batches(batches, [], -1) == batches


def test_unsorted_overlapping_input_of_many_batches():
    new = [B(30, 39, ACKED, 1), B(0, 9, AVAILABLE, 1), B(8, 12, AVAILABLE, 1), B(13, 15, AVAILABLE, 1),
           B(35, 50, AVAILABLE, 1)]
    assert combine_state_batches([], new, -1) == [
        B(0, 15, AVAILABLE, 1), B(30, 39, ACKED, 1), B(40, 50, AVAILABLE, 1)]


def test_a_gap_between_batches_is_kept():
    assert combine_state_batches([B(0, 4, ACKED, 1), B(10, 14, ACKED, 1)], [B(3, 5, ACKED, 1)], -1) == [
        B(0, 5, ACKED, 1), B(10, 14, ACKED, 1)]


# ---- properties: the combination is the per-offset maximum of (count, state) ----

def _model(batches, start_offset):
    best = {}
    for b in batches:
        for o in range(max(b.first_offset, start_offset if start_offset != -1 else 0), b.last_offset + 1):
            info = (b.delivery_count, b.delivery_state)
            if o not in best or info > best[o]:
                best[o] = info
    return best


def _expand(batches):
    return {o: (b.delivery_count, b.delivery_state) for b in batches for o in range(b.first_offset, b.last_offset + 1)}


batch = st.builds(lambda first, length, state, count: B(first, first + length, state, count),
                  st.integers(0, 60), st.integers(0, 15), st.sampled_from([AVAILABLE, ACQUIRED, ACKED, ARCHIVED]),
                  st.integers(0, 3))
batch_lists = st.lists(batch, max_size=8)


@settings(max_examples=300, deadline=None)
@given(batch_lists, batch_lists, st.sampled_from([-1, 0, 5, 20, 40]))
def test_matches_the_per_offset_model_and_is_normal(so_far, new, start_offset):
    out = combine_state_batches(so_far, new, start_offset)
    assert _expand(out) == _model(so_far + new, start_offset)
    for a, b in zip(out, out[1:]):
        assert a.last_offset < b.first_offset
        assert not (a.last_offset + 1 == b.first_offset and (a.delivery_state, a.delivery_count)
                    == (b.delivery_state, b.delivery_count))


@settings(max_examples=200, deadline=None)
@given(batch_lists, batch_lists, batch_lists)
def test_order_of_writes_does_not_matter(a, b, c):
    left = combine_state_batches(combine_state_batches(a, b, -1), c, -1)
    right = combine_state_batches(a, combine_state_batches(c, b, -1), -1)
    assert left == right


wide_batch = st.builds(lambda first, length, state, count: B(first, first + length, state, count),
                       st.integers(0, 600), st.integers(0, 6), st.sampled_from([AVAILABLE, ACKED, ARCHIVED]),
                       st.integers(0, 2))


@settings(max_examples=200, deadline=None)
@given(st.lists(wide_batch, min_size=30, max_size=60), batch_lists, st.sampled_from([-1, 0, 30, 300]))
def test_a_long_stored_list_against_a_few_new_batches(stored, new, start_offset):
    stored = combine_state_batches(stored, [], -1)  # as the shard keeps it
    out = combine_state_batches(stored, new, start_offset)
    assert _expand(out) == _model(stored + new, start_offset)
    assert out == combine_state_batches([], stored + new, start_offset)


def test_a_long_stored_list_is_only_touched_where_the_new_batches_are():
    stored = [B(i * 3, i * 3 + 1, ACKED if i % 2 else AVAILABLE, 1) for i in range(100)]
    out = combine_state_batches(stored, [B(31, 33, ARCHIVED, 2)], 4)
    assert out == ([B(4, 4, ACKED, 1)] + stored[2:10]
                   + [B(30, 30, AVAILABLE, 1), B(31, 33, ARCHIVED, 2), B(34, 34, ACKED, 1)] + stored[12:])
