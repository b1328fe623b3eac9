"""The Kafka gateway: an asyncio TCP server inside a Ray actor that lets unmodified Kafka
clients (kafka-python, aiokafka, confluent-kafka, kcat) use shoal.

It is a translator, not a second broker: runtime.wire decides everything about the protocol
(frames, headers, versions, what closes a connection) and this shell only reads, writes and
turns each request into calls on the actors shoal's own clients use (the controller,
partition hosts, group and transaction coordinators), in the other modules of this
package (data, fetch, groups, consumer_groups, share, admin, cluster...). There is one
gateway per Ray node, each a broker to Kafka clients (brokers.py says which serves what).
Small requests many connections send one actor (produces for a partition host, heartbeats,
commits) are coalesced into one Ray call (actors/server/coalescing.py).

Requests of one connection are served concurrently and answered in their order (the codec
holds an early answer back), so a client's pipelined requests do not wait for a long poll
ahead of them. A connection that breaks the protocol is closed alone; one silent for
connections.max.idle.ms, half a request sent or not, is closed too.
"""
from __future__ import annotations

import asyncio
import functools
import logging
import os
import random
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from runtime.errors import Errors, KafkaError
from runtime.wire.connection import ProtocolError, RequestReceived, ServerConnection
from runtime.wire.entities import build, plain
from runtime.wire.error_responses import error_response
from runtime.wire.fetch_session import MAX_INCREMENTAL_FETCH_SESSION_CACHE_SLOTS, FetchSessionCache
from runtime.wire.frames import SOCKET_REQUEST_MAX_BYTES
from runtime.wire.versions import api_versions_response, response_class
from runtime.security.sasl import DEFAULT_MECHANISMS, SaslServer
from runtime.share.sessions import MAX_SHARE_SESSIONS, ShareSessionCache

from . import (acls, admin, cluster, consumer_groups, data, fetch,
               groups, sasl, share, share_offsets, txn, users)
from ..coalescing import Coalescer
from .brokers import Brokers
from .context import CONNECTION, LISTENER
from ..shard_host import _truthy
from ..tls import server_context
from ..topic_ids import TopicIds
from ...errors import to_kafka_error
from ...retry import ActorDirectory

log = logging.getLogger(__name__)

# Kafka's connections.max.idle.ms default.
CONNECTIONS_MAX_IDLE_MS = 600000
# Kafka's socket.listen.backlog.size default. A burst of connections larger than the backlog
# loses some on the way in (the kernel drops their handshake), as it does against Kafka.
SOCKET_LISTEN_BACKLOG_SIZE = 50
# Bounds one Ray call of gathered produces by their record bytes (16 batches of Kafka's
# default max.message.bytes), not by their count: a Produce request's thousand one-record
# partitions on one host then leave in one call, not in sixty-three calls one after another.
PRODUCE_BYTES_PER_CALL = 16 * 1024 * 1024
# Produce calls out at once per partition host: one written while the next gathers, so the
# host never waits for the gateway (with one, it sat idle a quarter of the time at 1,000
# partitions).
PRODUCE_CALLS_IN_FLIGHT = 2


SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


@dataclass(frozen=True)
class Listener:
    name: str
    host: str
    port: int
    security_protocol: str

    @property
    def tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.security_protocol.startswith("SASL_")


def parse_protocol_map(value: str | None) -> dict[str, str]:
    """Kafka's listener.security.protocol.map, NAME:PROTOCOL,...; a listener named after a
    protocol needs no entry."""
    out = {p: p for p in SECURITY_PROTOCOLS}
    for item in filter(None, (s.strip() for s in str(value or "").split(","))):
        name, sep, protocol = item.partition(":")
        if not sep or protocol.strip().upper() not in SECURITY_PROTOCOLS:
            raise ValueError(f"listener.security.protocol.map entry {item!r} is not NAME:{'|'.join(SECURITY_PROTOCOLS)}")
        out[name.strip().upper()] = protocol.strip().upper()
    return out


