"""Version negotiation: which API versions a server advertises, and its ApiVersions answer.

A table maps an API key to its (min, max) version. An ApiVersions request of a version
newer than the server knows is answered, as Kafka does, with a version 0 response carrying
UNSUPPORTED_VERSION and the ApiVersions range alone, so the client retries with a version
both sides know.
"""
from __future__ import annotations

import functools

from kio.index import load_request_schema, load_response_schema
from kio.schema.index import api_key_map, schema_name_map

from ..errors import Errors
from .entities import build

API_VERSIONS = 18


def kio_range(api_key: int) -> tuple[int, int]:
    """The versions kio has classes for: those of the Kafka release it was generated from."""
    versions = schema_name_map[api_key_map[api_key]]
    return min(versions), max(versions)


def check_table(table: dict[int, tuple[int, int]]) -> dict[int, tuple[int, int]]:
    """A version table, refused if it advertises a version kio cannot encode."""
    for api_key, (low, high) in table.items():
        kio_low, kio_high = kio_range(api_key)
        if not kio_low <= low <= high <= kio_high:
            raise ValueError(f"API {api_key}: versions {low}-{high} outside kio's {kio_low}-{kio_high}")
    if API_VERSIONS not in table:
        raise ValueError("a server always serves ApiVersions")
    return dict(table)


# Cached: kio resolves the class by module path on every call, a third of the cost of
# encoding a small response.
@functools.cache
def request_class(api_key: int, version: int):
    return load_request_schema(api_key, version)


@functools.cache
def response_class(api_key: int, version: int):
    return load_response_schema(api_key, version)


def api_versions_response(table: dict[int, tuple[int, int]], version: int, unsupported: bool = False):
    """The ApiVersions response of `version` for a server with this table; `unsupported`
    gives the downgrade answer (the caller sends it as version 0)."""
    if unsupported:
        keys, error = {API_VERSIONS: table[API_VERSIONS]}, Errors.UNSUPPORTED_VERSION
    else:
        keys, error = table, Errors.NONE
    return build(response_class(API_VERSIONS, version), {
        "error_code": error.code,
        "api_keys": [{"api_key": k, "min_version": lo, "max_version": hi} for k, (lo, hi) in sorted(keys.items())],
        "throttle_time": 0,
    })
