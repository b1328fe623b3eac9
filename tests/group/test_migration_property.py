"""Online migration under random histories: a classic group of the consumer protocol is
upgraded by the first client of the consumer protocol, then clients of both protocols join,
leave, crash and rejoin while the coordinator restarts from its log. Classic clients follow
the classic consumer's rules inside the consumer group (JoinGroup, SyncGroup, Heartbeat,
revoking everything before a join when eager, only what moved when cooperative).

Checked after every step: the coordinator never gives a partition two owners, and no two
clients that follow the protocol believe they hold the same partition. Once everyone
behaves, every partition ends up owned. The history ends where the group goes back to a
classic group (only clients of the classic protocol left), which must then be rebalancing
with them.
"""
from __future__ import annotations

import tempfile

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime.errors import Errors, KafkaError
from runtime.group.consumer_protocol import decode_assignment, encode_assignment, encode_subscription
from runtime.group.shard import GroupCoordinatorShard
from runtime.messages.consumer import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatRequestTopicPartitions
from runtime.messages.group import (
    HeartbeatRequest, JoinGroupRequest, JoinGroupRequestProtocol, LeaveGroupRequest, MemberIdentity,
    SyncGroupRequest,
)
from runtime.testing import ShardHarness

from .helpers import stable_group

G = "g"
SESSION_MS = 6_000
REBALANCE_MS = 3_000
TICK_MS = 500
TOPICS = {"t": 6}
ALL = {("t", p) for p in range(6)}


class ConsumerClient:
    """A client of the consumer protocol that revokes as soon as it is told to."""
    classic = False

    def __init__(self, member_id: str) -> None:
        self.member_id = member_id
        self.epoch = 0
        self.owned: set = set()

    def step(self, h: ShardHarness) -> None:
        owned = tuple(ConsumerGroupHeartbeatRequestTopicPartitions("t", tuple(sorted(p for _, p in self.owned)))
                      for _ in [0] if self.owned)
        if self.epoch == 0:
            request = ConsumerGroupHeartbeatRequest(G, self.member_id, 0, rebalance_timeout_ms=REBALANCE_MS,
                                                    subscribed_topic_names=("t",), topic_partitions=())
        else:
            request = ConsumerGroupHeartbeatRequest(G, self.member_id, self.epoch, topic_partitions=owned)
        try:
            response = h.call(lambda s, now: s.consumer_group_heartbeat(request, now, self.member_id))
        except KafkaError as e:
            assert e.error in (Errors.FENCED_MEMBER_EPOCH, Errors.UNKNOWN_MEMBER_ID, Errors.GROUP_ID_NOT_FOUND), e
            self.owned, self.epoch = set(), 0
            return
        self.epoch = response.member_epoch
        if response.assignment is not None:
            self.owned = {(tp.topic_name, p) for tp in response.assignment.topic_partitions for p in tp.partitions}

    def leave(self, h: ShardHarness) -> None:
        self.owned = set()
        request = ConsumerGroupHeartbeatRequest(G, self.member_id, -1)
        try:
            h.call(lambda s, now: s.consumer_group_heartbeat(request, now, self.member_id))
        except KafkaError as e:
            assert e.error in (Errors.UNKNOWN_MEMBER_ID, Errors.GROUP_ID_NOT_FOUND), e


