"""Share sessions (KIP-932) as the gateway keeps them: epochs, incremental partition sets,
the cache limit, and the sessions a closed connection ends."""
import pytest

from runtime.errors import Errors, KafkaError
from runtime.share.sessions import FINAL_EPOCH, ShareSessionCache, next_epoch

A, B, C = ("t1", 0), ("t1", 1), ("t2", 0)


def refused(error, call, *args):
    with pytest.raises(KafkaError) as e:
        call(*args)
    assert e.value.error is error


def test_a_session_opens_at_epoch_0_and_each_request_carries_the_next_epoch():
    cache = ShareSessionCache()
    assert cache.fetch("g", "m", 0, "conn", [A, B], [], False) == ({A, B}, None)
    assert cache.fetch("g", "m", 1, "conn", [], [], True) == ({A, B}, None)  # incremental: the whole set
    assert cache.acknowledge("g", "m", 2, "conn") is None
    assert cache.fetch("g", "m", 3, "conn", [C], [A], False) == ({B, C}, None)
    assert cache.get("g", "m").epoch == 4


def test_another_epoch_or_no_session_is_refused_and_changes_nothing():
    cache = ShareSessionCache()
    refused(Errors.SHARE_SESSION_NOT_FOUND, cache.fetch, "g", "m", 1, "conn", [A], [], False)
    refused(Errors.SHARE_SESSION_NOT_FOUND, cache.acknowledge, "g", "m", 1, "conn")
    cache.fetch("g", "m", 0, "conn", [A], [], False)
    refused(Errors.INVALID_SHARE_SESSION_EPOCH, cache.fetch, "g", "m", 5, "conn", [B], [], False)
    refused(Errors.INVALID_SHARE_SESSION_EPOCH, cache.acknowledge, "g", "m", 2, "conn")
    # A ShareAcknowledge cannot open a session, an opening fetch cannot acknowledge.
    refused(Errors.INVALID_SHARE_SESSION_EPOCH, cache.acknowledge, "g", "m", 0, "conn")
    refused(Errors.INVALID_REQUEST, cache.fetch, "g", "m", 0, "conn", [B], [], True)
    session = cache.get("g", "m")
    assert (session.partitions, session.epoch) == ({A}, 1)


def test_closing_ends_the_session_and_returns_it_for_release():
    cache = ShareSessionCache()
    cache.fetch("g", "m", 0, "conn", [A, B], [], False)
    partitions, ended = cache.fetch("g", "m", FINAL_EPOCH, "conn", [A], [], True)
    assert partitions == set() and ended.partitions == {A, B}
    assert cache.get("g", "m") is None
    refused(Errors.SHARE_SESSION_NOT_FOUND, cache.acknowledge, "g", "m", FINAL_EPOCH, "conn")
    cache.fetch("g", "m", 0, "conn", [C], [], False)
    assert cache.acknowledge("g", "m", FINAL_EPOCH, "conn").partitions == {C}


def test_opening_again_replaces_the_session():
    cache = ShareSessionCache()
    cache.fetch("g", "m", 0, "conn", [A], [], False)
    partitions, ended = cache.fetch("g", "m", 0, "conn2", [B], [], False)
    assert partitions == {B} and ended.partitions == {A}
    assert len(cache) == 1


def test_the_cache_limit_refuses_a_new_session_only():
    cache = ShareSessionCache(max_sessions=2)
    cache.fetch("g", "m1", 0, "c", [A], [], False)
    cache.fetch("g", "m2", 0, "c", [A], [], False)
    refused(Errors.SHARE_SESSION_LIMIT_REACHED, cache.fetch, "g", "m3", 0, "c", [A], [], False)
    assert cache.fetch("g", "m1", 0, "c", [B], [], False)[0] == {B}  # replacing is not a new one
    assert len(cache) == 2


def test_a_closed_connection_ends_its_sessions_only():
    cache = ShareSessionCache()
    cache.fetch("g", "m1", 0, "c1", [A], [], False)
    cache.fetch("g", "m2", 0, "c2", [B], [], False)
    assert [s.member_id for s in cache.connection_closed("c1")] == ["m1"]
    assert cache.get("g", "m1") is None and cache.get("g", "m2") is not None


def test_the_epoch_wraps_to_1():
    assert next_epoch(0x7FFFFFFF) == 1 and next_epoch(0) == 1 and next_epoch(FINAL_EPOCH) == FINAL_EPOCH
