"""The background worker: expiry and compaction on their own, crash safety,
DROP DATABASE while it runs."""

import subprocess
import threading
import time

import pytest

from conftest import Cluster, make_table, one_row_buckets, problems, set_worker, wait_for


@pytest.fixture(scope="module")
def worker_cluster():
    c = Cluster(worker=True, extra_conf=["tsbucket.worker_interval = 1"])
    yield c
    c.destroy()


def test_expiry_removes_whole_expired_buckets_only(worker_cluster):
    with worker_cluster.connect() as c:
        c.execute("CREATE TABLE ex (time timestamptz NOT NULL, sensor text, v float8) USING tsbucket")
        c.execute("SELECT tsbucket.create_timeseries('ex', 'time', 'sensor', bucket_max_span => '365 days', "
                  "bucket_rounding => '365 days', expire_after => '1 day')")
        c.execute("INSERT INTO ex SELECT now() - interval '500 days' + i * interval '1 s', 'old', i FROM generate_series(1, 100) i")
        # One bucket mixing an old row and a fresh one: kept whole.
        c.execute("INSERT INTO ex VALUES (greatest(to_timestamp(floor(extract(epoch FROM now()) / 31536000) * 31536000), "
                  "now() - interval '3 days'), 'mixed', 1), (now(), 'mixed', 2)")
        c.execute("INSERT INTO ex VALUES (now(), 'fresh', 1)")
        assert wait_for(lambda: c.execute("SELECT count(*) FROM ex WHERE sensor = 'old'").fetchone()[0] == 0)
        assert c.execute("SELECT sensor, count(*) FROM ex GROUP BY 1 ORDER BY 1").fetchall() == [("fresh", 1), ("mixed", 2)]
        job = c.execute("SELECT last_expiry IS NOT NULL, last_error FROM tsbucket.jobs WHERE table_name = 'ex'::regclass").fetchone()
        assert job == (True, None)


def test_compaction_matches_a_copy_load(worker_cluster):
    with worker_cluster.connect() as c:
        set_worker(c, False)
        for t in ("trickle", "loaded"):
            make_table(c, t)
        one_row_buckets(c)
        rows = [(f"2024-01-01 00:00:00+00", s, i) for i in range(300) for s in ("a", "b")]
        for _, s, i in rows:
            c.execute("INSERT INTO trickle VALUES ('2024-01-01 00:00:00+00'::timestamptz + %s * interval '1 s', %s, %s, %s)", (i, s, i, i))
        c.execute("INSERT INTO loaded SELECT time, sensor, v, n FROM trickle ORDER BY time")
        assert c.execute("SELECT buckets FROM tsbucket.stats('trickle')").fetchone()[0] == 600
        set_worker(c, True)
        assert wait_for(lambda: c.execute("SELECT buckets FROM tsbucket.stats('trickle')").fetchone()[0] == 2)
        trickle = c.execute("SELECT buckets, rows, compressed_bytes FROM tsbucket.stats('trickle')").fetchone()
        loaded = c.execute("SELECT buckets, rows, compressed_bytes FROM tsbucket.stats('loaded')").fetchone()
        assert trickle[:2] == loaded[:2]
        assert abs(trickle[2] - loaded[2]) <= 0.1 * loaded[2]
        diff = c.execute("SELECT count(*) FROM ((SELECT * FROM trickle EXCEPT ALL SELECT * FROM loaded) "
                         "UNION ALL (SELECT * FROM loaded EXCEPT ALL SELECT * FROM trickle)) d").fetchone()[0]
        assert diff == 0
        assert problems(c, "trickle") == []


