"""Without shared_preload_libraries, the rules that protect data still hold
from a session's very first statement."""

import psycopg
import psycopg.sql
import pytest

from conftest import Cluster, make_table


@pytest.fixture(scope="module")
def plain_cluster():
    c = Cluster(preload=False)
    yield c
    c.destroy()


def test_first_statement_of_a_session_obeys_the_update_rule(plain_cluster):
    with plain_cluster.connect() as c:
        make_table(c, "np")
        c.execute("INSERT INTO np VALUES ('2024-01-01', 'a', 1, 1)")
    for statement in ("UPDATE np SET v = 2", "UPDATE np SET sensor = 'b' WHERE v = 1",
                      "INSERT INTO np VALUES (now(), 'a', 1, 1) ON CONFLICT DO NOTHING"):
        with plain_cluster.connect() as fresh:
            with pytest.raises(psycopg.errors.FeatureNotSupported):
                fresh.execute(statement)
    with plain_cluster.connect() as fresh:
        fresh.execute("UPDATE np SET sensor = 'b' WHERE sensor = 'a'")
        assert fresh.execute("SELECT sensor, v FROM np").fetchall() == [("b", 1.0)]


def test_first_statement_of_a_session_sees_and_writes_buckets(plain_cluster):
    with plain_cluster.connect() as c:
        make_table(c, "np2")
    with plain_cluster.connect() as fresh:
        fresh.execute("INSERT INTO np2 SELECT now() - i * interval '1 s', 'x', i, i FROM generate_series(1, 3000) i")
    with plain_cluster.connect() as fresh:
        assert fresh.execute("SELECT count(*) FROM np2").fetchone()[0] == 3000


def test_a_partitioned_table_is_configured_and_restored_from_a_fresh_session(plain_cluster):
    """The label provider lives in the library: create_timeseries on a
    partitioned parent, and a restore's SECURITY LABEL on one, load it first."""
    with plain_cluster.connect() as fresh:
        fresh.execute("CREATE TABLE npp (time timestamptz NOT NULL, sensor text, v float8) PARTITION BY RANGE (time)")
    with plain_cluster.connect() as fresh:
        fresh.execute("SELECT tsbucket.create_timeseries('npp', 'time', 'sensor')")
        label = fresh.execute("SELECT label FROM pg_seclabel WHERE objoid = 'npp'::regclass").fetchone()[0]
    with plain_cluster.connect() as fresh:
        fresh.execute("CREATE TABLE npp_1 PARTITION OF npp FOR VALUES FROM ('2024-01-01') TO ('2024-02-01') USING tsbucket")
        fresh.execute("INSERT INTO npp VALUES ('2024-01-02', 'a', 1)")
        assert fresh.execute("SELECT count(*) FROM tsbucket.catalog WHERE relid = 'npp_1'::regclass").fetchone()[0] == 1
    # As a restore runs it: the parent, then its label, in a session of its own.
    with plain_cluster.connect() as fresh:
        fresh.execute("CREATE TABLE npr (time timestamptz NOT NULL, sensor text, v float8) PARTITION BY RANGE (time)")
        fresh.execute("SECURITY LABEL FOR tsbucket ON TABLE npr IS %s" % psycopg.sql.quote(label))
        fresh.execute("CREATE TABLE npr_1 PARTITION OF npr FOR VALUES FROM ('2024-01-01') TO ('2024-02-01') USING tsbucket")
        assert fresh.execute("SELECT count(*) FROM tsbucket.catalog WHERE relid = 'npr_1'::regclass").fetchone()[0] == 1
