"""The tail, as devices and clients use it: rows written a few per
transaction wait row by row until the worker drains them into buckets.
Crashes (kill -9) mid-ingest and mid-drain lose no committed row and
duplicate none; DML on waiting rows runs beside the drain (a DELETE or UPDATE
that waited for it follows the rows into their buckets, READ COMMITTED, or
fails with 40001, REPEATABLE READ); two-phase commit, executemany in one
transaction, a standby and the worker's own rounds all see the same rows."""

import datetime
import math
import threading
import time

import psycopg
import pytest

from conftest import Cluster, standby_of, wait_for

TABLE = "CREATE TABLE {t} (time timestamptz NOT NULL, sensor text, temp float8, hum int4) USING tsbucket"


def make(c, t="tr"):
    c.execute(f"DROP TABLE IF EXISTS {t}")
    c.execute(TABLE.format(t=t))
    c.execute(f"SELECT tsbucket.create_timeseries('{t}', 'time', 'sensor')")


def insert_one(c, i, t="tr", sensors=10):
    c.execute(f"INSERT INTO {t} VALUES ('2024-01-01'::timestamptz + %s * interval '1 s', %s, %s, %s)",
              (i, f"s{i % sensors}", i / 2, i))


def tail_rows(c, t="tr"):
    return c.execute(f"SELECT tail_rows FROM tsbucket.stats('{t}')").fetchone()[0]


def content(c, t="tr"):
    return c.execute(f"SELECT count(*), count(DISTINCT hum), coalesce(sum(hum), 0) FROM {t}").fetchone()


@pytest.fixture(scope="module")
def worker_cluster():
    c = Cluster(worker=True, extra_conf=["tsbucket.worker_interval = 1", "max_prepared_transactions = 5",
                                         "tsbucket.tail_drain_rows = 500"])
    yield c
    c.destroy()


@pytest.fixture(scope="module")
def quiet_cluster():
    c = Cluster(extra_conf=["max_prepared_transactions = 5"])
    yield c
    c.destroy()


def test_worker_drains_and_empties_segments(worker_cluster):
    with worker_cluster.connect() as c:
        make(c)
        for i in range(3000):
            insert_one(c, i)
        # tail_drain_rows = 500: the worker comes before its interval is up, and
        # then empties the drained segments once no snapshot reads them.
        assert wait_for(lambda: tail_rows(c) == 0, timeout=30)
        assert wait_for(lambda: c.execute("SELECT count(*) FROM tsbucket.tail_drained").fetchone()[0] == 0, timeout=30)
        assert content(c) == (3000, 3000, sum(range(3000)))
        buckets, rows = c.execute("SELECT buckets, rows FROM tsbucket.stats('tr')").fetchone()
        assert rows == 3000 and buckets <= 40
        assert c.execute("SELECT count(*) FROM tsbucket.jobs WHERE last_error IS NOT NULL").fetchone()[0] == 0


def test_worker_round_leaves_an_open_window_growing(quiet_cluster):
    """The worker's round (run here by hand, to count its drains): rows of the
    current window become a bucket of their own at each drain instead of
    rewriting the series' growing bucket; a window that has ended is merged;
    an explicit compact merges everything."""
    with quiet_cluster.connect() as c:
        make(c, "ow")
        pieces = "SELECT bucket_id FROM tsbucket.buckets('ow') WHERE meta = 'now' ORDER BY bucket_id"
        seen = []
        for round_ in range(3):
            for i in range(200):
                c.execute("INSERT INTO ow VALUES (now(), 'now', %s, %s)", (i, round_ * 200 + i))
                c.execute("INSERT INTO ow VALUES ('2024-01-01'::timestamptz + %s * interval '1 s', 'old', %s, %s)",
                          (round_ * 200 + i, i, round_ * 200 + i))
            c.execute("SELECT tsbucket._run_jobs('ow')")
            assert tail_rows(c, "ow") == 0
            ids = [r[0] for r in c.execute(pieces).fetchall()]
            # The earlier pieces are still there, untouched; this drain added one.
            assert ids[:len(seen)] == seen and len(ids) == len(seen) + 1
            seen = ids
            # The ended window (2024) is merged at once.
            assert c.execute("SELECT count(*), sum(rows) FROM tsbucket.buckets('ow') WHERE meta = 'old'").fetchone() == (1, 200 * (round_ + 1))
        assert c.execute("SELECT buckets_merged, buckets_written FROM tsbucket.jobs WHERE table_name = 'ow'::regclass").fetchone() == (1, 2)
        # Nothing new, but a window left growing: the next round looks again (no skip).
        assert c.execute("SELECT compacted_through FROM tsbucket.job_state WHERE relid = 'ow'::regclass").fetchone()[0] is None
        assert content(c, "ow") == (1200, 600, 2 * sum(range(600)))
        c.execute("SELECT * FROM tsbucket.compact('ow')")
        assert c.execute("SELECT count(*), sum(rows) FROM tsbucket.buckets('ow') WHERE meta = 'now'").fetchone() == (1, 600)
        assert content(c, "ow") == (1200, 600, 2 * sum(range(600)))


