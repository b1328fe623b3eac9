"""Ray for a benchmark: embedded, with the deployment's settings (as Cluster.local starts it),
and with nothing of Ray's on the standard output, which carries the benchmark's JSON: the
workers' logs stay off the driver, and the raylet's warnings (which Ray 2.60's driver prints on
stdout) go to stderr."""
import logging

import ray
import ray._private.worker as ray_worker

from actors.cluster import RAY_SYSTEM_CONFIG

_print_to_stdstream = ray_worker.print_to_stdstream


def _to_stderr(data: dict, ignore_prefix: bool) -> None:
    _print_to_stdstream({**data, "is_err": True}, ignore_prefix)


def init_ray(**options) -> None:
    ray_worker.print_to_stdstream = _to_stderr
    ray.init(address="local", include_dashboard=False, logging_level=logging.WARNING,
             _system_config=RAY_SYSTEM_CONFIG, log_to_driver=False, **options)
