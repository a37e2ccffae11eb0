"""ALTER EXTENSION tsbucket UPDATE from the previous release.

The previous release's library (built from its commit by
tests/upgrade/build-previous-release.sh) and SQL (tests/upgrade/) make a
database with data; then this build's library is installed over it. Until the
update, the new library refuses clearly and its worker leaves the database
alone; after it, rows, settings and retention are unchanged, writes and
maintenance work, and the schema equals that of a fresh install."""

import os
import re
import shutil
import subprocess

import psycopg
import pytest

from conftest import REPO, Cluster, pg_config, wait_for

PREVIOUS_VERSION, _ = open(os.path.join(REPO, "tests/upgrade/previous-release")).read().split()
CURRENT_VERSION = re.search(r'^version = "([^"]+)"', open(os.path.join(REPO, "Cargo.toml")).read(), re.M).group(1)

ROWS = {
    "readings": "SELECT time, site, sensor, v, note FROM readings ORDER BY time, site, sensor, v",
    "plain": "SELECT time, x FROM plain ORDER BY time, x",
    # Aggregates over the previous release's buckets (headers without sums):
    # computed from the rows, the same answers (floats to the rounding of
    # partial sums).
    "aggregates": "SELECT site, count(*), count(v), round(sum(v)::numeric, 6), round(avg(v)::numeric, 9), min(v), max(v) "
                  "FROM readings WHERE time >= '2024-01-01 01:00' GROUP BY site ORDER BY site",
    "plain_aggregates": "SELECT count(x), sum(x), avg(x)::numeric(20, 6) FROM plain",
}
SETTINGS = "SELECT table_name::text, time_column::text, meta_columns::text, granularity, bucket_max_span, expire_after FROM tsbucket.timeseries ORDER BY 1"
RETENTION = "SELECT relid::regclass::text, meta, expire_after FROM tsbucket.series_retention ORDER BY 1, 2"


def pg_dir(what):
    version = os.environ.get("TSBUCKET_PG", "pg15")
    return subprocess.check_output([pg_config(version), f"--{what}"], text=True).strip()


def install_library(path):
    """Replaces $libdir/tsbucket.so by rename, so running servers keep the file they mapped."""
    target = os.path.join(pg_dir("pkglibdir"), "tsbucket.so")
    shutil.copyfile(path, target + ".tmp")
    os.rename(target + ".tmp", target)


def schema(cluster, dbname):
    """Every object of the extension, as pg_upgrade would re-create it, without OIDs."""
    out = subprocess.check_output(
        [f"{cluster.bindir}/pg_dump", "-s", "--binary-upgrade", "-h", cluster.dir, "-p", str(cluster.port),
         "-U", "postgres", dbname], text=True)
    lines = []
    for line in out.splitlines():
        if ("binary_upgrade_set_next_" in line or "relfrozenxid" in line or line.startswith(("--", "\\restrict", "\\unrestrict"))
                or not line.strip()):
            continue
        line = re.sub(r"'\d+'::pg_catalog\.oid", "'OID'", line)
        lines.append(re.sub(r"^WHERE oid = '\d+';", "WHERE oid = OID;", line))
    return lines


@pytest.fixture(scope="module")
def libraries():
    version = os.environ.get("TSBUCKET_PG", "pg15")
    subprocess.run([os.path.join(REPO, "tests/upgrade/build-previous-release.sh"), version], check=True)
    previous = os.path.join(REPO, f"target/previous-release/tsbucket-{PREVIOUS_VERSION}-{version}.so")
    extdir = os.path.join(pg_dir("sharedir"), "extension")
    shutil.copyfile(os.path.join(REPO, f"tests/upgrade/tsbucket--{PREVIOUS_VERSION}.sql"),
                    os.path.join(extdir, f"tsbucket--{PREVIOUS_VERSION}.sql"))
    current = os.path.join(pg_dir("pkglibdir"), "tsbucket.so")
    saved = current + ".current"
    shutil.copyfile(current, saved)
    try:
        yield previous, saved
    finally:
        install_library(saved)
        os.unlink(saved)


