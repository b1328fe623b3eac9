"""Request coalescing: small requests bound for the same actor method (heartbeats, commits)
travel together in one Ray call, so the call's cost (~1 ms) is paid per batch, not per
request.

Calls are gathered per (actor name, method). The first one opens a batch that leaves at the
end of the current event-loop turn, so whatever arrives in that turn joins it; while a
batch is out, everything that arrives waits for it to come back and then leaves as the next
batch. The far side is the actor's `batched(method, calls)` (`run_batched` below), which
starts the calls in one turn of its loop, in the order they were gathered, and answers each
apart: every call keeps its own answer and its own error. A failure of the Ray call itself
(the actor away) fails every call of that batch.

So calls with one key leave in the order they were made, one batch at a time: the gateway
sends produces this way (always, whatever `gateway.coalesce.requests` says), which keeps a
partition's batches in the order they were sent, as Kafka keeps a connection's requests.
"""
from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable, Hashable

from runtime.errors import Errors, KafkaError

from ..errors import to_kafka_error

# Keeps one Ray message of reasonable size when thousands of calls wait at once.
MAX_BATCH = 1000

Send = Callable[[str, str, list[tuple]], Awaitable[list]]


class Coalescer:
    """`send(name, method, calls)` makes the batched call and returns one result per call,
    an exception standing for that call's error. `ordered=False` lets a key's batches
    overlap: each turn's calls leave at the end of that turn, whether or not the key's last
    batch is back (for calls whose order does not matter, such as the fetches of different
    partitions, which then keep several batches in flight)."""

    def __init__(self, send: Send, max_batch: int = MAX_BATCH, ordered: bool = True) -> None:
        self._send = send
        self._max_batch = max_batch
        self._ordered = ordered
        self._waiting: dict[Hashable, list[tuple[tuple, asyncio.Future]]] = {}
        self._busy: set[Hashable] = set()  # keys whose batch is open or out
        self.calls = self.batches = 0  # sent so far: how much gathering there was

    async def call(self, name: str, method: str, *args) -> Any:
        key = (name, method)
        future = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(key, []).append((args, future))
        if key not in self._busy:
            self._busy.add(key)
            asyncio.get_running_loop().call_soon(self._dispatch, key)
        return await future

    def _dispatch(self, key) -> None:
        waiting = self._waiting.get(key)
        if not waiting:
            self._busy.discard(key)
            self._waiting.pop(key, None)
            return
        batch, self._waiting[key] = waiting[:self._max_batch], waiting[self._max_batch:]
        self.calls += len(batch)
        self.batches += 1
        task = asyncio.ensure_future(self._send(*key, [args for args, _ in batch]))
        task.add_done_callback(lambda t: self._answer(key, batch, t))
        if not self._ordered:
            self._dispatch(key)  # the rest (past max_batch) leaves now too, then the key is free

    def _answer(self, key, batch, task: asyncio.Task) -> None:
        try:
            results = task.result()
            if len(results) != len(batch):
                raise RuntimeError(f"{len(results)} answers to a batch of {len(batch)}")
        except BaseException as e:  # the batch as a whole failed: so did each of its calls
            results = [e] * len(batch)
        for (_, future), result in zip(batch, results):
            if future.done():  # its caller went away (connection closed)
                continue
            if isinstance(result, BaseException):
                future.set_exception(result)
            else:
                future.set_result(result)
        if self._ordered:
            self._dispatch(key)


async def run_batched(actor: object, method: str, calls: list[tuple]) -> list:
    """An actor's `batched`: the calls start in one turn of its loop, in order (asyncio runs
    new tasks first in, first out), so their records share one flush of the log; each gets its
    own answer, a KafkaError standing for a call that failed."""
    if method.startswith("_") or method == "batched" or not callable(getattr(actor, method, None)):
        raise KafkaError(Errors.INVALID_REQUEST, f"{method!r} is not an RPC of {type(actor).__name__}")
    rpc = getattr(actor, method)
    results = await asyncio.gather(*(rpc(*args) for args in calls), return_exceptions=True)
    return [to_kafka_error(r) if isinstance(r, BaseException) else r for r in results]
