"""The launcher's schedule: each database at most once per interval, idle
databases not at all, every database served in turn when there are more of
them than worker slots, and an idle cluster costs (almost) no CPU."""

import os
import time

import pytest

from conftest import Cluster, wait_for

DATABASES = 20


@pytest.fixture(scope="module")
def cluster():
    # max_workers 2 and 20 databases: far more databases than slots.
    c = Cluster(worker=True, extra_conf=["tsbucket.worker_interval = 1", "tsbucket.max_workers = 2"])
    for i in range(DATABASES):
        with c.connect(dbname="postgres") as conn:
            conn.execute(f"CREATE DATABASE db{i}")
        with c.connect(dbname=f"db{i}") as conn:
            conn.execute("CREATE EXTENSION tsbucket")
            conn.execute("CREATE TABLE t (time timestamptz NOT NULL, s text, v int) USING tsbucket")
            # Half the databases expire data, half only compact.
            expiry = ", expire_after => '1 day'" if i % 2 == 0 else ""
            conn.execute(f"SELECT tsbucket.create_timeseries('t', 'time', 's'{expiry})")
    for i in range(3):
        with c.connect(dbname="postgres") as conn:
            conn.execute(f"CREATE DATABASE plain{i}")
    yield c
    c.destroy()


def visits(cluster):
    with cluster.connect(dbname="postgres") as c:
        return dict(c.execute("""SELECT d.datname, s.visits FROM tsbucket.worker_status() s
                                  JOIN pg_database d ON d.oid = s.database""").fetchall())


def test_postgres_database_has_the_status_function(cluster):
    with cluster.connect(dbname="postgres") as c:
        c.execute("CREATE EXTENSION tsbucket")


def test_every_database_is_visited_and_idle_ones_then_left_alone(cluster):
    names = [f"db{i}" for i in range(DATABASES)] + [f"plain{i}" for i in range(3)]
    assert wait_for(lambda: all(visits(cluster).get(n, 0) >= 1 for n in names), 30)
    time.sleep(3)
    before = visits(cluster)
    window = 6.0
    time.sleep(window)
    after = visits(cluster)
    for i in range(DATABASES):
        n = f"db{i}"
        extra = after[n] - before[n]
        if i % 2 == 1:
            # Nothing written, no expiry: not visited at all.
            assert extra == 0, (n, extra)
        else:
            # At most once per interval (1 s), give or take the edges.
            assert extra <= window + 1, (n, extra)
    for i in range(3):
        # No extension there: visited once to find out, then never again.
        assert after[f"plain{i}"] == 1


def test_writes_make_a_database_due_and_compaction_runs(cluster):
    with cluster.connect(dbname="db1") as c:
        for i in range(20):
            c.execute("INSERT INTO t VALUES ('2024-01-01'::timestamptz + %s * interval '1 s', 'a', %s)", (i, i))
        assert wait_for(lambda: c.execute("SELECT buckets FROM tsbucket.stats('t')").fetchone()[0] == 1, 20)


def test_expiry_is_timely_with_more_databases_than_worker_slots(cluster):
    for i in range(0, DATABASES, 2):
        with cluster.connect(dbname=f"db{i}") as c:
            c.execute("INSERT INTO t SELECT now() - interval '3 days' + g * interval '1 s', 'old', g FROM generate_series(1, 50) g")
    start = time.time()

    def all_expired():
        for i in range(0, DATABASES, 2):
            with cluster.connect(dbname=f"db{i}") as c:
                if c.execute("SELECT count(*) FROM t").fetchone()[0] != 0:
                    return False
        return True

    # 10 databases due every second, 2 slots: each is served within a few intervals.
    ok = wait_for(all_expired, 40)
    if not ok:
        with cluster.connect(dbname="postgres") as c:
            print(c.execute("SELECT d.datname, s.* FROM tsbucket.worker_status() s JOIN pg_database d ON d.oid = s.database").fetchall())
        for i in range(0, DATABASES, 2):
            with cluster.connect(dbname=f"db{i}") as c:
                print(i, c.execute("SELECT count(*) FROM t").fetchone(), c.execute("SELECT * FROM tsbucket.jobs").fetchall())
        print(open(cluster.dir + "/server.log").read()[-3000:])
    assert ok, "expired rows still present"
    assert time.time() - start < 40


def test_idle_cluster_uses_almost_no_cpu(cluster):
    # Switch expiry off everywhere: nothing is due any more.
    for i in range(0, DATABASES, 2):
        with cluster.connect(dbname=f"db{i}") as c:
            c.execute("SELECT tsbucket.alter_timeseries('t', expire_never => true)")
    time.sleep(4)

    postmaster = open(os.path.join(cluster.data, "postmaster.pid")).readline().strip()

    def cpu():
        # tsbucket's processes of this cluster (not of others running on the machine).
        total = 0
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                cmd = open(f"/proc/{pid}/cmdline", "rb").read()
                fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
                if b"tsbucket" not in cmd or fields[1] != postmaster:
                    continue
                total += int(fields[11]) + int(fields[12])
            except (FileNotFoundError, ProcessLookupError, IndexError):
                continue
        return total / os.sysconf("SC_CLK_TCK")

    before_cpu, before_visits = cpu(), visits(cluster)
    time.sleep(10)
    used = cpu() - before_cpu
    after_visits = visits(cluster)
    # The launcher only: far below 1% of a core (0.1 s in 10 s).
    assert used < 0.1, used
    # After the expiry change each database is visited once more to notice, then left alone.
    assert sum(after_visits.values()) - sum(before_visits.values()) <= 2
