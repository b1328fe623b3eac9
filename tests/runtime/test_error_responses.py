"""The error seam: a request's error response (runtime.messages.error_response, Kafka's
AbstractRequest.getErrorResponse) carries the error on every partition, group or topic the
request named."""
import pytest

from runtime.errors import Errors, KafkaError
from runtime.messages import (
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnRequest, AddPartitionsToTxnResponse,
    AddPartitionsToTxnResult, AddPartitionsToTxnTopic, AddPartitionsToTxnTopicResult, AddPartitionsToTxnTransaction,
    ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, ConsumerGroupDescribeResponseDescribedGroup,
    ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, ShareGroupDescribeRequest,
    WriteShareGroupStateRequest, WriteShareGroupStateResponse, WriteStateData, WriteStatePartitionData,
    WriteStatePartitionResult, WriteStateResult, error_response,
)

def test_the_error_goes_on_every_partition_with_its_message():
    request = WriteShareGroupStateRequest("g", (WriteStateData("t", (WriteStatePartitionData(0),
                                                                     WriteStatePartitionData(3))),))
    error = KafkaError(Errors.COORDINATOR_LOAD_IN_PROGRESS, "loading")
    assert error_response(request, error) == WriteShareGroupStateResponse((WriteStateResult("t", (
        WriteStatePartitionResult(0, error.code, "loading"), WriteStatePartitionResult(3, error.code, "loading"))),))
    code = Errors.NOT_COORDINATOR.code
    request = AddPartitionsToTxnRequest((AddPartitionsToTxnTransaction("tx", 1, 0, True, (
        AddPartitionsToTxnTopic("t", (0, 1)),)),))
    assert error_response(request, Errors.NOT_COORDINATOR) == AddPartitionsToTxnResponse(code, (
        AddPartitionsToTxnResult("tx", (AddPartitionsToTxnTopicResult("t", (
            AddPartitionsToTxnPartitionResult(0, code), AddPartitionsToTxnPartitionResult(1, code))),)),))


def test_modern_group_apis_carry_the_message():
    error = KafkaError(Errors.FENCED_MEMBER_EPOCH, "fenced")
    assert error_response(ConsumerGroupHeartbeatRequest("g", "m", 3), error) == \
        ConsumerGroupHeartbeatResponse(error.code, "fenced")
    assert error_response(ConsumerGroupDescribeRequest(("a", "b")), error) == ConsumerGroupDescribeResponse((
        ConsumerGroupDescribeResponseDescribedGroup("a", error.code, "fenced"),
        ConsumerGroupDescribeResponseDescribedGroup("b", error.code, "fenced")))
    assert error_response(ShareGroupDescribeRequest(("a",)), Errors.NOT_COORDINATOR).groups[0].error_message == \
        Errors.NOT_COORDINATOR.name


def test_a_request_without_an_error_response_is_refused():
    with pytest.raises(TypeError):
        error_response(object(), Errors.NOT_COORDINATOR)
