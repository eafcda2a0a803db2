#!/usr/bin/env bash
# Set up (if needed), then run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --tests
exec .venv/bin/python -m pytest "$@"
