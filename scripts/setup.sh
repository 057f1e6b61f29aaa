#!/usr/bin/env bash
# Sets up everything mqha needs on a fresh Debian/Ubuntu machine with Python 3.11+: gcc and the Python
# headers (the commit log's compiled fast path), Java 17 for Spark, promtool (Debian package prometheus),
# headless Chromium with its driver (the console's browser test) and nftables (chaos network faults)
# when missing, a virtualenv in .venv, mqha installed with its test extras, and the official RocketMQ 5
# Python client in .mqha/rocketmq-python-client and its Node.js client in .mqha/rocketmq-client-nodejs
# (the mqproxy tests run them; node and npm are installed when missing).
# Idempotent: a second run only checks.
set -euo pipefail
cd "$(dirname "$0")/.."

apt_install() {
    if [ "$(id -u)" = 0 ]; then
        DEBIAN_FRONTEND=noninteractive apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo DEBIAN_FRONTEND=noninteractive apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@"
    else
        echo "setup: please install the Debian packages: $*" >&2
        return 1
    fi
}

PYTHON=${PYTHON:-python3}
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    echo "setup: mqha needs Python 3.11 or newer as '$PYTHON' (set PYTHON=...)" >&2
    exit 1
fi
if ! command -v java >/dev/null 2>&1; then
    echo "setup: installing Java 17 (needed by Spark)"
    apt_install openjdk-17-jre-headless
fi
if ! command -v promtool >/dev/null 2>&1; then
    echo "setup: installing promtool (Debian package prometheus; metrics and alert-rule tests use it)"
    apt_install prometheus
fi
if ! command -v nft >/dev/null 2>&1; then
    echo "setup: installing nftables (chaos network faults drop real packets with it)"
    apt_install nftables
fi
if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
    echo "setup: installing chromium and chromium-driver (the web console's browser test drives them)"
    apt_install chromium chromium-driver
fi
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    echo "setup: installing nodejs and npm (the mqproxy tests drive the official RocketMQ Node.js client)"
    apt_install nodejs npm
fi
if ! command -v cc >/dev/null 2>&1 || ! "$PYTHON" -c 'import os, sys, sysconfig
sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' 2>/dev/null; then
    echo "setup: installing gcc and the Python headers (the commit-log codec's compiled fast path)"
    apt_install gcc libc6-dev python3-dev
fi
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv 2>/dev/null || { apt_install python3-venv && "$PYTHON" -m venv .venv; }
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test]'
# The official RocketMQ 5 Python client in a venv of its own: the mqproxy tests drive it as a subprocess
# (one process must not load two generated copies of its protos; it pins its own protobuf).
CLIENT_VENV=.mqha/rocketmq-python-client
if [ ! -x "$CLIENT_VENV/bin/python" ]; then
    "$PYTHON" -m venv "$CLIENT_VENV"
fi
"$CLIENT_VENV/bin/python" -m pip install --quiet --disable-pip-version-check 'rocketmq-python-client==5.1.2'
# The official RocketMQ 5 Node.js client exactly as the committed lock file pins it (npm ci).
NODE_CLIENT=.mqha/rocketmq-client-nodejs
mkdir -p "$NODE_CLIENT"
cp tests/integration/rocketmq_clients/node/package.json tests/integration/rocketmq_clients/node/package-lock.json "$NODE_CLIENT/"
(cd "$NODE_CLIENT" && npm ci --prefer-offline --no-audit --no-fund --loglevel=error)
# The official RocketMQ 5 Java and Go clients, driven by our small programs (interop/java-client,
# interop/go-client): jars from Maven Central, modules from the Go module proxy, both into their caches
# (~/.m2, ~/go/pkg/mod), so a second run works offline. Java 17 is installed above; Maven when missing.
if ! command -v mvn >/dev/null 2>&1; then
    echo "setup: installing maven (the Java client's driver is built with it)"
    apt_install maven
fi
if ! command -v go >/dev/null 2>&1; then
    echo "setup: mqha's tests need the Go toolchain (1.22 or newer) on PATH for the official Go client" >&2
    exit 1
fi
.venv/bin/python -c 'from tests.helpers.rocketmq_client import go_client, java_client; java_client(); go_client()'
