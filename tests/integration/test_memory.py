"""Memory on error: scans cancelled midway free their decoded buckets and
scan state with the query's memory context; the backend's memory stays flat."""

import psycopg
import pytest


def rss_kb(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_cancelled_scans_leave_memory_flat(cluster):
    with cluster.connect() as c:
        c.execute("DROP TABLE IF EXISTS big")
        c.execute("CREATE TABLE big (time timestamptz NOT NULL, s text, v float8, note text) USING tsbucket")
        c.execute("SELECT tsbucket.create_timeseries('big', 'time', 's')")
        # Buckets of 1000 rows with a wide text column: each decoded bucket is ~150 kB of Rust memory.
        c.execute("""INSERT INTO big SELECT '2024-01-01'::timestamptz + i * interval '1 s', 's' || (i % 20), i,
                            md5(i::text) || md5((i + 1)::text) || md5((i + 2)::text) || md5((i + 3)::text)
                       FROM generate_series(1, 600000) i""")
    with cluster.connect() as c:
        pid = c.execute("SELECT pg_backend_pid()").fetchone()[0]
        c.execute("SET statement_timeout = '15ms'")
        cancelled = 0

        def scans(n):
            nonlocal cancelled
            for _ in range(n):
                try:
                    c.execute("SELECT count(*), sum(length(note)), max(v) FROM big")
                except psycopg.errors.QueryCanceled:
                    cancelled += 1

        scans(100)
        before = rss_kb(pid)
        scans(900)
        after = rss_kb(pid)
        assert cancelled >= 900, cancelled
        # Without freeing on error this grows by 900 decoded buckets (over 100 MB).
        assert after - before < 20_000, (before, after)
