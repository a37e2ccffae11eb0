"""Declarative partitioning by time, the single-node way to split a table:
each partition is a time-series table of its own, configured by
create_timeseries on the parent (those there then, and every later one) or
one by one. Rows routed through the parent land in the right partition,
every query answers as over a heap copy, the DBA functions answer for the
whole table, and pg_dump / pg_restore carry it all."""

import os

import psycopg
import pytest

from conftest import Cluster, as_postgres, one_row_buckets, wait_for

SCHEMA = "time timestamptz NOT NULL, sensor text, temp float8, hum int4"


@pytest.fixture(scope="module")
def cluster():
    c = Cluster(worker=True, extra_conf=["tsbucket.worker_interval = 1"])
    yield c
    c.destroy()


def configured(c, *tables):
    return c.execute("SELECT count(*) FROM tsbucket.catalog WHERE relid::regclass::text = ANY (%s)", (list(tables),)).fetchone()[0]


def test_a_partitioned_parent_configures_its_partitions(cluster):
    """create_timeseries on the parent configures the partitions there now and
    every later one (PARTITION OF, ATTACH PARTITION, a sub-partition's), as a
    non-superuser owner; a partition that is not USING tsbucket, or configured
    differently, is refused with a hint."""
    with cluster.connect() as c:
        c.execute("DROP ROLE IF EXISTS powner")
        c.execute("CREATE ROLE powner LOGIN")
        c.execute("GRANT CREATE ON SCHEMA public TO powner")
        c.execute("SET ROLE powner")
        c.execute(f"CREATE TABLE pp ({SCHEMA}) PARTITION BY RANGE (time)")
        c.execute(f"CREATE TABLE pp_heap ({SCHEMA})")
        c.execute("CREATE TABLE pp_01 PARTITION OF pp FOR VALUES FROM ('2024-01-01') TO ('2024-02-01') USING tsbucket")
        c.execute("SELECT tsbucket.create_timeseries('pp', 'time', 'sensor', expire_after => '3650 days')")
        assert configured(c, "pp_01") == 1 and configured(c, "pp") == 0
        with pytest.raises(psycopg.errors.DuplicateObject):
            c.execute("SELECT tsbucket.create_timeseries('pp', 'time', 'sensor')")
        # Later partitions: PARTITION OF, and a table attached.
        c.execute("CREATE TABLE pp_02 PARTITION OF pp FOR VALUES FROM ('2024-02-01') TO ('2024-03-01') USING tsbucket")
        c.execute(f"CREATE TABLE pp_03 ({SCHEMA}) USING tsbucket")
        c.execute("ALTER TABLE pp ATTACH PARTITION pp_03 FOR VALUES FROM ('2024-03-01') TO ('2024-04-01')")
        # A sub-partitioned month: its leaves take the configuration of the nearest configured ancestor.
        c.execute("CREATE TABLE pp_04 PARTITION OF pp FOR VALUES FROM ('2024-04-01') TO ('2024-05-01') PARTITION BY LIST (sensor)")
        c.execute("CREATE TABLE pp_04a PARTITION OF pp_04 FOR VALUES IN ('s1', 's2') USING tsbucket")
        c.execute("CREATE TABLE pp_04b PARTITION OF pp_04 DEFAULT USING tsbucket")
        assert configured(c, "pp_02", "pp_03", "pp_04a", "pp_04b") == 4
        assert c.execute("SELECT count(DISTINCT (time_column, meta_columns::text, bucket_max_span, expire_after)) FROM tsbucket.timeseries "
                         "WHERE table_name::text LIKE 'pp\\_%'").fetchone()[0] == 1
        # Refused: a heap partition, by CREATE and by ATTACH; a partition configured otherwise.
        with pytest.raises(psycopg.errors.WrongObjectType, match="does not use the tsbucket access method") as e:
            c.execute("CREATE TABLE pp_05 PARTITION OF pp FOR VALUES FROM ('2024-05-01') TO ('2024-06-01')")
        assert "USING tsbucket" in e.value.diag.message_hint
        with pytest.raises(psycopg.errors.WrongObjectType):
            c.execute("ALTER TABLE pp ATTACH PARTITION pp_heap FOR VALUES FROM ('2024-05-01') TO ('2024-06-01')")
        c.execute(f"CREATE TABLE pp_06 ({SCHEMA}) USING tsbucket")
        c.execute("SELECT tsbucket.create_timeseries('pp_06', 'time')")
        with pytest.raises(psycopg.errors.InvalidTableDefinition, match="configured unlike"):
            c.execute("ALTER TABLE pp ATTACH PARTITION pp_06 FOR VALUES FROM ('2024-06-01') TO ('2024-07-01')")
        assert c.execute("SELECT count(*) FROM pg_inherits WHERE inhparent = 'pp'::regclass").fetchone()[0] == 4
        # Rows through the parent; the DBA functions answer for the whole table.
        c.execute("INSERT INTO pp SELECT '2024-01-01'::timestamptz + i * interval '10 min', 's' || (i % 5), i, i "
                  "FROM generate_series(0, 17000) i")
        for i in range(30):
            c.execute("INSERT INTO pp VALUES ('2024-04-20'::timestamptz + %s * interval '1 s', 's1', %s, %s)", (i, i, i))
        n = c.execute("SELECT count(*) FROM pp").fetchone()[0]
        assert n == 17031
        assert c.execute("SELECT rows + tail_rows FROM tsbucket.stats('pp')").fetchone()[0] == n
        c.execute("SELECT * FROM tsbucket.compact('pp')")
        stats = c.execute("SELECT rows, tail_rows, buckets FROM tsbucket.stats('pp')").fetchone()
        assert stats[:2] == (n, 0)
        assert c.execute("SELECT count(*), sum(rows) FROM tsbucket.buckets('pp')").fetchone() == (stats[2], n)
        # (Sizes are not transactional: the worker may be emptying a segment meanwhile.)
        assert wait_for(lambda: c.execute("SELECT tsbucket.table_size('pp')").fetchone()[0] == sum(
            c.execute(f"SELECT tsbucket.table_size('{t}')").fetchone()[0] for t in ("pp_01", "pp_02", "pp_03", "pp_04a", "pp_04b")))
        assert c.execute("SELECT count(*) FROM tsbucket.verify('pp')").fetchone()[0] == 0
        # Aggregates are planned partitionwise: the partitions' scans aggregate bucket by bucket (the
        # planner may still pick a sorted partial aggregate over a series-ordered scan for some of them).
        c.execute("ANALYZE pp")
        plan = "\n".join(r[0] for r in c.execute("EXPLAIN SELECT sensor, avg(temp), max(hum) FROM pp GROUP BY sensor").fetchall())
        assert plan.startswith("Finalize") and plan.count("Vectorized Aggregation: partial") >= 1, plan
        assert c.execute("SELECT * FROM tsbucket.expire('pp')").fetchone() == (0, 0)
        # Settings reach every partition, and the ones made later.
        c.execute("SELECT tsbucket.alter_timeseries('pp', expire_after => '7300 days')")
        c.execute("SELECT tsbucket.set_series_retention('pp', 's3'::text, '9000 days')")
        c.execute("CREATE TABLE pp_07 PARTITION OF pp FOR VALUES FROM ('2024-07-01') TO ('2024-08-01') USING tsbucket")
        assert c.execute("SELECT count(*) FROM tsbucket.timeseries WHERE table_name::text LIKE 'pp\\_%' "
                         "AND table_name::text <> 'pp_06' AND expire_after = '7300 days'").fetchone()[0] == 6
        assert c.execute("SELECT count(*) FROM tsbucket.series_retention WHERE meta = 's3' AND expire_after = '9000 days'"
                         ).fetchone()[0] == 6
        c.execute("SELECT tsbucket.reset_series_retention('pp', 's3'::text)")
        assert c.execute("SELECT count(*) FROM tsbucket.series_retention WHERE meta = 's3'").fetchone()[0] == 0
        # The label itself is tsbucket's.
        with pytest.raises(psycopg.errors.FeatureNotSupported):
            c.execute("SECURITY LABEL FOR tsbucket ON TABLE pp IS NULL")
        if c.execute("SHOW server_version_num").fetchone()[0] >= "170000":
            # From PostgreSQL 17 on a parent can name the access method its partitions get.
            c.execute(f"CREATE TABLE pq ({SCHEMA}) PARTITION BY RANGE (time) USING tsbucket")
            c.execute("SELECT tsbucket.create_timeseries('pq', 'time', 'sensor')")
            c.execute("CREATE TABLE pq_1 PARTITION OF pq FOR VALUES FROM ('2024-01-01') TO ('2024-02-01')")
            assert configured(c, "pq_1") == 1
            c.execute("INSERT INTO pq VALUES ('2024-01-05', 's1', 1, 1)")
            assert c.execute("SELECT count(*) FROM pq").fetchone()[0] == 1
        c.execute("RESET ROLE")


