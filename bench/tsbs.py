"""Query and storage benchmark, side by side in one cluster, on three data
shapes (bench/gen_data.py), each loaded into every contender:

  heap         a heap table with TSBS's indexes: (series, time DESC), (time DESC)
  tsbucket     a tsbucket table (the series column its meta column, --granularity)
  timescaledb  a hypertable (12 h chunks) compressed with segmentby the series
               column, orderby time DESC, when TimescaleDB is installed
  columnar     a Citus columnar table, when Citus (or citus_columnar) is installed

Shapes and their queries:
  devops  TSBS's cpu-only data (100 hosts, 10 whole-number metrics, host tags as
          columns) and its 15 query types, written as TSBS writes them for
          TimescaleDB (`time_bucket('60 seconds', time)`, its random windows, the
          first n metrics, double-groupby as a CTE, high-cpu without ORDER BY),
          with `date_trunc` for the contenders that have no `time_bucket`;
  iot     TSBS's IoT value model (decimals with 0-2 digits, a counter, a boolean,
          a status text, about one row in ten with a NULL field) and 5 sensor
          queries: last value per truck, hourly avg/min/max per truck over a day,
          a threshold scan over a day, a week downsampled to 1 h for 10 trucks,
          status changes per truck over a day;
  float   full-precision float8 random walks, and the same 5 kinds of query.

Every contender answers the same random instances (--seed); each answer is
compared with heap's (exactly, else floats within 1e-9 relative; unordered
answers as multisets). Two settings: the defaults users run (parallel query
and JIT at PostgreSQL's defaults; the headline) and one process per query
(max_parallel_workers_per_gather = 0, jit = off: the engines alone). Per type
it prints the median over instances of the best of --runs runs (one run
where the warm-up took a second or more), end to end
(the client receives every row, as TSBS's runner does), and for the types
that return many rows also the server's execution time (EXPLAIN ANALYZE
without timing). --days takes one or two sizes (3,30): with two, each type's
time at the longer size over the shorter. Load: COPY rows/s, the time until
the table is in its final form (TimescaleDB's compression included), bytes
per row, and the shape's entropy floor.

Run (builds and installs the release extension, then starts its own cluster):
  . scripts/pg-env.sh && install_extension pg15 --release && \\
    TSBUCKET_PG=pg15 $TSBUCKET_VENV/bin/python bench/tsbs.py --shapes devops,iot,float --days 3,30
"""

import argparse
import datetime as dt
import json
import math
import os
import random
import statistics
import struct
import subprocess
import sys
import time
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
from conftest import Cluster, pg_config  # noqa: E402
from gen_data import METRICS  # noqa: E402

START = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)
HOSTS = 100  # gen_data.py's default --series, the hosts of the main data
IDENTICAL, CLOSE, DIFFERENT = 0, 1, 2
STATUS = ["identical", "close", "DIFFERENT"]
# Types whose answers run to thousands of rows: their server time is shown beside the end-to-end time.
MANY_ROWS = {"high-cpu-all", "high-cpu-1", "threshold-scan"}


def ts(t):
    # TSBS's goTimeFmt ("2006-01-02 15:04:05.999999 -0700"), microseconds kept.
    return t.strftime("%Y-%m-%d %H:%M:%S.%f +0000")


def random_window(rng, days, hours):
    """A random start, to the microsecond, such that [start, start + hours) lies in the data (TSBS's MustRandWindow)."""
    span = (days * 86400 - hours * 3600) * 1_000_000
    return START + dt.timedelta(microseconds=rng.randrange(span))


def bucket(seconds, tsdb):
    """The time bucket as TSBS writes it for TimescaleDB, else its date_trunc equal (the session is in UTC)."""
    if tsdb:
        return f"time_bucket('{seconds} seconds', time)"
    return {60: "date_trunc('minute', time)", 3600: "date_trunc('hour', time)"}[seconds]


def hosts_in(rng, column, prefix, n, hosts):
    return f"{column} IN (" + ",".join(f"'{prefix}{h}'" for h in rng.sample(range(hosts), n)) + ")"


