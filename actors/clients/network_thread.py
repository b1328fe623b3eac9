"""The process's network thread: one asyncio event loop on a daemon thread, where the clients
that live in the user's process run their background work (Kafka's ConsumerNetworkThread).

The share consumer runs here rather than in a client actor: its polls hand the user records
without a Ray call and without the records crossing one more process. Every share consumer of
the process shares the loop; a user's call blocks its own thread until its coroutine is done.

A client's background work must end before Ray does: Ray's shutdown takes the core worker
away under any call still in flight on this thread. So the clients the thread runs stop at
the interpreter's exit before Ray's own exit hook (registered earlier, run later), and a
Cluster stops its share consumers before it shuts Ray down.
"""
from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import os
import threading
import weakref
from typing import Any, Coroutine

from runtime.errors import Errors, KafkaError

__all__ = ["NetworkThread"]


class NetworkThread:
    _instance: "NetworkThread | None" = None
    _lock = threading.Lock()

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="shoal-network-thread", daemon=True)
        self._thread.start()
        self._clients: weakref.WeakSet = weakref.WeakSet()  # whose background work runs here
        atexit.register(self._stop_all)

    @classmethod
    def instance(cls) -> "NetworkThread":
        """The process's network thread, started by the first client that needs it."""
        with cls._lock:
            if cls._instance is None:
                cls._instance = cls()
            return cls._instance

    def submit(self, coroutine: Coroutine) -> concurrent.futures.Future:
        """Start `coroutine` on the loop; cancelling the future cancels it, and with it the
        actor call it awaits (made through actors.retry, as every client's calls are)."""
        if threading.current_thread() is self._thread:
            coroutine.close()
            raise RuntimeError("a client call from the network thread itself would wait for itself")
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)

    def register(self, client) -> None:
        """`client` (a ClientActor) runs its background work here."""
        self._clients.add(client)

    def stop(self, client, timeout_s: float | None = 10.0) -> None:
        """End `client`'s background work, sending nothing more; wait until it has unless
        `timeout_s` is None (a finalizer, which may run on this very thread, cannot wait)."""
        self._clients.discard(client)
        future = asyncio.run_coroutine_threadsafe(client._stop_tasks(), self.loop)
        if timeout_s is not None:
            try:
                result_within(future, timeout_s)
            except KafkaError:
                pass  # a task that will not end: the process or Ray ends it

    def _stop_all(self) -> None:
        for client in list(self._clients):
            self.stop(client, timeout_s=2.0)

    @classmethod
    def _forget(cls) -> None:
        cls._instance = None  # a forked child has the loop but not its thread


def result_within(future: concurrent.futures.Future, timeout_s: float | None) -> Any:
    """`future`'s result; REQUEST_TIMED_OUT (with it cancelled) after `timeout_s`. Cancelling
    its coroutine cancels the actor call it awaits too, on the actor (actors.retry.await_ref),
    so a call given up on here does not run on (a ShareFetch acquiring records for nobody)."""
    try:
        return future.result(timeout_s)
    except concurrent.futures.TimeoutError:
        future.cancel()
        raise KafkaError(Errors.REQUEST_TIMED_OUT, f"no answer within {timeout_s} s") from None


os.register_at_fork(after_in_child=NetworkThread._forget)
