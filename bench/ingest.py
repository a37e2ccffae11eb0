"""Ingest as devices write: side by side in one cluster, a heap table with a
(sensor, time) index against a tsbucket table (meta column sensor), written
the ways clients write:

  single-row INSERTs, each its own transaction (pgbench, 1, 8 and 32 clients)
  10-row multi-VALUES INSERTs, each its own transaction (10 sensors a statement)
  psycopg executemany of 20,000 single-row INSERTs in one transaction

Per cell it prints rows/s (the median of --rounds runs, heap and tsbucket
alternating which goes first); for the 8-client single-row run also WAL bytes per
row (from the start of ingest until every row is in buckets, the drain
included; the heap's until its rows are written), bytes per row on disk right
after ingest and after a compaction round and VACUUM, and on that trickled
table (rows in the tail and in buckets, as the worker left them) the
last-10-minutes aggregate against the heap's and the last point per series
against the same table compacted. Answers are compared with the heap's.

The cluster runs as users run it: default settings (synchronous_commit on,
checkpoints as configured), tsbucket preloaded, the worker on at its
default interval.

Run (builds and installs the release extension, then starts its own cluster):
  . scripts/pg-env.sh && install_extension pg15 --release && TSBUCKET_PG=pg15 $TSBUCKET_VENV/bin/python bench/ingest.py
"""

import argparse
import datetime as dt
import os
import re
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
from conftest import Cluster, as_postgres  # noqa: E402

SENSORS = 100
SCHEMA = "time timestamptz NOT NULL, sensor text NOT NULL, temp float8, hum float8"
LAST_10_MIN = ("SELECT sensor, avg(temp), max(hum) FROM {t} WHERE time > (SELECT max(time) FROM {t}) - interval '10 minutes' "
               "GROUP BY sensor ORDER BY sensor")
LAST_POINT = "SELECT DISTINCT ON (sensor) sensor, time, temp, hum FROM {t} ORDER BY sensor, time DESC"

SINGLE = """\\set s random(0, {last})
INSERT INTO {t} VALUES (clock_timestamp(), 's' || :s, random() * 100, random() * 100);
"""
MULTI = """\\set s random(0, {last10})
INSERT INTO {t} VALUES {values};
"""


def make_tables(c, suffix):
    heap, ts = f"h_{suffix}", f"t_{suffix}"
    for t in (heap, ts):
        c.execute(f"DROP TABLE IF EXISTS {t}")
    c.execute(f"CREATE TABLE {heap} ({SCHEMA})")
    c.execute(f"CREATE INDEX ON {heap} (sensor, time)")
    c.execute(f"CREATE TABLE {ts} ({SCHEMA}) USING tsbucket")
    c.execute(f"SELECT tsbucket.create_timeseries('{ts}', 'time', 'sensor')")
    return heap, ts


def pgbench(cluster, script, clients, seconds):
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False, dir="/tmp") as f:
        f.write(script)
    os.chmod(f.name, 0o644)
    out = as_postgres([f"{cluster.bindir}/pgbench", "-h", cluster.dir, "-p", str(cluster.port), "-U", "postgres", "-n",
                       "-c", str(clients), "-j", str(min(clients, 8)), "-T", str(seconds), "-f", f.name, "test"]).stdout
    os.unlink(f.name)
    return float(re.search(r"tps = ([0-9.]+)", out).group(1))


def server_cpu(cluster):
    """CPU seconds the cluster's processes have used so far: the live ones
    (backends, the worker, autovacuum, the WAL writer...) plus, through the
    postmaster's cutime/cstime, every child it has reaped (pgbench's
    backends once their run ends). The drain's and autovacuum's work count
    against the table that caused them, as a DBA's top would show it."""
    tck = os.sysconf("SC_CLK_TCK")
    with open(os.path.join(cluster.data, "postmaster.pid")) as f:
        pm = int(f.readline())

    def stat(pid):
        with open(f"/proc/{pid}/stat") as f:
            # The fields after the command name, which may hold spaces.
            return f.read().rsplit(")", 1)[1].split()

    total = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            f = stat(pid)
        except OSError:
            continue
        if int(pid) == pm:
            total += int(f[11]) + int(f[12]) + int(f[13]) + int(f[14])  # utime stime cutime cstime
        elif int(f[1]) == pm:
            total += int(f[11]) + int(f[12])
    return total / tck


