#!/usr/bin/env bash
# The benchmark, in one command: builds and installs tsbucket (release) into
# PostgreSQL 15 (or BENCH_PG=pg18), starts its own cluster and prints ratios.
# Arguments go to bench.py (--datasets devops,sensor --days 3 --granularity seconds).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/pg-env.sh
ver=${BENCH_PG:-pg15}
install_extension "$ver" --release
TSBUCKET_PG=$ver "$TSBUCKET_VENV/bin/python" bench/bench.py "$@"
if [ -z "${BENCH_SKIP_FUNCTIONS:-}" ]; then
    TSBUCKET_PG=$ver "$TSBUCKET_VENV/bin/python" bench/functions.py
    TSBUCKET_PG=$ver "$TSBUCKET_VENV/bin/python" bench/compaction.py
fi
