"""The one retry helper (actors.retry): what it retries, with fake actor handles and no Ray
started. Kafka's clients retry a request while its error is retriable and the deadline has
not passed; a partition whose error is still retriable at the deadline is completed with it."""
import asyncio

import pytest

from actors.retry import Backoff, Retry, call_async, error_codes
from runtime.errors import Errors, KafkaError
from runtime.messages import (
    ShareGroupDescribeResponse, ShareGroupDescribeResponseDescribedGroup, WriteShareGroupStateResponse,
    WriteStatePartitionResult, WriteStateResult,
)

LOADING = Errors.COORDINATOR_LOAD_IN_PROGRESS.code


def write_response(*codes):
    return WriteShareGroupStateResponse((WriteStateResult("t", tuple(
        WriteStatePartitionResult(p, code) for p, code in enumerate(codes))),))


class Handle:
    """A fake actor handle whose method answers from a script, one entry per call (an
    exception is raised instead of answered)."""

    def __init__(self, *script):
        self.script, self.calls = list(script), 0
        outer = self

        class Method:
            def remote(self, *args):
                outer.calls += 1
                return outer._answer(outer.script.pop(0) if len(outer.script) > 1 else outer.script[0])
        self.write_share_group_state = Method()

    async def _answer(self, answer):
        if isinstance(answer, BaseException):
            raise answer
        return answer


def fast_retry(**kwargs):
    return Retry("write_share_group_state", kwargs.pop("timeout_s", 5.0), backoff=Backoff(1, 2), **kwargs)


def test_error_codes_are_those_of_every_partition():
    assert list(error_codes(write_response(0, LOADING, 0))) == [LOADING]
    assert list(error_codes(ShareGroupDescribeResponse((ShareGroupDescribeResponseDescribedGroup("g", 15),)))) == [15]


def test_a_response_is_final_unless_its_own_or_with_per_partition_a_partitions_error_is_retriable():
    assert fast_retry().after_response(write_response(LOADING)) is None
    assert fast_retry(per_partition=True).after_response(write_response(0, LOADING)) is not None
    assert fast_retry(per_partition=True).after_response(write_response(Errors.FENCED_STATE_EPOCH.code)) is None


def test_at_the_deadline_partitions_keep_their_error_and_a_failed_call_times_out():
    retry = fast_retry(per_partition=True, timeout_s=0.0)
    assert retry.after_response(write_response(LOADING)) is None
    with pytest.raises(KafkaError) as e:
        fast_retry(timeout_s=0.0).after_failure(KafkaError(Errors.NOT_COORDINATOR))
    assert e.value.error is Errors.REQUEST_TIMED_OUT


def test_a_failure_that_retrying_cannot_help_ends_the_call_at_once():
    with pytest.raises(KafkaError) as e:
        fast_retry().after_failure(KafkaError(Errors.INVALID_REQUEST))
    assert e.value.error is Errors.INVALID_REQUEST
    assert fast_retry().after_failure(KafkaError(Errors.NOT_COORDINATOR)) > 0


def test_call_async_sends_again_until_every_partition_is_served():
    handle = Handle(KafkaError(Errors.NOT_COORDINATOR), write_response(0, LOADING), write_response(0, 0))
    dropped = []
    response = asyncio.run(call_async(lambda: handle, "write_share_group_state", None, timeout_s=10,
                                      on_failure=lambda: dropped.append(1), per_partition=True))
    assert response == write_response(0, 0)
    assert (handle.calls, dropped) == (3, [1])


def test_call_async_without_per_partition_returns_partition_errors_as_they_are():
    handle = Handle(write_response(LOADING))
    assert asyncio.run(call_async(lambda: handle, "write_share_group_state", None)) == write_response(LOADING)
    assert handle.calls == 1


def test_call_async_raises_a_failure_retrying_cannot_help_after_one_attempt():
    handle = Handle(KafkaError(Errors.INVALID_REQUEST, "bad"))
    with pytest.raises(KafkaError) as e:
        asyncio.run(call_async(lambda: handle, "write_share_group_state", None))
    assert (e.value.error, handle.calls) == (Errors.INVALID_REQUEST, 1)
