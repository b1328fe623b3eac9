"""The share consumer's acknowledgements without Ray: the batches ShareFetch and
ShareAcknowledge carry (Kafka's Acknowledgements: a gap in the offsets starts a batch, a
batch of one type names it once, a run of more than 10 records of one type is a batch of
its own), checked also against the real SharePartition; and the user's side (Kafka's
ShareFetch / ShareInFlightBatch): what is in hand, implicit and explicit modes, RENEW."""
from __future__ import annotations

import pytest

from runtime.clients.share_acknowledgements import (MAX_RECORDS_WITH_SAME_ACKNOWLEDGE_TYPE, AckResult,
                                                    InFlightRecords, acknowledgement_batches, commit_outcome)
from runtime.clients.types import ConsumerRecord, TopicPartition as TP
from runtime.errors import Errors, KafkaError
from runtime.messages.share import AcknowledgementBatch as AB, AcknowledgeType as T, name_deliveries
from runtime.share.partition import SharePartition
from runtime.share_state.records import RecordState
from tests.clients.share_harness import ReadResult

ACCEPT, RELEASE, REJECT, RENEW, GAP = (int(T.ACCEPT), int(T.RELEASE), int(T.REJECT), int(T.RENEW), int(T.GAP))


# ---------------------------------------------------------------------- the batches

def test_no_acknowledgements_no_batches():
    assert acknowledgement_batches({}) == ()


def test_a_contiguous_run_of_one_type_is_one_batch_naming_it_once():
    assert acknowledgement_batches({o: T.ACCEPT for o in range(5, 9)}) == (AB(5, 8, (ACCEPT,)),)


def test_a_gap_in_the_offsets_starts_a_new_batch():
    acks = {0: T.ACCEPT, 1: T.ACCEPT, 3: T.ACCEPT, 7: T.REJECT}
    assert acknowledgement_batches(acks) == (AB(0, 1, (ACCEPT,)), AB(3, 3, (ACCEPT,)), AB(7, 7, (REJECT,)))


def test_mixed_types_in_a_run_go_one_per_offset():
    acks = {10: T.ACCEPT, 11: T.RELEASE, 12: T.GAP, 13: T.ACCEPT}
    assert acknowledgement_batches(acks) == (AB(10, 13, (ACCEPT, RELEASE, GAP, ACCEPT)),)


def test_a_long_run_of_one_type_is_a_batch_of_its_own():
    n = MAX_RECORDS_WITH_SAME_ACKNOWLEDGE_TYPE
    acks = {0: T.RELEASE, 1: T.REJECT, **{o: T.ACCEPT for o in range(2, 2 + n + 1)}, 2 + n + 1: T.RELEASE}
    assert acknowledgement_batches(acks) == (
        AB(0, 1, (RELEASE, REJECT)), AB(2, 2 + n, (ACCEPT,)), AB(3 + n, 3 + n, (RELEASE,)))


def test_a_run_of_exactly_the_limit_stays_in_the_mixed_batch():
    n = MAX_RECORDS_WITH_SAME_ACKNOWLEDGE_TYPE
    acks = {0: T.RELEASE, **{o: T.ACCEPT for o in range(1, 1 + n)}}
    assert acknowledgement_batches(acks) == (AB(0, n, (RELEASE,) + (ACCEPT,) * n),)


def test_the_part_between_two_long_runs_names_its_type_once_when_uniform():
    n = MAX_RECORDS_WITH_SAME_ACKNOWLEDGE_TYPE + 1
    types = [T.ACCEPT] * n + [T.RELEASE] * 2 + [T.REJECT] * n
    assert acknowledgement_batches(dict(enumerate(types))) == (
        AB(0, n - 1, (ACCEPT,)), AB(n, n + 1, (RELEASE,)), AB(n + 2, 2 * n + 1, (REJECT,)))


def expand(batches) -> dict:
    out = {}
    for b in batches:
        for i, offset in enumerate(range(b.first_offset, b.last_offset + 1)):
            out[offset] = b.acknowledge_types[0] if len(b.acknowledge_types) == 1 else b.acknowledge_types[i]
    return out


@pytest.mark.parametrize("seed", range(20))
def test_the_batches_say_exactly_what_was_acknowledged(seed):
    import random
    rnd = random.Random(seed)
    acks = {}
    offset = 0
    for _ in range(rnd.randint(1, 60)):
        offset += rnd.choice([1, 1, 1, 2, 5])
        acks[offset] = rnd.choice([T.ACCEPT] * 6 + [T.RELEASE, T.REJECT, T.GAP])
    batches = acknowledgement_batches(acks)
    assert expand(batches) == {o: int(t) for o, t in acks.items()}
    assert all(b.last_offset < n.first_offset for b, n in zip(batches, batches[1:]))
    for b in batches:
        assert len(b.acknowledge_types) in (1, b.last_offset - b.first_offset + 1)
        assert len(b.acknowledge_types) == 1 or len(set(b.acknowledge_types)) > 1


