"""read_committed on the consumer's side: drop the records of aborted transactions and the
control batches from a fetched batch list (Kafka's CompletedFetch with its aborted-producer
tracking).

The leader stops a read_committed fetch at the last stable offset and lists the aborted
transactions that overlap it as (producer id, first offset). Walking the batches in offset
order, a producer becomes "aborted" when its aborted transaction's first offset is reached,
its transactional batches are dropped from then on, and its abort marker ends that.
"""
from __future__ import annotations

from typing import Iterable

from ..messages.topics import AbortedTransaction, FetchedBatch
from .data import decode_control

__all__ = ["filter_aborted"]


def filter_aborted(batches: Iterable[FetchedBatch], aborted_transactions: Iterable[AbortedTransaction]
                   ) -> list[FetchedBatch]:
    """The data batches a read_committed consumer may deliver, in order."""
    pending = sorted(aborted_transactions, key=lambda a: a.first_offset, reverse=True)
    aborted_producers: set[int] = set()
    out = []
    for batch in batches:
        while pending and pending[-1].first_offset <= batch.last_offset:
            aborted_producers.add(pending.pop().producer_id)
        if batch.is_control:
            commit, _ = decode_control(batch.records)
            if not commit:
                aborted_producers.discard(batch.producer_id)
            continue
        if batch.is_transactional and batch.producer_id in aborted_producers:
            continue
        out.append(batch)
    return out
