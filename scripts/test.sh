#!/usr/bin/env bash
# Sets everything up, then runs the lint, the import-layer contracts and the default test run
# (slow chaos/bench runs excluded) on two pytest-xdist workers: the chaos runs one after another on one,
# the other modules on whichever is free (tests/conftest.py).
# Extra arguments go to pytest (`-n 0`: one process). Any failure, including "no tests collected"
# (pytest exit 5), fails.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
.venv/bin/ruff check .
.venv/bin/lint-imports --no-cache  # the layer contracts of docs/architecture.md §2 (.importlinter)
.venv/bin/python -m pytest -n 2 --dist loadscope --no-loadscope-reorder "$@"
