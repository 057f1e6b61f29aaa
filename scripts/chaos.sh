#!/usr/bin/env bash
# Sets everything up, then runs a long chaos configuration (not part of the default test run):
#   scripts/chaos.sh            the 120 s run: kill, pause, partition; seed 1
#   scripts/chaos.sh 30min      30 minutes, every fault kind (at least 100 faults); seed 1
#   scripts/chaos.sh power      600 s of power-loss, kill, partition; 2 groups, ASYNC_FLUSH and SYNC_FLUSH
#   scripts/chaos.sh soak [S]   every fault kind for S seconds (default 600) in each configuration of the
#                               matrix (mqha.chaos.configs.MATRIX), one run each; stops at the first failure
#   scripts/chaos.sh nemeses    240 s of power-loss, disk-wipe, raft-partition, asym-partition; seed 11
#   scripts/chaos.sh -- ARGS    mqha chaos ARGS as given
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
case "${1:-120s}" in
  120s) exec .venv/bin/mqha chaos --duration 120 --faults kill,pause,partition --seed 1 ;;
  30min) exec .venv/bin/mqha chaos --duration 1800 --faults kill,pause,partition,loss --seed 1 ;;
  power) exec .venv/bin/mqha chaos --duration 600 --faults power-loss,kill,partition --groups 2 \
    --flush-disk-type mixed --seed 1 ;;
  nemeses) exec .venv/bin/mqha chaos --duration 240 --faults power-loss,disk-wipe,raft-partition,asym-partition \
    --seed 11 ;;
  soak)
    seconds="${2:-600}"
    kinds=kill,pause,partition,loss,delay,disk-wipe,disk-full,power-loss,raft-partition,asym-partition,raft-loss,client-partition,all-controllers,clone
    seed=21
    for config in $(.venv/bin/python -c 'from mqha.chaos.configs import MATRIX; print(" ".join(MATRIX))'); do
      echo "=== soak: config $config, seed $seed, $seconds s"
      .venv/bin/mqha chaos --duration "$seconds" --faults "$kinds" --config "$config" --seed "$seed" \
        --store-tmpfs-mib 256
      seed=$((seed + 1))
    done ;;
  --) shift; exec .venv/bin/mqha chaos "$@" ;;
  *) echo "usage: scripts/chaos.sh [120s|30min|power|nemeses|soak [seconds]|-- mqha-chaos-args...]" >&2; exit 2 ;;
esac