@dataclass
class Query:
    build: object  # (rng, series, days, tsdb) -> SQL with {t}
    ordered: bool = True  # the SQL fixes the order of the rows (else they compare as multisets)


# ---- devops: the 15 TSBS types (pkg/query/.../timescaledb/devops.go, hostname column) ----

def single_groupby(m, h, hours):
    def build(rng, hosts, days, tsdb):
        t0 = random_window(rng, days, hours)
        aggs = ", ".join(f"max({x}) as max_{x}" for x in METRICS[:m])
        return (f"SELECT {bucket(60, tsdb)} AS minute,\n        {aggs}\n        FROM {{t}}\n"
                f"        WHERE {hosts_in(rng, 'hostname', 'host_', h, hosts)} AND time >= '{ts(t0)}' "
                f"AND time < '{ts(t0 + dt.timedelta(hours=hours))}'\n        GROUP BY minute ORDER BY minute ASC")
    return Query(build)


def cpu_max_all(h):
    def build(rng, hosts, days, tsdb):
        t0 = random_window(rng, days, 8)
        aggs = ", ".join(f"max({x}) as max_{x}" for x in METRICS)
        return (f"SELECT {bucket(3600, tsdb)} AS hour,\n        {aggs}\n        FROM {{t}}\n"
                f"        WHERE {hosts_in(rng, 'hostname', 'host_', h, hosts)} AND time >= '{ts(t0)}' "
                f"AND time < '{ts(t0 + dt.timedelta(hours=8))}'\n        GROUP BY hour ORDER BY hour")
    return Query(build)


def double_groupby(m):
    def build(rng, hosts, days, tsdb):
        t0 = random_window(rng, days, 12)
        aggs = ", ".join(f"avg({x}) as mean_{x}" for x in METRICS[:m])
        means = ", ".join(f"mean_{x}" for x in METRICS[:m])
        return (f"\n        WITH cpu_avg AS (\n          SELECT {bucket(3600, tsdb)} as hour, hostname,\n          {aggs}\n"
                f"          FROM {{t}}\n          WHERE time >= '{ts(t0)}' AND time < '{ts(t0 + dt.timedelta(hours=12))}'\n"
                f"          GROUP BY 1, 2\n        )\n        SELECT hour, hostname, {means}\n        FROM cpu_avg\n"
                f"        ORDER BY hour, hostname")
    return Query(build)


def high_cpu(h):
    def build(rng, hosts, days, tsdb):
        t0 = random_window(rng, days, 12)
        where = f"AND {hosts_in(rng, 'hostname', 'host_', h, hosts)}" if h else ""
        return (f"SELECT * FROM {{t}} WHERE usage_user > 90.0 and time >= '{ts(t0)}' "
                f"AND time < '{ts(t0 + dt.timedelta(hours=12))}' {where}")
    return Query(build, ordered=False)


def groupby_orderby_limit(rng, hosts, days, tsdb):
    end = random_window(rng, days, 1) + dt.timedelta(hours=1)
    return (f"SELECT {bucket(60, tsdb)} AS minute, max(usage_user)\n        FROM {{t}}\n        WHERE time < '{ts(end)}'\n"
            f"        GROUP BY minute\n        ORDER BY minute DESC\n        LIMIT 5")


DEVOPS_QUERIES = {f"single-groupby-{m}-{h}-{t}": single_groupby(m, h, t)
                  for m, h, t in [(1, 1, 1), (1, 1, 12), (1, 8, 1), (5, 1, 1), (5, 1, 12), (5, 8, 1)]}
DEVOPS_QUERIES |= {f"cpu-max-all-{h}": cpu_max_all(h) for h in (1, 8)}
DEVOPS_QUERIES |= {f"double-groupby-{n}": double_groupby(m) for n, m in (("1", 1), ("5", 5), ("all", len(METRICS)))}
DEVOPS_QUERIES |= {"high-cpu-all": high_cpu(0), "high-cpu-1": high_cpu(1),
                   "lastpoint": Query(lambda rng, hosts, days, tsdb: "SELECT DISTINCT ON (hostname) * FROM {t} ORDER BY hostname, time DESC"),
                   "groupby-orderby-limit": Query(groupby_orderby_limit)}
