"""Spark on the current Ray cluster, through RayDP.

Spark's executors run as Ray actors beside the coordinators, so the bridge shares the
cluster's resources instead of needing a Spark deployment of its own.
"""
from __future__ import annotations

import contextlib
import os
import sys
from typing import Iterator

# JDK 17 closes these packages to reflection; Spark and Arrow still reach into them.
JDK17_OPENS = (
    "java.base/java.lang", "java.base/java.lang.invoke", "java.base/java.io", "java.base/java.net",
    "java.base/java.nio", "java.base/java.math", "java.base/java.text", "java.base/java.util",
    "java.base/java.util.concurrent", "java.base/java.util.concurrent.atomic", "java.base/sun.nio.ch",
    "java.base/sun.nio.cs", "java.base/sun.security.action", "java.base/sun.util.calendar",
)
JAVA_OPTIONS = " ".join(f"--add-opens={p}=ALL-UNNAMED" for p in JDK17_OPENS)
_PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_JAVA_OPTION_KEYS = ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions",
                     "spark.ray.raydp_app_master.extraJavaOptions")


def spark_configs(executor_cores: int = 1, configs: dict | None = None) -> dict[str, str]:
    """The Spark settings the bridge needs, with the caller's `configs` on top (Java
    options are appended to ours rather than replacing them)."""
    out = {key: JAVA_OPTIONS for key in _JAVA_OPTION_KEYS}
    out.update({
        # Log partitions are a handful of files: a few shuffle partitions are plenty, and
        # 200 tiny tasks would cost more than the work on a small cluster.
        "spark.sql.shuffle.partitions": str(max(2, 2 * executor_cores)),
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
        "spark.executorEnv.PYSPARK_PYTHON": sys.executable,
        "spark.ui.enabled": "false",
        # The Python workers decode with `runtime`'s codec: let them import this checkout.
        "spark.executorEnv.PYTHONPATH": os.pathsep.join(
            p for p in (_PROJECT_ROOT, os.environ.get("PYTHONPATH", "")) if p),
    })
    for key, value in (configs or {}).items():
        if key in _JAVA_OPTION_KEYS:
            out[key] = f"{out[key]} {value}"
        else:
            out[key] = str(value)
    return out


@contextlib.contextmanager
def spark_session(app_name: str = "shoal", num_executors: int = 1, executor_cores: int = 1,
                  executor_memory: str | int = "1g", configs: dict | None = None) -> Iterator:
    """A SparkSession on the current Ray cluster (Ray is started locally if it is not up);
    Spark is stopped on exit. RayDP allows one Spark per driver process at a time."""
    import ray
    import raydp

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    if not ray.is_initialized():
        ray.init(address="local", include_dashboard=False, log_to_driver=False)
    # RayDP's Java agent in the driver logs to /tmp/ray/session_latest/logs unless told
    # otherwise, and dies if that is a dangling link (a removed older session). The logs
    # belong with this session's anyway; RayDP's app master finds the directory the same way.
    logs = f"-Dray.logging.dir={ray._private.worker._global_node.get_logs_dir_path()}"
    configs = dict(configs or {})
    configs["spark.driver.extraJavaOptions"] = " ".join(
        o for o in (configs.get("spark.driver.extraJavaOptions"), logs) if o)
    spark = raydp.init_spark(app_name=app_name, num_executors=num_executors, executor_cores=executor_cores,
                             executor_memory=executor_memory, configs=spark_configs(executor_cores, configs))
    try:
        yield spark
    finally:
        raydp.stop_spark()