class ClassicClient:
    """A classic consumer: eager ones report their previous assignment as owned (as shoal's
    does) but hold nothing while they join; cooperative ones report and keep what they hold."""
    classic = True

    def __init__(self, member_id: str, cooperative: bool, owned=(), generation: int = -1) -> None:
        self.member_id = member_id
        self.cooperative = cooperative
        self.owned: set = set(owned)
        self.last_assignment: set = set(owned)
        self.generation = generation
        self.need_join = generation < 0
        self.unknown = False  # told UNKNOWN_MEMBER_ID: it joins again without a member id, as Kafka's clients do

    def protocols(self) -> tuple:
        claimed = self.owned if self.cooperative else self.last_assignment
        metadata = encode_subscription(["t"], None, (("t", tuple(sorted(p for _, p in claimed))),) if claimed else ())
        names = ("cooperative-sticky", "range") if self.cooperative else ("range", "cooperative-sticky")
        return tuple(JoinGroupRequestProtocol(name, metadata) for name in names)

    def lose(self) -> None:
        self.owned, self.last_assignment, self.generation, self.need_join = set(), set(), -1, True

    def step(self, h: ShardHarness) -> None:
        if not self.need_join:
            try:
                response = h.call(lambda s, now: s.heartbeat(HeartbeatRequest(G, self.generation, self.member_id), now))
            except KafkaError as e:
                response = e
            error = Errors.for_code(response.error_code) if not isinstance(response, KafkaError) else response.error
            if error is Errors.REBALANCE_IN_PROGRESS:
                self.need_join = True
            elif error is not Errors.NONE:
                assert error in (Errors.ILLEGAL_GENERATION, Errors.UNKNOWN_MEMBER_ID), error
                self.lose()
            return
        if not self.cooperative:
            self.owned = set()  # eager: revoke everything first
        join = JoinGroupRequest(G, SESSION_MS, "" if self.unknown else self.member_id, "consumer", self.protocols(),
                                REBALANCE_MS)
        try:
            # a validator's error (the group is gone: UNKNOWN_MEMBER_ID) comes from the write itself
            pending = h.write(lambda s, now: s.join_group(join, now, self.member_id))
            assert pending.done  # a consumer group answers at once
            joined = pending.result()
        except KafkaError as e:
            assert e.error in (Errors.UNKNOWN_MEMBER_ID, Errors.GROUP_MAX_SIZE_REACHED), e
            self.unknown = e.error is Errors.UNKNOWN_MEMBER_ID
            self.lose()
            return
        if joined.error_code:
            assert joined.error_code in (Errors.MEMBER_ID_REQUIRED.code, Errors.REBALANCE_IN_PROGRESS.code), joined
            if joined.error_code == Errors.MEMBER_ID_REQUIRED.code:
                self.unknown = False  # the id it was given is its own (the harness gives it the same)
            return
        self.generation = joined.generation_id
        sync = SyncGroupRequest(G, self.generation, self.member_id, None, "consumer", joined.protocol_name, ())
        pending = h.write(lambda s, now: s.sync_group(sync, now))
        try:
            synced = pending.result()
        except KafkaError as e:
            assert e.error in (Errors.ILLEGAL_GENERATION, Errors.UNKNOWN_MEMBER_ID), e
            self.lose()
            return
        if synced.error_code:
            assert synced.error_code == Errors.REBALANCE_IN_PROGRESS.code, synced
            return
        assigned = {(t, p) for t, ps in decode_assignment(synced.assignment).assigned_partitions for p in ps}
        revoked = self.owned - assigned
        self.owned, self.last_assignment = assigned, set(assigned)
        # cooperative: what it gave up may go to another only after it joins again
        self.need_join = bool(revoked)

    def leave(self, h: ShardHarness) -> None:
        self.owned = set()
        request = LeaveGroupRequest(G, (MemberIdentity(self.member_id),))
        response = h.call(lambda s, now: s.leave_group(request, now))
        assert all(m.error_code in (0, Errors.UNKNOWN_MEMBER_ID.code) for m in response.members), response


