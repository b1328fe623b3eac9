"""Keyed timers (Kafka's CoordinatorTimer) and the manual clock."""
import pytest

from runtime.timer import CoordinatorTimer, ManualClock
from runtime.testing import ShardHarness

from .kv_shard import KvShard, expiry_key


def fired(timer: CoordinatorTimer, now_ms: int) -> list:
    return [(key, op(now_ms)) for key, op in timer.expire(now_ms)]


def test_timers_fire_in_deadline_order_then_scheduling_order():
    t = CoordinatorTimer()
    t.schedule("c", 30, lambda now: "c")
    t.schedule("a", 10, lambda now: "a")
    t.schedule("b2", 20, lambda now: "b2")
    t.schedule("b1", 20, lambda now: "b1")
    assert t.next_deadline() == 10 and len(t) == 4
    assert fired(t, 9) == []
    assert fired(t, 20) == [("a", "a"), ("b2", "b2"), ("b1", "b1")]
    assert fired(t, 100) == [("c", "c")]
    assert t.next_deadline() is None and len(t) == 0


def test_rescheduling_a_key_replaces_its_timer():
    t = CoordinatorTimer()
    t.schedule("k", 10, lambda now: "old")
    t.schedule("k", 50, lambda now: "new")
    assert (t.deadline("k"), len(t), t.next_deadline()) == (50, 1, 50)
    assert fired(t, 10) == []
    assert fired(t, 50) == [("k", "new")]
    t.schedule("k", 70, lambda now: "later")
    t.schedule("k", 5, lambda now: "sooner")
    assert fired(t, 100) == [("k", "sooner")]


def test_a_cancelled_timer_never_fires():
    t = CoordinatorTimer()
    t.schedule("k", 10, lambda now: "k")
    t.cancel("k")
    t.cancel("never-scheduled")
    assert not t.is_scheduled("k") and t.deadline("k") is None
    assert t.next_deadline() is None
    assert fired(t, 100) == []


def test_a_timer_cancelled_or_replaced_by_an_earlier_one_in_the_same_round_does_not_fire():
    t = CoordinatorTimer()
    t.schedule("first", 10, lambda now: (t.cancel("second"), t.schedule("third", 15, lambda n: "moved")))
    t.schedule("second", 11, lambda now: "second")
    t.schedule("third", 12, lambda now: "third")
    assert [key for key, _ in fired(t, 20)] == ["first"]
    # "third" was rescheduled while the round ran: it waits for the next round.
    assert t.deadline("third") == 15
    assert fired(t, 20) == [("third", "moved")]


def test_stopping_early_keeps_the_rest_scheduled():
    t = CoordinatorTimer()
    for i in range(3):
        t.schedule(f"t{i}", 10 + i, lambda now, i=i: i)
    for key, _ in t.expire(100):
        break
    assert key == "t0"
    assert t.next_deadline() == 11 and len(t) == 2
    assert [k for k, _ in t.pop_expired(100)] == ["t1", "t2"]


def test_clear_and_stale_entries():
    t = CoordinatorTimer()
    t.schedule("k", 10, lambda now: "old")
    t.clear()
    t.schedule("k", 20, lambda now: "new")
    assert fired(t, 15) == []
    assert fired(t, 20) == [("k", "new")]


def test_manual_clock():
    clock = ManualClock(100)
    assert clock() == 100
    assert clock.advance(50) == 150 and clock() == 150
    with pytest.raises(ValueError):
        clock.advance(-1)


def test_runtime_timers_fire_each_at_its_own_deadline(tmp_path):
    h = ShardHarness(str(tmp_path), KvShard)
    h.call(lambda s, now: s.put("a", 1, now, expires_at=30))
    h.call(lambda s, now: s.put("b", 2, now, expires_at=10))
    h.call(lambda s, now: s.put("c", 3, now, expires_at=20))
    seen = []
    original = h.shard._expire
    h.shard._expire = lambda key: (seen.append((key, h.clock())), original(key))[1]
    h.call(lambda s, now: s.put("c", 4, now))  # no expiry any more: the timer is cancelled
    h.advance(100)
    assert seen == [("b", 10), ("a", 30)]
    assert h.shard.data == {"c": 4} and h.clock() == 100


def test_a_timer_cancelled_by_another_timer_in_the_same_poll_does_not_fire(tmp_path):
    h = ShardHarness(str(tmp_path), KvShard)
    h.call(lambda s, now: s.put("a", 1, now, expires_at=10))
    h.call(lambda s, now: s.put("b", 2, now, expires_at=10))
    timer = h.shard.context.timer
    timer.schedule(expiry_key("a"), 9, lambda now: (timer.cancel(expiry_key("b")), h.shard._expire("a"))[1])
    h.runtime.poll(50)
    h.runtime.flush(50)
    assert h.shard.data == {"b": 2}
    assert h.reload().data == {"b": 2}
