"""A client harness: classic consumer members (`runtime.clients.classic.ClassicMember`)
driven against the real group coordinator shard, with its manual clock, and no Ray.

It plays the client actor's part: carries each request to the shard, hands the answer back,
and applies the steps (what each member owns), checking after every step that no partition
has two owners.
"""
from __future__ import annotations

from runtime.clients.classic import Action, ClassicMember, MemberState
from runtime.errors import KafkaError
from runtime.group.shard import GroupCoordinatorShard
from runtime.messages.group import HeartbeatResponse, JoinGroupResponse, SyncGroupResponse
from runtime.testing import ShardHarness

G = "g"

SETTINGS = {"session_timeout_ms": 10_000, "rebalance_timeout_ms": 5_000, "max_poll_interval_ms": 300_000,
            "metadata_max_age_ms": 60_000, "group_instance_id": None, "enable_auto_commit": True,
            "partition_assignment_strategy": ("range",)}


class ClassicGroupHarness:
    def __init__(self, tmp_path, topics: dict[str, int]) -> None:
        self.h = ShardHarness(str(tmp_path), GroupCoordinatorShard, config={"group.initial.rebalance.delay.ms": 0})
        self.topics = dict(topics)  # what the leader's metadata lookup answers
        self.owned: dict[str, frozenset] = {}  # what each member's actor owns after its steps
        self.log: list[tuple[str, str, frozenset]] = []  # (member, "revoke" | "lose" | "assign", partitions)
        self._ids = 0

    @property
    def now_ms(self) -> int:
        return self.h.clock.now_ms

    def member(self, **settings) -> ClassicMember:
        return ClassicMember(G, {**SETTINGS, **settings})

    def apply(self, name: str, step) -> None:
        owned = self.owned.get(name, frozenset())
        for kind in ("lose", "revoke"):
            gone = getattr(step, kind)
            if gone:
                assert gone <= owned, (name, kind, gone, owned)
                owned -= gone
                self.log.append((name, kind, gone))
        if step.assign:
            self.owned[name] = owned  # given up before anything is taken
            self._check_no_double_owner()
            owned |= step.assign
            self.log.append((name, "assign", step.assign))
        self.owned[name] = owned
        self._check_no_double_owner()

    def _check_no_double_owner(self) -> None:
        seen: dict = {}
        for name, owned in self.owned.items():
            for tp in owned:
                assert tp not in seen, f"{tp} owned by {seen[tp]} and {name}"
                seen[tp] = name

    def join(self, name: str, m: ClassicMember):
        """Prepare and send a JoinGroup; returns the pending write (answered when the
        rebalance completes)."""
        self.apply(name, m.prepare_join())
        request = m.join_request()
        self._ids += 1
        new_id = f"{name}-{self._ids}"
        return self.h.write(lambda s, now: s.join_group(request, now, new_id, name, "/127.0.0.1"))

    def heartbeat(self, m: ClassicMember):
        """One heartbeat of `m`, its answer handed back; the step it gives."""
        request = m.heartbeat_request()
        try:
            response = self.h.call(lambda s, now: s.heartbeat(request, now))
        except KafkaError as e:  # what the shard host answers for an error
            response = HeartbeatResponse(e.error.code)
        return m.on_heartbeat_response(response, request)

    def rebalance(self, members: dict[str, ClassicMember], rounds: int = 10) -> int:
        """Members join when they need to, and the stable ones heartbeat meanwhile (which is
        how they learn of a rebalance), until every member is stable with nothing left to
        do. Returns the number of rebalances (rounds that ended with a sync) it took."""
        synced = 0
        for _ in range(rounds):
            if not any(m.needs_join() for m in members.values()):
                return synced
            pending: dict = {}
            while True:
                for name, m in members.items():
                    if name not in pending and m.needs_join():
                        pending[name] = self.join(name, m)
                if all(p.done for p in pending.values()):
                    break
                for name, m in members.items():
                    if name not in pending and m.state is MemberState.STABLE and m.heartbeat_request():
                        self.heartbeat(m)
                self.h.advance(100)
            syncs = {}
            for name, p in pending.items():
                m = members[name]
                step = m.on_join_response(_answer(p, JoinGroupResponse))
                if step.action is Action.ASSIGN:
                    request = m.sync_request({t: self.topics[t] for t in m.assignment_topics() if t in self.topics},
                                             self.now_ms)
                elif step.action is Action.SYNC:
                    request = m.sync_request()
                else:
                    continue
                syncs[name] = self.h.write(lambda s, now, r=request: s.sync_group(r, now))
            while any(not p.done for p in syncs.values()):
                self.h.advance(100)
            synced += bool(syncs)
            for name in syncs:
                self.apply(name, members[name].on_sync_response(_answer(syncs[name], SyncGroupResponse)))
        raise AssertionError("the group did not settle")


def _answer(pending, response_type):
    try:
        return pending.result()
    except KafkaError as e:
        return response_type(e.error.code)