def test_executemany_in_one_transaction_fills_buckets_as_copy(quiet_cluster):
    start = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)
    rows = [(start + datetime.timedelta(seconds=i), f"s{i % 100}", i / 3, i) for i in range(20000)]
    with quiet_cluster.connect() as c:
        make(c, "em")
        make(c, "cp")
    with quiet_cluster.connect(autocommit=False) as c:
        with c.cursor() as cur:
            cur.executemany("INSERT INTO em VALUES (%s, %s, %s, %s)", rows)
        c.commit()
    with quiet_cluster.connect() as c:
        with c.cursor().copy("COPY cp FROM STDIN") as copy:
            for r in rows:
                copy.write_row(r)
        layout = "SELECT meta, window_start, rows FROM tsbucket.buckets('{}') ORDER BY 1, 2, 3"
        assert tail_rows(c, "em") == 0
        assert c.execute(layout.format("em")).fetchall() == c.execute(layout.format("cp")).fetchall()
        assert content(c, "em") == content(c, "cp") == (20000, 20000, sum(range(20000)))


def test_kill_during_ingest_loses_and_duplicates_nothing():
    cluster = Cluster(worker=True, extra_conf=["tsbucket.worker_interval = 1", "tsbucket.tail_drain_rows = 300"])
    try:
        with cluster.connect() as c:
            make(c)
        committed = []
        stop = threading.Event()

        def writer(k):
            try:
                with cluster.connect() as c:
                    i = k
                    while not stop.is_set():
                        insert_one(c, i)
                        committed.append(i)
                        i += 4
            except psycopg.Error:
                pass

        threads = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        time.sleep(4)
        cluster.crash()
        stop.set()
        for t in threads:
            t.join()
        cluster.start()
        with cluster.connect() as c:
            got = [r[0] for r in c.execute("SELECT hum FROM tr").fetchall()]
            assert len(got) == len(set(got)), "a row came back twice"
            assert set(committed) <= set(got), "a committed row is missing"
            # The worker drains what recovery brought back.
            assert wait_for(lambda: tail_rows(c) == 0, timeout=30), (
                f"{tail_rows(c)} rows still wait; jobs: {c.execute('SELECT * FROM tsbucket.job_state').fetchall()}; "
                f"launcher: {c.execute('SELECT * FROM tsbucket.worker_status()').fetchall()}\n{cluster.log_tail(60)}")
            assert sorted(r[0] for r in c.execute("SELECT hum FROM tr").fetchall()) == sorted(got)
    finally:
        cluster.destroy()


def test_kill_during_drain_loses_and_duplicates_nothing():
    cluster = Cluster(extra_conf=["max_wal_size = 1GB"])
    try:
        with cluster.connect() as c:
            make(c)
            # One transaction per row, committed: all in the tail.
            for i in range(20000):
                insert_one(c, i, sensors=2000)
            assert tail_rows(c) == 20000
        drainer = cluster.connect()
        drainer.execute("BEGIN")
        drainer.execute("SELECT * FROM tsbucket.compact('tr')")
        # Mid-drain: its buckets written, its transaction open.
        cluster.crash()
        cluster.start()
        with cluster.connect() as c:
            assert content(c) == (20000, 20000, sum(range(20000)))
            assert tail_rows(c) == 20000
            c.execute("SELECT * FROM tsbucket.compact('tr')")
            assert tail_rows(c) == 0 and content(c) == (20000, 20000, sum(range(20000)))
            # And once more after the drain committed (its segment not yet emptied).
        cluster.crash()
        cluster.start()
        with cluster.connect() as c:
            assert tail_rows(c) == 0 and content(c) == (20000, 20000, sum(range(20000)))
            assert c.execute("SELECT count(*) FROM tsbucket.verify('tr')").fetchone()[0] == 0
    finally:
        cluster.destroy()


