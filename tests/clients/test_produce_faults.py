"""A partition leader killed in the middle of a produce stream (issue 3, "Bad input and
faults"): the producer retries, the actor restarts and reloads its log, every acknowledged
record is there exactly once and in order, and fetches resume."""
import ray

from actors import naming
from actors.retry import call
from runtime.messages.topics import FetchRequest
from runtime.topics.data import decode_entries
from tests.conftest import wait_until


def fetch_from(cluster, topic, offset):
    """One fetch, retried while the leader is down, as a consumer would."""
    name = naming.partition_host_of(topic, 0, cluster.config)
    response = call(lambda: cluster.partition_leader(topic, 0), "fetch",
                    FetchRequest(topic, 0, offset, max_wait_ms=0), timeout_s=60,
                    on_failure=lambda: cluster._forget(name))
    assert response.error_code == 0, response
    return [r for b in response.batches for r in decode_entries(b.records, b.base_offset) if r.offset >= offset]


def kill_leader(cluster, topic):
    pid = ray.get(cluster.partition_leader(topic, 0).status.remote())["pid"]
    ray.kill(cluster.partition_host(topic, 0), no_restart=False)
    return pid


def test_a_leader_killed_mid_stream_loses_and_duplicates_nothing(cluster):
    topic = "faults"
    cluster.create_topic(topic, 1)
    consumed = []

    def consume():
        consumed.extend(fetch_from(cluster, topic, len(consumed)))

    total = 3000
    pids = set()
    with cluster.producer(linger_ms=1, batch_size=300, retry_backoff_ms=20) as producer:
        futures = []
        for i in range(total):
            futures.append(producer.send(topic, f"record-{i}".encode()))
            if i in (800, 1900):
                # Kill it while batches are in flight (appended but maybe not yet flushed).
                wait_until(lambda: sum(f.done() for f in futures) > i // 2, message=f"acks before kill at {i}")
                consume()
                pids.add(kill_leader(cluster, topic))
        producer.flush()
        metadata = [f.get(60) for f in futures]
    status = ray.get(cluster.partition_leader(topic, 0).status.remote())
    assert status["pid"] not in pids  # it was restarted, and reloaded its log
    assert [m.offset for m in metadata] == list(range(total))
    while len(consumed) < total:
        consume()
    assert [r.value for r in consumed] == [f"record-{i}".encode() for i in range(total)]
    assert [r.offset for r in consumed] == list(range(total))
    assert status["high_watermark"] == total