def test_reads_and_writes_go_on_during_compaction(worker_cluster):
    with worker_cluster.connect() as c:
        make_table(c, "busy")
        for i in range(400):
            c.execute("INSERT INTO busy VALUES ('2024-01-01'::timestamptz + %s * interval '1 s', 's', %s, %s)", (i, i, i))
    stop = threading.Event()
    seen = []

    def reader():
        with worker_cluster.connect() as r:
            while not stop.is_set():
                n = r.execute("SELECT count(*) FROM busy WHERE n < 400").fetchone()[0]
                seen.append(n)

    t = threading.Thread(target=reader)
    t.start()
    with worker_cluster.connect() as w:
        for i in range(400, 600):
            w.execute("INSERT INTO busy VALUES ('2024-01-01'::timestamptz + %s * interval '1 s', 's', %s, %s)", (i, i, i))
        assert wait_for(lambda: w.execute("SELECT buckets FROM tsbucket.stats('busy')").fetchone()[0] <= 2)
    stop.set()
    t.join()
    # Every read saw each of the first 400 rows exactly once, before, during and after compaction.
    assert seen and all(n == 400 for n in seen)
    with worker_cluster.connect() as c:
        assert c.execute("SELECT count(*), count(DISTINCT n) FROM busy").fetchone() == (600, 600)


def test_kill_9_during_compaction_loses_nothing(worker_cluster):
    with worker_cluster.connect() as c:
        set_worker(c, False)
        make_table(c, "crashy")
        c.execute("""DO $$ BEGIN FOR i IN 1..3000 LOOP
                       INSERT INTO crashy VALUES ('2024-01-01'::timestamptz + i * interval '1 s', 's' || (i % 7), i, i);
                     END LOOP; END $$""")
        set_worker(c, True)
    time.sleep(1.2)
    worker_cluster.crash()
    worker_cluster.start()
    with worker_cluster.connect() as c:
        assert c.execute("SELECT count(*), count(DISTINCT n), sum(n) FROM crashy").fetchone() == (3000, 3000, sum(range(1, 3001)))
        assert problems(c, "crashy") == []
        assert wait_for(lambda: c.execute("SELECT buckets FROM tsbucket.stats('crashy')").fetchone()[0] <= 14)
        assert c.execute("SELECT count(*), count(DISTINCT n) FROM crashy").fetchone() == (3000, 3000)


def test_drop_database_while_the_worker_runs(worker_cluster):
    with worker_cluster.connect(dbname="postgres") as c:
        c.execute("CREATE DATABASE doomed")
    with worker_cluster.connect(dbname="doomed") as d:
        d.execute("CREATE EXTENSION tsbucket")
        make_table(d, "t")
        for i in range(200):
            d.execute("INSERT INTO t VALUES (now() - %s * interval '1 s', 'x', %s, %s)", (i, i, i))
    time.sleep(2.5)
    with worker_cluster.connect(dbname="postgres") as c:
        t0 = time.time()
        c.execute("DROP DATABASE doomed")
        assert time.time() - t0 < 10
        assert c.execute("SELECT count(*) FROM pg_database WHERE datname = 'doomed'").fetchone()[0] == 0


def test_expiry_timing(worker_cluster):
    """A bucket goes within about one interval after its newest row expires, not before."""
    with worker_cluster.connect() as c:
        set_worker(c, True)
        c.execute("CREATE TABLE timing (time timestamptz NOT NULL, sensor text) USING tsbucket")
        c.execute("SELECT tsbucket.create_timeseries('timing', 'time', 'sensor', expire_after => '4 seconds')")
        c.execute("INSERT INTO timing VALUES (now(), 'a'), (now() - interval '1 second', 'a')")
        inserted = time.time()
        time.sleep(2.0)
        assert c.execute("SELECT count(*) FROM timing").fetchone()[0] == 2, "expired before its time"
        assert wait_for(lambda: c.execute("SELECT count(*) FROM timing").fetchone()[0] == 0, timeout=15)
        # Expiry at 4 s plus at most one 1 s interval (and scheduling slack).
        assert time.time() - inserted < 8


