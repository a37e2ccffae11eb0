#!/usr/bin/env bash
# pg_regress suite: tests/pg_regress/sql/*.sql against expected/*.out, on a
# temporary instance of the given PostgreSQL version. Usage: run-regress.sh pg15|pg18 [test...]
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/pg-env.sh
ver=$1; shift || true
pg_config=${TSBUCKET_PG_CONFIG:-$(pg_config_for "$ver")}
bindir=$("$pg_config" --bindir)
regress=$("$pg_config" --pkglibdir)/pgxs/src/test/regress/pg_regress
work=$(mktemp -d /tmp/tsbucket-regress-XXXX)
chmod 755 "$work"
cp -r tests/pg_regress/sql tests/pg_regress/expected "$work"/
chown -R postgres "$work" 2>/dev/null || true
tests=("$@")
if [ ${#tests[@]} -eq 0 ]; then
    mapfile -t tests < <(sed -e 's/#.*//' -e '/^\s*$/d' tests/pg_regress/schedule)
fi
printf "shared_preload_libraries = 'tsbucket'\ntsbucket.worker_enabled = off\n" > "$work/extra.conf"
status=0
as_postgres "$regress" --temp-instance="$work/instance" --temp-config="$work/extra.conf" --bindir="$bindir" \
    --inputdir="$work" --outputdir="$work" --port="${REGRESS_PORT:-5491}" "${tests[@]}" || status=$?
if [ $status -ne 0 ]; then
    head -n 300 "$work/regression.diffs" 2>/dev/null || true
    mkdir -p tests/pg_regress/results && cp "$work"/results/*.out tests/pg_regress/results/ 2>/dev/null || true
    echo "pg_regress on $ver failed; actual outputs copied to tests/pg_regress/results/"
fi
rm -rf "$work"
exit $status