def load_data(c):
    c.execute("CREATE ROLE owner_role LOGIN")
    c.execute("GRANT CREATE ON SCHEMA public TO owner_role")
    c.execute("SET ROLE owner_role")
    c.execute("CREATE TABLE readings (time timestamptz NOT NULL, site text, sensor int, v float8, note text) USING tsbucket")
    c.execute("SELECT tsbucket.create_timeseries('readings', 'time', meta_columns => ARRAY['site', 'sensor'], granularity => 'minutes', expire_after => '3650 days')")
    c.execute("""INSERT INTO readings SELECT '2024-01-01'::timestamptz + i * interval '7 s', 's' || (i % 3), i % 5,
                     CASE WHEN i % 97 = 0 THEN NULL ELSE i / 3.0 END, CASE WHEN i % 2 = 0 THEN 'even' END
                   FROM generate_series(1, 5000) i""")
    for i in range(20):  # trickle: small buckets for compaction to merge later
        c.execute("INSERT INTO readings VALUES ('2024-01-01 03:00'::timestamptz + %s * interval '1 s', 's9', 1, %s, NULL)", (i, i))
    c.execute("DELETE FROM readings WHERE sensor = 2 AND v > 1000")
    c.execute("UPDATE readings SET site = 's8' WHERE site = 's1' AND sensor = 4")
    c.execute("SELECT tsbucket.set_series_retention('readings', '(s0,3)'::text, '7300 days')")
    c.execute("CREATE TABLE plain (time timestamptz NOT NULL, x int) USING tsbucket")
    c.execute("SELECT tsbucket.create_timeseries('plain', 'time', bucket_max_span => '2 hours', bucket_rounding => '2 hours')")
    c.execute("INSERT INTO plain SELECT '2024-02-01'::timestamptz + i * interval '1 min', i FROM generate_series(1, 2000) i")
    c.execute("RESET ROLE")


def snapshot(c):
    return ({t: c.execute(q).fetchall() for t, q in ROWS.items()},
            c.execute(SETTINGS).fetchall(), c.execute(RETENTION).fetchall())


