"""One Ray instance per test session; tests that need it ask for `ray_session` (or a
fixture built on it). Pure runtime tests never start Ray."""
from __future__ import annotations

import contextlib
import logging
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Ray's workers find the project through the environment they inherit (from the raylet this
# process starts), not through a runtime_env: any runtime_env starts every actor's worker
# through Ray's setup wrapper, about 0.15 s more per actor on this machine.
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)


def init_session_ray():
    """The session's Ray instance (again, after a test that needed a Ray of its own)."""
    import ray
    from actors.cluster import RAY_SYSTEM_CONFIG
    if not ray.is_initialized():
        ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level=logging.WARNING,
                 _system_config=RAY_SYSTEM_CONFIG)
    return ray


@contextlib.contextmanager
def own_ray_cluster():
    """A multi-node Ray of the test's own (`ray.cluster_utils.Cluster`): the session's Ray is
    stopped first and started again after. The driver connects to the head before any worker
    is added, so it (and the client actors beside it) stays on the head; the caller adds the
    workers. A Spark session (tests/spark) lives in the session's Ray: then the test skips."""
    from ray.cluster_utils import Cluster as RayCluster

    import ray
    from actors.cluster import RAY_SYSTEM_CONFIG
    raydp = sys.modules.get("raydp.context")
    if raydp is not None and raydp._global_spark_context is not None:
        pytest.skip("a Spark session runs in the session's Ray, which this module would stop")
    had_session = ray.is_initialized()
    ray.shutdown()
    rc = RayCluster(initialize_head=True, head_node_args=dict(num_cpus=1, _system_config=RAY_SYSTEM_CONFIG))
    try:
        ray.init(address=rc.address, logging_level=logging.WARNING)
        assert ray.get_runtime_context().get_node_id() == rc.head_node.node_id
        yield rc
    finally:
        ray.shutdown()
        rc.shutdown()
        if had_session:
            init_session_ray()


def pytest_collection_modifyitems(config, items):
    """A test that asks for Ray (through `ray_session` or a fixture built on it) carries the
    `ray` marker, so `-m "not ray"` runs the pure suite."""
    for item in items:
        if "ray_session" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.ray)


# Modules that stop their worker's Ray for a Ray cluster of their own, and the Spark
# modules, whose session keeps that Ray for the rest of the run (so those modules would
# skip after it): one xdist scope, run in collection order, deployment before spark.
_ONE_WORKER = ("tests/deployment/", "tests/spark/")


# Seconds each module took in a recent run (SHOAL_WRITE_DURATIONS=1 updates it): only an
# order for the scheduler, so a stale or missing entry costs balance, never a test.
_DURATIONS = os.path.join(ROOT, "tests", "durations.json")
# A module missing from _DURATIONS (a new one) counts as this many seconds.
_UNKNOWN_MODULE_S = 5.0


def _module_seconds() -> dict[str, float]:
    import json
    try:
        with open(_DURATIONS) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def pytest_xdist_make_scheduler(config, log):
    """With `--dist loadfile` (scripts/test.sh): a worker takes whole modules, as one module
    shares one deployment, and _ONE_WORKER's modules all go to the same worker. The longest
    scopes go out first (xdist's own order is by test count, which left a 4-minute Spark and
    multi-node scope for last while the other worker sat idle): the short ones fill the end."""
    if config.getoption("dist") != "loadfile":
        return None
    from collections import OrderedDict

    from xdist.scheduler import LoadFileScheduling

    seconds = _module_seconds()

    class ModulesScheduling(LoadFileScheduling):
        _ordered = False

        def _split_scope(self, nodeid: str) -> str:
            if nodeid.startswith(_ONE_WORKER):
                return "+".join(_ONE_WORKER)
            return super()._split_scope(nodeid)

        def _assign_work_unit(self, node) -> None:
            if not self._ordered:  # the queue is complete by the first assignment
                self._ordered = True
                self.workqueue = OrderedDict(sorted(self.workqueue.items(), key=lambda kv: -self._cost(kv[1])))
            super()._assign_work_unit(node)

        @staticmethod
        def _cost(nodeids) -> float:
            modules = {nodeid.split("::")[0] for nodeid in nodeids}
            return sum(seconds.get(m, _UNKNOWN_MODULE_S) for m in modules)
    return ModulesScheduling(config, log)


@pytest.fixture(scope="session")
def ray_session():
    import ray
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    yield init_session_ray()
    ray.shutdown()


def wait_until(predicate, timeout_s: float = 30.0, interval_s: float = 0.05, message: str = "condition"):
    """Poll for an eventual state with a deadline (never sleep a fixed time and hope)."""
    import time
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval_s)
    raise AssertionError(f"{message} not reached within {timeout_s}s (last value: {last!r})")


# What every module's cluster runs with; a module adds or overrides settings with its own
# CLUSTER_CONFIG, and names the topics to create with CLUSTER_TOPICS ({name: partitions}).
BASE_CONFIG = {"log.flush.fsync": False, "log.retention.check.interval.ms": 3600000}


@pytest.fixture(scope="module")
def cluster(ray_session, tmp_path_factory, request):
    """One Cluster.local per test module. A module that needs data in it before its tests
    overrides this fixture, asking for it by the same name."""
    from actors import Cluster
    config = {**BASE_CONFIG, **getattr(request.module, "CLUSTER_CONFIG", {})}
    c = Cluster.local(data_dir=str(tmp_path_factory.mktemp("shoal")), config=config)
    for topic, partitions in getattr(request.module, "CLUSTER_TOPICS", {}).items():
        c.create_topic(topic, partitions)
    yield c
    c.shutdown()


# Where the suite's time goes: seconds and tests per module, setup and teardown included,
# printed per area (the folder under tests/) at the end of every run (so every CI landing
# shows it).
_MODULES: dict[str, list] = {}


def pytest_runtest_logreport(report):
    seconds_tests = _MODULES.setdefault(report.nodeid.split("::")[0], [0.0, 0])
    seconds_tests[0] += report.duration
    if report.when == "call":
        seconds_tests[1] += 1


def _area(module: str) -> str:
    path = module.split("/")
    return path[1] if len(path) > 2 else "(top)"


def pytest_terminal_summary(terminalreporter):
    if not _MODULES:
        return
    areas: dict[str, list] = {}
    for module, (seconds, tests) in _MODULES.items():
        area = areas.setdefault(_area(module), [0.0, 0])
        area[0] += seconds
        area[1] += tests
    total = sum(s for s, _ in areas.values())
    terminalreporter.section("time per area")
    terminalreporter.write_line(f"{'area':<14}{'tests':>7}{'seconds':>10}{'share':>8}")
    for area, (seconds, tests) in sorted(areas.items(), key=lambda kv: -kv[1][0]):
        terminalreporter.write_line(f"{area:<14}{tests:>7}{seconds:>10.1f}{seconds / total:>8.0%}")
    terminalreporter.write_line(f"{'all':<14}{sum(t for _, t in areas.values()):>7}{total:>10.1f}")
    if os.environ.get("SHOAL_WRITE_DURATIONS") == "1":  # a partial run updates its modules only
        import json
        known = {**_module_seconds(), **{m: round(seconds, 1) for m, (seconds, _) in _MODULES.items()}}
        with open(_DURATIONS, "w") as f:
            json.dump(known, f, indent=0, sort_keys=True)
            f.write("\n")
