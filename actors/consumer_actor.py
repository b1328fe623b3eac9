"""The classic consumer's client actor: Kafka's ConsumerCoordinator and Fetcher on an event loop.

The join/sync loop and heartbeats, the leader's assignment with the client assignors, one
long-polling fetch loop per owned partition that buffers records, auto commit. The facade in
the user's process (`actors.consumer.Consumer`) takes the buffered records together with the
rebalance events in one Ray call per `poll`, and runs the ConsumerRebalanceListener callbacks.

When a listener is registered, the actor waits (up to max_poll_interval_ms) for the facade
to have run on_partitions_revoked before it rejoins, so a commit made in the callback still
counts, as in Kafka where the rebalance itself runs inside poll.

Every change of what a group member owns is logged with `time.time()` (`ownership_history()`),
so that tests on one machine can check that no two members owned a partition at once.
"""
from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections import deque
from dataclasses import dataclass, field

from runtime.assignors import MemberSubscription, client_assignor
from runtime.errors import Errors, KafkaError
from runtime.group.consumer_protocol import (PROTOCOL_TYPE, decode_assignment, decode_subscription,
                                             encode_assignment, encode_subscription)
from runtime.messages.group import (HeartbeatRequest, JoinGroupRequest, JoinGroupRequestProtocol, LeaveGroupRequest,
                                    MemberIdentity, OffsetCommitRequest, OffsetCommitRequestPartition,
                                    OffsetCommitRequestTopic, OffsetFetchRequest, OffsetFetchRequestGroup,
                                    OffsetFetchRequestTopics, SyncGroupRequest, SyncGroupRequestAssignment)
from runtime.messages.topics import (EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, READ_COMMITTED, READ_UNCOMMITTED,
                                     FetchRequest, ListOffsetsRequest, MetadataRequest)
from runtime.topics.data import decode_entries
from runtime.topics.isolation import filter_aborted

from . import naming
from .client import ClientActor
from .errors import RETRIABLE_COORDINATOR_ERRORS
from .retry import Backoff
from runtime.clients.types import ConsumerRecord, OffsetAndMetadata, TopicPartition

log = logging.getLogger(__name__)

__all__ = ["ConsumerActor", "NoOffsetForPartitionError", "CommitFailedError", "REVOKED", "ASSIGNED", "LOST"]

# Events the actor hands to the facade with a poll: (kind, partitions).
REVOKED, ASSIGNED, LOST = "revoked", "assigned", "lost"


class NoOffsetForPartitionError(Exception):
    """auto_offset_reset is "none" and these partitions have no committed offset."""

    def __init__(self, partitions) -> None:
        self.partitions = tuple(sorted(partitions))
        super().__init__(f"no committed offset and no reset policy for {list(self.partitions)}")

    def __reduce__(self):
        return (NoOffsetForPartitionError, (self.partitions,))


class CommitFailedError(KafkaError):
    """The group rebalanced (or this member was removed) before the commit: the partitions
    may be someone else's now. Carries the coordinator's error."""


@dataclass
class _Partition:
    position: int | None = None  # the next offset poll hands out (what a commit stores)
    fetch_offset: int | None = None
    buffer: deque = field(default_factory=deque)
    paused: bool = False
    epoch: int = 0  # bumped by seek and revocation: a fetch begun before is dropped
    space: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task | None = None


@dataclass(frozen=True)
class PollResult:
    records: dict
    events: tuple = ()  # (kind, frozenset of TopicPartition)
    barrier: int | None = None  # the facade must call callbacks_done(barrier) after its callbacks
    error: Exception | None = None


_UNJOINED, _REBALANCING, _STABLE = "unjoined", "rebalancing", "stable"


