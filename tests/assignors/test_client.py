import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.assignors import MemberSubscription as M
from runtime.assignors import client_assignor, cooperative_sticky, roundrobin, server_assignor, sticky
from runtime.errors import Errors, KafkaError

from .helpers import check_exclusive, group, leave, moves, owners, sizes, spread, with_owned


def test_lookup_and_unknown_names():
    assert client_assignor("roundrobin") is roundrobin
    assert client_assignor("sticky") is sticky
    assert client_assignor("cooperative-sticky") is cooperative_sticky
    for lookup, name in [(client_assignor, "uniform"), (server_assignor, "sticky"), (client_assignor, "nope")]:
        with pytest.raises(KafkaError) as e:
            lookup(name)
        assert e.value.error is Errors.UNSUPPORTED_ASSIGNOR and not e.value.retriable


@pytest.mark.parametrize("lookup, names", [
    (server_assignor, ["uniform", "range", "simple"]),
    (client_assignor, ["range", "roundrobin", "sticky", "cooperative-sticky"]),
])
def test_every_assignor_takes_the_same_arguments(lookup, names):
    members = {"a": M({"t"}, rack="r0"), "b": M({"t"}, rack="r1")}
    racks = {("t", p): {"r0"} for p in range(4)}
    for name in names:
        result = lookup(name)(members, {"t": 4}, partition_racks=racks)
        assert sorted(p for a in result.values() for p in a["t"]) == [0, 1, 2, 3]


# roundrobin: Kafka's RoundRobinAssignor examples.

def test_roundrobin_same_subscriptions():
    members = {"C0": M({"t0", "t1"}), "C1": M({"t0", "t1"})}
    assert roundrobin(members, {"t0": 3, "t1": 3}) == {
        "C0": {"t0": {0, 2}, "t1": {1}},
        "C1": {"t0": {1}, "t1": {0, 2}},
    }


def test_roundrobin_different_subscriptions():
    members = {"C0": M({"t0"}), "C1": M({"t0", "t1"}), "C2": M({"t0", "t1", "t2"})}
    assert roundrobin(members, {"t0": 1, "t1": 2, "t2": 3}) == {
        "C0": {"t0": {0}},
        "C1": {"t1": {0}},
        "C2": {"t1": {1}, "t2": {0, 1, 2}},
    }


def test_roundrobin_edge_cases():
    assert roundrobin({}, {"t": 2}) == {}
    members = group(3, {"t", "ghost", "empty"})
    result = roundrobin(members, {"t": 2, "empty": 0})
    check_exclusive(members, {"t": 2, "empty": 0}, result)
    assert result["m002"] == {}


# sticky

def test_sticky_first_assignment_is_balanced_across_topics():
    members = {c: M({"t0", "t1", "t2", "t3"}) for c in ("C0", "C1", "C2")}
    topics = {f"t{i}": 2 for i in range(4)}
    result = sticky(members, topics)
    check_exclusive(members, topics, result)
    assert sorted(sizes(result).values()) == [2, 3, 3]


def test_sticky_leave_keeps_everyone_elses_partitions():
    members = {c: M({"t0", "t1", "t2", "t3"}) for c in ("C0", "C1", "C2")}
    topics = {f"t{i}": 2 for i in range(4)}
    first = sticky(members, topics)
    left = leave(members, first, "C1")
    second = sticky(left, topics)
    check_exclusive(left, topics, second)
    assert sizes(second) == {"C0": 4, "C2": 4}
    for c in left:
        assert all(first[c][t] <= second[c].get(t, set()) for t in first[c])


def test_sticky_join_moves_only_what_balance_needs():
    members = group(10, {"a", "b"})
    topics = {"a": 60, "b": 41}
    first = sticky(members, topics)
    joined = {m: M(s.topics, owned=first[m], generation=3) for m, s in members.items()} | {"new": M({"a", "b"})}
    second = sticky(joined, topics)
    check_exclusive(joined, topics, second)
    assert spread(second) <= 1
    assert moves(first, second) == sizes(second)["new"] == 9


def test_sticky_newer_generation_wins_a_conflicting_claim():
    members = {
        "a": M({"t"}, owned={"t": {0, 1}}, generation=5),
        "b": M({"t"}, owned={"t": {1, 2}}, generation=4),  # stale claim on 1
        "c": M({"t"}, owned={"t": {3}}, generation=5),
    }
    result = sticky(members, {"t": 6})
    check_exclusive(members, {"t": 6}, result)
    assert result["a"]["t"] == {0, 1}
    assert 2 in result["b"]["t"] and 3 in result["c"]["t"]


def test_sticky_same_generation_conflict_is_claimed_by_neither():
    members = {"a": M({"t"}, owned={"t": {0, 1}}, generation=5), "b": M({"t"}, owned={"t": {1}}, generation=5)}
    result = sticky(members, {"t": 2})
    check_exclusive(members, {"t": 2}, result)
    assert result == {"a": {"t": {0}}, "b": {"t": {1}}}
    # cooperative: 1 was claimed twice, so nobody gets it this generation
    assert cooperative_sticky(members, {"t": 2}) == {"a": {"t": {0}}, "b": {}}