def test_dml_on_tail_rows_beside_a_drain(quiet_cluster):
    with quiet_cluster.connect() as a, quiet_cluster.connect() as b:
        make(a, "dm")
        for i in range(40):
            insert_one(a, i, t="dm", sensors=4)
        # READ COMMITTED: a DELETE and an UPDATE wait for the drain, then follow the rows into their buckets.
        b.execute("BEGIN")
        b.execute("SELECT * FROM tsbucket.compact('dm')")
        out = {}
        t1 = threading.Thread(target=lambda: out.update(d=a.execute("DELETE FROM dm WHERE sensor = 's1' RETURNING hum").fetchall()))
        t1.start()
        time.sleep(0.5)
        assert t1.is_alive(), "the DELETE did not wait for the drain"
        b.execute("COMMIT")
        t1.join()
        assert sorted(r[0] for r in out["d"]) == list(range(1, 40, 4))
        for i in range(40, 60):
            insert_one(a, i, t="dm", sensors=4)
        b.execute("BEGIN")
        b.execute("SELECT * FROM tsbucket.compact('dm')")
        t2 = threading.Thread(target=lambda: out.update(u=a.execute("UPDATE dm SET sensor = 'x' WHERE sensor = 's2' RETURNING hum").fetchall()))
        t2.start()
        time.sleep(0.5)
        b.execute("COMMIT")
        t2.join()
        assert len(out["u"]) == 15
        assert a.execute("SELECT sensor, count(*) FROM dm GROUP BY 1 ORDER BY 1").fetchall() == [("s0", 15), ("s1", 5), ("s3", 15), ("x", 15)]
        # REPEATABLE READ: a drain after the snapshot makes the change a serialization failure.
        for i in range(60, 64):
            insert_one(a, i, t="dm", sensors=4)
        b.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        assert b.execute("SELECT count(*) FROM dm").fetchone()[0] == 54
        a.execute("SELECT * FROM tsbucket.compact('dm')")
        with pytest.raises(psycopg.errors.SerializationFailure):
            b.execute("DELETE FROM dm WHERE sensor = 's0'")
        b.execute("ROLLBACK")
        assert a.execute("SELECT count(*) FROM dm").fetchone()[0] == 54
        # Two sessions changing the same tail row: the second waits, then sees it gone (heap's rules).
        insert_one(a, 100, t="dm", sensors=4)
        b.execute("BEGIN")
        assert b.execute("DELETE FROM dm WHERE hum = 100").rowcount == 1
        t3 = threading.Thread(target=lambda: out.update(d2=a.execute("DELETE FROM dm WHERE hum = 100").rowcount))
        t3.start()
        time.sleep(0.3)
        b.execute("COMMIT")
        t3.join()
        assert out["d2"] == 0
        # A lock a rolled-back savepoint took is gone with it: a drain in between still counts.
        # (Rounds with no snapshot open empty the drained segments, so that the next can rotate.)
        for _ in range(2):
            a.execute("SELECT * FROM tsbucket.compact('dm')")
        for i in range(200, 204):
            insert_one(a, i, t="dm", sensors=4)
        b.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        b.execute("SAVEPOINT s")
        assert b.execute("DELETE FROM dm WHERE hum = 200").rowcount == 1
        b.execute("ROLLBACK TO s")
        a.execute("SELECT * FROM tsbucket.compact('dm')")
        assert tail_rows(a, "dm") == 0
        with pytest.raises(psycopg.errors.SerializationFailure):
            b.execute("DELETE FROM dm WHERE hum = 200")
        b.execute("ROLLBACK")
        assert a.execute("SELECT count(*) FROM dm WHERE hum = 200").fetchone()[0] == 1
        # A row updated in the tail, then drained, after a DELETE read it (its snapshot older than
        # both): the DELETE follows the update, then the drain, to the row's bucket (READ
        # COMMITTED), as heap follows an update.
        for _ in range(2):
            a.execute("SELECT * FROM tsbucket.compact('dm')")
        a.execute("INSERT INTO dm VALUES ('2024-01-01 01:00', 'z', 0, 300)")
        c = quiet_cluster.connect()
        t4 = threading.Thread(target=lambda: out.update(
            d3=c.execute("DELETE FROM dm WHERE hum = 300 AND pg_sleep(1.5) IS NOT NULL RETURNING sensor").fetchall()))
        t4.start()
        time.sleep(0.5)
        a.execute("UPDATE dm SET sensor = 'y' WHERE sensor = 'z'")
        a.execute("SELECT * FROM tsbucket.compact('dm')")
        assert tail_rows(a, "dm") == 0
        t4.join()
        c.close()
        assert out["d3"] == [("y",)]
        assert a.execute("SELECT count(*) FROM dm WHERE hum = 300").fetchone()[0] == 0


