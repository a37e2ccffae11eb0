"""Differential test: the same random rows, written to a tsbucket table and a
heap table in random batch sizes, orders and methods (INSERT, multi-row
INSERT, INSERT ... SELECT, COPY), with deletes and meta updates in between;
every query of a fixed set must answer the same on both. Run as users run:
a non-superuser owner, READ COMMITTED, the worker compacting every second,
and again after ANALYZE (whose statistics change the plans) and with parallel
plans."""

import datetime as dt
import decimal
import json
import random
import uuid

import pytest

from conftest import Cluster, problems

COLUMNS = """time timestamptz NOT NULL, device text, site int, temp float8, hum float4, cnt int8,
             small int2, ok bool, note text, price numeric, tags text[], doc jsonb, id uuid, day date,
             span interval, raw bytea"""
NAMES = "time, device, site, temp, hum, cnt, small, ok, note, price, tags, doc, id, day, span, raw"

QUERIES = [
    "SELECT count(*) FROM {t}",
    "SELECT * FROM {t} ORDER BY time, device NULLS FIRST, site NULLS FIRST, cnt NULLS FIRST, temp NULLS FIRST, note NULLS FIRST",
    "SELECT device, site, count(*), sum(temp), avg(hum), min(time), max(time), sum(cnt), bool_and(ok) "
    "FROM {t} GROUP BY device, site ORDER BY device NULLS FIRST, site NULLS FIRST",
    "SELECT count(*), sum(price), count(DISTINCT note), count(DISTINCT doc::text), count(DISTINCT id) FROM {t}",
    "SELECT date_trunc('hour', time) h, count(*), max(temp) FROM {t} WHERE temp > 0 GROUP BY h ORDER BY h",
    "SELECT time, device, temp, lag(temp) OVER (PARTITION BY device ORDER BY time, cnt) FROM {t} "
    "WHERE device IN ('d1', 'd2') ORDER BY device, time, cnt",
    "SELECT count(*) FROM {t} WHERE time >= '2024-03-01' AND time < '2024-03-02' AND device = 'd3'",
    "SELECT tags, doc, raw, span, day FROM {t} WHERE cnt % 17 = 3 ORDER BY time, cnt",
    "SELECT count(*) FROM {t} WHERE temp IS NULL OR note IS NULL OR tags IS NULL",
    # Bucket pruning by per-column min/max (NaN, infinities, -0.0 and NULLs in the data).
    "SELECT count(*), sum(cnt) FROM {t} WHERE temp > 10 AND temp <= 45.5 AND small >= 0",
    "SELECT count(*) FROM {t} WHERE temp > 1e10 OR hum < 1",
    "SELECT count(*) FROM {t} WHERE cnt = 3 OR (small BETWEEN -100 AND 100 AND temp >= 0)",
    # Access paths: IN lists through the series index, time bounds through the
    # window index, merges in time order with a LIMIT, joins on the meta column.
    "SELECT device, site, count(*), sum(cnt) FROM {t} WHERE device IN ('d1', 'd3', 'd3', NULL) AND site = ANY (ARRAY[1, 2]) "
    "GROUP BY device, site ORDER BY device, site",
    "SELECT count(*), max(time) FROM {t} WHERE time > '2024-03-02 12:00' AND time <= '2024-03-04'",
    "SELECT time, device, cnt FROM {t} ORDER BY time DESC, device NULLS FIRST, cnt NULLS FIRST LIMIT 25",
    "SELECT time, device, cnt FROM {t} WHERE time >= '2024-03-02' ORDER BY time, device NULLS FIRST, cnt NULLS FIRST LIMIT 25",
    "SELECT date_trunc('minute', time) m, count(*), max(cnt) FROM {t} WHERE time < '2024-03-03' GROUP BY m ORDER BY m DESC LIMIT 7",
    "SELECT v.d, count(x.*), sum(x.cnt) FROM (VALUES ('d1'), ('d2'), ('zz')) v(d) LEFT JOIN {t} x ON x.device = v.d "
    "GROUP BY v.d ORDER BY v.d",
    # Aggregated inside the scan (partial states per bucket and group).
    "SELECT device, site, count(*), count(temp), sum(temp), avg(temp), min(temp), max(temp), avg(hum), min(hum), "
    "max(small), sum(small), avg(small), min(time), max(time), min(day), max(day) FROM {t} "
    # avg's running sum of squares overflows on 1e300, an error or not depending on
    # whether an infinity came earlier in the order of addition (README, Limits).
    "WHERE temp IS NULL OR temp < 1e100 GROUP BY device, site ORDER BY device NULLS FIRST, site NULLS FIRST",
    "SELECT date_trunc('hour', time) h, device, count(*), max(temp), min(cnt) FROM {t} WHERE temp > 0 AND small < 50 "
    "GROUP BY h, device ORDER BY h, device NULLS FIRST",
    "SELECT date_bin('7 minutes', time, '2024-03-01'), count(*), avg(small) FROM {t} WHERE cnt % 3 = 0 GROUP BY 1 ORDER BY 1",
    # first / last by time (random microsecond times: no ties), any column type.
    "SELECT device, site, tsbucket.first(temp, time), tsbucket.last(note, time), tsbucket.first(tags, time), "
    "tsbucket.last(price, time), tsbucket.first(device, time), tsbucket.last(doc, time) FROM {t} "
    "GROUP BY device, site ORDER BY device NULLS FIRST, site NULLS FIRST",
    "SELECT date_trunc('hour', time) h, tsbucket.first(cnt, time), tsbucket.last(raw, time), tsbucket.last(time, time) "
    "FROM {t} WHERE small > 0 GROUP BY h ORDER BY h",
]


