#!/usr/bin/env bash
# COPY side by side with an earlier release, by the backend's CPU time: the
# earlier release's library (built from COMMIT, release profile) and this
# tree's installed library alternate in fresh PostgreSQL 15 clusters, each
# loading the TSBS devops CSV (bench/tsbs.py's, 2,592,000 rows) twice into a
# new table. CPU time is steadier than wall time on a shared 2-core machine.
# Usage: bench/copy_ab.sh COMMIT [ROUNDS]   (install this tree first:
#   . scripts/pg-env.sh && install_extension pg15 --release)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/pg-env.sh
commit=$(git rev-parse --short "$1"); rounds=${2:-3}
ver=pg15
libdir=$("$(pg_config_for $ver)" --pkglibdir)
extdir=$("$(pg_config_for $ver)" --sharedir)/extension
bindir=$("$(pg_config_for $ver)" --bindir)
csv=/tmp/tsbucket-bench-devops-3d.csv
[ -f "$csv" ] || { echo "no $csv: run bench/tsbs.py once (it generates it)"; exit 1; }
src=target/ab/src-$commit
if [ ! -d "$src" ]; then
    mkdir -p "$src.tmp" && git archive "$commit" | tar -x -C "$src.tmp" && mv "$src.tmp" "$src"
fi
old_version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$src/Cargo.toml")
(cd "$src" && PGRX_PG_CONFIG_PATH="$(pg_config_for $ver)" CARGO_TARGET_DIR="$PWD/../target-$commit" \
    cargo build --release --lib --no-default-features --features "$ver" -q \
    --config "target.'cfg(all(target_family = \"unix\", not(target_os = \"macos\")))'.rustflags = [\"-C\", \"link-arg=-Wl,--no-gc-sections\"]")
old_lib=target/ab/target-$commit/release/libtsbucket.so
new_lib=$(mktemp /tmp/tsbucket-current-XXXX.so)
cp "$libdir/tsbucket.so" "$new_lib"
new_version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml)
# An older release is created from the oldest kept install script plus the update scripts.
[ -f "$extdir/tsbucket--$old_version.sql" ] || cp tests/upgrade/tsbucket--*.sql "$extdir/"
install_lib() { install -m 755 "$1" "$libdir/tsbucket.so.tmp" && mv "$libdir/tsbucket.so.tmp" "$libdir/tsbucket.so"; }
trap 'install_lib "$new_lib"; rm -f "$new_lib"' EXIT
dir=/tmp/tsbucket-copy-ab
for round in $(seq "$rounds"); do
    for pair in "$old_version:$old_lib" "$new_version:$new_lib"; do
        version=${pair%%:*}
        install_lib "${pair#*:}"
        start_cluster $ver $dir 55499 "shared_buffers = 2GB" "max_wal_size = 16GB" "synchronous_commit = off" \
            "shared_preload_libraries = 'tsbucket'" "tsbucket.worker_enabled = off"
        TSBUCKET_AB_DIR=$dir TSBUCKET_AB_VERSION=$version TSBUCKET_AB_CSV=$csv \
            "$TSBUCKET_VENV/bin/python" - <<'PY'
import os, sys, psycopg
sys.path.insert(0, "bench")
from bench import SCHEMAS
conn = psycopg.connect(f"host={os.environ['TSBUCKET_AB_DIR']} port=55499 user=postgres dbname=postgres", autocommit=True)
conn.execute(f"CREATE EXTENSION tsbucket VERSION '{os.environ['TSBUCKET_AB_VERSION']}'")
pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
def cpu():
    f = open(f"/proc/{pid}/stat").read().split()
    return (int(f[13]) + int(f[14])) / os.sysconf("SC_CLK_TCK")
seconds = []
for _ in range(2):
    conn.execute("DROP TABLE IF EXISTS d")
    conn.execute(f"CREATE TABLE d ({SCHEMAS['devops'][0]}) USING tsbucket")
    conn.execute("SELECT tsbucket.create_timeseries('d', 'time', 'hostname', granularity => 'seconds')")
    c0 = cpu()
    conn.execute(f"COPY d FROM '{os.environ['TSBUCKET_AB_CSV']}' (FORMAT csv)")
    seconds.append(cpu() - c0)
size = conn.execute("SELECT tsbucket.table_size('d')").fetchone()[0]
print(f"tsbucket {os.environ['TSBUCKET_AB_VERSION']}: COPY CPU " + ", ".join(f"{s:.2f} s" for s in seconds) + f"; table_size {size:,} bytes")
PY
        as_postgres "$bindir/pg_ctl" -D $dir/data stop -m fast >/dev/null
    done
done
