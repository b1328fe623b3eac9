"""kcat (librdkafka's command-line client, from Debian's kcat package) against the gateway:
the README's commands. Skipped where the kcat binary is absent (scripts/setup.sh installs it
where it can)."""
import json
import shutil
import subprocess

import pytest
from kafka import KafkaAdminClient

from tests.conftest import wait_until

pytestmark = pytest.mark.skipif(shutil.which("kcat") is None, reason="no kcat binary (apt-get install kcat)")


def kcat(bootstrap, *args, stdin=None, timeout=60) -> str:
    done = subprocess.run(["kcat", "-b", bootstrap, *args], input=stdin, capture_output=True, text=True,
                          timeout=timeout)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_metadata_lists_the_brokers_and_topics(cluster, bootstrap):
    cluster.create_topic("kc-meta", 3)
    meta = json.loads(kcat(bootstrap, "-L", "-J"))
    assert [b["name"] for b in meta["brokers"]] == [bootstrap]
    (topic,) = [t for t in meta["topics"] if t["topic"] == "kc-meta"]
    assert sorted(p["partition"] for p in topic["partitions"]) == [0, 1, 2]


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_produce_then_consume_keys_values_and_headers(cluster, bootstrap, codec):
    topic = f"kc-{codec}"
    cluster.create_topic(topic, 1)
    lines = "".join(f"k{i}:v{i}\n" for i in range(20))
    kcat(bootstrap, "-P", "-t", topic, "-p", "0", "-K", ":", "-z", codec, "-H", "source=kcat", stdin=lines)
    out = kcat(bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-J")
    records = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert [(r["key"], r["payload"], r["offset"]) for r in records] == [(f"k{i}", f"v{i}", i) for i in range(20)]
    assert all(r["headers"] == ["source", "kcat"] for r in records)
    # and shoal's own consumer reads what kcat wrote
    with cluster.consumer(None, auto_offset_reset="earliest") as c:
        c.assign([(topic, 0)])
        got = []
        wait_until(lambda: got.extend(r for rs in c.poll(timeout_ms=200).values() for r in rs) or len(got) >= 20,
                   message="20 records")
    assert [(r.key, r.value, r.headers) for r in got] == [
        (f"k{i}".encode(), f"v{i}".encode(), (("source", b"kcat"),)) for i in range(20)]


def test_a_balanced_consumer_group_reads_and_commits(cluster, bootstrap):
    cluster.create_topic("kc-orders", 2)
    kcat(bootstrap, "-P", "-t", "kc-orders", stdin="".join(f"order-{i}\n" for i in range(10)))
    # -G: a member of the classic group "kc-etl"; -e: leave once every partition is read
    out = kcat(bootstrap, "-G", "kc-etl", "-o", "beginning", "-e", "-X", "enable.auto.commit=true",
               "-X", "auto.commit.interval.ms=100", "kc-orders", timeout=90)
    assert sorted(out.split()) == sorted(f"order-{i}" for i in range(10))
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        committed = {tp.partition: m.offset for tp, m in admin.list_group_offsets("kc-etl")["kc-etl"].items()}
    finally:
        admin.close()
    assert sum(committed.values()) == 10