@pytest.fixture(scope="module")
def cluster():
    c = Cluster(worker=True, extra_conf=["tsbucket.worker_interval = 1"])
    with c.connect() as conn:
        conn.execute("CREATE ROLE diff_owner")
        conn.execute("GRANT CREATE ON SCHEMA public TO diff_owner")
    yield c
    c.destroy()


def random_row(rng, t0):
    def maybe(v, p=0.1):
        return None if rng.random() < p else v

    return (
        t0 + dt.timedelta(seconds=rng.randrange(0, 5 * 86400), microseconds=rng.randrange(0, 1000000)),
        maybe(rng.choice(["d1", "d2", "d3", "d4", "d5", "d6"]), 0.05),
        maybe(rng.randrange(1, 4), 0.05),
        maybe(rng.choice([round(rng.uniform(-50, 50), 1), float(rng.randrange(0, 100)), rng.random(), -0.0,
                          float("inf"), 1e300])),
        maybe(round(rng.uniform(0, 100), 2)),
        maybe(rng.choice([rng.randrange(-2**63, 2**63), rng.randrange(0, 1000)])),
        maybe(rng.randrange(-32768, 32768)),
        maybe(rng.random() < 0.5),
        maybe(rng.choice(["", "ok", "warn", "fault " * rng.randrange(1, 50)])),
        maybe(decimal.Decimal(rng.randrange(-10**12, 10**12)) / 1000),
        maybe([rng.choice(["a", "b", None]) for _ in range(rng.randrange(0, 4))]),
        maybe(json.dumps({"k": rng.randrange(10), "v": [rng.random(), None]})),
        maybe(uuid.UUID(int=rng.getrandbits(128))),
        maybe(dt.date(2024, 1, 1) + dt.timedelta(days=rng.randrange(-10**5, 10**5))),
        maybe(dt.timedelta(days=rng.randrange(0, 1000), seconds=rng.randrange(0, 86400))),
        maybe(bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 20)))),
    )


def write(conn, table, rows, method):
    ph = ", ".join(["%s"] * 16)
    if method == "single":
        for r in rows:
            conn.execute(f"INSERT INTO {table} ({NAMES}) VALUES ({ph})", r)
    elif method == "multi":
        values = ", ".join([f"({ph})"] * len(rows))
        conn.execute(f"INSERT INTO {table} ({NAMES}) VALUES {values}", [v for r in rows for v in r])
    elif method == "copy":
        with conn.cursor().copy(f"COPY {table} ({NAMES}) FROM STDIN") as copy:
            for r in rows:
                copy.write_row(r)
    elif method == "select":
        conn.execute("DROP TABLE IF EXISTS staging")
        conn.execute(f"CREATE TEMP TABLE staging ({COLUMNS})")
        with conn.cursor().copy(f"COPY staging ({NAMES}) FROM STDIN") as copy:
            for r in rows:
                copy.write_row(r)
        conn.execute(f"INSERT INTO {table} SELECT * FROM staging ORDER BY random()")


def normalized(rows):
    """Float aggregates depend on summation order, which differs between the
    tables; compare them to 12 significant digits. Everything else is exact."""

    def norm(v):
        if isinstance(v, float) and v == v and abs(v) != float("inf"):
            return float(f"{v:.12g}")
        return v

    return [tuple(norm(v) for v in r) for r in rows]


@pytest.mark.parametrize("seed, metas, partitioned", [(1, 2, False), (2, 3, False), (3, 2, False), (4, 3, False),
                                                      (5, 2, True), (6, 3, True)])
