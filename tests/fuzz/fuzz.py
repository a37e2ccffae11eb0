#!/usr/bin/env python3
"""tsbucket's randomized differential fuzzer.

Each round makes a pair of tables with the same random shape, one `USING
tsbucket` (random meta columns, window and bucket size) and one heap table,
and drives both with the same random work: rows written every way clients
write them (single INSERTs, psycopg executemany, multi-row VALUES, COPY,
INSERT ... SELECT, inside and outside transactions, committed and rolled
back), DELETEs and meta UPDATEs with RETURNING, ADD and DROP COLUMN,
compaction, VACUUM and ANALYZE, while the background worker compacts every
second. Between the writes it runs random queries over every TsBucketScan
path (grammar.py), in random session settings (parallel plans forced,
vectorised aggregation off, generic plans with parameters, hash or sort
aggregation), and compares each answer with the heap table's (check.py).
Errors must match by SQLSTATE.

It prints the seed, then, from EXPLAIN, how often each path was taken. On
a mismatch it prints what differed and, with --minimize, a shortened SQL
script that reproduces it.

  tests/fuzz/fuzz.py --pg pg15 --seconds 120 [--seed N] [--minimize] [--plant] [--row-by-row]

--row-by-row writes every row in a statement (and, outside BEGIN, a
transaction) of its own, as devices do: rows wait in the table's tail, and
most queries run before the worker drains it (it counts how many did).

--partitioned makes the time-series side a table partitioned by time;
--distributed (with --dsn of a Citus coordinator) distributes both tables by
their first meta column, so both sides go through Citus's planner.

--plant switches on a planted bug (debug builds only: an off-by-one in the
time-pruning bound) to show the fuzzer finds it; the run then succeeds when
a mismatch is found. Without --dsn the fuzzer starts its own cluster
(tsbucket preloaded, the worker every second, tables owned by a
non-superuser role).
"""

import argparse
import dataclasses
import datetime as dt
import json
import os
import random
import re
import sys
import time
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "integration"))

import psycopg  # noqa: E402
from psycopg.types.string import TextLoader  # noqa: E402

import check  # noqa: E402
import model  # noqa: E402
from grammar import Out, QueryGen  # noqa: E402

OWNER = "fuzz_owner"
TEXT_TYPES = ["bool", "int2", "int4", "int8", "float4", "float8", "numeric", "text", "varchar", "bpchar", "name",
              "timestamp", "timestamptz", "date", "interval", "xid", "cid", "tid", "oid", "json", "jsonb", "bytea"]
PATHS = ["series index", "window index", "seq scan", "time order", "series order", "last point",
         "vectorized aggregation", "vectorized filter", "header answers", "parallel", "document keys", "document numbers"]


class Mismatch(Exception):
    pass


def connect(dsn, plant):
    conn = psycopg.connect(dsn, autocommit=True)
    for t in TEXT_TYPES:
        conn.adapters.register_loader(t, TextLoader)
    conn.execute("SET timezone = 'UTC'")
    conn.execute("SET statement_timeout = '60s'")
    conn.execute("SET lock_timeout = '30s'")
    if plant:
        conn.execute("SET tsbucket.debug_plant_bug = 1")
    conn.execute(f"SET ROLE {OWNER}")
    return conn


class Side:
    """One table and the connection that writes and reads it."""

    def __init__(self, conn, table):
        self.conn = conn
        self.table = table
        self.savepoint = False

    def checkable(self, run):
        """run() ((rows, error)), inside a transaction under a savepoint that
        is kept when it fails, so that back_before() can look into the
        failure with the rows the statement saw."""
        self.savepoint = self.conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
        if self.savepoint:
            self.conn.execute("SAVEPOINT fuzz_statement")
        result = run()
        if self.savepoint and result[1] is None:
            self.conn.execute("RELEASE SAVEPOINT fuzz_statement")
            self.savepoint = False
        return result

    def back_before(self):
        """After a statement checkable() ran failed: back to before it, in a transaction."""
        if self.savepoint:
            self.conn.execute("ROLLBACK TO SAVEPOINT fuzz_statement")
            self.savepoint = False

    def run(self, sql, params=None, prepare=None, fetch=True):
        """(rows or rowcount, None) or (None, sqlstate)."""
        try:
            cur = self.conn.cursor()
            cur.execute(sql.format(t=self.table), params, prepare=prepare)
            rows = cur.fetchall() if fetch and cur.description else None
            return (rows if rows is not None else cur.rowcount), None
        except psycopg.Error as e:
            return None, (e.sqlstate or "?????", str(e).splitlines()[0])


