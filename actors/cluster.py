"""The facade a user holds: `Cluster.local()` (the embedded default) or `Cluster.connect()`
(a deployment made by `shoal up` on a `ray start` cluster)."""
from __future__ import annotations

import atexit
import logging
import os
import secrets
import shutil
import tempfile
import uuid
import weakref
from dataclasses import dataclass
from typing import Any

import ray

from runtime.errors import Errors, KafkaError
from runtime.security import scram
from runtime.security.sasl import DEFAULT_MECHANISMS, parse_mechanisms
from runtime.messages.topics import (CreatableTopic, CreatableTopicConfig, CreatePartitionsRequest,
                                     CreatePartitionsTopic, CreateTopicsRequest, DeleteTopicsRequest,
                                     MetadataRequest)

from . import naming
from .config import merged
from .server.controller import ControllerActor
from .errors import to_kafka_error
from .placement import current_node, remote
from .server.deployment import delete_partitions, host_count, start_partition_hosts, start_partitions, topics_changed
from .retry import ActorDirectory

log = logging.getLogger(__name__)


# Ray passes a call's arguments and results up to this size inside its task messages, and
# larger ones through the object store. A produce request or fetch response of up to 2 MiB
# (past a maximum-size batch) stays inline: under load each trip through the store (a put,
# a pull and a free, all through the raylet) was most of a large produce's latency.
# Ray's default is 100 KiB.
RAY_SYSTEM_CONFIG = {"max_direct_call_object_size": 2 * 1024 * 1024}

# The coordinator actors a deployment runs, one per state partition of their kind: (actor
# class path, kind). Each is built with (data_dir, partition, config) and has `ready()` and
# `status()`.
COORDINATORS: list[tuple[str, naming.CoordinatorType]] = [
    ("actors.server.group_coordinator.GroupCoordinatorActor", naming.CoordinatorType.GROUP),
    ("actors.server.transaction_coordinator.TransactionCoordinatorActor", naming.CoordinatorType.TRANSACTION),
    ("actors.server.share_coordinator.ShareCoordinatorActor", naming.CoordinatorType.SHARE),
]


def _load_class(path: str):
    module, _, name = path.rpartition(".")
    return getattr(__import__(module, fromlist=[name]), name)


class DeploymentNotFound(Exception):
    """`Cluster.connect` found no shoal deployment in the namespace."""


@dataclass(frozen=True)
class TopicDescription:
    name: str
    topic_id: str
    partitions: int
    configs: dict


def _check_listeners(config: dict) -> None:
    """A listener the gateways could not serve is refused before anything is deployed."""
    from .server.gateway.actor import parse_listeners
    from .server.tls import server_context
    for key in ("listeners", "advertised.listeners"):
        if config.get(key):
            try:
                listeners = parse_listeners(config[key], config.get("listener.security.protocol.map"))
            except ValueError as e:
                raise KafkaError(Errors.INVALID_CONFIG, f"{key}: {e}") from None
            if key == "listeners" and any(listener.tls for listener in listeners):
                try:
                    server_context(config)
                except ValueError as e:
                    raise KafkaError(Errors.INVALID_CONFIG, str(e)) from None
    try:
        parse_mechanisms(config.get("sasl.enabled.mechanisms", DEFAULT_MECHANISMS))
    except ValueError as e:
        raise KafkaError(Errors.INVALID_CONFIG, f"sasl.enabled.mechanisms: {e}") from None


def _live_nodes() -> list[str]:
    """The live Ray nodes, this process's first: broker ids and host placement count from it."""
    here = current_node()
    return sorted((n["NodeID"] for n in ray.nodes() if n["Alive"]), key=lambda n: (n != here, n))


