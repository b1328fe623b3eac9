"""Merging state batches: Kafka's PersisterStateBatchCombiner, as a sweep over offsets.

The state of a share partition is a sorted list of disjoint batches, each a run of offsets
with one delivery state and delivery count. A write brings new batches that may overlap the
stored ones, each other, or run below the start offset. Combining them gives every offset
the newest state any batch holds for it, drops what lies below the start offset, and joins
neighbours that say the same thing.

"Newest" is Kafka's order on (delivery count, delivery state): a record's delivery count
never goes down, and at one delivery count its state only moves forward (AVAILABLE, then
ACQUIRED, then ACKNOWLEDGED or ARCHIVED). So the winner does not depend on the order in
which writes arrive: combining is a per-offset maximum, associative and commutative, and
a snapshot plus its updates gives the same batches however they are grouped.
"""
from __future__ import annotations

import heapq
from bisect import bisect_left, bisect_right
from typing import Iterable

from .records import PersisterStateBatch

__all__ = ["combine_state_batches"]

# Below this many stored batches, windowing costs more than it saves.
_WINDOW_MIN = 16


def _first_offset(b: PersisterStateBatch) -> int:
    return b.first_offset


def _last_offset(b: PersisterStateBatch) -> int:
    return b.last_offset


def combine_state_batches(batches_so_far: Iterable[PersisterStateBatch],
                          new_batches: Iterable[PersisterStateBatch],
                          start_offset: int) -> list[PersisterStateBatch]:
    """Merge two batch lists (in any order, overlapping or not) into sorted, disjoint,
    coalesced batches, none below `start_offset` (-1: keep everything)."""
    so_far = list(batches_so_far)
    new = list(new_batches)
    if new and len(so_far) > _WINDOW_MIN and _is_normal(so_far):
        # The usual write: a few new batches against a long stored list. Stored batches
        # that neither overlap nor touch the span of the new ones stay as they are.
        lo = min(b.first_offset for b in new) - 1
        hi = max(b.last_offset for b in new) + 1
        i = bisect_left(so_far, lo, key=_last_offset)
        j = bisect_right(so_far, hi, key=_first_offset)
        return (_prune_sorted(so_far[:i], start_offset) + _merge(_prune(so_far[i:j] + new, start_offset))
                + _prune_sorted(so_far[j:], start_offset))
    return _merge(_prune(so_far + new, start_offset))


def _merge(batches: list[PersisterStateBatch]) -> list[PersisterStateBatch]:
    if len(batches) < 2:
        return batches
    batches.sort()
    if _is_normal(batches):
        return batches

    # Between two consecutive boundaries, the same batches cover every offset.
    bounds = sorted({b.first_offset for b in batches} | {b.last_offset + 1 for b in batches})
    covering: list[tuple[int, int, int]] = []  # max-heap of (-count, -state, last_offset)
    out: list[PersisterStateBatch] = []
    i, n = 0, len(batches)
    for lo, hi in zip(bounds, bounds[1:]):
        while i < n and batches[i].first_offset == lo:
            b = batches[i]
            heapq.heappush(covering, (-b.delivery_count, -b.delivery_state, b.last_offset))
            i += 1
        while covering and covering[0][2] < lo:
            heapq.heappop(covering)  # ended before this segment
        if not covering:
            continue  # a gap: no batch holds these offsets
        count, state = -covering[0][0], -covering[0][1]
        prev = out[-1] if out else None
        if (prev is not None and prev.last_offset + 1 == lo and prev.delivery_state == state
                and prev.delivery_count == count):
            out[-1] = prev._replace(last_offset=hi - 1)
        else:
            out.append(PersisterStateBatch(lo, hi - 1, state, count))
    return out


def _prune(batches: list[PersisterStateBatch], start_offset: int) -> list[PersisterStateBatch]:
    if start_offset == -1:
        return batches
    kept = []
    for b in batches:
        if b.last_offset < start_offset:
            continue
        kept.append(b if b.first_offset >= start_offset else b._replace(first_offset=start_offset))
    return kept


def _prune_sorted(batches: list[PersisterStateBatch], start_offset: int) -> list[PersisterStateBatch]:
    """`_prune` for sorted, disjoint batches, without looking at each one."""
    if start_offset == -1:
        return batches
    kept = batches[bisect_left(batches, start_offset, key=_last_offset):]
    if kept and kept[0].first_offset < start_offset:
        kept[0] = kept[0]._replace(first_offset=start_offset)
    return kept


def _is_normal(batches: list[PersisterStateBatch]) -> bool:
    """Sorted batches that neither overlap nor leave two equal neighbours touching."""
    for a, b in zip(batches, batches[1:]):
        if b.first_offset <= a.last_offset:
            return False
        if (b.first_offset == a.last_offset + 1 and a.delivery_state == b.delivery_state
                and a.delivery_count == b.delivery_count):
            return False
    return True
