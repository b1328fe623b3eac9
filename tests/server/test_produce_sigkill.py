"""A partition leader killed with SIGKILL while two producers stream into it with acks=all and
fsync on (issue 15): Ray restarts it, it reopens its log (the killed process's lock is gone
with it), the producers retry, and afterwards every acknowledged record is in the log exactly
once, at the offset its acknowledgement gave, in each producer's order."""
import os
import signal
import threading

import ray

from actors import naming
from tests.conftest import wait_until

from tests.clients.test_produce_faults import fetch_from

CLUSTER_CONFIG = {"log.flush.fsync": True}
TOPIC = "sigkill"
CLUSTER_TOPICS = {TOPIC: 1}


def leader_status(cluster):
    return ray.get(cluster.partition_leader(TOPIC, 0).status.remote(), timeout=30)


def test_a_leader_killed_with_sigkill_loses_nothing_acknowledged_and_duplicates_nothing(cluster):
    per_producer = 1500
    futures: dict[str, list] = {"a": [], "b": []}
    started = threading.Barrier(3)

    def stream(name):
        with cluster.producer(acks="all", linger_ms=2, batch_size=200, retry_backoff_ms=20) as producer:
            started.wait()
            for i in range(per_producer):
                futures[name].append(producer.send(TOPIC, f"{name}-{i}".encode()))
            producer.flush()

    threads = [threading.Thread(target=stream, args=(name,)) for name in futures]
    for t in threads:
        t.start()
    started.wait()
    killed = set()
    for target in (300, 900):
        # Kill while batches are in flight: appended, maybe not yet fsynced or answered.
        wait_until(lambda: sum(f.done() for fs in futures.values() for f in fs) > target, timeout_s=60,
                   message=f"{target} acknowledgements before the kill")
        pid = leader_status(cluster)["pid"]
        os.kill(pid, signal.SIGKILL)
        killed.add(pid)
        wait_until(lambda: _restarted(cluster, killed), timeout_s=60, message="the leader restarted")
    for t in threads:
        t.join(timeout=180)
        assert not t.is_alive()

    for fs in futures.values():
        for f in fs:
            f.get(60)  # every send is acknowledged in the end: the producer retried
    consumed = []
    while len(consumed) < 2 * per_producer:
        batch = fetch_from(cluster, TOPIC, len(consumed))
        assert batch, "the log ends before every acknowledged record"
        consumed.extend(batch)
    assert [r.offset for r in consumed] == list(range(2 * per_producer))  # nothing more, nothing twice
    values = [r.value for r in consumed]
    for name, fs in futures.items():
        # Each acknowledgement's offset holds its record, and each producer's records are in order.
        assert [values[f.get().offset] for f in fs] == [f"{name}-{i}".encode() for i in range(per_producer)]
        offsets = [f.get().offset for f in fs]
        assert offsets == sorted(offsets)
    assert len(set(values)) == len(values)
    assert leader_status(cluster)["high_watermark"] == 2 * per_producer


def _restarted(cluster, killed) -> bool:
    try:
        status = leader_status(cluster)
    except Exception:
        cluster._forget(naming.partition_host_of(TOPIC, 0, cluster.config))
        return False
    return status["pid"] not in killed and status["state"] == "active"
