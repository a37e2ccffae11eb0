#!/usr/bin/env bash
# The main job, in one command, on a fresh Debian 12 machine (as root):
# installs what is missing, builds tsbucket, starts a local PostgreSQL 15
# cluster with tsbucket preloaded, loads ~1M sensor readings and answers a few
# queries. The cluster keeps running afterwards for you to explore.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
. scripts/pg-env.sh
ver=${DEMO_PG:-pg15}
dir=${DEMO_DIR:-/tmp/tsbucket-demo}
port=${DEMO_PORT:-5544}
echo "== building and installing tsbucket into $ver"
install_extension "$ver" --release
bindir=$("$(pg_config_for "$ver")" --bindir)
stop_cluster "$ver" "$dir"
echo "== starting PostgreSQL ($ver) in $dir on port $port"
start_cluster "$ver" "$dir" "$port" "shared_preload_libraries = 'tsbucket'" "shared_buffers = 512MB" "max_wal_size = 4GB"
echo "== loading the demo"
"$bindir/psql" -X -h "$dir" -p "$port" -U postgres -d postgres -v ON_ERROR_STOP=1 -f scripts/demo.sql
cat <<MSG

== done. The cluster is still running:
   $bindir/psql -h $dir -p $port -U postgres
   stop it with: sudo -u postgres $bindir/pg_ctl -D $dir/data stop
MSG
