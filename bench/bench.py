"""Loads the same data into tsbucket and into a heap table with an index on
(meta, time), side by side in one run, and prints COPY rows/s, total bytes
(every relation, index and TOAST table) and a full-table aggregate scan, with
the ratios. (bench/tsbs.py adds TimescaleDB and Citus columnar when installed.)"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "integration"))
from conftest import Cluster  # noqa: E402

SCHEMAS = {
    "devops": (
        "time timestamptz NOT NULL, hostname text, region text, datacenter text, rack text, os text, arch text, "
        "team text, service text, service_version text, service_environment text, usage_user float8, "
        "usage_system float8, usage_idle float8, usage_nice float8, usage_iowait float8, usage_irq float8, "
        "usage_softirq float8, usage_steal float8, usage_guest float8, usage_guest_nice float8",
        "hostname",
        "count(*), sum(usage_user), sum(usage_system), sum(usage_idle), sum(usage_nice), sum(usage_iowait), "
        "sum(usage_irq), sum(usage_softirq), sum(usage_steal), sum(usage_guest), sum(usage_guest_nice)",
    ),
    "sensor": (
        "time timestamptz NOT NULL, sensor text, temperature float8, humidity float8, pressure float8",
        "sensor",
        "count(*), sum(temperature), sum(humidity), sum(pressure)",
    ),
}


def timed(conn, sql):
    t0 = time.perf_counter()
    conn.execute(sql)
    return time.perf_counter() - t0


def best_of(conn, sql, n=3):
    return min(timed(conn, sql) for _ in range(n))


def run(cluster, dataset, path, rows, granularity):
    columns, meta, aggregate = SCHEMAS[dataset]
    results = {}
    with cluster.connect() as c:
        # TimescaleDB and Citus columnar are measured side by side by bench/tsbs.py.
        contenders = [("heap + index", "heap"), ("tsbucket", "tsbucket")]
        for label, kind in contenders:
            t = f"{dataset}_{kind}"
            c.execute(f"DROP TABLE IF EXISTS {t}")
            if kind == "heap":
                c.execute(f"CREATE TABLE {t} ({columns})")
                c.execute(f"CREATE INDEX ON {t} ({meta}, time)")
            elif kind == "tsbucket":
                c.execute(f"CREATE TABLE {t} ({columns}) USING tsbucket")
                c.execute(f"SELECT tsbucket.create_timeseries('{t}', 'time', '{meta}', granularity => '{granularity}')")
            c.execute("CHECKPOINT")
            load = timed(c, f"COPY {t} FROM '{path}' (FORMAT csv)")
            c.execute(f"VACUUM ANALYZE {t}")
            if kind == "tsbucket":
                size = c.execute(f"SELECT total_bytes FROM tsbucket.stats('{t}')").fetchone()[0]
                stats = c.execute(f"SELECT buckets, avg_rows_per_bucket, compression_ratio FROM tsbucket.stats('{t}')").fetchone()
            else:
                size = c.execute(f"SELECT pg_total_relation_size('{t}')").fetchone()[0]
                stats = None
            scan = best_of(c, f"SELECT {aggregate} FROM {t}")
            results[label] = dict(load=load, size=size, scan=scan, stats=stats)
    heap = results["heap + index"]
    print(f"\n## {dataset}: {rows:,} rows (tsbucket granularity {granularity})\n")
    print("| table | COPY rows/s | total bytes | bytes/row | full aggregate scan | size vs heap | COPY vs heap | scan vs heap |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for label, r in results.items():
        print(f"| {label} | {rows / r['load']:,.0f} | {r['size']:,} | {r['size'] / rows:.2f} | {r['scan'] * 1000:,.0f} ms "
              f"| {heap['size'] / r['size']:.1f}x smaller | {heap['load'] / r['load']:.2f}x | {heap['scan'] / r['scan']:.2f}x |")
    ts = results["tsbucket"]["stats"]
    print(f"\ntsbucket: {ts[0]:,} buckets, {ts[1]} rows per bucket, payload compression {ts[2]}x")
    return results


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--datasets", default="devops,sensor")
    p.add_argument("--days", type=int, default=3)
    p.add_argument("--granularity", default="seconds")
    a = p.parse_args()
    cluster = Cluster(extra_conf=["shared_buffers = 2GB", "max_wal_size = 16GB", "checkpoint_timeout = 30min",
                                  "synchronous_commit = off", "max_parallel_workers_per_gather = 0"])
    try:
        for dataset in a.datasets.split(","):
            path = f"/tmp/tsbucket-bench-{dataset}-{a.days}d.csv"
            if not os.path.exists(path):
                t0 = time.perf_counter()
                os.system(f"{sys.executable} {os.path.dirname(__file__)}/gen_data.py {dataset} {path} --days {a.days}")
                print(f"generated {path} in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
            os.chmod(path, 0o644)
            rows = sum(1 for _ in open(path))
            run(cluster, dataset, path, rows, a.granularity)
    finally:
        cluster.destroy()