def test_the_share_partition_applies_the_batches_as_acknowledged():
    sp = SharePartition("g", "T", 0)
    sp.initialize(ReadResult(0), 0)
    got = sp.acquire("m", [(0, 30)], 100, 0, batch_size=100)
    # a RELEASE first keeps the start offset (and every record's state) in place
    types = [T.RELEASE] + [T.ACCEPT] * 12 + [T.REJECT, T.ACCEPT] + [T.REJECT] * 16
    batches = name_deliveries(acknowledgement_batches(dict(enumerate(types))), lambda o: got.acquisition_id)
    sp.commit(sp.acknowledge("m", batches, 1))
    to_state = {T.ACCEPT: RecordState.ACKNOWLEDGED, T.RELEASE: RecordState.AVAILABLE, T.REJECT: RecordState.ARCHIVED}
    states = sp.record_states()
    assert [states[o][0] for o in range(31)] == [to_state[t] for t in types]


# ---------------------------------------------------------------------- the user's side

def rec(offset, topic="t", partition=0):
    return ConsumerRecord(topic, partition, offset, 0, None, b"v", (), 1)


def test_implicit_mode_accepts_what_the_last_poll_delivered():
    f = InFlightRecords(explicit=False)
    f.deliver([rec(0), rec(1), rec(0, partition=1)])
    f.acknowledge(rec(1), T.RELEASE)
    f.raise_if_unacknowledged()  # implicit: no need
    assert f.take() == {TP("t", 0): {1: T.RELEASE, 0: T.ACCEPT}, TP("t", 1): {0: T.ACCEPT}}
    assert f.take() == {}


def test_explicit_mode_refuses_a_poll_with_records_unacknowledged():
    f = InFlightRecords(explicit=True)
    f.deliver([rec(0), rec(1)])
    f.acknowledge(rec(0))
    with pytest.raises(KafkaError) as e:
        f.raise_if_unacknowledged()
    assert e.value.error is Errors.INVALID_RECORD_STATE
    f.acknowledge(rec(1), T.REJECT)
    f.raise_if_unacknowledged()
    assert f.take() == {TP("t", 0): {0: T.ACCEPT, 1: T.REJECT}}


def test_a_record_is_acknowledged_once_and_only_if_delivered():
    f = InFlightRecords(explicit=True)
    f.deliver([rec(0)])
    f.acknowledge(rec(0))
    for record in (rec(0), rec(5)):
        with pytest.raises(KafkaError) as e:
            f.acknowledge(record)
        assert e.value.error is Errors.INVALID_RECORD_STATE
    assert f.take() == {TP("t", 0): {0: T.ACCEPT}}


@pytest.mark.parametrize("bad", [T.GAP, 0, 9, "accept"])
def test_gap_and_unknown_types_are_refused_and_change_nothing(bad):
    f = InFlightRecords(explicit=True)
    f.deliver([rec(0)])
    with pytest.raises(KafkaError) as e:
        f.acknowledge(rec(0), bad)
    assert e.value.error is Errors.INVALID_REQUEST
    assert f.in_hand and f.take() == {}


def test_an_offset_not_in_hand_is_still_sent_for_the_share_partition_to_judge():
    f = InFlightRecords(explicit=True)
    f.acknowledge_offset("t", 3, 42, T.REJECT)
    assert f.take() == {TP("t", 3): {42: T.REJECT}}


def test_a_renewed_record_comes_back_with_the_next_poll_unless_the_renewal_failed():
    f = InFlightRecords(explicit=True)
    f.deliver([rec(0), rec(1)])
    f.acknowledge(rec(0), T.RENEW)
    f.acknowledge(rec(1), T.RENEW)
    acks = f.take()
    assert acks == {TP("t", 0): {0: T.RENEW, 1: T.RENEW}}
    f.settle([AckResult(TP("t", 0), (0, 1), None, renewed=True)])
    assert f.deliver([rec(2)]) == [rec(0), rec(1), rec(2)]
    f.acknowledge(rec(0), T.RENEW)
    f.take()
    f.settle([AckResult(TP("t", 0), (0,), KafkaError(Errors.INVALID_RECORD_STATE, "lock expired"), renewed=True)])
    assert f.deliver([]) == []


def test_commit_outcome_gives_each_partition_its_first_error():
    error = KafkaError(Errors.INVALID_RECORD_STATE, "x")
    results = [AckResult(TP("t", 0), (0,), None), AckResult(TP("t", 0), (1,), error),
               AckResult(TP("t", 0), (2,), None), AckResult(TP("t", 1), (0,), None)]
    assert commit_outcome(results) == {TP("t", 0): error, TP("t", 1): None}


def test_a_renewed_record_acquired_again_by_a_fetch_is_handed_out_once_as_the_new_delivery():
    """Its lock ran out before the next poll and this member's fetch took it again: the poll
    has it once, with the new delivery count (both copies made the user's second
    acknowledgement of it fail)."""
    f = InFlightRecords(explicit=True)
    f.deliver([rec(0)])
    f.acknowledge(rec(0), T.RENEW)
    f.take()
    f.settle([AckResult(TP("t", 0), (0,), None, renewed=True)])
    again = rec(0)._replace(delivery_count=2)
    assert f.deliver([again, rec(1)]) == [again, rec(1)]
    f.acknowledge(again)
    f.acknowledge(rec(1))
    assert f.take() == {TP("t", 0): {0: T.ACCEPT, 1: T.ACCEPT}}
