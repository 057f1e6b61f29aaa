#!/usr/bin/env bash
# Sets everything up, then runs the pytest benchmarks (tests/bench, marker `bench`): they print
# side-by-side figures and assert nothing on speed. Extra arguments go to pytest. The other half of
# docs/performance.md is `.venv/bin/mqha bench all` (or one name, or --quick).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
.venv/bin/python -m pytest -m bench -s -p no:cacheprovider "$@"
