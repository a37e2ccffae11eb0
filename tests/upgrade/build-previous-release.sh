#!/usr/bin/env bash
# Builds the previous release's library (the commit named in
# tests/upgrade/previous-release) for one PostgreSQL version, so that the
# extension-update test can load data with it before switching to this build.
# Usage: tests/upgrade/build-previous-release.sh pg15|pg18
# Output: target/previous-release/tsbucket-<version>-<pg>.so
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/pg-env.sh
ver=$1
read -r version commit < tests/upgrade/previous-release
out=target/previous-release/tsbucket-$version-$ver.so
[ -f "$out" ] && exit 0
src=target/previous-release/src-$version
if [ ! -d "$src" ]; then
    git cat-file -e "$commit^{commit}" || { echo "commit $commit of release $version is not in this clone"; exit 1; }
    mkdir -p "$src.tmp" && git archive "$commit" | tar -x -C "$src.tmp" && mv "$src.tmp" "$src"
fi
# Its own target directory: the release's library must not replace this one's.
(cd "$src" && PGRX_PG_CONFIG_PATH="$(pg_config_for "$ver")" CARGO_TARGET_DIR="$PWD/../target" \
    cargo build --lib --no-default-features --features "$ver" -q)
cp target/previous-release/target/debug/libtsbucket.so "$out.tmp" && mv "$out.tmp" "$out"