# (bench/citus_tsbs.py: the same types, without TimescaleDB's forms.)
QUERIES = {name: (lambda q: lambda rng, hosts, days: q.build(rng, hosts, days, False))(q) for name, q in DEVOPS_QUERIES.items()}


# ---- the sensor query set, for the iot and float shapes ----

def sensor_queries(series_col, prefix, value, value2, status):
    def last_value(rng, n, days, tsdb):
        return f"SELECT DISTINCT ON ({series_col}) * FROM {{t}} ORDER BY {series_col}, time DESC"

    def hourly(rng, n, days, tsdb):
        t0 = random_window(rng, days, 24)
        return (f"SELECT {bucket(3600, tsdb)} AS hour, {series_col}, avg({value}), min({value}), max({value}) FROM {{t}} "
                f"WHERE time >= '{ts(t0)}' AND time < '{ts(t0 + dt.timedelta(hours=24))}' "
                f"GROUP BY hour, {series_col} ORDER BY hour, {series_col}")

    def threshold(rng, n, days, tsdb):
        t0 = random_window(rng, days, 24)
        return (f"SELECT time, {series_col}, {value} FROM {{t}} WHERE {value} > {{threshold}} "
                f"AND time >= '{ts(t0)}' AND time < '{ts(t0 + dt.timedelta(hours=24))}'")

    def downsample(rng, n, days, tsdb):
        hours = min(7 * 24, days * 24)
        t0 = random_window(rng, days, hours) if hours < days * 24 else START
        return (f"SELECT {bucket(3600, tsdb)} AS hour, {series_col}, avg({value}), max({value2}) FROM {{t}} "
                f"WHERE {hosts_in(rng, series_col, prefix, 10, n)} AND time >= '{ts(t0)}' "
                f"AND time < '{ts(t0 + dt.timedelta(hours=hours))}' GROUP BY hour, {series_col} ORDER BY hour, {series_col}")

    def changes(rng, n, days, tsdb):
        t0 = random_window(rng, days, 24)
        return (f"SELECT {series_col}, count(*) FROM (SELECT {series_col}, {status} AS s, "
                f"lag({status}) OVER (PARTITION BY {series_col} ORDER BY time) AS prev FROM {{t}} "
                f"WHERE time >= '{ts(t0)}' AND time < '{ts(t0 + dt.timedelta(hours=24))}') c "
                f"WHERE s IS DISTINCT FROM prev AND prev IS NOT NULL GROUP BY {series_col} ORDER BY {series_col}")

    return {"last-value": Query(last_value), "hourly-per-series": Query(hourly),
            "threshold-scan": Query(threshold, ordered=False), "week-downsampled": Query(downsample),
            "changes-per-series": Query(changes)}


@dataclass
class Shape:
    name: str
    columns: str
    series: str
    queries: dict
    threshold: str = "0"
    granularity: str = "seconds"
    rows_per_day: int = 100 * 8640
    floor: object = None  # (path of the data) -> (bits per row, how)
    notes: list = field(default_factory=list)


def devops_floor(path):
    # Each metric steps uniformly over -2..2 (clamped to 0..100): log2(5) bits a value, less at the bounds;
    # the time, the host and its tags cost nothing per row (regular, constant per series).
    return 10 * math.log2(5), "10 metrics x log2(5) bits (a step of -2..2 each)"


def iot_floor(path):
    # fuel_consumption: step U(-5, 5) in tenths (about 100 values: log2(100)); velocity and grade: steps
    # of U(-10, 10) and U(-5, 5) whole (log2(20), log2(10)); temperature: U(-0.5, 0.5) in hundredths (log2(100));
    # fuel_state and status change rarely (~0); the odometer follows velocity (0); moving follows velocity
    # (0); one row in ten has one NULL field among 8: H(0.1) + 0.1 * log2(8) bits.
    h = lambda p: -p * math.log2(p) - (1 - p) * math.log2(1 - p)  # noqa: E731
    bits = math.log2(100) + math.log2(20) + math.log2(10) + math.log2(100) + h(0.1) + 0.1 * 3
    return bits, "fuel_consumption log2(100) + velocity log2(20) + grade log2(10) + temperature log2(100) + NULLs H(0.1) + 0.1 log2(8)"


