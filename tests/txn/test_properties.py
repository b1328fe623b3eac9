"""Random histories: the partition's read_committed view matches a simple model and survives a
rebuild; the coordinator's state survives a reload whatever the clients did."""
from __future__ import annotations

import pathlib
import tempfile

from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.errors import KafkaError
from runtime.messages.txn import AddOffsetsToTxnRequest, EndTxnRequest

from .helpers import Partition, add_request, finish_markers, harness, init, state_of

PIDS = (1, 2, 3)

produce_op = st.tuples(st.just("produce"), st.sampled_from(PIDS), st.sampled_from([True, True, False]), st.integers(1, 3),
                       st.sampled_from(["next", "next", "next", "retry", "gap"]), st.sampled_from([0, 0, 0, 1, -1]))
marker_op = st.tuples(st.just("marker"), st.sampled_from(PIDS), st.booleans(), st.sampled_from([0, 0, 0, 1, -1]))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(produce_op, produce_op, marker_op), min_size=5, max_size=40))
def test_read_committed_matches_a_model(ops):
    with tempfile.TemporaryDirectory() as d:
        p = Partition(d)
        epoch = {pid: 0 for pid in PIDS}
        next_seq = {pid: 0 for pid in PIDS}
        last_batch: dict[int, tuple] = {}
        ongoing: dict[int, list[int]] = {}
        aborted: set[int] = set()
        data: dict[int, tuple[int, bool]] = {}  # offset -> (pid, transactional)
        for op in ops:
            pid = op[1]
            try:
                if op[0] == "produce":
                    _, _, txn, count, mode, delta = op
                    e = max(epoch[pid] + delta, 0)
                    if mode == "retry" and pid in last_batch:
                        e, seq, count, txn = last_batch[pid]
                    else:
                        seq = (0 if e != epoch[pid] else next_seq[pid]) + (2 if mode == "gap" else 0)
                    end = p.log.end_offset
                    first, last = p.produce(pid, e, seq, count, txn)
                    if first == end:  # really appended
                        epoch[pid], next_seq[pid] = e, seq + count
                        last_batch[pid] = (e, seq, count, txn)
                        for off in range(first, last + 1):
                            data[off] = (pid, txn)
                        if txn:
                            ongoing.setdefault(pid, []).extend(range(first, last + 1))
                else:
                    _, _, commit, delta = op
                    e = max(epoch[pid] + delta, 0)
                    p.marker(pid, e, commit)
                    if e != epoch[pid]:
                        epoch[pid], next_seq[pid] = e, 0
                        last_batch.pop(pid, None)
                    offsets = ongoing.pop(pid, [])
                    if not commit:
                        aborted.update(offsets)
            except KafkaError:
                pass
        lso = p.state.last_stable_offset(p.hw)
        open_offsets = [o for offs in ongoing.values() for o in offs]
        assert lso == min(open_offsets + [p.hw])
        ranges = p.state.aborted_ranges(0, lso)
        for off, (pid, txn) in data.items():
            if off >= lso:
                continue
            filtered = txn and any(a.producer_id == pid and a.first_offset <= off <= a.last_offset for a in ranges)
            assert filtered == (off in aborted), off
        assert p.rebuilt() == p.state
        p.log.close()


coordinator_op = st.one_of(
    st.tuples(st.just("init"), st.sampled_from(["a", "b"])),
    st.tuples(st.just("add"), st.sampled_from(["a", "b"]), st.integers(0, 2)),
    st.tuples(st.just("offsets"), st.sampled_from(["a", "b"])),
    st.tuples(st.just("end"), st.sampled_from(["a", "b"]), st.booleans()),
    st.tuples(st.just("markers")),
    st.tuples(st.just("advance"), st.sampled_from([1000, 10000, 70000])),
)


@settings(max_examples=40, deadline=None)
@given(st.lists(coordinator_op, max_size=25))
def test_coordinator_state_survives_reload(ops):
    with tempfile.TemporaryDirectory() as d:
        h = harness(pathlib.Path(d))
        producers: dict[str, tuple[int, int]] = {}
        ends = {}  # transactional id -> its EndTxn in flight (version 2 answers with the new epoch)
        for op in ops:
            try:
                if op[0] == "init":
                    r = init(h, op[1])
                    if r.error_code == 0:
                        producers[op[1]] = (r.producer_id, r.producer_epoch)
                elif op[0] in ("add", "offsets", "end") and op[1] in producers:
                    tid, (pid, epoch) = op[1], producers[op[1]]
                    if op[0] == "add":
                        h.call(lambda s, now: s.add_partitions_to_txn(
                            add_request(tid, pid, epoch, [("t", op[2])]), now))
                    elif op[0] == "offsets":
                        h.call(lambda s, now: s.add_offsets_to_txn(AddOffsetsToTxnRequest(tid, pid, epoch, "g"), now))
                    else:
                        ends[tid] = h.write(lambda s, now: s.end_txn(EndTxnRequest(tid, pid, epoch, op[2]), now))
                elif op[0] == "markers":
                    finish_markers(h)
                    for tid, pending in list(ends.items()):
                        if pending.done:
                            del ends[tid]
                            if pending.error is None and pending.result().producer_id >= 0:
                                producers[tid] = (pending.result().producer_id, pending.result().producer_epoch)
                elif op[0] == "advance":
                    h.advance(op[1])
            except KafkaError:
                pass
            for t in h.shard.transactions.values():
                assert t.producer_epoch >= 0
        before = state_of(h)
        markers = h.read(lambda s: s.pending_markers())
        h.reload()
        assert state_of(h) == before
        assert h.read(lambda s: s.pending_markers()) == markers
        h.runtime.close()
