"""Finding the coordinator of a key (Kafka's FindCoordinator): the key's Java string hash
over the state partitions of its kind (no Ray is started)."""
from actors import naming
from actors.naming import CoordinatorType


def test_a_group_id_lands_where_kafka_puts_it():
    # Kafka: "testgroup" with offsets.topic.num.partitions=50 is in __consumer_offsets-27
    config = {"offsets.topic.num.partitions": 50}
    assert naming.coordinator_partition(CoordinatorType.GROUP, "testgroup", config) == 27
    assert naming.find_coordinator(CoordinatorType.GROUP, "testgroup", config) == "shoal/group-coordinator/27"


def test_each_kind_counts_its_own_partitions():
    config = {"offsets.topic.num.partitions": 50, "transaction.state.log.num.partitions": 1,
              "share.coordinator.state.topic.num.partitions": 3}
    assert naming.find_coordinator(CoordinatorType.TRANSACTION, "testgroup", config) == \
        "shoal/transaction-coordinator/0"
    key = naming.share_coordinator_key("g", "topic-id", 2)
    assert key == "g:topic-id:2"
    assert naming.find_coordinator(CoordinatorType.SHARE, key, config) == \
        f"shoal/share-coordinator/{naming.coordinator_partition(CoordinatorType.SHARE, key, config)}"
    assert naming.every_coordinator(CoordinatorType.SHARE, config) == [
        "shoal/share-coordinator/0", "shoal/share-coordinator/1", "shoal/share-coordinator/2"]


def test_a_config_without_the_count_takes_the_deployment_default():
    # the laptop default of one coordinator of each kind (actors/config.py)
    assert naming.every_coordinator(CoordinatorType.GROUP, {}) == ["shoal/group-coordinator/0"]
    assert naming.find_coordinator(CoordinatorType.TRANSACTION, "any", {}) == "shoal/transaction-coordinator/0"
