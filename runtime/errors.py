"""Kafka's error codes, and the one exception type that carries them.

Codes and names are Kafka's (org.apache.kafka.common.protocol.Errors); the `retriable` flag
says whether Kafka's client treats the error as a RetriableException, i.e. whether the same
request may succeed if it is simply sent again later.
"""
from __future__ import annotations

import enum


class Errors(enum.Enum):
    # (code, retriable)
    UNKNOWN_SERVER_ERROR = (-1, False)
    NONE = (0, False)
    OFFSET_OUT_OF_RANGE = (1, False)
    CORRUPT_MESSAGE = (2, True)
    UNKNOWN_TOPIC_OR_PARTITION = (3, True)
    INVALID_FETCH_SIZE = (4, False)
    LEADER_NOT_AVAILABLE = (5, True)
    NOT_LEADER_OR_FOLLOWER = (6, True)
    REQUEST_TIMED_OUT = (7, True)
    REPLICA_NOT_AVAILABLE = (9, True)
    MESSAGE_TOO_LARGE = (10, False)
    OFFSET_METADATA_TOO_LARGE = (12, False)
    NETWORK_EXCEPTION = (13, True)
    COORDINATOR_LOAD_IN_PROGRESS = (14, True)
    COORDINATOR_NOT_AVAILABLE = (15, True)
    NOT_COORDINATOR = (16, True)
    INVALID_TOPIC_EXCEPTION = (17, False)
    RECORD_LIST_TOO_LARGE = (18, False)
    ILLEGAL_GENERATION = (22, False)
    INCONSISTENT_GROUP_PROTOCOL = (23, False)
    INVALID_GROUP_ID = (24, False)
    UNKNOWN_MEMBER_ID = (25, False)
    INVALID_SESSION_TIMEOUT = (26, False)
    REBALANCE_IN_PROGRESS = (27, False)
    INVALID_COMMIT_OFFSET_SIZE = (28, False)
    INVALID_TIMESTAMP = (32, False)
    UNSUPPORTED_SASL_MECHANISM = (33, False)
    ILLEGAL_SASL_STATE = (34, False)
    UNSUPPORTED_VERSION = (35, False)
    TOPIC_ALREADY_EXISTS = (36, False)
    INVALID_PARTITIONS = (37, False)
    INVALID_REPLICATION_FACTOR = (38, False)
    INVALID_REPLICA_ASSIGNMENT = (39, False)
    INVALID_CONFIG = (40, False)
    INVALID_REQUEST = (42, False)
    POLICY_VIOLATION = (44, False)
    OUT_OF_ORDER_SEQUENCE_NUMBER = (45, False)
    DUPLICATE_SEQUENCE_NUMBER = (46, False)
    INVALID_PRODUCER_EPOCH = (47, False)
    INVALID_TXN_STATE = (48, False)
    INVALID_PRODUCER_ID_MAPPING = (49, False)
    INVALID_TRANSACTION_TIMEOUT = (50, False)
    CONCURRENT_TRANSACTIONS = (51, True)
    TRANSACTION_COORDINATOR_FENCED = (52, False)
    SECURITY_DISABLED = (54, False)
    KAFKA_STORAGE_ERROR = (56, True)
    LOG_DIR_NOT_FOUND = (57, False)
    SASL_AUTHENTICATION_FAILED = (58, False)
    UNKNOWN_PRODUCER_ID = (59, False)
    NON_EMPTY_GROUP = (68, False)
    GROUP_ID_NOT_FOUND = (69, False)
    FETCH_SESSION_ID_NOT_FOUND = (70, True)
    INVALID_FETCH_SESSION_EPOCH = (71, True)
    FENCED_LEADER_EPOCH = (74, True)
    UNKNOWN_LEADER_EPOCH = (75, True)
    OFFSET_NOT_AVAILABLE = (78, True)
    MEMBER_ID_REQUIRED = (79, False)
    GROUP_MAX_SIZE_REACHED = (81, False)
    FENCED_INSTANCE_ID = (82, False)
    ELECTION_NOT_NEEDED = (84, True)
    NO_REASSIGNMENT_IN_PROGRESS = (85, False)
    GROUP_SUBSCRIBED_TO_TOPIC = (86, False)
    INVALID_RECORD = (87, False)
    UNSTABLE_OFFSET_COMMIT = (88, True)
    PRODUCER_FENCED = (90, False)
    RESOURCE_NOT_FOUND = (91, False)
    DUPLICATE_RESOURCE = (92, False)
    UNACCEPTABLE_CREDENTIAL = (93, False)
    UNKNOWN_TOPIC_ID = (100, True)
    INCONSISTENT_TOPIC_ID = (103, True)
    TRANSACTIONAL_ID_NOT_FOUND = (105, False)
    FETCH_SESSION_TOPIC_ID_ERROR = (106, True)
    FENCED_MEMBER_EPOCH = (110, False)
    UNRELEASED_INSTANCE_ID = (111, False)
    UNSUPPORTED_ASSIGNOR = (112, False)
    STALE_MEMBER_EPOCH = (113, False)
    TRANSACTION_ABORTABLE = (120, False)
    INVALID_RECORD_STATE = (121, False)
    SHARE_SESSION_NOT_FOUND = (122, True)
    INVALID_SHARE_SESSION_EPOCH = (123, True)
    FENCED_STATE_EPOCH = (124, False)
    INVALID_REGULAR_EXPRESSION = (128, False)
    SHARE_SESSION_LIMIT_REACHED = (133, True)

    def __init__(self, code: int, retriable: bool) -> None:
        self.code = code
        self.retriable = retriable

    @classmethod
    def for_code(cls, code: int) -> "Errors":
        try:
            return _BY_CODE[code]
        except KeyError:
            return cls.UNKNOWN_SERVER_ERROR

    def exception(self, message: str | None = None) -> "KafkaError":
        return KafkaError(self, message)


