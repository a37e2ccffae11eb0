"""tsbucket tables distributed with Citus: a coordinator and two workers on
this machine (Citus 13.2.2 on PostgreSQL 15, 14.0.1 on 18, built by
scripts/setup.sh from ../shared/vendor; skipped where Citus is not
installed), tsbucket preloaded after Citus, the worker every second, tables
owned by a non-superuser."""

import os
import time

import pytest

from conftest import CitusFormation, citus_installed

SHARDS = 4


pytestmark = pytest.mark.skipif(not citus_installed(), reason="Citus is not installed for this PostgreSQL (scripts/setup.sh builds it from ../shared/vendor)")


@pytest.fixture(scope="module")
def citus():
    f = CitusFormation(shards=SHARDS, roles=("alice", "fuzz_owner"))
    yield f
    f.destroy()


SCHEMA = "time timestamptz NOT NULL, sensor text NOT NULL, temp float8, hum int4"


def rows_sql(n, start="2024-01-01"):
    return (f"SELECT '{start}'::timestamptz + i * interval '1 s', 's' || (i % 20), i / 10.0, i % 100 "
            f"FROM generate_series(0, {n - 1}) i")


def wait_for(predicate, timeout=60, what="condition"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def test_configure_then_distribute(citus):
    with citus.connect() as c:
        c.execute(f"CREATE TABLE w1 ({SCHEMA}) USING tsbucket")
        c.execute("SELECT tsbucket.create_timeseries('w1', 'time', 'sensor')")
        c.execute("SELECT create_distributed_table('w1', 'sensor')")
        c.execute(f"INSERT INTO w1 {rows_sql(5000)}")
        assert c.execute("SELECT count(*), sum(hum) FROM w1").fetchone() == (5000, sum(i % 100 for i in range(5000)))
        # Each shard's plan is TsBucketScan with aggregation inside the scan.
        plan = "\n".join(r[0] for r in c.execute("EXPLAIN (VERBOSE) SELECT sensor, max(temp) FROM w1 GROUP BY sensor"))
        assert "TsBucketScan" in plan and "Vectorized Aggregation" in plan, plan


def test_distribute_a_table_holding_rows(citus):
    """Citus creates the shards over parallel connections when the table has
    rows (or in a transaction block): configuring them must not serialize
    on the extension (PostgreSQL 15 deadlocked, 40P01)."""
    with citus.connect() as c:
        c.execute(f"CREATE TABLE w2 ({SCHEMA}) USING tsbucket")
        c.execute("SELECT tsbucket.create_timeseries('w2', 'time', 'sensor')")
        c.execute(f"INSERT INTO w2 {rows_sql(3000)}")
        c.execute("SELECT create_distributed_table('w2', 'sensor')")
        # The coordinator keeps its local copy until truncated: the DBA functions count the shards only.
        whole = "SELECT (SELECT rows + tail_rows FROM tsbucket.stats('w2')), (SELECT count(*) FROM tsbucket.verify('w2'))"
        assert c.execute(whole).fetchone() == (3000, 0)
        size = c.execute("SELECT tsbucket.table_size('w2')").fetchone()[0]
        c.execute("SELECT truncate_local_data_after_distributing_table('w2')")
        assert c.execute("SELECT count(*) FROM w2").fetchone()[0] == 3000
        assert c.execute(whole).fetchone() == (3000, 0)
        assert c.execute("SELECT tsbucket.table_size('w2')").fetchone()[0] == size
    # Inside a transaction block, a table holding rows (committed before), more written after.
    with citus.connect() as c:
        c.execute(f"CREATE TABLE w3 ({SCHEMA}) USING tsbucket")
        c.execute("SELECT tsbucket.create_timeseries('w3', 'time', 'sensor')")
        c.execute(f"INSERT INTO w3 {rows_sql(2000)}")
    with citus.connect(autocommit=False) as c:
        c.execute("SELECT create_distributed_table('w3', 'sensor')")
        c.execute(f"INSERT INTO w3 {rows_sql(500, start='2025-01-01')}")
        c.commit()
        assert c.execute("SELECT count(*) FROM w3").fetchone()[0] == 2500
        c.execute("SELECT truncate_local_data_after_distributing_table('w3')")
        c.commit()
        assert c.execute("SELECT count(*) FROM w3").fetchone()[0] == 2500
        assert c.execute("SELECT rows + tail_rows FROM tsbucket.stats('w3')").fetchone()[0] == 2500
        c.commit()
    # The shards' internal relations belong to the extension on every node (pg_dump leaves them out).
    for n in citus.nodes:
        with n.connect() as c:
            loose = c.execute("""SELECT count(*) FROM pg_class k JOIN pg_namespace s ON s.oid = k.relnamespace
                                  WHERE s.nspname = 'tsbucket_internal' AND k.relkind IN ('r', 'S')
                                    AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass
                                                    AND d.objid = k.oid AND d.deptype = 'e')""").fetchone()[0]
            assert loose == 0


def test_worker_maintains_every_shard(citus):
    """Rows trickled in one statement at a time land in the shards' tails;
    the worker on each node drains them into buckets and expires old ones,
    with Citus's shard protections left as they are."""
    with citus.connect() as c:
        c.execute(f"CREATE TABLE w4 ({SCHEMA}) USING tsbucket")
        c.execute("SELECT tsbucket.create_timeseries('w4', 'time', 'sensor', expire_after => interval '30 days')")
        c.execute("SELECT create_distributed_table('w4', 'sensor')")
        for i in range(200):
            c.execute("INSERT INTO w4 VALUES (now() - %s * interval '1 s', %s, %s, %s)", (i, f"s{i % 20}", i, i))
        c.execute(f"INSERT INTO w4 {rows_sql(500, start='2000-01-01')}")  # long expired
        assert c.execute("SELECT count(*) FROM w4").fetchone()[0] == 700
        stats = "SELECT row_to_json(s)::text FROM tsbucket.stats(%L) s"

        def maintained():
            import json
            shards = [json.loads(r) for r in citus.on_shards(c, "w4", stats)]
            return all(s["tail_rows"] == 0 for s in shards) and c.execute("SELECT count(*) FROM w4").fetchone()[0] == 200
        wait_for(maintained, what="every shard drained and expired")
        errors = citus.on_shards(c, "w4", "SELECT coalesce(string_agg(last_error, '; '), '') FROM tsbucket.job_state WHERE relid = %L::regclass")
        assert errors == [""] * SHARDS, errors


def test_dba_functions_answer_for_the_whole_table(citus):
    """stats, buckets, sizes and verify on the coordinator's shell sum its
    shards (the shell itself is empty)."""
    with citus.connect() as c:
        c.execute(f"CREATE TABLE w5 ({SCHEMA}) USING tsbucket")
        c.execute("SELECT tsbucket.create_timeseries('w5', 'time', 'sensor')")
        c.execute("SELECT create_distributed_table('w5', 'sensor')")
        c.execute(f"INSERT INTO w5 {rows_sql(4000)}")
        c.execute("INSERT INTO w5 VALUES (now(), 's1', 1, 1)")  # one row in a tail
        buckets, rows, tail_rows, total = c.execute(
            "SELECT buckets, rows, tail_rows, total_bytes FROM tsbucket.stats('w5')").fetchone()
        assert rows + tail_rows == 4001
        # Once the workers have drained the tails, the numbers hold still.
        wait_for(lambda: c.execute("SELECT tail_rows FROM tsbucket.stats('w5')").fetchone()[0] == 0, what="tails drained")
        buckets, rows, total = c.execute("SELECT buckets, rows, total_bytes FROM tsbucket.stats('w5')").fetchone()
        assert rows == 4001
        # (The workers may compact between two calls: bucket counts and sizes may move, rows do not.)
        assert c.execute("SELECT sum(rows) FROM tsbucket.buckets('w5')").fetchone()[0] == 4001
        assert buckets > 0 and total > 0 and c.execute("SELECT tsbucket.table_size('w5')").fetchone()[0] > 0
        assert c.execute("SELECT count(*) FROM tsbucket.verify('w5')").fetchone()[0] == 0


def test_compact_and_expire_reach_every_shard(citus):
    """tsbucket.compact and tsbucket.expire called on a distributed table run
    on each of its shards (each in a transaction of its own, so they refuse
    a transaction block, as VACUUM does)."""
    import psycopg
    with citus.connect() as c:
        c.execute(f"CREATE TABLE w10 ({SCHEMA}) USING tsbucket")
        c.execute("SELECT tsbucket.create_timeseries('w10', 'time', 'sensor', expire_after => interval '30 days')")
        c.execute("SELECT create_distributed_table('w10', 'sensor')")
        for i in range(100):
            c.execute("INSERT INTO w10 VALUES (now() - %s * interval '1 s', %s, %s, %s)", (i, f"s{i % 20}", i, i))
        c.execute(f"INSERT INTO w10 {rows_sql(500, start='2000-01-01')}")  # long expired
        with citus.connect(autocommit=False) as t:
            for fn in ("compact", "expire"):
                with pytest.raises(psycopg.errors.ActiveSqlTransaction, match="inside a transaction block"):
                    t.execute(f"SELECT * FROM tsbucket.{fn}('w10')")
                t.rollback()
        with citus.maintenance_paused():
            c.execute("INSERT INTO w10 VALUES (now(), 's1', 1, 1)")  # (a row in a tail for certain)
            tail_rows = c.execute("SELECT tail_rows FROM tsbucket.stats('w10')").fetchone()[0]
            assert tail_rows > 0
            # (A compaction drains the current segment of each tail only if an empty one can take its place: the
            # worker's last round may have left another drained but not yet emptied. A second round then drains it.)
            moved = 0
            for _ in range(3):
                moved += c.execute("SELECT rows_moved FROM tsbucket.compact('w10')").fetchone()[0]
                if c.execute("SELECT tail_rows FROM tsbucket.stats('w10')").fetchone()[0] == 0:
                    break
            assert moved >= tail_rows
            assert c.execute("SELECT tail_rows FROM tsbucket.stats('w10')").fetchone()[0] == 0
            old = c.execute("SELECT count(*) FROM w10 WHERE time < '2001-01-01'").fetchone()[0]
            assert c.execute("SELECT rows_expired FROM tsbucket.expire('w10')").fetchone()[0] == old
        assert c.execute("SELECT count(*) FROM w10").fetchone()[0] == 101
        assert c.execute("SELECT rows, tail_rows FROM tsbucket.stats('w10')").fetchone() == (101, 0)


def test_distribute_then_configure(citus):
    """create_timeseries on a table already distributed: Citus carries its
    label to every node, which configures its own shards, in one distributed
    transaction. In the transaction that distributed it, refused with a hint."""
    import json

    import psycopg
    with citus.connect() as c:
        c.execute(f"CREATE TABLE w6 ({SCHEMA}) USING tsbucket")
        c.execute("SELECT create_distributed_table('w6', 'sensor')")
        c.execute("SELECT tsbucket.create_timeseries('w6', 'time', 'sensor')")
        c.execute(f"INSERT INTO w6 {rows_sql(3000)}")
        c.execute("INSERT INTO w6 VALUES ('2024-01-01', 's1', 1, 1)")
        assert c.execute("SELECT count(*) FROM w6").fetchone()[0] == 3001
        configured = citus.on_shards(c, "w6", "SELECT count(*) FROM tsbucket.catalog WHERE relid = %L::regclass")
        assert configured == ["1"] * SHARDS
        shards = [json.loads(r) for r in citus.on_shards(c, "w6", "SELECT row_to_json(s)::text FROM tsbucket.stats(%L) s")]
        assert sum(s["rows"] + s["tail_rows"] for s in shards) == 3001
        plan = "\n".join(r[0] for r in c.execute("EXPLAIN (VERBOSE) SELECT sensor, max(temp) FROM w6 GROUP BY sensor"))
        assert "TsBucketScan" in plan, plan
    with citus.connect() as c:
        c.execute(f"CREATE TABLE w6c ({SCHEMA}) USING tsbucket")
        c.execute("SELECT create_distributed_table('w6c', 'sensor')")
        c.execute("SET citus.enable_ddl_propagation = off")
        with pytest.raises(psycopg.errors.FeatureNotSupported, match="would stay unconfigured"):
            c.execute("SELECT tsbucket.create_timeseries('w6c', 'time', 'sensor')")
    with citus.connect(autocommit=False) as c:
        c.execute(f"CREATE TABLE w6b ({SCHEMA}) USING tsbucket")
        c.execute("SELECT create_distributed_table('w6b', 'sensor')")
        with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState, match="in the transaction that distributed it"):
            c.execute("SELECT tsbucket.create_timeseries('w6b', 'time', 'sensor')")
        c.rollback()


