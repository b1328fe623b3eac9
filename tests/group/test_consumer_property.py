"""The invariant that matters most, under random histories: no partition is ever owned by
two members at once (owned = a member's current assignment plus its partitions pending
revocation), and once every member heartbeats and revokes as asked, every subscribed
partition ends up owned.

Simulated clients join, leave, restart as static members, change subscriptions (names or a
regex), crash (stop heartbeating until their session expires), miss revocations (keep partitions they were told
to give up, until the rebalance timeout fences them), while topics gain partitions and the
coordinator restarts from its log (and must come back with the same state).
"""
from __future__ import annotations

import tempfile

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime.errors import Errors, KafkaError
from runtime.group.shard import GroupCoordinatorShard
from runtime.messages.consumer import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatRequestTopicPartitions
from runtime.testing import ShardHarness

from .test_consumer import snapshot

G = "g"
SESSION_MS = 6_000
REBALANCE_MS = 2_000
TICK_MS = 500
SUBSCRIPTIONS = [(("t0",), None), (("t1",), None), (("t0", "t1"), None), (None, "t[12]"), (("t0",), "t2")]


class Client:
    def __init__(self, member_id: str, subscription, assignor: str | None, instance_id: str | None) -> None:
        self.member_id = member_id
        self.names, self.regex = subscription
        self.assignor = assignor
        self.instance_id = instance_id
        self.epoch = 0
        self.owned: dict[str, set[int]] = {}
        self.subscription_changed = False
        self.crashed = False
        self.stubborn = False  # misses revocations: keeps what it was told to give up

    def request(self) -> ConsumerGroupHeartbeatRequest:
        if self.epoch == 0:
            return ConsumerGroupHeartbeatRequest(
                G, self.member_id, 0, instance_id=self.instance_id, rebalance_timeout_ms=REBALANCE_MS,
                subscribed_topic_names=self.names if self.names is not None else (),
                subscribed_topic_regex=self.regex or "", server_assignor=self.assignor, topic_partitions=())
        owned = tuple(ConsumerGroupHeartbeatRequestTopicPartitions(t, tuple(sorted(ps)))
                      for t, ps in sorted(self.owned.items()) if ps)
        if not self.subscription_changed:
            return ConsumerGroupHeartbeatRequest(G, self.member_id, self.epoch, instance_id=self.instance_id,
                                                 topic_partitions=owned)
        self.subscription_changed = False
        return ConsumerGroupHeartbeatRequest(G, self.member_id, self.epoch, instance_id=self.instance_id,
                                             subscribed_topic_names=self.names if self.names is not None else (),
                                             subscribed_topic_regex=self.regex or "", topic_partitions=owned)

    def heartbeat(self, h: ShardHarness) -> None:
        request = self.request()
        try:
            response = h.call(lambda s, now: s.consumer_group_heartbeat(request, now, self.member_id))
        except KafkaError as e:
            assert e.error in (Errors.FENCED_MEMBER_EPOCH, Errors.UNKNOWN_MEMBER_ID), e
            # fenced: lose everything and rejoin
            self.owned, self.epoch = {}, 0
            return
        self.epoch = response.member_epoch
        if response.assignment is not None:
            new = {tp.topic_name: set(tp.partitions) for tp in response.assignment.topic_partitions}
            if self.stubborn:
                for t, ps in new.items():
                    self.owned.setdefault(t, set()).update(ps)
            else:
                self.owned = new


