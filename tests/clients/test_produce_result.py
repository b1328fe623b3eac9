"""The futures `Producer.send` returns: one shared result per batch, per-record metadata."""
import threading

import pytest

from actors.clients.produce_result import FutureRecordMetadata, ProduceRequestResult, RecordMetadata
from runtime.errors import Errors, KafkaError


def futures_of(result: ProduceRequestResult, n: int) -> list[FutureRecordMetadata]:
    return [FutureRecordMetadata(result, i, 1000 + i, -1, 10) for i in range(n)]


def test_each_record_gets_its_offset_in_the_batch():
    result = ProduceRequestResult("t", 2)
    futures = futures_of(result, 3)
    assert not any(f.done() for f in futures) and all(f.running() for f in futures)
    result.complete(40)
    assert [f.get() for f in futures] == [RecordMetadata("t", 2, 40 + i, 1000 + i, -1, 10) for i in range(3)]
    assert all(f.done() and f.exception() is None for f in futures)
    assert not futures[0].cancel() and not futures[0].cancelled()


def test_a_failed_batch_fails_every_record_with_its_error():
    result = ProduceRequestResult("t", 0)
    futures = futures_of(result, 2)
    result.fail(KafkaError(Errors.MESSAGE_TOO_LARGE, "no"))
    for f in futures:
        assert f.exception().error is Errors.MESSAGE_TOO_LARGE
        with pytest.raises(KafkaError) as e:
            f.result()
        assert e.value.error is Errors.MESSAGE_TOO_LARGE


def test_waiting_past_the_timeout_is_request_timed_out():
    (future,) = futures_of(ProduceRequestResult("t", 0), 1)
    with pytest.raises(KafkaError) as e:
        future.get(timeout=0.01)
    assert e.value.error is Errors.REQUEST_TIMED_OUT


def test_callbacks_run_once_whether_added_before_or_after_completion():
    result = ProduceRequestResult("t", 0)
    first, second = futures_of(result, 2)
    seen = []
    first.add_done_callback(lambda f: seen.append(("before", f.get().offset)))
    first.add_done_callback(lambda f: 1 / 0)  # logged, and the others still run
    result.complete(7)
    second.add_done_callback(lambda f: seen.append(("after", f.get().offset)))
    assert seen == [("before", 7), ("after", 8)]


def test_a_waiter_on_another_thread_is_woken_by_completion():
    result = ProduceRequestResult("t", 0)
    (future,) = futures_of(result, 1)
    got = []
    waiter = threading.Thread(target=lambda: got.append(future.get(timeout=10).offset))
    waiter.start()
    result.complete(3)
    waiter.join(10)
    assert got == [3]