class PartitionHandle:
    """A topic partition's leader reached through its host, shaped as an actor handle:
    `handle.fetch.remote(request)` is the host's `fetch` of that partition."""

    # method -> whether the host's method names the partition in its arguments (the
    # requests carry it already)
    _METHODS = {"produce": False, "fetch": False, "list_offsets": False, "delete_records": False,
                "write_txn_markers": False, "status": True, "apply_retention": True}

    def __init__(self, host: Any, topic: str, partition: int) -> None:
        self.host = host
        self.topic = topic
        self.partition = partition

    def __getattr__(self, method: str) -> Any:
        named = self._METHODS.get(method)
        if named is None:
            raise AttributeError(method)
        host_method = getattr(self.host, "partition_status" if method == "status" else method)
        return _PartitionMethod(host_method, (self.topic, self.partition) if named else ())


class _PartitionMethod:
    def __init__(self, host_method: Any, prefix: tuple) -> None:
        self._host_method = host_method
        self._prefix = prefix

    def remote(self, *args) -> Any:
        return self._host_method.remote(*self._prefix, *args)


class Cluster:
    def __init__(self, namespace: str, deployment: dict, *, owns_ray: bool, owns_data_dir: bool,
                 owns_deployment: bool) -> None:
        self.namespace = namespace
        self.data_dir: str = deployment["data_dir"]
        self.config: dict = deployment["config"]
        self.detached: bool = deployment["detached"]
        self._deployment = {**deployment, "namespace": namespace}
        self._owns_ray = owns_ray
        self._owns_data_dir = owns_data_dir
        self._owns_deployment = owns_deployment
        self.directory = ActorDirectory(namespace)
        self._closed = False
        # Share consumers made here run in this process: they stop before Ray does.
        self._share_consumers: weakref.WeakSet = weakref.WeakSet()

    # ------------------------------------------------------------------ starting and finding

    @classmethod
    def local(cls, data_dir: str | None = None, config: dict | None = None) -> "Cluster":
        """Start Ray if needed and deploy every actor, owned by this driver."""
        owns_ray = not ray.is_initialized()
        if owns_ray:
            # "local": always an embedded instance, never a stale `ray start` address
            # that /tmp/ray/ray_current_cluster may still name.
            # No runtime_env: any one makes every actor's worker start through Ray's setup
            # wrapper, about 0.15 s more per actor here (and log dedup is Ray's default).
            ray.init(address="local", logging_level=logging.WARNING, include_dashboard=False,
                     _system_config=RAY_SYSTEM_CONFIG)
        owns_data_dir = data_dir is None
        data_dir = os.path.abspath(data_dir or tempfile.mkdtemp(prefix="shoal-"))
        namespace = f"shoal-local-{uuid.uuid4().hex[:8]}"
        cluster = cls._deploy(namespace, data_dir, merged(config), set(config or ()), detached=False,
                              owns_ray=owns_ray, owns_data_dir=owns_data_dir)
        atexit.register(cluster.shutdown)
        return cluster

    @classmethod
    def up(cls, data_dir: str, config: dict | None = None, namespace: str = naming.DEFAULT_NAMESPACE) -> "Cluster":
        """Deploy detached actors on the Ray cluster this process is connected to (`shoal up`)."""
        try:
            ray.get_actor(naming.CONTROLLER, namespace=namespace)
        except ValueError:
            pass
        else:
            raise KafkaError(Errors.INVALID_REQUEST, f"a shoal deployment already runs in namespace {namespace!r}")
        return cls._deploy(namespace, os.path.abspath(data_dir), merged(config), set(config or ()), detached=True,
                           owns_ray=False, owns_data_dir=False)

    @classmethod
    def connect(cls, address: str = "auto", namespace: str = naming.DEFAULT_NAMESPACE) -> "Cluster":
        """Attach to a deployment made by `shoal up`."""
        if not ray.is_initialized():
            ray.init(address=address, namespace=namespace, logging_level=logging.WARNING)
        try:
            controller = ray.get_actor(naming.CONTROLLER, namespace=namespace)
        except ValueError:
            raise DeploymentNotFound(
                f"no shoal deployment in namespace {namespace!r} on this Ray cluster; start one with `shoal up`"
            ) from None
        deployment = ray.get(controller.deployment.remote(), timeout=60)
        return cls(namespace, deployment, owns_ray=False, owns_data_dir=False, owns_deployment=False)

    @classmethod
    def _deploy(cls, namespace: str, data_dir: str, config: dict, given: set, *, detached: bool, owns_ray: bool,
                owns_data_dir: bool) -> "Cluster":
        """`config`: the settings with shoal's defaults; `given`: the names the user set."""
        if config.get("listeners"):
            _check_listeners(config)
        os.makedirs(data_dir, exist_ok=True)
        # Passwords given in the config are stored hashed, as users added later; the config
        # every actor gets does not hold them.
        initial_users = config.pop("sasl.users", None) or {}
        nodes = _live_nodes()
        config = {**config, naming.NAMESPACE_KEY: namespace,
                  naming.PARTITION_HOSTS_KEY: host_count(config, len(nodes))}
        deployment = {"data_dir": data_dir, "config": config, "namespace": namespace, "detached": detached,
                      "static_config": sorted(str(k) for k in given if k != "sasl.users")}
        cluster = cls(namespace, deployment, owns_ray=owns_ray, owns_data_dir=owns_data_dir, owns_deployment=True)
        controller = remote(ControllerActor, naming.CONTROLLER, namespace, detached, config, spread=True).remote(
            data_dir, config, namespace, detached)
        cluster.directory.keep(naming.CONTROLLER, controller)
        # The coordinators and gateways start beside the controller, not after it: each is a
        # process to spawn and load, and they reach the controller only through calls, which
        # wait for it. Nothing is returned before all of them (and the initial users) are ready.
        refs = []
        for class_path, key_type in COORDINATORS:
            for partition, name in enumerate(naming.every_coordinator(key_type, config)):
                handle = remote(_load_class(class_path), name, namespace, detached, config, spread=True).remote(
                    data_dir, partition, config)
                cluster.directory.keep(name, handle)
                refs.append(handle.ready.remote())
        refs += start_partition_hosts(cluster.directory, deployment, nodes)
        gateways = cluster._start_gateways() if config.get("listeners") else []
        try:
            status = ray.get(controller.ready.remote(), timeout=120)
            if status["state"] != "active":
                raise KafkaError(Errors.COORDINATOR_NOT_AVAILABLE, f"the controller did not load: {status['error']}")
            scram_enabled = [m for m in parse_mechanisms(config.get("sasl.enabled.mechanisms", DEFAULT_MECHANISMS))
                             if m in scram.MECHANISMS] or ["SCRAM-SHA-256"]  # PLAIN checks against a SCRAM credential
            for user, password in initial_users.items():
                for mechanism in scram_enabled:
                    cluster.add_user(user, password, mechanism)
            for status in ray.get(refs, timeout=120):
                if status["state"] != "active":
                    raise KafkaError(Errors.COORDINATOR_NOT_AVAILABLE,
                                     f"{status['name']} did not load: {status['error']}")
            ray.get(gateways, timeout=60)
        except BaseException:
            cluster.destroy()  # a deployment that did not start leaves none of itself behind
            raise
        return cluster

    def _start_gateways(self) -> list:
        """One gateway per live Ray node, pinned there (it goes with its node); broker ids
        count from this process's node, so a single-node deployment's broker is 0. The refs
        of their starts."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        from .server.gateway.actor import GatewayActor
        refs = []
        for broker_id, node in enumerate(_live_nodes()):
            name = naming.gateway(broker_id)
            # Every node gets one, whether or not it has the resources the others ask for.
            gateway = remote(GatewayActor, name, self.namespace, self.detached, self.config, restartable=False,
                             strategy=NodeAffinitySchedulingStrategy(node, soft=False), resources=False).remote(
                self._deployment, broker_id)
            self.directory.keep(name, gateway)
            refs.append(gateway.start.remote())
        return refs

    # ------------------------------------------------------------------ handles

    def _actor(self, name: str) -> Any:
        return self.directory.get(name)

    def _forget(self, name: str) -> None:
        self.directory.forget(name)

    def _call(self, name: str, method: str, *args, timeout_s: float = 30.0) -> Any:
        return self.directory.call(name, method, *args, timeout_s=timeout_s)

    @property
    def controller(self) -> Any:
        return self._actor(naming.CONTROLLER)

    @property
    def bootstrap_servers(self) -> str:
        """host:port of every Kafka gateway (one per node) on the first listener of config
        "listeners", comma-separated as Kafka clients take them."""
        return self.bootstrap_servers_of(None)

    def bootstrap_servers_of(self, listener: str | None) -> str:
        """As bootstrap_servers, on the listener named `listener` (PLAINTEXT, SSL, ...)."""
        if not self.config.get("listeners"):
            raise KafkaError(Errors.INVALID_CONFIG, "no Kafka gateway: the cluster was started without listeners")
        prefix = naming.gateway(0)[:-1]
        names = sorted((n for n in self.actors() if n.startswith(prefix)), key=lambda n: int(n[len(prefix):]))
        ray.get([self._actor(n).start.remote() for n in names], timeout=30)
        addresses = ray.get([self._actor(n).addresses.remote() for n in names], timeout=30)
        name = (listener or next(iter(addresses[0]))).upper() if addresses else listener
        if addresses and name not in addresses[0]:
            raise KafkaError(Errors.INVALID_CONFIG, f"no listener {listener!r}; there are {sorted(addresses[0])}")
        return ",".join(a[name] for a in addresses)

    def partition_leader(self, topic: str, partition: int) -> "PartitionHandle":
        """The topic partition's leader as an actor-like handle: its `produce`, `fetch`,
        `list_offsets`, `delete_records`, `write_txn_markers`, `status` and `apply_retention`
        have a `.remote()` that reaches the partition on its host."""
        return PartitionHandle(self.partition_host(topic, partition), topic, partition)

    def partition_host(self, topic: str, partition: int) -> Any:
        """The partition host actor that leads the topic partition."""
        return self._actor(naming.partition_host_of(topic, partition, self.config))

    def transaction_coordinator(self, transactional_id: str) -> Any:
        return self._actor(naming.find_coordinator(naming.CoordinatorType.TRANSACTION, transactional_id, self.config))

    # ------------------------------------------------------------------ transactions

    def describe_transactions(self, transactional_ids: list[str]) -> list:
        """DescribeTransactionsTransactionState of each id, from the coordinator that owns it."""
        from runtime.messages.txn import DescribeTransactionsRequest
        by_coordinator: dict[str, list[str]] = {}
        for tid in transactional_ids:
            by_coordinator.setdefault(naming.find_coordinator(naming.CoordinatorType.TRANSACTION, tid, self.config),
                                      []).append(tid)
        states = {}
        for coordinator, tids in by_coordinator.items():
            response = self._call(coordinator, "describe_transactions", DescribeTransactionsRequest(tuple(tids)))
            states.update((s.transactional_id, s) for s in response.transaction_states)
        return [states[tid] for tid in transactional_ids]

    def list_transactions(self, state_filters=(), producer_id_filters=(), duration_filter: int = -1,
                          transactional_id_pattern: str | None = None) -> list:
        """ListTransactionsTransactionState of every coordinator's transactions that pass the filters."""
        from runtime.messages.txn import ListTransactionsRequest
        request = ListTransactionsRequest(tuple(state_filters), tuple(producer_id_filters), duration_filter,
                                          transactional_id_pattern)
        out = []
        for coordinator in naming.every_coordinator(naming.CoordinatorType.TRANSACTION, self.config):
            response = self._call(coordinator, "list_transactions", request)
            if response.error_code:
                raise KafkaError(Errors.for_code(response.error_code), "list_transactions failed")
            out.extend(response.transaction_states)
        return out

    def group_coordinator(self, group_id: str) -> Any:
        """The group coordinator actor of `group_id`'s __consumer_offsets partition."""
        return self._actor(naming.find_coordinator(naming.CoordinatorType.GROUP, group_id, self.config))

    def share_coordinator(self, group_id: str, topic: str, partition: int) -> Any:
        """The share coordinator actor that keeps the state of `group_id` on the topic partition."""
        key = naming.share_coordinator_key(group_id, self.describe_topic(topic).topic_id, partition)
        return self._actor(naming.find_coordinator(naming.CoordinatorType.SHARE, key, self.config))

    # ------------------------------------------------------------------ users

    def add_user(self, name: str, password: str, mechanism: str = "SCRAM-SHA-256",
                 iterations: int = scram.MIN_ITERATIONS) -> None:
        """Create or replace the user's credential for one SCRAM mechanism (SASL PLAIN checks
        passwords against any of them). The password is salted and hashed here, as Kafka's
        admin client does; only keys derived from it are stored."""
        salt = secrets.token_bytes(32)
        scram.check_iterations(iterations)
        self._alter_users([], [{"name": name, "mechanism": scram.mechanism_type(mechanism),
                                "iterations": iterations, "salt": salt,
                                "salted_password": scram.salted_password(mechanism, password, salt, iterations)}])

    def delete_user(self, name: str, mechanism: str | None = None) -> None:
        """Remove the user's credential for `mechanism`, or all of them."""
        if mechanism is None:
            codes = [c["mechanism"] for c in self._describe_users([name])[0]["credential_infos"]]
        else:
            codes = [scram.mechanism_type(mechanism)]
        self._alter_users([{"name": name, "mechanism": code} for code in codes], [])

    def list_users(self) -> list[dict]:
        """{"user", "mechanism", "iterations"} of every stored credential."""
        return [{"user": r["user"], "mechanism": scram.MECHANISM_TYPES[c["mechanism"]], "iterations": c["iterations"]}
                for r in self._describe_users(None) for c in r["credential_infos"]]

    def _alter_users(self, deletions: list[dict], upsertions: list[dict]) -> None:
        for result in self._call(naming.CONTROLLER, "alter_user_scram_credentials", deletions, upsertions):
            if result["error_code"]:
                raise KafkaError(Errors.for_code(result["error_code"]), result["error_message"])

    def _describe_users(self, names: list[str] | None) -> list[dict]:
        answer = self._call(naming.CONTROLLER, "describe_user_scram_credentials",
                            None if names is None else [{"name": n} for n in names])
        for result in answer["results"]:
            if result["error_code"]:
                raise KafkaError(Errors.for_code(result["error_code"]), result["error_message"])
        return answer["results"]

    # ------------------------------------------------------------------ topics

    def create_topic(self, name: str, partitions: int = 1, config: dict | None = None) -> TopicDescription:
        request = CreateTopicsRequest((CreatableTopic(name, partitions, -1, tuple(
            CreatableTopicConfig(k, str(v)) for k, v in (config or {}).items())),))
        (result,) = self._call(naming.CONTROLLER, "create_topics", request).topics
        if result.error_code:
            raise KafkaError(Errors.for_code(result.error_code), result.error_message)
        topic = TopicDescription(name, result.topic_id, result.num_partitions, result.configs)
        self._start_partitions(topic, range(topic.partitions))
        self._topics_changed()
        return topic

    def create_partitions(self, name: str, count: int) -> TopicDescription:
        before = self.describe_topic(name)
        request = CreatePartitionsRequest((CreatePartitionsTopic(name, count),))
        (result,) = self._call(naming.CONTROLLER, "create_partitions", request).results
        if result.error_code:
            raise KafkaError(Errors.for_code(result.error_code), result.error_message)
        after = self.describe_topic(name)
        self._start_partitions(after, range(before.partitions, after.partitions))
        self._topics_changed()
        return after

    def _start_partitions(self, topic: TopicDescription, partitions) -> None:
        start_partitions(self.directory, self.config, topic.name, topic.topic_id, topic.configs, partitions)

    def delete_topic(self, name: str) -> None:
        topic = self.describe_topic(name)
        (result,) = self._call(naming.CONTROLLER, "delete_topics", DeleteTopicsRequest((name,))).responses
        if result.error_code:
            raise KafkaError(Errors.for_code(result.error_code), result.error_message)
        delete_partitions(self.directory, self.config, name, range(topic.partitions))
        self._topics_changed()

    def _topics_changed(self) -> None:
        topics_changed(self.directory, self.config)

    def list_topics(self) -> list[str]:
        return [t.name for t in self.describe_topics()]

    def describe_topics(self, names: list[str] | None = None) -> list[TopicDescription]:
        response = self._call(naming.CONTROLLER, "metadata", MetadataRequest(tuple(names) if names else None))
        out = []
        for t in response.topics:
            if t.error_code:
                raise KafkaError(Errors.for_code(t.error_code), f"topic {t.name!r} does not exist")
            out.append(TopicDescription(t.name, t.topic_id, len(t.partitions), t.configs))
        return out

    def describe_topic(self, name: str) -> TopicDescription:
        return self.describe_topics([name])[0]

    # ------------------------------------------------------------------ clients

    def admin(self, timeout_s: float = 30.0) -> "Admin":
        """Kafka's Admin API for groups, share groups and transactions (actors/admin.py)."""
        from .clients.admin import Admin
        return Admin(self, timeout_s)

    def producer(self, **config) -> "Producer":
        from .clients.producer import Producer
        return Producer(self, **config)

    def consumer(self, group_id: str | None = None, **config) -> "Consumer":
        """kafka-python's KafkaConsumer over a client actor; `group_protocol="classic"` (the
        default) or `"consumer"` (KIP-848, with `group_remote_assignor`)."""
        from .clients.consumer import Consumer
        return Consumer(self, group_id=group_id, **config)

    def share_consumer(self, group_id: str, **config) -> "ShareConsumer":
        """confluent-kafka's ShareConsumer, its background work on this process's network
        thread; `share_acknowledgement_mode` is "implicit" (default) or "explicit"."""
        from .clients.share_consumer import ShareConsumer
        consumer = ShareConsumer(self, group_id, **config)
        self._share_consumers.add(consumer)
        return consumer

    # ------------------------------------------------------------------ status and shutdown

    def actors(self) -> list[str]:
        return sorted(a["name"] for a in ray.util.list_named_actors(all_namespaces=True)
                      if a["namespace"] == self.namespace and a["name"].startswith("shoal/"))

    def status(self) -> list[dict]:
        """Every actor of the deployment with its state (loading, active, restarting...)."""
        names = self.actors()
        refs = {n: self._actor(n).status.remote() for n in names}
        out = []
        for name, ref in refs.items():
            try:
                s = ray.get(ref, timeout=10)
            except Exception as e:
                s = {"state": "restarting" if isinstance(e, ray.exceptions.ActorUnavailableError) else "dead",
                     "error": str(to_kafka_error(e))}
            out.append({"actor": name, **s})
        return out

    def shutdown(self) -> None:
        """Stop this deployment's actors if this process made it (a local cluster, or
        `shoal down`); a connected client only lets go. Share consumers made here and not
        closed stop first, sending nothing more."""
        if self._closed:
            return
        self._closed = True
        for consumer in list(self._share_consumers):
            consumer._abandon()  # those not closed: as if their process ended
        if self._owns_deployment or not self.detached:
            self.destroy()
        if self._owns_data_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)
        if self._owns_ray and ray.is_initialized():
            ray.shutdown()

    def destroy(self) -> None:
        """Kill every actor of the deployment (the data directory stays)."""
        if not ray.is_initialized():
            return
        for name in self.actors():
            try:
                ray.kill(ray.get_actor(name, namespace=self.namespace), no_restart=True)
            except Exception:
                pass
        self.directory.clear()

    def __enter__(self) -> "Cluster":
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()
