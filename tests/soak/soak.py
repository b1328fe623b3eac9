"""The chaos soak: every protocol at once while actors of every kind are killed at random.

For `--minutes`, a producer, a classic consumer group, a KIP-848 consumer group, a share
group and a transactional producer work on a Cluster.local, while the chaos loop kills, at
random, a group, share or transaction coordinator, the controller (the SharePartitions it
created end with it), a partition leader, a SharePartition, a consumer's client actor, a
share consumer (stopped as if its process died), or the process of the share group's Kafka
member (confluent-kafka's ShareConsumer, librdkafka's KIP-932 client, unmodified, through the
gateway); its user then starts a new one. Ray restarts the server actors (they reload from
their logs); the clients find them again. The chaos is drawn from `--seed`, printed on
stderr when the run starts and kept in the summary. Every client keeps a ledger, and at the
end the soak checks:

- every acknowledged produce is in the log, once;
- every acknowledged offset commit is at or below the group's committed offset;
- no partition was owned by two members of a group at once (a member that learns it was
  fenced, on_partitions_lost, stopped owning at the fence, before it learnt it);
- the share group's history (every delivery, acknowledgement and outcome, shoal's and the
  Kafka member's alike, consumers killed, SharePartition-side restarts, start offsets seen)
  passes the history checker
  (tests/share_history.py): no record held twice, none delivered again after a successful
  acknowledgement or settled twice, every one acknowledged or archived, with the share group
  at the end of the log;
- each committed transaction's records appear once with read_committed, an aborted one's
  never, one whose outcome the client did not learn wholly or not at all.

It prints a JSON summary (faults by kind, what was checked, violations) and exits with 1 on a
violation. Every loop and wait is bounded; the cluster and its data are removed at the end.
Run on demand: `.venv/bin/python -m tests.soak.soak --minutes 10`; tests/soak/test_soak.py
runs half a minute in the normal suite.

Every log's fsyncs go through tests/soak/chaos_io.py (`log.io.class`; `--no-disk-faults`
turns it off): 1% are slow (200 ms) and 0.2% fail, which takes the log offline until its
actor reopens it. With `--nodes N` the soak runs on a Ray cluster of its own (Ray's
`ray.cluster_utils.Cluster`: a head for the clients and N worker nodes sharing the data
directory, the deployment spread over them) and the chaos also removes a whole worker node,
adding a fresh one in its place; the actors it hosted come back on the others.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from typing import NamedTuple

import ray

from actors import AcknowledgeType, Cluster, naming
from tests.helpers import Ownership, Worker, double_owners, read_partition, transactions_settled
from tests.share_history import ShareHistory

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Ray's workers (and the worker nodes' raylets) inherit this, rather than a runtime_env,
# which would start each actor's worker through Ray's slower setup wrapper.
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)
TOPIC, TXN_TOPIC, PARTITIONS = "soak", "soak-txn", 2
LIMIT = 5  # group.share.delivery.count.limit
CONFIG = {"log.flush.fsync": False, "log.retention.check.interval.ms": 3600000,
          "offsets.topic.num.partitions": 2, "share.coordinator.state.topic.num.partitions": 2,
          "transaction.state.log.num.partitions": 1,
          "share.auto.offset.reset": "earliest", "group.share.record.lock.duration.ms": 3000,
          "group.share.delivery.count.limit": LIMIT,
          "group.share.heartbeat.interval.ms": 500, "group.share.min.heartbeat.interval.ms": 100,
          "group.share.session.timeout.ms": 6000, "group.share.min.session.timeout.ms": 1000,
          "group.consumer.heartbeat.interval.ms": 500, "group.consumer.min.heartbeat.interval.ms": 100,
          "group.consumer.session.timeout.ms": 6000, "group.consumer.min.session.timeout.ms": 1000,
          "group.min.session.timeout.ms": 1000,
          "listeners": "PLAINTEXT://127.0.0.1:0"}  # a gateway, for the share group's Kafka member
# With --disk-faults: every log's fsyncs go through tests/soak/chaos_io.py.
DISK_FAULTS = {"log.flush.fsync": True, "log.io.class": "tests.soak.chaos_io.ChaosIO",
               "soak.fsync.slow.rate": 0.01, "soak.fsync.slow.ms": 200, "soak.fsync.fail.rate": 0.002}
CONSUMER = dict(session_timeout_ms=6000, heartbeat_interval_ms=500, max_poll_records=50,
                auto_offset_reset="earliest", enable_auto_commit=False, fetch_max_wait_ms=200)
PRODUCE_BATCH, PRODUCE_PAUSE_S = 5, 0.25  # about 20 records a second
KILL_EVERY_S = (0.5, 2.5)  # the chaos loop's pause between two faults, drawn uniformly
DRAIN_S = 120  # the longest the end may wait for the share group and the transactions


class Member:
    """One consumer slot of a group: the consumer in use, replaced when its actor is killed."""

    def __init__(self, soak: "Soak", group: str, protocol: str, n: int) -> None:
        self.soak, self.group, self.protocol, self.n = soak, group, protocol, n
        self.lock = threading.Lock()
        self.generation = 0
        self.consumer = self.listener = None
        self._start()

    def _start(self) -> None:
        self.generation += 1
        extra = {"group_protocol": "consumer"} if self.protocol == "consumer" else {}
        consumer = self.soak.cluster.consumer(self.group, client_id=f"{self.group}-{self.n}-{self.generation}",
                                              **CONSUMER, **extra)
        listener = Ownership(f"{self.n}.{self.generation}", self.soak.ownership[self.group])
        consumer.subscribe([TOPIC], listener=listener)
        self.consumer, self.listener = consumer, listener

    def kill(self) -> None:
        with self.lock:
            self.listener.close()  # what it owned ends now: its partitions move after the session timeout
            ray.kill(self.consumer._actor, no_restart=True)
            self.consumer = None

    def step(self) -> None:
        with self.lock:
            if self.consumer is None:
                self._start()
            consumer = self.consumer
        records = consumer.poll(200)
        if records:
            offsets = {tp: rs[-1].offset + 1 for tp, rs in records.items()}
            consumer.commit()
            # commit() stores what the consumer owns when it runs, as Kafka's commitSync()
            # does: a partition the member lost meanwhile (a fence gives it up at once) was
            # not in it, so only those still owned after it count as acknowledged.
            owned = consumer.assignment()
            self.soak.commits += 1
            committed = self.soak.committed[self.group]
            for tp, o in offsets.items():
                if tp in owned:
                    committed[tp] = max(committed.get(tp, 0), o)

    def close(self) -> None:
        with self.lock:
            if self.consumer is not None:
                try:
                    self.consumer.close()
                except Exception:  # its coordinator may be restarting: the session ends it
                    pass
                self.listener.close()


class ShareMember:
    """One share consumer slot (explicit acknowledgement), replaced when it is killed."""

    def __init__(self, soak: "Soak", n: int) -> None:
        self.soak, self.n = soak, n
        self.lock = threading.Lock()
        self.consumer = None
        self._start()

    def _start(self) -> None:
        self.consumer = self.soak.cluster.share_consumer("soak-share", share_acknowledgement_mode="explicit",
                                                         fetch_max_wait_ms=200)
        self.consumer.subscribe(TOPIC)

    def kill(self) -> None:
        with self.lock:
            self.consumer._abandon()  # as if its process died: its calls under way fail
            self.soak.share_history.member_ended(self.consumer.member_id)
            self.consumer = None

    def step(self) -> None:
        with self.lock:
            if self.consumer is None:
                self._start()
            consumer = self.consumer
        history = self.soak.share_history
        records = consumer.poll(0.2)
        if not records:
            return
        history.delivered(consumer.member_id, records, consumer._call("state")["joins"])
        for r in records:
            consumer.acknowledge(r, AcknowledgeType.ACCEPT)
        sent = time.monotonic()
        try:
            results = consumer.commit_sync(timeout=60)
        except Exception:
            history.acknowledged(consumer.member_id, dict.fromkeys(records, AcknowledgeType.ACCEPT), None, sent)
            raise
        history.acknowledged(consumer.member_id, dict.fromkeys(records, AcknowledgeType.ACCEPT),
                             {(tp.topic, tp.partition): e for tp, e in results.items()}, sent)

    def close(self) -> None:
        with self.lock:
            if self.consumer is not None:
                try:
                    self.soak.share_history.member_joins(self.consumer.member_id,
                                                         self.consumer._call("state")["joins"])
                    self.consumer.close()
                except Exception:
                    pass
                self.soak.share_history.member_ended(self.consumer.member_id)


class StampedShareHistory(ShareHistory):
    """The share history, told when an event happened by a recorder in another process: each
    event of the Kafka member's process carries its time.monotonic(), CLOCK_MONOTONIC, one
    clock for every process of the machine, so its deliveries and acknowledgements take their
    places among shoal's as they happened, not as they were read from the pipe."""

    def __init__(self, delivery_limit: int) -> None:
        super().__init__(delivery_limit)
        self._stamp = threading.local()

    def _now(self) -> float:
        at = getattr(self._stamp, "at", None)
        return time.monotonic() if at is None else at

    @contextlib.contextmanager
    def at(self, when: float):
        """What is recorded within happened at `when` (this thread's records only)."""
        self._stamp.at = when
        try:
            yield
        finally:
            self._stamp.at = None


