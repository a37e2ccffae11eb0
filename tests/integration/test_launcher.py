"""The launcher holds no database connection: the database `postgres` can be
dropped, and a cluster without it is still served. A refused DROP DATABASE
disturbs no worker."""

import time

from conftest import Cluster


def make_trickled_table(conn):
    """Table t with five one-row buckets, for the worker to compact into one."""
    conn.execute("CREATE TABLE t (time timestamptz NOT NULL, s text, v int) USING tsbucket")
    conn.execute("SELECT tsbucket.create_timeseries('t', 'time', 's')")
    for i in range(5):
        conn.execute("INSERT INTO t VALUES ('2024-01-01'::timestamptz + %s * interval '1 s', 'a', %s)", (i, i))


def test_cluster_without_the_postgres_database_is_served():
    c = Cluster(worker=True, extra_conf=["tsbucket.worker_interval = 1"])
    try:
        with c.connect(dbname="template1") as conn:
            conn.execute("DROP DATABASE postgres")
        with c.connect() as conn:
            make_trickled_table(conn)
            deadline = time.time() + 20
            while conn.execute("SELECT count(*) FROM tsbucket.buckets('t')").fetchone()[0] != 1:
                assert time.time() < deadline, "the worker did not compact the table"
                time.sleep(0.25)
            assert conn.execute("SELECT count(*) FROM t").fetchone()[0] == 5
    finally:
        c.destroy()


def test_refused_drop_database_disturbs_no_worker():
    """A DROP DATABASE its caller may not run is refused by Postgres before
    tsbucket stops anything: the worker busy in that database carries on."""
    import psycopg
    import pytest
    from conftest import wait_for

    c = Cluster(worker=True, extra_conf=["tsbucket.worker_interval = 1"])
    try:
        with c.connect() as conn:
            conn.execute("CREATE ROLE intruder LOGIN")
            make_trickled_table(conn)
        # Hold the table's store so that the worker's next round waits in this database
        # (it takes the table's own lock without waiting, and skips a table someone holds).
        with c.connect(autocommit=False) as holder, c.connect(dbname="postgres") as admin:
            store = holder.execute("SELECT store_relid::regclass::text FROM tsbucket.catalog WHERE relid = 't'::regclass").fetchone()[0]
            holder.execute(f"LOCK TABLE {store} IN ACCESS EXCLUSIVE MODE")
            worker = "SELECT pid FROM pg_stat_activity WHERE datname = 'test' AND backend_type = 'tsbucket worker'"
            assert wait_for(lambda: admin.execute(worker).fetchone() is not None), "no worker came to the database"
            pid = admin.execute(worker).fetchone()[0]
            with psycopg.connect(host=c.dir, port=c.port, user="intruder", dbname="postgres", autocommit=True) as intruder:
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    intruder.execute("DROP DATABASE test")
            time.sleep(1)
            assert admin.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone()[0] == 1
            holder.rollback()
        # The worker then finishes its round: the table is compacted.
        with c.connect() as conn:
            assert wait_for(lambda: conn.execute("SELECT count(*) FROM tsbucket.buckets('t')").fetchone()[0] == 1)
    finally:
        c.destroy()


def test_databases_without_the_extension_are_visited_quietly():
    """The first visit to a database finds out whether it has the extension;
    where it has none, the worker leaves without an error (it used to read
    the tail's catalog there and exit with code 1)."""
    c = Cluster(worker=True, extra_conf=["tsbucket.worker_interval = 1"])
    try:
        with c.connect(dbname="postgres") as conn:
            for i in range(3):
                conn.execute(f"CREATE DATABASE plain{i}")
        deadline = time.time() + 20
        with c.connect() as conn:
            while time.time() < deadline:
                visited = conn.execute("SELECT count(*) FROM tsbucket.worker_status() WHERE extension_absent").fetchone()[0]
                if visited >= 3:
                    break
                time.sleep(0.25)
            assert visited >= 3, "the launcher did not visit the new databases"
        with open(f"{c.dir}/server.log", errors="replace") as f:
            log = f.read()
        assert "ERROR" not in log and "exited with exit code 1" not in log, log[-3000:]
    finally:
        c.destroy()


def test_the_worker_skips_a_table_someone_holds():
    """The worker takes a table's lock without waiting (as autovacuum): while
    another session holds the table, the worker does not queue for it (a DROP
    behind it would wait too), and it comes back at a later visit."""
    c = Cluster(worker=True, extra_conf=["tsbucket.worker_interval = 1"])
    try:
        with c.connect() as conn:
            make_trickled_table(conn)
        with c.connect(autocommit=False) as holder, c.connect() as watcher:
            holder.execute("LOCK TABLE t IN SHARE MODE")
            time.sleep(3)
            waiting = watcher.execute("""SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)
                                          WHERE a.backend_type = 'tsbucket worker' AND NOT l.granted""").fetchone()[0]
            assert waiting == 0, "the worker queued for a table another session holds"
            assert watcher.execute("SELECT count(*) FROM tsbucket.buckets('t')").fetchone()[0] == 0
            holder.rollback()
        from conftest import wait_for
        with c.connect() as conn:
            assert wait_for(lambda: conn.execute("SELECT count(*) FROM tsbucket.buckets('t')").fetchone()[0] == 1), \
                "the worker did not come back to the table"
    finally:
        c.destroy()
