"""The classic consumer's client actor: the loop that carries the classic member's requests
(JoinGroup, SyncGroup, Heartbeat, LeaveGroup, the leader's metadata lookups) and applies
the steps `runtime.clients.classic.ClassicMember` decides. Fetching, positions and commits
are the shared `ConsumerActorBase`'s.
"""
from __future__ import annotations

import asyncio
import logging
import time

from runtime.clients.classic import Action, ClassicMember, MemberState, Step
from runtime.clients.fetch import NoOffsetForPartitionError
from runtime.errors import KafkaError

from .consumer_base import LOST, REVOKED, ConsumerActorBase

log = logging.getLogger(__name__)

__all__ = ["ConsumerActor"]


class ConsumerActor(ConsumerActorBase):
    def __init__(self, namespace: str, config: dict, client_id: str, group_id: str | None, settings: dict) -> None:
        super().__init__(namespace, config, client_id, group_id, settings)
        self.member = ClassicMember(group_id or "", settings)

    # ================================================================== membership

    @property
    def subscription(self) -> tuple:
        return self.member.subscription

    def _subscribe(self, topics: tuple) -> None:
        self.member.subscribe(topics)

    def _on_poll(self) -> None:
        if self.member.poll_expired:
            self.member.poll_resumed()
            self._wake_group()

    def _in_group(self) -> bool:
        return self.member.state is MemberState.STABLE

    def _commit_request(self, offsets: dict):
        return self.member.offset_commit_request(offsets)

    def _on_commit_response(self, response, request):
        step = self.member.on_commit_response(response, request)
        return step.action, step.error

    async def group_state(self) -> dict:
        """For tests and tools: where this member is in the group."""
        m = self.member
        return {"member_id": m.member_id, "generation": m.generation, "state": m.state.value,
                "protocol": m.protocol, "assignment": sorted(self.positions)}

    # ================================================================== the group loop

    async def _group_loop(self) -> None:
        m = self.member
        coordinator = self.group_coordinator_name(self.group_id)
        backoff = self.s["retry_backoff_ms"] / 1000
        while not self.closed:
            if not m.subscription or m.poll_expired:
                await self._sleep(None)
                continue
            if self._poll_timed_out():
                # Kafka's heartbeat thread leaves for a consumer stuck outside poll; its
                # partitions are lost (the next poll joins again).
                lost, request = m.poll_timer_expired("consumer poll timeout has expired (max_poll_interval_ms)")
                await self._give_up(lost, LOST)
                await self._send_leave(request)
                continue
            try:
                if m.needs_join():
                    step = await self._join_and_sync(coordinator)
                else:
                    started = time.monotonic()
                    step = await self._heartbeat(coordinator)
                    if step.action is Action.NONE:
                        await self._check_metadata()
                        await self._sleep(self.s["heartbeat_interval_ms"] / 1000 - (time.monotonic() - started))
                        continue
            except KafkaError as e:  # the call failed without an answer
                step = m.request_failed(e.error)
            except NoOffsetForPartitionError as e:
                step = Step(Action.FATAL, error=e)
            if step.action is Action.FATAL:
                log.error("%s: leaving the group loop: %s", self.client_id, step.error)
                self.fatal = step.error
                self.data.set()
                return
            if step.action is Action.REDISCOVER:
                self._forget(coordinator)
            if step.action in (Action.RETRY, Action.REDISCOVER):
                await asyncio.sleep(backoff)

    async def _join_and_sync(self, coordinator: str) -> Step:
        """One JoinGroup and SyncGroup round; the step that ended it (NONE once synced)."""
        m = self.member
        await self._apply(m.prepare_join())
        timeout_s = self.rebalance_timeout_ms / 1000 + self.s["request_timeout_ms"] / 1000
        joined = await self._call(coordinator, "join_group", m.join_request(), self.client_id, self.host,
                                  timeout_s=timeout_s)
        step = m.on_join_response(joined)
        if step.action is Action.ASSIGN:
            counts = await self._partition_counts(m.assignment_topics())
            request = m.sync_request(counts, int(time.monotonic() * 1000))
        elif step.action is Action.SYNC:
            request = m.sync_request()
        else:
            return step
        step = m.on_sync_response(await self._call(coordinator, "sync_group", request, timeout_s=timeout_s))
        if step.action is Action.NONE:
            await self._apply(step)
            await self._take(step.assign)  # on_partitions_assigned runs after every sync, even with none
        return step

    async def _apply(self, step: Step) -> None:
        """Give up what the step says, committing first (auto commit)."""
        if step.lose:
            await self._give_up(step.lose, LOST)
        if step.revoke or step.commit:
            await self._revoke(step.revoke, step.commit)

    async def _heartbeat(self, coordinator: str) -> Step:
        request = self.member.heartbeat_request()
        if request is None:
            return Step()
        response = await self._call(coordinator, "heartbeat", request, timeout_s=self.s["session_timeout_ms"] / 1000)
        return self.member.on_heartbeat_response(response, request)

    async def _keep_alive(self) -> None:
        """A heartbeat while the group loop waits for the user, so the session does not
        end meanwhile (Kafka's heartbeat thread goes on during the callbacks)."""
        try:
            await self._heartbeat(self.group_coordinator_name(self.group_id))
        except KafkaError as e:
            log.info("%s: heartbeat while waiting for the user: %s", self.client_id, e)

    async def _check_metadata(self) -> None:
        topics = self.member.metadata_check_due(int(time.monotonic() * 1000))
        if topics is not None:
            self.member.on_metadata(await self._partition_counts(topics))

    # ================================================================== leaving

    async def _leave(self, reason: str) -> None:
        given_up, request = self.member.unsubscribe(reason)
        given_up |= set(self.positions)
        self._drop(given_up)
        self._log(REVOKED, given_up)
        await self._send_leave(request)

    async def _send_leave(self, request) -> None:
        if request is None:
            return
        try:
            await self._call(self.group_coordinator_name(self.group_id), "leave_group", request,
                             timeout_s=self.s["request_timeout_ms"] / 1000)
        except KafkaError as e:
            log.info("%s: leave_group failed: %s", self.client_id, e)
