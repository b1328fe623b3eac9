"""Manual replica assignments checked as Kafka's controller checks them, with its words."""
import pytest

from runtime.errors import Errors, KafkaError
from runtime.topics.assignments import added_partitions_assignment, topic_assignment

BROKERS = {0, 1}


def refusal(call, *args):
    with pytest.raises(KafkaError) as e:
        call(*args)
    return e.value.error, e.value.message


def test_a_new_topics_assignments_place_each_partition_on_its_broker():
    assert topic_assignment([(0, [1]), (1, [0]), (2, [1])], -1, -1, BROKERS) == {0: 1, 1: 0, 2: 1}


@pytest.mark.parametrize("assignments,message", [
    ([(0, [])], "The manual partition assignment includes an empty replica list."),
    ([(0, [7, 3])], "The manual partition assignment includes broker 3, but no such broker is registered."),
    ([(0, [1, 1])], "The manual partition assignment includes the broker 1 more than once."),
    ([(0, [0]), (0, [1])], "Found multiple manual partition assignments for partition 0"),
    ([(0, [0]), (1, [0, 1])], "The manual partition assignment includes a partition with 2 replica(s), but this is "
                              "not consistent with previous partitions, which have 1 replica(s)."),
    ([(0, [0]), (2, [1])], "partitions should be a consecutive 0-based integer sequence"),
])
def test_a_bad_new_topic_assignment_is_refused_with_kafkas_words(assignments, message):
    assert refusal(topic_assignment, assignments, -1, -1, BROKERS) == (Errors.INVALID_REPLICA_ASSIGNMENT, message)


def test_two_replicas_are_refused_while_shoal_keeps_one():
    error, message = refusal(topic_assignment, [(0, [0, 1])], -1, -1, BROKERS)
    assert error is Errors.INVALID_REPLICA_ASSIGNMENT and "one replica" in message


@pytest.mark.parametrize("partitions,factor,field", [(2, -1, "numPartitions"), (-1, 1, "replication factor")])
def test_assignments_with_counts_are_an_invalid_request(partitions, factor, field):
    error, message = refusal(topic_assignment, [(0, [0])], partitions, factor, BROKERS)
    assert error is Errors.INVALID_REQUEST and field in message


def test_added_partitions_follow_the_existing_ones():
    assert added_partitions_assignment([[1], [0]], 4, 6, BROKERS) == {4: 1, 5: 0}


@pytest.mark.parametrize("assignments,message", [
    ([[0]], "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified."),
    ([[0], [0, 1]], "The manual partition assignment includes a partition with 2 replica(s), but this is not "
                    "consistent with previous partitions, which have 1 replica(s)."),
    ([[0], [12]], "The manual partition assignment includes broker 12, but no such broker is registered."),
])
def test_bad_added_partition_assignments_are_refused_with_kafkas_words(assignments, message):
    assert refusal(added_partitions_assignment, assignments, 4, 6, BROKERS) == (
        Errors.INVALID_REPLICA_ASSIGNMENT, message)