def spread_and_cpu(ratios, cpu):
    """The cells after the rates: each round's ratio, sorted, then the median
    server CPU per row of each side and their ratio."""
    ch, ct = statistics.median(cpu["h"]), statistics.median(cpu["t"])
    return f"{' '.join(f'{r:.2f}' for r in sorted(ratios))} | {ch:.0f} | {ct:.0f} | {ct / ch:.2f} |"


def lsn(c):
    return c.execute("SELECT pg_current_wal_lsn()").fetchone()[0]


def wal_since(c, start):
    return c.execute("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %s)", (start,)).fetchone()[0]


def heap_bytes(c, t):
    return c.execute(f"SELECT pg_total_relation_size('{t}')").fetchone()[0]


def ts_bytes(c, t):
    return c.execute(f"SELECT tsbucket.table_size('{t}')").fetchone()[0]


def rows_of(c, t):
    return c.execute(f"SELECT count(*) FROM {t}").fetchone()[0]


def timed(c, q, runs):
    best = []
    for _ in range(runs):
        t0 = time.perf_counter()
        rows = c.execute(q).fetchall()
        best.append(time.perf_counter() - t0)
    return min(best) * 1000, rows


def close(a, b):
    def norm(rows):
        return [tuple(round(v, 6) if isinstance(v, float) else v for v in r) for r in rows]
    return norm(a) == norm(b)


def trickled(c, a, cluster, heap, ts, start):
    """The detail run's tables right after ingest (the tail as the worker left
    it), then drained and compacted: sizes, queries, WAL until every row is in
    buckets (no other table has rows waiting: they were drained before)."""
    n_heap, n_ts = rows_of(c, heap), rows_of(c, ts)
    during = (heap_bytes(c, heap) / n_heap, ts_bytes(c, ts) / n_ts)
    tail = c.execute(f"SELECT tail_rows, tail_bytes FROM tsbucket.stats('{ts}')").fetchone()
    q_heap, _ = timed(c, LAST_10_MIN.format(t=heap), a.runs)
    q_ts, r_ts = timed(c, LAST_10_MIN.format(t=ts), a.runs)
    lp_ts, lp_rows = timed(c, LAST_POINT.format(t=ts), a.runs)
    lp_heap, lp_heap_rows = timed(c, LAST_POINT.format(t=heap), a.runs)
    # Drain and compact now (as the worker's next round would), then VACUUM.
    before_drain, cpu0 = lsn(c), server_cpu(cluster)
    c.execute(f"SELECT * FROM tsbucket.compact('{ts}')")
    drain_wal, drain_cpu = wal_since(c, before_drain), server_cpu(cluster) - cpu0
    wal = wal_since(c, start)
    c.execute(f"VACUUM {heap}")
    c.execute(f"VACUUM {ts}")
    after = (heap_bytes(c, heap) / n_heap, ts_bytes(c, ts) / n_ts)
    lp_compacted, lp_rows_compacted = timed(c, LAST_POINT.format(t=ts), a.runs)
    _, r_ts_compacted = timed(c, LAST_10_MIN.format(t=ts), 1)
    # (Each table got its own rows from pgbench: the same table before and after compaction must agree.)
    same = close(lp_rows, lp_rows_compacted) and close(r_ts, r_ts_compacted) and len(lp_heap_rows) == len(lp_rows)
    return {"during": during, "after": after, "tail": tail, "agg": (q_heap, q_ts), "lp": (lp_ts, lp_compacted, lp_heap),
            "wal": wal, "drain_wal": drain_wal, "drain_cpu": drain_cpu, "same": same}


