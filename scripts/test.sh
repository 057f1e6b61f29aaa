#!/usr/bin/env bash
# Sets everything up, then runs the lint and the default test run (slow chaos/bench runs excluded).
# Extra arguments go to pytest. Any failure, including "no tests collected" (pytest exit 5), fails.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
.venv/bin/ruff check .
.venv/bin/python -m pytest "$@"
