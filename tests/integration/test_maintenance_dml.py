"""User DML never fails because of tsbucket's own maintenance, and two user
transactions on one bucket behave as heap does under READ COMMITTED: the
second waits, then re-checks its rows where they live now (EvalPlanQual).
Every scenario runs against a heap table too, and the rows must agree."""

import random
import threading
import time

import psycopg
import pytest

from conftest import Cluster, one_row_buckets, set_worker, wait_for


@pytest.fixture(scope="module")
def cluster():
    c = Cluster(worker=True, extra_conf=["tsbucket.worker_interval = 1", "deadlock_timeout = 100ms"])
    yield c
    c.destroy()


def make_pair(c, name, meta="s"):
    c.execute(f"DROP TABLE IF EXISTS {name}, {name}_heap")
    c.execute(f"CREATE TABLE {name} (time timestamptz NOT NULL, s text, v int) USING tsbucket")
    c.execute(f"SELECT tsbucket.create_timeseries('{name}', 'time', '{meta}')")
    c.execute(f"CREATE TABLE {name}_heap (time timestamptz NOT NULL, s text, v int)")


def rows(c, table):
    return c.execute(f"SELECT time, s, v FROM {table} ORDER BY time, s, v").fetchall()


def test_delete_waits_for_compaction_then_applies_to_the_merged_bucket(cluster):
    """The deterministic case: compaction holds the buckets first."""
    with cluster.connect() as c:
        set_worker(c, False)
        make_pair(c, "cw")
        one_row_buckets(c)
        for i in range(50):
            c.execute("INSERT INTO cw VALUES ('2024-01-01'::timestamptz + %s * interval '1 s', 'a', %s)", (i, i))
        assert c.execute("SELECT count(*) FROM tsbucket.buckets('cw')").fetchone()[0] == 50
    a = cluster.connect(autocommit=False)
    a.execute("SELECT * FROM tsbucket.compact('cw')")
    outcome = {}

    def user():
        try:
            with cluster.connect() as b:
                started = time.time()
                outcome["deleted"] = b.execute("DELETE FROM cw WHERE v = 7").rowcount
                outcome["waited"] = time.time() - started
        except Exception as e:  # reported below
            outcome["error"] = e

    t = threading.Thread(target=user)
    t.start()
    time.sleep(3)
    a.commit()
    t.join()
    a.close()
    assert "error" not in outcome, outcome
    assert outcome["deleted"] == 1 and outcome["waited"] >= 2.5
    with cluster.connect() as c:
        assert c.execute("SELECT count(*), count(*) FILTER (WHERE v = 7) FROM cw").fetchone() == (49, 0)
        assert c.execute("SELECT count(*) FROM tsbucket.buckets('cw')").fetchone()[0] == 1
        assert c.execute("SELECT count(*) FROM tsbucket.verify('cw')").fetchone()[0] == 0


def test_meta_update_follows_a_compacted_bucket(cluster):
    with cluster.connect() as c:
        make_pair(c, "cu")
        for i in range(20):
            c.execute("INSERT INTO cu VALUES ('2024-01-01'::timestamptz + %s * interval '1 s', 'a', %s)", (i, i))
    a = cluster.connect(autocommit=False)
    a.execute("SELECT * FROM tsbucket.compact('cu')")
    outcome = {}

    def user():
        try:
            with cluster.connect() as b:
                outcome["updated"] = b.execute("UPDATE cu SET s = 'b' WHERE s = 'a'").rowcount
        except Exception as e:
            outcome["error"] = e

    t = threading.Thread(target=user)
    t.start()
    time.sleep(1)
    a.commit()
    t.join()
    a.close()
    assert outcome == {"updated": 20}
    with cluster.connect() as c:
        assert c.execute("SELECT s, count(*) FROM cu GROUP BY s").fetchall() == [("b", 20)]