def test_a_writer_follows_each_drain_between_its_commits(quiet_cluster):
    # A writer remembers which segment it last wrote and trusts it until a
    # relcache invalidation comes in; the drain that marks the segment sends
    # one. Rows written to a marked segment would never be read.
    with quiet_cluster.connect() as w, quiet_cluster.connect() as d:
        make(d, "wf")
        for i in range(12):
            insert_one(w, i, t="wf")
            # Each round drains the segment the writer just wrote to and empties the one
            # drained the round before: the segment the writer remembers is always marked
            # drained when it comes back, and "current" moves round all three.
            d.execute("SELECT * FROM tsbucket.compact('wf')")
            assert content(d, "wf") == (i + 1, i + 1, sum(range(i + 1)))
        for _ in range(3):
            d.execute("SELECT * FROM tsbucket.compact('wf')")
        assert tail_rows(d, "wf") == 0 and content(d, "wf") == (12, 12, sum(range(12)))


def test_a_drain_gets_its_segment_from_steady_writers(quiet_cluster):
    # The drain tries the old segment's lock without queueing for it; writers
    # that trusted their last look at "current" for good would keep it busy.
    # (Their commits release the lock together after each flush, so a drain
    # may still find a gap: this checks that it drains and loses nothing, not
    # that it would starve without the bound.)
    with quiet_cluster.connect() as d:
        make(d, "sw")
    stop = threading.Event()
    written = []

    def write(k):
        n = 0
        with quiet_cluster.connect() as w:
            # Each commit holds its segment's lock for a while (commit_delay sleeps in the WAL flush).
            w.execute("SET commit_delay = 20000")
            w.execute("SET commit_siblings = 0")
            while not stop.is_set():
                insert_one(w, 1_000_000 * k + n, t="sw")
                n += 1
        written.append(n)

    threads = [threading.Thread(target=write, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    try:
        time.sleep(1)
        with quiet_cluster.connect() as d:
            for _ in range(3):
                d.execute("SELECT * FROM tsbucket.compact('sw')")
                marked = d.execute("SELECT count(*) FROM tsbucket.tail_drained WHERE relid = 'sw'::regclass").fetchone()[0]
                if marked:
                    break
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert marked >= 1
    with quiet_cluster.connect() as d:
        assert content(d, "sw")[0] == sum(written)


def test_prepared_transactions_keep_their_rows(quiet_cluster):
    with quiet_cluster.connect() as c:
        make(c, "pt")
        insert_one(c, 1, t="pt")
    with quiet_cluster.connect() as p:
        p.execute("BEGIN")
        insert_one(p, 2, t="pt")
        insert_one(p, 3, t="pt")
        p.execute("PREPARE TRANSACTION 'tail_a'")
    with quiet_cluster.connect() as p:
        p.execute("BEGIN")
        insert_one(p, 4, t="pt")
        p.execute("PREPARE TRANSACTION 'tail_b'")
    with quiet_cluster.connect() as c:
        assert content(c, "pt") == (1, 1, 1)
        # A drain leaves the segment a prepared transaction still writes to.
        c.execute("SELECT * FROM tsbucket.compact('pt')")
        assert content(c, "pt") == (1, 1, 1)
        c.execute("COMMIT PREPARED 'tail_a'")
        c.execute("ROLLBACK PREPARED 'tail_b'")
        assert content(c, "pt") == (3, 3, 6)
        for _ in range(3):
            c.execute("SELECT * FROM tsbucket.compact('pt')")
        assert tail_rows(c, "pt") == 0 and content(c, "pt") == (3, 3, 6)


def test_standby_reads_the_tail(worker_cluster):
    primary = worker_cluster
    with primary.connect() as c:
        make(c, "st")
        for i in range(50):
            insert_one(c, i, t="st")
    with standby_of(primary) as standby:
        with primary.connect() as c, standby() as s:
            def caught_up():
                lsn = c.execute("SELECT pg_current_wal_lsn()").fetchone()[0]
                return wait_for(lambda: s.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (lsn,)).fetchone()[0] is True)
            for i in range(50, 80):
                insert_one(c, i, t="st")
            assert caught_up()
            # Whatever the worker did meanwhile (drained, emptied), the standby has every row once.
            assert s.execute("SELECT count(*), sum(hum) FROM st").fetchone() == (80, sum(range(80)))
            assert wait_for(lambda: tail_rows(c, "st") == 0, timeout=30)
            assert caught_up()
            assert s.execute("SELECT count(*), sum(hum) FROM st").fetchone() == (80, sum(range(80)))
            assert s.execute("SELECT tail_rows FROM tsbucket.stats('st')").fetchone()[0] == 0


def test_rows_rescued_from_a_rolled_back_subtransaction_keep_their_shape(quiet_cluster):
    """A backend keeps a table registered while its buffer is empty: rows an
    aborted subtransaction gave back (written there by its ALTER TABLE, then
    buffered again) are written with the shape they were buffered for, not
    with the rolled-back ADD COLUMN's."""
    with quiet_cluster.connect() as c:
        make(c, "tsub")
        c.execute("""DO $$
            BEGIN
                INSERT INTO tsub VALUES ('2024-01-01', 's1', 1, 1), ('2024-01-01 00:00:01', 's1', 2, 2);
                BEGIN
                    ALTER TABLE tsub ADD COLUMN extra int;
                    INSERT INTO tsub VALUES ('2024-01-01 00:00:02', 's1', 3, 3, 3);
                    RAISE EXCEPTION 'undo';
                EXCEPTION WHEN raise_exception THEN NULL;
                END;
                INSERT INTO tsub VALUES ('2024-01-01 00:00:03', 's1', 4, 4);
            END $$""")
        assert content(c, "tsub") == (3, 3, 7)
        assert c.execute("SELECT count(*) FROM tsbucket.verify('tsub')").fetchone()[0] == 0
        assert c.execute("SELECT array_agg(temp ORDER BY time) FROM tsub").fetchone()[0] == [1, 2, 4]


def test_worker_rounds_write_large_buckets_in_two_parts(worker_cluster):
    """A non-superuser's devices send one reading per INSERT (psycopg
    executemany, each its own transaction) of full-precision floats; the
    worker's rounds merge them into buckets longer than a TOAST chunk, which
    keep their whole chunks in TOAST and the rest inline in the store row
    (payload_rest), and every row reads back bit for bit."""
    start = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)
    rows = [(start + datetime.timedelta(seconds=i), f"s{i % 2}", math.sin(i) * 100, i) for i in range(2400)]
    with worker_cluster.connect() as c:
        c.execute("DROP TABLE IF EXISTS big")
        c.execute("DROP ROLE IF EXISTS device_owner")
        c.execute("CREATE ROLE device_owner LOGIN")
        c.execute("GRANT CREATE ON SCHEMA public TO device_owner")
        c.execute("SET ROLE device_owner")
        make(c, "big")
        with c.cursor() as cur:
            cur.executemany("INSERT INTO big VALUES (%s, %s, %s, %s)", rows)
        assert wait_for(lambda: tail_rows(c, "big") == 0, timeout=60)
        c.execute("RESET ROLE")
        store = c.execute("SELECT store_relid::regclass::text FROM tsbucket.catalog WHERE relid = 'big'::regclass").fetchone()[0]
        split = f"SELECT count(*) FROM {store} WHERE payload_rest IS NOT NULL AND length(payload) % 1996 = 0"
        assert wait_for(lambda: c.execute(split).fetchone()[0] >= 2, timeout=60)
        c.execute("SET ROLE device_owner")
        assert c.execute("SELECT time, sensor, temp, hum FROM big ORDER BY hum").fetchall() == rows
        assert c.execute("SELECT count(*) FROM tsbucket.verify('big')").fetchone()[0] == 0
        c.execute("RESET ROLE")
