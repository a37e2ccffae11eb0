"""The 15 TSBS "devops" (cpu-only) query types, side by side in one cluster, on
  cpu_heap       a heap table with TSBS's indexes (hostname, time DESC) and (time DESC),
  cpu_tsbucket   a tsbucket table (meta column hostname, --granularity),
  cpu_timescaledb / cpu_columnar   a compressed hypertable / Citus columnar table, when installed.
Every contender answers the same random query instances (random.Random, --seed);
each answer is compared with heap's (exactly, else floats with relative tolerance
1e-9 = "close"); any DIFFERENT answer makes the exit status non-zero. Prints, as
Markdown, the median over instances of the best of --runs runs (after a warm-up)
per query type, and the ratios to heap with their geometric mean.

History length (--history, on by default): the same one-host, one-hour question,
asked inside the last day of a --days and of a --long-days table (--long-hosts
hosts): how much a long history slows down a short query (target: within 1.5x).

Run (builds and installs the release extension, then starts its own cluster):
  . scripts/pg-env.sh && install_extension pg15 --release && TSBUCKET_PG=pg15 $TSBUCKET_VENV/bin/python bench/tsbs.py
"""

import argparse
import datetime as dt
import math
import os
import random
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
from bench import SCHEMAS, best_of  # noqa: E402
from conftest import Cluster, pg_config  # noqa: E402
from gen_data import METRICS  # noqa: E402

START = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)
HOSTS = 100  # gen_data.py's default --series, the hosts of the main data
IDENTICAL, CLOSE, DIFFERENT = 0, 1, 2
STATUS = ["identical", "close", "DIFFERENT"]


def ts(t):
    return t.strftime("%Y-%m-%d %H:%M:%S+00")


def random_start(rng, first, days, hours):
    """A random whole minute t such that [t, t + hours) lies inside [first, first + days)."""
    return first + dt.timedelta(minutes=rng.randrange(days * 1440 - hours * 60 + 1))


def time_range(t1, hours):
    return f"time >= '{ts(t1)}' AND time < '{ts(t1 + dt.timedelta(hours=hours))}'"


def host_list(rng, hosts, n):
    return "hostname IN (" + ", ".join(f"'host_{h}'" for h in rng.sample(range(hosts), n)) + ")"


def groupby_minute(metrics, hosts_in, t1, hours):
    aggregates = ", ".join(f"max({m})" for m in metrics)
    return (f"SELECT date_trunc('minute', time) AS minute, {aggregates} FROM {{t}} WHERE {hosts_in} "
            f"AND {time_range(t1, hours)} GROUP BY minute ORDER BY minute")


# Query builders: (rng, hosts, days) -> SQL with {t} for the table.
def single_groupby(m, h, hours):
    return lambda rng, hosts, days: groupby_minute(rng.sample(METRICS, m), host_list(rng, hosts, h),
                                                   random_start(rng, START, days, hours), hours)


def cpu_max_all(h):
    def build(rng, hosts, days):
        aggregates = ", ".join(f"max({m})" for m in METRICS)
        where = f"{host_list(rng, hosts, h)} AND {time_range(random_start(rng, START, days, 8), 8)}"
        return f"SELECT date_trunc('hour', time) AS hour, {aggregates} FROM {{t}} WHERE {where} GROUP BY hour ORDER BY hour"
    return build


def double_groupby(m):
    def build(rng, hosts, days):
        metrics = METRICS if m == len(METRICS) else rng.sample(METRICS, m)
        aggregates = ", ".join(f"avg({c})" for c in metrics)
        return (f"SELECT date_trunc('hour', time) AS hour, hostname, {aggregates} FROM {{t}} "
                f"WHERE {time_range(random_start(rng, START, days, 12), 12)} GROUP BY hour, hostname ORDER BY hour, hostname")
    return build


def high_cpu(h):
    def build(rng, hosts, days):
        hosts_in = f"{host_list(rng, hosts, h)} AND " if h else ""
        return (f"SELECT * FROM {{t}} WHERE usage_user > 90.0 AND {hosts_in}"
                f"{time_range(random_start(rng, START, days, 12), 12)} ORDER BY time, hostname")
    return build


