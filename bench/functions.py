"""Time functions, side by side with Postgres's own, in one run:
- moving_avg vs avg over a 1000-row sliding frame on 1M rows;
- tsbucket.date_trunc vs date_trunc and date_bin on 10M timestamps, per unit."""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "integration"))
from conftest import Cluster  # noqa: E402


def timed(c, sql, runs=1):
    best = None
    for _ in range(runs):
        t0 = time.perf_counter()
        c.execute(sql).fetchall()
        dt = time.perf_counter() - t0
        best = dt if best is None else min(best, dt)
    return best


def main():
    cluster = Cluster(extra_conf=["shared_buffers = 2GB", "work_mem = 256MB", "max_parallel_workers_per_gather = 0",
                                  "timezone = 'UTC'"])
    try:
        with cluster.connect() as c:
            c.execute("SELECT setseed(0.1)")
            c.execute("CREATE TABLE m AS SELECT i, random() AS x FROM generate_series(1, 1000000) i")
            c.execute("CREATE TABLE ts AS SELECT '2000-01-01'::timestamptz + i * interval '17.3 seconds' AS t "
                      "FROM generate_series(1, 10000000) i")
            c.execute("VACUUM ANALYZE m, ts")
            frame = "OVER (ORDER BY i ROWS 999 PRECEDING)"
            ours = timed(c, f"SELECT sum(a) FROM (SELECT tsbucket.moving_avg(x) {frame} a FROM m) s", 3)
            theirs = timed(c, f"SELECT sum(a) FROM (SELECT avg(x) {frame} a FROM m) s")
            print("\n## moving_avg vs avg, 1000-row sliding frame, 1M rows\n")
            print("| function | time | speed-up |\n|---|---:|---:|")
            print(f"| avg(x) OVER (ROWS 999 PRECEDING) | {theirs * 1000:,.0f} ms | 1.0x |")
            print(f"| tsbucket.moving_avg(x) OVER (ROWS 999 PRECEDING) | {ours * 1000:,.0f} ms | {theirs / ours:.1f}x |")

            print("\n## tsbucket.date_trunc vs Postgres, 10M timestamptz (UTC)\n")
            print("| unit | date_trunc | date_bin | tsbucket.date_trunc | tsbucket vs date_trunc |")
            print("|---|---:|---:|---:|---:|")
            bins = {"second": "1 second", "minute": "1 minute", "hour": "1 hour", "day": "1 day", "week": "7 days"}
            for unit in ["second", "minute", "hour", "day", "week", "month", "quarter", "year"]:
                pg = timed(c, f"SELECT max(date_trunc('{unit}', t)) FROM ts", 3)
                binned = (timed(c, f"SELECT max(date_bin('{bins[unit]}', t, '2000-01-01')) FROM ts", 3)
                          if unit in bins else None)
                ts = timed(c, f"SELECT max(tsbucket.date_trunc('{unit}', t)) FROM ts", 3)
                b = f"{binned * 1000:,.0f} ms" if binned else "-"
                print(f"| {unit} | {pg * 1000:,.0f} ms | {b} | {ts * 1000:,.0f} ms | {ts / pg:.2f}x the time |")
            base = timed(c, "SELECT max(t) FROM ts", 3)
            print(f"\n(scanning the 10M timestamps alone takes {base * 1000:,.0f} ms)")
    finally:
        cluster.destroy()


if __name__ == "__main__":
    main()