def dump_and_restore(cluster, table, *restore_args):
    """pg_dump -t '<table>*' of the test database, restored into a new
    database <table>_restored that has the extension."""
    out = os.path.join(cluster.dir, f"{table}.dump")
    as_postgres([f"{cluster.bindir}/pg_dump", "-h", cluster.dir, "-p", str(cluster.port), "-U", "postgres", "-F", "c",
                 "-t", f"{table}*", "-f", out, "test"])
    with cluster.connect(dbname="postgres") as c:
        c.execute(f"DROP DATABASE IF EXISTS {table}_restored WITH (FORCE)")
        c.execute(f"CREATE DATABASE {table}_restored")
    with cluster.connect(dbname=f"{table}_restored") as c:
        c.execute("CREATE EXTENSION tsbucket")
    as_postgres([f"{cluster.bindir}/pg_restore", "-h", cluster.dir, "-p", str(cluster.port), "-U", "postgres",
                 *restore_args, "--exit-on-error", "-d", f"{table}_restored", out])


def test_a_partitioned_time_series_table_survives_dump_and_restore(cluster):
    with cluster.connect() as c:
        c.execute(f"CREATE TABLE pd ({SCHEMA}) PARTITION BY RANGE (time)")
        c.execute("SELECT tsbucket.create_timeseries('pd', 'time', 'sensor', granularity => 'minutes')")
        for month in (1, 2):
            c.execute(f"CREATE TABLE pd_{month} PARTITION OF pd FOR VALUES FROM ('2024-0{month}-01') TO ('2024-0{month + 1}-01') USING tsbucket")
        c.execute("INSERT INTO pd SELECT '2024-01-01'::timestamptz + i * interval '5 min', 's' || (i % 3), i, i FROM generate_series(0, 15000) i")
        c.execute("SELECT tsbucket.set_series_retention('pd', 's1'::text, '4000 days')")
        expected = c.execute("SELECT count(*), sum(hum), max(time) FROM pd").fetchone()
    dump_and_restore(cluster, "pd")
    with cluster.connect(dbname="pd_restored") as c:
        assert c.execute("SELECT count(*), sum(hum), max(time) FROM pd").fetchone() == expected
        assert configured(c, "pd_1", "pd_2") == 2
        assert c.execute("SELECT rows + tail_rows FROM tsbucket.stats('pd')").fetchone()[0] == expected[0]
        c.execute("CREATE TABLE pd_3 PARTITION OF pd FOR VALUES FROM ('2024-03-01') TO ('2024-04-01') USING tsbucket")
        assert c.execute("SELECT granularity FROM tsbucket.timeseries WHERE table_name = 'pd_3'::regclass").fetchone()[0] == "minutes"
        assert c.execute("SELECT count(*) FROM tsbucket.series_retention WHERE meta = 's1'").fetchone()[0] == 3


