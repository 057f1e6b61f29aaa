#!/bin/sh
# Start script of the mqha pods (ConfigMap <fullname>-scripts, run as `sh run.sh ...`).
#
#   run.sh <program> <config template> [program arguments...]
#
# The processes read their settings only from their config file, and a ConfigMap is the same for
# every pod of a StatefulSet and must not hold secrets. So this script copies the template to a
# private file ($MQHA_RUNTIME_DIR, default /tmp/mqha, mode 0600), appends the per-pod and secret
# keys below (the chart never renders them into the template), waits until the host name the
# process binds to resolves, and execs `<program> -c <private file> [arguments]` (PID 1 gets the
# signals).
#
#   MQHA_NODE_ID_PREFIX   set: controllerDLegerSelfId=<prefix><ordinal>, ordinal = suffix of POD_NAME
#   MQHA_BROKER_IP        set: brokerIP1=<value> (the pod IP, or its DNS name under the headless Service)
#   MQHA_ADMIN_TOKEN      set: adminAuthToken=<value>
#   MQHA_RAFT_PASSWORD    set: controllerRaftPassword=<value>
#   MQHA_INNER_CREDENTIALS set: innerClientAuthenticationCredentials=<value> (JSON)
#   MQHA_INIT_USER        set: initAuthenticationUser=<value> (JSON)
#   MQHA_WAIT_FOR_HOST    set: wait until it resolves, for up to MQHA_RESOLVE_TIMEOUT seconds (120)
set -eu

fail() {
    echo "run.sh: $*" >&2
    exit 1
}

[ $# -ge 2 ] || fail "usage: run.sh <program> <config template> [program arguments...]"
program=$1
template=$2
shift 2
[ -r "$template" ] || fail "cannot read the config template $template"

newline='
'
# A Java-properties value is the rest of its line, without its leading (and, for mqha, trailing)
# blanks, and a backslash starts an escape: refuse what cannot be one line as given, double every
# backslash so that a secret (e.g. JSON with \") reaches the process unchanged.
append() {
    case "$2" in
        *"$newline"*) fail "the value of $1 must be one line" ;;
        [[:space:]]* | *[[:space:]]) fail "the value of $1 must not start or end with whitespace" ;;
    esac
    printf '%s=%s\n' "$1" "$(printf '%s' "$2" | sed 's/\\/\\\\/g')" >>"$conf"
}

umask 077
dir=${MQHA_RUNTIME_DIR:-/tmp/mqha}
mkdir -p "$dir"
conf="$dir/$(basename "$template")"
cp "$template" "$conf"
chmod 600 "$conf"  # also when an earlier start of the container left it
printf '\n# appended by run.sh\n' >>"$conf"

if [ -n "${MQHA_NODE_ID_PREFIX:-}" ]; then
    ordinal=${POD_NAME:?POD_NAME must name the pod (StatefulSet <name>-<ordinal>)}
    ordinal=${ordinal##*-}
    case "$ordinal" in
        '' | *[!0-9]*) fail "POD_NAME '$POD_NAME' does not end in -<ordinal>" ;;
    esac
    append controllerDLegerSelfId "$MQHA_NODE_ID_PREFIX$ordinal"
fi
if [ -n "${MQHA_BROKER_IP:-}" ]; then
    append brokerIP1 "$MQHA_BROKER_IP"
fi
if [ -n "${MQHA_ADMIN_TOKEN:-}" ]; then
    append adminAuthToken "$MQHA_ADMIN_TOKEN"
fi
if [ -n "${MQHA_RAFT_PASSWORD:-}" ]; then
    append controllerRaftPassword "$MQHA_RAFT_PASSWORD"
fi
if [ -n "${MQHA_INNER_CREDENTIALS:-}" ]; then
    append innerClientAuthenticationCredentials "$MQHA_INNER_CREDENTIALS"
fi
if [ -n "${MQHA_INIT_USER:-}" ]; then
    append initAuthenticationUser "$MQHA_INIT_USER"
fi

# The controller binds its API and Raft ports to its name in controllerDLegerPeers (a broker in
# podDNS mode to brokerIP1): that name must resolve to this pod first. The headless Service
# publishes not-ready pods, so it does within seconds of the pod getting its IP.
if [ -n "${MQHA_WAIT_FOR_HOST:-}" ]; then
    python3 - "$MQHA_WAIT_FOR_HOST" "${MQHA_RESOLVE_TIMEOUT:-120}" <<'EOF' || exit 1
import socket
import sys
import time

host, limit = sys.argv[1], float(sys.argv[2])
deadline = time.monotonic() + limit
while True:
    try:
        socket.getaddrinfo(host, None)
        break
    except OSError as exc:
        if time.monotonic() >= deadline:
            sys.exit(f"run.sh: {host} does not resolve after {limit:g} s: {exc}")
        time.sleep(1)
EOF
fi

exec "$program" -c "$conf" "$@"
