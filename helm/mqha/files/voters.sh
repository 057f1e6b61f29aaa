#!/bin/sh
# The controllers' voter-set hook Jobs of `helm upgrade` (README "Scaling controllers"; run as
# `sh -c <this script> voters.sh <action>`):
#
#   voters.sh add      every controller ordinal below MQHA_REPLICAS that is not a voter yet:
#                      mqadmin addControllerPeer, one at a time, lowest first (post-upgrade: the new
#                      pods have come up as observers)
#   voters.sh remove   every voter at an ordinal MQHA_REPLICAS or above: mqadmin removeControllerPeer,
#                      highest first (pre-upgrade, before the StatefulSet drops those pods)
#
#   MQHA_CONTROLLERS   mqadmin -a: the API addresses of ordinals 0 .. MQHA_REPLICAS-1
#   MQHA_PEER_ADDRESS  the API address of a pod, '%d' standing for its ordinal (printf)
#   MQHA_REPLICAS      the controller replica count of the new release
#   MQHA_MAX_REPLICAS  ordinals above it are never looked at (the chart's largest count, 9)
#   MQHA_DEADLINE      seconds for the whole Job (default 600); each change is tried again until then
#   MQHA_RETRY_PAUSE   seconds between two tries of one change (default 5)
#   MQHA_ADMIN_TOKEN   the admin token (read by mqadmin itself)
#
# Idempotent: a voter is never added twice, a non-voter never removed, so a Job that failed half way
# (or a second `helm upgrade`) picks up where it stopped.
set -eu

fail() {
    echo "voters.sh: $*" >&2
    exit 1
}

[ $# -eq 1 ] || fail "usage: voters.sh add|remove"
action=$1
: "${MQHA_CONTROLLERS:?}" "${MQHA_PEER_ADDRESS:?}" "${MQHA_REPLICAS:?}"
max=${MQHA_MAX_REPLICAS:-9}
deadline=$(($(date +%s) + ${MQHA_DEADLINE:-600}))
pause=${MQHA_RETRY_PAUSE:-5}

address_of() {
    # shellcheck disable=SC2059 # the pattern is the format
    printf "$MQHA_PEER_ADDRESS" "$1"
}

# The API addresses of the voters, one a line, as the leader sees them.
voters() {
    mqadmin getControllerQuorum -a "$MQHA_CONTROLLERS" --json |
        python3 -c 'import json, sys; print("\n".join(v["apiAddress"] for v in json.load(sys.stdin)["voters"]))'
}

# Runs `mqadmin <command> -p <address>` until the voter set has (want=voter) or has not (want=gone)
# <address>, or the deadline passes.
change() {
    command=$1 address=$2 want=$3
    while :; do
        if quorum=$(voters); then
            if [ "$want" = voter ] && printf '%s\n' "$quorum" | grep -qxF "$address"; then
                echo "voters.sh: $address is a voter"
                return 0
            fi
            if [ "$want" = gone ] && ! printf '%s\n' "$quorum" | grep -qxF "$address"; then
                echo "voters.sh: $address is not a voter"
                return 0
            fi
            now=$(date +%s)
            left=$((deadline - now))
            [ "$left" -gt 0 ] || fail "$command $address did not succeed in time"
            mqadmin "$command" -a "$MQHA_CONTROLLERS" -p "$address" --timeout "$left" || true
        fi
        [ "$(date +%s)" -lt "$deadline" ] || fail "$command $address did not succeed in time"
        sleep "$pause"
    done
}

case "$action" in
    add)
        i=0
        while [ "$i" -lt "$MQHA_REPLICAS" ]; do
            change addControllerPeer "$(address_of "$i")" voter
            i=$((i + 1))
        done
        ;;
    remove)
        i=$((max - 1))
        while [ "$i" -ge "$MQHA_REPLICAS" ]; do
            change removeControllerPeer "$(address_of "$i")" gone
            i=$((i - 1))
        done
        ;;
    *) fail "unknown action '$action' (add or remove)" ;;
esac
