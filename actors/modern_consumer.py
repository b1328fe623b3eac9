"""The KIP-848 consumer (`group_protocol="consumer"`): Kafka's AsyncKafkaConsumer membership
over the classic consumer's client actor.

Fetching, positions, commits and the facade are the classic consumer's; what differs is
the group loop. The membership manager (`runtime.clients.membership`) decides what each
ConsumerGroupHeartbeat carries and what to reconcile; this actor sends the heartbeats at
the interval the coordinator returns and applies each reconciliation in Kafka's order:
stop fetching the revoked partitions, commit their offsets (auto commit), run
`on_partitions_revoked` in the user's process, then take the assigned ones
(`on_partitions_assigned`), then acknowledge with the next heartbeat. A fenced member's
partitions are lost (`on_partitions_lost`) and it rejoins with epoch 0. Offset commits
carry the member epoch.

Every change of what the actor owns is logged as the classic consumer's is
(`ownership_history()`).
"""
from __future__ import annotations

import asyncio
import logging
import time
import uuid

from runtime.errors import Errors, KafkaError

from .consumer_actor import _STABLE, _UNJOINED, LOST, REVOKED, ASSIGNED, CommitFailedError, ConsumerActor
from .errors import to_kafka_error
from runtime.clients.membership import MembershipManager, MemberState, Reconciliation
from .retry import Backoff

log = logging.getLogger(__name__)

__all__ = ["ModernConsumerActor"]

_IN_GROUP = frozenset({MemberState.STABLE, MemberState.RECONCILING, MemberState.ACKNOWLEDGING,
                       MemberState.PREPARE_LEAVING})


