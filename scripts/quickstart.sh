#!/usr/bin/env bash
# Set up, then run the main example on the embedded default cluster (Cluster.local()).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python examples/quickstart.py "$@"
