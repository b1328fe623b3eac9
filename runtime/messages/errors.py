"""The response a request gets when it fails as a whole (Kafka's
AbstractRequest.getErrorResponse): one builder per request type, registered beside its
messages with `@answers_errors_of(RequestType)`, and one function that finds it. A response
that answers per partition, group or topic carries the error on each of them, with the
error's message where Kafka's response has a field for it."""
from __future__ import annotations

from typing import Callable

from ..errors import Errors, KafkaError

__all__ = ["answers_errors_of", "error_response"]

_BUILDERS: dict[type, Callable[[object, KafkaError], object]] = {}


def answers_errors_of(*request_types: type):
    """Register the decorated `builder(request, error: KafkaError) -> response` for these
    request types."""
    def register(builder):
        for request_type in request_types:
            if request_type in _BUILDERS:
                raise ValueError(f"{request_type.__name__} already has an error response")
            _BUILDERS[request_type] = builder
        return builder
    return register


def error_response(request, error: KafkaError | Errors):
    """The response Kafka gives when `request` fails as a whole with `error`."""
    builder = _BUILDERS.get(type(request))
    if builder is None:
        raise TypeError(f"no error response for {type(request).__name__}")
    return builder(request, error if isinstance(error, KafkaError) else KafkaError(error))