def parse_listeners(value: str, protocol_map: str | None = None) -> list[Listener]:
    """Kafka's `listeners` syntax: comma-separated NAME://host:port, each name once, its
    security protocol the name itself or its entry in `protocol_map`. An empty host means
    every interface, as in Kafka."""
    protocols = parse_protocol_map(protocol_map)
    out = []
    for item in filter(None, (s.strip() for s in str(value).split(","))):
        name, sep, address = item.partition("://")
        host, colon, port = address.rpartition(":")
        if not sep or not colon or not port.isdigit():
            raise ValueError(f"listener {item!r} is not NAME://host:port")
        name = name.upper()
        if name not in protocols:
            raise ValueError(f"listener {item!r}: {name} is not a security protocol "
                             f"({', '.join(SECURITY_PROTOCOLS)}) nor in listener.security.protocol.map")
        if any(listener.name == name for listener in out):
            raise ValueError(f"listener {name} named twice")
        out.append(Listener(name, host.strip("[]") or "0.0.0.0", int(port), protocols[name]))
    if not out:
        raise ValueError("no listener given")
    return out


Handler = Callable[["GatewayActor", RequestReceived], Awaitable[dict | None]]

# API key -> (min version, max version, handler). The versions are those the handlers map
# correctly; runtime.wire refuses any kio cannot encode.
HANDLERS: dict[int, tuple[int, int, Handler]] = {
    18: (0, 4, None),  # ApiVersions: answered here from this table
    **data.HANDLERS,
    **fetch.HANDLERS,
    **groups.HANDLERS,
    **share.HANDLERS,
    **txn.HANDLERS,
    **admin.HANDLERS,
    **cluster.HANDLERS,
    **share_offsets.HANDLERS,
    **consumer_groups.HANDLERS,
    **sasl.HANDLERS,
    **users.HANDLERS,
    **acls.HANDLERS,
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
        protocol_map = self.config.get("listener.security.protocol.map")
        self.listeners = parse_listeners(self.config["listeners"], protocol_map)
        advertised = self.config.get("advertised.listeners")
        self._advertised = {a.name: a for a in parse_listeners(advertised, protocol_map)} if advertised else {}
        self._ports = {listener.name: listener.port for listener in self.listeners}
        self._sasl_mechanisms = self.config.get("sasl.enabled.mechanisms", DEFAULT_MECHANISMS)
        self._servers: list[asyncio.base_events.Server] = []
        self._connections = 0
        self._idle_s = int(self.config.get("connections.max.idle.ms", CONNECTIONS_MAX_IDLE_MS)) / 1000
        self._max_request_bytes = int(self.config.get("socket.request.max.bytes", SOCKET_REQUEST_MAX_BYTES))
        self._backlog = int(self.config.get("socket.listen.backlog.size", SOCKET_LISTEN_BACKLOG_SIZE))
        self.brokers = Brokers(self.namespace, self.directory, self.broker)
        self.topic_ids = TopicIds(self.call)
        self.share_sessions = ShareSessionCache(int(self.config.get("group.share.max.share.sessions",
                                                                    MAX_SHARE_SESSIONS)))
        self._tasks: set[asyncio.Task] = set()
        coalesce = _truthy(self.config.get("gateway.coalesce.requests", True))
        self._coalescer = Coalescer(self._call_batched) if coalesce else None
        # Always on: it is what keeps a partition's produces in the order they were sent
        # (actors/server/coalescing.py), as Kafka does by serving a connection's requests one
        # at a time; Ray may start an async actor's calls out of order.
        self.produce_line = Coalescer(self._call_produces, max_in_flight=PRODUCE_CALLS_IN_FLIGHT,
                                      order=lambda call: (call[0].topic, call[0].partition),
                                      size=lambda call: len(call[0].records), max_size=PRODUCE_BYTES_PER_CALL)
        self.fetch_sessions = FetchSessionCache(random.Random(), int(self.config.get(
            "max.incremental.fetch.session.cache.slots", MAX_INCREMENTAL_FETCH_SESSION_CACHE_SLOTS)))

    async def start(self) -> dict:
        """Bind every listener (port 0: an ephemeral port) and serve; returns the first
        listener's address (`addresses()` has them all)."""
        if not self._servers:
            for listener in self.listeners:
                context = server_context(self.config) if listener.tls else None
                server = await asyncio.start_server(functools.partial(self._serve, listener), listener.host,
                                                    listener.port, ssl=context, backlog=self._backlog)
                self._servers.append(server)
                self._ports[listener.name] = server.sockets[0].getsockname()[1]
        return self.address(self.listeners[0].name)

    def addresses(self) -> dict[str, str]:
        """host:port of each listener, by its name."""
        return {name: f"{a['host']}:{a['port']}" for name in self._ports for a in [self.address(name)]}

    def address(self, listener: str | None = None) -> dict:
        """What Metadata and FindCoordinator tell clients of `listener` (by default the one the
        request came on): its advertised.listeners entry if any, else the bound listener.
        Every node's gateway shares the config, so an empty or wildcard host stands for this
        node's address, and port 0 for the port bound."""
        name = listener or LISTENER.get() or self.listeners[0].name
        bound = next(x for x in self.listeners if x.name == name)
        host, port = bound.host, self._ports[name]
        if name in self._advertised:
            a = self._advertised[name]
            host, port = a.host, a.port or port
        if host in ("0.0.0.0", "::"):
            host = self._node_ip
        return {"node_id": self.node_id, "host": host, "port": port}

    def broker(self, listener: str | None = None) -> dict:
        """This gateway as a broker of Metadata, with the Ray node it runs on."""
        return {**self.address(listener), "rack": None, "ray_node": self.ray_node}

    async def ready(self) -> dict:
        return await self.status()

    async def status(self) -> dict:
        coalesced = None if self._coalescer is None else {"calls": self._coalescer.calls,
                                                          "batches": self._coalescer.batches}
        addresses = ",".join(self.addresses().values())
        return {"name": f"gateway {addresses}", "state": "active" if self._servers else "initial",
                "error": None, "connections": self._connections,
                "fetch_sessions": len(self.fetch_sessions.sessions), "pid": os.getpid(),
                "address": addresses, "broker_id": self.node_id, "node_id": self.ray_node,
                "coalesced": coalesced,
                "produces": {"calls": self.produce_line.calls, "batches": self.produce_line.batches}}

    # ------------------------------------------------------------------ calls on actors

    async def call(self, name: str, method: str, *args, timeout_s: float = 30.0) -> Any:
        """One call on a named actor, no retries (the Kafka client retries, as it does
        against a broker). Raises KafkaError: COORDINATOR_NOT_AVAILABLE when the actor is
        missing or unavailable (ActorNotFound, as it is, when no actor has the name),
        REQUEST_TIMED_OUT after timeout_s, the lookup included. The actor is looked up off
        the loop, and a call given up on (the timeout, or the caller cancelled) is cancelled
        on the actor (ActorDirectory.send)."""
        try:
            return await self.directory.send(name, method, *args, timeout_s=timeout_s)
        except asyncio.TimeoutError:
            raise KafkaError(Errors.REQUEST_TIMED_OUT, f"{name}.{method} took over {timeout_s}s") from None
        except Exception as e:  # send forgot the handle: the actor is looked up again next time
            raise to_kafka_error(e) from None

    def spawn(self, coro) -> asyncio.Task:
        """Work that outlives the request or connection that started it; nobody may wait for
        it to the end, so it says here how it failed (the client asks again)."""
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._spawned_done)
        return task

    def _spawned_done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.info("background work failed: %s", task.exception())

    async def call_coalesced(self, name: str, method: str, *args) -> Any:
        """As `call`, for the small requests many connections send the same actor method
        (heartbeats, commits): gathered into one Ray call with those that arrive together
        (actors/server/coalescing.py), unless `gateway.coalesce.requests` is false."""
        if self._coalescer is None:
            return await self.call(name, method, *args)
        return await self._coalescer.call(name, method, *args)

    async def _call_batched(self, name: str, method: str, calls: list[tuple]) -> list:
        return await self.call(name, "batched", method, calls)

    async def _call_produces(self, name: str, method: str, calls: list[tuple]) -> list:
        timeout_ms = max(request.timeout_ms for (request,) in calls)
        return await self.call(name, "batched", method, calls, timeout_s=max(timeout_ms, 1000) / 1000)

    # ------------------------------------------------------------------ connections

    async def _serve(self, listener: Listener, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._connections += 1
        sasl = SaslServer(self._sasl_mechanisms) if listener.sasl else None
        conn = ServerConnection(VERSIONS, self._max_request_bytes, sasl)
        tasks: set[asyncio.Task] = set()
        peer = writer.get_extra_info("peername")
        CONNECTION.set(conn)  # the requests' tasks below inherit them
        LISTENER.set(listener.name)
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
            share.connection_closed(self, conn)

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
        if conn.closed:  # the answer to a failed authentication was the last
            writer.close()

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
            # As Kafka: on each topic, partition, group... the request named, where the
            # response carries its errors (runtime.wire.error_responses).
            return error_response(event.api_key, event.api_version, plain(event.request), error)
        return None if data is None else build(cls, data)
