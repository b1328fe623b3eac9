"""A partition leader that Ray restarts serves with the topic's configs as the controller has
them now, not with those it was created with: a change the leader missed while it was away
(IncrementalAlterConfigs reaches the controller, then the leaders) is in force after it is back."""
import os
import signal

import pytest
import ray

from actors import naming
from runtime.errors import Errors, KafkaError
from runtime.messages.topics import AlterTopicConfigRequest
from tests.conftest import wait_until

TOPIC = "configs"
CLUSTER_TOPICS = {TOPIC: 1}


def _send(cluster, value: bytes):
    with cluster.producer(acks="all") as producer:
        return producer.send(TOPIC, value).result(timeout=30)


def _restarted(cluster, pid: int) -> bool:
    try:
        status = ray.get(cluster.partition_leader(TOPIC, 0).status.remote(), timeout=10)
    except Exception:
        cluster._forget(naming.partition_host_of(TOPIC, 0, cluster.config))
        return False
    return status["pid"] != pid


def test_a_restarted_leader_takes_the_configs_changed_while_it_was_away(cluster):
    big = b"x" * 3000
    assert _send(cluster, big).offset == 0  # the default max.message.bytes lets it in
    controller = ray.get_actor(naming.CONTROLLER, namespace=cluster.namespace)
    response = ray.get(controller.alter_topic_config.remote(
        AlterTopicConfigRequest(TOPIC, {"max.message.bytes": "2000"})), timeout=30)
    assert response.error_code == 0
    # Only the controller has the change (the leader's push is what a leader away misses).
    assert _send(cluster, big).offset == 1
    pid = ray.get(cluster.partition_leader(TOPIC, 0).status.remote(), timeout=30)["pid"]
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: _restarted(cluster, pid), timeout_s=60, message="the leader restarted")
    with pytest.raises(KafkaError) as e:
        _send(cluster, big)
    assert e.value.error is Errors.MESSAGE_TOO_LARGE
    assert _send(cluster, b"small").offset == 2
