#!/usr/bin/env bash
# kafka-python's own integration tests against a shoal gateway (issue 35). Its source
# distribution ships test/, which takes an external broker from KAFKA_URI and KAFKA_VERSION;
# it is fetched once under .compat/ (git ignores it), then tests/compat/kafka_python.py starts
# a gateway on Cluster.local, runs them and prints a table. Not part of the normal suite.
# Arguments go to pytest (say -k consumer).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/python -m pip install -q -e '.[compat]'
VERSION=$(.venv/bin/python -c 'import kafka; print(kafka.__version__)')
SRC=.compat/kafka_python-$VERSION
if [ ! -d "$SRC/test/integration" ]; then
  mkdir -p .compat
  .venv/bin/python -m pip download -q --no-deps --no-binary :all: "kafka-python==$VERSION" -d .compat
  tar xzf ".compat/kafka_python-$VERSION.tar.gz" -C .compat
fi
exec .venv/bin/python -m tests.compat.kafka_python --source "$SRC" "$@"