def test_compaction_skips_buckets_user_dml_holds(cluster):
    with cluster.connect() as c:
        make_pair(c, "cs")
        one_row_buckets(c)
        for i in range(10):
            c.execute("INSERT INTO cs VALUES ('2024-01-01'::timestamptz + %s * interval '1 s', 'a', %s)", (i, i))
    user = cluster.connect(autocommit=False)
    user.execute("DELETE FROM cs WHERE v = 3")
    with cluster.connect() as c:
        started = time.time()
        before, after, _ = c.execute("SELECT * FROM tsbucket.compact('cs')").fetchone()
        # Did not wait for the user's transaction; merged the 9 other buckets.
        assert time.time() - started < 2
        assert (before, after) == (9, 1)
    user.commit()
    user.close()
    with cluster.connect() as c:
        assert c.execute("SELECT count(*), sum(v) FROM cs").fetchone() == (9, 45 - 3)


def run_pair(cluster, table, first_sql, second_sql, isolation="read committed"):
    """Runs first_sql in one transaction and second_sql in another that starts
    while the first holds its rows; returns the second's row count or error."""
    a = cluster.connect(autocommit=False)
    a.execute(first_sql.format(t=table))
    outcome = {}

    def second():
        try:
            with cluster.connect(autocommit=False) as b:
                b.execute(f"SET TRANSACTION ISOLATION LEVEL {isolation}")
                outcome["rows"] = b.execute(second_sql.format(t=table)).rowcount
                b.commit()
        except psycopg.errors.SerializationFailure:
            outcome["rows"] = "40001"

    t = threading.Thread(target=second)
    t.start()
    time.sleep(1)
    a.commit()
    t.join()
    a.close()
    return outcome["rows"]


@pytest.mark.parametrize("first, second", [
    ("DELETE FROM {t} WHERE v < 10", "DELETE FROM {t} WHERE v < 20"),
    ("UPDATE {t} SET s = 'b' WHERE s = 'a'", "DELETE FROM {t} WHERE s = 'a'"),
    ("UPDATE {t} SET s = 'b' WHERE s = 'a'", "DELETE FROM {t} WHERE v % 3 = 0"),
    ("DELETE FROM {t} WHERE v % 2 = 0", "UPDATE {t} SET s = 'c' WHERE s = 'a'"),
])
def test_two_user_transactions_behave_as_heap(cluster, first, second):
    results = {}
    for table in ("uu", "uu_heap"):
        with cluster.connect() as c:
            if table == "uu":
                make_pair(c, "uu")
            c.execute(f"INSERT INTO {table} SELECT '2024-01-01'::timestamptz + i * interval '1 s', 'a', i FROM generate_series(1, 100) i")
        results[table] = run_pair(cluster, table, first, second)
    assert results["uu"] == results["uu_heap"]
    with cluster.connect() as c:
        assert rows(c, "uu") == rows(c, "uu_heap")


def test_repeatable_read_still_gets_40001_as_heap(cluster):
    results = {}
    for table in ("rr", "rr_heap"):
        with cluster.connect() as c:
            if table == "rr":
                make_pair(c, "rr")
            c.execute(f"INSERT INTO {table} SELECT '2024-01-01'::timestamptz + i * interval '1 s', 'a', i FROM generate_series(1, 100) i")
        results[table] = run_pair(cluster, table, "DELETE FROM {t} WHERE v < 10", "DELETE FROM {t} WHERE v < 20", "repeatable read")
    assert results == {"rr": "40001", "rr_heap": "40001"}