def test_sticky_heterogeneous_subscriptions():
    members = {"a": M({"t"}), "b": M({"t", "u"}), "c": M({"u"})}
    topics = {"t": 6, "u": 6}
    first = sticky(members, topics)
    check_exclusive(members, topics, first)
    assert spread(first) == 0
    again = sticky(with_owned(members, first), topics)
    assert again == first


def test_sticky_drops_unsubscribed_and_vanished_partitions():
    members = {"a": M({"t"}, owned={"t": {0, 5}, "u": {0}}), "b": M({"t"})}
    result = sticky(members, {"t": 2, "u": 1})
    assert result == {"a": {"t": {0}}, "b": {"t": {1}}}


def test_sticky_edge_cases():
    assert sticky({}, {"t": 1}) == {}
    members = group(4, {"t", "ghost", "empty"})
    result = sticky(members, {"t": 3, "empty": 0})
    check_exclusive(members, {"t": 3, "empty": 0}, result)
    assert sorted(sizes(result).values()) == [0, 1, 1, 1]


# cooperative-sticky

def test_cooperative_withholds_moving_partitions_for_one_round():
    members = {"a": M({"t"}), "b": M({"t"})}
    first = cooperative_sticky(members, {"t": 6})
    assert first == {"a": {"t": {0, 1, 2}}, "b": {"t": {3, 4, 5}}}
    joined = with_owned(members, first) | {"c": M({"t"})}
    second = cooperative_sticky(joined, {"t": 6})
    # a and b lose one each, but c does not get them yet
    assert second == {"a": {"t": {0, 1}}, "b": {"t": {3, 4}}, "c": {}}
    third = cooperative_sticky(with_owned(joined, second), {"t": 6})
    assert third == {"a": {"t": {0, 1}}, "b": {"t": {3, 4}}, "c": {"t": {2, 5}}}


def test_cooperative_gives_partitions_of_a_departed_member_at_once():
    members = group(3, {"t"})
    first = cooperative_sticky(members, {"t": 9})
    left = leave(members, first, "m001")
    second = cooperative_sticky(left, {"t": 9})
    check_exclusive(left, {"t": 9}, second)
    assert spread(second) <= 1


def test_cooperative_newer_generation_keeps_a_stale_claim():
    members = {"a": M({"t"}, owned={"t": {0}}, generation=7), "b": M({"t"}, owned={"t": {0, 1}}, generation=6)}
    assert cooperative_sticky(members, {"t": 2}) == {"a": {"t": {0}}, "b": {"t": {1}}}


def rebalance_until_stable(members, topics, assign, rounds=4):
    """Run the classic protocol's rounds: each member reports what it owns after the last
    round; checks that nothing is handed to a member while another still owns it."""
    history = []
    result = None
    for generation in range(1, rounds + 1):
        result = assign(members, topics)
        for (t, p), ms in owners(result).items():
            (m,) = ms
            for o, s in members.items():
                if o != m and p in s.owned.get(t, ()):
                    pytest.fail(f"{t}-{p} given to {m} while {o} still owns it")
        history.append(result)
        members = {m: M(s.topics, owned=result[m], generation=generation) for m, s in members.items()}
        if len(history) > 1 and history[-1] == history[-2]:
            break
    return result


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_property_cooperative_never_double_owns_and_converges(data):
    rng = random.Random(data.draw(st.integers(0, 10**6)))
    topic_names = ["a", "b", "c"]
    topics = {t: rng.randint(0, 9) for t in topic_names}
    homogeneous = data.draw(st.booleans())
    names = [f"m{i}" for i in range(data.draw(st.integers(1, 6)))]

    def subs():
        return set(topic_names) if homogeneous else set(rng.sample(topic_names, rng.randint(0, 3)))

    members = {m: M(subs()) for m in names}
    result = rebalance_until_stable(members, topics, cooperative_sticky)
    check_exclusive(members, topics, result)
    # churn: someone leaves, someone joins; owned partitions carry over
    members = {m: M(s.topics, owned=result[m], generation=10) for m, s in members.items()}
    if len(members) > 1:
        members.pop(rng.choice(sorted(members)))
    members["new"] = M(subs())
    settled = rebalance_until_stable(members, topics, cooperative_sticky)
    check_exclusive(members, topics, settled)
    if homogeneous:
        assert spread(settled) <= 1
    # the settled result matches what eager sticky would give from the same start
    assert sticky({m: M(s.topics, owned=settled[m], generation=20) for m, s in members.items()}, topics) == settled


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_property_sticky_balanced_and_stable(data):
    rng = random.Random(data.draw(st.integers(0, 10**6)))
    topics = {t: rng.randint(0, 12) for t in "abc"}
    members = {f"m{i}": M(set("abc"), owned={t: set(rng.sample(range(15), 3)) for t in "ab"},
                          generation=rng.randint(-1, 2)) for i in range(rng.randint(1, 7))}
    result = sticky(members, topics)
    check_exclusive(members, topics, result)
    assert spread(result) <= 1
    assert sticky(with_owned(members, result), topics) == result
