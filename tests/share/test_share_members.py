"""Which member ids a SharePartition serves (runtime.share.members), with a manual clock.

Kafka 4.2 shuts a member out of share fetches through its share session, which goes when the
member leaves or is fenced; shoal, without sessions yet, asks the group coordinator and
refuses a member id the group does not have with UNKNOWN_MEMBER_ID (README, design notes)."""
import pytest

from runtime.errors import Errors, KafkaError
from runtime.share.members import ShareMembers

RECHECK = 1000


def listed(members: ShareMembers, ids, now):
    members.begin_listing()
    members.listed(ids, now)


def refused(members: ShareMembers, member_id, now, ticket):
    with pytest.raises(KafkaError) as e:
        members.admitted(member_id, now, ticket)
    return e.value.error


def test_nobody_is_served_before_the_members_are_listed():
    members = ShareMembers("g", RECHECK)
    assert members.admitted("a", 0, members.ticket()) is False


def test_a_listed_member_is_served_without_asking_again_until_the_listing_is_old():
    members = ShareMembers("g", RECHECK)
    ticket = members.ticket()
    listed(members, ["a", "b"], 0)
    assert members.admitted("a", 0, ticket)
    later = members.ticket()
    assert members.admitted("b", RECHECK - 1, later)
    assert members.admitted("b", RECHECK, members.ticket()) is False  # list again first


def test_a_member_id_the_group_does_not_have_is_refused_with_unknown_member_id():
    members = ShareMembers("g", RECHECK)
    ticket = members.ticket()
    listed(members, ["a"], 0)
    assert refused(members, "zombie", 0, ticket) is Errors.UNKNOWN_MEMBER_ID
    # and so is a member that is not in an empty (or deleted) group
    ticket = members.ticket()
    listed(members, [], 10)
    assert refused(members, "a", 10, ticket) is Errors.UNKNOWN_MEMBER_ID


def test_a_new_member_missed_by_a_listing_begun_before_its_request_is_listed_again():
    members = ShareMembers("g", RECHECK)
    members.begin_listing()  # under way when the new member's first fetch arrives
    ticket = members.ticket()
    members.listed(["a"], 0)  # read before the new member's heartbeat
    assert members.admitted("new", 0, ticket) is False  # not refused: list again
    members.begin_listing()
    members.listed(["a", "new"], 1)
    assert members.admitted("new", 1, ticket)


def test_a_released_member_is_refused_at_once_though_the_listing_is_fresh():
    members = ShareMembers("g", RECHECK)
    listed(members, ["a", "b"], 0)
    members.release("a")
    assert members.admitted("b", 1, members.ticket())
    ticket = members.ticket()
    assert members.admitted("a", 1, ticket) is False  # it may have joined again: ask
    with pytest.raises(KafkaError) as e:
        members.raise_unless_member("a")  # a request admitted before the release
    assert e.value.error is Errors.UNKNOWN_MEMBER_ID
    listed(members, ["b"], 2)
    assert refused(members, "a", 2, ticket) is Errors.UNKNOWN_MEMBER_ID


def test_a_member_that_joins_again_under_its_id_is_served_again():
    members = ShareMembers("g", RECHECK)
    listed(members, ["a"], 0)
    members.release("a")
    ticket = members.ticket()
    listed(members, ["a"], 5)
    assert members.admitted("a", 5, ticket)


def test_a_listing_read_before_a_release_does_not_bring_the_member_back():
    members = ShareMembers("g", RECHECK)
    members.begin_listing()
    members.release("a")  # the fence reached this share partition first
    ticket = members.ticket()
    members.listed(["a", "b"], 0)  # the group coordinator answered from before the fence
    assert members.admitted("b", 0, ticket)
    assert members.admitted("a", 0, ticket) is False
    listed(members, ["b"], 1)
    assert refused(members, "a", 1, ticket) is Errors.UNKNOWN_MEMBER_ID


def test_a_listing_replaces_the_cache_so_members_gone_from_the_group_are_forgotten():
    members = ShareMembers("g", RECHECK)
    listed(members, ["a", "b"], 0)
    ticket = members.ticket()
    listed(members, ["b"], 1)  # a was fenced where this partition was not told
    assert refused(members, "a", 1, ticket) is Errors.UNKNOWN_MEMBER_ID


def test_a_failed_listing_refuses_nobody_and_the_next_request_lists_again():
    members = ShareMembers("g", RECHECK)
    ticket = members.ticket()
    members.begin_listing()
    members.listing_failed()
    assert not members.listing
    assert members.admitted("a", 0, ticket) is False
    listed(members, ["a"], 0)
    assert members.admitted("a", 0, ticket)


def test_no_member_id_is_a_bad_request_not_a_question_for_the_group_coordinator():
    members = ShareMembers("g", RECHECK)
    for no_id in ("", None):
        with pytest.raises(KafkaError) as e:
            members.admitted(no_id, 0, members.ticket())
        assert e.value.error is Errors.INVALID_REQUEST
    assert not members.listing


def test_one_listing_at_a_time():
    members = ShareMembers("g", RECHECK)
    members.begin_listing()
    with pytest.raises(ValueError):
        members.begin_listing()
    with pytest.raises(ValueError):
        ShareMembers("g").listed([], 0)


def test_a_release_at_an_older_epoch_keeps_a_member_listed_at_a_newer_one():
    """Fenced at epoch 3, the member joined again (epoch 5) and was listed so before the
    release arrived: it stays, and only a request from before the fence is refused."""
    members = ShareMembers("g")
    members.begin_listing()
    members.listed(["a"], 0, {"a": 5})
    members.release("a", 3)
    assert members.admitted("a", 1, members.ticket())
    members.raise_unless_member("a", 5)
    with pytest.raises(KafkaError) as e:
        members.raise_unless_member("a", 3)
    assert e.value.error is Errors.UNKNOWN_MEMBER_ID
    assert members.epoch_of("a") == 5 and members.epoch_of("a", 6) == 6
    members.release("a", 5)  # fenced at its current epoch: gone
    with pytest.raises(KafkaError):
        members.raise_unless_member("a")


def test_a_release_during_a_listing_keeps_the_member_only_at_a_newer_epoch():
    members = ShareMembers("g")
    members.begin_listing()
    members.release("a", 3)
    members.listed(["a", "b"], 0, {"a": 3, "b": 1})  # read before the fence reached the group
    with pytest.raises(KafkaError):
        members.admitted("a", 1, 0)
    assert members.admitted("b", 1, 0)
    members.begin_listing()
    members.release("a", 3)
    members.listed(["a"], 2, {"a": 4})  # joined again meanwhile
    assert members.admitted("a", 3, 0)
