"""What one session cannot show: concurrent writers, readers and deleters."""

import threading

import psycopg
import pytest

from conftest import make_table, one_row_buckets, problems


def test_concurrent_inserts_lose_nothing(cluster):
    with cluster.connect() as c:
        make_table(c, "ci")
    errors = []

    def writer(w):
        try:
            with cluster.connect() as c:
                for stmt in range(20):
                    # Same series (shared) and own series, interleaved windows.
                    c.execute(
                        """INSERT INTO ci SELECT '2024-01-01'::timestamptz + (i * 7 + %s) * interval '1 s',
                                  CASE WHEN i %% 2 = 0 THEN 'shared' ELSE 'own' || %s END, i, %s
                             FROM generate_series(1, 500) i""",
                        (w * 1000 + stmt, w, w * 100 + stmt),
                    )
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    with cluster.connect() as c:
        assert c.execute("SELECT count(*), count(DISTINCT n) FROM ci").fetchone() == (4 * 20 * 500, 80)
        assert c.execute("SELECT count(*) FROM ci WHERE sensor = 'shared'").fetchone()[0] == 4 * 20 * 250
        assert problems(c, "ci") == []


def test_readers_see_only_committed_rows(cluster):
    with cluster.connect() as c:
        make_table(c, "vis")
    writer = cluster.connect(autocommit=False)
    reader = cluster.connect()
    writer.execute("INSERT INTO vis SELECT now() - i * interval '1 s', 'a', i, i FROM generate_series(1, 1000) i")
    assert writer.execute("SELECT count(*) FROM vis").fetchone()[0] == 1000
    assert reader.execute("SELECT count(*) FROM vis").fetchone()[0] == 0
    writer.commit()
    assert reader.execute("SELECT count(*) FROM vis").fetchone()[0] == 1000
    writer.execute("DELETE FROM vis WHERE v > 500")
    assert reader.execute("SELECT count(*) FROM vis").fetchone()[0] == 1000
    writer.rollback()
    assert reader.execute("SELECT count(*) FROM vis").fetchone()[0] == 1000
    writer.close()
    reader.close()


def test_concurrent_deletes_of_one_bucket_never_lose_or_resurrect(cluster):
    """Two DELETEs of one bucket: nothing lost, nothing resurrected."""
    with cluster.connect() as c:
        make_table(c, "cd")
        c.execute("INSERT INTO cd SELECT '2024-01-01'::timestamptz + i * interval '1 s', 'a', i, i FROM generate_series(1, 1000) i")
        assert c.execute("SELECT count(*) FROM tsbucket.buckets('cd')").fetchone()[0] == 1
    a = cluster.connect(autocommit=False)
    b = cluster.connect(autocommit=False)
    a.execute("DELETE FROM cd WHERE n <= 100")
    outcome = {}

    def second():
        try:
            b.execute("DELETE FROM cd WHERE n > 900")
            b.commit()
            outcome["b"] = "committed"
        except psycopg.errors.SerializationFailure:
            b.rollback()
            outcome["b"] = "40001"

    t = threading.Thread(target=second)
    t.start()
    t.join(0.5)
    assert t.is_alive(), "the second delete must wait for the first"
    a.commit()
    t.join(10)
    # As heap under READ COMMITTED: the second waits, then deletes its rows
    # where the first left them (the rewritten bucket), no 40001.
    assert outcome["b"] == "committed"
    with cluster.connect() as c:
        remaining = c.execute("SELECT count(*), min(n), max(n) FROM cd").fetchone()
        assert remaining == (800, 101, 900)
        assert problems(c, "cd") == []
    a.close()
    b.close()


def test_delete_and_insert_concurrently(cluster):
    with cluster.connect() as c:
        make_table(c, "di")
        c.execute("INSERT INTO di SELECT '2024-01-01'::timestamptz + i * interval '1 s', 'a', i, i FROM generate_series(1, 2000) i")
    a = cluster.connect(autocommit=False)
    a.execute("DELETE FROM di WHERE n % 2 = 0")
    with cluster.connect() as b:
        b.execute("INSERT INTO di SELECT '2024-01-01'::timestamptz + i * interval '1 s', 'a', i, -i FROM generate_series(1, 500) i")
    a.commit()
    a.close()
    with cluster.connect() as c:
        assert c.execute("SELECT count(*) FILTER (WHERE n > 0), count(*) FILTER (WHERE n < 0) FROM di").fetchone() == (1000, 500)


def test_xmax_shows_a_deleter_and_a_locker_as_heap_does(cluster):
    """Another session sees, in xmax, the transaction deleting a row (for
    tsbucket: rewriting its bucket) and the one holding its bucket's lock."""
    with cluster.connect() as c:
        make_table(c, "cx")
        one_row_buckets(c)  # a bucket's rows share its version; the tail's are rows of their own
        c.execute("DROP TABLE IF EXISTS cx_heap")
        c.execute("CREATE TABLE cx_heap (time timestamptz NOT NULL, sensor text, v float8, n int8)")
        for t in ("cx", "cx_heap"):
            c.execute(f"INSERT INTO {t} SELECT '2024-01-01'::timestamptz + i * interval '1 s', 'a', i, i FROM generate_series(1, 10) i")
        assert c.execute("SELECT count(*) FROM cx WHERE xmax::text = '0'").fetchone()[0] == 10
    a = cluster.connect(autocommit=False)
    xid = a.execute("SELECT txid_current()::text").fetchone()[0]
    for t in ("cx", "cx_heap"):
        a.execute(f"DELETE FROM {t} WHERE n = 3")
    with cluster.connect() as b:
        heap = b.execute("SELECT xmax::text FROM cx_heap WHERE n = 3").fetchone()[0]
        ours = b.execute("SELECT xmax::text FROM cx WHERE n = 3").fetchone()[0]
        assert heap == ours == xid
        # The bucket's other rows go with it: their version is being replaced.
        assert b.execute("SELECT count(*) FROM cx WHERE xmax::text = %s", (xid,)).fetchone()[0] == 10
    a.rollback()
    with cluster.connect() as b:
        # A rolled-back deleter stays in xmax, as on heap, until the row is written again.
        assert b.execute("SELECT xmax::text FROM cx WHERE n = 3").fetchone()[0] == xid
        assert b.execute("SELECT xmax::text FROM cx_heap WHERE n = 3").fetchone()[0] == xid
    a.close()
