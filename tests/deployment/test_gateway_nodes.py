"""A gateway on every node of a multi-node Ray cluster (Ray's `ray.cluster_utils.Cluster`: a
head for the driver and a worker for the deployment's actors, on this machine).

Kafka clients see each gateway as a broker. Metadata names, as a partition's leader, the
gateway on the node where that partition-leader actor runs, and FindCoordinator the gateway on
the coordinator actor's node; an unmodified kafka-python producer and consumer group work
through them. This module runs its own Ray cluster, as test_multinode does."""

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

from actors import Cluster, naming
from tests.conftest import BASE_CONFIG, own_ray_cluster, wait_until

pytestmark = pytest.mark.ray

SERVER = "shoal-server"  # only the worker has it: the deployment's actors run there
CONFIG = {**BASE_CONFIG, "actor.resources": {SERVER: 1}, "listeners": "PLAINTEXT://127.0.0.1:0"}


@pytest.fixture(scope="module")
def deployment(tmp_path_factory):
    with own_ray_cluster() as rc:
        worker = rc.add_node(num_cpus=0, resources={SERVER: 1000})
        cluster = Cluster.local(data_dir=str(tmp_path_factory.mktemp("shoal")), config=CONFIG)
        try:
            yield cluster, rc.head_node.node_id, worker.node_id
        finally:
            cluster.shutdown()


def gateways(cluster):
    return {row["broker_id"]: row for row in cluster.status() if row["actor"].startswith("shoal/gateway/")}


def test_each_node_has_a_gateway_and_each_is_a_broker(deployment):
    cluster, head, worker = deployment
    rows = gateways(cluster)
    assert {r["node_id"] for r in rows.values()} == {head, worker}
    assert rows[0]["node_id"] == head  # broker ids count from the deploying process's node
    assert all(r["state"] == "active" for r in rows.values())
    assert cluster.bootstrap_servers == ",".join(rows[b]["address"] for b in sorted(rows))

    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        brokers = {b["broker_id"]: f"{b['host']}:{b['port']}" for b in admin.describe_cluster()["brokers"]}
    finally:
        admin.close()
    assert brokers == {b: r["address"] for b, r in rows.items()}


def test_a_partition_is_led_by_the_gateway_on_its_leaders_node(deployment):
    cluster, head, worker = deployment
    on_worker = next(b for b, r in gateways(cluster).items() if r["node_id"] == worker)
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        admin.create_topics([NewTopic("spread", 2, 1)])
        # Every partition-leader actor needs the worker's resource, so all run there.
        wait_until(lambda: all(cluster.directory.call(naming.partition_host_of("spread", p, cluster.config), "status")["node_id"]
                               == worker for p in range(2)), message="the partition leaders on the worker")
        (topic,) = admin.describe_topics(["spread"])
    finally:
        admin.close()
    assert {p["leader_id"] for p in topic["partitions"]} == {on_worker}

    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all")
    for i in range(20):
        producer.send("spread", f"v{i}".encode(), partition=i % 2)
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer("spread", bootstrap_servers=cluster.bootstrap_servers, group_id="spread-group",
                             auto_offset_reset="earliest", enable_auto_commit=False)
    got = []
    try:
        wait_until(lambda: got.extend(r.value for rs in consumer.poll(500).values() for r in rs) or len(got) >= 20,
                   timeout_s=60, message="20 records")
        consumer.commit()
        # The group's coordinator actor runs on the worker: so does the gateway it was found at.
        assert consumer._coordinator.coordinator_id == f"coordinator-{on_worker}"  # kafka-python names it so
        committed = {p: consumer.committed(TopicPartition("spread", p)) for p in range(2)}
    finally:
        consumer.close()
    assert sorted(got) == sorted(f"v{i}".encode() for i in range(20))
    assert committed == {0: 10, 1: 10}
