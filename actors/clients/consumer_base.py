"""What both consumer actors share: Kafka's Fetcher and the consumer's offset calls on an
event loop, around the sans-I/O fetch positions (`runtime.clients.fetch`).

One long-polling fetch loop per owned partition buffers records; the facade in the user's
process (`actors.clients.consumer.Consumer`) takes them together with the rebalance events in one
Ray call per `poll`, and runs the ConsumerRebalanceListener callbacks. Group membership is
the subclass's: the classic protocol (`consumer_actor.ConsumerActor`) or KIP-848
(`modern_consumer.ModernConsumerActor`). A subclass provides the members of the
"membership" section below; nothing else is overridden.

When a listener is registered, a revocation waits (up to max_poll_interval_ms) for the
facade to have run on_partitions_revoked, so a commit made in the callback still counts, as
in Kafka where the rebalance itself runs inside poll.

Every change of what a group member owns is logged with `time.time()` (`ownership_history()`),
so that tests on one machine can check that no two members owned a partition at once.
"""
from __future__ import annotations

import asyncio
import itertools
import logging
import time
from dataclasses import dataclass

from runtime.clients.fetch import FetchOutcome, FetchPositions, NoOffsetForPartitionError, reset_timestamp
from runtime.clients.offsets import Action, committed_offsets, offset_fetch_request
from runtime.clients.types import TopicPartition
from runtime.errors import Errors, KafkaError
from runtime.messages.group import OffsetCommitRequest
from runtime.messages.topics import READ_COMMITTED, READ_UNCOMMITTED, ListOffsetsRequest, MetadataRequest

from .. import naming
from .client import ClientActor
from ..retry import Backoff
from ..server.coalescing import Coalescer

log = logging.getLogger(__name__)

__all__ = ["ConsumerActorBase", "PollResult", "REVOKED", "ASSIGNED", "LOST"]

# Events the actor hands to the facade with a poll: (kind, partitions).
REVOKED, ASSIGNED, LOST = "revoked", "assigned", "lost"


@dataclass(frozen=True)
class PollResult:
    records: dict
    events: tuple = ()  # (kind, frozenset of TopicPartition)
    barrier: int | None = None  # the facade must call callbacks_done(barrier) after its callbacks
    error: Exception | None = None