def groupby_orderby_limit(rng, hosts, days):
    end = START + dt.timedelta(minutes=rng.randrange(1, days * 1440))
    return (f"SELECT date_trunc('minute', time) AS minute, max(usage_user) FROM {{t}} WHERE time < '{ts(end)}' "
            f"GROUP BY minute ORDER BY minute DESC LIMIT 5")


QUERIES = {f"single-groupby-{m}-{h}-{t}": single_groupby(m, h, t)
           for m, h, t in [(1, 1, 1), (1, 1, 12), (1, 8, 1), (5, 1, 1), (5, 1, 12), (5, 8, 1)]}
QUERIES |= {f"cpu-max-all-{h}": cpu_max_all(h) for h in (1, 8)}
QUERIES |= {f"double-groupby-{name}": double_groupby(m) for name, m in (("1", 1), ("5", 5), ("all", len(METRICS)))}
QUERIES |= {"high-cpu-all": high_cpu(None), "high-cpu-1": high_cpu(1),
            "lastpoint": lambda rng, hosts, days: "SELECT DISTINCT ON (hostname) * FROM {t} ORDER BY hostname, time DESC",
            "groupby-orderby-limit": groupby_orderby_limit}


def csv_path(days, hosts):
    """The cached CSV (bench.py's file name for 100 hosts), generated by gen_data.py when missing."""
    path = f"/tmp/tsbucket-bench-devops-{days}d{'' if hosts == HOSTS else f'-{hosts}h'}.csv"
    if not os.path.exists(path):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, os.path.join(HERE, "gen_data.py"), "devops", path + ".tmp",
                        "--days", str(days), "--series", str(hosts)], check=True)
        os.rename(path + ".tmp", path)
        print(f"generated {path} in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    os.chmod(path, 0o644)
    return path


def create_and_load(conn, table, kind, path, granularity, available):
    columns = SCHEMAS["devops"][0]
    print(f"loading {table}", file=sys.stderr)
    conn.execute(f"DROP TABLE IF EXISTS {table}")
    if kind == "heap":
        conn.execute(f"CREATE TABLE {table} ({columns})")
        conn.execute(f"CREATE INDEX ON {table} (hostname, time DESC)")
        conn.execute(f"CREATE INDEX ON {table} (time DESC)")
    elif kind == "tsbucket":
        conn.execute(f"CREATE TABLE {table} ({columns}) USING tsbucket")
        conn.execute(f"SELECT tsbucket.create_timeseries('{table}', 'time', 'hostname', granularity => '{granularity}')")
    elif kind == "timescaledb":
        conn.execute("CREATE EXTENSION IF NOT EXISTS timescaledb")
        conn.execute(f"CREATE TABLE {table} ({columns})")
        conn.execute(f"SELECT create_hypertable('{table}', 'time', chunk_time_interval => interval '12 hours')")
        conn.execute(f"ALTER TABLE {table} SET (timescaledb.compress, timescaledb.compress_segmentby = 'hostname', "
                     "timescaledb.compress_orderby = 'time DESC')")
    elif kind == "columnar":
        conn.execute(f"CREATE EXTENSION IF NOT EXISTS {'citus_columnar' if 'citus_columnar' in available else 'citus'}")
        conn.execute(f"CREATE TABLE {table} ({columns}) USING columnar")
    conn.execute(f"COPY {table} FROM '{path}' (FORMAT csv)")
    if kind == "timescaledb":
        conn.execute(f"SELECT count(compress_chunk(c)) FROM show_chunks('{table}') c")
    conn.execute(f"VACUUM ANALYZE {table}")


def compare(expected, got):
    if expected == got:
        return IDENTICAL
    if len(expected) != len(got) or any(len(a) != len(b) for a, b in zip(expected, got)):
        return DIFFERENT
    for a, b in zip(expected, got):
        for x, y in zip(a, b):
            if x != y and not (isinstance(x, float) and isinstance(y, float) and math.isclose(x, y, rel_tol=1e-9)):
                return DIFFERENT
    return CLOSE


def measure(conn, tables, sqls, runs):
    """tables: {label: table}, the first is the reference. Per label: median over the instances of
    the best of `runs` runs in ms, and the worst answer status compared with the reference."""
    best = {label: [] for label in tables}
    worst = {label: IDENTICAL for label in tables}
    skipscan = "timescaledb" in tables
    for sql in sqls:
        reference = None
        for label, table in tables.items():
            if skipscan:
                # TimescaleDB's SkipScan speeds up DISTINCT ON over any btree index, heap's
                # too: measure heap (and tsbucket) as they are without TimescaleDB.
                conn.execute(f"SET timescaledb.enable_skipscan = {'on' if label == 'timescaledb' else 'off'}")
            q = sql.replace("{t}", table)
            rows = conn.execute(q).fetchall()  # the warm-up run gives the answer
            best[label].append(best_of(conn, q, runs))
            if reference is None:
                reference = rows
            else:
                worst[label] = max(worst[label], compare(reference, rows))
    return {label: statistics.median(v) * 1000 for label, v in best.items()}, worst


def fmt_ms(ms):
    return f"{ms:.2f}" if ms < 10 else f"{ms:,.1f}"


def fmt_ratio(r):
    return f"{r:.3f}" if r < 0.1 else f"{r:.2f}"


def answers(worst):
    status = max(worst.values())
    return STATUS[status] + ("" if status == IDENTICAL else
                             " (" + ", ".join(f"{label}: {STATUS[s]}" for label, s in worst.items() if s) + ")")


def run_tsbs(conn, a, available):
    tables = {"heap": "cpu_heap", "tsbucket": "cpu_tsbucket"}
    if "timescaledb" in available:
        tables["timescaledb"] = "cpu_timescaledb"
    if "citus_columnar" in available or "citus" in available:
        tables["columnar"] = "cpu_columnar"
    path = csv_path(a.days, HOSTS)
    for kind, table in list(tables.items()):
        try:
            create_and_load(conn, table, kind, path, a.granularity, available)
        except Exception as e:
            if kind in ("heap", "tsbucket"):
                raise
            print(f"dropping contender {kind}: {e}", file=sys.stderr)
            del tables[kind]
    rows = conn.execute("SELECT count(*) FROM cpu_heap").fetchone()[0]
    version = conn.execute("SHOW server_version").fetchone()[0]
    others = [label for label in tables if label != "heap"]
    print(f"\n## TSBS devops (cpu-only): {rows:,} rows, {a.days} days, {HOSTS} hosts, tsbucket granularity "
          f"{a.granularity}, PostgreSQL {version}, {dt.date.today().isoformat()}\n")
    print("| query | " + " | ".join(f"{label} ms" for label in tables) + " | "
          + " | ".join(f"{label} / heap" for label in others) + " | answers |")
    print("|---|" + "---:|" * (len(tables) + len(others)) + "---|")
    ratios = {label: [] for label in others}
    explains, different = [], False
    for name in a.queries:
        rng = random.Random(f"{a.seed}:{name}")  # the same instances whatever --queries selects
        sqls = [QUERIES[name](rng, HOSTS, a.days) for _ in range(1 if name == "lastpoint" else a.instances)]
        ms, worst = measure(conn, tables, sqls, a.runs)
        different |= max(worst.values()) == DIFFERENT
        for label in others:
            ratios[label].append(ms[label] / ms["heap"])
        print(f"| {name} | " + " | ".join(fmt_ms(ms[label]) for label in tables) + " | "
              + " | ".join(fmt_ratio(ms[label] / ms['heap']) for label in others) + f" | {answers(worst)} |")
        if a.explain:
            plan = conn.execute("EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) " + sqls[0].replace("{t}", "cpu_tsbucket"))
            explains.append((name, sqls[0], "\n".join(r[0] for r in plan.fetchall())))
    geomean = {label: math.exp(statistics.fmean(map(math.log, r))) for label, r in ratios.items()}
    print("| geomean |" + " |" * len(tables) + " " + " | ".join(fmt_ratio(geomean[label]) for label in others) + " | |")
    for name, sql, plan in explains:
        print(f"\n### {name} on tsbucket\n\n```\n{sql.replace('{t}', 'cpu_tsbucket')}\n\n{plan}\n```")
    return different


def run_history(conn, a, available):
    rng = random.Random(f"{a.seed}:history")
    picks = [(rng.choice(METRICS), rng.randrange(a.long_hosts), rng.randrange(23 * 60 + 1)) for _ in range(a.instances)]
    results, different = {}, False
    for length, days in (("short", a.days), ("long", a.long_days)):
        tables = {kind: f"history_{length}_{kind}" for kind in ("heap", "tsbucket")}
        path = csv_path(days, a.long_hosts)
        for kind, table in tables.items():
            create_and_load(conn, table, kind, path, a.granularity, available)
        last_day = START + dt.timedelta(days=days - 1)
        sqls = [groupby_minute([metric], f"hostname IN ('host_{host}')", last_day + dt.timedelta(minutes=minute), 1)
                for metric, host, minute in picks]
        ms, worst = measure(conn, tables, sqls, a.runs)
        different |= max(worst.values()) == DIFFERENT
        rows = conn.execute(f"SELECT count(*) FROM {tables['heap']}").fetchone()[0]
        results[length] = (days, rows, ms, worst)
    print(f"\n## History length: one host, one hour in the last day ({a.long_hosts} hosts)\n")
    print("| history | heap ms | tsbucket ms |\n|---|---:|---:|")
    for days, rows, ms, worst in results.values():
        print(f"| {days} days ({rows:,} rows) | {fmt_ms(ms['heap'])} | {fmt_ms(ms['tsbucket'])} |")
    (_, _, short, w1), (_, _, long, w2) = results.values()
    ratio = long["tsbucket"] / short["tsbucket"]
    print(f"\ntsbucket long / short: {ratio:.2f}x ({'within' if ratio <= 1.5 else 'OVER'} the 1.5x target); "
          f"heap long / short: {long['heap'] / short['heap']:.2f}x; answers: short {answers(w1)}, long {answers(w2)}")
    return different


def cluster_conf():
    conf = ["shared_buffers = 2GB", "max_wal_size = 16GB", "checkpoint_timeout = 30min", "synchronous_commit = off",
            "max_parallel_workers_per_gather = 0", "jit = off"]
    sharedir = subprocess.check_output([pg_config(os.environ.get("TSBUCKET_PG", "pg15")), "--sharedir"], text=True).strip()
    if os.path.exists(os.path.join(sharedir, "extension", "timescaledb.control")):  # it must be preloaded
        # No job scheduler: the benchmark compresses by hand, and on PostgreSQL
        # 15.20 TimescaleDB 2.28's job runner drops a portal that never started.
        conf += ["shared_preload_libraries = 'tsbucket,timescaledb'", "timescaledb.telemetry_level = off",
                 "timescaledb.max_background_workers = 0"]
    return conf


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--days", type=int, default=3)
    p.add_argument("--granularity", default="seconds")
    p.add_argument("--instances", type=int, default=8, help="random instances per query type")
    p.add_argument("--runs", type=int, default=3, help="timed runs per instance and contender (best counts)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--queries", default="", help="comma-separated query types (default: all 15)")
    p.add_argument("--explain", action="store_true", help="EXPLAIN ANALYZE one instance of each type on tsbucket")
    p.add_argument("--history", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--long-days", type=int, default=90)
    p.add_argument("--long-hosts", type=int, default=10)
    a = p.parse_args()
    a.queries = a.queries.split(",") if a.queries else list(QUERIES)
    if set(a.queries) - set(QUERIES):
        p.error(f"unknown queries {sorted(set(a.queries) - set(QUERIES))}; known: {', '.join(QUERIES)}")
    cluster = Cluster(extra_conf=cluster_conf())
    try:
        with cluster.connect() as conn:
            conn.execute("SET TimeZone = 'UTC'")
            available = {r[0] for r in conn.execute("SELECT name FROM pg_available_extensions").fetchall()}
            different = run_tsbs(conn, a, available)
            if a.history:
                different |= run_history(conn, a, available)
    finally:
        cluster.destroy()
    if different:
        print("\nSome answers were DIFFERENT from heap's.", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
