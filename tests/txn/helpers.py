"""Shared fixtures for the transaction coordinator tests."""
from __future__ import annotations

from runtime.hashing import partition_for
from runtime.log import ATTR_CONTROL, ATTR_TRANSACTIONAL, FileLog, LogConfig
from runtime.messages.txn import (AddPartitionsToTxnRequest, AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
                                  EndTxnRequest, InitProducerIdRequest)
from runtime.testing import ShardHarness
from runtime.topics.data import encode_control, encode_records
from runtime.topics.producer_state import DuplicateBatch, ProducerStateManager
from runtime.txn.coordinator import TransactionCoordinatorShard

ONE_PARTITION = {"transaction.state.log.num.partitions": 1, "offsets.topic.num.partitions": 50}


def harness(tmp_path, **config) -> ShardHarness:
    return ShardHarness(str(tmp_path), TransactionCoordinatorShard, config={**ONE_PARTITION, **config})


def run(h: ShardHarness, op):
    """Write an operation and return (its records, its PendingWrite)."""
    captured = []

    def wrapped(shard, now):
        result = op(shard, now)
        captured.append(result)
        return result

    pending = h.write(wrapped)
    return list(captured[0].records), pending


def init(h, tid="tx", timeout_ms=60000, producer_id=-1, producer_epoch=-1):
    return h.call(lambda s, now: s.init_producer_id(
        InitProducerIdRequest(tid, timeout_ms, producer_id, producer_epoch), now))


def add_request(tid, pid, epoch, partitions, verify_only=False) -> AddPartitionsToTxnRequest:
    topics: dict[str, list[int]] = {}
    for topic, p in partitions:
        topics.setdefault(topic, []).append(p)
    return AddPartitionsToTxnRequest((AddPartitionsToTxnTransaction(
        tid, pid, epoch, verify_only, tuple(AddPartitionsToTxnTopic(t, tuple(ps)) for t, ps in topics.items())),))


def add(h, tid, pid, epoch, partitions):
    return h.call(lambda s, now: s.add_partitions_to_txn(add_request(tid, pid, epoch, partitions), now))


def end(h, tid, pid, epoch, commit=True, version=2):
    """Send EndTxn of transaction version `version`; returns its PendingWrite (done at once
    for an error or a retry)."""
    return h.write(lambda s, now: s.end_txn(EndTxnRequest(tid, pid, epoch, commit, version), now))


def finish_markers(h):
    """What the actor does: complete every pending marker set."""
    for m in h.read(lambda s: s.pending_markers()):
        h.write(lambda s, now, m=m: s.markers_written(m.transactional_id))
        h.call(lambda s, now, m=m: s.complete_markers(m.transactional_id, m.producer_id, m.producer_epoch, now))


def state_of(h):
    shard = h.shard
    return dict(shard.transactions), shard.last_block_start


def id_for_partition(partition: int, partitions: int) -> str:
    n = 0
    while partition_for(f"tx-{n}", partitions) != partition:
        n += 1
    return f"tx-{n}"


class Partition:
    """What the partition leader does around the manager: validate, append, apply."""

    def __init__(self, directory: str) -> None:
        self.log = FileLog(directory, LogConfig(segment_bytes=4096, fsync=False), name="t-0")
        self.state = ProducerStateManager()
        self.now = 0

    def produce(self, pid: int, epoch: int, seq: int, count: int = 1, txn: bool = False, version: int = 1):
        """Returns (first offset, last offset) acknowledged to the producer. A transactional
        batch that needs it is verified first, as by a coordinator that has the partition in
        the producer's transaction."""
        self.now += 1
        guard = self.state.verification_guard(pid, epoch, seq, version >= 2) if txn else None
        checked = self.state.validate_append(pid, epoch, seq, count, txn, self.log.end_offset, self.now, guard)
        if isinstance(checked, DuplicateBatch):
            return tuple(checked)
        payload = encode_records([(self.now, None, b"v%d" % i, ()) for i in range(count)])
        base = self.log.append(payload, count, self.now, attributes=ATTR_TRANSACTIONAL if txn else 0,
                               producer_id=pid, producer_epoch=epoch, base_sequence=seq)
        self.log.flush()
        self.state.apply(checked)
        return base, base + count - 1

    def marker(self, pid: int, epoch: int, commit: bool, coordinator_epoch: int = 0, version: int = 1):
        self.now += 1
        self.state.validate_control_marker(pid, epoch, coordinator_epoch, version)
        offset = self.log.append(encode_control(commit, coordinator_epoch, self.now), 1, self.now,
                                 attributes=ATTR_CONTROL | ATTR_TRANSACTIONAL, producer_id=pid, producer_epoch=epoch)
        self.log.flush()
        return self.state.apply_control_marker(pid, epoch, commit, offset, coordinator_epoch, self.now)

    @property
    def hw(self) -> int:
        return self.log.durable_offset

    def rebuilt(self, snapshot=None) -> ProducerStateManager:
        return ProducerStateManager.load(self.log.read(0, self.log.end_offset), snapshot)