def run(a):
    cluster = Cluster(worker=True, extra_conf=["max_connections = 100"])
    results = []
    different = False
    try:
        with cluster.connect() as c:
            version = c.execute("SHOW server_version").fetchone()[0]
            drain_rows = c.execute("SHOW tsbucket.tail_drain_rows").fetchone()[0]
            interval = c.execute("SHOW tsbucket.worker_interval").fetchone()[0]
            print(f"## Ingest: heap + (sensor, time) index vs tsbucket, {SENSORS} sensors, PostgreSQL {version}, "
                  f"{dt.date.today()}\n")
            print(f"Default settings (synchronous_commit on); the worker at its default interval ({interval}), "
                  f"tsbucket.tail_drain_rows = {drain_rows}; {a.seconds} s per pgbench run.\n")
            print("| workload | clients | heap rows/s | tsbucket rows/s | tsbucket / heap | each round's ratio | "
                  "heap server CPU µs/row | tsbucket server CPU µs/row (drain included) | CPU tsbucket / heap |")
            print("|---|---:|---:|---:|---:|---|---:|---:|---:|")
            detail = None
            for shape in ("single", "multi"):
                for clients in a.clients:
                    suffix = f"{shape}_{clients}"
                    if shape == "single":
                        per = 1
                    else:
                        values = ", ".join(f"(clock_timestamp(), 's' || (:s + {k}), random() * 100, random() * 100)" for k in range(10))
                        per = 10
                    rates = {"h": [], "t": []}
                    cpu = {"h": [], "t": []}
                    for rnd in range(a.rounds):
                        heap, ts = make_tables(c, suffix)
                        # Alternating which goes first cancels the drift of one cluster over a run.
                        for t in ((heap, ts) if rnd % 2 == 0 else (ts, heap)):
                            if shape == "single":
                                script = SINGLE.format(t=t, last=SENSORS - 1)
                            else:
                                script = MULTI.format(t=t, last10=SENSORS - 10, values=values)
                            c.execute("CHECKPOINT")
                            start = lsn(c)
                            cpu0 = server_cpu(cluster)
                            tps = pgbench(cluster, script, clients, a.seconds)
                            time.sleep(0.2)  # pgbench's backends exit, so the postmaster has reaped them
                            used = server_cpu(cluster) - cpu0
                            rates[t[0]].append(tps * per)
                            if shape == "single" and clients == a.detail_clients and rnd == 0:
                                detail = detail or {}
                                detail[t] = {"wal": wal_since(c, start), "rows": rows_of(c, t)}
                                if t == ts:
                                    # The trickled table as ingest left it, then drained: its WAL counts
                                    # from the start of ingest until every row is in buckets.
                                    detail["analysis"] = trickled(c, a, cluster, heap, ts, start)
                                    used += detail["analysis"]["drain_cpu"]
                            elif t == ts:
                                # Drained now, so that the worker's drain of its rows runs in no other
                                # run; the drain's CPU is part of this run's cost.
                                cpu1 = server_cpu(cluster)
                                c.execute(f"SELECT * FROM tsbucket.compact('{ts}')")
                                used += server_cpu(cluster) - cpu1
                            cpu[t[0]].append(used / rows_of(c, t) * 1e6)
                        if not (shape == "single" and clients == a.detail_clients):
                            c.execute(f"DROP TABLE {heap}, {ts}")
                    h, t = statistics.median(rates["h"]), statistics.median(rates["t"])
                    ratios = [y / x for x, y in zip(rates["h"], rates["t"])]
                    print(f"| {'single-row INSERT' if shape == 'single' else '10-row INSERT'} | {clients} | "
                          f"{h:,.0f} | {t:,.0f} | {t / h:.2f} | {spread_and_cpu(ratios, cpu)}", flush=True)
                    results.append((shape, clients, h, t))
            # executemany in one transaction
            start_time = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)
            rows = [(start_time + dt.timedelta(milliseconds=10 * i), f"s{i % SENSORS}", i / 7, i / 11) for i in range(20000)]
            secs = {"h": [], "t": []}
            cpu = {"h": [], "t": []}
            for rnd in range(a.rounds):
                heap, ts = make_tables(c, "many")
                for t in ((heap, ts) if rnd % 2 == 0 else (ts, heap)):
                    cpu0 = server_cpu(cluster)
                    with cluster.connect(autocommit=False) as w:
                        t0 = time.perf_counter()
                        with w.cursor() as cur:
                            cur.executemany(f"INSERT INTO {t} VALUES (%s, %s, %s, %s)", rows)
                        w.commit()
                        secs[t[0]].append(time.perf_counter() - t0)
                    time.sleep(0.2)  # the backend's exit, so the postmaster has reaped it
                    cpu[t[0]].append((server_cpu(cluster) - cpu0) / len(rows) * 1e6)
            h, t = statistics.median(secs["h"]), statistics.median(secs["t"])
            ratios = [x / y for x, y in zip(secs["h"], secs["t"])]
            tail_after = c.execute(f"SELECT tail_rows FROM tsbucket.stats('{ts}')").fetchone()[0]
            print(f"| executemany, one transaction (20,000 rows) | 1 | {20000 / h:,.0f} | {20000 / t:,.0f} | {h / t:.2f} | "
                  f"{spread_and_cpu(ratios, cpu)}")
            print(f"\nRates are medians of {a.rounds} runs per cell, heap and tsbucket alternating which runs first, "
                  f"fresh tables each run. executemany: {tail_after} rows in the tail after its commit (its rows sit in "
                  f"buckets at once); {heap_bytes(c, heap):,} bytes heap + index, {ts_bytes(c, ts):,} tsbucket.\n")

            # The trickled table of the detail run: WAL, bytes, queries.
            r = detail["analysis"]
            suffix = f"single_{a.detail_clients}"
            heap, ts = f"h_{suffix}", f"t_{suffix}"
            n_heap, n_ts = detail[heap]["rows"], detail[ts]["rows"]
            print(f"On the {a.detail_clients}-client single-row tables ({n_heap:,} heap rows, {n_ts:,} tsbucket rows; "
                  f"{r['tail'][0]:,} rows, {r['tail'][1]:,} bytes in the tail when ingest stopped):\n")
            print("| | heap + index | tsbucket | tsbucket / heap |")
            print("|---|---:|---:|---:|")
            wal_heap = detail[heap]["wal"] / n_heap
            wal_ts = r["wal"] / n_ts
            print(f"| WAL bytes per row, ingest until every row is in buckets | {wal_heap:,.0f} | {wal_ts:,.0f} | {wal_ts / wal_heap:.2f} |")
            print(f"| disk bytes per row, right after ingest | {r['during'][0]:,.0f} | {r['during'][1]:,.0f} | {r['during'][1] / r['during'][0]:.2f} |")
            print(f"| disk bytes per row, after compaction and VACUUM | {r['after'][0]:,.0f} | {r['after'][1]:,.0f} | {r['after'][1] / r['after'][0]:.2f} |")
            print(f"| last-10-minutes aggregate, ms (trickled table) | {r['agg'][0]:.2f} | {r['agg'][1]:.2f} | {r['agg'][1] / r['agg'][0]:.2f} |")
            print(f"\nLast point per series: {r['lp'][0]:.2f} ms on the trickled table, {r['lp'][1]:.2f} ms compacted "
                  f"({r['lp'][0] / r['lp'][1]:.2f}x; heap {r['lp'][2]:.2f} ms). The final drain and compaction wrote {r['drain_wal']:,} WAL bytes.")
            if not r["same"]:
                print("\nAnswers DIFFER between the trickled and the compacted table.", file=sys.stderr)
                different = True
    finally:
        cluster.destroy()
    return 1 if different else 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=int, default=15, help="per pgbench run")
    p.add_argument("--clients", default="1,8,32")
    p.add_argument("--detail-clients", type=int, default=8)
    p.add_argument("--runs", type=int, default=5, help="query timings: best of this many")
    p.add_argument("--rounds", type=int, default=5, help="ingest rates: median of this many runs per cell")
    a = p.parse_args()
    a.clients = [int(x) for x in a.clients.split(",")]
    if a.detail_clients not in a.clients:
        p.error("--detail-clients must be one of --clients")
    sys.exit(run(a))


if __name__ == "__main__":
    main()
