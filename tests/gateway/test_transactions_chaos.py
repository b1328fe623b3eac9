"""Consume-transform-produce under random client kills: worker processes with Kafka's
exactly-once recipe (tests/gateway/ctp_worker.py; confluent-kafka and aiokafka) are SIGKILLed
at random moments and started again under the same transactional id, which fences the dead
instance and aborts its open transaction. Every input record must reach the output exactly
once as a read_committed consumer sees it."""
import os
import random
import signal
import subprocess
import sys
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.conftest import ROOT, wait_until

pytestmark = pytest.mark.ray

CLUSTER_CONFIG = {"group.min.session.timeout.ms": 1000, "group.initial.rebalance.delay.ms": 200}
PARTITIONS = 3


class Worker:
    def __init__(self, client, bootstrap, group, source, sink, txn_id) -> None:
        self.args = [sys.executable, "-m", "tests.gateway.ctp_worker", client, bootstrap, group, source, sink, txn_id]
        self.start()

    def start(self) -> None:
        self.proc = subprocess.Popen(self.args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)


def committed_inputs(bootstrap, group, source) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        return sum(max(tp.offset, 0) for tp in c.committed(
            [TopicPartition(source, p) for p in range(PARTITIONS)], 30))
    finally:
        c.close()


def read_committed_keys(bootstrap, sink, expected) -> list[bytes]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{sink}-check", "auto.offset.reset": "earliest",
                  "isolation.level": "read_committed", "enable.auto.commit": False})
    keys: list[bytes] = []
    try:
        c.subscribe([sink])

        def step():
            keys.extend(m.key() for m in c.consume(500, 0.5) if m.error() is None)
            return len(keys) >= expected
        wait_until(step, timeout_s=60, interval_s=0, message=f"{expected} committed outputs")
        keys.extend(m.key() for m in c.consume(500, 2.0) if m.error() is None)  # anything more: a duplicate
    finally:
        c.close()
    return keys


@pytest.mark.parametrize("client", ["confluent", "aiokafka"])
def test_each_input_once_in_the_output_under_random_kills(cluster, bootstrap, client):
    seed = int(os.environ.get("SHOAL_CHAOS_SEED", random.randrange(1 << 30)))
    print(f"seed {seed}")
    rng = random.Random(seed)
    source, sink, group = f"ctp-in-{client}", f"ctp-out-{client}", f"ctp-{client}"
    cluster.create_topic(source, PARTITIONS)
    cluster.create_topic(sink, PARTITIONS)
    n = 10000
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(n):
        producer.produce(source, f"{i}".encode(), partition=i % PARTITIONS)
    assert producer.flush(30) == 0
    workers = [Worker(client, bootstrap, group, source, sink, f"{group}-{slot}") for slot in range(2)]
    try:
        kills = 0
        deadline = time.monotonic() + 150
        while committed_inputs(bootstrap, group, source) < n:
            assert time.monotonic() < deadline, f"only {committed_inputs(bootstrap, group, source)} of {n} consumed"
            for w in workers:
                if w.proc.poll() is not None:  # a worker that failed (fenced, or a fatal error) starts again
                    w.start()
            if kills < 5:
                w = rng.choice(workers)
                w.kill()
                kills += 1
                w.start()  # the same transactional id: the dead instance is fenced, its transaction aborted
            time.sleep(rng.uniform(0.2, 1.0))  # a random moment in the workers' loop, not a wait for a state
        assert kills >= 1
    finally:
        for w in workers:
            w.kill()
    keys = read_committed_keys(bootstrap, sink, n)
    duplicates = sorted({k for k in keys if keys.count(k) > 1})
    assert not duplicates, f"seed {seed}: {len(duplicates)} inputs twice in the output, e.g. {duplicates[:5]}"
    assert sorted(keys) == sorted(f"{i % PARTITIONS}:{i // PARTITIONS}".encode() for i in range(n)), f"seed {seed}"
