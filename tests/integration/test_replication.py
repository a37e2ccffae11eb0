"""Streaming replication: a standby made with pg_basebackup (over the
primary's local socket) answers the same queries, with the same TsBucketScan
plans, after inserts, deletes, updates and a compaction on the primary."""

import time

import psycopg
import pytest

from conftest import Cluster, standby_of

QUERIES = [
    "SELECT host, count(*), sum(v), min(time), max(time) FROM r GROUP BY host ORDER BY host",
    "SELECT count(*) FROM r WHERE host = 'h1' AND time >= '2024-01-01 00:10' AND time < '2024-01-01 00:20'",
    # total_bytes differs: the free space map is not WAL-logged.
    "SELECT buckets, rows, compressed_bytes, uncompressed_bytes, closed_by_end_of_statement, compacted FROM tsbucket.stats('r')",
]


@pytest.fixture(scope="module")
def primary():
    c = Cluster(worker=True, extra_conf=["tsbucket.worker_interval = 1"])
    yield c
    c.destroy()


def test_standby_answers_like_the_primary(primary):
    with primary.connect() as c:
        c.execute("CREATE TABLE r (time timestamptz NOT NULL, host text, v int) USING tsbucket")
        c.execute("SELECT tsbucket.create_timeseries('r', 'time', 'host')")
        c.execute("INSERT INTO r SELECT '2024-01-01'::timestamptz + i * interval '1 s', 'h' || (i % 4), i FROM generate_series(1, 5000) i")
    with standby_of(primary) as standby:
        with primary.connect() as c:
            for i in range(30):
                c.execute("INSERT INTO r VALUES ('2024-01-01 02:00'::timestamptz + %s * interval '1 s', 'h9', %s)", (i, i))
            c.execute("DELETE FROM r WHERE v % 10 = 3")
            c.execute("UPDATE r SET host = 'h8' WHERE host = 'h0'")
            # The worker (1 s interval) may have merged the trickle buckets already.
            c.execute("SELECT * FROM tsbucket.compact('r')")
            assert c.execute("SELECT count(*) FROM tsbucket.buckets('r') WHERE meta = 'h9'").fetchone()[0] == 1
            lsn = c.execute("SELECT pg_current_wal_lsn()").fetchone()[0]
            expected = [c.execute(q).fetchall() for q in QUERIES]
            plans = [c.execute("EXPLAIN (COSTS OFF) " + q).fetchall() for q in QUERIES[:2]]
        with standby() as s:
            deadline = time.time() + 30
            while s.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (lsn,)).fetchone()[0] is not True:
                assert time.time() < deadline, "standby did not catch up"
                time.sleep(0.2)
            assert s.execute("SELECT pg_is_in_recovery()").fetchone()[0]
            assert [s.execute(q).fetchall() for q in QUERIES] == expected
            assert [s.execute("EXPLAIN (COSTS OFF) " + q).fetchall() for q in QUERIES[:2]] == plans
            assert "TsBucketScan" in str(plans)
            assert s.execute("SELECT count(*) FROM tsbucket.verify('r')").fetchone()[0] == 0
