#!/usr/bin/env bash
# Sets everything up, then runs the benchmarks (they print side-by-side figures; nothing is asserted on speed).
# The side-by-side benchmarks of docs/performance.md: .venv/bin/mqha bench all (or one name, or --quick).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
.venv/bin/python -m pytest -m bench -s -p no:cacheprovider "$@"
