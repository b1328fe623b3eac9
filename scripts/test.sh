#!/usr/bin/env bash
# Set up, then run the whole test suite (pure runtime, Ray actors, Spark on RayDP).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PYSPARK_PYTHON="$PWD/.venv/bin/python"
# Two workers, whole modules each (a module shares one deployment), each worker with a Ray
# of its own: the suite waits on timers and client processes as much as it computes, so two
# halve much of the wait on this 2-core machine. SHOAL_TEST_WORKERS=0 runs in one process.
# Every run ends with its 20 slowest tests and the seconds per area (tests/conftest.py); the
# longest modules start first, by tests/durations.json (SHOAL_WRITE_DURATIONS=1 updates it).
exec .venv/bin/python -m pytest -q -rfEx -p no:cacheprovider -n "${SHOAL_TEST_WORKERS:-2}" --dist loadfile --durations=20 "$@"
