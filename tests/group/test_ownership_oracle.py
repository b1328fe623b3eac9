"""The ownership oracle the soak and the multinode test judge groups by (tests/helpers.py):
an ownership ends when on_partitions_revoked runs, or, for a fenced member, at the fence."""
from runtime.clients.types import TopicPartition
from tests.helpers import Ownership, double_owners

TP = TopicPartition("t", 0)


def test_a_revocation_that_finished_before_the_next_owner_is_not_a_double_ownership():
    log = []
    a, b = Ownership("a", log), Ownership("b", log)
    a.on_partitions_assigned({TP})
    a.on_partitions_revoked({TP})
    b.on_partitions_assigned({TP})
    b.close()
    assert not double_owners(log)


def test_an_ownership_overlapping_the_next_one_is_a_double_ownership():
    log = []
    a, b = Ownership("a", log), Ownership("b", log)
    a.on_partitions_assigned({TP})
    b.on_partitions_assigned({TP})
    a.on_partitions_revoked({TP})
    b.close()
    assert double_owners(log) == [(TP, "a", "b")]


def test_a_revocation_the_fence_overtook_ends_in_the_loss():
    """Kafka's consumer tells on_partitions_lost of what it was still revoking when fenced:
    the coordinator took it back at the fence, so another member may have had it while
    on_partitions_revoked ran."""
    log = []
    a, b = Ownership("a", log), Ownership("b", log)
    a.on_partitions_assigned({TP})
    b.on_partitions_assigned({TP})  # after the fence
    a.on_partitions_revoked({TP})
    a.on_partitions_lost({TP})
    b.close()
    assert not double_owners(log)
    assert [i[4] for i in log if i[1] == "a"] == [True]


def test_a_loss_after_a_later_assignment_does_not_reach_back_to_the_earlier_revocation():
    log = []
    a, b = Ownership("a", log), Ownership("b", log)
    a.on_partitions_assigned({TP})
    b.on_partitions_assigned({TP})
    a.on_partitions_revoked({TP})
    a.on_partitions_assigned({TP})
    a.on_partitions_lost({TP})
    b.close()
    assert double_owners(log) == [(TP, "a", "b")]
