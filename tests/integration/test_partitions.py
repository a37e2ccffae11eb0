"""Declarative partitioning by time, the single-node way to split a table:
each partition is a time-series table of its own (configured one by one);
a partitioned parent itself is refused with a hint. Rows routed through the
parent land in the right partition and every query answers as over a heap
copy."""

import psycopg
import pytest

from conftest import Cluster, one_row_buckets

SCHEMA = "time timestamptz NOT NULL, sensor text, temp float8, hum int4"


@pytest.fixture(scope="module")
def cluster():
    c = Cluster(worker=True, extra_conf=["tsbucket.worker_interval = 1"])
    yield c
    c.destroy()


def test_partitioned_parent_is_refused_with_a_hint(cluster):
    with cluster.connect() as c:
        c.execute(f"CREATE TABLE pp ({SCHEMA}) PARTITION BY RANGE (time)")
        with pytest.raises(psycopg.errors.FeatureNotSupported, match="its rows live in its partitions") as e:
            c.execute("SELECT tsbucket.create_timeseries('pp', 'time', 'sensor')")
        assert "PARTITION OF" in e.value.diag.message_hint
        if c.execute("SHOW server_version_num").fetchone()[0] >= "170000":
            # From PostgreSQL 17 on a parent can name the access method its partitions get.
            c.execute(f"CREATE TABLE pp2 ({SCHEMA}) PARTITION BY RANGE (time) USING tsbucket")
            with pytest.raises(psycopg.errors.FeatureNotSupported, match="its rows live in its partitions"):
                c.execute("SELECT tsbucket.create_timeseries('pp2', 'time', 'sensor')")
            c.execute("CREATE TABLE pp2_1 PARTITION OF pp2 FOR VALUES FROM ('2024-01-01') TO ('2024-02-01')")
            c.execute("SELECT tsbucket.create_timeseries('pp2_1', 'time', 'sensor')")
            c.execute("INSERT INTO pp2 VALUES ('2024-01-05', 's1', 1, 1)")
            assert c.execute("SELECT count(*) FROM pp2").fetchone()[0] == 1
        assert c.execute("SELECT count(*) FROM tsbucket.catalog WHERE relid IN ('pp'::regclass, 'pp'::regclass)").fetchone()[0] == 0


def test_partitions_configured_one_by_one(cluster):
    with cluster.connect() as c:
        c.execute(f"CREATE TABLE pw ({SCHEMA}) PARTITION BY RANGE (time)")
        c.execute(f"CREATE TABLE pw_heap ({SCHEMA})")
        for month in (1, 2, 3):
            part = f"pw_2024_{month:02d}"
            c.execute(f"CREATE TABLE {part} PARTITION OF pw FOR VALUES FROM ('2024-{month:02d}-01') TO ('2024-{month + 1:02d}-01') USING tsbucket")
            c.execute(f"SELECT tsbucket.create_timeseries('{part}', 'time', 'sensor')")
        # A table made and configured first, then attached.
        c.execute(f"CREATE TABLE pw_2024_04 ({SCHEMA}) USING tsbucket")
        c.execute("SELECT tsbucket.create_timeseries('pw_2024_04', 'time', 'sensor')")
        c.execute("ALTER TABLE pw ATTACH PARTITION pw_2024_04 FOR VALUES FROM ('2024-04-01') TO ('2024-05-01')")
        rows = ("SELECT '2024-01-01'::timestamptz + i * interval '20 min', 's' || (i % 7), i / 3.0, i % 50 "
                "FROM generate_series(0, 8000) i")
        c.execute(f"INSERT INTO pw {rows}")
        c.execute(f"INSERT INTO pw_heap {rows}")
        one_row_buckets(c)
        for i in range(20):  # single-row statements through the parent
            c.execute("INSERT INTO pw VALUES ('2024-03-15'::timestamptz + %s * interval '1 s', 's1', %s, %s)", (i, i, i))
            c.execute("INSERT INTO pw_heap VALUES ('2024-03-15'::timestamptz + %s * interval '1 s', 's1', %s, %s)", (i, i, i))
        for q in ("SELECT count(*), sum(hum), max(temp) FROM {t}",
                  "SELECT sensor, count(*), avg(temp) FROM {t} GROUP BY sensor ORDER BY sensor",
                  "SELECT date_trunc('month', time), count(*) FROM {t} GROUP BY 1 ORDER BY 1",
                  "SELECT * FROM {t} WHERE time >= '2024-02-10' AND time < '2024-03-20' AND sensor = 's3' ORDER BY time",
                  "SELECT DISTINCT ON (sensor) sensor, time, temp FROM {t} ORDER BY sensor, time DESC"):
            assert c.execute(q.format(t="pw")).fetchall() == c.execute(q.format(t="pw_heap")).fetchall(), q
        # Each partition holds its own month.
        for month in (1, 2, 3, 4):
            lo, hi = c.execute(f"SELECT min(time), max(time) FROM pw_2024_{month:02d}").fetchone()
            assert lo.month == month and hi.month == month
        c.execute("DELETE FROM pw WHERE sensor = 's2' AND time < '2024-02-15'")
        c.execute("DELETE FROM pw_heap WHERE sensor = 's2' AND time < '2024-02-15'")
        assert c.execute("SELECT count(*) FROM pw").fetchone() == c.execute("SELECT count(*) FROM pw_heap").fetchone()
        # Retention by partition: dropping a month's partition drops its rows and its store.
        c.execute("DROP TABLE pw_2024_01")
        assert c.execute("SELECT count(*) FROM tsbucket.catalog WHERE relid::regclass::text LIKE 'pw_2024_%'").fetchone()[0] == 3
        assert c.execute("SELECT count(*) FROM pw WHERE time < '2024-02-01'").fetchone()[0] == 0
