"""The share-group history checker finds each kind of violation it names, and passes a
history that keeps every promise (synthetic histories; no Ray)."""
from __future__ import annotations

from typing import NamedTuple

from actors import AcknowledgeType as T
from tests.share_history import ShareHistory

TP = ("t", 0)


class Record(NamedTuple):
    topic: str
    partition: int
    offset: int
    delivery_count: int


def r(offset, count):
    return Record("t", 0, offset, count)


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        self.now += 1.0
        return self.now


def history():
    h = ShareHistory(delivery_limit=3)
    h._now = Clock()
    return h


def ack(h, member, record, ack_type, ok=True):
    h.acknowledged(member, {record: ack_type}, {TP: None if ok else "error"}, h._now())


def test_a_history_that_keeps_every_promise_passes():
    h = history()
    h.delivered("a", [r(0, 1), r(1, 1)])
    ack(h, "a", r(0, 1), T.ACCEPT)
    ack(h, "a", r(1, 1), T.RELEASE)
    h.delivered("b", [r(1, 2)])
    ack(h, "b", r(1, 2), T.RENEW)
    h.delivered("b", [r(1, 2)])  # handed back after the renewal: not a new delivery
    ack(h, "b", r(1, 2), T.REJECT)
    h.start_offset(TP, 2)
    assert h.check([(TP, 0), (TP, 1)]) == []


def test_two_holders_of_one_delivery_are_found_unless_it_was_given_back():
    h = history()
    h.delivered("a", [r(0, 1)])
    h.delivered("b", [r(0, 1)])
    assert [v[:3] for v in h.check()] == ["(a)"]
    h = history()
    h.delivered("a", [r(0, 1)], joins=1)
    h.member_joins("a", 2)  # fenced and joined again: its delivery was given back
    h.delivered("b", [r(0, 1)])
    assert h.check() == []
    h = history()
    h.delivered("a", [r(0, 1)])
    h.fault("share_partition")
    h.delivered("b", [r(0, 1)])
    assert h.check() == []


def test_a_record_delivered_after_a_successful_accept_is_found():
    h = history()
    h.delivered("a", [r(0, 1)])
    ack(h, "a", r(0, 1), T.ACCEPT)
    h.delivered("b", [r(0, 2)])
    assert [v[:3] for v in h.check()] == ["(b)"]


def test_a_record_settled_twice_is_found():
    h = history()
    h.delivered("a", [r(0, 1)])
    ack(h, "a", r(0, 1), T.ACCEPT)
    ack(h, "a", r(0, 1), T.ACCEPT)
    assert any(v.startswith("(b)") and "2 times" in v for v in h.check())


def test_a_release_followed_by_the_same_count_is_found():
    h = history()
    h.delivered("a", [r(0, 1)])
    ack(h, "a", r(0, 1), T.RELEASE)
    h.delivered("b", [r(0, 1)])
    assert "(c)" in [v[:3] for v in h.check()]


def test_a_record_that_ended_unsettled_is_found_unless_archived_or_unknown():
    h = history()
    h.delivered("a", [r(0, 1)])
    assert [v[:3] for v in h.check([(TP, 0)])] == ["(d)"]
    h.delivered("b", [r(0, 2)])  # the limit is 3: its last delivery may be unseen
    assert h.check([(TP, 0)]) == []
    h = history()
    h.delivered("a", [r(0, 1)])
    h.acknowledged("a", {r(0, 1): T.ACCEPT}, None, 0.5)  # its outcome never learnt
    assert h.check([(TP, 0)]) == []


def test_a_start_offset_that_goes_back_or_passes_an_unsettled_record_is_found():
    h = history()
    h.start_offset(TP, 5)
    h.start_offset(TP, 3)
    assert [v[:3] for v in h.check()] == ["(e)"]
    h = history()
    h.delivered("a", [r(0, 1)])
    h.start_offset(TP, 1)
    ack(h, "a", r(0, 1), T.ACCEPT)  # sent after the start offset had passed it
    assert "(e)" in [v[:3] for v in h.check()]


def test_a_refused_settling_acknowledgement_with_no_delivery_after_counts_as_not_learnt():
    h = history()
    h.limit = 5
    h.delivered("a", [r(0, 1)])
    ack(h, "a", r(0, 1), T.ACCEPT, ok=False)
    assert h.check([(TP, 0)]) == []
    h.delivered("b", [r(0, 2)])  # delivered again: the refusal was real, and b never settled it
    assert [v[:3] for v in h.check([(TP, 0)])] == ["(d)"]


def test_a_same_count_copy_after_a_settled_acknowledgement_is_excused_only_across_a_restart():
    """A consumer's buffer may hand out a delivery that a SharePartition made before it
    restarted, after the restarted one gave the record to another member at the same count
    and that member settled it (acquisitions are not persisted). A higher count never is."""
    def story(fault: bool, later_count: int):
        h = history()
        h.delivered("a", [r(0, 1)])
        ack(h, "a", r(0, 1), T.RELEASE)
        if fault:
            h.fault("share_partition")
        h.delivered("b", [r(0, 2)])
        ack(h, "b", r(0, 2), T.ACCEPT)
        h.delivered("a", [r(0, later_count)])
        return [v[:3] for v in h.check()]
    assert story(fault=True, later_count=2) == []
    assert {"(a)", "(b)"} <= set(story(fault=False, later_count=2))
    assert "(b)" in story(fault=True, later_count=3)


def test_a_count_that_went_back_across_a_restart_is_excused_and_a_late_acknowledgement_is_not():
    """A lock expiry frees its records before its write lands: a SharePartition that dies then
    has handed out a count the next one never learns, and the next one's lower count may be
    settled. Without a restart between the two, a higher count before a lower one's
    settling is an acknowledgement applied to a later delivery."""
    def story(fault: bool):
        h = history()
        h.delivered("a", [r(0, 1)])
        h.delivered("b", [r(0, 2)])  # a's lock ran out; its release was not written yet
        if fault:
            h.fault("share_partition")
        h.delivered("c", [r(0, 1)])
        ack(h, "c", r(0, 1), T.ACCEPT)
        return [v[:3] for v in h.check()]
    assert story(fault=True) == []
    assert "(b)" in story(fault=False)
    # The same member's late acknowledgement of its earlier delivery, applied to its later
    # one, is found even with a restart elsewhere in the record's history.
    h = history()
    h.delivered("m", [r(0, 1)])
    h.delivered("m", [r(0, 2)])
    h.fault("share_partition")
    ack(h, "m", r(0, 1), T.ACCEPT)
    assert "(b)" in [v[:3] for v in h.check()]