def float_floor(path):
    # Each value is x + U(-0.5, 0.5) rounded to a double, x the series' previous value: one of the doubles
    # in [x - 0.5, x + 0.5], equally likely (Python's uniform() steps by 2^-53, so at most 2^53 of them):
    # log2 of their number, 46 bits near 100 (ulp 2^-46), more where the walk wanders below 64, less above
    # 128. Averaged over every 7th row of the data (cached beside it: reading 30 days takes a minute).
    cache = path + ".floor"
    if os.path.exists(cache) and os.path.getmtime(cache) >= os.path.getmtime(path):
        with open(cache) as f:
            bits = float(f.read())
    else:
        def key(x):
            i = struct.unpack("<q", struct.pack("<d", x))[0]
            return i ^ 0x7FFF_FFFF_FFFF_FFFF if i < 0 else i
        previous, total, n = {}, 0.0, 0
        with open(path) as f:
            for i, line in enumerate(f):
                fields = line.rstrip("\n").split(",")
                values = [float(v) for v in fields[2:5]]
                if i % 7 == 0 and fields[1] in previous:
                    for x in previous[fields[1]]:
                        total += math.log2(min(key(x + 0.5) - key(x - 0.5), 1 << 53))
                        n += 1
                previous[fields[1]] = values
        bits = 3 * total / n
        with open(cache, "w") as f:
            f.write(repr(bits))
    return bits, (f"3 columns x {bits / 3:.3f} bits: per value log2 of the doubles x + U(-0.5, 0.5) can be, "
                  "x the previous value (46 near 100), averaged over the data")


SHAPES = {
    "devops": Shape("devops", (
        "time timestamptz NOT NULL, hostname text, region text, datacenter text, rack text, os text, arch text, "
        "team text, service text, service_version text, service_environment text, "
        + ", ".join(f"{m} float8" for m in METRICS)), "hostname", DEVOPS_QUERIES, floor=devops_floor),
    "iot": Shape("iot", (
        "time timestamptz NOT NULL, truck text, fleet text, model text, fuel_consumption float8, velocity float8, "
        "grade float8, temperature float8, fuel_state float8, odometer int8, moving bool, status text"), "truck",
        sensor_queries("truck", "truck_", "temperature", "velocity", "status"), threshold="40", floor=iot_floor),
    "float": Shape("float", "time timestamptz NOT NULL, series text, a float8, b float8, c float8", "series",
                   sensor_queries("series", "series_", "a", "b", "b > c"), threshold="101", floor=float_floor),
}


