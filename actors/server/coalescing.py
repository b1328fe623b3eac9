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

So calls with one key leave in the order they were made, one batch at a time. The gateway
sends produces (always, whatever `gateway.coalesce.requests` says) with two batches out per
host, one being written while the next gathers, and a partition's calls never in two at once:
its batches keep the order they were sent in, as Kafka keeps a connection's requests.
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
    an exception standing for that call's error.

    `max_in_flight` bounds a key's batches out at once: 1 (the default) keeps one out and
    gathers the rest meanwhile; None lets each turn's calls leave at the end of that turn
    (for calls whose order does not matter, such as the fetches of different partitions).
    Above 1, `order(args)` names what must stay in order (a produce's partition): a call
    waits while a batch out holds a call of the same order, so those keep theirs whatever
    order Ray starts the batches in, and the others do not wait for them."""

    def __init__(self, send: Send, max_batch: int = MAX_BATCH, max_in_flight: int | None = 1,
                 order: Callable[[tuple], Hashable] | None = None,
                 size: Callable[[tuple], int] | None = None, max_size: int = 0) -> None:
        if max_in_flight != 1 and max_in_flight is not None and order is None:
            raise ValueError("several batches in flight keep an order only by `order`")
        self._send = send
        self._max_batch = max_batch
        self._max_in_flight = max_in_flight
        self._order = order
        # With `size`, a batch also stops before its calls' sizes pass max_size (a call larger
        # than max_size alone still leaves, alone).
        self._size = size
        self._max_size = max_size
        self._waiting: dict[Hashable, list[tuple[tuple, asyncio.Future]]] = {}
        self._scheduled: set[Hashable] = set()  # keys with a dispatch at the end of this turn
        self._out: dict[Hashable, int] = {}  # batches out per key
        self._held: dict[Hashable, dict[Hashable, int]] = {}  # per key: orders out, calls of each
        self.calls = self.batches = 0  # sent so far: how much gathering there was

    async def call(self, name: str, method: str, *args) -> Any:
        return await self.submit(name, method, *args)

    def submit(self, name: str, method: str, *args) -> asyncio.Future:
        """`call` without a coroutine of its own: the future of the call's answer (a caller
        with many calls at once gathers the futures, with no task for each)."""
        key = (name, method)
        future = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(key, []).append((args, future))
        if key not in self._scheduled and self._room(key):
            self._scheduled.add(key)
            asyncio.get_running_loop().call_soon(self._dispatch, key)
        return future

    def _room(self, key) -> bool:
        return self._max_in_flight is None or self._out.get(key, 0) < self._max_in_flight

    def _dispatch(self, key) -> None:
        self._scheduled.discard(key)
        while self._room(key):
            batch = self._take(key)
            if not batch:
                break
            self.calls += len(batch)
            self.batches += 1
            self._out[key] = self._out.get(key, 0) + 1
            if self._order is not None:
                held = self._held.setdefault(key, {})
                for args, _ in batch:
                    order = self._order(args)
                    held[order] = held.get(order, 0) + 1
            task = asyncio.ensure_future(self._send(*key, [args for args, _ in batch]))
            task.add_done_callback(lambda t, batch=batch: self._answer(key, batch, t))
        if not self._waiting.get(key):
            self._waiting.pop(key, None)

    def _take(self, key) -> list[tuple[tuple, asyncio.Future]]:
        """The next batch: waiting calls in order, as many as the bounds allow, skipping
        (with every later call of its order) a call whose order a batch out holds."""
        waiting = self._waiting.get(key, [])
        held = self._held.get(key, {})
        batch, left, blocked, size = [], [], set(), 0
        for i, (args, future) in enumerate(waiting):
            if len(batch) == self._max_batch:
                left.extend(waiting[i:])
                break
            order = self._order(args) if self._order is not None else None
            if order is not None and (order in held or order in blocked):
                blocked.add(order)
                left.append((args, future))
                continue
            if self._size is not None:
                size += self._size(args)
                if batch and size > self._max_size:
                    left.extend(waiting[i:])
                    break
            batch.append((args, future))
        self._waiting[key] = left
        return batch

    def _answer(self, key, batch, task: asyncio.Task) -> None:
        try:
            results = task.result()
            if len(results) != len(batch):
                raise RuntimeError(f"{len(results)} answers to a batch of {len(batch)}")
        except BaseException as e:  # the batch as a whole failed: so did each of its calls
            results = [e] * len(batch)
        self._out[key] -= 1
        if self._order is not None:
            held = self._held[key]
            for args, _ in batch:
                order = self._order(args)
                held[order] -= 1
                if not held[order]:
                    del held[order]
        for (_, future), result in zip(batch, results):
            if future.done():  # its caller went away (connection closed)
                continue
            if isinstance(result, BaseException):
                future.set_exception(result)
            else:
                future.set_result(result)
        if self._max_in_flight is not None and self._waiting.get(key):
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
