"""Spark on RayDP, started once per test session (it takes 10-20 s)."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def spark(ray_session):
    from spark_bridge.session import spark_session
    with spark_session("shoal-tests", num_executors=1, executor_cores=1, executor_memory="1g") as session:
        yield session
