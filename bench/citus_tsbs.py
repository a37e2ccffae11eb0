"""The 15 TSBS devops query types on a tsbucket table distributed with Citus
(a coordinator and two workers on this machine, sharded by hostname, as
MongoDB shards a time-series collection by its metaField) against the same
data in a tsbucket table on one node (a local table on the coordinator),
side by side in one run:

  - every answer of the distributed table must equal the single-node one's
    (exactly, else floats within 1e-9 relative), or the exit status is 1;
  - each query type's shard plan (EXPLAIN VERBOSE of its first instance: the
    remote plan of one task) must be a TsBucketScan that does inside the scan
    what the single node's does (aggregation, conditions on decoded arrays
    and on bucket statistics), or the exit status is 1;
  - it prints, per type, the median over the instances of the best of --runs
    runs on each table and the distributed / single-node ratio: the
    distributed overhead.

Both tables live in the same cluster (the coordinator's), loaded from the same
CSV (bench/gen_data.py devops), with Citus's defaults (citus.shard_count 32
unless --shards), the worker at its default interval, parallel query and JIT
at their defaults.

Run (builds and installs the release extension, then starts its own nodes):
  . scripts/pg-env.sh && install_extension pg15 --release && TSBUCKET_PG=pg15 $TSBUCKET_VENV/bin/python bench/citus_tsbs.py
"""

import argparse
import datetime as dt
import json
import os
import random
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
from bench import SCHEMAS  # noqa: E402
from conftest import CitusFormation, citus_installed  # noqa: E402
from tsbs import DEVOPS_QUERIES, DIFFERENT, HOSTS, answers, csv_path, fmt_ms, fmt_ratio, measure  # noqa: E402

def plan_summary(conn, sql):
    """What the (first) TsBucketScan of `sql`'s plan does, the remote plan of
    one task on a distributed table: its bucket access and what it computes
    inside the scan (aggregates, conditions on decoded arrays, conditions on
    bucket statistics)."""
    doc = conn.execute("EXPLAIN (VERBOSE, FORMAT JSON) " + sql).fetchone()[0]
    doc = json.loads(doc) if isinstance(doc, str) else doc
    nodes = []

    def walk(node):
        if isinstance(node, dict):
            if node.get("Custom Plan Provider") == "TsBucketScan":
                nodes.append(node)
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(doc)
    if not nodes:
        return None
    n = nodes[0]
    parts = [n.get("Bucket Access", "?")]
    for key in ("Vectorized Aggregation", "Vectorized Filter", "Bucket Filter"):
        if key in n:
            parts.append(key)
    return ", ".join(parts)


def load(conn, path, shards):
    columns = SCHEMAS["devops"][0]
    for table, distributed in (("cpu_single", False), ("cpu_dist", True)):
        conn.execute(f"DROP TABLE IF EXISTS {table}")
        conn.execute(f"CREATE TABLE {table} ({columns}) USING tsbucket")
        conn.execute(f"SELECT tsbucket.create_timeseries('{table}', 'time', 'hostname')")
        if distributed:
            conn.execute(f"SELECT create_distributed_table('{table}', 'hostname', shard_count => {shards})")
        t0 = time.perf_counter()
        conn.execute(f"COPY {table} FROM '{path}' (FORMAT csv)")
        copy_s = time.perf_counter() - t0
        conn.execute(f"VACUUM ANALYZE {table}")
        stats = conn.execute(f"SELECT rows, buckets, total_bytes FROM tsbucket.stats('{table}')").fetchone()
        yield table, copy_s, stats


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--days", type=int, default=3)
    p.add_argument("--shards", type=int, default=32, help="shards of the distributed table (Citus's default: 32)")
    p.add_argument("--instances", type=int, default=8, help="random instances per query type")
    p.add_argument("--runs", type=int, default=3, help="timed runs per instance and table (best counts)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--queries", default="", help="comma-separated query types (default: all 15)")
    a = p.parse_args()
    a.queries = a.queries.split(",") if a.queries else list(DEVOPS_QUERIES)
    if not citus_installed():
        print("Citus is not installed for this PostgreSQL (scripts/setup.sh builds it from ../shared/vendor)", file=sys.stderr)
        return 2
    path = csv_path(a.days, HOSTS)
    f = CitusFormation(shards=a.shards, roles=(), worker=True,
                       extra_conf=["shared_buffers = 1GB", "max_wal_size = 16GB", "checkpoint_timeout = 30min",
                                   "tsbucket.worker_interval = 60"])
    different = False
    try:
        with f.connect(user="postgres") as conn:
            conn.execute("SET TimeZone = 'UTC'")
            loaded = list(load(conn, path, a.shards))
            version = conn.execute("SHOW server_version").fetchone()[0]
            citus = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'citus'").fetchone()[0]
            print(f"\n## TSBS devops on Citus: {loaded[0][2][0]:,} rows, {a.days} days, {HOSTS} hosts; "
                  f"a coordinator and 2 workers on one machine, {a.shards} shards by hostname; PostgreSQL {version}, "
                  f"Citus {citus}, {dt.date.today().isoformat()}\n")
            for table, copy_s, (rows, buckets, total) in loaded:
                print(f"- {table}: COPY {rows / copy_s:,.0f} rows/s, {buckets:,} buckets, {total / rows:.2f} bytes/row")
            print("\n| query | single node ms | distributed ms | distributed / single | answers | shard plan |")
            print("|---|---:|---:|---:|---|---|")
            tables = {"single": "cpu_single", "distributed": "cpu_dist"}
            unvectorised = []
            for name in a.queries:
                rng = random.Random(f"{a.seed}:{name}")
                q = DEVOPS_QUERIES[name]
                sql_list = [q.build(rng, HOSTS, a.days, False) for _ in range(1 if name == "lastpoint" else a.instances)]
                sqls = {label: sql_list for label in tables}
                ms, worst, _ = measure(conn, tables, sqls, a.runs, q.ordered)
                different |= max(worst.values()) == DIFFERENT
                local = plan_summary(conn, sqls[0].replace("{t}", "cpu_single"))
                summary = plan_summary(conn, sqls[0].replace("{t}", "cpu_dist"))
                # The shard's scan must do inside what the single node's does (its access may differ: a shard
                # holds a few series, and Citus may send it a different form of the query).
                if summary is None or any(k in (local or "") and k not in summary
                                          for k in ("Vectorized Aggregation", "Vectorized Filter", "Bucket Filter")):
                    unvectorised.append(name)
                print(f"| {name} | {fmt_ms(ms['single'])} | {fmt_ms(ms['distributed'])} | "
                      f"{fmt_ratio(ms['distributed'] / ms['single'])} | {answers(worst)} | {summary or 'NOT a TsBucketScan'} |")
            if unvectorised:
                print(f"\nShard plans doing less inside the scan than the single node's: {', '.join(unvectorised)}")
                different = True
    finally:
        f.destroy()
    if different:
        print("\nSome answers were DIFFERENT from the single-node table's.", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
