"""The Kafka gateway: an asyncio TCP server inside a Ray actor that lets unmodified Kafka
clients (kafka-python, aiokafka, confluent-kafka, kcat) use shoal.

It is a translator, not a second broker: runtime.wire decides everything about the protocol
(frames, headers, versions, what closes a connection) and this shell only reads, writes and
turns each request into calls on the actors shoal's own clients use (the controller,
partition leaders, group and transaction coordinators), in actors/server/gateway_data.py,
actors/server/gateway_groups.py, actors/server/gateway_consumer_groups.py, actors/server/gateway_admin.py
and the other gateway_* modules. There is one gateway per Ray node, each a broker to Kafka
clients (actors/server/gateway_brokers.py says which serves what). Small requests many
connections send one coordinator (heartbeats, commits) are coalesced into one Ray call
(actors/server/coalescing.py).

Requests of one connection are served concurrently and answered in their order (the codec
holds an early answer back), so a client's pipelined requests do not wait for a long poll
ahead of them. A connection that breaks the protocol is closed alone; one silent for
connections.max.idle.ms, half a request sent or not, is closed too.
"""
from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from runtime.errors import Errors, KafkaError
from runtime.wire.connection import ProtocolError, RequestReceived, ServerConnection
from runtime.wire.entities import build, error_response
from runtime.wire.frames import SOCKET_REQUEST_MAX_BYTES
from runtime.wire.versions import api_versions_response, response_class
from runtime.share.sessions import MAX_SHARE_SESSIONS, ShareSessionCache

from . import (gateway_admin, gateway_consumer_groups, gateway_data, gateway_groups, gateway_share,
               gateway_txn)
from .coalescing import Coalescer
from .gateway_brokers import Brokers
from .shard_host import _truthy
from .topic_ids import TopicIds
from ..errors import to_kafka_error
from ..retry import ActorDirectory

log = logging.getLogger(__name__)

# Kafka's connections.max.idle.ms default.
CONNECTIONS_MAX_IDLE_MS = 600000


@dataclass(frozen=True)
class Listener:
    name: str
    host: str
    port: int


def parse_listeners(value: str) -> list[Listener]:
    """Kafka's `listeners` syntax: comma-separated NAME://host:port. Only PLAINTEXT is
    served so far; an empty host means every interface, as in Kafka."""
    out = []
    for item in filter(None, (s.strip() for s in str(value).split(","))):
        name, sep, address = item.partition("://")
        host, colon, port = address.rpartition(":")
        if not sep or not colon or not port.isdigit():
            raise ValueError(f"listener {item!r} is not NAME://host:port")
        if name.upper() != "PLAINTEXT":
            raise ValueError(f"listener {item!r}: only PLAINTEXT is served so far")
        out.append(Listener(name.upper(), host.strip("[]") or "0.0.0.0", int(port)))
    if not out:
        raise ValueError("no listener given")
    return out


Handler = Callable[["GatewayActor", RequestReceived], Awaitable[dict | None]]

# API key -> (min version, max version, handler). The versions are those the handlers map
# correctly; runtime.wire refuses any kio cannot encode.
HANDLERS: dict[int, tuple[int, int, Handler]] = {
    18: (0, 4, None),  # ApiVersions: answered here from this table
    **gateway_data.HANDLERS,
    **gateway_groups.HANDLERS,
    **gateway_share.HANDLERS,
    **gateway_txn.HANDLERS,
    **gateway_admin.HANDLERS,
    **gateway_consumer_groups.HANDLERS,
}
VERSIONS = {api_key: (low, high) for api_key, (low, high, _) in HANDLERS.items()}


