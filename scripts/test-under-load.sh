#!/usr/bin/env bash
# The whole suite twice at once: tests synchronise on conditions, never on
# durations, so they pass on a loaded machine too.  Extra arguments go to both.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --tests
logs=$(mktemp -d)
.venv/bin/python -m pytest -q -p no:cacheprovider "$@" >"$logs/1.log" 2>&1 & first=$!
.venv/bin/python -m pytest -q -p no:cacheprovider "$@" >"$logs/2.log" 2>&1 & second=$!
rc=0
wait "$first" || rc=1
wait "$second" || rc=1
tail -n 3 "$logs/1.log" "$logs/2.log"
[ "$rc" -eq 0 ] && rm -r "$logs" || echo "logs kept in $logs"
exit "$rc"
