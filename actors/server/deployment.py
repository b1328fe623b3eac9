"""Deploying topic data: the partition hosts, and the partitions of topics as the controller
creates, grows and deletes them. The Cluster facade and the gateway's CreateTopics,
CreatePartitions and DeleteTopics both come here."""
from __future__ import annotations

import logging

import ray

from runtime.errors import Errors, KafkaError

from .. import naming
from ..errors import to_kafka_error
from ..placement import on_node, remote
from ..retry import ActorDirectory
from .partition_host import PartitionHostActor

log = logging.getLogger(__name__)


def host_count(config: dict, nodes: int) -> int:
    """How many partition hosts a deployment on `nodes` Ray nodes runs."""
    return max(int(config.get("partition.hosts.per.node", 1)), 1) * max(nodes, 1)


def start_partition_hosts(directory: ActorDirectory, deployment: dict, nodes: list[str]) -> list:
    """Create the deployment's partition hosts that do not run, host i on node i modulo the
    nodes (a soft affinity: a host Ray restarts goes where it can). The refs of every
    host's `ready()`. The handle of a host that runs already is not kept: only its
    creator's keeps a non-detached actor alive, and replacing that would end it."""
    config = deployment["config"]
    refs = []
    for index, name in enumerate(naming.every_partition_host(config)):
        try:
            handle = ray.get_actor(name, namespace=deployment["namespace"])
        except ValueError:
            node = nodes[index % len(nodes)] if nodes else None
            handle = remote(PartitionHostActor, name, deployment["namespace"], deployment["detached"], config,
                            strategy=on_node(node)).remote(deployment["data_dir"], index, config)
            directory.keep(name, handle)
        refs.append(handle.ready.remote())
    return refs


def _by_host(config: dict, topic: str, partitions) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for p in partitions:
        out.setdefault(naming.partition_host_of(topic, p, config), []).append(p)
    return out


def start_partitions(directory: ActorDirectory, config: dict, topic: str, topic_id: str, topic_configs: dict,
                     partitions) -> None:
    """Have the hosts lead these partitions of a topic the controller has (created or
    grown): one call per host, and back when every log is open; KAFKA_STORAGE_ERROR if one
    did not open (its host keeps trying, at the partition's next request)."""
    by_host = _by_host(config, topic, partitions)
    refs = [directory.get(host).add_partitions.remote(topic, topic_id, topic_configs, ps)
            for host, ps in by_host.items()]
    failed = [s for statuses in ray.get(refs, timeout=120) for s in statuses if s["state"] != "active"]
    if failed:
        raise KafkaError(Errors.KAFKA_STORAGE_ERROR,
                         "; ".join(f"{s['name']} did not open: {s['error']}" for s in failed))


def delete_partitions(directory: ActorDirectory, config: dict, topic: str, partitions) -> None:
    """Delete the data of these partitions of a topic the controller deleted."""
    for host, ps in _by_host(config, topic, partitions).items():
        try:
            ray.get(directory.get(host).delete_partitions.remote(topic, ps), timeout=30)
        except Exception as e:  # the host is away: its restart finds the topic gone and skips it
            log.warning("deleting %s %s on %s: %s", topic, ps, host, to_kafka_error(e))
            directory.forget(host)


def topics_changed(directory: ActorDirectory, config: dict) -> None:
    """Group coordinators read the topics again now (consumer and share groups follow
    them); one that is away catches up when it loads or at its periodic refresh."""
    refs = [directory.get(name).notify_topics.remote()
            for name in naming.every_coordinator(naming.CoordinatorType.GROUP, config)]
    try:
        ray.get(refs, timeout=30)
    except Exception as e:
        log.info("telling the group coordinators about topics: %s", to_kafka_error(e))