class GatewayActor:
    def __init__(self, deployment: dict, node_id: int = 0) -> None:
        """`node_id`: the broker id Kafka clients know this gateway by."""
        import ray
        self.node_id = node_id
        self.ray_node = ray.get_runtime_context().get_node_id()
        self._node_ip = ray.util.get_node_ip_address()
        self.deployment = dict(deployment)
        self.config: dict = self.deployment["config"]
        self.namespace: str = self.deployment["namespace"]
        self.directory = ActorDirectory(self.namespace)
        self.listener = parse_listeners(self.config["listeners"])[0]
        self.host, self.port = self.listener.host, self.listener.port
        self._server: asyncio.base_events.Server | None = None
        self._connections = 0
        self._idle_s = int(self.config.get("connections.max.idle.ms", CONNECTIONS_MAX_IDLE_MS)) / 1000
        self._max_request_bytes = int(self.config.get("socket.request.max.bytes", SOCKET_REQUEST_MAX_BYTES))
        self.brokers = Brokers(self.namespace, self.directory, self.broker)
        self.topic_ids = TopicIds(self.call)
        self.share_sessions = ShareSessionCache(int(self.config.get("group.share.max.share.sessions",
                                                                    MAX_SHARE_SESSIONS)))
        self._tasks: set[asyncio.Task] = set()
        coalesce = _truthy(self.config.get("gateway.coalesce.requests", True))
        self._coalescer = Coalescer(self._call_batched) if coalesce else None

    async def start(self) -> dict:
        """Bind the listener (port 0: an ephemeral port) and serve; returns the address."""
        if self._server is None:
            self._server = await asyncio.start_server(self._serve, self.host, self.listener.port)
            self.port = self._server.sockets[0].getsockname()[1]
        return self.address()

    def address(self) -> dict:
        """What Metadata and FindCoordinator tell clients: advertised.listeners if set, else
        the bound listener. Every node's gateway shares the config, so an empty or wildcard
        host stands for this node's address, and port 0 for the port bound."""
        host, port = self.host, self.port
        advertised = self.config.get("advertised.listeners")
        if advertised:
            a = parse_listeners(advertised)[0]
            host, port = a.host, a.port or self.port
        if host in ("0.0.0.0", "::"):
            host = self._node_ip
        return {"node_id": self.node_id, "host": host, "port": port}

    def broker(self) -> dict:
        """This gateway as a broker of Metadata, with the Ray node it runs on."""
        return {**self.address(), "rack": None, "ray_node": self.ray_node}

    async def ready(self) -> dict:
        return await self.status()

    async def status(self) -> dict:
        a = self.address()
        coalesced = None if self._coalescer is None else {"calls": self._coalescer.calls,
                                                          "batches": self._coalescer.batches}
        return {"name": f"gateway {a['host']}:{a['port']}", "state": "active" if self._server else "initial",
                "error": None, "connections": self._connections, "pid": os.getpid(),
                "address": f"{a['host']}:{a['port']}", "broker_id": self.node_id, "node_id": self.ray_node,
                "coalesced": coalesced}

    # ------------------------------------------------------------------ calls on actors

    async def call(self, name: str, method: str, *args, timeout_s: float = 30.0) -> Any:
        """One call on a named actor, no retries (the Kafka client retries, as it does
        against a broker). Raises KafkaError: COORDINATOR_NOT_AVAILABLE when the actor is
        missing or unavailable, REQUEST_TIMED_OUT after timeout_s."""
        handle = self.directory.get(name)
        try:
            return await asyncio.wait_for(getattr(handle, method).remote(*args), timeout_s)
        except asyncio.TimeoutError:
            raise KafkaError(Errors.REQUEST_TIMED_OUT, f"{name}.{method} took over {timeout_s}s") from None
        except Exception as e:
            self.directory.forget(name)
            raise to_kafka_error(e) from None

    def spawn(self, coro) -> None:
        """Work that outlives the request or connection that started it."""
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def call_coalesced(self, name: str, method: str, *args) -> Any:
        """As `call`, for the small requests many connections send the same actor method
        (heartbeats, commits): gathered into one Ray call with those that arrive together
        (actors/server/coalescing.py), unless `gateway.coalesce.requests` is false."""
        if self._coalescer is None:
            return await self.call(name, method, *args)
        return await self._coalescer.call(name, method, *args)

    async def _call_batched(self, name: str, method: str, calls: list[tuple]) -> list:
        return await self.call(name, "batched", method, calls)

    # ------------------------------------------------------------------ connections

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._connections += 1
        conn = ServerConnection(VERSIONS, self._max_request_bytes)
        tasks: set[asyncio.Task] = set()
        peer = writer.get_extra_info("peername")
        gateway_share.CONNECTION.set(conn)  # the requests' tasks below inherit it
        try:
            while True:
                try:
                    data = await asyncio.wait_for(reader.read(1 << 16), self._idle_s)
                except asyncio.TimeoutError:
                    log.info("closing %s: idle for connections.max.idle.ms", peer)
                    break
                if not data:
                    break
                conn.receive_data(data)
                while (event := conn.next_event()) is not None:
                    task = asyncio.ensure_future(self._answer(conn, event, writer))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
        except ProtocolError as e:
            log.info("closing %s: %s", peer, e)
        except (ConnectionError, OSError):
            pass
        finally:
            self._connections -= 1
            for task in tasks:
                task.cancel()
            writer.close()
            gateway_share.connection_closed(self, conn)

    async def _answer(self, conn: ServerConnection, event: RequestReceived, writer: asyncio.StreamWriter) -> None:
        response = await self._respond(event)
        if conn.closed:
            return
        try:
            data = conn.send_response(event, response)
        except Exception:
            # A response this gateway built wrong: a bug, logged; the client's connection
            # cannot go on without the answer, so it is closed.
            log.exception("encoding the answer to API %d v%d", event.api_key, event.api_version)
            writer.close()
            return
        if data and not writer.is_closing():
            writer.write(data)

    async def _respond(self, event: RequestReceived):
        """The kio response to one request (None for a request that gets none)."""
        cls = response_class(event.api_key, event.api_version)
        if event.api_key == 18:
            return api_versions_response(VERSIONS, event.api_version, event.unsupported_version is not None)
        handler = HANDLERS[event.api_key][2]
        try:
            data = await handler(self, event)
        except Exception as e:  # what a handler did not answer itself fails the request as a whole
            error = to_kafka_error(e)
            log.warning("%s v%d failed: %s", cls.__name__, event.api_version, error)
            return error_response(cls, error.code)
        return None if data is None else build(cls, data)
