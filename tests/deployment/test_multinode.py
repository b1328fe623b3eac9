"""Node failure on a multi-node Ray cluster (Ray's own `ray.cluster_utils.Cluster`: a head and
two worker nodes on this machine, sharing the data directory as nodes share a filesystem).

The deployment spreads its actors over the workers (`actor.placement` = "spread"); clients
run beside the driver on the head. While a producer, a classic consumer group, a share
consumer and a transactional producer work, the worker that hosts a group, a share and a
transaction coordinator, a partition leader and its SharePartition is removed. Ray restarts
the lost actors on the other worker, they load from the shared directory, the clients find
them again, and afterwards: no acknowledged produce or commit is lost, no partition was
owned by two consumers at once, every share record ended acknowledged (or archived) once,
and each committed transaction's records appear once, an aborted one's never.

This module runs its own Ray cluster: it shuts the session's Ray down first and starts it
again after (tests.conftest.init_session_ray)."""
import threading
import time

import pytest

from actors import AcknowledgeType, Cluster, naming
from runtime.hashing import partition_for, state_partition_for
from tests.conftest import BASE_CONFIG
from tests.helpers import (Ownership, Worker, double_owners, read_partition, share_start_offset,
                           transactions_settled)
from tests.share_history import ShareHistory
from tests.conftest import own_ray_cluster, wait_until

pytestmark = pytest.mark.ray

SERVER = "shoal-server"  # the resource only the worker nodes have
LIMIT = 5
COUNTS = 2  # state partitions of each coordinator kind: one on each worker
CONFIG = {**BASE_CONFIG, "actor.placement": "spread", "actor.resources": {SERVER: 1},
          "offsets.topic.num.partitions": COUNTS, "share.coordinator.state.topic.num.partitions": COUNTS,
          "transaction.state.log.num.partitions": COUNTS,
          "share.auto.offset.reset": "earliest", "group.share.record.lock.duration.ms": 5000,
          "group.share.delivery.count.limit": LIMIT,
          "group.share.heartbeat.interval.ms": 500, "group.share.min.heartbeat.interval.ms": 100,
          "group.share.session.timeout.ms": 20000, "group.share.min.session.timeout.ms": 1000}
CONSUMER = dict(session_timeout_ms=20000, heartbeat_interval_ms=500, max_poll_records=50,
                auto_offset_reset="earliest", enable_auto_commit=False, fetch_max_wait_ms=200)


@pytest.fixture(scope="module")
def nodes():
    """A head (the driver and the clients) and two workers (the deployment's actors)."""
    with own_ray_cluster() as rc:
        yield rc, [rc.add_node(num_cpus=0, resources={SERVER: 1000}) for _ in range(2)]


def node_of(cluster, name):
    return cluster.directory.call(name, "status", timeout_s=60)["node_id"]  # retried while it restarts


def key_on(prefix, *on_victim):
    """A key (group or transactional id) for which each `on_victim(key)` holds."""
    for i in range(1000):
        key = f"{prefix}-{i}"
        if all(check(key) for check in on_victim):
            return key
    raise AssertionError(f"no {prefix} key lands on the victim node")