class ConsumerActorBase(ClientActor):
    def __init__(self, namespace: str, config: dict, client_id: str, group_id: str | None, settings: dict) -> None:
        super().__init__(namespace, config, client_id)
        self.group_id = group_id
        self.s = settings
        self.instance_id = settings["group_instance_id"]
        self.rebalance_timeout_ms = settings["rebalance_timeout_ms"] or settings["max_poll_interval_ms"]
        self.manual = False
        self.positions = FetchPositions(settings)
        self._fetches: dict[TopicPartition, tuple[asyncio.Task, asyncio.Event]] = {}
        # The partitions' fetches that leave in one turn go to their host as one Fetch, and
        # their ListOffsets as one call.
        self._fetch_line = Coalescer(self._fetch_many, max_in_flight=None)
        self._list_line = Coalescer(self._batched)
        self.has_listener = False
        self.events: list[tuple[str, frozenset]] = []
        self.barrier: int | None = None
        self.barrier_done: asyncio.Event | None = None
        self.barriers = itertools.count(1)
        self.error: Exception | None = None  # raised by the next poll
        self.fatal: Exception | None = None  # raised by every poll: the group loop has stopped
        self.last_poll = time.monotonic()
        self.closed = False
        self.data: asyncio.Event | None = None
        self.wake: asyncio.Event | None = None
        self.loops_started = False
        self.ownership: list[tuple[float, str, tuple]] = []
        self.logged_owned: set = set()  # what the log says it owns: from assigned until revoked or lost

    # ================================================================== membership (the subclass's)

    @property
    def subscription(self) -> tuple:
        raise NotImplementedError

    async def _group_loop(self) -> None:
        """Joins, heartbeats and rebalances until the consumer closes."""
        raise NotImplementedError

    def _subscribe(self, topics: tuple) -> None:
        raise NotImplementedError

    def _on_poll(self) -> None:
        """The user polled: a member that left for a missed poll comes back."""

    async def _leave(self, reason: str) -> None:
        """Give up every partition (the facade ran on_partitions_revoked) and leave."""
        raise NotImplementedError

    def _in_group(self) -> bool:
        """Whether what was consumed may be auto-committed now (not midway through a rebalance)."""
        raise NotImplementedError

    def _commit_request(self, offsets: dict) -> OffsetCommitRequest:
        raise NotImplementedError

    def _on_commit_response(self, response, request) -> tuple[Action, KafkaError | None]:
        raise NotImplementedError

    async def _keep_alive(self) -> None:
        """Called while a revocation waits for the user's callback, so the session does not
        end meanwhile; nothing to do where heartbeats run on their own loop."""

    async def group_state(self) -> dict:
        raise NotImplementedError

    # ================================================================== the user's calls

    def _start(self) -> None:
        if not self.loops_started:
            self.loops_started = True
            self.data, self.wake = asyncio.Event(), asyncio.Event()
            if self.group_id is not None:
                self._spawn(self._group_loop())
                if self.s["enable_auto_commit"]:
                    self._spawn(self._auto_commit_loop())

    def _wake_group(self) -> None:
        self.wake.set()

    def _require_group(self, what: str) -> None:
        if self.group_id is None:
            raise KafkaError(Errors.INVALID_GROUP_ID, f"{what} needs a group_id")

    async def subscribe(self, topics, has_listener: bool) -> None:
        self._require_group("subscribe")
        self._start()
        self.has_listener = has_listener
        if self.manual:
            raise KafkaError(Errors.INVALID_REQUEST, "subscribe after assign: unsubscribe first")
        self._subscribe(tuple(sorted(set(topics))))
        self._wake_group()

    async def unsubscribe(self) -> list:
        events = []
        if self.manual:
            self._drop(set(self.positions))
            self.manual = False
        elif self.subscription:
            if len(self.positions):
                events.append((REVOKED, frozenset(self.positions)))
            await self._leave("the consumer unsubscribed")
        return events

    async def assign(self, partitions) -> None:
        self._start()
        if self.subscription:
            raise KafkaError(Errors.INVALID_REQUEST, "assign after subscribe: unsubscribe first")
        self.manual = True
        wanted = {TopicPartition(*tp) for tp in partitions}
        self._drop(set(self.positions) - wanted)
        self._add(wanted)

    async def poll(self, timeout_ms: int, max_records: int | None) -> PollResult:
        self._start()
        self.last_poll = time.monotonic()
        self._on_poll()
        deadline = self.last_poll + max(timeout_ms, 0) / 1000
        limit = max_records or self.s["max_poll_records"]
        while True:
            if self.error is not None or self.fatal is not None:
                error, self.error = self.error or self.fatal, None
                return PollResult({}, self._take_events(), self.barrier, error)
            events = self._take_events()
            records = self.positions.drain(limit)
            for _, space in self._fetches.values():
                space.set()
            remaining = deadline - time.monotonic()
            if records or events or remaining <= 0:
                return PollResult(records, events, self.barrier if events else None)
            self.data.clear()
            try:
                await asyncio.wait_for(self.data.wait(), remaining)
            except asyncio.TimeoutError:
                pass

    async def callbacks_done(self, barrier: int) -> None:
        if barrier == self.barrier and self.barrier_done is not None:
            self.barrier_done.set()

    async def commit(self, offsets: dict | None = None, timeout_s: float | None = None) -> None:
        """Commit `offsets` ({TopicPartition: OffsetAndMetadata}) or every consumed position,
        retrying for `timeout_s` (one request_timeout_ms when None); raises CommitFailedError
        or the coordinator's error."""
        self._require_group("commit")
        await self._commit(self.positions.consumed() if offsets is None else offsets, timeout_s)

    async def committed(self, partitions, timeout_s: float | None = None) -> dict:
        self._require_group("committed")
        return await self._fetch_committed({TopicPartition(*tp) for tp in partitions}, timeout_s)

    async def position(self, tp) -> int:
        tp = TopicPartition(*tp)
        part = self.positions.owned(tp)
        if part.position is None:
            await self._resolve_positions([tp])
        return part.position

    async def seek(self, tp, offset: int) -> None:
        tp = TopicPartition(*tp)
        epoch = self.positions.seek(tp, offset)
        self._start_fetch(tp, epoch)

    async def seek_to(self, partitions, timestamp: int) -> None:
        tps = [TopicPartition(*tp) for tp in partitions] or list(self.positions)
        for tp in tps:
            self.positions.owned(tp)
        offsets = await asyncio.gather(*(self._list_offset(tp, timestamp) for tp in tps))
        for tp, offset in zip(tps, offsets):
            await self.seek(tp, offset)

    async def pause(self, partitions, paused: bool) -> None:
        tps = [TopicPartition(*tp) for tp in partitions]
        self.positions.pause(tps, paused)
        for tp in tps:
            if tp in self._fetches:
                self._fetches[tp][1].set()

    async def list_offsets(self, partitions, timestamp: int) -> dict:
        tps = [TopicPartition(*tp) for tp in partitions]
        return dict(zip(tps, await asyncio.gather(*(self._list_offset(tp, timestamp) for tp in tps))))

    async def paused(self) -> set:
        return self.positions.paused()

    async def assignment(self) -> set:
        return set(self.positions)

    async def ownership_history(self) -> list:
        """[(time.time(), "assigned" | "revoked" | "lost", ((topic, partition), ...))]"""
        return list(self.ownership)

    async def prepare_close(self) -> list:
        """First half of close: stop fetching; the facade runs on_partitions_revoked next."""
        self.closed = True
        for task, _ in self._fetches.values():
            task.cancel()
        self._fetches.clear()
        return [(REVOKED, frozenset(self.positions))] if len(self.positions) and not self.manual else []

    async def close(self, autocommit: bool) -> None:
        self.closed = True
        try:
            if autocommit and self.s["enable_auto_commit"] and self.group_id is not None and len(self.positions):
                try:
                    await self._commit(self.positions.consumed())
                except Exception as e:
                    log.warning("%s: the commit at close failed: %s", self.client_id, e)
            if self.subscription:
                await self._leave("the consumer is being closed")
        finally:
            await self._stop_tasks()

    # ================================================================== rebalance events

    async def _sleep(self, seconds: float | None) -> None:
        if seconds is not None and seconds <= 0:
            return
        self.wake.clear()
        try:
            await asyncio.wait_for(self.wake.wait(), seconds)
        except asyncio.TimeoutError:
            pass

    def _poll_timed_out(self) -> bool:
        return time.monotonic() - self.last_poll > self.s["max_poll_interval_ms"] / 1000

    async def _emit(self, kind: str, partitions, force: bool = False) -> None:
        if not partitions and not force:
            return
        self.events.append((kind, frozenset(partitions)))
        self.data.set()
        if kind == REVOKED and self.has_listener:
            # Wait for the user's on_partitions_revoked to run (in its poll) before going on.
            self.barrier = next(self.barriers)
            self.barrier_done = done = asyncio.Event()
            deadline = time.monotonic() + self.s["max_poll_interval_ms"] / 1000
            while not done.is_set():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    log.warning("%s: on_partitions_revoked did not run in time", self.client_id)
                    return
                try:
                    await asyncio.wait_for(done.wait(), min(remaining, self.s["heartbeat_interval_ms"] / 1000))
                except asyncio.TimeoutError:
                    await self._keep_alive()

    def _take_events(self) -> tuple:
        events, self.events = tuple(self.events), []
        return events

    def _log(self, kind: str, partitions) -> None:
        """Ownership begins before fetching starts and ends once the partitions are given
        up; each change is logged once (a revocation overtaken by a fence ends as lost)."""
        if kind == ASSIGNED:
            changed = set(partitions) - self.logged_owned
            self.logged_owned |= changed
        else:
            changed = set(partitions) & self.logged_owned
            self.logged_owned -= changed
        if changed:
            self.ownership.append((time.time(), kind, tuple(sorted(changed))))

    async def _give_up(self, partitions, kind: str) -> None:
        """Lost partitions: stop fetching them, then tell the user (no commit)."""
        self._drop(partitions)
        self._log(kind, partitions)
        await self._emit(kind, partitions)

    async def _revoke(self, partitions, commit) -> None:
        """Commit what was consumed of `commit` (auto commit), tell the user, stop fetching.
        From the start no poll hands out their records (they are paused), so what is
        committed is all that was consumed: a poll running meanwhile would otherwise hand
        out records past the commit, which the next owner reads again."""
        self.positions.pause([tp for tp in partitions if tp in self.positions], True)
        offsets = {tp: o for tp, o in self.positions.consumed().items() if tp in commit}
        if offsets:
            await self._commit_quietly(offsets)
        await self._emit(REVOKED, partitions)
        self._drop(partitions)
        self._log(REVOKED, partitions)

    async def _take(self, partitions) -> None:
        self._log(ASSIGNED, partitions)
        self._add(partitions)
        await self._emit(ASSIGNED, partitions, force=True)

    async def _partition_counts(self, topics) -> dict[str, int]:
        if not topics:
            return {}
        response = await self._call(naming.CONTROLLER, "metadata", MetadataRequest(tuple(topics)))
        return {t.name: len(t.partitions) for t in response.topics if t.error_code == 0}

    # ================================================================== offsets

    def _deadline(self, timeout_s: float | None) -> float:
        return time.monotonic() + (self.s["request_timeout_ms"] / 1000 if timeout_s is None else timeout_s)

    async def _call_until(self, deadline: float, name: str, method: str, request):
        """One request to a coordinator, sent again while it times out (a coordinator being
        reloaded can take longer than a request) until `deadline`, which may be math.inf:
        kafka-python's blocking commit() and committed() wait as long as it takes."""
        while True:
            attempt_s = min(deadline - time.monotonic(), self.s["request_timeout_ms"] / 1000)
            try:
                return await self._call(name, method, request, timeout_s=max(attempt_s, 0.1))
            except KafkaError as e:
                if e.error is not Errors.REQUEST_TIMED_OUT or time.monotonic() >= deadline:
                    raise

    async def _commit(self, offsets: dict, timeout_s: float | None = None) -> None:
        if not offsets:
            return
        coordinator = self.group_coordinator_name(self.group_id)
        deadline = self._deadline(timeout_s)
        backoff = Backoff(self.s["retry_backoff_ms"])
        while True:
            request = self._commit_request(offsets)
            response = await self._call_until(deadline, coordinator, "offset_commit", request)
            action, error = self._on_commit_response(response, request)
            if action is Action.NONE:
                return
            if action in (Action.RETRY, Action.REDISCOVER) and time.monotonic() < deadline:
                if action is Action.REDISCOVER:
                    self._forget(coordinator)
                await asyncio.sleep(backoff.next_s())
                continue
            self._wake_group()  # the membership may have to join again
            raise error

    async def _commit_quietly(self, offsets: dict) -> None:
        try:
            await self._commit(offsets)
        except Exception as e:
            log.warning("%s: auto commit failed: %s", self.client_id, e)

    async def _auto_commit_loop(self) -> None:
        last: dict = {}
        while not self.closed:
            await asyncio.sleep(self.s["auto_commit_interval_ms"] / 1000)
            if not self._in_group() and not self.manual:
                continue
            consumed = self.positions.consumed()
            changed = {tp: o for tp, o in consumed.items() if last.get(tp) != o}
            if changed:
                await self._commit_quietly(changed)
                last = consumed

    async def _fetch_committed(self, tps, timeout_s: float | None = None) -> dict:
        request = offset_fetch_request(self.group_id, tps)
        deadline = self._deadline(timeout_s)
        while True:
            response = await self._call_until(deadline, self.group_coordinator_name(self.group_id), "offset_fetch",
                                              request)
            offsets = committed_offsets(response, tps)
            if offsets is not None:
                return offsets
            await asyncio.sleep(self.s["retry_backoff_ms"] / 1000)

    # ================================================================== positions and fetching

    def _add(self, tps) -> None:
        added = self.positions.add(tps)
        if added:
            self._spawn(self._start_fetching(added))

    def _drop(self, tps) -> None:
        self.positions.drop(tps)
        for tp in tps:
            fetch = self._fetches.pop(tp, None)
            if fetch is not None:
                fetch[0].cancel()

    def _start_fetch(self, tp: TopicPartition, epoch: int) -> None:
        old = self._fetches.pop(tp, None)
        if old is not None:
            old[0].cancel()
        space = asyncio.Event()
        self._fetches[tp] = (self._spawn(self._fetch_loop(tp, epoch, space)), space)

    async def _start_fetching(self, tps) -> None:
        try:
            await self._resolve_positions(tps)
        except NoOffsetForPartitionError as e:
            self.error = e
            self.data.set()
            return
        for tp in tps:
            epoch = self.positions.epoch(tp)
            if epoch is not None and tp not in self._fetches:
                self._start_fetch(tp, epoch)

    async def _resolve_positions(self, tps) -> None:
        """Committed offsets first; where there is none, auto_offset_reset."""
        missing = self.positions.missing_positions(tps)
        if not missing:
            return
        committed = await self._fetch_committed(set(missing)) if self.group_id is not None else {}
        reset = [tp for tp in missing if committed.get(tp) is None]
        offsets = {}
        if reset:
            timestamp = reset_timestamp(self.s["auto_offset_reset"], reset)
            offsets = dict(zip(reset, await asyncio.gather(*(self._list_offset(tp, timestamp) for tp in reset))))
        self.positions.initialize(committed, offsets)

    async def _list_offset(self, tp: TopicPartition, timestamp: int) -> int:
        isolation = READ_COMMITTED if self.positions.read_committed else READ_UNCOMMITTED
        response = await self._list_line.call(self._host_of(tp), "list_offsets", ListOffsetsRequest(
            tp.topic, tp.partition, timestamp, isolation))
        if response.error_code:
            raise KafkaError(Errors.for_code(response.error_code), f"list_offsets {tp}")
        return response.offset

    async def _batched(self, host: str, method: str, calls: list[tuple]) -> list:
        return await self._call(host, "batched", method, calls, timeout_s=self.s["request_timeout_ms"] / 1000)

    async def _fetch_many(self, host: str, method: str, calls: list[tuple]) -> list:
        """One Fetch of a host's partitions (as Kafka's consumer sends one per broker): it
        long-polls across them, and every partition's loop gets its answer at once, so they
        leave together again. The host fills at most fetch_max_bytes, in request order, so
        the requests go in `FetchPositions.last_fed` order."""
        requests = [request for (request,) in calls]
        order = sorted(range(len(requests)), key=lambda i: self.positions.last_fed(requests[i].topic,
                                                                                   requests[i].partition))
        timeout_s = (self.s["fetch_max_wait_ms"] + self.s["request_timeout_ms"]) / 1000
        answers = await self._call(host, "fetch_many", [requests[i] for i in order], self.s["fetch_max_wait_ms"],
                                   self.s["fetch_min_bytes"], self.s["fetch_max_bytes"], timeout_s=timeout_s)
        out: list = [None] * len(requests)
        for i, answer in zip(order, answers):
            out[i] = answer
        return out

    async def _fetch_loop(self, tp: TopicPartition, epoch: int, space: asyncio.Event) -> None:
        leader = self._host_of(tp)
        backoff = Backoff(self.s["retry_backoff_ms"])
        while self.positions.epoch(tp) == epoch and not self.closed:
            request = self.positions.fetch_request(tp)
            if request is None:  # paused, or the buffer is full until poll takes from it
                space.clear()
                await space.wait()
                continue
            try:
                response = await self._fetch_line.call(leader, "fetch", request)
            except KafkaError as e:
                log.info("%s: fetch of %s failed: %s", self.client_id, tp, e)
                await asyncio.sleep(backoff.next_s())
                continue
            result = self.positions.on_fetch_response(tp, epoch, response)
            if result.outcome is FetchOutcome.STALE:
                return
            if result.outcome is FetchOutcome.OUT_OF_RANGE:
                try:
                    timestamp = reset_timestamp(self.s["auto_offset_reset"], [tp])
                except NoOffsetForPartitionError as e:
                    self.error = e
                    self.data.set()
                    return
                self.positions.reset(tp, epoch, await self._list_offset(tp, timestamp))
            elif result.outcome is FetchOutcome.RETRY:
                log.info("%s: fetch of %s: %s", self.client_id, tp, result.error.name)
                await asyncio.sleep(backoff.next_s())
            else:
                backoff.attempts = 0
                if result.added:
                    self.data.set()
