"""Share consumers' cores end to end through the client harness (manual clock, no Ray): the
real group coordinator shard assigns, pure SharePartitions acquire and take the
acknowledgements. Written from KIP-932's behaviour: acknowledgements ride on the next fetch
of their partition, or go alone (ShareAcknowledge) when no fetch can carry them; offsets
acquired without a record are acknowledged as GAP; RELEASE redelivers with a higher delivery
count; a lock that times out hands the record to another member; a member the group dropped
hears it from a refused fetch, rejoins, and fetches again."""
from __future__ import annotations

from runtime.clients.types import TopicPartition as TP
from runtime.errors import Errors
from runtime.messages.share import AcknowledgeType as T
from runtime.share_state.records import RecordState
from tests.clients.share_harness import LOCK_MS, ShareClientHarness, ShareMember

T0, T1 = TP("t", 0), TP("t", 1)


def started(tmp_path, partitions=1, members=("a",), **kw):
    h = ShareClientHarness(tmp_path, {"t": partitions})
    ms = [ShareMember(h, m, **kw) for m in members]
    for _ in range(3):
        for m in ms:
            m.heartbeat()
    return h, ms


def offsets(records):
    return [(r.offset, r.delivery_count) for r in records]


def test_members_split_the_partitions_and_each_fetches_its_own(tmp_path):
    h, (a, b) = started(tmp_path, partitions=2, members=("a", "b"))
    assert {len(a.membership.owned), len(b.membership.owned)} == {1}
    assert a.membership.owned | b.membership.owned == {T0, T1}
    h.produce(T0, b"x", b"y")
    h.produce(T1, b"z")
    got = {m.membership.member_id: [(r.partition, r.value) for r in m.poll()] for m in (a, b)}
    assert sorted(got["a"] + got["b"]) == [(0, b"x"), (0, b"y"), (1, b"z")]
    assert all(len({p for p, _ in got[m]}) == 1 for m in got)


def test_acknowledgements_ride_on_the_next_fetch_and_a_release_comes_back(tmp_path):
    h, (a,) = started(tmp_path)
    h.produce(T0, b"0", b"1", b"2")
    first = a.poll()
    assert offsets(first) == [(0, 1), (1, 1), (2, 1)]
    a.in_flight.acknowledge(first[0], T.ACCEPT)
    a.in_flight.acknowledge(first[1], T.RELEASE)
    a.in_flight.acknowledge(first[2], T.REJECT)
    again = a.poll()
    assert offsets(again) == [(1, 2)]
    assert [(r.partition, r.offsets, r.error) for r in a.results] == [(T0, (0, 1, 2), None)]
    states = h.partitions[T0].record_states()
    assert states[1][0] is RecordState.ACQUIRED and states[2][0] is RecordState.ARCHIVED


def test_offsets_acquired_without_a_record_are_acknowledged_as_gaps(tmp_path):
    h, (a,) = started(tmp_path)
    h.produce(T0, b"0", None, b"2")
    records = a.poll()
    assert [r.offset for r in records] == [0, 2]
    delivery = h.partitions[T0].acquisition_of(0)
    assert a.book.partitions[T0].gaps == {1: (T.GAP, delivery)}
    for r in records:
        a.in_flight.acknowledge(r)
    named = a.book.screen(a.in_flight.take(), h.now)[T0]
    request, acks = a.book.fetch_request(T0, named, 0, a.membership.stamp())
    assert acks == {0: (T.ACCEPT, delivery), 1: (T.GAP, delivery), 2: (T.ACCEPT, delivery)}
    (batch,) = request.topics[0].partitions[0].acknowledgement_batches
    assert (batch.first_offset, batch.last_offset, batch.acknowledge_types, batch.acquisition_id) == (
        0, 2, (1, 0, 1), delivery)
    assert a.book.partitions[T0].gaps == {}


def test_a_poll_sends_implicit_acceptance_and_the_partition_moves_on(tmp_path):
    h, (a,) = started(tmp_path, explicit=False)
    h.produce(T0, b"0", b"1")
    assert len(a.poll()) == 2
    h.produce(T0, b"2")
    assert offsets(a.poll()) == [(2, 1)]
    assert h.partitions[T0].start_offset == 2