class Seen(NamedTuple):
    """A record as the Kafka member reported it, with what ShareHistory reads of a record."""
    topic: str
    partition: int
    offset: int
    delivery_count: int


# The Kafka member's process: confluent-kafka's ShareConsumer in explicit acknowledgement mode
# accepts every record it polls and says what happened, a JSON line an event, each stamped
# with its time.monotonic(): "polled" (the records, with their delivery counts), "sent"
# (acknowledge() only marks them; commit_sync sends them), "done" (commit_sync's answer per
# partition, or "failed"). A closed stdin asks it to close (leaving the group) and exit.
KAFKA_MEMBER = r"""
import json, select, sys, time
from confluent_kafka import AcknowledgeType, ShareConsumer

def say(**event):
    print(json.dumps(event), flush=True)

bootstrap, group, client_id, topic = sys.argv[1:5]
c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": client_id,
                   "share.acknowledgement.mode": "explicit"})
c.subscribe([topic])
while not select.select([sys.stdin], [], [], 0)[0]:
    try:
        got = [m for m in c.poll(0.2) if m.error() is None]
    except Exception as e:
        say(error=repr(e))
        select.select([sys.stdin], [], [], 0.2)  # a pause before trying again, cut short by the stop
        continue
    if not got:
        continue
    say(polled=time.monotonic(), records=[[m.topic(), m.partition(), m.offset(), m.delivery_count()] for m in got])
    for m in got:
        c.acknowledge(m, AcknowledgeType.ACCEPT)
    say(sent=time.monotonic())
    try:
        outcome = c.commit_sync(60)
    except Exception as e:
        say(done=time.monotonic(), failed=repr(e))
        continue
    say(done=time.monotonic(),
        outcomes=[[tp.topic, tp.partition, None if e is None else str(e)] for tp, e in outcome.items()])
c.close()
"""


