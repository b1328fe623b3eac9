"""Incremental fetch sessions (KIP-227) with a manual clock: opening, incremental requests
that answer only what changed, forgotten topics, closing, the session errors (which change
nothing) and the cache's limit and eviction."""
import random

import pytest

from runtime.errors import Errors
from runtime.wire.fetch_session import (FINAL_EPOCH, INITIAL_EPOCH, FetchPartition, FetchSessionCache,
                                        FetchSessionRequest, PartitionResult, next_epoch)

A0, A1, B0 = ("a", 0), ("a", 1), ("b", 0)


def cache(**kw):
    return FetchSessionCache(random.Random(17), **kw)


def request(session_id, epoch, partitions=(), forgotten=(), offset=0, version=12):
    return FetchSessionRequest(version, session_id, epoch, {k: FetchPartition(offset, 1 << 20) for k in partitions},
                               tuple(forgotten))


def quiet(hw=5, log_start=0):
    return PartitionResult(0, hw, log_start, False)


def data(hw=5):
    return PartitionResult(0, hw, 0, True)


def serve(c, req, now_ms=0, results=None):
    """One fetch: the context, then the answer given every read partition's result."""
    context = c.new_context(req, now_ms)
    results = {key: (results or {}).get(key, quiet()) for key, _ in context.reads}
    return context, c.complete(context, results, now_ms)


def open_session(c, partitions=(A0, A1), now_ms=0, version=12):
    _, answer = serve(c, request(0, INITIAL_EPOCH, partitions, version=version), now_ms)
    assert answer.error is Errors.NONE and answer.session_id > 0
    return answer.session_id


def test_sessionless_fetch_answers_every_partition_and_keeps_nothing():
    c = cache()
    context, answer = serve(c, request(0, FINAL_EPOCH, [A0, A1]))
    assert [k for k, _ in context.reads] == [A0, A1]
    assert answer.session_id == 0 and answer.partitions == (A0, A1)
    assert not c.sessions


def test_an_incremental_fetch_answers_only_partitions_that_changed():
    c = cache()
    sid = open_session(c)
    context, answer = serve(c, request(sid, 1), results={A1: data(hw=6)})
    # Every partition of the session is read, though the request named none.
    assert [k for k, _ in context.reads] == [A0, A1]
    assert answer == type(answer)(Errors.NONE, sid, (A1,))
    _, answer = serve(c, request(sid, 2), results={A1: quiet(hw=6)})
    assert answer.partitions == ()
    _, answer = serve(c, request(sid, 3), results={A0: quiet(hw=9), A1: quiet(hw=6, log_start=2)})
    assert answer.partitions == (A0, A1)


def test_an_error_is_always_answered_and_the_partition_again_once_it_clears():
    c = cache()
    sid = open_session(c)
    _, answer = serve(c, request(sid, 1), results={A0: PartitionResult(6, -1, -1, False)})
    assert answer.partitions == (A0,)
    _, answer = serve(c, request(sid, 2), results={A0: quiet()})
    assert answer.partitions == (A0,)


def test_a_partition_with_records_moves_to_the_end():
    c = cache()
    sid = open_session(c, [A0, A1, B0])
    serve(c, request(sid, 1), results={A0: data()})
    context, _ = serve(c, request(sid, 2))
    assert [k for k, _ in context.reads] == [A1, B0, A0]


def test_incremental_requests_add_update_and_forget_partitions():
    c = cache()
    sid = open_session(c, [A0])
    context, answer = serve(c, request(sid, 1, [B0]))
    assert [k for k, _ in context.reads] == [A0, B0] and answer.partitions == (B0,)  # new: always answered
    context, _ = serve(c, request(sid, 2, [A0], offset=42, forgotten=[B0]))
    assert context.reads == ((A0, FetchPartition(42, 1 << 20)),)
    assert list(c.sessions[sid].partitions) == [A0]


def test_forgetting_every_partition_closes_the_session():
    c = cache()
    sid = open_session(c, [A0])
    context, answer = serve(c, request(sid, 1, forgotten=[A0]))
    assert answer.session_id == 0 and not context.reads and sid not in c.sessions


