"""Membership managers against the real group coordinator shard, under random joins, leaves,
subscription changes, growing topics, lost heartbeat responses, coordinator restarts and
reconciliations applied in slow steps: no partition is ever owned by two clients at once,
and once everyone heartbeats again every subscribed partition has an owner.

Time never passes a session or rebalance timeout here: those fence members on purpose, and
a fenced member that does not know yet may still hold what the coordinator gave away (a
zombie, as in Kafka); that case is the fault tests' business. So is a member whose last
heartbeat's answer was lost, until it heartbeats again (see Client.unanswered)."""
from __future__ import annotations

import tempfile

from hypothesis import given, settings, strategies as st

from runtime.clients.membership import MembershipManager, MemberState as S
from runtime.clients.types import TopicPartition
from runtime.errors import KafkaError
from runtime.group.shard import GroupCoordinatorShard
from runtime.messages.consumer import ConsumerGroupHeartbeatResponse
from runtime.testing import ShardHarness

MEMBERS = 3
LONG = 10 ** 9
CONFIG = {"group.consumer.session.timeout.ms": LONG, "group.consumer.assignors": "uniform,range"}


class Client:
    """One consumer: its membership manager and the reconciliation it is applying, in two
    steps (revoke, then assign) that other events may come between."""

    def __init__(self, i: int, subscription) -> None:
        self.m = MembershipManager("g", f"m{i}", LONG)
        self.m.subscribe(subscription)
        self.rec = None
        self.revoked = False
        # Its last heartbeat's answer was lost: the coordinator may have moved it to a newer
        # epoch with fewer partitions than the reconciliation it finishes gives it, and it
        # learns so (fenced) at its next heartbeat. Until then it is a zombie, as in Kafka.
        self.unanswered = False

    def heartbeat(self, h, lose_response: bool = False) -> None:
        request = self.m.heartbeat_request()
        if request is None:
            return
        try:
            response = h.call(lambda s, now: s.consumer_group_heartbeat(request, now, "unused"))
        except KafkaError as e:
            response = ConsumerGroupHeartbeatResponse(e.error.code, e.message)
        if lose_response:
            self.m.heartbeat_failed()
            self.unanswered = True
            return
        self.unanswered = False
        self.m.on_heartbeat_response(response)
        if self.m.state is S.FENCED:
            self.m.lost_done()

    def step(self) -> None:
        """The next half of a reconciliation."""
        if self.rec is not None and not self.m.is_current(self.rec):
            self.rec = None
        if self.rec is None:
            self.rec, self.revoked = self.m.next_reconciliation(), False
            if self.rec is None:
                return
        if not self.revoked:
            self.m.revocation_done(self.rec)
            self.revoked = True
        else:
            self.m.reconciliation_done(self.rec)
            self.rec = None


SUBSCRIPTIONS = st.sampled_from([("a",), ("b",), ("a", "b")])
OPS = st.lists(st.tuples(
    st.sampled_from(["hb", "hb", "hb", "lost", "step", "step", "step", "subscribe", "leave", "grow", "reload"]),
    st.integers(0, MEMBERS - 1), SUBSCRIPTIONS), max_size=80)


@given(st.lists(SUBSCRIPTIONS, min_size=MEMBERS, max_size=MEMBERS), OPS)
@settings(max_examples=500, deadline=None)
def test_no_partition_has_two_owners(subscriptions, ops):
    with tempfile.TemporaryDirectory() as directory:
        h = ShardHarness(directory, GroupCoordinatorShard, config=CONFIG)
        topics = {"a": 3, "b": 2}
        h.call(lambda s, now: s.update_topics(dict(topics), now))
        clients = [Client(i, subscriptions[i]) for i in range(MEMBERS)]

        def check():
            owned = [tp for c in clients if not c.unanswered for tp in c.m.owned]
            assert len(owned) == len(set(owned)), [sorted(c.m.owned) for c in clients]

        for op, i, subscription in ops:
            c = clients[i]
            if op == "hb":
                c.heartbeat(h)
            elif op == "lost":
                c.heartbeat(h, lose_response=True)
            elif op == "step":
                c.step()
            elif op == "subscribe" and c.m.state is not S.FATAL:
                c.m.subscribe(subscription)
            elif op == "leave":
                c.m.leave()  # a leave revokes everything at once
                c.m.leave_ready()
                c.heartbeat(h)
            elif op == "grow":
                topics[subscription[0]] += 1
                h.call(lambda s, now: s.update_topics(dict(topics), now))
            elif op == "reload":
                h.reload()
                h.call(lambda s, now: s.update_topics(dict(topics), now))
            h.advance(10)
            check()

        # everyone heartbeats and reconciles until the group settles
        for _ in range(12):
            for c in clients:
                c.heartbeat(h)
                c.step()
                c.step()
                check()
        wanted = set().union(*(c.m.topics for c in clients if c.m.state is not S.UNSUBSCRIBED))
        owned = set().union(*(c.m.owned for c in clients))
        assert owned == {TopicPartition(t, p) for t in wanted for p in range(topics[t])}
        assert all(c.m.state in (S.STABLE, S.UNSUBSCRIBED) for c in clients)
