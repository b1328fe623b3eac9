"""Partition assignors as plain functions of plain data (see spec.py for the contract).

Server side, run by the group coordinator: "uniform" and "range" for consumer groups,
"simple" for share groups. Client side, run by the classic-protocol group leader:
"range", "roundrobin", "sticky", "cooperative-sticky". All share one call signature,
`assign(members, topics, *, partition_racks=None)`.
"""
from __future__ import annotations

from typing import Callable

from runtime.errors import Errors, KafkaError

from .range import range_assign
from .roundrobin import roundrobin
from .simple import simple
from .spec import Assignment, MemberSubscription, PartitionRacks
from .sticky import cooperative_sticky, sticky
from .uniform import uniform

__all__ = [
    "Assignment",
    "MemberSubscription",
    "PartitionRacks",
    "SERVER_ASSIGNORS",
    "CLIENT_ASSIGNORS",
    "server_assignor",
    "client_assignor",
    "uniform",
    "range_assign",
    "simple",
    "roundrobin",
    "sticky",
    "cooperative_sticky",
]

Assignor = Callable[..., Assignment]

SERVER_ASSIGNORS: dict[str, Assignor] = {
    "uniform": uniform,
    "range": range_assign,
    "simple": simple,
}

CLIENT_ASSIGNORS: dict[str, Assignor] = {
    "range": range_assign,
    "roundrobin": roundrobin,
    "sticky": sticky,
    "cooperative-sticky": cooperative_sticky,
}


def _lookup(table: dict[str, Assignor], kind: str, name: str) -> Assignor:
    try:
        return table[name]
    except KeyError:
        raise KafkaError(
            Errors.UNSUPPORTED_ASSIGNOR, f"unknown {kind} assignor {name!r}; supported: {', '.join(table)}"
        ) from None


def server_assignor(name: str) -> Assignor:
    """The server-side assignor named `name` ("uniform", "range", "simple")."""
    return _lookup(SERVER_ASSIGNORS, "server", name)


def client_assignor(name: str) -> Assignor:
    """The client-side assignor named `name` ("range", "roundrobin", "sticky",
    "cooperative-sticky")."""
    return _lookup(CLIENT_ASSIGNORS, "client", name)