SETTINGS = ("SELECT row(t.granularity, t.bucket_max_span, t.expire_after, (SELECT string_agg(r.meta || '=' || r.expire_after, ',' "
            "ORDER BY r.meta) FROM tsbucket.series_retention r WHERE r.relid = t.table_name))::text "
            "FROM tsbucket.timeseries t WHERE t.table_name = %L::regclass")


def settings_everywhere(citus, c, table):
    """The settings of every shard, and of the table's shell on every node."""
    shards = citus.on_shards(c, table, SETTINGS)
    shells = []
    for n in citus.nodes:
        with n.connect() as nc:
            shells.append(nc.execute(SETTINGS.replace("%L", "%s"), (table,)).fetchone()[0])
    return set(shards), set(shells)


def test_settings_reach_every_shard(citus):
    """alter_timeseries and series retention on a distributed table change
    its shell on every node and every shard, in one distributed transaction
    (a rollback changes none); a shard made later by a split takes them; the
    workers expire by them on every shard."""
    import psycopg
    with citus.connect() as c:
        c.execute(f"CREATE TABLE w8 ({SCHEMA}) USING tsbucket")
        c.execute("SELECT tsbucket.create_timeseries('w8', 'time', 'sensor', granularity => 'seconds')")
        c.execute("SELECT create_distributed_table('w8', 'sensor')")
        c.execute(f"INSERT INTO w8 {rows_sql(2000, start='2000-01-01')}")
        before = settings_everywhere(citus, c, "w8")
        assert len(before[0]) == 1 and before[0] == before[1], before
        with citus.connect(autocommit=False) as t:
            t.execute("SELECT tsbucket.alter_timeseries('w8', expire_after => interval '1 day')")
            t.rollback()
        assert settings_everywhere(citus, c, "w8") == before
        c.execute("SELECT tsbucket.alter_timeseries('w8', granularity => 'minutes', expire_after => interval '100 years')")
        c.execute("SELECT tsbucket.set_series_retention('w8', 's1'::text, interval '1 day')")
        c.execute("SELECT tsbucket.set_series_retention('w8', 's2'::text, interval '50 years')")
        c.execute("SELECT tsbucket.reset_series_retention('w8', 's2'::text)")
        expected = '(minutes,"1 day","100 years","s1=1 day")'
        assert settings_everywhere(citus, c, "w8") == ({expected}, {expected})
        # A split makes new shards from the shell's definition, label included.
        with citus.connect(user="postgres") as su:
            shard, lo, hi, node = su.execute(
                """SELECT s.shardid, s.shardminvalue::int8, s.shardmaxvalue::int8, n.nodeid FROM pg_dist_shard s
                     JOIN pg_dist_placement p USING (shardid) JOIN pg_dist_node n USING (groupid)
                    WHERE s.logicalrelid = 'w8'::regclass ORDER BY s.shardid LIMIT 1""").fetchone()
            su.execute("SELECT citus_split_shard_by_split_points(%s, ARRAY[%s], ARRAY[%s, %s]::int[], 'block_writes')",
                       (shard, str((lo + hi) // 2), node, node))
        assert c.execute("SELECT count(*) FROM pg_dist_shard WHERE logicalrelid = 'w8'::regclass").fetchone()[0] == SHARDS + 1
        assert settings_everywhere(citus, c, "w8") == ({expected}, {expected})
        # (The workers may have expired s1 already.)
        assert c.execute("SELECT count(*) FROM w8 WHERE sensor <> 's1'").fetchone()[0] == 1900
        # The workers expire series s1 (rows of 2000) on its shard, by its retention.
        wait_for(lambda: c.execute("SELECT count(*) FROM w8 WHERE sensor = 's1'").fetchone()[0] == 0, what="s1 expired")
        assert c.execute("SELECT count(*) FROM w8").fetchone()[0] == 1900
        # Time and meta columns stay fixed, whatever the path.
        with pytest.raises(psycopg.errors.FeatureNotSupported):
            c.execute("""SECURITY LABEL FOR tsbucket ON TABLE w8 IS '{"version": 1, "time_column": "time", "meta_columns": []}'""")


def test_shard_moves(citus):
    """Shard moves and the rebalancer: their default mode (logical
    replication) fails before anything moves, with a hint naming
    block_writes; block_writes moves every row, while a client inserts and
    deletes; moved shards keep their settings and are maintained."""
    import threading

    import psycopg
    with citus.connect() as c:
        c.execute(f"CREATE TABLE w9 ({SCHEMA}) USING tsbucket")
        c.execute("SELECT tsbucket.create_timeseries('w9', 'time', 'sensor', expire_after => interval '100 years')")
        c.execute("SELECT create_distributed_table('w9', 'sensor', colocate_with => 'none')")
        c.execute(f"INSERT INTO w9 {rows_sql(3000)}")
    ports = [w.port for w in citus.workers]
    placement = """SELECT s.shardid, n.nodeport FROM pg_dist_shard s JOIN pg_dist_placement p USING (shardid)
                     JOIN pg_dist_node n USING (groupid) WHERE s.logicalrelid = 'w9'::regclass ORDER BY s.shardid"""
    with citus.connect(user="postgres") as su:
        before = su.execute(placement).fetchall()
        shard, source = before[0]
        target = next(p for p in ports if p != source)
        move = "SELECT citus_move_shard_placement(%s, '127.0.0.1', %s, '127.0.0.1', %s{})"
        for mode in ("", ", shard_transfer_mode => 'force_logical'"):
            with pytest.raises(psycopg.Error) as e:
                su.execute(move.format(mode), (shard, source, target))
            if not mode:
                assert "block_writes" in f"{e.value} {e.value.diag.message_hint}", e.value
        assert su.execute(placement).fetchall() == before
        # A split in its default mode (auto: logical replication) is refused before anything is split.
        lo, hi = su.execute("SELECT shardminvalue::bigint, shardmaxvalue::bigint FROM pg_dist_shard WHERE shardid = %s",
                            (shard,)).fetchone()
        node = su.execute("SELECT nodeid FROM pg_dist_node WHERE nodeport = %s", (source,)).fetchone()[0]
        with pytest.raises(psycopg.Error) as e:
            su.execute("SELECT citus_split_shard_by_split_points(%s, ARRAY[%s], ARRAY[%s, %s])",
                       (shard, str((lo + hi) // 2), node, node))
        assert "block_writes" in f"{e.value} {e.value.diag.message_hint}", e.value
        assert su.execute(placement).fetchall() == before
        assert su.execute("SELECT count(*) FROM w9").fetchone()[0] == 3000

        # A client writes and deletes while the shard moves with block_writes.
        stop, done, errors = threading.Event(), [0, 0], []

        def writer():
            try:
                with citus.connect() as w:
                    i = 0
                    while not stop.is_set():
                        w.execute("INSERT INTO w9 VALUES ('2025-01-01'::timestamptz + %s * interval '1 s', %s, 1, 1)", (i, f"s{i % 20}"))
                        done[0] += 1
                        if i % 3 == 0:
                            w.execute("DELETE FROM w9 WHERE time = '2025-01-01'::timestamptz + %s * interval '1 s'", (i,))
                            done[1] += 1
                        i += 1
            except psycopg.Error as e:
                errors.append(e)

        t = threading.Thread(target=writer)
        t.start()
        time.sleep(1)
        su.execute(move.format(", shard_transfer_mode => 'block_writes'"), (shard, source, target))
        time.sleep(1)
        stop.set()
        t.join(timeout=60)
        assert not t.is_alive() and not errors, errors
        assert done[0] > 0
        assert su.execute(placement).fetchall()[0] == (shard, target)
        assert su.execute("SELECT count(*) FROM w9").fetchone()[0] == 3000 + done[0] - done[1]
        # Now unbalanced (3 shards against 1): the rebalancer's default mode is refused too, then block_writes works.
        moved = su.execute(placement).fetchall()
        with pytest.raises(psycopg.Error) as e:
            su.execute("SELECT rebalance_table_shards('w9', rebalance_strategy => 'by_shard_count')")
        assert "block_writes" in f"{e.value} {e.value.diag.message_hint}", e.value
        assert su.execute(placement).fetchall() == moved
        su.execute("SELECT rebalance_table_shards('w9', rebalance_strategy => 'by_shard_count', shard_transfer_mode => 'block_writes')")
        assert su.execute(placement).fetchall() != moved
        assert su.execute("SELECT count(*) FROM w9").fetchone()[0] == 3000 + done[0] - done[1]
    with citus.connect() as c:
        assert len(set(citus.on_shards(c, "w9", SETTINGS))) == 1
        assert c.execute("SELECT count(*) FROM tsbucket.verify('w9')").fetchone()[0] == 0
        # Every shard's tail (the moved ones' on their new nodes) is drained.
        for i in range(20):
            c.execute("INSERT INTO w9 VALUES (now(), %s, 1, 1)", (f"s{i}",))
        wait_for(lambda: c.execute("SELECT tail_rows FROM tsbucket.stats('w9')").fetchone()[0] == 0, what="tails drained")


@pytest.mark.parametrize("seed", [1, 2])
def test_distributed_table_answers_like_a_distributed_heap(citus, seed):
    """test_differential's rows, writes, deletes, meta updates and queries on
    a tsbucket table and a heap table, both distributed by device: the same
    answers (or, where Citus cannot plan a query, the same refusal)."""
    import datetime as dt
    import random

    import psycopg
    from test_differential import COLUMNS, QUERIES, normalized, random_row, write

    rng = random.Random(seed)
    t0 = dt.datetime(2024, 3, 1, tzinfo=dt.timezone.utc)
    with citus.connect() as c:
        c.execute("SET timezone = 'UTC'")
        for t, using in (("cd_ts", "USING tsbucket"), ("cd_heap", "")):
            c.execute(f"DROP TABLE IF EXISTS {t}")
            c.execute(f"CREATE TABLE {t} ({COLUMNS}) {using}")
        c.execute("SELECT tsbucket.create_timeseries('cd_ts', 'time', meta_columns => ARRAY['device', 'site']::name[])")
        for t in ("cd_ts", "cd_heap"):
            c.execute("SELECT create_distributed_table(%s, 'device')", (t,))
        for _ in range(rng.randrange(6, 10)):
            # (A distribution column cannot be NULL.)
            rows = [(r[0], r[1] or "d0") + r[2:] for r in (random_row(rng, t0) for _ in range(rng.choice([1, 5, 50, 300])))]
            method = rng.choice(["single", "multi", "copy", "select"]) if len(rows) <= 50 else rng.choice(["multi", "copy", "select"])
            for t in ("cd_ts", "cd_heap"):
                write(c, t, rows, method)
            change = rng.random()
            for t in ("cd_ts", "cd_heap"):
                if change < 0.2:
                    c.execute(f"DELETE FROM {t} WHERE cnt % 7 = 1 OR temp > 40")
                elif change < 0.4:
                    # (Citus does not change a distribution column: site is the meta column to update.)
                    c.execute(f"UPDATE {t} SET site = {1 + seed % 3} WHERE device = 'd{1 + seed}'")
        last_point = "SELECT DISTINCT ON (device, site) device, site, time FROM {t} ORDER BY device, site, time DESC"
        checked = 0
        for q in QUERIES + [last_point]:
            try:
                a = normalized(c.execute(q.format(t="cd_ts")).fetchall())
            except psycopg.Error as e:
                with pytest.raises(psycopg.Error) as h:
                    c.execute(q.format(t="cd_heap"))
                assert h.value.sqlstate == e.sqlstate, f"seed {seed}: {q}: tsbucket {e}, heap {h.value}"
                continue
            b = normalized(c.execute(q.format(t="cd_heap")).fetchall())
            assert a == b, f"seed {seed}: {q}"
            checked += 1
        assert checked >= len(QUERIES) // 2


def test_worker_node_stopped_mid_copy(citus):
    """A worker node that stops in the middle of a COPY through the
    coordinator fails the COPY with a clear error; once it is back, the
    table holds exactly the rows committed before, none of the COPY's."""
    import threading

    import psycopg
    with citus.connect() as c:
        c.execute(f"CREATE TABLE w7 ({SCHEMA}) USING tsbucket")
        c.execute("SELECT tsbucket.create_timeseries('w7', 'time', 'sensor')")
        c.execute("SELECT create_distributed_table('w7', 'sensor')")
        c.execute(f"INSERT INTO w7 {rows_sql(1000)}")
    victim = citus.workers[1]
    error = []

    def copy():
        try:
            with citus.connect() as c, c.cursor().copy("COPY w7 FROM STDIN") as cp:
                for i in range(2_000_000):
                    cp.write_row((f"2024-06-01 00:00:00+00", f"s{i % 20}", i / 10, i % 100))
        except psycopg.Error as e:
            error.append(e)

    t = threading.Thread(target=copy)
    t.start()
    time.sleep(1.5)
    victim.stop("immediate")
    t.join(timeout=120)
    assert not t.is_alive()
    assert error, "the COPY should fail while a node is down"
    victim.start()
    with citus.connect() as c:
        def count():
            try:
                return c.execute("SELECT count(*) FROM w7").fetchone()[0]
            except psycopg.OperationalError:
                return None  # (the coordinator reconnecting to the node)
        wait_for(lambda: count() == 1000, what="the committed rows, and only them")
        assert c.execute("SELECT count(*) FROM w7 WHERE time >= '2024-06-01'").fetchone()[0] == 0


def test_fuzzer_on_distributed_tables(citus, capsys):
    """The randomized differential fuzzer with both sides distributed by their
    first meta column (tsbucket against a distributed heap): every answer,
    RETURNING list and SQLSTATE the same; the shards' plans are TsBucketScans
    (TSBUCKET_FUZZ_SECONDS / 2, as the other modes)."""
    import random
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fuzz"))
    import fuzz

    seconds = float(os.environ.get("TSBUCKET_FUZZ_SECONDS", "120")) / 2
    seed = int(os.environ.get("TSBUCKET_FUZZ_SEED") or random.randrange(1, 10**9))
    dsn = f"host=127.0.0.1 port={citus.coordinator.port} user=postgres dbname=test"
    fz = fuzz.Fuzzer(dsn, seed, plant=False, force_parallel=fuzz.prepare_database(dsn), distributed=True)
    lines = []
    found = fz.run(seconds, minimize=True, log=lines.append)
    with capsys.disabled():
        print(f"\n[{os.environ.get('TSBUCKET_PG', 'pg15')}] fuzz.py --distributed --seed {seed} --seconds {seconds:g}")
        print(fz.report())
        for line in lines:
            print(line)
    assert found is None, f"seed {seed}: {found}"
    assert fz.queries > 0 and sum(fz.paths.values()) > 0, f"seed {seed}: no TsBucketScan seen in the shards' plans"


def test_citus_table_operations(citus):
    """Citus's other ways to make and change tables: undistribute_table and
    alter_distributed_table keep the configuration and every row;
    create_distributed_table_concurrently (logical replication) and
    alter_table_set_access_method are refused with a hint; a reference table
    and a local table added to Citus's metadata work."""
    import psycopg
    with citus.connect() as c:
        for t in ("o1", "o2", "o3", "o4", "o5"):
            c.execute(f"CREATE TABLE {t} ({SCHEMA}) USING tsbucket")
            c.execute(f"SELECT tsbucket.create_timeseries('{t}', 'time', 'sensor', expire_after => interval '3650 days')")
        c.execute(f"INSERT INTO o1 {rows_sql(1000)}")
        with pytest.raises(psycopg.errors.FeatureNotSupported) as e:
            c.execute("SELECT create_distributed_table_concurrently('o1', 'sensor')")
        assert "create_distributed_table" in (e.value.diag.message_hint or ""), e.value
        assert c.execute("SELECT count(*) FROM o1").fetchone()[0] == 1000
        for t in ("o2", "o3"):
            c.execute(f"SELECT create_distributed_table('{t}', 'sensor')")
            c.execute(f"INSERT INTO {t} {rows_sql(1000)}")
        c.execute("SELECT undistribute_table('o2')")
        assert not c.execute("SELECT tsbucket._citus_table('o2')").fetchone()[0]
        c.execute("SELECT alter_distributed_table('o3', shard_count := 6, cascade_to_colocated := false)")
        assert c.execute("SELECT count(*) FROM pg_dist_shard WHERE logicalrelid = 'o3'::regclass").fetchone()[0] == 6
        for t in ("o2", "o3"):
            assert c.execute(f"SELECT count(*), sum(hum) FROM {t}").fetchone() == (1000, sum(i % 100 for i in range(1000)))
            assert c.execute(f"SELECT rows + tail_rows FROM tsbucket.stats('{t}')").fetchone()[0] == 1000
            assert c.execute(f"SELECT expire_after FROM tsbucket.timeseries WHERE table_name = '{t}'::regclass").fetchone()[0] is not None
        with pytest.raises(psycopg.errors.FeatureNotSupported) as e:
            c.execute("SELECT alter_table_set_access_method('o3', 'heap')")
        assert "INSERT ... SELECT" in (e.value.diag.message_hint or ""), e.value
        assert c.execute("SELECT count(*) FROM o3").fetchone()[0] == 1000
        c.execute("SELECT create_reference_table('o4')")
        c.execute("SELECT citus_add_local_table_to_metadata('o5')")
        for t in ("o4", "o5"):
            c.execute(f"INSERT INTO {t} {rows_sql(300)}")
            assert c.execute(f"SELECT count(*) FROM {t} WHERE sensor = 's3'").fetchone()[0] == 15


def test_distributed_partitioned_table(citus):
    """A time-series table partitioned by time and distributed by its meta
    column: every partition's shards are configured (those of partitions made
    later too), rows and answers are the heap's, each shard's plan
    aggregates inside its scans, settings reach every partition's shards, the
    workers drain them, and dropping a partition is the bulk expiry."""
    import json
    with citus.connect() as c:
        for t, using in (("pt", "USING tsbucket"), ("pt_heap", "")):
            c.execute(f"CREATE TABLE {t} ({SCHEMA}) PARTITION BY RANGE (time)")
            c.execute(f"CREATE TABLE {t}_01 PARTITION OF {t} FOR VALUES FROM ('2024-01-01') TO ('2024-01-02') {using}")
        c.execute("SELECT tsbucket.create_timeseries('pt', 'time', 'sensor')")
        for t in ("pt", "pt_heap"):
            c.execute(f"SELECT create_distributed_table('{t}', 'sensor')")
        for t, using in (("pt", "USING tsbucket"), ("pt_heap", "")):
            c.execute(f"CREATE TABLE {t}_02 PARTITION OF {t} FOR VALUES FROM ('2024-01-02') TO ('2024-01-03') {using}")
            c.execute(f"INSERT INTO {t} {rows_sql(150000)}")
            for i in range(20):
                c.execute(f"INSERT INTO {t} VALUES ('2024-01-02 20:00'::timestamptz + %s * interval '1 s', %s, 1, 1)", (i, f"s{i}"))
        leaves = c.execute("SELECT count(*) FROM pg_dist_shard WHERE logicalrelid::regclass::text LIKE 'pt\\_0_'").fetchone()[0]
        configured = sum(int(x) for x in citus.on_shards(c, "pt_01", "SELECT count(*) FROM tsbucket.catalog WHERE relid = %L::regclass")
                         + citus.on_shards(c, "pt_02", "SELECT count(*) FROM tsbucket.catalog WHERE relid = %L::regclass"))
        # (As many shards as the parent's colocation group has: an earlier test's split may have added one.)
        parent = c.execute("SELECT count(*) FROM pg_dist_shard WHERE logicalrelid = 'pt'::regclass").fetchone()[0]
        assert configured == leaves == 2 * parent > 0
        queries = ["SELECT count(*), sum(hum), min(time), max(time) FROM {t}",
                   "SELECT sensor, count(*), max(temp), avg(hum) FROM {t} WHERE time >= '2024-01-01 12:00' GROUP BY sensor ORDER BY sensor",
                   "SELECT date_trunc('hour', time) h, count(*), max(hum) FROM {t} GROUP BY h ORDER BY h",
                   "SELECT DISTINCT ON (sensor) sensor, time, temp FROM {t} ORDER BY sensor, time DESC"]
        for q in queries:
            assert c.execute(q.format(t="pt")).fetchall() == c.execute(q.format(t="pt_heap")).fetchall(), q
        # With statistics (the worker's ANALYZE may not have come yet), each shard's plan is partitionwise.
        c.execute("ANALYZE pt")
        plan = json.dumps(c.execute("EXPLAIN (VERBOSE, FORMAT JSON) " + queries[1].format(t="pt")).fetchone()[0])
        assert "TsBucketScan" in plan and "Vectorized Aggregation" in plan, plan
        assert c.execute("SELECT rows + tail_rows FROM tsbucket.stats('pt')").fetchone()[0] == 150020
        c.execute("SELECT tsbucket.alter_timeseries('pt', expire_after => interval '3650 days')")
        expiry = citus.on_shards(c, "pt_02", "SELECT expire_after FROM tsbucket.catalog WHERE relid = %L::regclass")
        assert set(expiry) == {"3650 days"}, expiry
        wait_for(lambda: c.execute("SELECT tail_rows FROM tsbucket.stats('pt')").fetchone()[0] == 0, what="tails drained")
        c.execute("DROP TABLE pt_01")
        assert c.execute("SELECT count(*) FROM pt").fetchone()[0] == 150020 - 86400


def test_renames_reach_every_shard(citus):
    """Renaming columns of a distributed time-series table (its time and meta
    columns included) renames them on every shard, whose configuration (and
    label, for pg_dump) follows; rows written after the renames land and the
    workers keep draining them."""
    with citus.connect() as c:
        c.execute(f"CREATE TABLE rn ({SCHEMA}) USING tsbucket")
        c.execute("SELECT tsbucket.create_timeseries('rn', 'time', 'sensor')")
        c.execute("SELECT create_distributed_table('rn', 'sensor')")
        c.execute(f"INSERT INTO rn {rows_sql(1000)}")
        c.execute("ALTER TABLE rn RENAME COLUMN time TO ts")
        c.execute("ALTER TABLE rn RENAME COLUMN temp TO temperature")
        c.execute("ALTER TABLE rn ADD COLUMN note text")
        c.execute("INSERT INTO rn (ts, sensor, temperature, hum, note) VALUES (now(), 's1', 1, 1, 'after')")
        assert c.execute("SELECT count(*), count(note), max(temperature) FROM rn").fetchone() == (1001, 1, 99.9)
        labels = citus.on_shards(c, "rn", "SELECT label::json->>'time_column' FROM pg_seclabel WHERE objoid = %L::regclass AND provider = 'tsbucket'")
        assert set(labels) == {"ts"}, labels
        wait_for(lambda: c.execute("SELECT tail_rows FROM tsbucket.stats('rn')").fetchone()[0] == 0, what="tails drained")
        assert c.execute("SELECT count(*) FROM rn WHERE ts > now() - interval '1 hour'").fetchone()[0] == 1


def test_large_buckets_split_on_every_shard(citus):
    """Buckets longer than a TOAST chunk, written on the shards by a COPY
    through the coordinator, keep their whole chunks in TOAST and the rest
    inline in each worker's store rows (payload_rest), and read back bit for
    bit."""
    import datetime
    import math
    start = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)
    rows = [(start + datetime.timedelta(seconds=i // 4), f"s{i % 4}", math.sin(i) * 100, i) for i in range(3600)]
    with citus.connect() as c:
        c.execute(f"CREATE TABLE sp ({SCHEMA}) USING tsbucket")
        c.execute("SELECT tsbucket.create_timeseries('sp', 'time', 'sensor')")
        c.execute("SELECT create_distributed_table('sp', 'sensor')")
        with c.cursor().copy("COPY sp FROM STDIN") as copy:
            for r in rows:
                copy.write_row(r)
        assert c.execute("SELECT time, sensor, temp, hum FROM sp ORDER BY hum").fetchall() == rows
        assert c.execute("SELECT count(*) FROM tsbucket.verify('sp')").fetchone()[0] == 0
    split = 0
    for w in citus.workers:
        with w.connect() as wc:
            # (Citus hides shards from pg_class on workers; the catalog names them.)
            for (store,) in wc.execute("SELECT store_relid::regclass::text FROM tsbucket.catalog WHERE relid::regclass::text LIKE 'sp\\_%'").fetchall():
                split += wc.execute(f"SELECT count(*) FROM {store} WHERE payload_rest IS NOT NULL AND length(payload) % 1996 = 0").fetchone()[0]
    assert split >= 4, split
