"""The client actor base: Kafka's client network thread as an async Ray actor.

A client actor runs the background work (heartbeats, fetches, buffering, the join loop) on
its event loop, while the user's process holds a thin facade (`ClientFacade`) that makes one
Ray call per user call. Client actors are owned by the user's process (not detached), so
they end with it, and are named ``naming.client(kind, client_id)`` in the deployment's
namespace. Calls to cluster actors go through an `actors.retry.ActorDirectory`: actor death,
NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE and COORDINATOR_LOAD_IN_PROGRESS are retried with
backoff, and a failed call drops the cached handle so a restarted actor is looked up again.
"""
from __future__ import annotations

import asyncio
import logging
import socket
from typing import Any, Coroutine

import ray


from .. import naming
from ..errors import RETRIABLE_COORDINATOR_ERRORS, map_errors
from ..placement import actor_options, current_node, on_node
from ..retry import ActorDirectory

log = logging.getLogger(__name__)

__all__ = ["ClientActor", "ClientFacade"]


class ClientActor:
    """Base of a client's background work, in a client actor or on the process's network
    thread (`network_thread`). Subclasses spawn their loops with `_spawn` and call cluster
    actors with `_call`."""

    def __init__(self, namespace: str, config: dict, client_id: str) -> None:
        self.namespace = namespace
        self.cluster_config = dict(config)
        self.client_id = client_id
        self.host = socket.gethostname()  # Kafka's client host, shown by describe
        self._actors = ActorDirectory(namespace)
        self._tasks: set[asyncio.Task] = set()
        self._stopped = False

    # ------------------------------------------------------------------ finding actors

    def _forget(self, name: str) -> None:
        self._actors.forget(name)

    async def _call(self, name: str, method: str, *args, timeout_s: float = 30.0,
                    retry_on: frozenset = RETRIABLE_COORDINATOR_ERRORS) -> Any:
        return await self._actors.call_async(name, method, *args, timeout_s=timeout_s, retry_on=retry_on)

    def group_coordinator_name(self, group_id: str) -> str:
        """The coordinator of `group_id`: Kafka's FindCoordinator is a hash here."""
        return naming.find_coordinator(naming.CoordinatorType.GROUP, group_id, self.cluster_config)

    def _host_of(self, tp: tuple[str, int]) -> str:
        """The partition host that leads the topic partition."""
        return naming.partition_host_of(tp[0], tp[1], self.cluster_config)

    # ------------------------------------------------------------------ background work

    def _spawn(self, coroutine: Coroutine) -> asyncio.Task:
        """A background task of this client; once the client is stopped, one cancelled
        before it starts (a task ending as the client stops must not start another)."""
        task = asyncio.get_running_loop().create_task(coroutine)
        if self._stopped:
            task.cancel()
            return task
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("%s: background task failed", self.client_id, exc_info=task.exception())

    async def _stop_tasks(self) -> None:
        """Cancel the background work for good (heartbeats, fetches, acknowledgements)."""
        self._stopped = True
        current = asyncio.current_task()
        while tasks := [t for t in self._tasks if t is not current]:
            for t in tasks:
                t.cancel()
            # Again until they end: a cancellation can be lost (on Python 3.11, wait_for
            # returns an answer that arrived together with it).
            await asyncio.wait(tasks, timeout=0.1)

    async def ping(self) -> str:
        return self.client_id


class ClientFacade:
    """What the user's process holds: the client actor's handle, and calls that turn every
    Ray failure into a KafkaError."""

    def __init__(self, cluster, kind: str, actor_cls: type, client_id: str, *args) -> None:
        config = cluster.config
        options = dict(name=naming.client(kind, client_id), namespace=cluster.namespace,
                       **actor_options(config, strategy=on_node(current_node()), resources=False))
        self.client_id = client_id
        self._actor = ray.remote(actor_cls).options(**options).remote(cluster.namespace, config, client_id, *args)

    def _call(self, method: str, *args, timeout_s: float | None = 60.0) -> Any:
        with map_errors():
            return ray.get(getattr(self._actor, method).remote(*args), timeout=timeout_s)

    def _submit(self, method: str, *args):
        """Start a call and return its ObjectRef (for asynchronous work such as commit_async)."""
        return getattr(self._actor, method).remote(*args)

    def _kill(self) -> None:
        try:
            ray.kill(self._actor, no_restart=True)
        except Exception:  # already gone
            pass
