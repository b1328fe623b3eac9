"""The deployment's gateways as Kafka brokers, and which broker a client should use.

There is one gateway per Ray node (broker id = its index in the deployment). Metadata lists
them all; a partition's leader, and a group's or transaction's coordinator, is the gateway
on the node where that partition-leader or coordinator actor runs, so the client's requests
stay on that node; when no gateway is there (the actor moved to a node without one), it is
the gateway answering.

Each listener has its own endpoints: a broker is described by the listener the asking
request came on (context.LISTENER), so a client of a TLS listener is sent on to
TLS listeners.

Any gateway can serve any request (it calls the actors wherever they are), so a stale
answer costs one hop, never a wrong result: the lookups are cached for a few seconds
rather than tracked.
"""
from __future__ import annotations

import asyncio
import time

import ray

from ... import naming
from .context import LISTENER

CACHE_S = 5.0
GATEWAY_PREFIX = naming.gateway(0).rsplit("/", 1)[0] + "/"


class Brokers:
    def __init__(self, namespace: str, directory, me) -> None:
        """`me()` is the answering gateway's broker description."""
        self.namespace = namespace
        self.directory = directory
        self._me = me
        self._brokers: dict[str | None, tuple[float, list[dict]]] = {}
        self._nodes: dict[str, tuple[float, str | None]] = {}

    async def all(self) -> list[dict]:
        """{"node_id", "host", "port", "rack", "ray_node"} of every gateway, by node id."""
        listener = LISTENER.get()
        at, brokers = self._brokers.get(listener, (0.0, []))
        if time.monotonic() - at < CACHE_S and brokers:
            return brokers
        names = await asyncio.get_running_loop().run_in_executor(None, self._gateway_names)
        me = self._me()
        described = await asyncio.gather(*(self._describe(n, me, listener) for n in names))
        brokers = sorted({b["node_id"]: b for b in (me, *filter(None, described))}.values(),
                         key=lambda b: b["node_id"])
        self._brokers[listener] = (time.monotonic(), brokers)
        return brokers

    async def ray_nodes(self) -> dict[int, str]:
        """The Ray node of each broker, by broker id (where a manual assignment places a leader)."""
        return {b["node_id"]: b["ray_node"] for b in await self.all()}

    async def for_actor(self, name: str) -> dict:
        """The broker clients should use for the actor `name`."""
        node = await self._node_of(name)
        me = self._me()
        if node is None or node == me["ray_node"]:
            return me
        return next((b for b in await self.all() if b["ray_node"] == node), me)

    def _gateway_names(self) -> list[str]:
        return [a["name"] for a in ray.util.list_named_actors(all_namespaces=True)
                if a["namespace"] == self.namespace and a["name"].startswith(GATEWAY_PREFIX)]

    async def _describe(self, name: str, me: dict, listener: str | None) -> dict | None:
        if name == naming.gateway(me["node_id"]):
            return None
        try:
            return await self.directory.send(name, "broker", listener, timeout_s=5)
        except Exception:
            return None  # gone with its node: not a broker any more

    async def _node_of(self, name: str) -> str | None:
        at, node = self._nodes.get(name, (0.0, None))
        if time.monotonic() - at < CACHE_S:
            return node
        try:
            # The deployment's actors say their Ray node in their status.
            node = (await self.directory.send(name, "status", timeout_s=5)).get("node_id")
        except Exception:
            node = None  # away or restarting: not known until it is back
        self._nodes[name] = (time.monotonic(), node)
        return node
