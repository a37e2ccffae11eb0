"""pg_upgrade of a cluster with tsbucket tables, within a major version and
from PostgreSQL 15 to 18: the tables stay readable and writable, with their
settings and retention."""

import os
import subprocess
import tempfile

import psycopg
import pytest

from conftest import Cluster, as_postgres, pg_config

ROWS = "SELECT time, host, v FROM u ORDER BY time, host, v"
SETTINGS = "SELECT table_name::text, meta_columns::text, granularity, expire_after FROM tsbucket.timeseries"
RETENTION = "SELECT meta, expire_after FROM tsbucket.series_retention"


def libdir(version):
    return subprocess.check_output([pg_config(version), "--pkglibdir"], text=True).strip()


def run_pg_upgrade(old_version, new_version):
    """Makes a cluster of old_version with a time-series table, pg_upgrades it to
    new_version, and checks rows, settings, retention, and writes afterwards."""
    if not os.path.exists(os.path.join(libdir(old_version), "tsbucket.so")):
        pytest.skip(f"tsbucket is not installed for {old_version}")
    saved = os.environ.get("TSBUCKET_PG")
    os.environ["TSBUCKET_PG"] = old_version
    try:
        old = Cluster(worker=True, extra_conf=["tsbucket.worker_interval = 1"])
    finally:
        os.environ["TSBUCKET_PG"] = saved
    new_bin = subprocess.check_output([pg_config(new_version), "--bindir"], text=True).strip()
    new_dir = tempfile.mkdtemp(prefix="tsbucket-upgrade-")
    os.chmod(new_dir, 0o777)
    new_data = os.path.join(new_dir, "data")
    try:
        with old.connect() as c:
            c.execute("CREATE TABLE u (time timestamptz NOT NULL, host text, v int) USING tsbucket")
            c.execute("SELECT tsbucket.create_timeseries('u', 'time', 'host', expire_after => '3650 days')")
            c.execute("INSERT INTO u SELECT '2024-01-01'::timestamptz + i * interval '1 s', 'h' || (i % 3), i FROM generate_series(1, 3000) i")
            for i in range(5):
                c.execute("INSERT INTO u VALUES ('2024-01-01 02:00'::timestamptz + %s * interval '1 s', 'h9', %s)", (i, i))
            c.execute("DELETE FROM u WHERE v % 11 = 0")
            c.execute("SELECT tsbucket.set_series_retention('u', 'h1'::text, '7300 days')")
            c.execute("SELECT * FROM tsbucket.compact('u')")
            expected = (c.execute(ROWS).fetchall(), c.execute(SETTINGS).fetchall(), c.execute(RETENTION).fetchall())
        if old_version == "pg15" and new_version != "pg15":
            # Debian's PostgreSQL 15 (15.20-0+deb12u1) marks every column with an
            # attribute option pg_attver that no other server accepts (RESET
            # keeps it), so pg_upgrade to any other build fails for every table,
            # heap included. Clear the marks, as a DBA on that build would have to.
            for db in ("test", "postgres", "template1"):
                with old.connect(dbname=db) as d:
                    d.execute(r"""UPDATE pg_catalog.pg_attribute
                                     SET attoptions = NULLIF(ARRAY(SELECT o FROM unnest(attoptions) o WHERE o NOT LIKE 'pg\_attver=%'), '{}')
                                   WHERE attoptions::text LIKE '%pg\_attver%'""")
        old.stop()
        # The old cluster was made without data checksums, which PostgreSQL 18 enables by default.
        checksums = ["--no-data-checksums"] if new_version == "pg18" and old_version != "pg18" else []
        as_postgres([f"{new_bin}/initdb", "-D", new_data, "-A", "trust", "-U", "postgres", "--no-sync"] + checksums)
        port = old.port + 150
        conf = (f"port = {port}\nunix_socket_directories = '{new_dir}'\nlisten_addresses = ''\n"
                "shared_preload_libraries = 'tsbucket'\ntsbucket.worker_interval = 1\n")
        as_postgres(["sh", "-c", f"cat >> {new_data}/postgresql.conf"], input=conf)
        try:
            as_postgres([f"{new_bin}/pg_upgrade", "-b", old.bindir, "-B", new_bin, "-d", old.data, "-D", new_data,
                         "-p", str(old.port), "-P", str(port), "-s", new_dir, "-U", "postgres"], cwd=new_dir)
        except subprocess.CalledProcessError as e:
            logs = subprocess.run(["sh", "-c", f"grep -B 5 -m1 ERROR {new_data}/pg_upgrade_output.d/*/log/*.log"], capture_output=True, text=True)
            raise AssertionError(e.stdout + logs.stdout) from e
        as_postgres([f"{new_bin}/pg_ctl", "-D", new_data, "-l", f"{new_dir}/server.log", "-w", "start"])
        with psycopg.connect(host=new_dir, port=port, user="postgres", dbname="test", autocommit=True) as c:
            assert (c.execute(ROWS).fetchall(), c.execute(SETTINGS).fetchall(), c.execute(RETENTION).fetchall()) == expected
            assert c.execute("SELECT count(*) FROM tsbucket.verify('u')").fetchone()[0] == 0
            c.execute("INSERT INTO u VALUES ('2025-01-01', 'h8', 1)")
            c.execute("DELETE FROM u WHERE host = 'h0'")
            c.execute("UPDATE u SET host = 'h7' WHERE host = 'h9'")
            c.execute("SELECT * FROM tsbucket.compact('u')")
            c.execute("SELECT * FROM tsbucket.expire('u')")
            assert c.execute("SELECT count(*) FROM u WHERE host IN ('h0', 'h8', 'h7')").fetchone()[0] == 1 + 4
    finally:
        try:
            as_postgres([f"{new_bin}/pg_ctl", "-D", new_data, "-m", "immediate", "-w", "stop"])
        except subprocess.CalledProcessError:
            pass
        old.destroy()
        subprocess.run(["rm", "-rf", new_dir])


def test_pg_upgrade_within_major():
    """What tsbucket itself must get right in pg_upgrade (binary-upgrade mode,
    stores carried over as files) is the same across majors; this runs on each."""
    version = os.environ.get("TSBUCKET_PG", "pg15")
    run_pg_upgrade(version, version)


@pytest.mark.skipif(os.environ.get("TSBUCKET_PG", "pg15") != "pg18", reason="runs once, in the PostgreSQL 18 pass")
def test_pg_upgrade_from_15_to_18():
    run_pg_upgrade("pg15", "pg18")