class ConsumerActor(ClientActor):
    def __init__(self, namespace: str, config: dict, client_id: str, group_id: str | None, settings: dict) -> None:
        super().__init__(namespace, config, client_id)
        self.group_id = group_id
        self.s = settings
        self.instance_id = settings["group_instance_id"]
        self.strategies = tuple(settings["partition_assignment_strategy"])
        # Kafka's rule: cooperative only if every configured assignor supports it.
        self.cooperative = all(name == "cooperative-sticky" for name in self.strategies)
        self.rebalance_timeout_ms = settings["rebalance_timeout_ms"] or settings["max_poll_interval_ms"]
        self.subscription: tuple[str, ...] = ()
        self.manual = False
        self.parts: dict[TopicPartition, _Partition] = {}
        self.member_id = ""
        self.generation = -1
        self.protocol: str | None = None
        self.state = _UNJOINED
        self.rejoin_needed = False
        self.last_assignment: dict[str, tuple[int, ...]] = {}
        self.has_listener = False
        self.events: list[tuple[str, frozenset]] = []
        self.barrier: int | None = None
        self.barrier_done: asyncio.Event | None = None
        self.barriers = itertools.count(1)
        self.error: Exception | None = None  # raised by the next poll
        self.fatal: Exception | None = None  # raised by every poll: the group loop has stopped
        self.last_poll = time.monotonic()
        self.poll_expired = False
        self.closed = False
        self.data: asyncio.Event | None = None
        self.wake: asyncio.Event | None = None
        self.loops_started = False
        self.next_drain = 0
        self.metadata_snapshot: tuple | None = None  # the leader's (topics, partition counts) of its last assignment
        self.metadata_checked = 0.0
        self.ownership: list[tuple[float, str, tuple]] = []
        self.logged_owned: set = set()  # what the log says it owns: from assigned until revoked or lost

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

    # ================================================================== the user's calls

    async def subscribe(self, topics, has_listener: bool) -> None:
        self._require_group("subscribe")
        self._start()
        self.has_listener = has_listener
        topics = tuple(sorted(set(topics)))
        if self.manual:
            raise KafkaError(Errors.INVALID_REQUEST, "subscribe after assign: unsubscribe first")
        if topics != self.subscription:
            self.subscription = topics
            self.rejoin_needed = True
            self._wake_group()

    async def unsubscribe(self) -> list:
        events = []
        if self.manual:
            self._drop(set(self.parts))
            self.manual = False
        elif self.subscription:
            if self.parts:
                events.append((REVOKED, frozenset(self.parts)))
            self.subscription = ()
            await self._leave("the consumer unsubscribed")
        return events

    async def assign(self, partitions) -> None:
        self._start()
        if self.subscription:
            raise KafkaError(Errors.INVALID_REQUEST, "assign after subscribe: unsubscribe first")
        self.manual = True
        wanted = {TopicPartition(*tp) for tp in partitions}
        self._drop(set(self.parts) - wanted)
        self._add(wanted - set(self.parts))

    async def poll(self, timeout_ms: int, max_records: int | None) -> PollResult:
        self._start()
        self.last_poll = time.monotonic()
        if self.poll_expired:
            self.poll_expired = False
            self.rejoin_needed = True
            self._wake_group()
        deadline = self.last_poll + max(timeout_ms, 0) / 1000
        limit = max_records or self.s["max_poll_records"]
        while True:
            if self.error is not None or self.fatal is not None:
                error, self.error = self.error or self.fatal, None
                return PollResult({}, self._take_events(), self.barrier, error)
            events = self._take_events()
            records = self._drain(limit)
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

    async def commit(self, offsets: dict | None = None) -> None:
        """Commit `offsets` ({TopicPartition: OffsetAndMetadata}) or every consumed position;
        raises CommitFailedError or the coordinator's error."""
        self._require_group("commit")
        if offsets is None:
            offsets = self._consumed()
        await self._commit(offsets)

    async def committed(self, partitions) -> dict:
        self._require_group("committed")
        return await self._fetch_committed({TopicPartition(*tp) for tp in partitions})

    async def position(self, tp) -> int:
        tp = TopicPartition(*tp)
        part = self._owned(tp)
        if part.position is None:
            await self._resolve_positions([tp])
        return part.position

    async def seek(self, tp, offset: int) -> None:
        if offset < 0:
            raise KafkaError(Errors.INVALID_REQUEST, f"cannot seek to {offset}")
        self._seek(TopicPartition(*tp), offset)

    async def seek_to(self, partitions, timestamp: int) -> None:
        tps = [TopicPartition(*tp) for tp in partitions] or list(self.parts)
        for tp in tps:
            self._owned(tp)
        offsets = await asyncio.gather(*(self._list_offset(tp, timestamp) for tp in tps))
        for tp, offset in zip(tps, offsets):
            self._seek(tp, offset)

    async def pause(self, partitions, paused: bool) -> None:
        for tp in partitions:
            part = self._owned(TopicPartition(*tp))
            part.paused = paused
            part.space.set()

    async def list_offsets(self, partitions, timestamp: int) -> dict:
        tps = [TopicPartition(*tp) for tp in partitions]
        return dict(zip(tps, await asyncio.gather(*(self._list_offset(tp, timestamp) for tp in tps))))

    async def paused(self) -> set:
        return {tp for tp, p in self.parts.items() if p.paused}

    async def assignment(self) -> set:
        return set(self.parts)

    async def group_state(self) -> dict:
        """For tests and tools: where this member is in the group."""
        return {"member_id": self.member_id, "generation": self.generation, "state": self.state,
                "protocol": self.protocol, "assignment": sorted(self.parts)}

    async def ownership_history(self) -> list:
        """[(time.time(), "assigned" | "revoked" | "lost", ((topic, partition), ...))]"""
        return list(self.ownership)

    async def prepare_close(self) -> list:
        """First half of close: stop fetching; the facade runs on_partitions_revoked next."""
        self.closed = True
        for part in self.parts.values():
            part.epoch += 1
            if part.task is not None:
                part.task.cancel()
        return [(REVOKED, frozenset(self.parts))] if self.parts and not self.manual else []

    async def close(self, autocommit: bool) -> None:
        self.closed = True
        try:
            if autocommit and self.s["enable_auto_commit"] and self.group_id is not None and self.parts:
                try:
                    await self._commit(self._consumed())
                except Exception as e:
                    log.warning("%s: the commit at close failed: %s", self.client_id, e)
            if self.subscription:
                await self._leave("the consumer is being closed")
        finally:
            await self._stop_tasks()

    # ================================================================== group membership

    def _require_group(self, what: str) -> None:
        if self.group_id is None:
            raise KafkaError(Errors.INVALID_GROUP_ID, f"{what} needs a group_id")

    async def _group_loop(self) -> None:
        coordinator = self.group_coordinator_name(self.group_id)
        while not self.closed:
            if not self.subscription or self.poll_expired:
                await self._sleep(None)
                continue
            if self._poll_timed_out():
                # Kafka's heartbeat thread leaves for a consumer stuck outside poll; its
                # partitions are lost (the next poll rejoins).
                lost = set(self.parts)
                await self._leave("consumer poll timeout has expired (max_poll_interval_ms)", LOST)
                self.poll_expired = True
                await self._emit(LOST, lost)
                continue
            try:
                if self.state != _STABLE or self.rejoin_needed:
                    await self._join_and_sync(coordinator)
                    continue
                started = time.monotonic()
                await self._heartbeat(coordinator)
                await self._check_metadata()
                await self._sleep(self.s["heartbeat_interval_ms"] / 1000 - (time.monotonic() - started))
            except (KafkaError, NoOffsetForPartitionError) as e:
                if isinstance(e, KafkaError) and (e.retriable or e.error in RETRIABLE_COORDINATOR_ERRORS
                                                  or e.error is Errors.REQUEST_TIMED_OUT):
                    await asyncio.sleep(self.s["retry_backoff_ms"] / 1000)
                    continue
                log.error("%s: leaving the group loop: %s", self.client_id, e)
                self.fatal = e
                self.data.set()
                return

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

    async def _join_and_sync(self, coordinator: str) -> None:
        await self._prepare_join()
        self.state = _REBALANCING
        request = JoinGroupRequest(self.group_id, self.s["session_timeout_ms"], self.member_id, PROTOCOL_TYPE,
                                   self._protocols(), self.rebalance_timeout_ms, self.instance_id)
        timeout_s = self.rebalance_timeout_ms / 1000 + self.s["request_timeout_ms"] / 1000
        joined = await self._call(coordinator, "join_group", request, self.client_id, self.host, timeout_s=timeout_s)
        if joined.error_code == Errors.MEMBER_ID_REQUIRED.code:
            self.member_id = joined.member_id
            return
        if self._member_error(joined.error_code):
            return
        self.member_id, self.generation, self.protocol = joined.member_id, joined.generation_id, joined.protocol_name
        assignments = ()
        self.metadata_snapshot = None
        if joined.leader == self.member_id and not joined.skip_assignment:
            assignments = await self._assign(joined)
        synced = await self._call(coordinator, "sync_group", SyncGroupRequest(
            self.group_id, self.generation, self.member_id, self.instance_id, PROTOCOL_TYPE, self.protocol,
            assignments), timeout_s=timeout_s)
        if self._member_error(synced.error_code):
            return
        await self._on_join_complete(decode_assignment(synced.assignment).assigned_partitions)

    def _member_error(self, code: int) -> bool:
        """Kafka's answers to a join, sync or heartbeat error; True if there was one."""
        if code == 0:
            return False
        error = Errors.for_code(code)
        if error is Errors.UNKNOWN_MEMBER_ID:
            self.member_id, self.generation = "", -1
        elif error is Errors.ILLEGAL_GENERATION:
            self.generation = -1
        elif error not in (Errors.REBALANCE_IN_PROGRESS,) and error not in RETRIABLE_COORDINATOR_ERRORS:
            raise KafkaError(error, f"the group coordinator answered {error.name}")
        self.rejoin_needed = True
        return True

    def _protocols(self) -> tuple:
        owned = tuple((t, ps) for t, ps in sorted(self.last_assignment.items()) if t in self.subscription)
        metadata = encode_subscription(self.subscription, None, owned, self.generation)
        return tuple(JoinGroupRequestProtocol(name, metadata) for name in self.strategies)

    async def _prepare_join(self) -> None:
        """Kafka's onJoinPrepare: commit what was consumed, then give up partitions (all of
        them under the eager protocol; none yet under the cooperative one). Partitions of a
        generation that is already gone are lost, not revoked, and not committed."""
        if not self.parts:
            return
        if self.generation == -1:
            lost = set(self.parts)
            self._drop(lost)
            self._log(LOST, lost)
            self.last_assignment = {}
            await self._emit(LOST, lost)
            return
        if self.state == _REBALANCING:  # a retried join: this was done already
            return
        if self.s["enable_auto_commit"]:
            await self._commit_quietly(self._consumed())
        if not self.cooperative:
            revoked = set(self.parts)
            await self._emit(REVOKED, revoked)
            self._drop(revoked)
            self._log(REVOKED, revoked)

    async def _on_join_complete(self, assigned_partitions) -> None:
        assigned = {TopicPartition(t, p) for t, ps in assigned_partitions for p in ps}
        self.last_assignment = {t: tuple(sorted(ps)) for t, ps in assigned_partitions}
        self.state = _STABLE
        self.rejoin_needed = False
        revoked = set(self.parts) - assigned
        if revoked:
            # Cooperative: give these up, then rejoin so their new owner can get them.
            if self.s["enable_auto_commit"]:
                await self._commit_quietly({tp: o for tp, o in self._consumed().items() if tp in revoked})
            await self._emit(REVOKED, revoked)
            self._drop(revoked)
            self._log(REVOKED, revoked)
            self.rejoin_needed = True
        added = assigned - set(self.parts)
        self._log(ASSIGNED, added)
        self._add(added)
        await self._emit(ASSIGNED, added, force=True)

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

    async def _keep_alive(self) -> None:
        """A heartbeat while the group loop waits for the user, so the session does not
        end meanwhile (Kafka's heartbeat thread goes on during the callbacks)."""
        if not self.member_id or self.generation == -1:
            return
        try:
            await self._heartbeat(self.group_coordinator_name(self.group_id))
        except KafkaError as e:
            log.info("%s: heartbeat while waiting for the user: %s", self.client_id, e)

    def _take_events(self) -> tuple:
        events, self.events = tuple(self.events), []
        return events

    async def _assign(self, joined) -> tuple:
        """The leader's job: run the chosen assignor over every member's subscription."""
        members = {}
        for m in joined.members:
            try:
                sub = decode_subscription(m.metadata)
            except ValueError:
                log.warning("%s: member %s sent a subscription that does not decode", self.client_id, m.member_id)
                sub = None
            members[m.member_id] = MemberSubscription(
                sub.topics if sub else (), owned={t: ps for t, ps in sub.owned_partitions} if sub else {},
                rack=sub.rack_id if sub else None, instance_id=m.group_instance_id,
                generation=sub.generation_id if sub else -1)
        wanted = sorted(set().union(*(s.topics for s in members.values())))
        topics = await self._partition_counts(wanted)
        self.metadata_snapshot = (wanted, topics)
        self.metadata_checked = time.monotonic()
        result = client_assignor(joined.protocol_name)(members, topics)
        return tuple(SyncGroupRequestAssignment(mid, encode_assignment(
            tuple((t, tuple(sorted(ps))) for t, ps in sorted(result.get(mid, {}).items()) if ps)))
            for mid in members)

    async def _check_metadata(self) -> None:
        """Kafka's leader rejoins when what it assigned from changed: a subscribed topic got
        partitions, or was created or deleted."""
        if self.metadata_snapshot is None or (
                time.monotonic() - self.metadata_checked < self.s["metadata_max_age_ms"] / 1000):
            return
        self.metadata_checked = time.monotonic()
        wanted, counts = self.metadata_snapshot
        if await self._partition_counts(wanted) != counts:
            self.rejoin_needed = True

    async def _partition_counts(self, topics) -> dict[str, int]:
        if not topics:
            return {}
        response = await self._call(naming.CONTROLLER, "metadata", MetadataRequest(tuple(topics)))
        return {t.name: len(t.partitions) for t in response.topics if t.error_code == 0}

    async def _heartbeat(self, coordinator: str) -> None:
        response = await self._call(coordinator, "heartbeat", HeartbeatRequest(
            self.group_id, self.generation, self.member_id, self.instance_id),
            timeout_s=self.s["session_timeout_ms"] / 1000)
        self._member_error(response.error_code)

    async def _leave(self, reason: str, kind: str = REVOKED) -> None:
        """Kafka's maybeLeaveGroup: the partitions are given up first (`kind`: revoked, or
        lost), then a dynamic member says goodbye; a static member just forgets its
        generation, so that coming back within the session timeout is no rebalance."""
        given_up = set(self.parts)
        self._drop(given_up)
        self._log(kind, given_up)
        if self.member_id and self.instance_id is None and self.generation != -1:
            try:
                await self._call(self.group_coordinator_name(self.group_id), "leave_group", LeaveGroupRequest(
                    self.group_id, (MemberIdentity(self.member_id, None, reason),)),
                    timeout_s=self.s["request_timeout_ms"] / 1000)
            except KafkaError as e:
                log.info("%s: leave_group failed: %s", self.client_id, e)
        self.member_id, self.generation, self.state = "", -1, _UNJOINED
        self.last_assignment = {}

    # ================================================================== offsets

    def _consumed(self) -> dict:
        return {tp: OffsetAndMetadata(p.position) for tp, p in self.parts.items() if p.position is not None}

    async def _commit(self, offsets: dict) -> None:
        if not offsets:
            return
        topics: dict[str, list] = {}
        for tp, om in sorted(offsets.items()):
            om = om if isinstance(om, OffsetAndMetadata) else OffsetAndMetadata(*om) if isinstance(om, tuple) \
                else OffsetAndMetadata(int(om))
            topics.setdefault(tp[0], []).append(OffsetCommitRequestPartition(tp[1], om.offset, om.leader_epoch,
                                                                             om.metadata))
        in_group = self.subscription and self.generation != -1
        request = OffsetCommitRequest(
            self.group_id, tuple(OffsetCommitRequestTopic(t, tuple(ps)) for t, ps in topics.items()),
            self.generation if in_group else -1, self.member_id if in_group else "",
            self.instance_id if in_group else None)
        deadline = time.monotonic() + self.s["request_timeout_ms"] / 1000
        backoff = Backoff(self.s["retry_backoff_ms"])
        while True:
            response = await self._call(self.group_coordinator_name(self.group_id), "offset_commit", request,
                                        timeout_s=max(deadline - time.monotonic(), 0.1))
            errors = sorted({Errors.for_code(p.error_code) for t in response.topics for p in t.partitions
                             if p.error_code}, key=lambda e: e.code)
            if not errors:
                return
            retriable = [e for e in errors if e in RETRIABLE_COORDINATOR_ERRORS or e.retriable]
            if retriable and time.monotonic() < deadline:
                await asyncio.sleep(backoff.next_s())  # commits are idempotent: send it all again
                continue
            error = errors[0]
            if error in (Errors.ILLEGAL_GENERATION, Errors.UNKNOWN_MEMBER_ID, Errors.REBALANCE_IN_PROGRESS):
                if error is not Errors.REBALANCE_IN_PROGRESS:
                    self._member_error(error.code)
                    self._wake_group()
                raise CommitFailedError(error, "the commit failed: the group rebalanced or this member left it")
            raise KafkaError(error, "the commit failed")

    async def _commit_quietly(self, offsets: dict) -> None:
        try:
            await self._commit(offsets)
        except Exception as e:
            log.warning("%s: auto commit failed: %s", self.client_id, e)

    async def _auto_commit_loop(self) -> None:
        last: dict = {}
        while not self.closed:
            await asyncio.sleep(self.s["auto_commit_interval_ms"] / 1000)
            if self.state != _STABLE and not self.manual:
                continue
            consumed = self._consumed()
            changed = {tp: o for tp, o in consumed.items() if last.get(tp) != o}
            if changed:
                await self._commit_quietly(changed)
                last = consumed

    async def _fetch_committed(self, tps) -> dict:
        by_topic: dict[str, list[int]] = {}
        for tp in sorted(tps):
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        request = OffsetFetchRequest((OffsetFetchRequestGroup(self.group_id, tuple(
            OffsetFetchRequestTopics(t, tuple(ps)) for t, ps in by_topic.items())),), require_stable=True)
        while True:
            response = await self._call(self.group_coordinator_name(self.group_id), "offset_fetch", request,
                                        timeout_s=self.s["request_timeout_ms"] / 1000)
            (group,) = response.groups
            codes = {p.error_code for t in group.topics for p in t.partitions} | {group.error_code}
            if Errors.UNSTABLE_OFFSET_COMMIT.code in codes or codes & {e.code for e in RETRIABLE_COORDINATOR_ERRORS}:
                await asyncio.sleep(self.s["retry_backoff_ms"] / 1000)
                continue
            if group.error_code:
                raise KafkaError(Errors.for_code(group.error_code), "offset fetch failed")
            out = {tp: None for tp in tps}
            for t in group.topics:
                for p in t.partitions:
                    if p.committed_offset >= 0:
                        out[TopicPartition(t.name, p.partition_index)] = OffsetAndMetadata(
                            p.committed_offset, p.metadata or "", p.committed_leader_epoch)
            return out

    # ================================================================== positions and fetching

    def _owned(self, tp: TopicPartition) -> _Partition:
        part = self.parts.get(tp)
        if part is None:
            raise KafkaError(Errors.INVALID_REQUEST, f"{tp} is not assigned to this consumer")
        return part

    def _add(self, tps) -> None:
        for tp in tps:
            self.parts[tp] = _Partition()
        if tps:
            self._spawn(self._start_fetching(sorted(tps)))

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

    def _drop(self, tps) -> None:
        for tp in tps:
            part = self.parts.pop(tp, None)
            if part is not None:
                part.epoch += 1
                if part.task is not None:
                    part.task.cancel()

    def _seek(self, tp: TopicPartition, offset: int) -> None:
        part = self._owned(tp)
        part.position = part.fetch_offset = offset
        part.buffer.clear()
        part.epoch += 1
        if part.task is not None:
            part.task.cancel()
        part.task = self._spawn(self._fetch_loop(tp, part, part.epoch))

    async def _start_fetching(self, tps) -> None:
        try:
            await self._resolve_positions(tps)
        except NoOffsetForPartitionError as e:
            self.error = e
            self.data.set()
            return
        for tp in tps:
            part = self.parts.get(tp)
            if part is not None and part.task is None:
                part.task = self._spawn(self._fetch_loop(tp, part, part.epoch))

    async def _resolve_positions(self, tps) -> None:
        """Committed offsets first; where there is none, auto_offset_reset."""
        missing = [tp for tp in tps if tp in self.parts and self.parts[tp].position is None]
        if not missing:
            return
        committed = await self._fetch_committed(set(missing)) if self.group_id is not None else {}
        reset = [tp for tp in missing if committed.get(tp) is None]
        policy = self.s["auto_offset_reset"]
        if reset and policy not in ("earliest", "latest"):
            raise NoOffsetForPartitionError(reset)
        timestamp = EARLIEST_TIMESTAMP if policy == "earliest" else LATEST_TIMESTAMP
        offsets = dict(zip(reset, await asyncio.gather(*(self._list_offset(tp, timestamp) for tp in reset))))
        for tp in missing:
            part = self.parts.get(tp)
            if part is not None and part.position is None:
                part.position = part.fetch_offset = committed[tp].offset if committed.get(tp) else offsets[tp]

    async def _list_offset(self, tp: TopicPartition, timestamp: int) -> int:
        isolation = READ_COMMITTED if self.s["isolation_level"] == "read_committed" else READ_UNCOMMITTED
        response = await self._call(naming.partition_leader(*tp), "list_offsets", ListOffsetsRequest(
            tp.topic, tp.partition, timestamp, isolation), timeout_s=self.s["request_timeout_ms"] / 1000)
        if response.error_code:
            raise KafkaError(Errors.for_code(response.error_code), f"list_offsets {tp}")
        return response.offset

    def _buffer_limit(self) -> int:
        return max(self.s["max_poll_records"], 1)

    async def _fetch_loop(self, tp: TopicPartition, part: _Partition, epoch: int) -> None:
        leader = naming.partition_leader(*tp)
        backoff = Backoff(self.s["retry_backoff_ms"])
        while part.epoch == epoch and not self.closed:
            if part.paused or len(part.buffer) >= self._buffer_limit():
                part.space.clear()
                await part.space.wait()
                continue
            committed = self.s["isolation_level"] == "read_committed"
            request = FetchRequest(tp.topic, tp.partition, part.fetch_offset, self.s["max_partition_fetch_bytes"],
                                   self.s["fetch_max_wait_ms"], self.s["fetch_min_bytes"],
                                   READ_COMMITTED if committed else READ_UNCOMMITTED)
            try:
                response = await self._call(leader, "fetch", request,
                                            timeout_s=(self.s["fetch_max_wait_ms"] + self.s["request_timeout_ms"]) / 1000)
            except KafkaError as e:
                log.info("%s: fetch of %s failed: %s", self.client_id, tp, e)
                await asyncio.sleep(backoff.next_s())
                continue
            if part.epoch != epoch:
                return
            if response.error_code == Errors.OFFSET_OUT_OF_RANGE.code:
                policy = self.s["auto_offset_reset"]
                if policy not in ("earliest", "latest"):
                    self.error = NoOffsetForPartitionError([tp])
                    self.data.set()
                    return
                offset = await self._list_offset(tp, EARLIEST_TIMESTAMP if policy == "earliest" else LATEST_TIMESTAMP)
                if part.epoch == epoch:
                    part.position = part.fetch_offset = offset
                continue
            if response.error_code:
                log.info("%s: fetch of %s: %s", self.client_id, tp, Errors.for_code(response.error_code).name)
                await asyncio.sleep(backoff.next_s())
                continue
            backoff.attempts = 0
            added = 0
            # Control batches (transaction markers) and, for read_committed, aborted
            # transactions' batches are skipped, but the fetch offset moves past them.
            delivered = {id(b) for b in (filter_aborted(response.batches, response.aborted_transactions)
                                         if committed else response.batches) if not b.is_control}
            for batch in response.batches:
                if batch.last_offset < part.fetch_offset:
                    continue
                if id(batch) in delivered:
                    for r in decode_entries(batch.records, batch.base_offset):
                        if r.offset >= part.fetch_offset:
                            part.buffer.append(r)
                            added += 1
                part.fetch_offset = batch.last_offset + 1
            if added:
                self.data.set()

    def _drain(self, limit: int) -> dict:
        out: dict[TopicPartition, list] = {}
        order = list(self.parts.items())
        self.next_drain = (self.next_drain + 1) % max(len(order), 1)
        for tp, part in order[self.next_drain:] + order[:self.next_drain]:  # every partition gets its turn
            if limit <= 0:
                break
            if part.paused or not part.buffer:
                continue
            records = []
            while part.buffer and limit > 0:
                r = part.buffer.popleft()
                if r.offset < part.position:
                    continue
                records.append(ConsumerRecord(tp.topic, tp.partition, r.offset, r.timestamp, r.key, r.value,
                                              r.headers))
                part.position = r.offset + 1
                limit -= 1
            part.space.set()
            if records:
                out[tp] = records
        return out
