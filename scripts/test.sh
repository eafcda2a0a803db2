#!/usr/bin/env bash
# Set up (if needed), then run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --tests
# Two workers, each taking whole modules (their shared fixtures stay shared):
# most tests wait on daemons and guests, so two at once fill the two cores.
# A short temporary root of this run's own: xdist puts each worker's below
# it, and the daemons' unix socket paths must stay under 108 bytes.
basetemp=$(mktemp -d /tmp/ctXXXXXX)
rc=0
.venv/bin/python -m pytest -n 2 --dist loadfile --basetemp="$basetemp" "$@" || rc=$?
rm -rf "$basetemp"
exit "$rc"
