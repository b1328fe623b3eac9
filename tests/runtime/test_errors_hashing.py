"""Kafka error codes, the exception that carries them, and Java-compatible hashing."""
import pickle

import pytest

from runtime import CorruptRecordError, Errors, KafkaError, partition_for
from runtime.errors import raise_if
from runtime.hashing import default_partition, java_string_hashcode, murmur2, utils_abs


@pytest.mark.parametrize("error, code, retriable", [
    (Errors.UNKNOWN_SERVER_ERROR, -1, False),
    (Errors.NONE, 0, False),
    (Errors.COORDINATOR_LOAD_IN_PROGRESS, 14, True),
    (Errors.COORDINATOR_NOT_AVAILABLE, 15, True),
    (Errors.NOT_COORDINATOR, 16, True),
    (Errors.ILLEGAL_GENERATION, 22, False),
    (Errors.UNKNOWN_MEMBER_ID, 25, False),
    (Errors.REBALANCE_IN_PROGRESS, 27, False),
    (Errors.CONCURRENT_TRANSACTIONS, 51, True),
    (Errors.KAFKA_STORAGE_ERROR, 56, True),
    (Errors.GROUP_ID_NOT_FOUND, 69, False),
    (Errors.FENCED_LEADER_EPOCH, 74, True),
    (Errors.MEMBER_ID_REQUIRED, 79, False),
    (Errors.FENCED_INSTANCE_ID, 82, False),
    (Errors.UNSTABLE_OFFSET_COMMIT, 88, True),
    (Errors.PRODUCER_FENCED, 90, False),
    (Errors.UNKNOWN_TOPIC_ID, 100, True),
    (Errors.FENCED_MEMBER_EPOCH, 110, False),
    (Errors.STALE_MEMBER_EPOCH, 113, False),
    (Errors.INVALID_RECORD_STATE, 121, False),
    (Errors.FENCED_STATE_EPOCH, 124, False),
])
def test_error_codes_and_retriable_flags_are_kafkas(error, code, retriable):
    assert (error.code, error.retriable) == (code, retriable)
    assert Errors.for_code(code) is error


ISSUE_2_NAMES = """NOT_COORDINATOR COORDINATOR_NOT_AVAILABLE COORDINATOR_LOAD_IN_PROGRESS ILLEGAL_GENERATION
UNKNOWN_MEMBER_ID REBALANCE_IN_PROGRESS MEMBER_ID_REQUIRED FENCED_INSTANCE_ID GROUP_MAX_SIZE_REACHED
INVALID_SESSION_TIMEOUT INCONSISTENT_GROUP_PROTOCOL OFFSET_METADATA_TOO_LARGE UNSTABLE_OFFSET_COMMIT
FENCED_MEMBER_EPOCH STALE_MEMBER_EPOCH UNRELEASED_INSTANCE_ID INVALID_RECORD_STATE FENCED_STATE_EPOCH
FENCED_LEADER_EPOCH INVALID_PRODUCER_EPOCH PRODUCER_FENCED CONCURRENT_TRANSACTIONS INVALID_TXN_STATE
GROUP_ID_NOT_FOUND INVALID_GROUP_ID UNKNOWN_TOPIC_OR_PARTITION UNKNOWN_TOPIC_ID OFFSET_OUT_OF_RANGE
INVALID_REQUEST NON_EMPTY_GROUP""".split()


def test_the_errors_the_coordinators_return_are_all_there():
    assert [name for name in ISSUE_2_NAMES if name not in Errors.__members__] == []


def test_every_code_is_unique_and_unknown_codes_map_to_unknown_server_error():
    codes = [e.code for e in Errors]
    assert len(codes) == len(set(codes))
    assert Errors.for_code(9999) is Errors.UNKNOWN_SERVER_ERROR


def test_kafka_error_carries_the_member_and_survives_pickle():
    e = KafkaError(Errors.UNKNOWN_MEMBER_ID, "member m-1 is not in group g")
    assert (e.error, e.code, e.retriable) == (Errors.UNKNOWN_MEMBER_ID, 25, False)
    assert str(e) == "UNKNOWN_MEMBER_ID: member m-1 is not in group g"
    for original in (e, KafkaError(Errors.NOT_COORDINATOR)):
        copy = pickle.loads(pickle.dumps(original))
        assert type(copy) is KafkaError
        assert (copy.error, copy.message, str(copy)) == (original.error, original.message, str(original))
    assert pickle.loads(pickle.dumps(Errors.NOT_COORDINATOR)) is Errors.NOT_COORDINATOR
    assert Errors.NOT_COORDINATOR.exception("moved").retriable


def test_kafka_error_refuses_none():
    with pytest.raises(ValueError):
        KafkaError(Errors.NONE)


def test_raise_if():
    raise_if(False, Errors.INVALID_REQUEST, "fine")
    with pytest.raises(KafkaError) as info:
        raise_if(True, Errors.INVALID_REQUEST, "bad")
    assert info.value.error is Errors.INVALID_REQUEST


def test_corrupt_record_error_names_log_and_offset_and_survives_pickle():
    e = CorruptRecordError("unknown record type 77", log="__consumer_offsets-3", offset=12)
    assert str(e) == "unknown record type 77 (log __consumer_offsets-3, offset 12)"
    copy = pickle.loads(pickle.dumps(e))
    assert (str(copy), copy.log, copy.offset) == (str(e), "__consumer_offsets-3", 12)


def test_partition_for_matches_kafka():
    assert partition_for("testgroup", 50) == 27
    assert java_string_hashcode("testgroup") == -1172783827  # negative: abs() is needed
    # Java's hashCode of this string is Integer.MIN_VALUE; Kafka's Utils.abs maps it to 0.
    assert java_string_hashcode("polygenelubricants") == -(1 << 31)
    assert utils_abs(-(1 << 31)) == 0
    assert partition_for("polygenelubricants", 50) == 0
    with pytest.raises(ValueError):
        partition_for("g", 0)


def test_java_string_hashcode_overflows_and_counts_utf16_units():
    assert java_string_hashcode("") == 0
    assert java_string_hashcode("a") == 97
    assert java_string_hashcode("hello world") == 1794106052
    assert java_string_hashcode("Aa") == java_string_hashcode("BB") == 2112
    # A character outside the BMP is two UTF-16 code units in Java: "\U0001F600" is
    # "\ud83d\ude00", so its hash is 31 * 0xD83D + 0xDE00.
    assert java_string_hashcode("\U0001F600") == 31 * 0xD83D + 0xDE00
    assert java_string_hashcode("\ud800") == 0xD800  # a lone surrogate is a legal Java string


@pytest.mark.parametrize("data, expected", [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
])
def test_murmur2_matches_kafkas_test_vectors(data, expected):
    assert murmur2(data) == expected


def test_default_partition_uses_to_positive():
    assert default_partition(b"foobar", 10) == (-790332482 & 0x7FFFFFFF) % 10
