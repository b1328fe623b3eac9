"""The KIP-848 consumer (`group_protocol="consumer"`): Kafka's AsyncKafkaConsumer membership
on the shared consumer actor base.

Fetching, positions and the facade are the base's; the membership manager
(`runtime.clients.membership`) is the one source of truth about the group: it decides what
each ConsumerGroupHeartbeat carries and what to reconcile. This actor sends the heartbeats
at the interval the coordinator returns and applies each reconciliation in Kafka's order:
stop fetching the revoked partitions, commit their offsets (auto commit), run
`on_partitions_revoked` in the user's process, then take the assigned ones
(`on_partitions_assigned`), then acknowledge with the next heartbeat. A fenced member's
partitions are lost (`on_partitions_lost`) and it rejoins with epoch 0. Offset commits
carry the member epoch.
"""
from __future__ import annotations

import asyncio
import logging
import time
import uuid

from runtime.clients.membership import MembershipManager, MemberState, Reconciliation
from runtime.clients.offsets import commit_outcome, offset_commit_request
from runtime.errors import Errors, KafkaError

from .consumer_base import ASSIGNED, LOST, REVOKED, ConsumerActorBase
from ..errors import to_kafka_error
from ..retry import Backoff

log = logging.getLogger(__name__)

__all__ = ["ModernConsumerActor"]

_IN_GROUP = frozenset({MemberState.STABLE, MemberState.RECONCILING, MemberState.ACKNOWLEDGING,
                       MemberState.PREPARE_LEAVING})


class ModernConsumerActor(ConsumerActorBase):
    def __init__(self, namespace: str, config: dict, client_id: str, group_id: str | None, settings: dict) -> None:
        super().__init__(namespace, config, client_id, group_id, settings)
        self.membership = MembershipManager(group_id or "", str(uuid.uuid4()), self.rebalance_timeout_ms,
                                            self.instance_id, server_assignor=settings.get("group_remote_assignor"))

    # ================================================================== membership

    @property
    def subscription(self) -> tuple:
        return self.membership.topics

    def _subscribe(self, topics: tuple) -> None:
        self.membership.subscribe(topics)

    def _on_poll(self) -> None:
        if self.membership.state is MemberState.STALE:
            self.membership.poll_resumed()
            self._wake_group()

    def _in_group(self) -> bool:
        return self.membership.state in _IN_GROUP

    def _commit_request(self, offsets: dict):
        """A commit carries the member epoch while in the group, else -1 (a commit of a
        consumer outside the group)."""
        m = self.membership
        if m.state in _IN_GROUP and m.topics:
            return offset_commit_request(self.group_id, offsets, m.member_epoch, m.member_id, self.instance_id)
        return offset_commit_request(self.group_id, offsets)

    def _on_commit_response(self, response, request):
        """A commit with a stale member epoch is sent again with the current one until the
        request timeout, as Kafka's consumer does; fencing is the heartbeat's business."""
        return commit_outcome(response, member_epoch=True)

    async def group_state(self) -> dict:
        m = self.membership
        return {"member_id": m.member_id, "member_epoch": m.member_epoch, "state": m.state.value,
                "assignment": sorted(self.positions), "heartbeat_interval_ms": m.heartbeat_interval_ms}

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
                response = await self._actors.send(coordinator, "consumer_group_heartbeat", request, self.client_id,
                                                   self.host, timeout_s=self.s["request_timeout_ms"] / 1000)
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
            rec = m.next_reconciliation()
            if rec is not None:
                self._spawn(self._reconcile(rec))

    def _poll_deadline(self) -> float:
        return max(self.last_poll + self.s["max_poll_interval_ms"] / 1000 - time.monotonic(), 0.001)

    async def _after_error(self, error: Errors, backoff: Backoff) -> None:
        m = self.membership
        if m.state is MemberState.FENCED:
            log.info("%s: fenced (%s): its partitions are lost; rejoining", self.client_id, error.name)
            # Lost too: those whose revocation is under way (on_partitions_revoked may not have
            # run or finished), as Kafka's consumer loses all it has not finished giving up.
            await self._give_up(frozenset(self.positions) | self.logged_owned, LOST)
            m.lost_done()
        elif m.state is MemberState.FATAL:
            log.error("%s: leaving the group loop: %s", self.client_id, m.fatal_error)
            self.error = m.fatal_error
            self.data.set()
        else:
            await asyncio.sleep(backoff.next_s())

    # ================================================================== reconciliation

    async def _reconcile(self, rec: Reconciliation) -> None:
        m = self.membership
        if rec.revoked:
            revoked = frozenset(tp for tp in rec.revoked if tp in self.positions)
            offsets = {tp: o for tp, o in self.positions.consumed().items() if tp in revoked}
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
        self._wake_group()  # the acknowledgement goes out at once
        following = m.next_reconciliation()  # the target moved meanwhile
        if following is not None:
            self._spawn(self._reconcile(following))
        await self._emit(ASSIGNED, rec.assigned, force=True)

    # ================================================================== leaving

    async def _leave(self, reason: str) -> None:
        """Revoke (the facade ran the callbacks already) and send the leave heartbeat
        (epoch -1, or -2 for a static member, whose partitions wait for it)."""
        m = self.membership
        m.leave()
        self._drop(set(self.positions))
        self._log(REVOKED, self.logged_owned)
        m.leave_ready()
        request = m.heartbeat_request()
        if request is None:
            return
        try:
            await self._call(self.group_coordinator_name(self.group_id), "consumer_group_heartbeat", request,
                             self.client_id, self.host, timeout_s=self.s["request_timeout_ms"] / 1000)
        except KafkaError as e:  # the session timeout will remove it instead
            log.info("%s: the leave heartbeat (%s) failed: %s", self.client_id, reason, e)
