"""A randomized ledger of one share partition: several members fetch, acknowledge (every type,
per batch and per offset, sometimes for records they do not hold), let locks expire, leave,
and writes to the share coordinator succeed or fail in any order. Whatever happens, no
record is handed to a member while someone holds it, no delivery count passes the limit,
and once everyone accepts what is left, every record still in the log ended ACKNOWLEDGED or
ARCHIVED exactly once in the durable (committed) writes. A lock expiry stands even when its
write fails (as in Kafka); what it could not write goes out with a later write."""
from __future__ import annotations


from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from runtime.errors import KafkaError
from runtime.messages.share import AcknowledgementBatch
from runtime.share.partition import SharePartition
from runtime.share_state.records import RecordState
from runtime.messages.share import name_deliveries
from tests.share.test_share_partition import Read, snapshot

LOCK = 1000
MEMBERS = ("m1", "m2", "m3")
TERMINAL = (int(RecordState.ACKNOWLEDGED), int(RecordState.ARCHIVED))


class Ledger(RuleBasedStateMachine):
    limit = 2

    def __init__(self) -> None:
        super().__init__()
        self.sp = SharePartition("g", "t", 0, {
            "group.share.delivery.count.limit": self.limit,
            "group.share.record.lock.duration.ms": LOCK,
            "group.share.partition.max.record.locks": 40,
        })
        self.sp.initialize(Read(-1), 0, reset_offset=0)
        self.log: list[tuple[int, int]] = []
        self.log_end = 0
        self.log_start = 0
        self.now = 0
        self.pending = []
        self.terminal: dict[int, set] = {}  # offset -> the (state, delivery count) it was durably settled as
        self.deliveries: dict[int, list[tuple[str, int]]] = {}  # offset -> (member, acquisition id), oldest first

    # ---- helpers ----

    def in_write(self) -> set[int]:
        """Offsets whose change waits for its write (a lock expiry does not wait, nor do the
        failed expiries a write carries along)."""
        return {o for p in self.pending for s in p._changes for o in range(s.first_offset, s.last_offset + 1)}

    def held(self, member: str) -> list[int]:
        return [o for o, (state, _, holder, _) in self.sp.record_states().items()
                if state is RecordState.ACQUIRED and holder == member]

    def send(self, pending) -> None:
        if pending is None:
            return
        if pending.state_batches:
            self.pending.append(pending)
        else:
            self.sp.commit(pending)

    def settle(self, pending, ok: bool) -> None:
        self.pending.remove(pending)
        if not ok:
            # A lock expiry stands though its write failed (Kafka's behaviour); what it wrote
            # goes with the next writes until one is accepted.
            self.sp.rollback(pending)
            return
        for b in pending.state_batches:
            assert b.delivery_count <= self.limit
            if b.delivery_state in TERMINAL:
                for o in range(b.first_offset, b.last_offset + 1):
                    # Written again (carried along) it must say the same: one outcome per record.
                    outcome = self.terminal.setdefault(o, set())
                    outcome.add((b.delivery_state, b.delivery_count))
                    assert len(outcome) == 1, f"offset {o} finished twice: {outcome}"
        self.sp.commit(pending)

    def fetch(self, member: str, max_records: int, batches: int, batch_size: int | None) -> None:
        sp = self.sp
        fetch_offset = sp.next_fetch_offset()
        spans = [s for s in self.log if s[1] >= fetch_offset][:batches]
        if not spans:
            return
        before, start, busy = sp.record_states(), sp.start_offset, self.in_write()
        got = sp.acquire(member, spans, max_records, self.now, batch_size=batch_size, fetch_offset=fetch_offset)
        after = sp.record_states()
        count = 0
        for r in got.acquired_records:
            assert 1 <= r.delivery_count <= self.limit
            for o in range(r.first_offset, r.last_offset + 1):
                count += 1
                assert max(start, self.log_start) <= o < self.log_end and o not in busy and o not in self.terminal
                assert o not in before or before[o][0] is RecordState.AVAILABLE, (o, before.get(o))
                assert after[o] == (RecordState.ACQUIRED, r.delivery_count, member, self.now + LOCK)
        assert count == got.count
        for r in got.acquired_records:
            for o in range(r.first_offset, r.last_offset + 1):
                assert all(a != got.acquisition_id for _, a in self.deliveries.get(o, ()))
                self.deliveries.setdefault(o, []).append((member, got.acquisition_id))

    def acknowledge(self, member: str, first: int, last: int, types: tuple[int, ...], acquisition_id=None) -> bool:
        """As a consumer does: naming the deliveries that hold the offsets now, unless told which."""
        before = snapshot(self.sp)
        batch = AcknowledgementBatch(first, last, types)
        if acquisition_id is None:
            batches = name_deliveries([batch], self.sp.acquisition_of)
        else:
            batches = [AcknowledgementBatch(first, last, types, acquisition_id)]
        try:
            pending = self.sp.acknowledge(member, batches, self.now)
        except KafkaError:
            assert snapshot(self.sp) == before
            return False
        self.send(pending)
        return True

    # ---- rules ----

    @rule(n=st.integers(1, 8))
    def produce(self, n):
        self.log.append((self.log_end, self.log_end + n - 1))
        self.log_end += n

    @rule(member=st.sampled_from(MEMBERS), max_records=st.integers(1, 30), batches=st.integers(1, 4),
          batch_size=st.sampled_from([None, 3, 10]))
    def share_fetch(self, member, max_records, batches, batch_size):
        self.fetch(member, max_records, batches, batch_size)

    @rule(member=st.sampled_from(MEMBERS), as_member=st.sampled_from(MEMBERS), data=st.data())
    def ack(self, member, as_member, data):
        held = self.held(member)
        if not held:
            return
        first = data.draw(st.sampled_from(held))
        last = first + data.draw(st.integers(0, 6))
        if data.draw(st.booleans()):
            types = (data.draw(st.integers(0, 4)),)
        else:
            types = tuple(data.draw(st.lists(st.integers(0, 4), min_size=last - first + 1, max_size=last - first + 1)))
        self.acknowledge(as_member, first, last, types)

    @rule(data=st.data())
    def late_ack(self, data):
        """An acknowledgement of an earlier delivery (its lock ran out, or its holder left, and
        someone, maybe the same member, may hold the record again) never applies."""
        stale = [(o, m, a) for o, ds in self.deliveries.items() for m, a in ds[:-1]]
        if not stale:
            return
        offset, member, acquisition_id = data.draw(st.sampled_from(stale))
        assert acquisition_id != self.sp.acquisition_of(offset)
        assert not self.acknowledge(member, offset, offset, (data.draw(st.integers(0, 4)),), acquisition_id)

    @rule(index=st.integers(0, 50), ok=st.booleans())
    @precondition(lambda self: self.pending)
    def write_done(self, index, ok):
        self.settle(self.pending[index % len(self.pending)], ok)

    @rule(ok=st.booleans())
    @precondition(lambda self: self.pending)
    def all_writes_done(self, ok):
        for pending in list(self.pending):
            self.settle(pending, ok)

    @rule()
    def rewrite(self):
        """What the SharePartition actor does when failed expiries wait for a write."""
        self.send(self.sp.unwritten_write())

    @rule(ms=st.integers(1, 2 * LOCK))
    def tick(self, ms):
        self.now += ms
        if self.sp.next_deadline() is not None and self.sp.next_deadline() <= self.now:
            self.send(self.sp.expire(self.now))

    @rule(n=st.integers(1, 10))
    def retention(self, n):
        # Whole log batches are deleted from the front; the share partition is told.
        keep = [b for b in self.log if b[0] >= self.log_start + n]
        self.log_start = keep[0][0] if keep else self.log_end
        self.log = keep
        self.sp.update_log_start_offset(self.log_start)

    @rule(member=st.sampled_from(MEMBERS))
    def leave(self, member):
        self.send(self.sp.release_member(member, self.now))

    # ---- invariants ----

    @invariant()
    def states_are_consistent(self):
        previous_last = -1
        for batch in self.sp.cached_batches():
            assert batch.first_offset > previous_last
            previous_last = batch.last_offset
            for s in batch.states():
                assert 0 <= s.delivery_count <= self.limit
                if s.state is RecordState.ACQUIRED:
                    assert s.member_id and s.deadline_ms is not None
                else:
                    assert s.member_id == "" and s.deadline_ms is None
        assert self.sp.start_offset <= self.sp.end_offset + 1

    def teardown(self):
        # Every write goes through, then everyone accepts what is left until the log is done.
        for _ in range(100):
            self.send(self.sp.unwritten_write())
            while self.pending:
                self.settle(self.pending[0], True)
            if self.sp.start_offset >= self.log_end and not self.sp.cached_batches():
                break  # (records held below a moved log start offset leave when their lock expires)
            for member in MEMBERS:
                for o in self.held(member):
                    self.acknowledge(member, o, o, (1,))
            while self.pending:
                self.settle(self.pending[0], True)
            self.fetch("closer", 10_000, len(self.log), None)
            for o in self.held("closer"):
                assert self.acknowledge("closer", o, o, (1,))
            self.now += LOCK
            self.send(self.sp.expire(self.now))
        assert self.sp.start_offset == self.log_end and not self.sp.cached_batches()
        # Records deleted by retention may have gone without an outcome; every other one has
        # exactly one, durable, even those archived by an expiry whose write failed.
        self.send(self.sp.unwritten_write())
        while self.pending:
            self.settle(self.pending[0], True)
        assert all(len(self.terminal.get(o, ())) == 1 for o in range(self.log_start, self.log_end)), self.terminal
        assert set(self.terminal) <= set(range(self.log_end))


class LedgerWithLongerLimit(Ledger):
    # Past 2, the last delivery of a record goes alone and groups shrink as deliveries grow.
    limit = 4


Ledger.TestCase.settings = settings(max_examples=300, stateful_step_count=100, deadline=None,
                                    suppress_health_check=[HealthCheck.too_slow])
LedgerWithLongerLimit.TestCase.settings = settings(max_examples=60, stateful_step_count=100, deadline=None,
                                                   suppress_health_check=[HealthCheck.too_slow])
TestShareLedger = Ledger.TestCase
TestShareLedgerWithLongerLimit = LedgerWithLongerLimit.TestCase
