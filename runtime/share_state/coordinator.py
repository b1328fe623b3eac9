"""ShareCoordinatorShard: the durable state of share partitions (Kafka's share coordinator).

One shard serves one partition of the share-group state log. For every share partition it
keeps a ShareGroupOffset, keyed by (group id, topic id, partition): snapshot epoch, state
epoch, leader epoch, start offset, delivery complete count and the state batches of the
records in flight. It is held as the ShareSnapshotValue that a snapshot taken now would
carry, so a snapshot is the state itself and an update is a delta merged into it.

Each write appends one record per share partition: a full ShareSnapshot for a new key or
once `share.coordinator.snapshot.update.records.per.snapshot` ShareUpdates followed the last
snapshot, a ShareUpdate otherwise. A snapshot is built by applying the update it replaces,
so the two roads give the same state. Epochs fence stale writers: a state epoch older than
the stored one is FENCED_STATE_EPOCH (the share partition was re-initialised, say by an
offset reset); a leader epoch older than the highest seen is FENCED_LEADER_EPOCH (a newer
SharePartition leader has read the state since). A read claims its leader epoch, so a read
whose epoch is not newer than the recorded one is fenced too. Unlike Kafka, which takes the
epoch from the partition's leadership and lets a read repeat it: a SharePartition here makes
its epoch itself, one past the summary's, so two that load from one summary claim the same
epoch, and the second must not become another owner.

Requests carry many partitions; each gets its own result and error, and one partition's
error changes nothing for the others. -1 means "not given" for leader epochs, state epochs,
start offsets and delivery complete counts, as in Kafka. Unlike Kafka, the shard does not
check the topic against a metadata image (it has none): routing a key to the right shard,
`runtime.hashing.state_partition_for`, is the caller's job.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable

from ..codec import Record
from ..coordinator import CoordinatorContext, CoordinatorShard, Result
from ..errors import Errors, KafkaError, raise_if
from ..messages.share_state import (
    UNINITIALIZED_DELIVERY_COMPLETE_COUNT, UNINITIALIZED_START_OFFSET,
    DeleteShareGroupStateRequest, DeleteShareGroupStateResponse, DeleteStatePartitionResult, DeleteStateResult,
    InitializeShareGroupStateRequest, InitializeShareGroupStateResponse, InitializeStatePartitionResult,
    InitializeStateResult, ReadShareGroupStateRequest, ReadShareGroupStateResponse,
    ReadShareGroupStateSummaryRequest, ReadShareGroupStateSummaryResponse, ReadStatePartitionResult,
    ReadStateResult, ReadStateSummaryPartitionResult, ReadStateSummaryResult, WriteShareGroupStateRequest,
    WriteShareGroupStateResponse, WriteStatePartitionResult, WriteStateResult,
)
from .combiner import combine_state_batches
from .records import (
    PersisterStateBatch, RecordState, ShareSnapshotKey, ShareSnapshotValue, ShareUpdateKey, ShareUpdateValue,
    share_snapshot_record, share_state_tombstones, share_update_record,
)

__all__ = ["ShareCoordinatorShard", "apply_update",
           "SNAPSHOT_UPDATE_RECORDS_PER_SNAPSHOT", "STATE_TOPIC_NUM_PARTITIONS",
           "UNINITIALIZED_START_OFFSET", "UNINITIALIZED_DELIVERY_COMPLETE_COUNT"]

SNAPSHOT_UPDATE_RECORDS_PER_SNAPSHOT = "share.coordinator.snapshot.update.records.per.snapshot"
STATE_TOPIC_NUM_PARTITIONS = "share.coordinator.state.topic.num.partitions"
DEFAULTS = {SNAPSHOT_UPDATE_RECORDS_PER_SNAPSHOT: 500, STATE_TOPIC_NUM_PARTITIONS: 50}

_MAX_DELIVERY_COUNT = 32767  # an int16 on the wire
_DELIVERY_STATES = frozenset(int(s) for s in RecordState)

Key = tuple[str, str, int]  # (group id, topic id, partition)


def apply_update(state: ShareSnapshotValue | None, update: ShareUpdateValue) -> ShareSnapshotValue:
    """The state after a ShareUpdate: fields given (not -1) replace the stored ones, except
    that the start offset never moves back, nor the delivery complete count of one start
    offset (see `_delivery_complete_count`), and the update's batches are combined into the
    stored batches above the new start offset. Unlike Kafka's merge: a SharePartition's start
    offset only grows within a state epoch (a reset starts a new one with a snapshot), so a
    lower one comes from a write that arrived late, retried across a coordinator restart,
    and taking it would bring back offsets whose settled states the newer write pruned."""
    if state is None:
        # Only a log that lost its snapshot gets here; Kafka takes the update as the state,
        # with no state epoch.
        return ShareSnapshotValue(update.snapshot_epoch, -1, update.leader_epoch, update.start_offset,
                                  update.delivery_complete_count, 0, 0, update.state_batches)
    start = max(state.start_offset, update.start_offset)  # -1 (not given) is below any stored one
    return state._replace(
        leader_epoch=state.leader_epoch if update.leader_epoch == -1 else update.leader_epoch,
        start_offset=start,
        delivery_complete_count=_delivery_complete_count(state, update),
        state_batches=tuple(combine_state_batches(state.state_batches, update.state_batches, start)))


def _delivery_complete_count(state: ShareSnapshotValue, update: ShareUpdateValue) -> int:
    """The count an update leaves (KIP-1226), judged by its start offset as Kafka's share
    coordinator does (apache/kafka#23112). A count is of the records past the write's start
    offset that were ACKNOWLEDGED or ARCHIVED when the write was begun, so it means something
    only with that start offset; writes can be applied out of the order they were begun in,
    and the count is no sequence (it falls when the start offset passes settled records).
    A higher start offset is a newer write: its count is taken even when smaller, or left
    unknown (-1) when not given, as the stored count was of records now below the start
    offset. At the same start offset a settled record stays settled, so the larger count is
    the newer. A lower start offset is an older write, and its count is not taken."""
    count = update.delivery_complete_count
    if update.start_offset > state.start_offset:
        return count
    if update.start_offset < state.start_offset or count == -1:
        return state.delivery_complete_count
    return max(state.delivery_complete_count, count)


class ShareCoordinatorShard(CoordinatorShard):
    def __init__(self, context: CoordinatorContext) -> None:
        self.context = context
        self.snapshot_every = int(context.config.get(SNAPSHOT_UPDATE_RECORDS_PER_SNAPSHOT,
                                                     DEFAULTS[SNAPSHOT_UPDATE_RECORDS_PER_SNAPSHOT]))
        # Hard state, changed only by replay.
        self.states: dict[Key, ShareSnapshotValue] = {}
        self.updates_since_snapshot: dict[Key, int] = {}
        # The highest epochs ever recorded for a key. A re-initialisation writes leader
        # epoch 0 into the state, but an old leader must stay fenced.
        self.leader_epochs: dict[Key, int] = {}
        self.state_epochs: dict[Key, int] = {}

    # ------------------------------------------------------------------ replay

    def replay(self, offset: int, record: Record) -> None:
        key_type = type(record.key)
        if key_type is not ShareSnapshotKey and key_type is not ShareUpdateKey:
            raise ValueError(f"the share coordinator does not replay {key_type.__name__} records")
        key = tuple(record.key)
        if record.value is None:
            self._forget(key)
        elif key_type is ShareSnapshotKey:
            self._replay_snapshot(key, record.value)
        else:
            self._replay_update(key, record.value)

    def _replay_snapshot(self, key: Key, value: ShareSnapshotValue) -> None:
        self.states[key] = value
        self.updates_since_snapshot[key] = 0
        self._raise_epoch(self.leader_epochs, key, value.leader_epoch)
        self._raise_epoch(self.state_epochs, key, value.state_epoch)

    def _replay_update(self, key: Key, value: ShareUpdateValue) -> None:
        self.states[key] = apply_update(self.states.get(key), value)
        self.updates_since_snapshot[key] = self.updates_since_snapshot.get(key, 0) + 1
        self._raise_epoch(self.leader_epochs, key, value.leader_epoch)

    @staticmethod
    def _raise_epoch(epochs: dict[Key, int], key: Key, epoch: int) -> None:
        if epoch > epochs.get(key, -1):
            epochs[key] = epoch

    def _forget(self, key: Key) -> None:
        for table in (self.states, self.updates_since_snapshot, self.leader_epochs, self.state_epochs):
            table.pop(key, None)

    # ------------------------------------------------------------------ write operations

    def initialize_share_group_state(self, request: InitializeShareGroupStateRequest, now_ms: int) -> Result:
        """Start (or restart, with a newer state epoch) a share partition's state: a fresh
        snapshot with no batches, written even when the state epoch is unchanged."""
        def initialize(key: Key, p: Any) -> tuple[list[Record], InitializeStatePartitionResult]:
            raise_if(p.state_epoch < 0, Errors.INVALID_REQUEST, "The state epoch cannot be a negative number.")
            _raise_if_bad_offset(p.start_offset)
            self._raise_if_fenced(key, -1, p.state_epoch)
            current = self.states.get(key)
            snapshot = ShareSnapshotValue(
                snapshot_epoch=0 if current is None else current.snapshot_epoch + 1,
                state_epoch=p.state_epoch,
                # Keep the highest leader epoch seen in the new snapshot: the records that
                # carried it come before the snapshot, and compaction drops them.
                leader_epoch=max(self.leader_epochs.get(key, 0), 0),
                start_offset=p.start_offset,
                delivery_complete_count=(UNINITIALIZED_DELIVERY_COMPLETE_COUNT
                                         if p.start_offset == UNINITIALIZED_START_OFFSET else 0),
                create_timestamp=now_ms,
                write_timestamp=now_ms,
                state_batches=())
            return [share_snapshot_record(*key, snapshot)], InitializeStatePartitionResult(p.partition)

        results, records = self._serve(request, initialize, InitializeStatePartitionResult)
        return Result(records, InitializeShareGroupStateResponse(
            tuple(InitializeStateResult(t, ps) for t, ps in results)))

    def read_share_group_state(self, request: ReadShareGroupStateRequest, now_ms: int) -> Result:
        """The stored state of each share partition. A write operation, because a reader (a new
        SharePartition leader) claims its leader epoch: it must be newer than the recorded one,
        and is recorded, fencing the old leader. A read without one (-1) claims nothing."""
        def read(key: Key, p: Any) -> tuple[list[Record], ReadStatePartitionResult]:
            _raise_if_bad_epoch(p.leader_epoch, "leader")
            current = self._require_state(key, "Read")
            self._raise_if_claimed(key, p.leader_epoch)
            result = ReadStatePartitionResult(p.partition, state_epoch=current.state_epoch,
                                              start_offset=current.start_offset,
                                              state_batches=current.state_batches)
            if p.leader_epoch == -1:
                return [], result
            update = ShareUpdateValue(current.snapshot_epoch, p.leader_epoch, current.start_offset,
                                      current.delivery_complete_count, ())
            return [self._state_record(key, current, update, now_ms)], result

        results, records = self._serve(request, read, ReadStatePartitionResult)
        return Result(records, ReadShareGroupStateResponse(tuple(ReadStateResult(t, ps) for t, ps in results)))

    def write_share_group_state(self, request: WriteShareGroupStateRequest, now_ms: int) -> Result:
        """Merge each share partition's new batches into its state (the newer state of an
        offset wins; see combiner.py) and move its start offset. A write keeps the recorded
        leader epoch: only a read raises it, as in Kafka."""
        def write(key: Key, p: Any) -> tuple[list[Record], WriteStatePartitionResult]:
            _raise_if_bad_epoch(p.leader_epoch, "leader")
            _raise_if_bad_epoch(p.state_epoch, "state")
            _raise_if_bad_offset(p.start_offset)
            raise_if(p.delivery_complete_count < -1, Errors.INVALID_REQUEST,
                     "The delivery complete count cannot be a negative number.")
            batches = _checked_batches(p.state_batches)
            current = self._require_state(key, "Write")
            self._raise_if_fenced(key, p.leader_epoch, p.state_epoch)
            update = ShareUpdateValue(current.snapshot_epoch, current.leader_epoch, p.start_offset,
                                      p.delivery_complete_count,
                                      tuple(combine_state_batches((), batches, p.start_offset)))
            return [self._state_record(key, current, update, now_ms)], WriteStatePartitionResult(p.partition)

        results, records = self._serve(request, write, WriteStatePartitionResult)
        return Result(records, WriteShareGroupStateResponse(tuple(WriteStateResult(t, ps) for t, ps in results)))

    def delete_share_group_state(self, request: DeleteShareGroupStateRequest, now_ms: int) -> Result:
        """Forget share partitions (their group or topic is gone). Deleting a key that has no
        state succeeds and writes nothing."""
        def delete(key: Key, p: Any) -> tuple[list[Record], DeleteStatePartitionResult]:
            records = share_state_tombstones(*key) if key in self.states else []
            return records, DeleteStatePartitionResult(p.partition)

        results, records = self._serve(request, delete, DeleteStatePartitionResult)
        return Result(records, DeleteShareGroupStateResponse(tuple(DeleteStateResult(t, ps) for t, ps in results)))

    # ------------------------------------------------------------------ read operations

    def read_share_group_state_summary(self, request: ReadShareGroupStateSummaryRequest
                                       ) -> ReadShareGroupStateSummaryResponse:
        """Start offset, epochs and delivery complete count, without batches (for describing
        share-group offsets and lag). A key with no state answers as never initialised."""
        def summary(key: Key, p: Any) -> tuple[list[Record], ReadStateSummaryPartitionResult]:
            current = self.states.get(key)
            if current is None:
                return [], ReadStateSummaryPartitionResult(
                    p.partition, start_offset=UNINITIALIZED_START_OFFSET,
                    delivery_complete_count=UNINITIALIZED_DELIVERY_COMPLETE_COUNT)
            return [], ReadStateSummaryPartitionResult(
                p.partition, state_epoch=current.state_epoch, leader_epoch=current.leader_epoch,
                start_offset=current.start_offset, delivery_complete_count=current.delivery_complete_count)

        results, _ = self._serve(request, summary, ReadStateSummaryPartitionResult)
        return ReadShareGroupStateSummaryResponse(tuple(ReadStateSummaryResult(t, ps) for t, ps in results))

    # ------------------------------------------------------------------ helpers

    def _serve(self, request: Any, handle: Callable[[Key, Any], tuple[list[Record], Any]],
               result_class: Callable[..., Any]) -> tuple[list[tuple[str, tuple]], list[Record]]:
        """Run `handle` for each partition of a request; a KafkaError it raises becomes that
        partition's error result. Returns [(topic_id, partition results)] and the records.
        As in Kafka, a request without a group id gets an empty answer."""
        results: list[tuple[str, tuple]] = []
        records: list[Record] = []
        if not request.group_id:
            return results, records
        seen: set[Key] = set()
        for topic in request.topics:
            partition_results = []
            for p in topic.partitions:
                key = (request.group_id, topic.topic_id, p.partition)
                try:
                    raise_if(not topic.topic_id, Errors.INVALID_REQUEST, "The topic id cannot be null.")
                    raise_if(p.partition < 0, Errors.INVALID_REQUEST, "The partition id cannot be a negative number.")
                    # One record per key and request: a second entry would be judged against
                    # state its first entry is about to change.
                    raise_if(key in seen, Errors.INVALID_REQUEST, f"Partition {p.partition} appears twice.")
                    seen.add(key)
                    new_records, result = handle(key, p)
                except KafkaError as e:
                    result = result_class(p.partition, error_code=e.code, error_message=e.message)
                else:
                    records.extend(new_records)
                partition_results.append(result)
            if partition_results:
                results.append((topic.topic_id, tuple(partition_results)))
        return results, records

    def _require_state(self, key: Key, operation: str) -> ShareSnapshotValue:
        current = self.states.get(key)
        raise_if(current is None, Errors.INVALID_REQUEST,
                 f"{operation} operation on uninitialized share partition not allowed.")
        return current

    def _raise_if_fenced(self, key: Key, leader_epoch: int, state_epoch: int) -> None:
        raise_if(leader_epoch != -1 and self.leader_epochs.get(key, -1) > leader_epoch, Errors.FENCED_LEADER_EPOCH,
                 f"Leader epoch {leader_epoch} is older than {self.leader_epochs.get(key)}.")
        raise_if(state_epoch != -1 and self.state_epochs.get(key, -1) > state_epoch, Errors.FENCED_STATE_EPOCH,
                 f"State epoch {state_epoch} is older than {self.state_epochs.get(key)}.")

    def _raise_if_claimed(self, key: Key, leader_epoch: int) -> None:
        """A reader whose leader epoch is not newer than the recorded one: older is a stale
        leader, equal is a second SharePartition claiming the epoch the current one holds."""
        self._raise_if_fenced(key, leader_epoch, -1)
        raise_if(leader_epoch != -1 and self.leader_epochs.get(key, -1) == leader_epoch, Errors.FENCED_LEADER_EPOCH,
                 f"Leader epoch {leader_epoch} is the current leader's already: a new leader reads with a newer one.")

    def _state_record(self, key: Key, current: ShareSnapshotValue, update: ShareUpdateValue, now_ms: int) -> Record:
        """The update itself, or once enough updates followed the last snapshot, the snapshot
        of the state the update leads to."""
        if self.updates_since_snapshot.get(key, 0) < self.snapshot_every:
            return share_update_record(*key, update)
        state = apply_update(current, update)
        return share_snapshot_record(*key, state._replace(
            snapshot_epoch=current.snapshot_epoch + 1, create_timestamp=now_ms, write_timestamp=now_ms))


def _raise_if_bad_epoch(epoch: int, name: str) -> None:
    raise_if(epoch < -1, Errors.INVALID_REQUEST, f"The {name} epoch cannot be a negative number other than -1.")


def _raise_if_bad_offset(start_offset: int) -> None:
    raise_if(start_offset < -1, Errors.INVALID_REQUEST,
             f"Start offset {start_offset} is negative (-1 alone means not given).")


def _checked_batches(batches: Iterable[Any]) -> list[PersisterStateBatch]:
    """The request's batches as plain PersisterStateBatch tuples, each one valid."""
    checked = []
    for b in batches:
        first, last, state, count = int(b.first_offset), int(b.last_offset), int(b.delivery_state), int(b.delivery_count)
        raise_if(first < 0 or last < first, Errors.INVALID_REQUEST, f"Invalid state batch offsets {first}..{last}.")
        raise_if(state not in _DELIVERY_STATES, Errors.INVALID_REQUEST, f"Unknown delivery state {state}.")
        raise_if(not 0 <= count <= _MAX_DELIVERY_COUNT, Errors.INVALID_REQUEST, f"Invalid delivery count {count}.")
        checked.append(PersisterStateBatch(first, last, state, count))
    return checked