def csv_path(days, hosts=HOSTS, shape="devops"):
    """The cached CSV, generated by gen_data.py when missing."""
    path = f"/tmp/tsbucket-bench-{shape}-{days}d{'' if hosts == HOSTS else f'-{hosts}h'}.csv"
    if not os.path.exists(path):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, os.path.join(HERE, "gen_data.py"), shape, path + ".tmp",
                        "--days", str(days), "--series", str(hosts)], check=True)
        os.rename(path + ".tmp", path)
        print(f"generated {path} in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    os.chmod(path, 0o644)
    return path


def table_bytes(conn, table, kind):
    if kind == "tsbucket":
        return conn.execute(f"SELECT tsbucket.table_size('{table}')").fetchone()[0]
    if kind == "timescaledb":
        return conn.execute(f"SELECT hypertable_size('{table}')").fetchone()[0]
    return conn.execute(f"SELECT pg_total_relation_size('{table}')").fetchone()[0]


def create_and_load(conn, table, kind, path, shape, a, available):
    """Loads `path` into a new `kind` table; returns (COPY seconds, seconds until final, bytes)."""
    print(f"loading {table}", file=sys.stderr)
    conn.execute(f"DROP TABLE IF EXISTS {table}")
    if kind == "heap":
        conn.execute(f"CREATE TABLE {table} ({shape.columns})")
        conn.execute(f"CREATE INDEX ON {table} ({shape.series}, time DESC)")
        conn.execute(f"CREATE INDEX ON {table} (time DESC)")
    elif kind == "tsbucket":
        conn.execute(f"CREATE TABLE {table} ({shape.columns}) USING tsbucket")
        conn.execute(f"SELECT tsbucket.create_timeseries('{table}', 'time', '{shape.series}', granularity => '{a.granularity}')")
    elif kind == "timescaledb":
        conn.execute("CREATE EXTENSION IF NOT EXISTS timescaledb")
        conn.execute(f"CREATE TABLE {table} ({shape.columns})")
        conn.execute(f"SELECT create_hypertable('{table}', 'time', chunk_time_interval => interval '12 hours')")
        conn.execute(f"ALTER TABLE {table} SET (timescaledb.compress, timescaledb.compress_segmentby = '{shape.series}', "
                     "timescaledb.compress_orderby = 'time DESC')")
    elif kind == "columnar":
        conn.execute("CREATE EXTENSION IF NOT EXISTS citus_columnar")
        conn.execute(f"CREATE TABLE {table} ({shape.columns}) USING columnar")
    t0 = time.perf_counter()
    conn.execute(f"COPY {table} FROM '{path}' (FORMAT csv)")
    copy_s = time.perf_counter() - t0
    if kind == "timescaledb":
        conn.execute(f"SELECT count(compress_chunk(c)) FROM show_chunks('{table}') c")
    conn.execute(f"VACUUM ANALYZE {table}")
    return copy_s, time.perf_counter() - t0, table_bytes(conn, table, kind)


def compare(expected, got, ordered):
    if not ordered:
        key = lambda r: tuple((x is None, str(x)) for x in r)  # noqa: E731
        expected, got = sorted(expected, key=key), sorted(got, key=key)
    if expected == got:
        return IDENTICAL
    if len(expected) != len(got) or any(len(a) != len(b) for a, b in zip(expected, got)):
        return DIFFERENT
    for a, b in zip(expected, got):
        for x, y in zip(a, b):
            if x != y and not (isinstance(x, float) and isinstance(y, float) and math.isclose(x, y, rel_tol=1e-9)):
                return DIFFERENT
    return CLOSE


def timed(conn, sql):
    t0 = time.perf_counter()
    # Binary results, as TSBS's Go runner (pgx) receives them: the client's share stays small.
    conn.execute(sql, binary=True).fetchall()
    return time.perf_counter() - t0


def best_of(conn, sql, n):
    return min(timed(conn, sql) for _ in range(n))


def server_ms(conn, sql):
    """The server's execution time, rows formed but not sent (EXPLAIN ANALYZE, no per-node timing)."""
    doc = conn.execute("EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) " + sql).fetchone()[0]
    doc = json.loads(doc) if isinstance(doc, str) else doc
    return doc[0]["Execution Time"]


SLOW_S = 1.0


def measure(conn, tables, sqls, runs, ordered, with_server=False, conns=None):
    """tables: {label: table}, the first the reference; sqls: {label: [SQL]} (TimescaleDB's differ);
    conns: {label: connection} where not `conn`. Per label: median over instances of the best of
    `runs` runs in ms, the worst answer status against the reference, and (with_server) the median
    server execution time in ms."""
    conns = conns or {}
    best = {label: [] for label in tables}
    server = {label: [] for label in tables}
    worst = {label: IDENTICAL for label in tables}
    skipscan = "timescaledb" in tables
    n = len(next(iter(sqls.values())))
    for i in range(n):
        reference = None
        for label, table in tables.items():
            c = conns.get(label, conn)
            if skipscan and c is conn:
                # TimescaleDB's SkipScan speeds up DISTINCT ON over any btree index, heap's too:
                # measure heap (and tsbucket) as they are without TimescaleDB.
                conn.execute(f"SET timescaledb.enable_skipscan = {'on' if label == 'timescaledb' else 'off'}")
            q = sqls[label][i].replace("{t}", table)
            t0 = time.perf_counter()
            rows = c.execute(q).fetchall()  # the warm-up run gives the answer
            # A run of a second or more varies by a few percent at most: one timed run is enough
            # (it keeps heap and columnar at 30 days within an hour).
            best[label].append(best_of(c, q, 1 if time.perf_counter() - t0 > SLOW_S else runs))
            if with_server:
                server[label].append(server_ms(c, q))
            if reference is None:
                reference = rows
            else:
                worst[label] = max(worst[label], compare(reference, rows, ordered))
    med = lambda v: statistics.median(v) if v else None  # noqa: E731
    return ({label: med(v) * 1000 for label, v in best.items()}, worst, {label: med(v) for label, v in server.items()})


def fmt_ms(ms):
    return f"{ms:.2f}" if ms < 10 else f"{ms:,.1f}"


def fmt_ratio(r):
    return f"{r:.3f}" if r < 0.1 else f"{r:.2f}"


def answers(worst):
    status = max(worst.values())
    return STATUS[status] + ("" if status == IDENTICAL else
                             " (" + ", ".join(f"{label}: {STATUS[s]}" for label, s in worst.items() if s) + ")")


def geomean(values):
    return math.exp(statistics.fmean(map(math.log, values)))


def instances(shape, a, name, q, days, kind):
    """The query type's random instances for `kind` (the same windows for every
    contender: one seeded generator per type; lastpoint and last-value one)."""
    rng = random.Random(f"{a.seed}:{shape.name}:{name}")
    n = 1 if name in ("lastpoint", "last-value") else a.instances
    return [q.build(rng, HOSTS, days, kind == "timescaledb").replace("{threshold}", shape.threshold) for _ in range(n)]


MODES = {"defaults": [], "engine": ["SET max_parallel_workers_per_gather = 0", "SET jit = off"]}


def run_shape(conn, shape, a, available, columnar_conn):
    kinds = ["heap", "tsbucket"]
    if "timescaledb" in available and "timescaledb" not in a.skip:
        kinds.append("timescaledb")
    if columnar_conn is not None and "columnar" not in a.skip:
        kinds.append("columnar")
    conns = {"columnar": columnar_conn} if columnar_conn is not None else {}
    version = conn.execute("SHOW server_version").fetchone()[0]
    results = {}  # days -> mode -> name -> ms
    different = False
    for days in a.days:
        tables = {kind: f"{shape.name}_{days}d_{kind}" for kind in kinds}
        path = csv_path(days, HOSTS, shape.name)
        bits, how = shape.floor(path)
        load = {}
        for kind in list(kinds):
            try:
                load[kind] = create_and_load(conns.get(kind, conn), tables[kind], kind, path, shape, a, available)
            except Exception as e:
                if kind in ("heap", "tsbucket"):
                    raise
                print(f"dropping contender {kind}: {str(e).splitlines()[0]}", file=sys.stderr)
                del tables[kind]
        rows = conn.execute(f"SELECT count(*) FROM {tables['heap']}").fetchone()[0]
        print(f"\n## {shape.name}, {days} days: {rows:,} rows, {HOSTS} series; PostgreSQL {version}, "
              f"{dt.date.today().isoformat()}\n")
        print(f"Entropy floor: {bits / 8:.2f} bytes a row ({how}).\n")
        ref = "timescaledb" if "timescaledb" in tables else "heap"
        print(f"| contender | COPY rows/s | load to final s | bytes/row | bytes vs {ref} | vs entropy floor |")
        print("|---|---:|---:|---:|---:|---:|")
        for kind, (copy_s, final_s, nbytes) in load.items():
            if kind not in tables:
                continue
            print(f"| {kind} | {rows / copy_s:,.0f} | {final_s:,.1f} | {nbytes / rows:.2f} | "
                  f"{nbytes / load[ref][2]:.2f} | {nbytes * 8 / rows / bits:.3f} |")
        others = [k for k in tables if k != "heap"]
        results[days] = {}
        for mode, sets in MODES.items():
            if mode not in a.modes:
                continue
            for s in sets:
                for c in [conn] + list(conns.values()):
                    c.execute(s)
            print(f"\n### {shape.name}, {days} days, {mode}"
                  + (" (parallel query and JIT as PostgreSQL sets them)" if mode == "defaults" else
                     " (max_parallel_workers_per_gather = 0, jit = off)") + "\n")
            header = "| query | " + " | ".join(f"{k} ms" for k in tables) + " | " + " | ".join(f"{k} / {ref}" for k in others if k != ref)
            print(header + " | answers |")
            print("|---|" + "---:|" * (len(tables) + len([k for k in others if k != ref])) + "---|")
            ratios = {k: [] for k in others if k != ref}
            results[days][mode] = {}
            explains = []
            server_rows = []
            for name, q in shape.queries.items():
                if a.queries and name not in a.queries:
                    continue
                sqls = {kind: instances(shape, a, name, q, days, kind) for kind in tables}
                ms, worst, srv = measure(conn, tables, sqls, a.runs, q.ordered, with_server=name in MANY_ROWS, conns=conns)
                different |= max(worst.values()) == DIFFERENT
                results[days][mode][name] = ms
                for k in ratios:
                    ratios[k].append(ms[k] / ms[ref])
                print(f"| {name} | " + " | ".join(fmt_ms(ms[k]) for k in tables) + " | "
                      + " | ".join(fmt_ratio(ms[k] / ms[ref]) for k in ratios) + f" | {answers(worst)} |", flush=True)
                if name in MANY_ROWS:
                    server_rows.append((name, ms, srv))
                if a.explain:
                    for kind in a.explain:
                        if kind in tables:
                            c = conns.get(kind, conn)
                            plan = c.execute("EXPLAIN (ANALYZE, COSTS OFF) " + sqls[kind][0].replace("{t}", tables[kind])).fetchall()
                            explains.append((f"{name} on {kind} ({mode})", "\n".join(r[0] for r in plan)))
            if ratios:
                print("| geomean |" + " |" * len(tables) + " " + " | ".join(fmt_ratio(geomean(r)) for r in ratios.values()) + " | |")
            for name, ms, srv in server_rows:
                print(f"\n{name}, server execution time (EXPLAIN ANALYZE, rows not sent) against end to end: "
                      + ", ".join(f"{k} {fmt_ms(srv[k])} / {fmt_ms(ms[k])} ms" for k in tables))
            for title, plan in explains:
                print(f"\n#### {title}\n\n```\n{plan}\n```")
            for s in sets:
                for c in [conn] + list(conns.values()):
                    c.execute("RESET " + s.split()[1])
    if len(a.days) == 2:
        short, long = a.days
        for mode in results[short]:
            print(f"\n### {shape.name}: {long} days against {short} days, {mode} (time at {long} / time at {short})\n")
            kinds_here = list(results[short][mode][next(iter(results[short][mode]))])
            print("| query | " + " | ".join(kinds_here) + " |")
            print("|---|" + "---:|" * len(kinds_here))
            for name in results[short][mode]:
                print(f"| {name} | " + " | ".join(fmt_ratio(results[long][mode][name][k] / results[short][mode][name][k])
                                                   for k in kinds_here) + " |")
        side_by_side(conn, shape, a, kinds, conns)
    return different


def side_by_side(conn, shape, a, kinds, conns):
    """The two sizes' tables timed in turn, the same instances (windows within the
    shorter range, which both tables hold): the tables above were timed minutes
    apart, and this machine's speed drifts by more than a size changes a query."""
    short, long = a.days
    fast = [k for k in ("tsbucket", "timescaledb") if k in kinds]
    print(f"\n### {shape.name}: {long} days against {short} days, side by side (defaults; each instance "
          f"on the {short}-day table, then the {long}-day one, twice; median over instances of the best)\n")
    print("| query | " + " | ".join(f"{k} {short} d ms | {k} {long} d ms | {k} {long} / {short}" for k in fast) + " |")
    print("|---|" + "---:|" * (3 * len(fast)))
    for name, q in shape.queries.items():
        if a.queries and name not in a.queries:
            continue
        cells = []
        for kind in fast:
            sqls = instances(shape, a, name, q, short, kind)
            c = conns.get(kind, conn)
            if "timescaledb" in kinds:
                conn.execute(f"SET timescaledb.enable_skipscan = {'on' if kind == 'timescaledb' else 'off'}")
            best = {short: [], long: []}
            for sql in sqls:
                times = {short: [], long: []}
                for _ in range(2):
                    for days in (short, long):
                        times[days].append(best_of(c, sql.replace("{t}", f"{shape.name}_{days}d_{kind}"), a.runs))
                for days in times:
                    best[days].append(min(times[days]))
            s, l_ = (statistics.median(best[d]) * 1000 for d in (short, long))
            cells.append(f"{fmt_ms(s)} | {fmt_ms(l_)} | {fmt_ratio(l_ / s)}")
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)