def test_kill_9_during_expiry_expires_whole_buckets_or_none(worker_cluster):
    with worker_cluster.connect() as c:
        set_worker(c, False)
        c.execute("CREATE TABLE exp9 (time timestamptz NOT NULL, sensor text, n int) USING tsbucket")
        c.execute("SELECT tsbucket.create_timeseries('exp9', 'time', 'sensor', expire_after => '1 day')")
        c.execute("INSERT INTO exp9 SELECT now() - interval '10 days' + i * interval '1 s', 's' || (i % 50), i "
                  "FROM generate_series(1, 100000) i")
        c.execute("INSERT INTO exp9 SELECT now() - i * interval '1 s', 'new', i FROM generate_series(1, 1000) i")
        set_worker(c, True)
    time.sleep(1.1)
    worker_cluster.crash()
    worker_cluster.start()
    with worker_cluster.connect() as c:
        # Either the expiry committed or it did not: every bucket is whole.
        assert problems(c, "exp9") == []
        assert c.execute("SELECT count(*) FROM exp9 WHERE sensor = 'new'").fetchone()[0] == 1000
        old = c.execute("SELECT count(*) FROM exp9 WHERE sensor <> 'new'").fetchone()[0]
        assert old in (0, 100000)
        assert wait_for(lambda: c.execute("SELECT count(*) FROM exp9 WHERE sensor <> 'new'").fetchone()[0] == 0)


def worker_visits(cluster, dbname):
    with cluster.connect(dbname="postgres") as c:
        return c.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND backend_type = 'tsbucket worker'",
                         (dbname,)).fetchone()[0]


def test_no_worker_where_the_extension_is_absent(worker_cluster):
    with worker_cluster.connect() as c:
        set_worker(c, True)
    with worker_cluster.connect(dbname="postgres") as c:
        c.execute("CREATE DATABASE plain_db")
    time.sleep(3)  # the first visit finds no extension
    with worker_cluster.connect(dbname="postgres") as c:
        log_mark = c.execute("SELECT count(*) FROM pg_stat_activity").fetchone()[0]
    seen = 0
    for _ in range(12):
        seen += worker_visits(worker_cluster, "plain_db")
        time.sleep(0.25)
    assert seen == 0 and log_mark >= 0
    # CREATE EXTENSION brings the worker in.
    with worker_cluster.connect(dbname="plain_db") as d:
        d.execute("CREATE EXTENSION tsbucket")
        make_table(d, "t")
        for i in range(50):
            d.execute("INSERT INTO t VALUES ('2024-01-01'::timestamptz + %s * interval '1 s', 'x', %s, %s)", (i, i, i))
        assert wait_for(lambda: d.execute("SELECT buckets FROM tsbucket.stats('t')").fetchone()[0] == 1)
    with worker_cluster.connect(dbname="postgres") as c:
        c.execute("DROP DATABASE plain_db")


def test_an_error_in_one_table_does_not_stop_the_others(worker_cluster):
    with worker_cluster.connect() as c:
        set_worker(c, False)
        one_row_buckets(c)
        for t in ("broken", "healthy"):
            make_table(c, t)
            for i in range(20):
                c.execute(f"INSERT INTO {t} VALUES ('2024-01-01'::timestamptz + %s * interval '1 s', 'x', %s, %s)", (i, i, i))
        # A corrupt bucket makes compaction of one table fail.
        store = c.execute("SELECT bucket_store FROM tsbucket.timeseries WHERE table_name = 'broken'::regclass").fetchone()[0]
        c.execute(f"UPDATE {store} SET payload = '\\x01ff'::bytea WHERE bucket_id = (SELECT min(bucket_id) FROM {store})")
        set_worker(c, True)
        assert wait_for(lambda: c.execute("SELECT buckets FROM tsbucket.stats('healthy')").fetchone()[0] == 1)
        assert wait_for(lambda: c.execute("SELECT last_error IS NOT NULL FROM tsbucket.jobs "
                                          "WHERE table_name = 'broken'::regclass").fetchone() == (True,))
        error = c.execute("SELECT last_error FROM tsbucket.jobs WHERE table_name = 'broken'::regclass").fetchone()[0]
        assert "corrupt" in error
        # The broken table is untouched: its 20 buckets are still there, 19 of them readable.
        assert c.execute("SELECT buckets FROM tsbucket.stats('broken')").fetchone()[0] == 20