def test_epoch_minus_one_closes_the_session_and_fetches_without_one():
    c = cache()
    sid = open_session(c)
    _, answer = serve(c, request(sid, FINAL_EPOCH, [A0]))
    assert answer.session_id == 0 and answer.partitions == (A0,) and not c.sessions
    _, answer = serve(c, request(sid, 1))
    assert answer.error is Errors.FETCH_SESSION_ID_NOT_FOUND


def test_a_full_fetch_naming_a_session_replaces_it():
    c = cache()
    sid = open_session(c)
    new = serve(c, request(sid, INITIAL_EPOCH, [B0]))[1].session_id
    assert new != sid and list(c.sessions) == [new]


@pytest.mark.parametrize("session_id, epoch, error", [
    (12345, 1, Errors.FETCH_SESSION_ID_NOT_FOUND),
    (0, 3, Errors.FETCH_SESSION_ID_NOT_FOUND),
    (None, 2, Errors.INVALID_FETCH_SESSION_EPOCH),
    (None, 0x7FFFFFFF, Errors.INVALID_FETCH_SESSION_EPOCH),
])
def test_session_errors_answer_nothing_and_change_nothing(session_id, epoch, error):
    c = cache()
    sid = open_session(c)
    before = repr(c.sessions)
    context, answer = serve(c, request(sid if session_id is None else session_id, epoch, [B0], forgotten=[A0]))
    assert answer.error is error and answer.partitions == () and not context.reads
    assert repr(c.sessions) == before
    assert serve(c, request(sid, 1))[1].error is Errors.NONE  # the session goes on at its epoch


def test_a_session_keeps_to_topic_names_or_to_topic_ids():
    c = cache()
    sid = open_session(c, version=12)
    _, answer = serve(c, request(sid, 1, version=13))
    assert answer.error is Errors.FETCH_SESSION_TOPIC_ID_ERROR
    sid = open_session(c, version=13)
    assert serve(c, request(sid, 1, version=13))[1].error is Errors.NONE


def test_a_duplicate_of_the_same_epoch_in_flight_is_refused():
    c = cache()
    sid = open_session(c)
    first = c.new_context(request(sid, 1), 0)
    second = c.new_context(request(sid, 1), 0)
    assert second.error is Errors.INVALID_FETCH_SESSION_EPOCH
    assert c.complete(first, {k: quiet() for k, _ in first.reads}, 0).error is Errors.NONE


def test_the_epoch_wraps_to_one():
    assert next_epoch(0x7FFFFFFF) == 1 and next_epoch(0) == 1 and next_epoch(FINAL_EPOCH) == FINAL_EPOCH


def test_a_full_cache_gives_no_session_until_one_is_idle_long_enough():
    c = cache(max_slots=2, eviction_ms=1000)
    first = open_session(c, now_ms=0)
    second = open_session(c, now_ms=500)
    _, answer = serve(c, request(0, INITIAL_EPOCH, [A0, A1]), now_ms=900)
    assert answer.session_id == 0 and answer.partitions == (A0, A1)  # served, without a session
    serve(c, request(second, 1), now_ms=1200)
    third = open_session(c, now_ms=1200 + 1)
    assert set(c.sessions) == {second, third} and first not in c.sessions  # the idle one went


def test_a_bigger_session_evicts_the_smallest_old_one():
    c = cache(max_slots=2, eviction_ms=1000)
    small = open_session(c, [A0], now_ms=0)
    big = open_session(c, [A0, A1, B0], now_ms=0)
    serve(c, request(small, 1), now_ms=1500)
    serve(c, request(big, 1), now_ms=1500)
    # Nothing idle: a session of the same size as the smallest does not get in, a bigger one does.
    assert serve(c, request(0, INITIAL_EPOCH, [B0]), now_ms=1600)[1].session_id == 0
    newer = open_session(c, [A0, B0], now_ms=1600)
    assert set(c.sessions) == {big, newer}


def test_a_young_session_is_not_evicted_for_a_bigger_one():
    c = cache(max_slots=1, eviction_ms=1000)
    open_session(c, [A0], now_ms=0)
    assert serve(c, request(0, INITIAL_EPOCH, [A0, A1, B0]), now_ms=500)[1].session_id == 0


def test_no_slots_means_no_sessions():
    c = cache(max_slots=0)
    assert serve(c, request(0, INITIAL_EPOCH, [A0]))[1].session_id == 0
