#!/usr/bin/env bash
# The Apache RocketMQ reference beside mqha (issue 47), apart from the default test run:
#   scripts/interop.sh setup   resolve the pinned RocketMQ release (interop/rocketmq/pom.xml) into ~/.m2
#   scripts/interop.sh up      start the reference cluster on 127.0.0.1 (returns once the group has a master)
#   scripts/interop.sh status  its processes, master and SyncStateSet
#   scripts/interop.sh down    stop every process it started, by pid
#   scripts/interop.sh clients-failover [pytest args]
#                              the official Java and Go clients through mqproxy while the master is SIGKILLed
#   scripts/interop.sh test    the reference cluster's tests (tests/interop, marker `interop`; args to pytest)
#   scripts/interop.sh bench   mqha bench rocketmq (extra args: --quick, --kills N, --only, --out FILE)
# MQHA_INTEROP_DIR (default /tmp/mqha-rocketmq-reference) holds its stores, logs and cluster.json.
set -euo pipefail
cd "$(dirname "$0")/.."
REFERENCE=interop/rocketmq
case "${1:-}" in
    setup)
        scripts/setup.sh
        mkdir -p "$REFERENCE/target"
        # offline first: a second setup finds every jar in ~/.m2 and needs no network
        (cd "$REFERENCE" && { mvn -o -q -B dependency:build-classpath -Dmdep.outputFile=target/classpath.txt 2>/dev/null \
            || mvn -q -B dependency:build-classpath -Dmdep.outputFile=target/classpath.txt; })
        echo "interop: RocketMQ $(sed -n 's:.*<rocketmq.version>\(.*\)</rocketmq.version>.*:\1:p' "$REFERENCE/pom.xml") resolved"
        ;;
    up|down|status)
        [ -f "$REFERENCE/target/classpath.txt" ] || "$0" setup
        exec .venv/bin/python "$REFERENCE/reference_cluster.py" "$@"
        ;;
    test)
        [ -f "$REFERENCE/target/classpath.txt" ] || "$0" setup
        shift
        PYTHONPATH="$PWD" exec .venv/bin/python -m pytest -m interop -n 0 -s -p no:cacheprovider tests/interop "$@"
        ;;
    bench)
        [ -f "$REFERENCE/target/classpath.txt" ] || "$0" setup
        shift
        PYTHONPATH="$PWD" exec .venv/bin/python -m mqha bench rocketmq "$@"
        ;;
    clients-failover)
        shift
        PYTHONPATH="$PWD" exec .venv/bin/python -m pytest -n 0 -p no:cacheprovider -m interop -s \
            tests/integration/test_proxy_java_go_clients.py "$@"
        ;;
    *)
        echo "usage: scripts/interop.sh setup|up|status|down|clients-failover|test|bench" >&2
        exit 2
        ;;
esac