class KafkaShareMember:
    """The share group's Kafka member: confluent-kafka's ShareConsumer through the gateway, in
    a process of its own (KAFKA_MEMBER), killed with SIGKILL as a crash would and replaced.
    librdkafka does not tell its member id: the history names each process by its client.id,
    `kafka-<n>.<generation>`. A reader thread records the process's events as they come; at
    its end (killed, closed or crashed) an acknowledgement sent and not answered is one whose
    outcome was never learnt, and the member has ended. Nor does librdkafka tell when it was
    fenced and joined again, or opened a new share session (both give back what it held): the
    history counts each process one membership, so such a give-back followed by a delivery of
    the same count elsewhere would show as a violation (a) to look into, not a shoal bug."""

    def __init__(self, soak: "Soak", n: int) -> None:
        self.soak, self.n = soak, n
        self.lock = threading.Lock()
        self.generation = 0
        self.proc = self.reader = None
        self.errors: list[str] = []  # what its polls raised, and its crashes
        self._start()

    def _start(self) -> None:
        self.generation += 1
        label = f"kafka-{self.n}.{self.generation}"
        proc = subprocess.Popen([sys.executable, "-c", KAFKA_MEMBER, self.soak.bootstrap, "soak-share", label, TOPIC],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.proc = proc
        self.reader = threading.Thread(target=self._read, args=(proc, label), name=label, daemon=True)
        self.reader.start()

    def _read(self, proc: subprocess.Popen, label: str) -> None:
        history = self.soak.share_history
        polled, sent = [], None
        for line in proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:  # a line cut short by the kill
                continue
            if "error" in event:
                self.errors.append(event["error"])
            elif "polled" in event:
                polled = [Seen(*r) for r in event["records"]]
                with history.at(event["polled"]):
                    history.delivered(label, polled)
            elif "sent" in event:
                sent = event["sent"]
            elif "done" in event:
                outcomes = None if "failed" in event else {(t, p): e for t, p, e in event["outcomes"]}
                with history.at(event["done"]):
                    history.acknowledged(label, dict.fromkeys(polled, AcknowledgeType.ACCEPT), outcomes, sent)
                polled, sent = [], None
        if sent is not None:  # it died waiting for commit_sync's answer
            history.acknowledged(label, dict.fromkeys(polled, AcknowledgeType.ACCEPT), None, sent)
        history.member_ended(label)

    def kill(self) -> bool:
        """SIGKILL: no acknowledgement, no leave; its connections close, so the gateway ends its
        share session and what it held is released. Returns once its history is recorded."""
        with self.lock:
            proc, reader, self.proc = self.proc, self.reader, None
        if proc is None:
            return False
        proc.kill()
        proc.wait()
        reader.join(timeout=30)
        return True

    def step(self) -> None:
        with self.lock:
            if self.proc is not None and self.proc.poll() is not None:
                self.reader.join(timeout=30)
                self.errors.append(f"kafka-{self.n}.{self.generation} exited with {self.proc.returncode}")
                self.proc = None
            if self.proc is None:
                self._start()
        self.soak.stop.wait(0.2)

    def close(self) -> None:
        """A clean close: it leaves the group (its held records go back) and exits."""
        with self.lock:
            proc, reader, self.proc = self.proc, self.reader, None
        if proc is None:
            return
        proc.stdin.close()
        try:
            proc.wait(timeout=90)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        reader.join(timeout=30)


class Nodes:
    """The soak's own Ray cluster: a head (the driver and the client actors) and `count`
    worker nodes, the only ones with the `SERVER` resource, so the deployment runs on them."""
    SERVER = "shoal-soak-server"

    def __init__(self, count: int) -> None:
        from ray.cluster_utils import Cluster as RayCluster
        from actors.cluster import RAY_SYSTEM_CONFIG
        self.ray_cluster = RayCluster(initialize_head=True,
                                      head_node_args=dict(num_cpus=1, _system_config=RAY_SYSTEM_CONFIG))
        # The driver connects before the workers exist, so it (and its clients) is on the head.
        ray.init(address=self.ray_cluster.address, logging_level="WARNING", log_to_driver=False)
        self.workers = [self._add() for _ in range(count)]
        self.config = {"actor.placement": "spread", "actor.resources": {self.SERVER: 1}}

    def _add(self):
        return self.ray_cluster.add_node(num_cpus=0, resources={self.SERVER: 1000})

    def replace_one(self, rng: random.Random) -> None:
        """Remove a worker node (its actors die with it) and add a fresh one."""
        victim = rng.choice(self.workers)
        self.workers.remove(victim)
        self.ray_cluster.remove_node(victim, allow_graceful=False)
        self.workers.append(self._add())

    def shutdown(self) -> None:
        ray.shutdown()
        self.ray_cluster.shutdown()


class Soak:
    def __init__(self, cluster: Cluster, seed: int, nodes: Nodes | None = None) -> None:
        self.cluster = cluster
        self.nodes = nodes
        self.rng = random.Random(seed)
        self.stop = threading.Event()
        self.produced: dict = {}  # (partition, offset) -> value, acknowledged
        self.committed: dict = {"soak-classic": {}, "soak-848": {}}  # group -> {tp: highest acknowledged}
        self.ownership: dict = {"soak-classic": [], "soak-848": []}
        self.started = time.monotonic()
        self.share_history = StampedShareHistory(LIMIT)
        self.bootstrap = cluster.bootstrap_servers
        self.txns = {"committed": set(), "aborted": set(), "unknown": set()}
        self.unsettled: list = []  # committed transactions with a send not answered
        self.faults: dict = {}
        self.fault_log: list = []  # (time.monotonic(), kind, target) of every fault, for a violation's story
        self.disk_faults = lambda: []  # the same of the disk's faults, recorded by other processes
        self.commits = 0  # offset commits acknowledged
        self._seq = 0
        self._txn = {"producer": None, "n": 0}
        self.kafka_share_members: list[KafkaShareMember] = []

    # ------------------------------------------------------------------ the work

    def _produce(self) -> None:
        futures = []
        for _ in range(PRODUCE_BATCH):
            i, self._seq = self._seq, self._seq + 1
            futures.append((i, self.producer.send(TOPIC, f"p{i}".encode(), partition=i % PARTITIONS)))
        for i, f in futures:
            md = f.get(timeout=60)
            self.produced[(md.partition, md.offset)] = f"p{i}".encode()
        self.stop.wait(PRODUCE_PAUSE_S)  # a rate the share group keeps up with under the faults

    def _transaction(self) -> None:
        state = self._txn
        if state["producer"] is None:
            p = self.cluster.producer(transactional_id="soak-txn", linger_ms=2)
            p.init_transactions()
            state["producer"] = p
        p, n = state["producer"], state["n"]
        state["n"] += 1
        try:
            p.begin_transaction()
            futures = [p.send(TXN_TOPIC, f"t{n}-{k}".encode(), partition=k % PARTITIONS) for k in range(3)]
            if n % 3 == 2:
                p.abort_transaction()
                self.txns["aborted"].add(n)
            else:
                p.commit_transaction()
                self.txns["committed"].add(n)
                if not all(f.done() and f.exception() is None for f in futures):
                    self.unsettled.append(n)
        except Exception:
            self.txns["unknown"].add(n)
            try:
                p.abort_transaction()
            except Exception:
                state["producer"] = None  # start over: init_transactions fences the old one
                p.close(timeout=5)
            raise

    def start(self) -> list[Worker]:
        self.cluster.create_topic(TOPIC, PARTITIONS)
        self.cluster.create_topic(TXN_TOPIC, PARTITIONS)
        self.producer = self.cluster.producer(linger_ms=2, enable_idempotence=True)
        self.members = [Member(self, "soak-classic", "classic", n) for n in range(2)]
        self.members += [Member(self, "soak-848", "consumer", n) for n in range(2)]
        self.share_members = [ShareMember(self, n) for n in range(2)]
        self.kafka_share_members = [KafkaShareMember(self, 0)]
        workers = [Worker("produce", self._produce, self.stop), Worker("transactions", self._transaction, self.stop)]
        workers += [Worker(f"{m.group}-{m.n}", m.step, self.stop) for m in self.members]
        workers += [Worker(f"share-{m.n}", m.step, self.stop) for m in self.share_members]
        workers += [Worker(f"kafka-share-{m.n}", m.step, self.stop) for m in self.kafka_share_members]
        for w in workers:
            w.start()
        return workers

    # ------------------------------------------------------------------ the chaos

    def _server_actors(self, kind: str) -> list[str]:
        config = self.cluster.config
        if kind == "group_coordinator":
            return [naming.group_coordinator(p) for p in range(int(config["offsets.topic.num.partitions"]))]
        if kind == "share_coordinator":
            return [naming.share_coordinator(p)
                    for p in range(int(config["share.coordinator.state.topic.num.partitions"]))]
        if kind == "transaction_coordinator":
            return [naming.transaction_coordinator(p)
                    for p in range(int(config["transaction.state.log.num.partitions"]))]
        if kind == "partition_host":
            return naming.every_partition_host(config)
        return [naming.share_partition("soak-share", TOPIC, p) for p in range(PARTITIONS)]

    def fault(self) -> None:
        kinds = ["group_coordinator", "share_coordinator", "transaction_coordinator", "controller",
                 "partition_host", "share_partition", "consumer_client", "share_consumer_client",
                 "kafka_share_consumer"]
        kind = self.rng.choice(kinds + (["node"] if self.nodes else []))
        self.fault_log.append((time.monotonic(), kind, None))
        if kind == "node":
            self.share_history.fault(kind)  # SharePartitions on it restart elsewhere
            self.nodes.replace_one(self.rng)
        elif kind == "consumer_client":
            self.rng.choice(self.members).kill()
        elif kind == "share_consumer_client":
            self.rng.choice(self.share_members).kill()
        elif kind == "kafka_share_consumer":
            if not self.rng.choice(self.kafka_share_members).kill():
                return  # between two processes
        else:
            name = naming.CONTROLLER if kind == "controller" else self.rng.choice(self._server_actors(kind))
            self.fault_log[-1] = (self.fault_log[-1][0], kind, name)
            if kind in ("share_partition", "share_coordinator", "controller"):
                # A controller restart ends the SharePartitions it created (Cluster.local).
                self.share_history.fault(kind)
            try:
                ray.kill(ray.get_actor(name, namespace=self.cluster.namespace), no_restart=False)
            except ValueError:
                return  # a SharePartition no fetch made yet, or one gone idle: nothing to kill
        self.faults[kind] = self.faults.get(kind, 0) + 1

    def run(self, seconds: float, arm=lambda: None) -> list[Worker]:
        """`arm` starts the disk faults once the topics and clients are up (a topic created
        on a failing disk is refused with KAFKA_STORAGE_ERROR, which is not what the soak is
        about)."""
        workers = self.start()
        arm()
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            time.sleep(min(self.rng.uniform(*KILL_EVERY_S), max(end - time.monotonic(), 0)))
            if time.monotonic() < end:
                self.fault()
        self.stop.set()
        for w in workers:
            w.join(timeout=120)
        return workers

    # ------------------------------------------------------------------ the checks

    def _share_diagnosis(self, drainer: "ShareMember") -> dict:
        """Where a share group that did not drain stands, for the violation's message."""
        out: dict = {}
        try:
            out["drainer_assignment"] = sorted(tp.partition for tp in drainer.consumer.assignment())
        except Exception as e:
            out["drainer_assignment"] = repr(e)
        for p in range(PARTITIONS):
            name = naming.share_partition("soak-share", TOPIC, p)
            try:
                states = self.cluster.directory.call(name, "record_states", timeout_s=10)
                held = {}
                for o, v in states.items():
                    if o != "start_offset" and v[0] != "ACKNOWLEDGED":
                        held[v[0]] = held.get(v[0], 0) + 1
                out[p] = {"start_offset": states["start_offset"], "not_acknowledged": held,
                          "status": self.cluster.directory.call(name, "status", timeout_s=10)}
            except Exception as e:
                out[p] = repr(e)
        return out

    def check(self, workers: list[Worker]) -> dict:
        violations = [f"{w.name} did not stop" for w in workers if w.is_alive()]
        log = {(p, o): v for p in range(PARTITIONS) for o, v in read_partition(self.cluster, TOPIC, p)}
        lost = [k for k, v in self.produced.items() if log.get(k) != v]
        violations += [f"acknowledged produce lost: {k}" for k in lost[:10]]
        values = list(log.values())
        if len(values) != len(set(values)):
            violations.append(f"{len(values) - len(set(values))} produced records written twice")

        for group, committed in self.committed.items():
            offsets = self.cluster.admin().list_group_offsets(group)
            for tp, o in committed.items():
                if tp not in offsets or offsets[tp].committed_offset < o:
                    violations.append(f"{group}: acknowledged commit {tp}@{o} lost ({offsets.get(tp)})")
        for m in self.members:
            m.close()
        ownership_stories = {}
        for group, intervals in self.ownership.items():
            doubles = double_owners(intervals)[:10]
            violations += [f"{group}: {tp} owned by {a} and {b} at once" for tp, a, b in doubles]
            for tp, _, _ in doubles[:1]:
                ownership_stories[f"{group} {tp}"] = self._ownership_story(intervals, tp)

        ends = {p: max((o for q, o in log if q == p), default=-1) + 1 for p in range(PARTITIONS)}
        drainer = self.share_members[0]
        for m in self.share_members[1:] + self.kafka_share_members:
            m.close()  # it leaves: the group assigns its partitions to the drainer
        deadline = time.monotonic() + DRAIN_S

        def start_offset(p):
            offset = self.cluster.directory.call(naming.share_partition("soak-share", TOPIC, p), "record_states",
                                                 timeout_s=60)["start_offset"]
            self.share_history.start_offset((TOPIC, p), offset)
            return offset
        while time.monotonic() < deadline:
            try:
                drainer.step()
                if all(start_offset(p) >= ends[p] for p in range(PARTITIONS)):
                    break
            except Exception:  # a fault's restart still under way
                time.sleep(0.2)
        else:
            violations.append(f"the share group did not reach the end of the log ({ends}) in {DRAIN_S}s: "
                              f"{self._share_diagnosis(drainer)}")
        drainer.close()
        share = self.share_history
        share_violations = share.check([((TOPIC, p), o) for p, o in log])
        violations += share_violations[:10]

        if self._txn["producer"] is not None:
            self._txn["producer"].close(timeout=10)
        last = self.cluster.producer(transactional_id="soak-txn")
        last.init_transactions()  # aborts whatever the last producer left open
        last.close(timeout=10)
        deadline = time.monotonic() + DRAIN_S
        while not transactions_settled(self.cluster, TXN_TOPIC, PARTITIONS):
            if time.monotonic() > deadline:
                violations.append("a transaction on soak-txn stayed undecided")
                break
            time.sleep(0.5)
        by_txn: dict = {}
        txn_values = [v for p in range(PARTITIONS) for _, v in read_partition(self.cluster, TXN_TOPIC, p, True)]
        for v in txn_values:
            n = int(v.decode()[1:].split("-")[0])
            by_txn[n] = by_txn.get(n, 0) + 1
        violations += [f"committed transaction {n} has {by_txn.get(n, 0)} of its 3 records"
                       for n in sorted(self.txns["committed"]) if by_txn.get(n, 0) != 3]
        violations += [f"aborted transaction {n} is visible" for n in sorted(self.txns["aborted"]) if by_txn.get(n)]
        violations += [f"transaction {n} (outcome unknown) is partly visible"
                       for n in sorted(self.txns["unknown"]) if by_txn.get(n, 0) not in (0, 3)]
        if len(txn_values) != len(set(txn_values)):
            violations.append("a transaction's record appears twice")
        violations += [f"commit_transaction {n} returned before its sends were answered" for n in self.unsettled]

        return {
            "faults": dict(sorted(self.faults.items())),
            "faults_total": sum(self.faults.values()),
            "checked": {
                "produced_records": len(self.produced),
                "offset_commits": self.commits,
                "committed_partitions_checked": sum(len(c) for c in self.committed.values()),
                "ownership_intervals": sum(len(i) for i in self.ownership.values()),
                "ownership_lost": sum(1 for i in self.ownership.values() for o in i if o[4]),
                "share_records": len(log),
                "share_deliveries": sum(len(d) for d in share.deliveries.values()),
                "share_deliveries_kafka": sum(1 for d in share.deliveries.values() for x in d
                                              if x.member.startswith("kafka-")),
                "kafka_share_members_started": sum(m.generation for m in self.kafka_share_members),
                "share_acknowledgements": sum(len(a) for a in share.acks.values()),
                "share_acknowledged": sum(1 for a in share.acks.values() if any(x.ok for x in a)),
                "share_acknowledgements_unknown": sum(1 for a in share.acks.values() if any(x.ok is None for x in a)),
                "transactions": {k: len(v) for k, v in self.txns.items()},
            },
            "client_errors": {w.name: len(w.errors) for w in workers},
            "kafka_share_member_errors": [e for m in self.kafka_share_members for e in m.errors][:10],
            "violations": violations,
            "violation_histories": {**self._stories(share_violations), **ownership_stories},
        }

    def _ownership_story(self, intervals: list, tp) -> dict:
        """The ownership intervals of a doubly owned partition around its first overlap, with
        the faults injected then (times in seconds since the soak started)."""
        mine = sorted((i for i in intervals if i[0] == tp), key=lambda i: i[2])
        first = next(i for n, i in enumerate(mine) for j in mine[n + 1:]
                     if not i[4] and not j[4] and i[1] != j[1] and j[2] < i[3])
        lo, hi = first[2] - 30, first[3] + 30
        mine = [i for i in mine if i[3] >= lo and i[2] <= hi]
        return {"intervals": [(m, round(s - self.started, 3), round(e - self.started, 3), "lost" if lost else "")
                              for _, m, s, e, lost in mine],
                "chaos": [(round(t - self.started, 3), kind, name) for t, kind, name in self.fault_log if lo <= t <= hi]}

    def _stories(self, violations: list[str], most: int = 3) -> dict:
        """The whole recorded history of the first records named by share-group violations,
        with every fault injected around it."""
        stories = {}
        for key in self.share_history.deliveries:
            if len(stories) >= most:
                break
            if any(str(key) in v for v in violations):
                story = self.share_history.explain(key)
                times = [d["at"] for d in story["deliveries"]] + [a["done"] for a in story["acks"]]
                lo, hi = min(times, default=0) - 60, max(times, default=0) + 5
                disk = [f for f in self.disk_faults() if f[1] == "fsync_failed"]
                story["chaos"] = sorted(f for f in self.fault_log + disk if lo <= f[0] <= hi)
                stories[str(key)] = story
        return stories


def _disk_faults(path: str) -> list[tuple[float, str, str]]:
    """The disk faults ChaosIO recorded: (time, kind, log)."""
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [(float(at), kind, name) for kind, at, name in (line.split(" ", 2) for line in f.read().splitlines())]


def run(minutes: float, seed: int = 0, data_dir: str | None = None, disk_faults: bool = True,
        nodes: "Nodes | None" = None) -> dict:
    """Run the soak for `minutes` on a Cluster.local (on the Ray this process is connected
    to, or a new one); the summary."""
    print(f"shoal soak: seed {seed}", file=sys.stderr, flush=True)
    started = time.monotonic()
    faults_file = tempfile.mktemp(prefix="shoal-soak-faults-")
    config = {**CONFIG, **(DISK_FAULTS if disk_faults else {}), **(nodes.config if nodes else {}),
              "soak.faults.file": faults_file}
    cluster = soak = None
    try:
        cluster = Cluster.local(data_dir=data_dir, config=config)
        soak = Soak(cluster, seed, nodes)
        soak.disk_faults = lambda: _disk_faults(faults_file)
        summary = soak.check(soak.run(minutes * 60, arm=lambda: open(faults_file + ".armed", "w").close()))
    finally:
        for m in soak.kafka_share_members if soak is not None else ():
            m.kill()  # none left behind by a soak that failed (check() closed the others)
        if cluster is not None:
            cluster.shutdown()
        disk: dict = {}
        for _, kind, _ in _disk_faults(faults_file):
            disk[kind] = disk.get(kind, 0) + 1
        for path in (faults_file, faults_file + ".armed"):
            if os.path.exists(path):
                os.unlink(path)
    summary["faults"].update(disk)
    summary["faults_total"] += sum(disk.values())
    return {"minutes": minutes, "seed": seed, "disk_faults": disk_faults,
            "nodes": len(nodes.workers) if nodes else 1, "wall_s": round(time.monotonic() - started, 1), **summary}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--seed", type=int, default=int(time.time()))
    parser.add_argument("--no-disk-faults", dest="disk_faults", action="store_false",
                        help="no slow or failing fsyncs")
    parser.add_argument("--nodes", type=int, default=0,
                        help="worker nodes of a multi-node Ray cluster of the soak's own (0: one local node)")
    args = parser.parse_args(argv)
    from actors.cluster import RAY_SYSTEM_CONFIG
    # This process's stdout is the JSON summary: the actors' logs and Ray's own warnings
    # (which Ray prints on stdout) go elsewhere.
    with contextlib.redirect_stdout(sys.stderr):
        nodes = None
        if args.nodes:
            nodes = Nodes(args.nodes)
        else:
            ray.init(address="local", include_dashboard=False, logging_level="WARNING", log_to_driver=False,
                     _system_config=RAY_SYSTEM_CONFIG)
        try:
            summary = run(args.minutes, args.seed, disk_faults=args.disk_faults, nodes=nodes)
        finally:
            if nodes:
                nodes.shutdown()
            else:
                ray.shutdown()
    print(json.dumps(summary, indent=2))
    return 1 if summary["violations"] else 0


if __name__ == "__main__":
    sys.exit(main())
