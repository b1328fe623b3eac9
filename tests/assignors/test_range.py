from runtime.assignors import MemberSubscription as M
from runtime.assignors import client_assignor, range_assign, server_assignor

from .helpers import check_exclusive, group


def test_lookup_on_both_sides():
    assert server_assignor("range") is range_assign
    assert client_assignor("range") is range_assign


def test_co_partitioned_ranges():
    # Kafka's example: two members, two topics of three partitions.
    members = {"M0": M({"T1", "T2"}), "M1": M({"T1", "T2"})}
    assert range_assign(members, {"T1": 3, "T2": 3}) == {
        "M0": {"T1": {0, 1}, "T2": {0, 1}},
        "M1": {"T1": {2}, "T2": {2}},
    }


def test_static_members_keep_their_ranges_across_new_member_ids():
    before = {"M0": M({"T1", "T2"}, instance_id="I1"), "M1": M({"T1", "T2"}, instance_id="I0")}
    after = {"M3": M({"T1", "T2"}, instance_id="I1"), "M2": M({"T1", "T2"}, instance_id="I0")}
    first = range_assign(before, {"T1": 3, "T2": 3})
    second = range_assign(after, {"T1": 3, "T2": 3})
    assert first["M1"] == second["M2"] == {"T1": {0, 1}, "T2": {0, 1}}
    assert first["M0"] == second["M3"] == {"T1": {2}, "T2": {2}}


def test_static_members_come_before_dynamic_ones():
    members = {"a": M({"t"}), "z": M({"t"}, instance_id="i")}
    assert range_assign(members, {"t": 3}) == {"z": {"t": {0, 1}}, "a": {"t": {2}}}


def test_heterogeneous_ranges_per_topic():
    members = {"a": M({"t", "u"}), "b": M({"t"}), "c": M({"u"})}
    topics = {"t": 5, "u": 2}
    result = range_assign(members, topics)
    check_exclusive(members, topics, result)
    assert result == {"a": {"t": {0, 1, 2}, "u": {0}}, "b": {"t": {3, 4}}, "c": {"u": {1}}}


def test_edge_cases():
    assert range_assign({}, {"t": 3}) == {}
    members = group(4, {"t", "empty", "ghost"})
    result = range_assign(members, {"t": 2, "empty": 0})
    check_exclusive(members, {"t": 2, "empty": 0}, result)
    assert result == {"m000": {"t": {0}}, "m001": {"t": {1}}, "m002": {}, "m003": {}}


def test_range_ignores_owned_partitions():
    members = {"a": M({"t"}, owned={"t": {2, 3}}), "b": M({"t"}, owned={"t": {0, 1}})}
    assert range_assign(members, {"t": 4}) == {"a": {"t": {0, 1}}, "b": {"t": {2, 3}}}