def test_renamed_time_and_meta_columns_reach_partitions_and_dumps(cluster):
    """A non-superuser owner renames the time and meta columns of a
    partitioned time-series table (one month sub-partitioned): every
    partition keeps its configuration under the new names, rows keep landing
    and the worker drains them, later partitions take the new names, and
    pg_dump / pg_restore carry them."""
    with cluster.connect() as c:
        c.execute("DROP ROLE IF EXISTS rowner")
        c.execute("CREATE ROLE rowner LOGIN")
        c.execute("GRANT CREATE ON SCHEMA public TO rowner")
        c.execute("SET ROLE rowner")
        c.execute(f"CREATE TABLE pr ({SCHEMA}) PARTITION BY RANGE (time)")
        c.execute("CREATE TABLE pr_1 PARTITION OF pr FOR VALUES FROM ('2024-01-01') TO ('2024-02-01') USING tsbucket")
        c.execute("CREATE TABLE pr_2 PARTITION OF pr FOR VALUES FROM ('2024-02-01') TO ('2024-03-01') PARTITION BY LIST (sensor)")
        c.execute("CREATE TABLE pr_2a PARTITION OF pr_2 DEFAULT USING tsbucket")
        c.execute("SELECT tsbucket.create_timeseries('pr', 'time', 'sensor')")
        c.execute("INSERT INTO pr SELECT '2024-01-01'::timestamptz + i * interval '10 min', 's' || (i % 3), i, i FROM generate_series(0, 8000) i")
        c.execute("ALTER TABLE pr RENAME COLUMN time TO ts")
        c.execute("ALTER TABLE pr RENAME COLUMN sensor TO device")
        c.execute("ALTER TABLE pr RENAME COLUMN temp TO temperature")  # not a time or meta column: labels unchanged
        labels = c.execute("""SELECT k.relname, l.label::jsonb -> 'time_column', l.label::jsonb -> 'meta_columns'
                                FROM pg_seclabel l JOIN pg_class k ON k.oid = l.objoid
                               WHERE l.provider = 'tsbucket' AND k.relname LIKE 'pr%' ORDER BY 1""").fetchall()
        assert labels == [(t, "ts", ["device"]) for t in ("pr", "pr_1", "pr_2a")], labels
        for i in range(20):
            c.execute("INSERT INTO pr VALUES ('2024-02-20'::timestamptz + %s * interval '1 s', %s, 1, 1)", (i, f"s{i % 3}"))
        assert wait_for(lambda: c.execute("SELECT tail_rows FROM tsbucket.stats('pr')").fetchone()[0] == 0, timeout=60)
        assert c.execute("SELECT rows, tail_rows FROM tsbucket.stats('pr')").fetchone() == (8021, 0)
        c.execute("CREATE TABLE pr_3 PARTITION OF pr FOR VALUES FROM ('2024-03-01') TO ('2024-04-01') USING tsbucket")
        assert c.execute("SELECT time_column, meta_columns FROM tsbucket.timeseries WHERE table_name = 'pr_3'::regclass").fetchone() == ("ts", ["device"])
        expected = c.execute("SELECT count(*), sum(temperature), max(ts), count(DISTINCT device) FROM pr").fetchone()
        c.execute("RESET ROLE")
    dump_and_restore(cluster, "pr", "--no-owner")
    with cluster.connect(dbname="pr_restored") as c:
        assert c.execute("SELECT count(*), sum(temperature), max(ts), count(DISTINCT device) FROM pr").fetchone() == expected
        assert c.execute("SELECT count(*) FROM tsbucket.timeseries WHERE time_column = 'ts' AND meta_columns = '{device}'").fetchone()[0] == 3


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