def test_dml_loop_while_the_worker_compacts_and_expires(cluster):
    """DELETEs and meta UPDATEs for 60 s while compaction and expiry run every
    second; the same statements on a heap table: no failures, same rows."""
    with cluster.connect() as c:
        set_worker(c, True)
        make_pair(c, "loop")
        c.execute("SELECT tsbucket.alter_timeseries('loop', expire_after => '30 days')")
    rng = random.Random(7)
    failures = []
    deadline = time.time() + 60
    step = 0
    inserter_stop = threading.Event()

    inserter_errors = []

    def inserter():
        # Trickle inserts keep compaction busy; rows 40 days old keep expiry busy.
        # Both tables are written in one transaction, serialized with the DML
        # below by the heap table's lock, so they always hold the same rows.
        n = 0
        try:
            run_inserts(n)
        except Exception as e:  # reported below
            inserter_errors.append(repr(e))

    def run_inserts(n):
        with cluster.connect() as c:
            while not inserter_stop.is_set():
                age = "40 days" if n % 10 == 0 else "1 hour"
                with c.transaction():
                    c.execute("LOCK TABLE loop_heap IN SHARE ROW EXCLUSIVE MODE")
                    for table in ("loop", "loop_heap"):
                        c.execute(f"""INSERT INTO {table} VALUES
                            (now() - interval '{age}' + %s * interval '1 ms', 's' || (%s %% 4), %s)""", (n, n, n))
                n += 1
                time.sleep(0.01)

    t = threading.Thread(target=inserter)
    t.start()
    with cluster.connect() as c:
        while time.time() < deadline:
            step += 1
            k = rng.randrange(4)
            if rng.random() < 0.5:
                sql = f"DELETE FROM {{t}} WHERE v % 7 = {rng.randrange(7)} AND v < (SELECT max(v) - 50 FROM {{t}})"
            else:
                sql = f"UPDATE {{t}} SET s = 's{(k + 1) % 4}' WHERE s = 's{k}'"
            try:
                with c.transaction():
                    c.execute("LOCK TABLE loop_heap IN SHARE ROW EXCLUSIVE MODE")
                    c.execute(sql.format(t="loop"))
                    c.execute(sql.format(t="loop_heap"))
            except psycopg.Error as e:
                failures.append((sql, repr(e)))
    inserter_stop.set()
    t.join()
    assert failures == [] and inserter_errors == []
    time.sleep(3)
    with cluster.connect() as c:
        recent = "SELECT time, s, v FROM {} WHERE time > now() - interval '30 days' ORDER BY time, s, v"
        assert c.execute(recent.format("loop")).fetchall() == c.execute(recent.format("loop_heap")).fetchall()
        # Expiry ran and removed the old rows (whole buckets of them).
        # (Rows the last statements left in the tail expire once a round drains them.)
        assert wait_for(lambda: c.execute("SELECT count(*) FROM loop WHERE time < now() - interval '31 days'").fetchone()[0] == 0)
        assert c.execute("SELECT count(*) FROM tsbucket.verify('loop')").fetchone()[0] == 0
        jobs = c.execute("SELECT last_compaction IS NOT NULL, last_expiry IS NOT NULL, last_error FROM tsbucket.jobs "
                         "WHERE table_name = 'loop'::regclass").fetchone()
        assert jobs == (True, True, None), (c.execute("SELECT * FROM tsbucket.job_state").fetchall(),
                                            c.execute("SELECT * FROM tsbucket.worker_status()").fetchall(),
                                            open(cluster.dir + "/server.log").read()[-4000:])


def test_maintenance_never_deadlocks_with_truncate_and_drop(cluster):
    """Expiry and compaction lock the user table before its store, as TRUNCATE
    and DROP do: running them against each other never deadlocks."""
    with cluster.connect() as c:
        set_worker(c, True)
    errors = []
    deadline = time.time() + 20
    rounds = 0
    with cluster.connect() as c:
        while time.time() < deadline:
            rounds += 1
            try:
                c.execute("DROP TABLE IF EXISTS lk")
                c.execute("CREATE TABLE lk (time timestamptz NOT NULL, s text, v int) USING tsbucket")
                c.execute("SELECT tsbucket.create_timeseries('lk', 'time', 's', expire_after => '1 day')")
                for i in range(20):
                    age = "3 days" if i % 2 else "1 minute"
                    c.execute(f"INSERT INTO lk VALUES (now() - interval '{age}' + %s * interval '1 ms', 'a', %s)", (i, i))
                time.sleep(rng_pause(rounds))
                with c.transaction():
                    c.execute("INSERT INTO lk VALUES (now(), 'b', 1)")
                    c.execute("TRUNCATE lk")
                    c.execute("INSERT INTO lk VALUES (now(), 'b', 2)")
                time.sleep(rng_pause(rounds + 1))
            except psycopg.Error as e:
                errors.append(repr(e))
    assert errors == []
    log = open(cluster.dir + "/server.log").read()
    assert "deadlock detected" not in log
    assert rounds > 5


def rng_pause(n):
    # Spread the DDL over the worker's 1 s rounds.
    return (n * 0.37) % 1.0
