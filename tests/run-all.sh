#!/usr/bin/env bash
# Every test, on every supported PostgreSQL: the pure crates' unit, property
# and corrupt-input tests; #[pg_test]s; the pg_regress suite; the integration
# tests that start their own clusters. First installs what a fresh Debian 12
# machine lacks (scripts/setup.sh, idempotent; TSBUCKET_SKIP_SETUP=1 skips it).
# Usage: tests/run-all.sh (PG_VERSIONS="pg15" to narrow).
set -uo pipefail
cd "$(dirname "$0")/.."
if [ -z "${TSBUCKET_SKIP_SETUP:-}" ]; then
    ./scripts/setup.sh || { echo "setup failed"; echo "0 passed, 1 failed"; exit 1; }
fi
. scripts/pg-env.sh
passed=0; failed=0; failures=()
step() {
    local name=$1; shift
    echo; echo "=== $name"
    if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); failures+=("$name"); fi
}
pgrx_test() {
    local dir=/tmp/tsbucket-pgrx-test-$1
    mkdir -p "$dir"; chown postgres "$dir" 2>/dev/null || true; chmod 777 "$dir"
    CARGO_PGRX_TEST_RUNAS=postgres CARGO_PGRX_TEST_PGDATA="$dir/data" cargo pgrx test "$1"
}
integration() {
    local ver=$1
    TSBUCKET_PG="$ver" "$TSBUCKET_VENV/bin/python" -m pytest -q tests/integration
}

step "format, timecalc and kernels: unit, property and corrupt-input tests" cargo test -q -p tsbucket-format -p tsbucket-timecalc -p tsbucket-kernels --release
step "tsbucket-import: unit, property and BSONColumn vector tests" cargo test -q -p tsbucket-import --release
# The house: every unsafe block narrow and justified; no circles between modules.
step "unsafe audit" python3 scripts/unsafe-audit.py src
step "unsafe audit (tsbucket-import)" python3 scripts/unsafe-audit.py import/src
if [ -f ../shared/tools/layers.py ]; then
    step "module layers" python3 ../shared/tools/layers.py src
    step "module layers (tsbucket-import)" python3 ../shared/tools/layers.py import/src
fi
for ver in $PG_VERSIONS; do
    step "$ver: #[pg_test]" pgrx_test "$ver"
    # Debug builds: overflow checks catch what release builds would wrap.
    step "$ver: install" install_extension "$ver"
    step "$ver: pg_regress" ./tests/run-regress.sh "$ver"
    step "$ver: integration" integration "$ver"
done
echo
[ ${#failures[@]} -eq 0 ] || printf 'failed: %s\n' "${failures[@]}"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