def test_a_renewed_record_is_acknowledged_at_once_and_delivered_again(tmp_path):
    h, (a,) = started(tmp_path)
    h.produce(T0, b"0")
    (r,) = a.poll()
    h.advance(LOCK_MS - 1000)
    a.in_flight.acknowledge(r, T.RENEW)
    (again,) = a.poll()
    assert offsets([again]) == [(0, 1)]
    h.advance(2000)  # past the first lock, not the renewed one
    assert h.partitions[T0].record_states()[0][0] is RecordState.ACQUIRED
    # The client counts the renewed lock too: the acknowledgement goes out, and holds.
    a.in_flight.acknowledge(again)
    assert [(r.offsets, r.renewed, r.error) for r in a.commit()] == [((0,), True, None), ((0,), False, None)]
    assert h.partitions[T0].start_offset == 1


def test_a_lock_that_times_out_gives_the_record_to_another_member(tmp_path):
    h, (a, b) = started(tmp_path, members=("a", "b"))
    h.produce(T0, b"0")
    fetched = [m for m in (a, b) if m.poll()]
    assert len(fetched) == 1
    other = b if fetched[0] is a else a
    assert other.poll() == []
    h.advance(LOCK_MS + 1)
    assert offsets(other.poll()) == [(0, 2)]


def test_an_acknowledgement_after_the_lock_ran_out_is_not_taken_for_a_new_delivery(tmp_path):
    """The user holds records past their lock, and meanwhile this member's fetch (one under way
    when the lock ran out) acquired them again: the SharePartition cannot tell the stale
    acknowledgement from one of the new delivery, so the client answers it itself,
    INVALID_RECORD_STATE, and the new delivery is acknowledged on its own."""
    h, (a,) = started(tmp_path)
    h.produce(T0, b"0", b"1")
    held = a.poll()
    h.advance(LOCK_MS + 1)
    request, acks = a.book.fetch_request(T0, {}, 0, a.membership.stamp())
    a.book.on_fetch_response(a.book.partitions[T0], acks, h.share_fetch(request), h.now)
    for r in held:
        a.in_flight.acknowledge(r)
    [result] = a.commit()
    assert (result.offsets, result.error.error) == ((0, 1), Errors.INVALID_RECORD_STATE)
    assert {o: s[:3] for o, s in h.partitions[T0].record_states().items()} == {
        0: (RecordState.ACQUIRED, 2, "a"), 1: (RecordState.ACQUIRED, 2, "a")}
    again = a.poll()
    assert offsets(again) == [(0, 2), (1, 2)]
    for r in again:
        a.in_flight.acknowledge(r)
    assert [r.error for r in a.commit()] == [None]
    assert h.partitions[T0].start_offset == 2


def test_acknowledgements_for_a_partition_no_fetch_can_carry_go_alone(tmp_path):
    h, (a,) = started(tmp_path)
    h.produce(T0, b"0")
    (r,) = a.poll()
    a.in_flight.acknowledge(r)
    a.book.partitions[T0].fetching = True  # a fetch is under way: it cannot carry them
    route = a.book.route(a.book.screen(a.in_flight.take(), h.now), a.fetchable)
    assert route.alone == {T0: {0: (T.ACCEPT, h.partitions[T0].acquisition_of(0))}}
    assert route.fetch == {} and route.renew == {}


def test_acknowledgements_outside_the_subscription_are_refused(tmp_path):
    h, (a,) = started(tmp_path)
    a.in_flight.acknowledge_offset("elsewhere", 0, 3, T.ACCEPT)
    (result,) = a.commit()
    assert result.partition == TP("elsewhere", 0) and result.error.error is Errors.UNKNOWN_TOPIC_OR_PARTITION


def test_a_member_the_group_dropped_hears_it_from_a_refused_fetch_and_joins_again(tmp_path):
    h, (a,) = started(tmp_path)
    h.produce(T0, b"0", b"1")
    held = a.poll()
    h.remove("a")  # as a session timeout would: its records go back
    for r in held:
        a.in_flight.acknowledge(r)
    assert a.poll() == []
    (result,) = a.results
    assert result.offsets == (0, 1) and result.error.error is Errors.UNKNOWN_MEMBER_ID
    assert a.membership.owned == frozenset() and a.membership.heartbeat_due_now()
    a.poll()
    assert len(a.results) == 1  # no fetch while it is not in the group
    a.heartbeat()
    assert a.membership.owned == {T0} and "a" in h.members()
    assert offsets(a.poll()) == [(0, 1), (1, 1)]  # released as not delivered


def test_a_member_that_leaves_stops_fetching_and_its_partition_goes_to_the_others(tmp_path):
    h, (a, b) = started(tmp_path, partitions=2, members=("a", "b"))
    a.membership.leave()
    a.heartbeat()
    assert "a" not in h.members() and a.membership.owned == frozenset() and a.fetchable == frozenset()
    for _ in range(2):
        b.heartbeat()
    assert b.membership.owned == {T0, T1}
