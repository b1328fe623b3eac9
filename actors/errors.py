"""The seam between Ray and Kafka's error model: Ray failures become retriable Kafka errors,
and any other exception becomes UNKNOWN_SERVER_ERROR (logged), once, here."""
from __future__ import annotations

import contextlib
import logging

import ray.exceptions

from runtime.errors import Errors, KafkaError

log = logging.getLogger(__name__)

# Errors after which a client retries the same call, possibly after finding the actor again.
RETRIABLE_COORDINATOR_ERRORS = frozenset({
    Errors.NOT_COORDINATOR, Errors.COORDINATOR_NOT_AVAILABLE, Errors.COORDINATOR_LOAD_IN_PROGRESS,
})

_RAY_UNAVAILABLE = (
    ray.exceptions.RayActorError,
    ray.exceptions.ActorUnavailableError,
    ray.exceptions.ActorDiedError,
    ray.exceptions.GetTimeoutError,
)


def to_kafka_error(exc: BaseException) -> KafkaError:
    if isinstance(exc, KafkaError):
        return exc
    if isinstance(exc, ray.exceptions.RayTaskError) and isinstance(exc.cause, KafkaError):
        return exc.cause
    if isinstance(exc, _RAY_UNAVAILABLE):
        return KafkaError(Errors.COORDINATOR_NOT_AVAILABLE, f"actor unavailable: {type(exc).__name__}")
    if isinstance(exc, ValueError) and "Failed to look up actor" in str(exc):
        return KafkaError(Errors.COORDINATOR_NOT_AVAILABLE, str(exc))
    log.exception("unexpected error", exc_info=exc)
    return KafkaError(Errors.UNKNOWN_SERVER_ERROR, f"{type(exc).__name__}: {exc}")


@contextlib.contextmanager
def map_errors():
    """Around a Ray call: whatever fails comes out as a KafkaError."""
    try:
        yield
    except KafkaError:
        raise
    except Exception as e:
        raise to_kafka_error(e) from e
