"""pg_dump / pg_restore with only the standard commands: every format,
pg_dumpall, -t, a dump taken by a non-superuser owner, and a database with the
extension but no configured table. The restored database must hold the same
rows, settings and series retention, as buckets, with no stray bucket stores,
and accept inserts, deletes, expiry and compaction afterwards."""

import os
import subprocess

import pytest

from conftest import Cluster, as_postgres

SETTINGS = """SELECT table_name::text, time_column, meta_columns::text, granularity, bucket_max_span, expire_after
                FROM tsbucket.timeseries WHERE table_name::text = ANY (%s) ORDER BY 1"""
RETENTION = """SELECT relid::regclass::text, meta, expire_after FROM tsbucket.series_retention
                WHERE relid::regclass::text = ANY (%s) ORDER BY 1, 2"""
ROWS = {
    "m": "SELECT time, host, region, v, note FROM m ORDER BY time, host, region, v",
    "plain": "SELECT time, v FROM plain ORDER BY time, v",
}
STORES = "SELECT count(*) FROM tsbucket.catalog"
# Internal tables that belong to no time-series table (orphans, or restored copies).
STRAYS = """SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname = 'tsbucket_internal' AND c.relkind IN ('r', 'S')
               AND c.oid NOT IN (SELECT store_relid FROM tsbucket.catalog UNION ALL SELECT moves_relid FROM tsbucket.catalog
                                 UNION ALL SELECT id_sequence FROM tsbucket.catalog
                                 UNION ALL SELECT unnest(tail_segments) FROM tsbucket.catalog
                                 UNION ALL SELECT tail_current FROM tsbucket.catalog)"""


@pytest.fixture(scope="module")
def cluster():
    c = Cluster(worker=True, extra_conf=["tsbucket.worker_interval = 1"])
    with c.connect() as conn:
        conn.execute("CREATE ROLE alice LOGIN")
        conn.execute("GRANT CREATE ON SCHEMA public TO alice")
        conn.execute("SET ROLE alice")
        conn.execute("""CREATE TABLE m (time timestamptz NOT NULL, host text, region text, v float8, note text)
                        USING tsbucket""")
        conn.execute("""SELECT tsbucket.create_timeseries('m', 'time', meta_columns => ARRAY['host', 'region'],
                        granularity => 'minutes', expire_after => '3650 days')""")
        conn.execute("""INSERT INTO m SELECT '2024-01-01'::timestamptz + i * interval '1 minute', 'h' || (i % 5),
                        CASE WHEN i % 2 = 0 THEN 'us' ELSE 'eu' END, i * 0.5, CASE WHEN i % 7 = 0 THEN 'note ' || i END
                        FROM generate_series(1, 6000) i""")
        conn.execute("DELETE FROM m WHERE v::int % 13 = 0")
        conn.execute("ALTER TABLE m RENAME COLUMN host TO hostname")
        conn.execute("ALTER TABLE m RENAME COLUMN hostname TO host")
        conn.execute("ALTER TABLE m ADD COLUMN extra int DEFAULT 7")
        conn.execute("ALTER TABLE m DROP COLUMN extra")
        conn.execute("SELECT tsbucket.set_series_retention('m', ('h1', 'us')::record, '7300 days')")
        conn.execute("SELECT tsbucket.alter_timeseries('m', granularity => 'hours')")
        conn.execute("CREATE TABLE plain (time timestamp NOT NULL, v int) USING tsbucket")
        conn.execute("SELECT tsbucket.create_timeseries('plain', 'time')")
        conn.execute("INSERT INTO plain SELECT '2024-01-01'::timestamp + i * interval '1 s', i FROM generate_series(1, 500) i")
        conn.execute("RESET ROLE")
    yield c
    c.destroy()


def snapshot(conn, tables=("m", "plain")):
    return (conn.execute(SETTINGS, (list(tables),)).fetchall(), conn.execute(RETENTION, (list(tables),)).fetchall(),
            {t: conn.execute(ROWS[t]).fetchall() for t in tables})


def run(cluster, tool, *args, user="postgres", **kw):
    return as_postgres([f"{cluster.bindir}/{tool}", "-h", cluster.dir, "-p", str(cluster.port), "-U", user, *args], **kw)


def fresh_db(cluster, name):
    with cluster.connect(dbname="postgres") as c:
        c.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        c.execute(f"CREATE DATABASE {name}")


def check_restored(cluster, dbname, expected, tables=("m", "plain")):
    with cluster.connect(dbname=dbname) as c:
        assert snapshot(c, tables) == expected
        assert c.execute(STORES).fetchone()[0] == len(tables)
        assert c.execute(STRAYS).fetchone()[0] == 0
        for t in tables:
            assert c.execute(f"SELECT count(*) FROM tsbucket.verify('{t}')").fetchone()[0] == 0
        # Restored as buckets: a COPY fills them, far fewer than one per row.
        buckets, rows = c.execute("SELECT buckets, rows FROM tsbucket.stats('m')").fetchone()
        assert rows > 5000 and buckets <= 40
        # Writes, deletes, expiry and compaction work afterwards.
        c.execute("INSERT INTO m VALUES ('2025-01-01', 'h9', 'us', 1, NULL)")
        c.execute("INSERT INTO m VALUES ('2025-01-01 00:00:01', 'h9', 'us', 2, NULL)")
        c.execute("DELETE FROM m WHERE host = 'h0'")
        assert c.execute("SELECT count(*) FROM m WHERE host IN ('h0', 'h9')").fetchone()[0] == 2
        c.execute("SELECT * FROM tsbucket.expire('m')")
        # Compacted (by this call or the worker, whichever ran first): h9's rows share a bucket.
        c.execute("SELECT * FROM tsbucket.compact('m')")
        assert c.execute("SELECT count(*) FROM tsbucket.buckets('m') WHERE meta LIKE '(h9,%'").fetchone()[0] == 1
        assert c.execute("SELECT count(*) FROM m WHERE host = 'h9'").fetchone()[0] == 2