def test_reads_and_inserts_during_expiry(worker_cluster):
    with worker_cluster.connect() as c:
        set_worker(c, False)
        c.execute("CREATE TABLE exr (time timestamptz NOT NULL, sensor text, n int) USING tsbucket")
        c.execute("SELECT tsbucket.create_timeseries('exr', 'time', 'sensor', expire_after => '1 day')")
        c.execute("INSERT INTO exr SELECT now() - interval '10 days' + i * interval '1 s', 'old' || (i % 20), i "
                  "FROM generate_series(1, 50000) i")
        c.execute("INSERT INTO exr SELECT now() - i * interval '1 s', 'fresh', i FROM generate_series(1, 1000) i")
        set_worker(c, True)
    stop = threading.Event()
    seen = []

    def reader():
        with worker_cluster.connect() as r:
            while not stop.is_set():
                seen.append(r.execute("SELECT count(*) FILTER (WHERE sensor = 'fresh'), "
                                      "count(*) FILTER (WHERE sensor <> 'fresh') FROM exr").fetchone())

    t = threading.Thread(target=reader)
    t.start()
    with worker_cluster.connect() as w:
        for i in range(200):
            w.execute("INSERT INTO exr VALUES (now(), 'fresh', -%s)", (i,))
        assert wait_for(lambda: w.execute("SELECT count(*) FROM exr WHERE sensor <> 'fresh'").fetchone()[0] == 0)
    stop.set()
    t.join()
    # Fresh rows are never lost; expired buckets vanish whole, all at once.
    assert seen and all(fresh >= 1000 and old in (0, 50000) for fresh, old in seen)
    with worker_cluster.connect() as c:
        assert c.execute("SELECT count(*) FROM exr WHERE sensor = 'fresh'").fetchone()[0] == 1200


def test_worker_gathers_statistics(worker_cluster):
    """ANALYZE cannot sample a time-series table by its own blocks: the worker
    gathers its statistics once enough buckets were written, as the table's
    owner, and the planner's estimates follow."""
    with worker_cluster.connect() as c:
        c.execute("DROP ROLE IF EXISTS stats_owner")
        c.execute("CREATE ROLE stats_owner")
        c.execute("GRANT CREATE ON SCHEMA public TO stats_owner")
        c.execute("SET ROLE stats_owner")
        make_table(c, "analyzed")
        c.execute("INSERT INTO analyzed SELECT '2024-01-01'::timestamptz + i * interval '1 s', 's' || (i % 20), i, i % 7 "
                  "FROM generate_series(1, 60000) i")
        c.execute("RESET ROLE")
        # (A visit between CREATE TABLE and the INSERT analyzes the empty table first.)
        assert wait_for(lambda: c.execute("SELECT count(*) FROM pg_stats WHERE tablename = 'analyzed' AND attname = 'sensor'")
                        .fetchone()[0] == 1, timeout=30)
        stats = dict(c.execute("SELECT attname, n_distinct FROM pg_stats WHERE tablename = 'analyzed'").fetchall())
        assert stats["sensor"] == 20 and stats["n"] == 7 and stats["time"] == -1
        plan = c.execute("EXPLAIN (FORMAT JSON) SELECT * FROM analyzed WHERE sensor = 's3'").fetchone()[0]
        assert 1500 <= plan[0]["Plan"]["Plan Rows"] <= 6000
        assert c.execute("SELECT last_error FROM tsbucket.jobs WHERE table_name = 'analyzed'::regclass").fetchone()[0] is None
