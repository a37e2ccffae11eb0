"""The launcher holds no database connection: the database `postgres` can be
dropped, and a cluster without it is still served."""

import time

from conftest import Cluster


def test_cluster_without_the_postgres_database_is_served():
    c = Cluster(worker=True, extra_conf=["tsbucket.worker_interval = 1"])
    try:
        with c.connect(dbname="template1") as conn:
            conn.execute("DROP DATABASE postgres")
        with c.connect() as conn:
            conn.execute("CREATE TABLE t (time timestamptz NOT NULL, s text, v int) USING tsbucket")
            conn.execute("SELECT tsbucket.create_timeseries('t', 'time', 's')")
            for i in range(5):
                conn.execute("INSERT INTO t VALUES ('2024-01-01'::timestamptz + %s * interval '1 s', 'a', %s)", (i, i))
            deadline = time.time() + 20
            while conn.execute("SELECT count(*) FROM tsbucket.buckets('t')").fetchone()[0] != 1:
                assert time.time() < deadline, "the worker did not compact the table"
                time.sleep(0.25)
            assert conn.execute("SELECT count(*) FROM t").fetchone()[0] == 5
    finally:
        c.destroy()
