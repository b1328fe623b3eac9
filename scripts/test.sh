#!/usr/bin/env bash
# Set up, then run the whole test suite (pure runtime, Ray actors, Spark on RayDP).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PYSPARK_PYTHON="$PWD/.venv/bin/python"
exec .venv/bin/python -m pytest -q -rfEx -p no:cacheprovider "$@"