@pytest.mark.parametrize("fmt", ["plain", "custom", "directory"])
def test_dump_and_restore_in_each_format(cluster, fmt, tmp_path):
    with cluster.connect() as c:
        expected = snapshot(c)
    out = os.path.join(cluster.dir, f"dump-{fmt}")
    run(cluster, "pg_dump", "-F", fmt[0], "-f", out, "test")
    target = f"restored_{fmt}"
    fresh_db(cluster, target)
    if fmt == "plain":
        run(cluster, "psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", target, "-f", out)
    else:
        run(cluster, "pg_restore", "--exit-on-error", "-d", target, out)
    check_restored(cluster, target, expected)


def test_parallel_restore(cluster):
    with cluster.connect() as c:
        expected = snapshot(c)
    out = os.path.join(cluster.dir, "dump-parallel")
    run(cluster, "pg_dump", "-F", "d", "-j", "2", "-f", out, "test")
    fresh_db(cluster, "restored_parallel")
    run(cluster, "pg_restore", "--exit-on-error", "-j", "2", "-d", "restored_parallel", out)
    check_restored(cluster, "restored_parallel", expected)


def test_single_table_dump(cluster):
    """-t dumps no extension configuration data: the label carries it."""
    with cluster.connect() as c:
        expected = snapshot(c, ("m",))
    out = os.path.join(cluster.dir, "dump-t.sql")
    run(cluster, "pg_dump", "-t", "m", "-f", out, "test")
    fresh_db(cluster, "restored_t")
    with cluster.connect(dbname="restored_t") as c:
        # A -t dump holds neither the extension nor the roles (alice exists cluster-wide).
        c.execute("CREATE EXTENSION tsbucket")
    run(cluster, "psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", "restored_t", "-f", out)
    check_restored(cluster, "restored_t", expected, ("m",))


def test_dump_by_non_superuser_owner(cluster):
    with cluster.connect() as c:
        expected = snapshot(c)
    out = os.path.join(cluster.dir, "dump-alice.sql")
    run(cluster, "pg_dump", "-f", out, "test", user="alice")
    fresh_db(cluster, "restored_alice")
    run(cluster, "psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", "restored_alice", "-f", out)
    check_restored(cluster, "restored_alice", expected)


def test_dumpall(cluster):
    with cluster.connect() as c:
        expected = snapshot(c)
    out = os.path.join(cluster.dir, "dumpall.sql")
    run(cluster, "pg_dumpall", "-f", out)
    # Restore into a second cluster: roles, databases and all.
    other = Cluster(worker=True, extra_conf=["tsbucket.worker_interval = 1"])
    try:
        as_postgres([f"{other.bindir}/psql", "-h", other.dir, "-p", str(other.port), "-U", "postgres", "-X", "-q",
                     "-d", "postgres", "-f", out])
        check_restored(other, "test", expected)
    finally:
        other.destroy()


def test_database_with_extension_but_no_table(cluster):
    fresh_db(cluster, "empty_ext")
    with cluster.connect(dbname="empty_ext") as c:
        c.execute("CREATE EXTENSION tsbucket")
    out = os.path.join(cluster.dir, "dump-empty")
    run(cluster, "pg_dump", "-F", "c", "-f", out, "empty_ext")
    fresh_db(cluster, "empty_restored")
    run(cluster, "pg_restore", "--exit-on-error", "-d", "empty_restored", out)
    with cluster.connect(dbname="empty_restored") as c:
        assert c.execute("SELECT count(*) FROM tsbucket.timeseries").fetchone()[0] == 0


def test_label_is_kept_by_tsbucket(cluster):
    with cluster.connect() as c:
        label = c.execute("SELECT label FROM pg_seclabel WHERE objoid = 'm'::regclass AND provider = 'tsbucket'").fetchone()[0]
        assert '"time_column": "time"' in label and '"granularity": "hours"' in label
        # Setting the same label again is harmless; another one is refused.
        c.execute(f"SECURITY LABEL FOR tsbucket ON TABLE m IS '{label}'")
        with pytest.raises(Exception, match="already a time-series table"):
            c.execute("SECURITY LABEL FOR tsbucket ON TABLE m IS '{}'")
        c.execute("CREATE TABLE heap_t (a int)")
        with pytest.raises(Exception, match="only to tables created USING tsbucket"):
            c.execute("SECURITY LABEL FOR tsbucket ON TABLE heap_t IS '{}'")