def test_tsbucket_answers_like_heap(cluster, seed, metas, partitioned):
    """partitioned: the tsbucket side a table partitioned by time (configured
    on the parent, two ranges and a default partition made after it)."""
    rng = random.Random(seed)
    t0 = dt.datetime(2024, 3, 1, tzinfo=dt.timezone.utc)
    with cluster.connect() as c:
        c.execute("SET ROLE diff_owner")
        c.execute("SET timezone = 'UTC'")
        for t, using in (("diff_ts", "PARTITION BY RANGE (time)" if partitioned else "USING tsbucket"), ("diff_heap", "")):
            c.execute(f"DROP TABLE IF EXISTS {t}")
            c.execute(f"CREATE TABLE {t} ({COLUMNS}) {using}")
        meta_columns = ["device", "site", "ok"][:metas]
        c.execute("SELECT tsbucket.create_timeseries('diff_ts', 'time', meta_columns => %s::name[], "
                  "granularity => %s)", (meta_columns, rng.choice(["seconds", "minutes", "hours"])))
        if partitioned:
            c.execute("CREATE TABLE diff_ts_a PARTITION OF diff_ts FOR VALUES FROM ('2024-03-01') TO ('2024-03-03') USING tsbucket")
            c.execute("CREATE TABLE diff_ts_b PARTITION OF diff_ts FOR VALUES FROM ('2024-03-03') TO ('2024-03-05') USING tsbucket")
            c.execute("CREATE TABLE diff_ts_d PARTITION OF diff_ts DEFAULT USING tsbucket")
        c.execute("SET tsbucket.bucket_max_count = %s" % rng.choice([10, 100, 1000]))
        for _ in range(rng.randrange(8, 16)):
            rows = [random_row(rng, t0) for _ in range(rng.choice([1, 5, 50, 300, 1500]))]
            if rng.random() < 0.5:
                rows.sort(key=lambda r: r[0])
            method = rng.choice(["single", "multi", "copy", "select"]) if len(rows) <= 50 else rng.choice(["multi", "copy", "select"])
            in_tx = rng.random() < 0.3
            if in_tx:
                c.execute("BEGIN")
            for t in ("diff_ts", "diff_heap"):
                write(c, t, rows, method)
            if in_tx:
                c.execute("COMMIT")
            change = rng.random()
            # Chains of UPDATEs of one meta column after another: each must read the
            # rows' current meta values (every bucket version has its own id).
            chain = [f"UPDATE {{t}} SET site = {rng.randrange(1, 4)} WHERE device = 'd{rng.randrange(1, 7)}'",
                     f"UPDATE {{t}} SET device = 'd{rng.randrange(1, 7)}' WHERE site = {rng.randrange(1, 4)}"]
            if metas == 3:
                chain += ["UPDATE {t} SET ok = NOT ok WHERE device = 'd2'",
                          "UPDATE {t} SET site = site + 1, ok = true WHERE ok IS NULL AND site < 3"]
            rng.shuffle(chain)
            for t in ("diff_ts", "diff_heap"):
                if change < 0.15:
                    c.execute(f"DELETE FROM {t} WHERE cnt % 7 = 1 OR temp > 40")
                elif change < 0.25:
                    c.execute(f"UPDATE {t} SET device = 'moved' WHERE device = 'd4' AND site = 2")
                elif change < 0.3:
                    c.execute(f"DELETE FROM {t} WHERE device = 'd5'")
                elif change < 0.6:
                    for u in chain:
                        c.execute(u.format(t=t))
        # The last row of each series (a skip scan of the series index).
        last_point = (f"SELECT DISTINCT ON ({', '.join(meta_columns)}) {', '.join(meta_columns)}, time FROM {{t}} "
                      f"ORDER BY {', '.join(meta_columns)}, time DESC")
        # Plain plans, after ANALYZE, then parallel plans wherever the planner
        # can make them (costs zeroed): workers share out the buckets.
        for analyzed, parallel in ((False, False), (True, False), (True, True)):
            if analyzed:
                c.execute("ANALYZE diff_ts")
                c.execute("ANALYZE diff_heap")
            if parallel:
                for setting in ("parallel_setup_cost", "parallel_tuple_cost", "min_parallel_table_scan_size"):
                    c.execute(f"SET {setting} = 0")
            for q in QUERIES + [last_point]:
                a = normalized(c.execute(q.format(t="diff_ts")).fetchall())
                b = normalized(c.execute(q.format(t="diff_heap")).fetchall())
                assert a == b, f"seed {seed}, partitioned {partitioned}, analyzed {analyzed}, parallel {parallel}: {q}"
        assert problems(c, "diff_ts") == []
