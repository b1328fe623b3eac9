"""`shoal up` on a `ray start` cluster, `Cluster.connect` from a second driver, `shoal down`.

The cluster here is a second Ray instance started by `ray start --head --block` in a
subprocess; terminating that process stops it (never `ray stop`, which would stop every
Ray on the machine). Ray's token authentication is disabled for this private cluster.
"""
import json
import os
import random
import signal
import shutil
import subprocess
import sys
import tempfile
import textwrap

import pytest

from actors.cluster import RAY_SYSTEM_CONFIG
from tests.conftest import wait_until

BIN = os.path.dirname(sys.executable)


def run(*args, env, stdin=None, timeout=120):
    return subprocess.run([os.path.join(BIN, "shoal"), *args], env=env, input=stdin, capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture
def ray_head():
    # Ray's unix sockets live under the temp dir, whose path must stay short.
    temp_dir = tempfile.mkdtemp(prefix="shoal-ray-", dir="/tmp")
    port = random.randint(6400, 6999)
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
    env.pop("RAY_ADDRESS", None)
    head = subprocess.Popen(
        [os.path.join(BIN, "ray"), "start", "--head", f"--port={port}", "--node-ip-address=127.0.0.1",
         "--num-cpus=1", "--include-dashboard=false", "--disable-usage-stats", "--block",
         f"--temp-dir={temp_dir}", f"--system-config={json.dumps(RAY_SYSTEM_CONFIG)}"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    address = f"127.0.0.1:{port}"

    def reachable() -> bool:
        # Ray is up once shoal can say that nothing is deployed there.
        try:
            probe = run("--address", address, "--namespace", "cli-test", "status", env=env, timeout=60)
        except subprocess.TimeoutExpired:
            return False
        return "no shoal deployment" in probe.stderr

    try:
        wait_until(reachable, timeout_s=240, interval_s=1, message="ray start coming up")
    except AssertionError:
        os.killpg(head.pid, signal.SIGKILL)
        raise
    yield address, env
    # SIGKILL: `ray start --block` takes some 30 s to stop on SIGTERM, and nothing of this
    # private cluster is kept. Its workers exit once their raylet is gone.
    os.killpg(head.pid, signal.SIGKILL)
    head.wait(60)
    wait_until(lambda: not _processes_of(temp_dir), timeout_s=60, message="the private Ray's processes gone")
    shutil.rmtree(temp_dir, ignore_errors=True)


def _processes_of(temp_dir: str) -> list[int]:
    """The processes whose command line names `temp_dir` (the private Ray's)."""
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if temp_dir.encode() in f.read():
                    pids.append(int(pid))
        except OSError:
            pass
    return pids


@pytest.mark.ray
def test_up_connect_down_on_a_ray_start_cluster(ray_head, tmp_path):
    address, env = ray_head
    a = ["--address", address, "--namespace", "cli-test"]

    missing = run(*a, "status", env=env)
    assert missing.returncode == 1 and "no shoal deployment in namespace 'cli-test'" in missing.stderr
    assert "Traceback" not in missing.stderr
    unreachable = run("--address", "127.0.0.1:1", "status", env=env)
    assert unreachable.returncode == 1 and "cannot reach the Ray cluster" in unreachable.stderr

    up = run(*a, "up", "--data-dir", str(tmp_path / "data"), "--config", "log.flush.fsync=false",
             "--config", "share.auto.offset.reset=earliest", "--placement", "spread", env=env)
    assert up.returncode == 0, up.stderr
    again = run(*a, "up", "--data-dir", str(tmp_path / "data"), env=env)
    assert again.returncode == 1 and "already runs" in again.stderr

    created = run(*a, "topics", "create", "events", "--partitions", "2", env=env)
    assert created.returncode == 0, created.stderr
    duplicate = run(*a, "topics", "create", "events", env=env)
    assert duplicate.returncode == 1 and "TOPIC_ALREADY_EXISTS" in duplicate.stderr

    # A second driver process attaches with Cluster.connect and produces.
    driver = textwrap.dedent(f"""
        from actors import Cluster
        cluster = Cluster.connect({address!r}, namespace="cli-test")
        with cluster.producer() as p:
            for i in range(5):
                p.send("events", f"e{{i}}".encode(), partition=0).get(30)
        print(sorted(cluster.list_topics()))
        import time
        got, deadline = [], time.monotonic() + 90
        with cluster.share_consumer("events-share") as s:
            s.subscribe("events")
            while len(got) < 5 and time.monotonic() < deadline:
                got += s.poll(0.5)
        print(sorted(r.value.decode() for r in got))
    """)
    out = subprocess.run([sys.executable, "-c", driver], env=env, capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr
    assert "['events']" in out.stdout
    assert "['e0', 'e1', 'e2', 'e3', 'e4']" in out.stdout, out.stdout

    consumed = run(*a, "console-consumer", "events", "--partition", "0", "--from-beginning",
                   "--max-messages", "5", env=env)
    assert consumed.stdout.split() == ["e0", "e1", "e2", "e3", "e4"], consumed.stderr
    status = run(*a, "--output", "json", "status", env=env)
    assert status.returncode == 0, status.stderr
    hosts = [s for s in json.loads(status.stdout) if s["actor"].startswith("shoal/partition-host/")]
    assert sum(h["partitions"] for h in hosts) == 2 and all(h["state"] == "active" for h in hosts)
    # The controller made the SharePartition detached: it outlives the driver that used it.
    assert '"shoal/share-partition/events-share/events-0"' in status.stdout

    down = run(*a, "down", env=env)
    assert down.returncode == 0, down.stderr
    gone = run(*a, "status", env=env)
    assert gone.returncode == 1 and "no shoal deployment" in gone.stderr
