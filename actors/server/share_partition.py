"""The SharePartition actor: one share group on one topic partition (KIP-932's SharePartition
with its DelayedShareFetch purgatory), named `naming.share_partition(group, topic, partition)`.

The decisions are `runtime.share.partition.SharePartition`'s; this shell does the I/O around
them. It loads the state from the share coordinator (which the group coordinator initialised
before assigning the partition), reading with a leader epoch above the last recorded one so
a stale twin is fenced. It reads record data from the partition leader in whole batches, and
sends every state change to the share coordinator before it answers: the change is committed
in memory when the write succeeds and rolled back when it fails. Every such change goes
through one door, `_change`, which begins it in the core and sends and settles its write. Acquisition is not persisted (as in Kafka), so after a
restart whatever was held is available again. Lock expiry runs on a timer task of its own;
as in Kafka it releases the records at once, whatever becomes of its write; a failed one rides
along with the next write, and the timer writes it on its own when none comes.

A write, once begun, is always settled: a caller that gives up (its call cancelled) does not
stop it. Records acquired for an answer that will not leave (the caller gave up while the
fetch's acknowledgements were written) are given back at once.

An idle actor goes away: after `group.share.partition.idle.ms` with no call and no record
acquired (so every change is already with the share coordinator), it exits. The controller
creates it again for the next ShareFetch, and it loads the state as after a restart.
"""
from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import replace
from typing import Callable

import ray

from runtime.errors import Errors, KafkaError
from runtime.messages.share import (AcknowledgementBatch, AcknowledgeType, ShareAcknowledgeRequest,
                                    ShareAcknowledgeResponse, ShareAcknowledgeResponsePartition,
                                    ShareAcknowledgeTopicResponse,
                                    ShareFetchableTopicResponse, ShareFetchRequest, ShareFetchResponse,
                                    ShareFetchResponsePartition)
from runtime.messages.share_state import (ReadShareGroupStateSummaryRequest, ReadStateSummaryData,
                                          ReadStateSummaryPartitionData)
from runtime.messages.share_group import DescribeGroupConfigRequest, ShareGroupDescribeRequest
from runtime.messages.topics import READ_COMMITTED, READ_UNCOMMITTED, ListOffsetsRequest
from runtime.share.members import ShareMembers
from runtime.share.partition import PendingShareWrite, SharePartition, SharePartitionState
from runtime.share.reads import LeaderRead, acquire_from_read, read_request, readable_end

from .. import metrics, naming
from ..config import DEFAULTS
from .idle import IdleExpiry
from ..placement import current_node
from ..retry import ActorDirectory, Backoff
from .shard_host import now_ms

log = logging.getLogger(__name__)

__all__ = ["SharePartitionActor", "DEFAULT_MAX_RECORDS"]

DEFAULT_MAX_RECORDS = 500  # a ShareFetch without max_records gets the consumer's max.poll.records
# How long a state write keeps trying while the share coordinator is restarting.
WRITE_TIMEOUT_S = 30.0
# The longest single long poll on the partition leader; a longer wait chains several.
LEADER_POLL_MAX_MS = 5000
# How soon failed lock-expiry writes are written again on their own, doubling up to the max.
REWRITE_BACKOFF_MS = 500
REWRITE_BACKOFF_MAX_MS = 5000
# How long an ended poll's id is remembered: longer than a fetch can take to arrive.
ENDED_POLL_MEMORY_S = 60.0


