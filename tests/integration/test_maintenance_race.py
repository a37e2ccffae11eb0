"""Maintenance against maintenance: two compactions, a compaction and an
expiry, a user's compaction and the worker's. Each waits for the other's
lock and then works on what committed before it got the lock: never
`XX000 tuple concurrently deleted` (the moves table pruned with a snapshot
from before the wait), never an error the worker records. Under REPEATABLE
READ and SERIALIZABLE a conflict may only be 40001, as for DML."""

import threading
import time

import psycopg
import pytest

from conftest import Cluster, set_worker


@pytest.fixture(scope="module")
def cluster():
    c = Cluster(worker=True, extra_conf=["tsbucket.worker_interval = 1", "deadlock_timeout = 100ms"])
    with c.connect() as conn:
        conn.execute("CREATE ROLE race_owner LOGIN")
        conn.execute("GRANT CREATE ON SCHEMA public TO race_owner")
    yield c
    c.destroy()


def owner_conn(cluster, autocommit=True):
    conn = cluster.connect(autocommit=autocommit)
    conn.execute("SET ROLE race_owner")
    if not autocommit:
        conn.commit()
    return conn


def make_table(c, name, expire=False):
    c.execute(f"DROP TABLE IF EXISTS {name}")
    c.execute(f"CREATE TABLE {name} (time timestamptz NOT NULL, m int4, v float8) USING tsbucket")
    extra = ", expire_after => interval '1 day'" if expire else ""
    c.execute(f"SELECT tsbucket.create_timeseries('{name}', time_column => 'time', meta_column => 'm'{extra})")


def single_rows(c, name, start, n, base="2024-01-01"):
    """One-row buckets (no tail): the races below are between compactions of buckets."""
    c.execute("SET tsbucket.tail_bucket_rows = 0")
    for i in range(start, start + n):
        c.execute(f"INSERT INTO {name} VALUES (%s::timestamptz + %s * interval '1 s', 1, %s)", (base, i, i))
    c.execute("RESET tsbucket.tail_bucket_rows")


def run_waiting(cluster, sql, isolation=None):
    """Runs `sql` in its own session (as the owner) in a thread; returns (thread, outcome)."""
    outcome = {}

    def body():
        try:
            with owner_conn(cluster, autocommit=isolation is None) as b:
                if isolation:
                    b.execute(f"BEGIN ISOLATION LEVEL {isolation}")
                    b.execute("SELECT 1")  # the transaction's snapshot: before the other commits
                    outcome["ready"] = True
                    while not outcome.get("go"):
                        time.sleep(0.05)
                outcome["result"] = b.execute(sql).fetchall()
                if isolation:
                    b.execute("COMMIT")
        except psycopg.Error as e:
            outcome["error"] = e

    t = threading.Thread(target=body)
    t.start()
    return t, outcome


def prepared_table(cluster, name, expire=False):
    with owner_conn(cluster) as c:
        make_table(c, name, expire)
        single_rows(c, name, 1, 20)
        c.execute(f"SELECT * FROM tsbucket.compact('{name}')")
        c.execute(f"VACUUM {name}")
        single_rows(c, name, 21, 20)


def test_second_compaction_waits_then_merges_what_is_left(cluster):
    """The issue's reproduction: B waits for A's lock, then finds nothing left to merge."""
    with cluster.connect() as c:
        set_worker(c, False)
    prepared_table(cluster, "cr")
    a = owner_conn(cluster, autocommit=False)
    first = a.execute("SELECT * FROM tsbucket.compact('cr')").fetchone()
    assert first[0] >= 2
    t, outcome = run_waiting(cluster, "SELECT * FROM tsbucket.compact('cr')")
    time.sleep(1.5)
    assert t.is_alive(), "the second compaction must wait for the first one's lock"
    a.commit()
    t.join(30)
    a.close()
    assert "error" not in outcome, outcome
    assert outcome["result"] == [(0, 0, 0)]
    with owner_conn(cluster) as c:
        assert c.execute("SELECT count(*), sum(v) FROM cr").fetchone() == (40, sum(range(1, 41)))
        assert c.execute("SELECT count(*) FROM tsbucket.verify('cr')").fetchone()[0] == 0


