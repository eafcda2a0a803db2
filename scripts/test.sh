#!/usr/bin/env bash
# Set up (if needed), then run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --tests
# Two workers, each taking whole modules (their shared fixtures stay shared):
# most tests wait on daemons and guests, so two at once fill the two cores.
exec .venv/bin/python -m pytest -n 2 --dist loadfile "$@"
