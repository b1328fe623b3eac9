"""A SharePartition's reads of its partition's log (Kafka's DelayedShareFetch and
ShareFetchUtils decisions), sans I/O: the request to send the partition leader, and what its
answer means for the share group.

A read asks from the next fetch offset, read_committed under share.isolation.level =
read_committed (so it stops at the last stable offset). Its answer:

- refused as below the log start offset: the share partition takes the log start up (the
  only moment it does, as in Kafka) and the caller looks again;
- any other error is raised;
- fewer bytes than the fetch's min_bytes, while its wait lasts, or no batch: nothing now, and
  the known end of the log is the read's offset, so the caller waits for more from there;
- otherwise the records are acquired for the member (the aborted transactions' batches are
  archived, not delivered), and the log batches holding them go back, control batches left
  out.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import Errors, KafkaError
from ..messages.share import NO_ACQUISITION
from ..messages.topics import READ_COMMITTED, READ_UNCOMMITTED, FetchRequest, FetchResponse
from ..topics.isolation import filter_aborted
from .partition import SharePartition

__all__ = ["MAX_READ_BYTES", "LeaderRead", "read_request", "readable_end", "acquire_from_read"]

MAX_READ_BYTES = 64 << 20


@dataclass(frozen=True, slots=True)
class LeaderRead:
    """What a read gave the member: acquired record ranges (AcquiredRecords) and the log
    batches that hold them, the acquisition id that names this delivery and when its lock
    runs out; `end` is how far the log is known to go for this group (the high watermark, the
    last stable offset under read_committed; None: not learnt)."""
    acquired: tuple = ()
    batches: tuple = ()
    end: int | None = None
    acquisition_id: int = NO_ACQUISITION
    lock_deadline_ms: int | None = None


def read_request(sp: SharePartition, topic: str, partition: int, max_bytes: int, max_records: int) -> FetchRequest:
    """The leader read for the next fetch offset."""
    isolation = READ_COMMITTED if sp.read_committed else READ_UNCOMMITTED
    return FetchRequest(topic, partition, sp.next_fetch_offset(), min(max_bytes, MAX_READ_BYTES), 0, 1, isolation,
                        max_records)


def readable_end(request: FetchRequest, response: FetchResponse) -> int:
    """How far the log goes for a read: the last stable offset under read_committed, else
    the high watermark."""
    return response.last_stable_offset if request.isolation_level == READ_COMMITTED else response.high_watermark


def acquire_from_read(sp: SharePartition, member_id: str, request: FetchRequest, response: FetchResponse, *,
                      min_bytes: int, waiting: bool, max_records: int, batch_size: int | None,
                      share_acquire_mode: int, now_ms: int, member_epoch: int = -1) -> LeaderRead:
    """The answer to `request` turned into the member's records. `waiting`: the fetch may
    still wait for min_bytes."""
    offset = request.fetch_offset
    if response.error_code == Errors.OFFSET_OUT_OF_RANGE.code and offset < response.log_start_offset:
        sp.update_log_start_offset(response.log_start_offset)
        return LeaderRead()
    if response.error_code:
        raise KafkaError(Errors.for_code(response.error_code), getattr(response, "error_message", None))
    committed = request.isolation_level == READ_COMMITTED
    end = readable_end(request, response)
    size = sum(len(b.records) for b in response.batches)
    if not response.batches or (size < min_bytes and waiting):
        return LeaderRead(end=min(end, offset))
    aborted = ()
    if committed:
        kept = {b.base_offset for b in filter_aborted(response.batches, response.aborted_transactions)}
        aborted = [(b.base_offset, b.last_offset) for b in response.batches if b.base_offset not in kept]
    got = sp.acquire(member_id, [(b.base_offset, b.last_offset) for b in response.batches], max_records, now_ms,
                     batch_size=batch_size, share_acquire_mode=share_acquire_mode, fetch_offset=offset,
                     last_stable_offset=response.last_stable_offset if committed else None, aborted=aborted,
                     member_epoch=member_epoch)
    if not got.count:
        return LeaderRead(end=end)
    first, last = got.acquired_records[0].first_offset, got.acquired_records[-1].last_offset
    batches = tuple(b for b in response.batches if b.last_offset >= first and b.base_offset <= last and not b.is_control)
    return LeaderRead(got.acquired_records, batches, end, got.acquisition_id, got.lock_deadline_ms)
