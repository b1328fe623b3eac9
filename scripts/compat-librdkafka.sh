#!/usr/bin/env bash
# librdkafka's own integration tests against a shoal gateway (issue 35). librdkafka's full
# source, tests/ included, ships in the npm package @confluentinc/kafka-javascript; it is
# fetched and built once under .compat/ (git ignores it), with the C toolchain and the
# OpenSSL and zlib headers from Debian packages. Then a gateway starts on Cluster.local and
# tests/compat/librdkafka.py runs the suite in three passes (classic groups, the consumer
# protocol, the share-consumer tests) and prints a table. Not part of the normal suite: it
# takes long. Arguments go to the runner (--help).
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=${KAFKA_JS_VERSION:-1.10.1}
CACHE=.compat/kafka-javascript-$VERSION
SRC=$CACHE/package/deps/librdkafka
# Built once, and again if an earlier build lacked zstd (0171 consumes every codec).
if [ ! -x "$SRC/tests/test-runner" ] || ! grep -q "define WITH_ZSTD 1" "$SRC/config.h" 2>/dev/null; then
  for tool in npm make cc c++; do
    command -v "$tool" >/dev/null || { echo "compat-librdkafka: $tool is needed (apt-get install nodejs npm build-essential)" >&2; exit 2; }
  done
  if [ ! -f /usr/include/openssl/ssl.h ] || [ ! -f /usr/include/zlib.h ] || [ ! -f /usr/include/zstd.h ]; then
    (apt-get install -y -qq libssl-dev zlib1g-dev libzstd-dev \
      || (apt-get update -qq && apt-get install -y -qq libssl-dev zlib1g-dev libzstd-dev)) >&2
  fi
  rm -rf "$CACHE" && mkdir -p "$CACHE"
  (cd "$CACHE" && npm pack --silent "@confluentinc/kafka-javascript@$VERSION" >/dev/null && tar xzf ./*.tgz)
  # No --install-deps: it would download libraries; what the system lacks (GSSAPI, OIDC
  # over curl) is left out, and the tests that need it skip.
  (cd "$SRC" && ./configure --disable-gssapi --disable-curl >"$PWD/../../../configure.log" 2>&1 \
     && make -j"$(nproc)" libs >"$PWD/../../../make.log" 2>&1 \
     && make -j"$(nproc)" -C tests test-runner >>"$PWD/../../../make.log" 2>&1) \
    || { echo "compat-librdkafka: the build failed; see $CACHE/configure.log and $CACHE/make.log" >&2; exit 2; }
fi
bash scripts/setup.sh
exec .venv/bin/python -m tests.compat.librdkafka --tests-dir "$SRC/tests" "$@"
