"""kafka-python's own integration tests (test/integration of its source distribution)
against a gateway on Cluster.local: they take an external broker from KAFKA_URI and
KAFKA_VERSION. Prints a table of each test's outcome with the first line of each failure,
and the counts; the JSON lands in .compat/kafka-python-results.json. Arguments after the
options go to pytest.

    python -m tests.compat.kafka_python --source .compat/kafka_python-3.0.12 [-k consumer]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

import ray

from actors import Cluster
from actors.cluster import RAY_SYSTEM_CONFIG

# A broker as Kafka's test fixtures start one (kafka-python's fixtures.py: 4 partitions a
# topic, created on first use), fsync off as on a test machine.
CLUSTER_CONFIG = {"listeners": "PLAINTEXT://127.0.0.1:0", "log.flush.fsync": False, "num.partitions": 4,
                  "group.min.session.timeout.ms": 10}


SERVICE = '''"""Written by shoal's tests/compat/kafka_python.py: the sdist lacks this module."""


class ExternalService:
    def __init__(self, host, port):
        self.host, self.port = host, port

    def dump_logs(self):
        pass

    def stop(self):
        pass


class SpawnedService:
    def __init__(self, *args, **kwargs):
        raise RuntimeError("only an external broker (KAFKA_URI) is served here")
'''


def outcomes(junit_xml: str) -> list[dict]:
    out = []
    for case in ET.parse(junit_xml).getroot().iter("testcase"):
        name = f"{case.get('classname', '').rsplit('.', 1)[-1]}::{case.get('name')}"
        outcome, error = "passed", ""
        for tag in ("failure", "error", "skipped"):
            node = case.find(tag)
            if node is not None:
                outcome = "skipped" if tag == "skipped" else "failed"
                error = (node.get("message") or node.text or "").strip().splitlines()[0][:200] if (
                    node.get("message") or node.text) else ""
                break
        out.append({"test": name, "outcome": outcome, "seconds": float(case.get("time", 0)), "error": error})
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", required=True, help="kafka-python's unpacked source distribution")
    parser.add_argument("--kafka-version", default="4.2.0", help="KAFKA_VERSION (older ones skip newer tests)")
    parser.add_argument("--timeout", type=int, default=120, help="seconds per test (pytest-timeout)")
    args, pytest_args = parser.parse_known_args(argv)
    # The distribution leaves test/__init__.py out (without it `test` is the standard
    # library's) and test/service.py, which the fixtures import for the brokers they spawn:
    # here the broker is external, which the fixtures only describe.
    open(os.path.join(args.source, "test", "__init__.py"), "a").close()
    service = os.path.join(args.source, "test", "service.py")
    if not os.path.exists(service):
        with open(service, "w") as f:
            f.write(SERVICE)
    ray.init(address="local", include_dashboard=False, logging_level="WARNING", log_to_driver=False,
             _system_config=RAY_SYSTEM_CONFIG)
    cluster = Cluster.local(config=CLUSTER_CONFIG)
    junit = tempfile.mktemp(prefix="shoal-kafka-python-", suffix=".xml")
    no_kafka = tempfile.mkdtemp(prefix="shoal-no-kafka-")
    try:
        env = {**os.environ, "KAFKA_URI": f"PLAINTEXT://{cluster.bootstrap_servers}",
               "KAFKA_VERSION": args.kafka_version, "PYTHONPATH": os.path.abspath(args.source),
               # The fixtures ask for Kafka's distribution even for an external broker; none
               # of it is run (topics are made with KafkaAdminClient from Kafka 0.10.1 on).
               "KAFKA_ROOT": no_kafka}
        print(f"# gateway {cluster.bootstrap_servers}, KAFKA_VERSION={args.kafka_version}", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=", "-o", "log_level=WARNING",
                        f"--timeout={args.timeout}", f"--junitxml={junit}", "test/integration", *pytest_args],
                       cwd=args.source, env=env, stdout=sys.stderr, check=False)
        results = outcomes(junit) if os.path.exists(junit) else []
    finally:
        cluster.shutdown()
        ray.shutdown()
        if os.path.exists(junit):
            os.unlink(junit)
        os.rmdir(no_kafka)
    counts = {k: sum(1 for r in results if r["outcome"] == k) for k in ("passed", "failed", "skipped")}
    width = max((len(r["test"]) for r in results), default=10)
    for r in results:
        print(f"{r['test']:<{width}}  {r['outcome']:<8}{r['seconds']:>7.1f}  {r['error']}")
    print(f"\n{counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped")
    os.makedirs(".compat", exist_ok=True)
    with open(".compat/kafka-python-results.json", "w") as f:
        json.dump({"kafka_version": args.kafka_version, "counts": counts, "results": results}, f, indent=1)
    return 1 if counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