class SharePartitionActor:
    def __init__(self, namespace: str, group_id: str, topic: str, topic_id: str, partition: int,
                 config: dict) -> None:
        self.namespace = namespace
        self.group_id = group_id
        self.topic = topic
        self.topic_id = topic_id
        self.partition = partition
        self.config = dict(config)
        self._base_config: dict | None = None  # the cluster's config, under the group's own
        self._group_configs: dict = {}
        self._coordinator = naming.find_coordinator(
            naming.CoordinatorType.SHARE, naming.share_coordinator_key(group_id, topic_id, partition), config)
        self._leader = naming.partition_host_of(topic, partition, config)  # reads go through its host
        self._group_coordinator = naming.find_coordinator(naming.CoordinatorType.GROUP, group_id, config)
        # The group's members, as the group coordinator last listed them; kept across reloads.
        self._members = ShareMembers(group_id)
        self._listing: asyncio.Task | None = None
        self._actors = ActorDirectory(namespace)
        self._sp: SharePartition | None = None
        self._loading: asyncio.Task | None = None
        self._changed: asyncio.Event | None = None  # replaced at each change; wakes long polls
        self._timer_wake: asyncio.Event | None = None
        self._timer: asyncio.Task | None = None
        self._watcher: asyncio.Task | None = None
        # The records the watcher's long poll brought: (read, answer), taken by the next fetch
        # that reads from that offset instead of asking the leader again.
        self._watched: tuple | None = None
        self._reading = False  # a leader read for acquisition is under way
        # Waits their caller ended early (end_poll): poll id -> when, kept a while in case
        # the fetch comes after its end.
        self._ended_polls: dict[str, float] = {}
        self._high_watermark = -1  # of the last leader read; -1 before the first
        self._tasks: set[asyncio.Task] = set()
        # When to write failed lock expiries on their own (no other write carried them).
        self._rewrite_at: int | None = None
        self._rewrites = Backoff(REWRITE_BACKOFF_MS, REWRITE_BACKOFF_MAX_MS)
        self.metrics_name = f"{group_id}/{topic}-{partition}"  # the metrics' coordinator tag
        self._idle = IdleExpiry(int(config.get("group.share.partition.idle.ms",
                                               DEFAULTS["group.share.partition.idle.ms"])), self._busy, self._exit_idle)

    # ------------------------------------------------------------------ calling other actors

    async def _call(self, name: str, method: str, request, timeout_s: float = WRITE_TIMEOUT_S,
                    per_partition: bool = False):
        """`per_partition`: the coordinator errors (restarting, loading) of the partition or
        group the call is for are retried like actor death."""
        return await self._actors.call_async(name, method, request, timeout_s=timeout_s, per_partition=per_partition)

    async def _coordinator_call(self, method: str, request):
        """One share coordinator call for this share partition; its partition result."""
        response = await self._call(self._coordinator, method, request, per_partition=True)
        return response.results[0].partitions[0]

    # ------------------------------------------------------------------ loading

    async def ready(self) -> dict:
        await self._active()
        return await self.status()

    # ------------------------------------------------------------------ idle expiry

    def _busy(self) -> bool:
        """Work under way besides calls, or records acquired: not all the state is with the
        share coordinator yet."""
        sp = self._sp
        return bool(self._tasks or self._reading
                    or (self._loading is not None and not self._loading.done())
                    or (self._watcher is not None and not self._watcher.done())
                    or (sp is not None and (sp.next_deadline() is not None or sp.owes_writes)))

    def _exit_idle(self) -> None:
        """Exit, writing nothing: the state is durable already, and acquisitions are not
        persisted. The actor kills itself (never restarted) rather than calling exit_actor: Ray keeps the
        name of an actor that exited while its owner holds a handle, and the name must be
        free for the next one."""
        log.info("%s: idle for %d ms, exiting", naming.share_partition(self.group_id, self.topic, self.partition),
                 self._idle.idle_ms)
        ray.kill(ray.get_runtime_context().current_actor, no_restart=True)

    async def status(self) -> dict:
        import os
        sp = self._sp
        return {"name": naming.share_partition(self.group_id, self.topic, self.partition),
                "state": sp.state.value if sp else "Loading", "pid": os.getpid(),
                "topic_id": self.topic_id, "leader_epoch": sp.leader_epoch if sp else None,
                "node_id": current_node()}

    async def _active(self) -> SharePartition:
        """The loaded share partition; loads (again) when there is none or it was fenced."""
        sp = self._sp
        if sp is not None and sp.state is SharePartitionState.ACTIVE:
            return sp
        if self._loading is None or self._loading.done():
            self._sp = None
            self._loading = asyncio.get_running_loop().create_task(self._load())
        await asyncio.shield(self._loading)
        return self._sp

    async def _load(self) -> None:
        await self._read_group_configs()
        summary = await self._coordinator_call("read_share_group_state_summary", ReadShareGroupStateSummaryRequest(
            self.group_id, (ReadStateSummaryData(self.topic_id, (ReadStateSummaryPartitionData(self.partition, 0),)),)))
        _raise_for(summary)
        # The group coordinator initialises the state before it assigns the partition; a
        # read before that fails (INVALID_REQUEST) and the next fetch loads again.
        sp = SharePartition(self.group_id, self.topic_id, self.partition, self.config,
                            leader_epoch=summary.leader_epoch + 1)
        read = await self._coordinator_call("read_share_group_state", sp.read_request())
        reset_offset = None
        if read.error_code == 0 and read.start_offset == -1:
            reset_offset = await self._reset_offset(sp)
        sp.initialize(read, now_ms(), reset_offset)
        if self._changed is None:
            self._changed = asyncio.Event()
            self._timer_wake = asyncio.Event()
            self._timer = asyncio.get_running_loop().create_task(self._timer_loop())
        self._sp = sp
        self._high_watermark = -1
        self._watched = None
        self._notify()

    async def _reset_offset(self, sp: SharePartition) -> int:
        isolation = READ_COMMITTED if sp.read_committed else READ_UNCOMMITTED
        response = await self._call(self._leader, "list_offsets", ListOffsetsRequest(
            self.topic, self.partition, sp.reset_timestamp(now_ms()), isolation))
        _raise_for(response)
        if response.offset >= 0:
            return response.offset
        # No record at or after the timestamp: start at the end, as Kafka's by_duration does.
        latest = await self._call(self._leader, "list_offsets", ListOffsetsRequest(
            self.topic, self.partition, -1, isolation))
        _raise_for(latest)
        return latest.offset

    async def reload_state(self, state_epoch: int) -> None:
        """The group coordinator started the share group's state here over under
        `state_epoch` (an offset alter, with the group empty): load it, unless this state is
        that new already. An actor going away idle loads nothing: its successor will."""
        if self._idle.exiting:
            return
        with self._idle.call():
            if self._loading is not None and not self._loading.done():
                await asyncio.gather(asyncio.shield(self._loading), return_exceptions=True)
            if self._sp is not None and self._sp.state_epoch < state_epoch:
                self._sp = None  # _active loads again
            await self._active()

    async def update_config(self, configs: dict) -> None:
        """The group's dynamic share.* configs changed (or are known for the first time);
        None removes the group's value, so the cluster's applies again."""
        if self._base_config is None:
            self._base_config = dict(self.config)
        self._group_configs.update(configs)
        effective = {**self._base_config, **{k: v for k, v in self._group_configs.items() if v is not None}}
        for target in (self.config, self._sp.config if self._sp is not None else None):
            if target is not None:
                target.clear()
                target.update(effective)

    async def _read_group_configs(self) -> None:
        """The group's dynamic configs, from its group coordinator (later changes are pushed)."""
        response = await self._call(self._group_coordinator, "describe_group_config",
                                    DescribeGroupConfigRequest(self.group_id))
        if response.error_code == 0:
            await self.update_config({e.name: None if e.is_default else e.value
                                      for e in response.configs if e.name.startswith("share.")})

    # ------------------------------------------------------------------ writes

    async def _persist(self, pending: PendingShareWrite) -> KafkaError | None:
        """Send a begun change to the share coordinator; commit or roll back by its answer."""
        sp = pending._owner
        if not pending.state_batches:
            sp.commit(pending)  # nothing to store (a RENEW only restarted locks)
            self._kick_timer()
            return None
        try:
            result = await self._coordinator_call("write_share_group_state", pending.request())
            code, message = result.error_code, result.error_message
        except KafkaError as e:
            code, message = e.code, e.message
        error = sp.complete_write(pending, code, message)
        if error is not None:
            log.warning("%s: state write failed: %s", naming.share_partition(self.group_id, self.topic,
                                                                            self.partition), error)
        if not sp.owes_writes:
            self._rewrite_at, self._rewrites = None, Backoff(REWRITE_BACKOFF_MS, REWRITE_BACKOFF_MAX_MS)
        elif error is not None and self._rewrite_at is None:
            # Failed lock expiries ride along with the next write; with none coming, the timer
            # writes them on their own.
            self._rewrite_at = now_ms() + self._rewrites.next_s() * 1000
        self._notify()
        self._kick_timer()
        return error

    def _change(self, sp: SharePartition, change: Callable[[SharePartition, int], PendingShareWrite | None]
                ) -> asyncio.Task | None:
        """The one way a durable change reaches runtime.share: `change(sp, now_ms)` makes it in
        memory (or raises, changing nothing) and returns the write it began; that write goes to
        the share coordinator in a task of its own, which settles it (commit or roll back)
        whatever becomes of the caller, who awaits the task (shielded) for its error if it
        needs to. Waiting fetches and the lock timer hear of a change at once."""
        pending = change(sp, now_ms())
        if pending is None:
            return None
        self._notify()
        self._kick_timer()
        return self._spawn(self._persist(pending))

    async def _settled(self, write: asyncio.Task | None) -> KafkaError | None:
        """The error of a write `_change` began, once it is settled; a caller that gives up
        leaves it going."""
        return None if write is None else await asyncio.shield(write)

    def _give_back(self, got: LeaderRead) -> None:
        """The answer that would have handed these records out will not leave: they are
        available again at once, rather than when their lock runs out with a delivery spent."""
        sp = self._sp
        if got.acquired and sp is not None and sp.state is SharePartitionState.ACTIVE:
            self._change(sp, lambda sp, now: sp.release_acquisition(got.acquisition_id))

    def _notify(self) -> None:
        if self._changed is not None:
            self._changed.set()
            self._changed = asyncio.Event()
        if self._sp is not None:
            metrics.registry.set("shoal_share_in_flight_records", self._sp.in_flight_records,
                                 coordinator=self.metrics_name)

    def _kick_timer(self) -> None:
        if self._timer_wake is not None:
            self._timer_wake.set()

    async def _timer_loop(self) -> None:
        """Acquisition lock expiry: records whose lock ran out go back (or are archived); and
        lock expiries whose write failed are written again."""
        while True:
            sp = self._sp
            deadlines = [d for d in (sp.next_deadline() if sp is not None else None, self._rewrite_at)
                         if d is not None]
            timeout = max(0.0, (min(deadlines) - now_ms()) / 1000) if deadlines else None
            try:
                await asyncio.wait_for(self._timer_wake.wait(), timeout)
            except asyncio.TimeoutError:
                pass
            self._timer_wake.clear()
            if sp is not None and sp is self._sp:
                self._change(sp, self._expire)  # the records are free now, not once the write is done
                if self._rewrite_at is not None and now_ms() >= self._rewrite_at:
                    self._rewrite_at = None
                    self._change(sp, lambda sp, now: sp.unwritten_write())

    def _expire(self, sp: SharePartition, now: int) -> PendingShareWrite | None:
        pending = sp.expire(now)
        if pending is not None:
            metrics.registry.inc("shoal_share_acquisition_lock_timeout_count",
                                 sum(b.last_offset - b.first_offset + 1 for b in pending.state_batches),
                                 coordinator=self.metrics_name)
        return pending

    def _spawn(self, coroutine) -> asyncio.Task:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # ------------------------------------------------------------------ membership

    async def _admit(self, member_id: str) -> None:
        """Return once the share group is known to have member_id; raise UNKNOWN_MEMBER_ID
        when it has not. No call while the cached listing answers; otherwise one listing of
        the members, shared by every request that waits for it (runtime.share.members)."""
        members = self._members
        ticket = members.ticket()
        while not members.admitted(member_id, now_ms(), ticket):
            if not members.listing:
                members.begin_listing()
                self._listing = asyncio.get_running_loop().create_task(self._list_members())
            await asyncio.shield(self._listing)

    async def _list_members(self) -> None:
        """One ShareGroupDescribe of the group for its member ids; a restarting group
        coordinator is waited for, as a restarting share coordinator is for a write."""
        try:
            response = await self._call(self._group_coordinator, "share_group_describe",
                                        ShareGroupDescribeRequest((self.group_id,)), per_partition=True)
            (group,) = response.groups
            error = Errors.for_code(group.error_code)
            if error not in (Errors.NONE, Errors.GROUP_ID_NOT_FOUND):  # no group: no members
                raise KafkaError(error, group.error_message)
        except BaseException:
            self._members.listing_failed()
            raise
        self._members.listed((m.member_id for m in group.members), now_ms(),
                             {m.member_id: m.member_epoch for m in group.members})

    # ------------------------------------------------------------------ acknowledging

    async def _begin_acknowledge(self, member_id: str, batches) -> asyncio.Task | None | KafkaError:
        """The acknowledgements applied in memory and their write under way (or why not)."""
        sp = await self._active()
        self._members.raise_unless_member(member_id)  # released while the load was awaited
        batches = tuple(_ack_batch(b) for b in batches)
        try:
            return self._change(sp, lambda sp, now: sp.acknowledge(member_id, batches, now))
        except KafkaError as e:
            return e

    async def _acknowledge(self, member_id: str, batches) -> KafkaError | None:
        begun = await self._begin_acknowledge(member_id, batches)
        return begun if isinstance(begun, KafkaError) else await self._settled(begun)

    async def share_acknowledge(self, request: ShareAcknowledgeRequest) -> ShareAcknowledgeResponse:
        if self._my_partition(request.topics) is None:
            return _refused(ShareAcknowledgeResponse, self._not_mine())
        with self._idle.call():
            return await self._share_acknowledge(request)

    async def _share_acknowledge(self, request: ShareAcknowledgeRequest) -> ShareAcknowledgeResponse:
        part = self._my_partition(request.topics)
        error = None
        try:
            await self._admit(request.member_id)
            if part is not None and part.acknowledgement_batches:
                error = await self._acknowledge(request.member_id, part.acknowledgement_batches)
            sp = self._sp
            lock_ms = sp.record_lock_duration_ms if sp else 0
        except KafkaError as e:
            if e.error is Errors.UNKNOWN_MEMBER_ID:
                return _refused(ShareAcknowledgeResponse, e)
            error, lock_ms = e, 0
        result = ShareAcknowledgeResponsePartition(self.partition, error.code if error else 0,
                                                   error.message if error else None)
        return ShareAcknowledgeResponse(acquisition_lock_timeout_ms=lock_ms,
                                        responses=(ShareAcknowledgeTopicResponse(self.topic_id, (result,)),))

    async def release_member(self, member_id: str, member_epoch: int | None = None) -> int:
        """The member left or was fenced (at `member_epoch`, if given): what it holds is
        available again, and its later requests are refused until the group has it again. What
        the same member id acquired at a newer epoch (it joined again meanwhile) stays held.
        The error code."""
        self._members.release(member_id, member_epoch)
        return await self.release_session(member_id, member_epoch)

    async def release_session(self, member_id: str, member_epoch: int | None = None) -> int:
        """The member's share session ended (closed, replaced, or its connection gone), the
        member still in the group: what it holds is available again, as Kafka releases a
        closed session's records. The error code."""
        if self._idle.exiting:
            return Errors.COORDINATOR_NOT_AVAILABLE.code
        with self._idle.call():
            try:
                sp = await self._active()
                error = await self._settled(
                    self._change(sp, lambda sp, now: sp.release_member(member_id, now, member_epoch)))
            except KafkaError as e:
                error = e
        return error.code if error else 0

    # ------------------------------------------------------------------ fetching

    def _my_partition(self, topics):
        for t in topics:
            if t.topic_id == self.topic_id:
                for p in t.partitions:
                    if p.partition_index == self.partition:
                        return p
        return None

    def _not_mine(self) -> KafkaError:
        """A request for another topic of this name: one deleted and made again, this actor
        being the old topic's or the caller knowing the old id (the name is the topic's)."""
        return KafkaError(Errors.UNKNOWN_TOPIC_ID, f"{self.topic}-{self.partition}'s SharePartition is of topic id "
                                                   f"{self.topic_id}")

    async def share_fetch(self, request: ShareFetchRequest) -> ShareFetchResponse:
        """Acknowledge what the request carries, then acquire records for the member: at once
        if there are any, else when some arrive or come back, until max_wait_ms. A member the
        share group does not have is refused as a whole (UNKNOWN_MEMBER_ID), before anything
        is acknowledged or acquired; one released while its fetch waited gets it per partition."""
        if self._my_partition(request.topics) is None:
            return _refused(ShareFetchResponse, self._not_mine())
        with self._idle.call():
            return await self._share_fetch(request)

    async def _share_fetch(self, request: ShareFetchRequest) -> ShareFetchResponse:
        deadline = time.monotonic() + max(request.max_wait_ms, 0) / 1000
        part = self._my_partition(request.topics)
        ack_error = error = None
        got, lock_ms = LeaderRead(), 0
        acknowledged = False
        write = None
        try:
            await self._admit(request.member_id)
            if part is not None and part.acknowledgement_batches:
                begun = await self._begin_acknowledge(request.member_id, part.acknowledgement_batches)
                if isinstance(begun, KafkaError):
                    ack_error = begun
                elif _frees_records(part.acknowledgement_batches):
                    # Released records may go out again in this very fetch once committed.
                    ack_error = await self._settled(begun)
                else:
                    # Accepted, rejected and gap records never go out again, so the leader
                    # read need not wait for their write (Kafka runs the two side by side).
                    write = begun
            acknowledged = True
            try:
                got = await self._acquire(request, deadline)
            finally:
                if write is not None:
                    try:
                        ack_error = await self._settled(write)
                    except asyncio.CancelledError:
                        self._give_back(got)  # acquired while the write went on
                        raise
            sp = self._sp
            lock_ms = sp.record_lock_duration_ms if sp is not None else 0
        except KafkaError as e:
            if e.error is Errors.UNKNOWN_MEMBER_ID and not acknowledged:
                return _refused(ShareFetchResponse, e)
            error = e
        # The lock began when the records were acquired, maybe long before this answer (a slow
        # write of the acknowledgements the fetch carried): the answer says what is left of it.
        remaining = -1 if got.lock_deadline_ms is None else max(got.lock_deadline_ms - now_ms(), 0)
        result = ShareFetchResponsePartition(
            self.partition, error.code if error else 0, error.message if error else None,
            ack_error.code if ack_error else 0, ack_error.message if ack_error else None,
            records=got.batches, acquired_records=got.acquired, acquisition_id=got.acquisition_id,
            lock_remaining_ms=remaining)
        return ShareFetchResponse(acquisition_lock_timeout_ms=lock_ms,
                                  responses=(ShareFetchableTopicResponse(self.topic_id, (result,)),))

    async def end_poll(self, poll_id: str) -> None:
        """The caller of the fetch waiting under `poll_id` has what it waited for elsewhere:
        the fetch answers now, with whatever it acquired (an answer is never dropped, as a
        cancelled call's would be). A fetch that has not come yet will not wait."""
        now = time.monotonic()
        self._ended_polls = {p: t for p, t in self._ended_polls.items() if now - t < ENDED_POLL_MEMORY_S}
        self._ended_polls[poll_id] = now
        self._notify()

    async def _acquire(self, request: ShareFetchRequest, deadline: float) -> LeaderRead:
        max_records = request.max_records or DEFAULT_MAX_RECORDS
        if request.poll_id in self._ended_polls:
            deadline = time.monotonic()  # ended before it came: look once, do not wait
        while True:
            sp = await self._active()
            changed = self._changed
            offset = sp.next_fetch_offset()
            if (not self._reading and sp.can_acquire_records()
                    and (self._high_watermark < 0 or offset < self._high_watermark)):
                # One leader read at a time: concurrent fetchers would read the same records
                # and all but one would find them taken. The others wait for its notify.
                self._reading = True
                try:
                    got = await self._read_and_acquire(sp, request, offset, max_records, deadline)
                finally:
                    self._reading = False
                    self._notify()
                if got is not None:
                    return got
                if sp.next_fetch_offset() != offset and time.monotonic() < deadline:
                    continue  # another fetcher moved on; look again
            remaining = deadline - time.monotonic()
            if remaining <= 0 or request.poll_id in self._ended_polls:
                return LeaderRead()
            if self._high_watermark >= 0 and (self._watcher is None or self._watcher.done()):
                self._watcher = asyncio.get_running_loop().create_task(
                    self._watch_leader(sp, remaining, request.max_bytes, max_records))
            try:
                await asyncio.wait_for(changed.wait(), remaining)
            except asyncio.TimeoutError:
                return LeaderRead()

    async def _read_and_acquire(self, sp: SharePartition, request: ShareFetchRequest, offset: int,
                                max_records: int, deadline: float) -> LeaderRead | None:
        """One leader read for the member (or the watcher's, when it read from the same
        offset); what it means is runtime.share.reads'."""
        read = read_request(sp, self.topic, self.partition, request.max_bytes, max_records)
        watched, self._watched = self._watched, None
        if watched is not None and (watched[0].fetch_offset, watched[0].isolation_level) == (
                read.fetch_offset, read.isolation_level):
            read, response = watched
        else:
            response = await self._call(self._leader, "fetch", read)
            if sp is not self._sp:
                return None  # reloaded meanwhile
        if response.error_code == 0:
            # Released while the read was under way, or the request is from before a fence.
            self._members.raise_unless_member(request.member_id, request.member_epoch)
        got = acquire_from_read(sp, request.member_id, read, response, min_bytes=request.min_bytes,
                                waiting=time.monotonic() < deadline, max_records=max_records,
                                batch_size=request.batch_size or None,
                                share_acquire_mode=request.share_acquire_mode, now_ms=now_ms(),
                                member_epoch=self._members.epoch_of(request.member_id, request.member_epoch))
        if got.end is not None:
            self._high_watermark = got.end
        if not got.acquired:
            return None
        self._kick_timer()
        return got

    async def _watch_leader(self, sp: SharePartition, wait_s: float, max_bytes: int, max_records: int) -> None:
        """One long poll on the leader past the known high watermark (last stable offset under
        read_committed), shared by every waiting fetch: when data arrives, they look again, and
        the first to read from there takes the records this poll brought (one leader call per
        delivery rather than two)."""
        watch = replace(read_request(sp, self.topic, self.partition, max_bytes, max_records),
                        fetch_offset=self._high_watermark, max_wait_ms=int(min(wait_s * 1000, LEADER_POLL_MAX_MS)))
        try:
            response = await self._call(self._leader, "fetch", watch, timeout_s=wait_s + 30)
            if response.error_code:
                self._high_watermark = -1  # read again from the next fetch offset
            elif response.batches:
                self._high_watermark = readable_end(watch, response)
                if sp is self._sp:  # not reloaded meanwhile (a load drops what was watched)
                    self._watched = (watch, response)
        except KafkaError:
            self._high_watermark = -1
        self._notify()

    # ------------------------------------------------------------------ inspection

    async def metrics_snapshot(self) -> list[dict]:
        """The values this actor's process gave Ray's metrics."""
        return metrics.registry.snapshot()

    async def acquisitions(self) -> dict:
        """{offset: acquisition id} of the acquired records: the delivery an acknowledgement
        of each must name (for tests and tools; a consumer has it from its fetch)."""
        sp = await self._active()
        return {o: sp.acquisition_of(o) for o, (s, _, _, _) in sp.record_states().items() if s.name == "ACQUIRED"}

    async def record_states(self) -> dict:
        """{offset: (state name, delivery count, holder)} of the cached records, with the
        start offset under key "start_offset" (for tests and tools)."""
        sp = await self._active()
        out: dict = {o: (s.name, n, m) for o, (s, n, m, _) in sp.record_states().items()}
        out["start_offset"] = sp.start_offset
        return out


def _ack_batch(b) -> AcknowledgementBatch:
    return b if isinstance(b, AcknowledgementBatch) else AcknowledgementBatch(*b)


def _frees_records(batches) -> bool:
    return any(t == AcknowledgeType.RELEASE for b in batches for t in _ack_batch(b).acknowledge_types)


def _refused(response_cls, error: KafkaError):
    """A request refused as a whole, with a top-level error and no partitions, as Kafka
    answers a share session error."""
    return response_cls(error_code=error.code, error_message=error.message)


def _raise_for(result) -> None:
    if result.error_code:
        raise KafkaError(Errors.for_code(result.error_code), getattr(result, "error_message", None))


# Every RPC counts and times itself (share fetches and acknowledgements among them).
metrics.instrument_rpcs(SharePartitionActor, lambda actor: actor.metrics_name)