def test_a_worker_node_dies_under_load(nodes, tmp_path):
    rc, workers = nodes
    cluster = Cluster.local(data_dir=str(tmp_path / "shared"), config=CONFIG)
    stop = threading.Event()
    threads = []
    try:
        cluster.create_topic("mn", 2)
        cluster.create_topic("mn-txn", 2)
        worker_ids = {w.node_id for w in workers}
        victim = node_of(cluster, naming.partition_host_of("mn", 0, cluster.config))
        assert victim in worker_ids
        kinds = {kind: [node_of(cluster, name(p)) for p in range(COUNTS)] for kind, name in
                 (("group", naming.group_coordinator), ("share", naming.share_coordinator),
                  ("txn", naming.transaction_coordinator))}
        assert all(victim in placed for placed in kinds.values()), f"spread placement: {kinds}, victim {victim}"
        assert set(kinds["group"]) <= worker_ids  # nothing of the deployment on the head
        topic_id = cluster.describe_topic("mn").topic_id
        group = key_on("mn-classic", lambda k: kinds["group"][partition_for(k, COUNTS)] == victim)
        share_group = key_on("mn-share", lambda k: kinds["group"][partition_for(k, COUNTS)] == victim,
                             lambda k: victim in {kinds["share"][state_partition_for(k, topic_id, p, COUNTS)]
                                                  for p in range(2)})
        tid = key_on("mn-txn", lambda k: kinds["txn"][partition_for(k, COUNTS)] == victim)

        produced: dict = {}  # (partition, offset) -> value, acknowledged
        committed: dict = {}  # TopicPartition -> the highest offset a commit() acknowledged
        ownership: list = []
        history = ShareHistory(LIMIT)  # the share group's deliveries and acknowledgements
        killed_at = [float("inf")]
        txns = {"committed": set(), "aborted": set(), "unknown": set()}
        unsettled: list = []  # committed transactions with a send not (successfully) answered

        producer = cluster.producer(linger_ms=2, enable_idempotence=True)
        seq = iter(range(10 ** 9))

        def produce():
            futures = [(i, producer.send("mn", f"p{i}".encode(), partition=i % 2)) for i in
                       (next(seq) for _ in range(10))]
            for i, f in futures:
                md = f.get(timeout=60)
                produced[(md.partition, md.offset)] = f"p{i}".encode()

        def classic_member(n):
            consumer = cluster.consumer(group, client_id=f"mn-c{n}", **CONSUMER)
            listener = Ownership(n, ownership)
            consumer.subscribe(["mn"], listener=listener)

            def step():
                records = consumer.poll(200)
                if records:
                    offsets = {tp: rs[-1].offset + 1 for tp, rs in records.items()}
                    consumer.commit()
                    for tp, o in offsets.items():
                        committed[tp] = max(committed.get(tp, 0), o)
            return consumer, listener, step

        share = cluster.share_consumer(share_group, share_acknowledgement_mode="explicit", fetch_max_wait_ms=200)
        share.subscribe("mn")

        def share_step():
            records = share.poll(0.2)
            if not records:
                return
            history.delivered(share.member_id, records, share._call("state")["joins"])
            for r in records:
                share.acknowledge(r, AcknowledgeType.ACCEPT)
            acks, sent = dict.fromkeys(records, AcknowledgeType.ACCEPT), time.monotonic()
            try:
                results = share.commit_sync(timeout=60)
            except Exception:
                history.acknowledged(share.member_id, acks, None, sent)
                raise
            history.acknowledged(share.member_id, acks, {(tp.topic, tp.partition): e for tp, e in results.items()},
                                 sent)

        txn_state = {"producer": None, "n": 0}

        def txn_step():
            if txn_state["producer"] is None:
                p = cluster.producer(transactional_id=tid, linger_ms=2)
                p.init_transactions()
                txn_state["producer"] = p
            p, n = txn_state["producer"], txn_state["n"]
            txn_state["n"] += 1
            try:
                p.begin_transaction()
                futures = [p.send("mn-txn", f"t{n}-{k}".encode(), partition=k % 2) for k in range(3)]
                if n % 3 == 2:
                    p.abort_transaction()
                    txns["aborted"].add(n)
                else:
                    p.commit_transaction()
                    txns["committed"].add(n)
                    # As Kafka's: the commit returns only once every send in it succeeded.
                    if not all(f.done() and f.exception() is None for f in futures):
                        unsettled.append(n)
            except Exception:
                txns["unknown"].add(n)
                try:
                    p.abort_transaction()
                except Exception:
                    txn_state["producer"] = None  # start over: init_transactions fences the old one
                    p.close(timeout=5)
                raise

        members = [classic_member(n) for n in range(2)]
        threads = [Worker("produce", produce, stop), Worker("share", share_step, stop), Worker("txn", txn_step, stop)]
        threads += [Worker(f"classic-{n}", step, stop) for n, (_, _, step) in enumerate(members)]
        for t in threads:
            t.start()

        def progress():
            """Per ledger (the victim's partition 0 on its own): what was acknowledged so far."""
            acked, shared = list(produced), history.settled()  # the workers add to them meanwhile
            return (sum(1 for p, _ in acked if p == 0), len(acked), sum(list(committed.values())),
                    sum(1 for (_, p), _ in shared if p == 0), len(shared), len(txns["committed"]))
        wait_until(lambda: min(progress()) >= 1 and len(produced) >= 40, timeout_s=90, message="work under way")
        sp_name = naming.share_partition(share_group, "mn", 0)
        assert node_of(cluster, sp_name) == victim  # beside its leader

        def share_partitions():
            """Each SharePartition's process and leader epoch (a reload changes the epoch)."""
            out = {}
            for p in range(2):
                try:
                    status = cluster.directory.call(naming.share_partition(share_group, "mn", p), "status", timeout_s=5)
                    out[p] = (status["pid"], status["leader_epoch"])
                except Exception as e:
                    out[p] = type(e).__name__
            return out
        partitions_before = share_partitions()
        before = progress()
        killed_at[0] = time.monotonic()
        history.fault("node")  # the SharePartition beside the leader restarts elsewhere
        rc.remove_node(next(w for w in workers if w.node_id == victim), allow_graceful=False)
        # Every client goes on: each ledger grows past what it had when the node went.
        try:
            wait_until(lambda: all(a > b for a, b in zip(progress(), before)), timeout_s=120, interval_s=0.5,
                       message=f"every client making progress after the node died (before {before})")
        except AssertionError as e:
            raise AssertionError(f"{e}; now {progress()}; errors: "
                                 f"{ {t.name: t.errors[-3:] for t in threads} }") from None
        wait_until(lambda: node_of(cluster, naming.partition_host_of("mn", 0, cluster.config)) != victim, timeout_s=60,
                   message="the leader restarted on the other worker")
        stop.set()
        for t in threads:
            t.join(timeout=90)
        assert not any(t.is_alive() for t in threads)

        # Acknowledged produces are all there, once.
        log = {(p, o): v for p in range(2) for o, v in read_partition(cluster, "mn", p)}
        assert {k: log.get(k) for k in produced} == produced
        values = [v for v in log.values() if v.startswith(b"p")]
        assert len(values) == len(set(values)), "a produce was written twice"

        # Acknowledged commits are all there; no partition had two owners at once.
        offsets = cluster.admin().list_group_offsets(group)
        for tp, offset in committed.items():
            assert offsets[tp].committed_offset >= offset, (tp, offsets[tp], offset)
        for consumer, listener, _ in members:
            consumer.close()
            listener.close()
        assert not double_owners(ownership)

        # Every share record ends acknowledged exactly once (or archived at the delivery limit).
        ends = {p: max((o for (q, o) in log if q == p), default=-1) + 1 for p in range(2)}

        def drained():
            # A SharePartition not running now (-1) is made again by the consumer's next fetch.
            share_step()
            return all(share_start_offset(cluster, share_group, "mn", p) >= ends[p] for p in range(2))
        try:
            wait_until(drained, timeout_s=90, interval_s=0, message="the share group at the end of the log")
        except AssertionError as e:
            raise AssertionError(f"{e}: ends {ends}, start offsets "
                                 f"{[share_start_offset(cluster, share_group, 'mn', p) for p in range(2)]}, "
                                 f"SharePartitions {share_partitions()}, consumer {share._call('state')}") from None
        partitions_after, consumer_state = share_partitions(), share._call("state")
        history.member_joins(share.member_id, consumer_state["joins"])
        share.close()
        violations = history.check([(("mn", p), o) for p, o in log])

        # Committed transactions appear once, aborted ones never, unknown ones whole or not at all.
        # A new producer of the transactional id aborts whatever the last one left open.
        if txn_state["producer"] is not None:
            txn_state["producer"].close(timeout=10)
        last = cluster.producer(transactional_id=tid)
        last.init_transactions()
        last.close(timeout=10)

        wait_until(lambda: transactions_settled(cluster, "mn-txn", 2), timeout_s=60, interval_s=0.5,
                   message="every transaction on mn-txn decided")
        txn_values = [v.decode() for p in range(2) for _, v in read_partition(cluster, "mn-txn", p, committed=True)]
        by_txn: dict = {}
        for v in txn_values:
            n = int(v[1:].split("-")[0])
            by_txn[n] = by_txn.get(n, 0) + 1
        counts = {kind: {n: by_txn.get(n, 0) for n in ns} for kind, ns in txns.items()}
        bad = {n: c for n, c in counts["committed"].items() if c != 3}
        assert not bad, f"committed transactions without their records: {bad}"
        assert set(counts["aborted"].values()) <= {0}, counts
        assert set(counts["unknown"].values()) <= {0, 3}, counts
        assert len(txn_values) == len(set(txn_values)), "a transaction's record appears twice"
        assert not unsettled, f"commit_transaction returned before its sends were answered: {unsettled}"
        # The share group's history breaks no promise (tests/share_history.py): in particular an
        # acknowledgement of a stale copy (buffered past its lock while a commit waited for the
        # restarting SharePartition) names its own delivery and is never taken for the next one.
        assert not violations, (f"{len(violations)} violations, node removed at {killed_at[0]:.1f}: "
                                + "\n".join(violations[:5])
                                + f"\nSharePartitions (pid, epoch) before {partitions_before}, after {partitions_after}"
                                + f"; share consumer {consumer_state}")
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)
        cluster.shutdown()