class World:
    def __init__(self, directory: str, cooperative: bool) -> None:
        config = {"group.consumer.session.timeout.ms": SESSION_MS, "group.initial.rebalance.delay.ms": 0,
                  "group.min.session.timeout.ms": 1000}
        self.h = ShardHarness(directory, GroupCoordinatorShard, config=config)
        self.h.call(lambda s, now: s.update_topics(TOPICS, now))
        self.cooperative = cooperative
        self.next_id = 0
        # a classic group of two with the partitions split between them
        split = {"k0": (0, 1, 2), "k1": (3, 4, 5)}
        gen = stable_group(self.h, tuple(split), {m: encode_assignment((("t", ps),)) for m, ps in split.items()})
        self.clients = [ClassicClient(m, cooperative, {("t", p) for p in ps}, gen) for m, ps in split.items()]
        self.act("consumer", 0)
        self.clients[-1].step(self.h)  # the first client of the consumer protocol upgrades the group
        assert self.group.type == "consumer"

    @property
    def group(self):
        return self.h.shard.groups.get(G)

    def tick(self) -> None:
        self.h.advance(TICK_MS)
        for c in list(self.clients):
            if self.classic_again():
                return
            c.step(self.h)
        self.check()

    def classic_again(self) -> bool:
        """Downgraded, or an empty consumer group replaced by a classic one."""
        return self.group is not None and self.group.type == "classic"

    def check(self) -> None:
        group = self.group
        if group is not None and group.type == "consumer":
            seen = {}
            for m in group.members.values():
                for source in (m.assigned_partitions, m.partitions_pending_revocation):
                    for t, ps in source.items():
                        for p in ps:
                            assert (t, p) not in seen, f"{t}-{p} owned by {seen[(t, p)]} and {m.member_id}"
                            seen[(t, p)] = m.member_id
            assert seen == group.partition_owner
        believed = {}
        for c in self.clients:
            for tp in c.owned:
                assert tp not in believed, f"clients {believed[tp]} and {c.member_id} both hold {tp}"
                believed[tp] = c.member_id

    def act(self, action: str, n: int) -> None:
        c = self.clients[n % len(self.clients)] if self.clients else None
        if action == "consumer":
            self.next_id += 1
            self.clients.append(ConsumerClient(f"m{self.next_id}"))
        elif action == "classic":
            self.next_id += 1
            client = ClassicClient(f"k{self.next_id + 10}", self.cooperative)
            self.clients.append(client)
        elif action == "leave" and c is not None:
            self.clients.remove(c)
            c.leave(self.h)
        elif action == "crash" and c is not None:
            self.clients.remove(c)  # dead: it holds nothing any more, its session runs out
        elif action == "restart":
            before = snapshot(self.h.shard)
            self.h.reload()
            self.h.call(lambda s, now: s.update_topics(TOPICS, now))
            assert snapshot(self.h.shard) == before
        elif action == "tick":
            self.tick()

    def settle(self) -> None:
        for _ in range(SESSION_MS // TICK_MS + 12):
            if self.classic_again():
                return
            self.tick()


def snapshot(shard) -> tuple:
    g = shard.groups.get(G)
    if g is None or g.type != "consumer":
        return (None if g is None else g.type,)
    return (g.group_epoch, g.assignment_epoch, dict(g.members), dict(g.target_assignment), dict(g.partition_owner),
            g.num_classic_members, dict(g.classic_protocol_counts))


ACTIONS = st.lists(st.tuples(st.sampled_from(["consumer", "classic", "leave", "crash", "restart", "tick", "tick"]),
                             st.integers(0, 50)), min_size=1, max_size=25)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.booleans(), ACTIONS)
def test_no_partition_has_two_owners_across_the_migration(cooperative, actions):
    with tempfile.TemporaryDirectory() as directory:
        world = World(directory, cooperative)
        for action, n in actions:
            world.act(action, n)
            if world.classic_again():
                break
        world.settle()
        group = world.group
        if world.classic_again():
            # only members of the classic protocol were left: the classic group rebalances
            # with them, or a classic client started a new one
            assert str(group.state) in ("PreparingRebalance", "Empty") or group.generation_id <= 1
            return
        if not world.clients:
            return
        assert str(group.state) == "Stable", group.state
        assert set(group.partition_owner) == ALL
        held = set().union(*(c.owned for c in world.clients))
        assert held == ALL
