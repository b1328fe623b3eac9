#!/usr/bin/env bash
# Creates .venv with shoal and its test extras. Idempotent; used by quickstart.sh and test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v java >/dev/null 2>&1; then
  # Spark (through RayDP) needs a JDK 8, 11 or 17.
  echo "installing a JDK for Spark" >&2
  (apt-get update -qq && apt-get install -y -qq openjdk-17-jre-headless) >&2
fi
if ! command -v kcat >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  # tests/gateway/test_kcat.py runs kcat against the gateway (it skips without it).
  (apt-get install -y -qq kcat || (apt-get update -qq && apt-get install -y -qq kcat)) >&2 \
    || echo "kcat could not be installed: tests/gateway/test_kcat.py will skip" >&2
fi
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
# pip byte-compiles what it installs one file at a time, half of this step's time;
# compileall below does it on every core. Every actor is a new process that imports these
# modules, and where PYTHONDONTWRITEBYTECODE is set (it is on the machine CI runs on) Python
# never caches them itself: an actor would compile shoal's modules from source each time,
# about 0.3 s of CPU per actor process and hundreds of processes in the test suite.
.venv/bin/python -m pip install -q --no-compile -e '.[test,benchmark]'
SITE=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
# A file that does not compile (a package may ship one) is only left to compile at import.
.venv/bin/python -m compileall -q -j 0 "$SITE" runtime actors spark_bridge >/dev/null || true
