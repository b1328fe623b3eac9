from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.assignors import MemberSubscription as M
from runtime.assignors import server_assignor, simple
from runtime.assignors.simple import desired_counts, desired_sharing

from .helpers import group, leave, owners, sizes, with_owned


def sharing(result):
    return Counter({tp: len(ms) for tp, ms in owners(result).items()})


def test_lookup():
    assert server_assignor("simple") is simple


def test_desired_sharing_and_counts_follow_the_seed():
    assert desired_sharing(3, 7) == 1 and desired_counts(3, 7) == [3, 2, 2]
    assert desired_sharing(6, 4) == 2 and desired_counts(6, 4) == [2, 1, 1, 2, 1, 1]
    # 7 members, 3 partitions: each partition shared by 3, two members get 2.
    assert desired_sharing(7, 3) == 3 and sorted(desired_counts(7, 3)) == [1, 1, 1, 1, 1, 2, 2]
    assert desired_sharing(4, 0) == 0


def test_fewer_members_than_partitions_means_exclusive():
    result = simple(group(3, {"t"}), {"t": 7})
    assert result == {"m000": {"t": {0, 3, 6}}, "m001": {"t": {1, 4}}, "m002": {"t": {2, 5}}}


def test_more_members_than_partitions_shares_them():
    result = simple(group(6, {"t"}), {"t": 4})
    assert result == {
        "m000": {"t": {0, 3}},
        "m001": {"t": {0}},
        "m002": {"t": {1}},
        "m003": {"t": {1, 3}},
        "m004": {"t": {2}},
        "m005": {"t": {2}},
    }
    assert set(sharing(result).values()) == {2}


def test_seven_members_three_partitions():
    result = simple(group(7, {"t"}), {"t": 3})
    assert set(sharing(result).values()) == {3}
    assert sorted(sizes(result).values()) == [1, 1, 1, 1, 1, 2, 2]


def test_stable_group_keeps_its_assignment():
    for n, p in [(3, 7), (6, 4), (7, 3), (10, 10)]:
        members = group(n, {"t"})
        first = simple(members, {"t": p})
        assert simple(with_owned(members, first), {"t": p}) == first


def test_join_keeps_existing_assignments_where_balance_allows():
    members = group(4, {"t"})
    before = simple(members, {"t": 12})
    joined = with_owned(members, before)
    joined["new"] = M({"t"})
    after = simple(joined, {"t": 12})
    assert set(sharing(after).values()) == {1}
    assert sorted(sizes(after).values()) == [2, 2, 2, 3, 3]
    # Each old member only gave partitions up; the newcomer got exactly those.
    for m in members:
        assert after[m]["t"] <= before[m]["t"]


def test_leave_redistributes_only_the_leavers_share():
    members = group(8, {"t"})
    before = simple(members, {"t": 4})
    left = leave(members, before, "m003")
    after = simple(left, {"t": 4})
    assert max(sharing(after).values()) <= 2
    kept = sum(len(after[m]["t"] & before[m]["t"]) for m in left)
    assert kept >= sum(len(before[m]["t"]) for m in left) - 1


def test_counts_swap_to_keep_holdings():
    # 2 members, 3 partitions: counts [2, 1] by id; "b" already holds two, so it keeps them.
    members = {"a": M({"t"}, owned={"t": {0}}), "b": M({"t"}, owned={"t": {1, 2}})}
    assert simple(members, {"t": 3}) == {"a": {"t": {0}}, "b": {"t": {1, 2}}}


def test_overshared_and_overfilled_are_revoked():
    # Everyone claims everything: 2 members, 4 partitions: exclusive again, 2 each.
    members = {m: M({"t"}, owned={"t": {0, 1, 2, 3}}) for m in "ab"}
    result = simple(members, {"t": 4})
    assert set(sharing(result).values()) == {1}
    assert sizes(result) == {"a": 2, "b": 2}


def test_unassignable_partitions_are_revoked():
    members = {"a": M({"t"}, owned={"t": {0, 9}, "u": {0}}), "b": M({"t"})}
    result = simple(members, {"t": 2, "u": 1})
    assert result == {"a": {"t": {0}}, "b": {"t": {1}}}


def test_heterogeneous_balances_per_topic():
    members = {"a": M({"t"}), "b": M({"u"}), "c": M({"t", "u"})}
    result = simple(members, {"t": 4, "u": 1})
    # t is split between a and c; u (one partition, two subscribers) is shared by both.
    assert result == {"a": {"t": {0, 2}}, "b": {"u": {0}}, "c": {"t": {1, 3}, "u": {0}}}


def test_only_assignable_partitions_are_assigned():
    members = {"a": M({"t", "u"}, owned={"t": {3}}), "b": M({"t", "u"})}
    # t-3 is no longer assignable (its share-group state is being deleted); u has none yet.
    result = simple(members, {"t": 4, "u": 2}, assignable={"t": {0, 1, 2, 9}})
    assert result == {"a": {"t": {0, 2}}, "b": {"t": {1}}}


def test_edge_cases():
    assert simple({}, {"t": 1}) == {}
    assert simple(group(2, {"empty", "ghost"}), {"empty": 0}) == {"m000": {}, "m001": {}}
    assert simple(group(2, set()), {"t": 3}) == {"m000": {}, "m001": {}}


@st.composite
def share_groups(draw):
    topics = {t: draw(st.integers(0, 6)) for t in "ab"}
    n = draw(st.integers(1, 9))
    homogeneous = draw(st.booleans())
    common = draw(st.sets(st.sampled_from("abx"), max_size=3))
    members = {}
    for i in range(n):
        subs = common if homogeneous else draw(st.sets(st.sampled_from("abx"), max_size=3))
        owned = {t: draw(st.sets(st.integers(0, 7), max_size=4)) for t in "ab"}
        members[f"m{i}"] = M(subs, owned={t: ps for t, ps in owned.items() if ps})
    return members, topics


@settings(max_examples=200, deadline=None)
@given(share_groups())
def test_property_sharing_bounds_and_stability(case):
    members, topics = case
    result = simple(members, topics)
    assert set(result) == set(members)
    for m, a in result.items():
        for t, ps in a.items():
            assert t in members[m].topics and ps and all(0 <= p < topics[t] for p in ps)
    for t, count in topics.items():
        subs = sorted(m for m in members if t in members[m].topics)
        if not subs or not count:
            continue
        want = desired_sharing(len(subs), count)
        held = Counter(p for m in subs for p in result[m].get(t, ()))
        assert all(held[p] <= want for p in range(count))
        assert all(p in held for p in range(count)), "every partition has a sharer"
    assert simple(with_owned(members, result), topics) == result
