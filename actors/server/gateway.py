"""The Kafka gateway: an asyncio TCP server inside a Ray actor that lets unmodified Kafka
clients (kafka-python, aiokafka, confluent-kafka, kcat) use shoal.

It is a translator, not a second broker: runtime.wire decides everything about the protocol
(frames, headers, versions, what closes a connection) and this shell only reads, writes and
turns each request into calls on the actors shoal's own clients use (the controller,
partition leaders, group and transaction coordinators), in actors/server/gateway_data.py and
actors/server/gateway_groups.py. The gateway presents itself as the one broker of the cluster,
node 0, at the address of its listener.

Requests of one connection are served concurrently and answered in their order (the codec
holds an early answer back), so a client's pipelined requests do not wait for a long poll
ahead of them. A connection that breaks the protocol is closed alone; one silent for
connections.max.idle.ms, half a request sent or not, is closed too.
"""
from __future__ import annotations

import asyncio
import logging
import os
import random
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from runtime.errors import Errors, KafkaError
from runtime.wire.connection import ProtocolError, RequestReceived, ServerConnection
from runtime.wire.entities import build, error_response
from runtime.wire.fetch_session import MAX_INCREMENTAL_FETCH_SESSION_CACHE_SLOTS, FetchSessionCache
from runtime.wire.frames import SOCKET_REQUEST_MAX_BYTES
from runtime.wire.versions import api_versions_response, response_class

from . import gateway_data, gateway_fetch, gateway_groups
from ..errors import to_kafka_error
from ..retry import ActorDirectory

log = logging.getLogger(__name__)

# Kafka's connections.max.idle.ms default.
CONNECTIONS_MAX_IDLE_MS = 600000
NODE_ID = 0


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
    **gateway_fetch.HANDLERS,
    **gateway_groups.HANDLERS,
}
VERSIONS = {api_key: (low, high) for api_key, (low, high, _) in HANDLERS.items()}


class GatewayActor:
    def __init__(self, deployment: dict) -> None:
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
        self.fetch_sessions = FetchSessionCache(random.Random(), int(self.config.get(
            "max.incremental.fetch.session.cache.slots", MAX_INCREMENTAL_FETCH_SESSION_CACHE_SLOTS)))
        self.topic_names: dict[str, str] = {}  # topic id -> name, for Fetch and Produce v13

    async def start(self) -> dict:
        """Bind the listener (port 0: an ephemeral port) and serve; returns the address."""
        if self._server is None:
            self._server = await asyncio.start_server(self._serve, self.host, self.listener.port)
            self.port = self._server.sockets[0].getsockname()[1]
        return self.address()

    def address(self) -> dict:
        """What Metadata and FindCoordinator tell clients: advertised.listeners if set,
        else the bound listener (its wildcard host replaced by loopback)."""
        advertised = self.config.get("advertised.listeners")
        if advertised:
            a = parse_listeners(advertised)[0]
            return {"node_id": NODE_ID, "host": a.host, "port": a.port}
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::") else self.host
        return {"node_id": NODE_ID, "host": host, "port": self.port}

    async def ready(self) -> dict:
        return await self.status()

    async def status(self) -> dict:
        a = self.address()
        return {"name": f"gateway {a['host']}:{a['port']}", "state": "active" if self._server else "initial",
                "error": None, "connections": self._connections, "fetch_sessions": len(self.fetch_sessions.sessions),
                "pid": os.getpid()}

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

    # ------------------------------------------------------------------ connections

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._connections += 1
        conn = ServerConnection(VERSIONS, self._max_request_bytes)
        tasks: set[asyncio.Task] = set()
        peer = writer.get_extra_info("peername")
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
