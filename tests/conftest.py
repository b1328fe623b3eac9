"""One Ray instance per test session; tests that need it ask for `ray_session` (or a
fixture built on it). Pure runtime tests never start Ray."""
from __future__ import annotations

import logging
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def init_session_ray():
    """The session's Ray instance (again, after a test that needed a Ray of its own)."""
    import ray
    from actors.cluster import RAY_SYSTEM_CONFIG
    if not ray.is_initialized():
        ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level=logging.WARNING,
                 runtime_env={"env_vars": {"PYTHONPATH": ROOT}}, _system_config=RAY_SYSTEM_CONFIG)
    return ray


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
