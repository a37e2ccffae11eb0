"""Without shared_preload_libraries, the rules that protect data still hold
from a session's very first statement."""

import psycopg
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