class Round:
    def __init__(self, fz, number):
        self.fz = fz
        self.number = number
        self.rng = random.Random(f"{fz.seed}:{number}")
        rng = self.rng
        self.schema = model.new_schema(rng, need_meta=fz.distributed)
        self.schema.span_seconds = rng.choice([3600, 86400, 30 * 86400, 60, 600])
        self.times = model.TimeGen(rng, self.schema.span_seconds)
        self.max_count = rng.choice([10, 100, 1000, 1000])
        self.trace = []
        self.in_tx = False

    # -- setup ------------------------------------------------------------

    def setup_sql(self, ts_table, heap_table):
        """The statements that make the round's tables: (side, SQL), side
        "ts" or "heap" (create() runs them, the minimizer's script prints them)."""
        s = self.schema
        cols = ", ".join(f"{c.name} {c.type}{' NOT NULL' if c.role == 'time' else ''}" for c in s.columns)
        metas = "ARRAY[" + ", ".join(f"'{m}'" for m in s.metas) + "]::name[]"
        span = {3600: "granularity => 'seconds'", 86400: "granularity => 'minutes'",
                30 * 86400: "granularity => 'hours'"}.get(s.span_seconds)
        if span is None:
            span = f"bucket_max_span => interval '{s.span_seconds} seconds', bucket_rounding => interval '{s.span_seconds} seconds'"
        partitioned = self.fz.partitioned
        out = [("ts", f"CREATE TABLE {ts_table} ({cols}){' PARTITION BY RANGE (time)' if partitioned else ' USING tsbucket'}"),
               ("heap", f"CREATE TABLE {heap_table} ({cols})")]
        meta_arg = f", meta_columns => {metas}" if s.metas else ""
        out.append(("ts", f"SELECT tsbucket.create_timeseries('{ts_table}', 'time'{meta_arg}, {span})"))
        if self.fz.distributed:
            # Both sides distributed by the first meta column, as MongoDB shards by metaField: the same
            # Citus planner and refusals on both, so answers and errors compare.
            out += [(side, f"SELECT create_distributed_table('{t}', '{s.metas[0]}')")
                    for side, t in (("ts", ts_table), ("heap", heap_table))]
        if partitioned:
            # Two partitions over the round's main range (configured as they are made), the rest in a default one.
            mid = model.T0 + dt.timedelta(seconds=self.times.spread // 2)
            end = model.T0 + dt.timedelta(seconds=self.times.spread)
            for i, (lo, hi) in enumerate(((model.T0, mid), (mid, end))):
                out.append(("ts", f"CREATE TABLE {ts_table}_p{i} PARTITION OF {ts_table} "
                                  f"FOR VALUES FROM ('{lo.isoformat()}') TO ('{hi.isoformat()}') USING tsbucket"))
            out.append(("ts", f"CREATE TABLE {ts_table}_pd PARTITION OF {ts_table} DEFAULT USING tsbucket"))
        out.append(("ts", f"SET tsbucket.bucket_max_count = {self.max_count}"))
        return out

    def create(self, ts, heap):
        for side in (ts, heap):
            # psycopg forgets its prepared statements (whose result types may change with the new table) when it
            # sees a DROP, but only the first time it sees that statement's text: a text of this round's own.
            side.conn.execute(f"DROP TABLE IF EXISTS {side.table} /* round {self.number} */")
        for side, sql in self.setup_sql(ts.table, heap.table):
            (ts if side == "ts" else heap).conn.execute(sql)

    # -- writes -----------------------------------------------------------

    def both(self, ts, heap, entry, compare_results=True):
        """Applies one trace entry to both tables; results and errors must agree."""
        self.trace.append(entry)
        a = apply(ts, entry)
        b = heap.checkable(lambda: apply(heap, entry)) if entry[0] == "exec" else apply(heap, entry)
        if entry[0] == "exec" and a[1] and b[1] and a[1][0] != b[1][0]:
            heap.back_before()
            if cast_order_dependent(None, heap, entry[1], a[1], b[1]):
                # An UPDATE or DELETE whose condition casts document fields that
                # fail on several rows differently: each side raises the first it
                # meets (both statements fail, so neither table changes; a
                # transaction around them is rolled back on both sides).
                self.fz.cast_order += 1
                self.fz.just_tolerated = True
                return a[1]
        if (a[1] is None) != (b[1] is None) or (a[1] and a[1][0] != b[1][0]):
            raise Mismatch(f"{entry[0]} {entry[1][:300]}: tsbucket {a[1] or 'ok'}, heap {b[1] or 'ok'}")
        if a[1] is None and compare_results:
            ra, rb = a[0], b[0]
            if isinstance(ra, list) and isinstance(rb, list):
                if Counter(map(tuple, ra)) != Counter(map(tuple, rb)):
                    raise Mismatch(f"{entry[1][:300]}: RETURNING differs: {sorted(map(tuple, ra), key=repr)[:5]} vs {sorted(map(tuple, rb), key=repr)[:5]}")
            elif ra != rb:
                raise Mismatch(f"{entry[1][:300]}: {ra} rows vs the heap's {rb}")
        return a[1]

    def insert(self, ts, heap):
        rng = self.rng
        s = self.schema
        n = rng.choice([1, 1, 2, 5, 20, 50] if self.fz.row_by_row else [1, 1, 2, 5, 20, 100, 400, 1500])
        rows = [model.row(rng, s, self.times) for _ in range(n)]
        if rng.random() < 0.5:
            rows.sort(key=lambda r: str(r[0]))
        names = ", ".join(s.names())
        ph = ", ".join(["%s"] * len(s.columns))
        method = rng.choice(["single", "many", "multi", "copy", "select"] if n <= 50 else ["many", "multi", "copy", "select"])
        if self.fz.row_by_row:
            method = "single"
        if method == "single":
            for r in rows:
                self.both(ts, heap, ("exec", f"INSERT INTO {{t}} ({names}) VALUES ({ph})", r))
        elif method == "many":
            self.both(ts, heap, ("many", f"INSERT INTO {{t}} ({names}) VALUES ({ph})", rows))
        elif method == "multi":
            values = ", ".join([f"({ph})"] * n)
            ret = " RETURNING *" if rng.random() < 0.2 else ""
            self.both(ts, heap, ("exec", f"INSERT INTO {{t}} ({names}) VALUES {values}{ret}", [v for r in rows for v in r]))
        elif method == "copy":
            self.both(ts, heap, ("copy", names, rows))
        else:
            self.both(ts, heap, ("select", names, rows))

    def delete(self, ts, heap):
        rng = self.rng
        gen = QueryGen(rng, self.schema, self.times, params=rng.random() < 0.3)
        terms = gen.where(2) or [gen.term()]
        where = " AND ".join(f"({t})" for t, _ in terms)
        ret = " RETURNING *" if rng.random() < 0.5 else ""
        self.both(ts, heap, ("exec", f"DELETE FROM {{t}} WHERE {where}{ret}", [p for _, ps in terms for p in ps]))

    def update(self, ts, heap):
        rng = self.rng
        metas = self.schema.meta_columns()
        if not metas:
            return
        gen = QueryGen(rng, self.schema, self.times, params=False)
        # (Citus never changes a distribution column.)
        targets = [m for m in metas if not (self.fz.distributed and m.name == self.schema.metas[0])]
        if not targets:
            return
        target = rng.choice(targets)
        if target.name == "site" and rng.random() < 0.3:
            new = "site + 1"
        else:
            new = model.lit(model.constant(rng, target, self.times), target.type)
        terms = [gen.meta_term(rng.choice(metas)) for _ in range(rng.randrange(1, 3))]
        where = " AND ".join(f"({t})" for t, _ in terms)
        ret = rng.choice(["", " RETURNING *", f" RETURNING time, {target.name}"])
        self.both(ts, heap, ("exec", f"UPDATE {{t}} SET {target.name} = {new} WHERE {where}{ret}", [p for _, ps in terms for p in ps]))

    def ddl(self, ts, heap):
        rng = self.rng
        s = self.schema
        droppable = [c for c in s.measurements() if c.name not in ("dev", "site")]
        if rng.random() < 0.6 or len(droppable) < 4:
            s.added += 1
            typ = rng.choice(["float8", "int4", "text", "bool", "numeric", "timestamptz", "int2", "jsonb"])
            col = model.Column(f"x{s.added}", typ)
            default = ""
            if rng.random() < 0.5:
                default = " DEFAULT " + model.lit(model.constant(rng, col, self.times), typ)
            self.both(ts, heap, ("exec", f"ALTER TABLE {{t}} ADD COLUMN {col.name} {typ}{default}", []), compare_results=False)
            s.columns.append(col)
        else:
            col = rng.choice(droppable)
            self.both(ts, heap, ("exec", f"ALTER TABLE {{t}} DROP COLUMN {col.name}", []), compare_results=False)
            s.columns.remove(col)

    def maintenance(self, ts, heap):
        r = self.rng.random()
        if r < 0.6:
            self.trace.append(("compact",))
            ts.conn.execute(f"SELECT * FROM tsbucket.compact('{ts.table}')")
        elif r < 0.8:
            for side in (ts, heap):
                side.conn.execute(f"VACUUM {side.table}")
        else:
            for side in (ts, heap):
                side.conn.execute(f"ANALYZE {side.table}")

    def transaction(self, ts, heap, word):
        self.both(ts, heap, ("tx", word, None), compare_results=False)

    # -- queries ----------------------------------------------------------

    def settings(self):
        """Session settings for one query: the plans users get, and the ones to force."""
        rng = self.rng
        sets = {}
        generic = False
        if rng.random() < 0.25:
            sets.update(parallel_setup_cost=0, parallel_tuple_cost=0, min_parallel_table_scan_size=0,
                        max_parallel_workers_per_gather=2)
            if rng.random() < 0.3:
                sets[self.fz.force_parallel] = "on"
        if rng.random() < 0.15:
            sets["tsbucket.vectorized_aggregation"] = "off"
        if rng.random() < 0.2:
            sets["plan_cache_mode"] = "force_generic_plan"
            generic = True
        if rng.random() < 0.1:
            sets[rng.choice(["enable_hashagg", "enable_sort", "enable_nestloop"])] = "off"
        # (Citus does not send a session's time zone to the shards' connections: a pushed-down
        # date_trunc would run in UTC there, and in the session's zone where Citus pulls rows up.)
        if rng.random() < 0.1 and not self.fz.distributed:
            sets["timezone"] = "'America/New_York'"
        return sets, generic

    def query(self, ts, heap):
        if self.fz.row_by_row and ts.conn.execute(f"SELECT tail_rows > 0 FROM tsbucket.stats('{ts.table}')").fetchone()[0]:
            self.fz.with_tail += 1
        sets, generic = self.settings()
        q = QueryGen(self.rng, self.schema, self.times, params=generic or self.rng.random() < 0.1).query()
        q.citus = self.fz.distributed
        self.fz.queries += 1
        run_query(self.fz, ts, heap, q, sets, generic, coverage=True, trace=self.trace)

    # -- the round --------------------------------------------------------

    def play(self, ts, heap, deadline):
        rng = self.rng
        self.create(ts, heap)
        self.fz.rounds += 1
        for _ in range(rng.randrange(2, 6)):
            self.insert(ts, heap)
        steps = rng.randrange(30, 120)
        for _ in range(steps):
            if time.time() > deadline:
                break
            r = rng.random()
            self.fz.just_tolerated = False
            if not self.in_tx and r < 0.06:
                self.transaction(ts, heap, "BEGIN")
                self.in_tx = True
            elif self.in_tx and r < 0.12:
                self.transaction(ts, heap, rng.choice(["COMMIT", "COMMIT", "ROLLBACK"]))
                self.in_tx = False
            elif r < 0.7:
                self.query(ts, heap)
            elif r < 0.85:
                self.insert(ts, heap)
            elif r < 0.92:
                self.delete(ts, heap)
            elif r < 0.96:
                self.update(ts, heap)
            elif r < 0.98 and not self.in_tx:
                self.ddl(ts, heap)
            elif not self.in_tx:
                self.maintenance(ts, heap)
            failed = [side.conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR for side in (ts, heap)]
            if any(failed):
                # Both sides failed alike inside the transaction: it is over for both.
                if not all(failed) and not self.fz.just_tolerated:
                    raise Mismatch("one side's transaction failed, the other's did not")
                self.transaction(ts, heap, "ROLLBACK")
                self.in_tx = False
        if self.in_tx:
            self.transaction(ts, heap, "COMMIT")
            self.in_tx = False
        problems = ts.conn.execute(f"SELECT bucket_id, problem FROM tsbucket.verify('{ts.table}')").fetchall()
        if problems:
            raise Mismatch(f"tsbucket.verify: {problems[:5]}")


def apply(side, entry):
    kind = entry[0]
    conn = side.conn
    if kind == "exec":
        return side.run(entry[1], entry[2])
    if kind == "tx":
        return side.run(entry[1], fetch=False)
    if kind == "compact":
        if side.table.endswith("_ts"):
            return side.run("SELECT * FROM tsbucket.compact('{t}')", fetch=False)
        return None, None
    try:
        if kind == "many":
            with conn.cursor() as cur:
                cur.executemany(entry[1].format(t=side.table), entry[2])
            return len(entry[2]), None
        if kind == "copy":
            with conn.cursor().copy(f"COPY {side.table} ({entry[1]}) FROM STDIN") as copy:
                for r in entry[2]:
                    copy.write_row(r)
            return len(entry[2]), None
        if kind == "select":
            conn.execute("DROP TABLE IF EXISTS pg_temp.staging")
            conn.execute(f"CREATE TEMP TABLE staging (LIKE {side.table})")
            with conn.cursor().copy(f"COPY staging ({entry[1]}) FROM STDIN") as copy:
                for r in entry[2]:
                    copy.write_row(r)
            cur = conn.execute(f"INSERT INTO {side.table} ({entry[1]}) SELECT {entry[1]} FROM staging ORDER BY random()")
            return cur.rowcount, None
    except psycopg.Error as e:
        return None, (e.sqlstate or "?????", str(e).splitlines()[0])
    raise AssertionError(kind)


def apply_settings(sides, sets):
    for side in sides:
        for k, v in sets.items():
            side.conn.execute(f"SET {k} = {v}")


def reset_settings(sides, sets):
    for side in sides:
        if side.conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR:
            continue  # the abort undoes the SETs
        for k in sets:
            side.conn.execute(f"RESET {k}")
        side.conn.execute("SET timezone = 'UTC'")


def paths_of(plan_json):
    """The TsBucketScan paths an EXPLAIN (FORMAT JSON) plan took."""
    found = set()

    def walk(node):
        if node.get("Node Type") == "Gather" or node.get("Node Type") == "Gather Merge":
            found.add("parallel")
        if node.get("Custom Plan Provider") == "TsBucketScan":
            access = node.get("Bucket Access", "")
            if "series and time order" in access:
                found.add("series order")
            elif "time order" in access:
                found.add("time order")
            elif "Last Point" in access:
                found.add("last point")
            elif access.startswith("Series Index"):
                found.add("series index")
            elif access.startswith("Window Index"):
                found.add("window index")
            elif "Seq Scan" in access:
                found.add("seq scan")
            if "Vectorized Aggregation" in node:
                found.add("vectorized aggregation")
            if "Vectorized Filter" in node:
                found.add("vectorized filter")
            if node.get("Buckets Answered from Headers", 0) > 0:
                found.add("header answers")
            if "(keys:" in node.get("Decoded Columns", ""):
                found.add("document keys")
            if "fields:" in node.get("Decoded Columns", ""):
                found.add("document numbers")
            if node.get("Parallel Aware"):
                found.add("parallel")
        # Children, and on Citus the remote plans of the tasks ("Distributed Query").
        for v in node.values():
            for child in (v if isinstance(v, list) else [v]):
                if isinstance(child, dict):
                    walk(child)
                elif isinstance(child, list):
                    for c in child:
                        if isinstance(c, dict):
                            walk(c)

    for stmt in plan_json:
        walk(stmt)
    return found


def run_query(fz, ts, heap, q, sets, generic, coverage, trace):
    sql_ts, params = q.render("{t}")
    sql_heap, _ = q.render("{t}", heap=True)
    apply_settings((ts, heap), sets)
    try:
        # Inside a transaction an error of the EXPLAIN would end it on one side only.
        if coverage and ts.conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
            plan, err = ts.run("EXPLAIN (ANALYZE, FORMAT JSON, COSTS OFF, TIMING OFF, SUMMARY OFF) " + sql_ts, params)
            if err is None:
                doc = plan[0][0]
                for p in paths_of(json.loads(doc) if isinstance(doc, str) else doc):
                    fz.paths[p] += 1
        a, ea = ts.run(sql_ts, params, prepare=True if generic else None)
        b, eb = heap.checkable(lambda: heap.run(sql_heap, params))
    finally:
        reset_settings((ts, heap), sets)
    if ea or eb:
        states = {e[0] for e in (ea, eb) if e}
        if states == {"22003"} and any(o.cls.startswith("floatagg") for o in q.outs):
            # A float sum's (or avg's sum of squares') overflow depends on the
            # order of addition, on heap too (README, Limits).
            fz.tolerated += 1
            fz.just_tolerated = True
            return
        if fz.distributed and (ea is None) != (eb is None) and (ea or eb)[0] == "0A000" and citus_refusal(heap, sql_ts, params, ea):
            # Citus could not plan one side's form of the query (the oracle's
            # rewrite, or a form it refuses on the heap as well).
            fz.citus_refused += 1
            fz.just_tolerated = True
            return
        spared = []
        if (ea is None) != (eb is None) and (ea or eb)[0].startswith("22") and (q.limit is not None or q.kind == "lastpoint" or minmax_columns(q)) and limit_spared(q, ts, heap, ea, eb, params, sql_ts, spared):
            # A plan that stops at the LIMIT evaluates only the rows it returns
            # (a time-ordered scan under a GroupAggregate); one that aggregates
            # every row first (a HashAggregate) meets the row whose cast fails.
            # So does the last point per series: it reads each series from its
            # newest row back and stops at the first that passes, where the
            # heap's sort under DISTINCT ON casts every row. And so does
            # min(time) or max(time) alone: the planner makes it an ORDER BY
            # time LIMIT 1 over an ordered path (planagg.c).
            fz.limit_spared += 1
            fz.just_tolerated = True
            return
        if (ea is None) != (eb is None) and (ea or eb)[0].startswith("22") and qual_order_spared(q, ts, heap, a, b, params):
            # One side evaluated a document cast on a row another condition
            # of the WHERE rejects (Postgres promises no order among ANDed
            # conditions; a heap seq scan orders them by cost, tsbucket may
            # skip the row by its meta or time first).
            fz.qual_order += 1
            fz.just_tolerated = True
            return
        if ea and eb and ea[0] != eb[0]:
            heap.back_before()
        if ea and eb and ea[0] != eb[0] and cast_order_dependent(q, heap, sql_ts, ea, eb):
            # Rows fail a document cast ('[""]' as float8) and a float sum
            # overflows, or two rows fail a cast differently: which error a
            # query raises is the first one it meets, and the two sides read
            # rows in different orders.
            fz.cast_order += 1
            fz.just_tolerated = True
            return
        if ea is None or eb is None or ea[0] != eb[0]:
            raise Mismatch(f"query {sql_ts}\n  params {params}\n  settings {sets}\n  tsbucket {ea or 'ok'}, heap {eb or 'ok'}"
                           + "".join(f"\n  {note}" for note in spared), q, sets, generic)
        return
    problem = check.compare(q, a, b)
    if problem:
        raise Mismatch(f"query {sql_ts}\n  params {params}\n  settings {sets}\n  {problem}", q, sets, generic)


def limit_spared(q, ts, heap, ea, eb, params, sql_ts, notes):
    """One side failed with a data error (a cast) and the other did not, in a
    query with a LIMIT or a last point per series: tolerated if the other
    side, run without the LIMIT and DISTINCT ON (so that it reads every row
    that passes the WHERE), fails with the same SQLSTATE, or with another
    data error that, like the first, the heap's rows can raise (rows fail a
    cast in more than one way, and the first one met decides). What that run
    gave goes to `notes` (for the mismatch's report)."""
    whole = dataclasses.replace(q, limit=None)
    if q.kind == "lastpoint":
        whole = dataclasses.replace(whole, kind="plain", distinct_on=0)
    if minmax_columns(q):
        whole = dataclasses.replace(whole, kind="plain", outs=[Out(c) for c in minmax_columns(q)], order=[])
    side, want = (ts, eb) if ea is None else (heap, ea)
    sql, _ = whole.render("{t}", heap=side is heap)
    rows, e = heap.checkable(lambda: heap.run(sql, params)) if side is heap else ts.run(sql, params)
    notes.append(f"{'tsbucket' if side is ts else 'heap'} without the LIMIT and DISTINCT ON: "
                 f"{e or f'ok ({rows if isinstance(rows, int) else len(rows)} rows)'}")
    if e is None:
        return False
    if e[0] == want[0]:
        return True
    heap.back_before()
    return cast_order_dependent(q, heap, sql_ts, e, want)


MINMAX = re.compile(r"(?:min|max)\((\w+)\)")


def minmax_columns(q):
    """The columns of an aggregate made only of min() and max() of plain
    columns, with no GROUP BY or HAVING (which the planner may answer each
    with an ordered path under LIMIT 1), else None."""
    if q.kind != "agg" or q.group or q.having or not q.outs:
        return None
    found = [MINMAX.fullmatch(o.sql) for o in q.outs]
    if not all(found) or any(o.heap_sql or o.aux for o in q.outs):
        return None
    return [m.group(1) for m in found]


CAST = re.compile(r"->>'\w+'\)::")


def qual_order_spared(q, ts, heap, a, b, params):
    """One side failed with a data error and the other did not. Tolerated if
    the failing side, made to test each document cast only on rows that pass
    the WHERE's other conditions (a CASE, whose order Postgres keeps), returns
    the other side's answer."""
    casts = [w for w in q.where if CAST.search(w[0])]
    others = [w for w in q.where if not CAST.search(w[0])]
    if not casts or not others:
        return False
    for side in (ts, heap):
        if side.conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            return False
    guard = " AND ".join(f"({sql})" for sql, _ in others)
    guard_params = [p for _, ps in others for p in ps]
    guarded = others + [(f"CASE WHEN {guard} THEN ({sql}) ELSE false END", guard_params + list(ps)) for sql, ps in casts]
    g = dataclasses.replace(q, where=guarded)
    failing_is_ts = a is None
    sql, gparams = g.render("{t}", heap=not failing_is_ts)
    rows, err = (ts if failing_is_ts else heap).run(sql, gparams)
    if err:
        return False
    return check.compare(q, rows, b) is None if failing_is_ts else check.compare(q, a, rows) is None


CAST_STATE = """CREATE OR REPLACE FUNCTION pg_temp.fuzz_cast_state(v text, t text) RETURNS text
LANGUAGE plpgsql AS $f$
BEGIN
    EXECUTE format('SELECT %L::%s', v, t);
    RETURN NULL;
EXCEPTION WHEN data_exception THEN
    RETURN SQLSTATE;
END $f$"""


def cast_order_dependent(q, heap, sql_ts, ea, eb):
    """Both sides failed with different data errors in a query (or, q None, an
    UPDATE or DELETE) casting document fields: tolerated only if each error is
    one the heap's own rows can raise (each cast of the statement tried on
    every row), or a float sum's overflow."""
    if not (ea[0].startswith("22") and eb[0].startswith("22")):
        return False
    casts = set(re.findall(r"\((\w+)->>'(\w+)'\)::(float8|int|bigint|int4|int8|timestamptz|numeric)", sql_ts))
    if not casts or heap.conn.info.transaction_status not in (psycopg.pq.TransactionStatus.IDLE, psycopg.pq.TransactionStatus.INTRANS):
        return False
    states = {"22003"} if q is not None and any(o.cls.startswith("floatagg") for o in q.outs) else set()
    _, err = heap.run(CAST_STATE)
    if err:
        return False
    for col, key, typ in casts:
        # The values come to the client and back so that the function runs
        # here, not on a Citus worker's shard.
        values, err = heap.run(f"SELECT DISTINCT {col}->>'{key}' FROM {{t}}")
        if err:
            return False
        rows, err = heap.run("SELECT DISTINCT pg_temp.fuzz_cast_state(v, %s) FROM unnest(%s::text[]) v",
                             [typ, [v for v, in values]])
        if err:
            return False
        states.update(r[0] for r in rows if r[0])
    return ea[0] in states and eb[0] in states


def citus_refusal(heap, sql_ts, params, ea):
    """On distributed tables, one side failed with 0A000 and the other did
    not. The heap side runs the oracle's rewrite of the query (extra columns,
    subqueries), which Citus may be unable to plan where it plans the
    tsbucket side's form: tolerated. If the tsbucket side failed, its very
    form must fail on the distributed heap too."""
    if ea is None:
        return True
    if heap.conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR:
        return False
    _, err = heap.run(sql_ts, params)
    return err is not None and err[0] == "0A000"


class Fuzzer:
    def __init__(self, dsn, seed, plant, force_parallel, row_by_row=False, partitioned=False, distributed=False):
        self.row_by_row = row_by_row
        # The time-series side a table partitioned by time (two ranges and a default partition).
        self.partitioned = partitioned
        # Both sides Citus distributed tables (dsn: a coordinator), by the first meta column.
        self.distributed = distributed
        self.with_tail = 0
        self.dsn = dsn
        self.seed = seed
        self.plant = plant
        self.force_parallel = force_parallel
        self.paths = Counter()
        self.queries = 0
        self.rounds = 0
        self.tolerated = 0
        self.limit_spared = 0
        self.cast_order = 0
        self.qual_order = 0
        self.citus_refused = 0
        self.just_tolerated = False

    def sides(self, suffix=""):
        return (Side(connect(self.dsn, self.plant), f"fz{suffix}_ts"), Side(connect(self.dsn, False), f"fz{suffix}_heap"))

    def run(self, seconds, minimize=False, log=print):
        deadline = time.time() + seconds
        ts, heap = self.sides()
        number = 0
        try:
            while time.time() < deadline:
                rnd = Round(self, number)
                try:
                    rnd.play(ts, heap, deadline)
                except Mismatch as m:
                    log(f"MISMATCH (seed {self.seed}, round {number}): {m.args[0]}")
                    if minimize and len(m.args) > 1:
                        log(minimize_failure(self, rnd, m))
                    elif minimize:
                        log(minimize_write_failure(self, rnd))
                    return m
                number += 1
        finally:
            for side in (ts, heap):
                side.conn.close()
        return None

    def report(self):
        lines = [f"seed {self.seed}: {self.rounds} rounds, {self.queries} queries ({self.tolerated} with an "
                 f"order-dependent float overflow on one side; {self.limit_spared} whose failing cast only one side's "
                 f"plan reached before the LIMIT or a series' last point; {self.cast_order} failing with another data error on each side, "
                 f"each one the rows can raise; {self.qual_order} whose failing cast one side tested on a row "
                 f"another condition rejects"
                 + (f"; {self.with_tail} with rows waiting in the tail" if self.row_by_row else "")
                 + (f"; {self.citus_refused} that Citus could not plan on one side" if self.distributed else "")
                 + "); paths taken (from EXPLAIN):"]
        lines += [f"  {p:24} {self.paths[p]}" for p in PATHS]
        return "\n".join(lines)


def replay(fz, rnd, entries):
    """Fresh tables of the round's schema on new connections, with `entries` applied to both."""
    ts, heap = fz.sides("min")
    try:
        Round(fz, rnd.number).create(ts, heap)
        for e in entries:
            apply(ts, e)
            apply(heap, e)
    except BaseException:
        for side in (ts, heap):
            side.conn.close()
        raise
    return ts, heap


def minimize_failure(fz, rnd, m):
    """Shortens the failing round: drops trace entries (delta debugging), then
    query parts, while the answers still differ; returns a SQL script."""
    q, sets, generic = m.args[1], m.args[2], m.args[3]

    def fails(entries, query, compact):
        try:
            ts, heap = replay(fz, rnd, entries)
        except psycopg.Error:
            return False
        try:
            if ts.conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                for side in (ts, heap):
                    side.conn.execute("COMMIT")
            if compact:
                ts.conn.execute("SELECT * FROM tsbucket.compact('fzmin_ts')")
            run_query(fz, ts, heap, query, sets, generic, coverage=False, trace=None)
            return False
        except Mismatch:
            return True
        except psycopg.Error:
            return False
        finally:
            for side in (ts, heap):
                side.conn.close()

    entries = list(rnd.trace)
    compact = False
    if not fails(entries, q, False):
        compact = True
        if not fails(entries, q, True):
            return "  (did not reproduce on replay: the background worker's timing mattered)"
    budget = [400]

    def still_fails(candidate_entries, query=None):
        budget[0] -= 1
        return budget[0] > 0 and fails(candidate_entries, query or q, compact)

    entries = ddmin(entries, still_fails)
    # Then the rows of each multi-row write.
    for i in range(len(entries)):
        e = entries[i]
        if e[0] in ("many", "copy", "select") and len(e[2]) > 1:
            rows = ddmin(e[2], lambda rs: still_fails(entries[:i] + [(e[0], e[1], rs)] + entries[i + 1:]))
            entries[i] = (e[0], e[1], rows)
        elif e[0] == "exec" and " VALUES (" in e[1] and "), (" in e[1]:
            continue
    changed = True
    while changed and budget[0] > 0:
        changed = False
        for smaller in q.shrunk():
            if still_fails(entries, smaller):
                q = smaller
                changed = True
                break
    return script(fz, rnd, entries, q, sets, compact)


def minimize_write_failure(fz, rnd):
    """Shortens a round whose last write failed on one side only (or answered
    differently): drops earlier trace entries while the last one still
    differs; returns a SQL script."""
    last = rnd.trace[-1]

    def fails(entries):
        try:
            ts, heap = replay(fz, rnd, entries)
        except psycopg.Error:
            return False
        try:
            a, b = apply(ts, last), apply(heap, last)
            return (a[1] is None) != (b[1] is None) or bool(a[1] and a[1][0] != b[1][0])
        except psycopg.Error:
            return False
        finally:
            for side in (ts, heap):
                side.conn.close()

    if not fails(rnd.trace[:-1]):
        return "  (did not reproduce on replay: the background worker's timing mattered)"
    budget = [400]

    def still_fails(candidate):
        budget[0] -= 1
        return budget[0] > 0 and fails(candidate)

    entries = ddmin(rnd.trace[:-1], still_fails)
    return script(fz, rnd, entries + [last], None, {}, False)


def ddmin(items, fails):
    """A shortest-found sublist of `items` for which `fails` still holds (Zeller's ddmin)."""
    n = 2
    while len(items) >= 2:
        chunk = max(1, len(items) // n)
        for i in range(0, len(items), chunk):
            candidate = items[:i] + items[i + chunk:]
            if fails(candidate):
                items = candidate
                n = max(n - 1, 2)
                break
        else:
            if chunk == 1:
                break
            n = min(len(items), n * 2)
    return items


def script(fz, rnd, entries, q, sets, compact):
    """A psql script reproducing the failure on tables t_ts and t_heap."""
    conn = psycopg.connect(fz.dsn, autocommit=True)
    cur = psycopg.ClientCursor(conn)
    out = ["-- minimized by tests/fuzz/fuzz.py", "SET timezone = 'UTC';"]
    if fz.plant:
        out.append("SET tsbucket.debug_plant_bug = 1;  -- the planted bug (debug builds)")
    out.append(f"-- span {rnd.schema.span_seconds} s, bucket_max_count {rnd.max_count}")
    out += [sql + ";" for _, sql in Round(fz, rnd.number).setup_sql("t_ts", "t_heap")]
    names = None
    for e in entries:
        for t in ("t_ts", "t_heap"):
            if e[0] == "exec":
                out.append(cur.mogrify(e[1].format(t=t), e[2]) + ";")
            elif e[0] == "tx":
                out.append(e[1] + ";")
                break
            elif e[0] == "compact":
                out.append("SELECT * FROM tsbucket.compact('t_ts');")
                break
            else:
                names = e[1]
                sql = e[1] if e[0] != "many" else None
                rows = e[2]
                stmt = e[1].format(t=t) if e[0] == "many" else f"INSERT INTO {t} ({sql}) VALUES (" + ", ".join(["%s"] * len(rows[0])) + ")"
                for r in rows:
                    out.append(cur.mogrify(stmt, r) + ";")
    if compact:
        out.append("SELECT * FROM tsbucket.compact('t_ts');")
    for k, v in sets.items():
        out.append(f"SET {k} = {v};")
    if q is None:
        conn.close()
        return "\n".join(out)
    sql_ts, params = q.render("t_ts")
    sql_heap, _ = q.render("t_heap", heap=True)
    out.append(cur.mogrify(sql_ts, params) + ";")
    out.append(cur.mogrify(sql_heap, params) + ";  -- the oracle (with the checker's extra columns)")
    conn.close()
    del names
    return "\n".join(out)


def prepare_database(dsn):
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("CREATE EXTENSION IF NOT EXISTS tsbucket")
        if not c.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (OWNER,)).fetchone():
            c.execute(f"CREATE ROLE {OWNER}")
        c.execute(f"GRANT CREATE ON SCHEMA public TO {OWNER}")
        version = c.execute("SHOW server_version_num").fetchone()[0]
    return "debug_parallel_query" if int(version) >= 160000 else "force_parallel_mode"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pg", default=os.environ.get("TSBUCKET_PG", "pg15"), help="pg15 or pg18 (for a cluster of its own)")
    ap.add_argument("--dsn", help="a database with tsbucket to use instead of a cluster of its own")
    ap.add_argument("--seconds", type=float, default=120)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--minimize", action="store_true")
    ap.add_argument("--plant", action="store_true", help="switch the planted bug on (debug builds); succeed if it is found")
    ap.add_argument("--row-by-row", action="store_true", help="every row in a statement of its own (the tail)")
    ap.add_argument("--partitioned", action="store_true", help="the time-series table partitioned by time")
    ap.add_argument("--distributed", action="store_true",
                    help="both tables distributed with Citus (--dsn: a coordinator whose workers are added)")
    args = ap.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1, 10**9)
    print(f"fuzz: seed {seed}", flush=True)
    cluster = None
    dsn = args.dsn
    if dsn is None:
        os.environ["TSBUCKET_PG"] = args.pg
        from conftest import Cluster

        cluster = Cluster(worker=True, extra_conf=["tsbucket.worker_interval = 1", "max_connections = 50"])
        dsn = f"host={cluster.dir} port={cluster.port} user=postgres dbname=test"
    try:
        force = prepare_database(dsn)
        fz = Fuzzer(dsn, seed, args.plant, force, row_by_row=args.row_by_row, partitioned=args.partitioned,
                    distributed=args.distributed)
        found = fz.run(args.seconds, minimize=args.minimize, log=lambda s: print(s, flush=True))
        print(fz.report(), flush=True)
    finally:
        if cluster:
            cluster.destroy()
    if args.plant:
        print("planted bug " + ("found" if found else "NOT found"))
        sys.exit(0 if found else 1)
    sys.exit(1 if found else 0)


if __name__ == "__main__":
    main()