class ModernConsumerActor(ConsumerActor):
    def __init__(self, namespace: str, config: dict, client_id: str, group_id: str | None, settings: dict) -> None:
        super().__init__(namespace, config, client_id, group_id, settings)
        self.membership = MembershipManager(group_id or "", str(uuid.uuid4()), self.rebalance_timeout_ms,
                                            self.instance_id, server_assignor=settings.get("group_remote_assignor"))
        self.member_id = self.membership.member_id

    # ================================================================== the user's calls

    async def subscribe(self, topics, has_listener: bool) -> None:
        await super().subscribe(topics, has_listener)
        self.membership.subscribe(self.subscription)
        self._wake_group()

    async def poll(self, timeout_ms: int, max_records: int | None):
        if self.membership.state is MemberState.STALE:
            self.membership.poll_resumed()
            self._wake_group()
        return await super().poll(timeout_ms, max_records)

    async def group_state(self) -> dict:
        m = self.membership
        return {"member_id": m.member_id, "member_epoch": m.member_epoch, "state": m.state.value,
                "assignment": sorted(self.parts), "heartbeat_interval_ms": m.heartbeat_interval_ms}

    # ================================================================== the heartbeat loop

    async def _group_loop(self) -> None:
        m = self.membership
        coordinator = self.group_coordinator_name(self.group_id)
        backoff = Backoff(self.s["retry_backoff_ms"])
        last_sent = 0.0
        while not self.closed:
            if m.state in _IN_GROUP and self._poll_timed_out():
                # Kafka leaves for a consumer stuck outside poll; its partitions are lost
                await self._give_up(m.poll_timer_expired(), LOST)
            if not m.heartbeat_due_now():
                interval = (m.heartbeat_interval_ms or self.s["heartbeat_interval_ms"]) / 1000
                wait = last_sent + interval - time.monotonic()
                if wait > 0:
                    await self._sleep(min(wait, self._poll_deadline()))
                    continue
            request = m.heartbeat_request()
            if request is None:
                await self._sleep(None)
                continue
            last_sent = time.monotonic()
            try:
                response = await asyncio.wait_for(
                    self._actor(coordinator).consumer_group_heartbeat.remote(request, self.client_id, self.host),
                    self.s["request_timeout_ms"] / 1000)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                # Sent again in full, never as is: the lost one may have changed the member.
                error = to_kafka_error(e) if not isinstance(e, asyncio.TimeoutError) else None
                log.info("%s: heartbeat failed: %s", self.client_id, error or "timed out")
                self._forget(coordinator)
                m.heartbeat_failed()
                await asyncio.sleep(backoff.next_s())
                continue
            m.on_heartbeat_response(response)
            if response.error_code:
                await self._after_error(Errors.for_code(response.error_code), backoff)
                if m.state is MemberState.FATAL:
                    return
                continue
            backoff.attempts = 0
            self._sync_epoch()
            rec = m.next_reconciliation()
            if rec is not None:
                self._spawn(self._reconcile(rec))

    def _poll_deadline(self) -> float:
        return max(self.last_poll + self.s["max_poll_interval_ms"] / 1000 - time.monotonic(), 0.001)

    async def _after_error(self, error: Errors, backoff: Backoff) -> None:
        m = self.membership
        if m.state is MemberState.FENCED:
            log.info("%s: fenced (%s): its partitions are lost; rejoining", self.client_id, error.name)
            self._sync_epoch()
            self._log(LOST, self.logged_owned)  # also those whose revocation is under way
            await self._give_up(frozenset(self.parts), LOST)
            m.lost_done()
        elif m.state is MemberState.FATAL:
            log.error("%s: leaving the group loop: %s", self.client_id, m.fatal_error)
            self.error = m.fatal_error
            self._sync_epoch()
            self.data.set()
        else:
            await asyncio.sleep(backoff.next_s())

    def _sync_epoch(self) -> None:
        """What offset commits carry: the member epoch while in the group, else -1."""
        m = self.membership
        self.member_id = m.member_id
        self.generation = m.member_epoch if m.state in _IN_GROUP else -1
        self.state = _STABLE if m.state in _IN_GROUP else _UNJOINED

    # ================================================================== reconciliation

    async def _reconcile(self, rec: Reconciliation) -> None:
        m = self.membership
        if rec.revoked:
            revoked = rec.revoked & set(self.parts)
            offsets = {tp: o for tp, o in self._consumed().items() if tp in revoked}
            self._drop(revoked)  # no fetch, no poll hands them out any more
            if self.s["enable_auto_commit"] and offsets:
                await self._commit_quietly(offsets)
            if not m.is_current(rec):
                self._log(LOST, revoked)  # fenced meanwhile
                return
            await self._emit(REVOKED, revoked)
            self._log(REVOKED, revoked)
            m.revocation_done(rec)
        if not m.is_current(rec):
            return
        self._log(ASSIGNED, rec.assigned)
        self._add(rec.assigned)
        m.reconciliation_done(rec)
        self._sync_epoch()
        self._wake_group()  # the acknowledgement goes out at once
        following = m.next_reconciliation()  # the target moved meanwhile
        if following is not None:
            self._spawn(self._reconcile(following))
        await self._emit(ASSIGNED, rec.assigned, force=True)

    async def _give_up(self, partitions, kind: str) -> None:
        self._drop(partitions)
        self._log(kind, partitions)
        await self._emit(kind, partitions)

    # ================================================================== leaving and offsets

    async def _leave(self, reason: str) -> None:
        """Revoke (the facade ran the callbacks already) and send the leave heartbeat
        (epoch -1, or -2 for a static member, whose partitions wait for it)."""
        m = self.membership
        m.leave()
        self._drop(set(self.parts))
        self._log(REVOKED, self.logged_owned)
        m.leave_ready()
        request = m.heartbeat_request()
        self._sync_epoch()
        if request is None:
            return
        try:
            await self._call(self.group_coordinator_name(self.group_id), "consumer_group_heartbeat", request,
                             self.client_id, self.host, timeout_s=self.s["request_timeout_ms"] / 1000)
        except KafkaError as e:  # the session timeout will remove it instead
            log.info("%s: the leave heartbeat (%s) failed: %s", self.client_id, reason, e)

    def _member_error(self, code: int) -> bool:
        # A failed commit says nothing the heartbeat will not say: fencing is its business.
        return code != 0

    async def _commit(self, offsets: dict) -> None:
        """A commit with a stale member epoch is sent again with the current one until the
        request timeout, as Kafka's consumer does."""
        deadline = time.monotonic() + self.s["request_timeout_ms"] / 1000
        backoff = Backoff(self.s["retry_backoff_ms"])
        while True:
            try:
                return await super()._commit(offsets)
            except KafkaError as e:
                if e.error is not Errors.STALE_MEMBER_EPOCH or time.monotonic() > deadline:
                    if e.error is Errors.STALE_MEMBER_EPOCH:
                        raise CommitFailedError(e.error, "the commit failed: the member epoch is stale") from e
                    raise
            await asyncio.sleep(backoff.next_s())