def test_update_from_previous_release(libraries):
    previous, current = libraries
    install_library(previous)
    cluster = Cluster(worker=True, extra_conf=["tsbucket.worker_interval = 1"], extension_version=PREVIOUS_VERSION)
    try:
        with cluster.connect() as c:
            load_data(c)
            before = snapshot(c)
        with cluster.connect(dbname="postgres") as c:
            c.execute("CREATE DATABASE upgraded_empty")
            c.execute("CREATE DATABASE fresh")
        with cluster.connect(dbname="upgraded_empty") as c:
            c.execute(f"CREATE EXTENSION tsbucket VERSION '{PREVIOUS_VERSION}'")
        cluster.stop()

        install_library(current)
        cluster.start()
        with cluster.connect() as c:
            with pytest.raises(psycopg.Error) as e:
                c.execute(ROWS["readings"])
            assert e.value.sqlstate == "55000"
            assert CURRENT_VERSION in str(e.value) and PREVIOUS_VERSION in str(e.value)
        log = os.path.join(cluster.dir, "server.log")
        assert wait_for(lambda: "skipping maintenance" in open(log).read()), "the worker should report the old SQL"

        for db in ("test", "upgraded_empty"):
            with cluster.connect(dbname=db) as c:
                c.execute("ALTER EXTENSION tsbucket UPDATE")
                assert c.execute("SELECT extversion FROM pg_extension WHERE extname = 'tsbucket'").fetchone()[0] == CURRENT_VERSION
        with cluster.connect(dbname="fresh") as c:
            c.execute("CREATE EXTENSION tsbucket")

        fresh, upgraded = schema(cluster, "fresh"), schema(cluster, "upgraded_empty")
        if fresh != upgraded:
            import difflib
            pytest.fail("schema of an updated database differs from a fresh install:\n" +
                        "\n".join(difflib.unified_diff(fresh, upgraded, "fresh", "updated", lineterm="", n=1)))

        with cluster.connect() as c:
            assert snapshot(c) == before
            # Stores made by the previous release got the window_start index.
            plan = "\n".join(r[0] for r in c.execute("EXPLAIN SELECT * FROM plain WHERE time >= '2024-02-01 12:00'").fetchall())
            assert "Window Index" in plan, plan
            # ... and lost the index on max_time: expiry finds old buckets through window_start.
            assert c.execute("""SELECT count(*) FROM tsbucket.catalog k JOIN pg_index i ON i.indrelid = k.store_relid
                                  JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
                                 WHERE a.attname = 'max_time'""").fetchone()[0] == 0
            # Tables lost the parallel_workers = 0 older releases set, and are read in parallel.
            assert c.execute("SELECT count(*) FROM pg_class WHERE relname IN ('readings', 'plain') "
                             "AND 'parallel_workers=0' = ANY (reloptions)").fetchone()[0] == 0
            c.execute("SET parallel_setup_cost = 0")
            c.execute("SET parallel_tuple_cost = 0")
            c.execute("SET min_parallel_table_scan_size = 0")
            plan = "\n".join(r[0] for r in c.execute("EXPLAIN SELECT site, count(*), max(v) FROM readings GROUP BY site").fetchall())
            assert "Parallel Custom Scan (TsBucketScan)" in plan, plan
            assert c.execute(ROWS["readings"]).fetchall() == before[0]["readings"]
            c.execute("RESET parallel_setup_cost")
            c.execute("RESET parallel_tuple_cost")
            c.execute("RESET min_parallel_table_scan_size")
            assert c.execute("SELECT count(*) FROM tsbucket.verify('readings')").fetchone()[0] == 0
            c.execute("SET ROLE owner_role")
            c.execute("INSERT INTO readings VALUES ('2024-01-02', 's0', 3, 1.5, 'new'), ('2024-01-02', 's7', 7, 2.5, NULL)")
            c.execute("DELETE FROM readings WHERE site = 's7'")
            c.execute("INSERT INTO plain VALUES ('2024-03-01', -1)")
            assert c.execute("SELECT count(*) FROM readings WHERE note = 'new'").fetchone()[0] == 1
            assert c.execute("SELECT count(*) FROM readings WHERE site = 's7'").fetchone()[0] == 0
            c.execute("SELECT * FROM tsbucket.compact('readings')")
            c.execute("SELECT tsbucket.alter_timeseries('plain', expire_after => '1 day')")
            c.execute("RESET ROLE")
            # The worker maintains the database again: it expires all of plain.
            assert wait_for(lambda: c.execute("SELECT count(*) FROM plain").fetchone()[0] == 0, timeout=30)
            after = c.execute(ROWS["readings"]).fetchall()
            assert len(after) == len(before[0]["readings"]) + 1
            assert c.execute("SELECT count(*) FROM tsbucket.verify('readings')").fetchone()[0] == 0
            # Tables the previous release made (their internal relations joined the extension by ALTER EXTENSION,
            # on PostgreSQL 17 and later with their row and array types) drop cleanly, and leave the extension.
            c.execute("DROP TABLE plain")
            c.execute("DROP TABLE readings")
            assert c.execute("SELECT count(*) FROM pg_extension WHERE extname = 'tsbucket'").fetchone()[0] == 1
            assert c.execute("SELECT count(*) FROM tsbucket.catalog").fetchone()[0] == 0
            assert c.execute("""SELECT count(*) FROM pg_class k JOIN pg_namespace n ON n.oid = k.relnamespace
                                 WHERE n.nspname = 'tsbucket_internal' AND k.relkind IN ('r', 'S')""").fetchone()[0] == 0
    finally:
        cluster.destroy()
