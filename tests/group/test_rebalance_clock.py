"""How long rebalances take, measured on the shard's clock for the rebalance-duration
metric: classic groups from PreparingRebalance to Stable, consumer groups from a new group
epoch until every member has reconciled."""
from __future__ import annotations

from runtime.group.rebalance_clock import MAX_KEPT, RebalanceClock
from tests.group import helpers as classic
from tests.group.test_consumer import harness as consumer_harness
from tests.group.test_consumer import hb


def durations(h, group_id="g") -> list[int]:
    return h.shard.groups[group_id].rebalance_clock.take()


def test_a_classic_rebalance_lasts_from_preparing_to_stable(tmp_path):
    h = classic.harness(tmp_path, group_initial_rebalance_delay_ms=0)
    member_id = classic.join(h, new_id="a").result().member_id  # MEMBER_ID_REQUIRED
    h.advance(40)
    pending = classic.join(h, member_id)  # PreparingRebalance from here
    h.advance(10)
    joined = pending.result()
    h.advance(15)
    classic.sync(h, member_id, joined.generation_id, {member_id: b""}).result()
    assert durations(h) == [25]
    assert durations(h) == []  # taken once

    # a second member: the first rejoins, the leader syncs
    second = classic.join(h, new_id="b").result().member_id
    pending = classic.join(h, second)
    h.advance(10)
    assert classic.join(h, member_id).result().generation_id == 2
    assert pending.result().generation_id == 2
    h.advance(5)
    classic.sync(h, member_id, 2, {member_id: b"", second: b""}).result()
    assert durations(h) == [15]


def test_a_consumer_group_rebalance_ends_when_every_member_reconciled(tmp_path):
    h = consumer_harness(tmp_path)
    hb(h, "a")  # a new group reconciles at once
    assert durations(h) == [0]
    h.advance(100)
    hb(h, "b")  # epoch 2: a must give up 2-3 before b gets them
    h.advance(30)
    hb(h, "a", 1, owns={"t": {0, 1, 2, 3}})  # still owns what it must revoke
    assert durations(h) == []
    h.advance(20)
    hb(h, "a", 1, owns={"t": {0, 1}})
    h.advance(5)
    hb(h, "b", 2)
    assert durations(h) == [55]
    h.advance(1000)
    hb(h, "a", 2, owns={"t": {0, 1}})  # a heartbeat with nothing new starts nothing
    assert durations(h) == []


def test_a_reloaded_group_mid_rebalance_times_it_from_the_load(tmp_path):
    h = consumer_harness(tmp_path)
    hb(h, "a")
    hb(h, "b")
    h.advance(500)
    h.reload()
    h.call(lambda s, now: s.update_topics({"t": 4}, now))  # what the actor tells a loaded shard
    assert h.shard.groups["g"].rebalance_clock.started_ms == h.clock.now_ms
    h.advance(7)
    hb(h, "a", 1, owns={"t": {0, 1}})
    hb(h, "b", 2)
    assert durations(h) == [7]


def test_untaken_durations_are_bounded():
    clock = RebalanceClock()
    for i in range(MAX_KEPT + 10):
        clock.start(i)
        clock.settle(i + 1)
    assert clock.take() == [1] * MAX_KEPT
    clock.start(5)
    clock.abandon()
    clock.settle(9)
    assert clock.take() == []