@pytest.mark.parametrize("isolation", ["REPEATABLE READ", "SERIALIZABLE"])
def test_compaction_under_snapshot_isolation_never_fails_with_xx000(cluster, isolation):
    """B's transaction snapshot predates A's compaction: B merges nothing A merged
    (its buckets are gone when B locks them), prunes moves A pruned without
    error, or fails with 40001."""
    with cluster.connect() as c:
        set_worker(c, False)
    prepared_table(cluster, "crr")
    t, outcome = run_waiting(cluster, "SELECT * FROM tsbucket.compact('crr')", isolation)
    while not outcome.get("ready"):
        time.sleep(0.05)
    with owner_conn(cluster) as a:
        assert a.execute("SELECT * FROM tsbucket.compact('crr')").fetchone()[0] >= 2
    outcome["go"] = True
    t.join(30)
    if "error" in outcome:
        assert outcome["error"].sqlstate == "40001", outcome
    else:
        assert outcome["result"] == [(0, 0, 0)]
    with owner_conn(cluster) as c:
        assert c.execute("SELECT count(*), sum(v) FROM crr").fetchone() == (40, sum(range(1, 41)))
        assert c.execute("SELECT count(*) FROM tsbucket.verify('crr')").fetchone()[0] == 0


def test_expiry_waits_for_compaction(cluster):
    """Expiry that waited for a compaction expires the merged buckets, not the old ones."""
    with cluster.connect() as c:
        set_worker(c, False)
    with owner_conn(cluster) as c:
        make_table(c, "ce", expire=True)
        single_rows(c, "ce", 1, 20, base="2020-01-01")
        single_rows(c, "ce", 1, 5, base="2999-01-01")
    a = owner_conn(cluster, autocommit=False)
    assert a.execute("SELECT * FROM tsbucket.compact('ce')").fetchone()[0] >= 2
    t, outcome = run_waiting(cluster, "SELECT * FROM tsbucket.expire('ce')")
    time.sleep(1.5)
    assert t.is_alive()
    a.commit()
    t.join(30)
    a.close()
    assert "error" not in outcome, outcome
    assert outcome["result"] == [(1, 20)]
    with owner_conn(cluster) as c:
        assert c.execute("SELECT count(*) FROM ce").fetchone()[0] == 5


def test_users_compactions_beside_the_worker_record_no_error(cluster):
    """Single-row inserts, users' compactions from two sessions at once and the
    worker every second: no call fails, the worker records no error."""
    with cluster.connect() as c:
        set_worker(c, True)
    with owner_conn(cluster) as c:
        make_table(c, "cw2", expire=True)
    errors = []
    stop = time.time() + 20

    def inserter():
        with owner_conn(cluster) as c:
            i = 0
            while time.time() < stop:
                c.execute("INSERT INTO cw2 VALUES (now() - %s * interval '1 s', %s, %s)", (i % 5000, i % 3, i))
                i += 1

    def compactor():
        with owner_conn(cluster) as c:
            while time.time() < stop:
                try:
                    if int(time.time() * 10) % 4 == 0:
                        c.execute("SELECT * FROM tsbucket.expire('cw2')")
                    c.execute("SELECT * FROM tsbucket.compact('cw2')")
                except psycopg.Error as e:
                    errors.append(e)

    threads = [threading.Thread(target=inserter)] + [threading.Thread(target=compactor) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    time.sleep(2.5)
    with owner_conn(cluster) as c:
        assert c.execute("SELECT last_error FROM tsbucket.jobs WHERE table_name = 'cw2'::regclass").fetchone() == (None,)
        assert c.execute("SELECT count(*) FROM tsbucket.verify('cw2')").fetchone()[0] == 0