class World:
    def __init__(self, directory: str, interval_ms: int) -> None:
        config = {"group.consumer.session.timeout.ms": SESSION_MS,
                  "group.consumer.assignment.interval.ms": interval_ms}
        self.h = ShardHarness(directory, GroupCoordinatorShard, config=config)
        self.topics = {"t0": 2, "t1": 3}
        self.update_topics()
        self.clients: list[Client] = []
        self.next_id = 0

    def update_topics(self) -> None:
        topics = dict(self.topics)
        self.h.call(lambda s, now: s.update_topics(topics, now))

    def live(self) -> list[Client]:
        return [c for c in self.clients if not c.crashed]

    def pick(self, n: int) -> Client | None:
        live = self.live()
        return live[n % len(live)] if live else None

    def tick(self) -> None:
        self.h.advance(TICK_MS)
        for c in self.live():
            c.heartbeat(self.h)
        self.check_no_double_ownership()

    def check_no_double_ownership(self) -> None:
        group = self.h.shard.groups.get(G)
        if group is None:
            return
        seen: dict[tuple[str, int], str] = {}
        for m in group.members.values():
            for source in (m.assigned_partitions, m.partitions_pending_revocation):
                for t, ps in source.items():
                    for p in ps:
                        assert (t, p) not in seen, f"{t}-{p} owned by {seen[(t, p)]} and {m.member_id}"
                        seen[(t, p)] = m.member_id
        assert seen == group.partition_owner
        # clients that follow the protocol never believe they share a partition
        believed: dict[tuple[str, int], str] = {}
        for c in self.live():
            if c.stubborn:
                continue
            for t, ps in c.owned.items():
                for p in ps:
                    assert (t, p) not in believed, f"clients {believed[(t, p)]} and {c.member_id} both hold {t}-{p}"
                    believed[(t, p)] = c.member_id

    # ------------------------------------------------------------------ actions

    def act(self, action: str, n: int) -> None:
        c = self.pick(n)
        if action == "join":
            static = n % 3 == 0
            self.next_id += 1
            self.clients.append(Client(f"c{self.next_id}", SUBSCRIPTIONS[n % len(SUBSCRIPTIONS)],
                                       (None, "uniform", "range")[n % 3], f"i{self.next_id}" if static else None))
        elif action == "leave" and c is not None:
            request = ConsumerGroupHeartbeatRequest(G, c.member_id, -1, instance_id=c.instance_id)
            try:
                self.h.call(lambda s, now: s.consumer_group_heartbeat(request, now, c.member_id))
            except KafkaError as e:
                assert e.error in (Errors.UNKNOWN_MEMBER_ID, Errors.GROUP_ID_NOT_FOUND), e
            self.clients.remove(c)
        elif action == "bounce" and c is not None and c.instance_id is not None:
            # a static member restarts: it leaves for a moment (epoch -2) and, unless it is
            # gone for good, comes back under a new member id
            request = ConsumerGroupHeartbeatRequest(G, c.member_id, -2, instance_id=c.instance_id)
            try:
                self.h.call(lambda s, now: s.consumer_group_heartbeat(request, now, c.member_id))
            except KafkaError as e:
                assert e.error in (Errors.UNKNOWN_MEMBER_ID, Errors.GROUP_ID_NOT_FOUND), e
            self.clients.remove(c)
            if n % 2 == 0:
                self.next_id += 1
                self.clients.append(Client(f"c{self.next_id}", (c.names, c.regex), c.assignor, c.instance_id))
        elif action == "subscribe" and c is not None:
            c.names, c.regex = SUBSCRIPTIONS[(n // 7) % len(SUBSCRIPTIONS)]
            c.subscription_changed = True
        elif action == "grow":
            topic = ("t0", "t1", "t2")[n % 3]
            self.topics[topic] = self.topics.get(topic, 0) + 1 + n % 2
            self.update_topics()
        elif action == "crash" and c is not None:
            c.crashed = True
        elif action == "stubborn" and c is not None:
            c.stubborn = True
        elif action == "expire":
            for _ in range(SESSION_MS // TICK_MS + 1):
                self.tick()
            self.clients = self.live()
        elif action == "restart":
            before = snapshot(self.h.shard)
            self.h.reload()
            self.update_topics()
            assert snapshot(self.h.shard) == before

    def settle(self) -> None:
        """Everyone behaves from now on: crashed members expire, the others converge."""
        for c in self.clients:
            c.stubborn = False
        self.act("expire", 0)
        for _ in range(16):
            self.tick()

    def check_everything_owned(self) -> None:
        group = self.h.shard.groups.get(G)
        if group is None or not group.members:
            return
        subscribed = set()
        for m in group.members.values():
            subscribed |= group.subscribed_topics(m)
        wanted = {(t, p) for t in subscribed if t in self.topics for p in range(self.topics[t])}
        assert set(group.partition_owner) == wanted
        assert str(group.state) == "Stable"
        for c in self.clients:
            member = group.members[c.member_id]
            assert {t: set(ps) for t, ps in member.assigned_partitions.items()} == {
                t: ps for t, ps in c.owned.items() if ps}


ACTIONS = st.sampled_from(["join", "join", "join", "leave", "bounce", "subscribe", "grow", "crash", "stubborn",
                           "expire", "restart"])


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(st.tuples(ACTIONS, st.integers(0, 1000)), min_size=3, max_size=40),
       interval_ms=st.sampled_from([0, 1000]))
def test_no_partition_has_two_owners_and_all_are_eventually_owned(steps, interval_ms):
    with tempfile.TemporaryDirectory() as directory:
        world = World(directory, interval_ms)
        for action, n in steps:
            world.act(action, n)
            world.tick()
        world.settle()
        world.check_no_double_ownership()
        world.check_everything_owned()