def cluster_conf(a):
    conf = ["shared_buffers = 2GB", "max_wal_size = 16GB", "checkpoint_timeout = 30min", "synchronous_commit = off"]
    sharedir = subprocess.check_output([pg_config(os.environ.get("TSBUCKET_PG", "pg15")), "--sharedir"], text=True).strip()
    if os.path.exists(os.path.join(sharedir, "extension", "timescaledb.control")):  # it must be preloaded
        # No job scheduler: the benchmark compresses by hand, and on PostgreSQL
        # 15.20 TimescaleDB 2.28's job runner drops a portal that never started.
        conf += ["shared_preload_libraries = 'tsbucket,timescaledb'", "timescaledb.telemetry_level = off",
                 "timescaledb.max_background_workers = 0"]
    return conf


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shapes", default="devops", help="comma-separated: devops, iot, float")
    p.add_argument("--days", default="3", help="one size or two (3,30): the second against the first")
    p.add_argument("--granularity", default="seconds")
    p.add_argument("--instances", type=int, default=8, help="random instances per query type")
    p.add_argument("--runs", type=int, default=3, help="timed runs per instance and contender (best counts)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--queries", default="", help="comma-separated query types (default: all of each shape)")
    p.add_argument("--modes", default="defaults,engine", help="defaults (the headline), engine (one process a query)")
    p.add_argument("--explain", default="", help="comma-separated contenders whose plan of each type's first instance to print")
    p.add_argument("--skip", default="", help="comma-separated contenders to leave out (timescaledb, columnar): the heap (the answers' reference) and tsbucket always run")
    a = p.parse_args()
    a.days = [int(d) for d in a.days.split(",")]
    a.queries = set(a.queries.split(",")) if a.queries else set()
    a.modes = a.modes.split(",")
    a.explain = a.explain.split(",") if a.explain else []
    a.skip = set(a.skip.split(",")) if a.skip else set()
    shapes = a.shapes.split(",")
    unknown = set(shapes) - set(SHAPES)
    if unknown:
        p.error(f"unknown shapes {sorted(unknown)}; known: {', '.join(SHAPES)}")
    cluster = Cluster(extra_conf=cluster_conf(a))
    different = False
    try:
        with cluster.connect() as conn:
            conn.execute("SET TimeZone = 'UTC'")
            available = {r[0] for r in conn.execute("SELECT name FROM pg_available_extensions").fetchall()}
            columnar_conn = None
            if "citus_columnar" in available:
                # A database of its own: Citus columnar and TimescaleDB both register a custom
                # scan node named ColumnarScan, and one backend cannot load both.
                conn.execute("CREATE DATABASE bench_columnar")
                columnar_conn = cluster.connect(dbname="bench_columnar")
                columnar_conn.execute("SET TimeZone = 'UTC'")
            try:
                for name in shapes:
                    different |= run_shape(conn, SHAPES[name], a, available, columnar_conn)
            finally:
                if columnar_conn is not None:
                    columnar_conn.close()
    finally:
        cluster.destroy()
    if different:
        print("\nSome answers were DIFFERENT from heap's.", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