_BY_CODE = {e.code: e for e in Errors}


class KafkaError(Exception):
    """An error with a Kafka error name. Raised by the runtime's validators before any
    record is built, so raising one never leaves half an operation behind."""

    def __init__(self, error: Errors, message: str | None = None) -> None:
        if error is Errors.NONE:
            raise ValueError("KafkaError needs an error, not Errors.NONE")
        self.error = error
        self.message = message or error.name
        super().__init__(f"{error.name}: {self.message}" if message else error.name)

    @property
    def code(self) -> int:
        return self.error.code

    @property
    def retriable(self) -> bool:
        return self.error.retriable

    def __reduce__(self):
        # Ray ships exceptions between processes; keep the error member intact.
        return (KafkaError, (self.error, self.message if self.message != self.error.name else None))


class RecordErrors(KafkaError):
    """INVALID_RECORD for a batch some of whose records were refused (KIP-467): the batch is
    not written, and `record_errors` names each refused record, (index in the batch, why),
    so the producer tells them from the records refused only for being in their batch."""

    def __init__(self, record_errors, message: str | None = None) -> None:
        self.record_errors = tuple(record_errors)
        # Kafka's summary: the count, and the first three errors.
        shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in self.record_errors[:3])
        super().__init__(Errors.INVALID_RECORD, message or (
            f"One or more records have been rejected due to {len(self.record_errors)} record errors in total, "
            f"and only showing the first three errors at most: [{shown}]"))

    def __reduce__(self):
        return (RecordErrors, (self.record_errors, self.message))


class CorruptRecordError(Exception):
    """A state log holds bytes that do not decode: names the log and the offset."""

    def __init__(self, message: str, *, log: str | None = None, offset: int | None = None) -> None:
        where = ", ".join(p for p in (f"log {log}" if log else "", f"offset {offset}" if offset is not None else "") if p)
        super().__init__(f"{message} ({where})" if where else message)
        self.log = log
        self.offset = offset


def raise_if(condition: bool, error: Errors, message: str | None = None) -> None:
    """Validators call this before building records (Kafka's throwIf… pattern)."""
    if condition:
        raise KafkaError(error, message)
