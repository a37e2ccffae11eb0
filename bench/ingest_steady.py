"""Steady-state ingest: at a constant rate of single-row INSERTs (pgbench
--rate, 8 clients, 100 sensors), with the worker at its default interval, how
many bytes does the table hold beyond the same rows compacted, and does that
excess stay bounded?

Every --sample seconds it prints the rows, the rows and bytes in the tail,
tsbucket.table_size, the size of the same rows written by one statement into
a fresh tsbucket table (as a COPY would leave them, i.e. compacted), and the
difference: the excess. The README states the bound (set by
tsbucket.tail_drain_rows); the last line compares the excess between minute
5 and minute 10. Not a test: it takes --seconds (600 by default).

Run (with the release extension installed):
  . scripts/pg-env.sh && install_extension pg15 --release && TSBUCKET_PG=pg15 $TSBUCKET_VENV/bin/python bench/ingest_steady.py
"""

import argparse
import datetime as dt
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
from conftest import Cluster  # noqa: E402

SCHEMA = "time timestamptz NOT NULL, sensor text NOT NULL, temp float8, hum float8"
SINGLE = """\\set s random(0, 99)
INSERT INTO t VALUES (clock_timestamp(), 's' || :s, random() * 100, random() * 100);
"""


def sample(c):
    rows = c.execute("SELECT count(*) FROM t").fetchone()[0]
    size = c.execute("SELECT tsbucket.table_size('t')").fetchone()[0]
    tail_rows, tail_bytes = c.execute("SELECT tail_rows, tail_bytes FROM tsbucket.stats('t')").fetchone()
    c.execute("DROP TABLE IF EXISTS ref")
    c.execute(f"CREATE TABLE ref ({SCHEMA}) USING tsbucket")
    c.execute("SELECT tsbucket.create_timeseries('ref', 'time', 'sensor')")
    c.execute("INSERT INTO ref SELECT * FROM t ORDER BY sensor, time")
    ref_rows = c.execute("SELECT count(*) FROM ref").fetchone()[0]
    ref = c.execute("SELECT tsbucket.table_size('ref')").fetchone()[0]
    # The reference may hold a few more rows (ingest goes on): scale it to the sampled count.
    ref = ref * rows / max(ref_rows, 1)
    return rows, tail_rows, tail_bytes, size, ref


def run(a):
    cluster = Cluster(worker=True, extra_conf=["max_connections = 100"])
    try:
        with cluster.connect() as c:
            version = c.execute("SHOW server_version").fetchone()[0]
            drain_rows = c.execute("SHOW tsbucket.tail_drain_rows").fetchone()[0]
            interval = c.execute("SHOW tsbucket.worker_interval").fetchone()[0]
            c.execute(f"CREATE TABLE t ({SCHEMA}) USING tsbucket")
            c.execute("SELECT tsbucket.create_timeseries('t', 'time', 'sensor')")
            print(f"## Steady ingest: {a.rate} single-row INSERTs/s from 8 clients, 100 sensors, PostgreSQL {version}, "
                  f"{dt.date.today()}\n")
            print(f"The worker at its default interval ({interval}), tsbucket.tail_drain_rows = {drain_rows}.\n")
            print("| minute | rows | tail rows | tail bytes | table_size | same rows compacted | excess bytes |")
            print("|---:|---:|---:|---:|---:|---:|---:|", flush=True)
            with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False, dir="/tmp") as f:
                f.write(SINGLE)
            os.chmod(f.name, 0o644)
            bench = subprocess.Popen(["sudo", "-u", "postgres", "--", f"{cluster.bindir}/pgbench", "-h", cluster.dir,
                                      "-p", str(cluster.port), "-U", "postgres", "-n", "-c", "8", "-j", "8",
                                      "-R", str(a.rate), "-T", str(a.seconds), "-f", f.name, "test"],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            start = time.monotonic()
            excess = {}
            k = 1
            while True:
                wait = start + k * a.sample - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                if bench.poll() is not None or k * a.sample > a.seconds:
                    break
                rows, tail_rows, tail_bytes, size, ref = sample(c)
                minute = k * a.sample / 60
                excess[minute] = size - ref
                print(f"| {minute:.1f} | {rows:,} | {tail_rows:,} | {tail_bytes:,} | {size:,} | {ref:,.0f} | "
                      f"{size - ref:,.0f} |", flush=True)
                k += 1
            out = bench.communicate()[0]
            os.unlink(f.name)
            if bench.returncode != 0:
                print(out, file=sys.stderr)
                return 1
            first = [v for m, v in excess.items() if 5 <= m <= 7.5]
            last = [v for m, v in excess.items() if 7.5 < m <= 10]
            if first and last:
                print(f"\nExcess, minutes 5-7.5: mean {sum(first) / len(first):,.0f}, max {max(first):,.0f} bytes; "
                      f"minutes 7.5-10: mean {sum(last) / len(last):,.0f}, max {max(last):,.0f} bytes.")
    finally:
        cluster.destroy()
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=int, default=600)
    p.add_argument("--rate", type=int, default=2000, help="INSERTs per second (pgbench --rate)")
    p.add_argument("--sample", type=int, default=30, help="seconds between samples")
    sys.exit(run(p.parse_args()))


if __name__ == "__main__":
    main()