def partman_installed():
    import subprocess
    from conftest import pg_config
    share = subprocess.check_output([pg_config(os.environ.get("TSBUCKET_PG", "pg15")), "--sharedir"], text=True).strip()
    return os.path.exists(os.path.join(share, "extension", "pg_partman.control"))


@pytest.mark.skipif(not partman_installed(), reason="pg_partman is not installed (Debian's postgresql-15-partman; scripts/setup.sh installs it for PostgreSQL 15)")
def test_pg_partman_makes_and_drops_partitions(cluster):
    """pg_partman (4.7, Debian's package for PostgreSQL 15) makes a
    time-series parent's partitions and drops old ones by its retention, as
    a non-superuser owner, with the one setup step the README gives: its
    calls run with default_table_access_method = tsbucket (it creates each
    partition LIKE the parent, then attaches it). Without it the attach is
    refused with a hint."""
    with cluster.connect() as c:
        c.execute("CREATE SCHEMA partman")
        c.execute("CREATE EXTENSION pg_partman SCHEMA partman")
        c.execute("DROP ROLE IF EXISTS pmowner")
        c.execute("CREATE ROLE pmowner LOGIN")
        for grant in ("GRANT CREATE ON SCHEMA public TO pmowner", "GRANT ALL ON SCHEMA partman TO pmowner",
                      "GRANT ALL ON ALL TABLES IN SCHEMA partman TO pmowner",
                      "GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA partman TO pmowner",
                      "GRANT EXECUTE ON ALL PROCEDURES IN SCHEMA partman TO pmowner"):
            c.execute(grant)
        c.execute("SET ROLE pmowner")
        c.execute(f"CREATE TABLE pm ({SCHEMA}) PARTITION BY RANGE (time)")
        c.execute("SELECT tsbucket.create_timeseries('pm', 'time', 'sensor')")
        # Without the setup step partman's partitions are heap tables: refused when attached, nothing half made.
        # (partman re-raises errors with their hint in its own message.)
        with pytest.raises(psycopg.Error, match="does not use the tsbucket access method") as e:
            c.execute("SELECT partman.create_parent('public.pm', 'time', 'native', 'daily', p_premake => 2)")
        assert "USING tsbucket" in f"{e.value} {e.value.diag.message_hint}"
        assert c.execute("SELECT count(*) FROM partman.part_config").fetchone()[0] == 0
        # The setup step: partman's calls run with tsbucket as the default access method.
        c.execute("ALTER ROLE pmowner SET default_table_access_method = tsbucket")
    # The owner's own sessions now make tsbucket tables (SET ROLE would not apply the role's settings).
    with psycopg.connect(host=cluster.dir, port=cluster.port, user="pmowner", dbname="test", autocommit=True) as c:
        assert c.execute("SHOW default_table_access_method").fetchone()[0] == "tsbucket"
        c.execute("SELECT partman.create_parent('public.pm', 'time', 'native', 'daily', p_premake => 2, "
                  "p_start_partition => (current_date - 6)::text)")
        leaves = [r[0] for r in c.execute("SELECT tsbucket._leaves('pm')::text")]
        partitions = c.execute("SELECT count(*) FROM pg_inherits WHERE inhparent = 'pm'::regclass").fetchone()[0]
        assert len(leaves) == partitions >= 9, (leaves, partitions)  # 6 days back, today, 2 ahead, the default
        c.execute("INSERT INTO pm SELECT current_date - 5 + i * interval '1 minute', 's' || (i % 5), i, i "
                  "FROM generate_series(0, 6 * 1440 - 1) i")
        assert c.execute("SELECT count(*), count(DISTINCT tableoid) FROM pm").fetchone() == (6 * 1440, 6)
        assert c.execute("SELECT count(*) FROM pm_default").fetchone()[0] == 0
        # partman's retention drops whole old partitions (the bulk alternative to bucket expiry).
        c.execute("UPDATE partman.part_config SET retention = '3 days', retention_keep_table = false WHERE parent_table = 'public.pm'")
        c.execute("SELECT partman.run_maintenance('public.pm')")
        assert c.execute("SELECT min(time) >= current_date - 3 FROM pm").fetchone()[0]
        assert c.execute("SELECT count(*) FROM tsbucket.catalog WHERE relid::regclass::text LIKE 'pm\\_%'").fetchone()[0] == \
            c.execute("SELECT count(*) FROM pg_inherits WHERE inhparent = 'pm'::regclass").fetchone()[0]
        assert c.execute("SELECT sum(rows + tail_rows) FROM tsbucket.stats('pm')").fetchone()[0] == \
            c.execute("SELECT count(*) FROM pm").fetchone()[0]
