#!/usr/bin/env bash
# Long runs of the randomized differential fuzzer, outside CI: one cluster per
# PostgreSQL version, a new seed each run, until MINUTES have passed.
# Usage: tests/fuzz/long-run.sh [MINUTES] (PG_VERSIONS="pg15" to narrow).
# Stops at the first mismatch, printing its minimized SQL script.
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/pg-env.sh
minutes=${1:-30}
for ver in $PG_VERSIONS; do
    echo "=== $ver: $minutes minutes"
    "$TSBUCKET_VENV/bin/python" tests/fuzz/fuzz.py --pg "$ver" --seconds $((minutes * 60)) --minimize || exit 1
done
