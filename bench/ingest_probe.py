"""Two probes of bench/ingest.py's 8-client single-row cell, in one cluster
started as bench/ingest.py starts its own (tsbucket preloaded, the worker
at its default interval, synchronous_commit on):

  ab     rounds of 8-client single-row INSERTs alternating heap + index,
         tsbucket, and tsbucket with draining held off
         (tsbucket.tail_drain_rows out of reach); prints each run's
         transactions/s and the medians
  waits  one 8-client run per table, sampling pg_stat_activity every 20 ms:
         on average, how many backends wait on what (CPU: not waiting)

Run (the release extension installed, as for bench/ingest.py):
  TSBUCKET_PG=pg15 $TSBUCKET_VENV/bin/python bench/ingest_probe.py ab
  TSBUCKET_PG=pg15 $TSBUCKET_VENV/bin/python bench/ingest_probe.py waits
"""

import argparse
import collections
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
from conftest import Cluster  # noqa: E402
from ingest import SENSORS, SINGLE, make_tables, pgbench  # noqa: E402


def start(cluster, t, clients, seconds):
    """pgbench in the background, its script in a file pgbench can read."""
    path = f"/tmp/ingest_probe_{os.getpid()}_{t}.sql"
    with open(path, "w") as f:
        f.write(SINGLE.format(t=t, last=SENSORS - 1))
    os.chmod(path, 0o644)
    cmd = [f"{cluster.bindir}/pgbench", "-h", cluster.dir, "-p", str(cluster.port), "-U", "postgres", "-n",
           "-c", str(clients), "-j", str(clients), "-T", str(seconds), "-f", path, "test"]
    if os.getuid() == 0:
        cmd = ["sudo", "-u", "postgres", "--"] + cmd
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def ab(c, cluster, a):
    script = lambda t: SINGLE.format(t=t, last=SENSORS - 1)  # noqa: E731
    runs = collections.defaultdict(list)
    for _ in range(a.rounds):
        for mode in ("heap", "tsbucket", "tsbucket, no drain"):
            heap, ts = make_tables(c, "probe")
            drain = 100_000_000 if mode == "tsbucket, no drain" else 20000
            c.execute(f"ALTER SYSTEM SET tsbucket.tail_drain_rows = {drain}")
            c.execute("SELECT pg_reload_conf()")
            c.execute("CHECKPOINT")
            time.sleep(0.5)
            tps = pgbench(cluster, script(heap if mode == "heap" else ts), a.clients, a.seconds)
            runs[mode].append(tps)
            print(f"{mode}: {tps:,.0f} transactions/s", flush=True)
    c.execute("ALTER SYSTEM RESET tsbucket.tail_drain_rows")
    c.execute("SELECT pg_reload_conf()")
    for mode, v in runs.items():
        print(f"{mode}: median {statistics.median(v):,.0f} transactions/s")


def waits(c, cluster, a):
    for kind in ("heap", "tsbucket"):
        heap, ts = make_tables(c, "probe")
        c.execute("CHECKPOINT")
        p = start(cluster, heap if kind == "heap" else ts, a.clients, a.seconds)
        seen, samples = collections.Counter(), 0
        while p.poll() is None:
            for ev, in c.execute("SELECT coalesce(wait_event_type || ':' || wait_event, 'CPU') FROM pg_stat_activity "
                                 "WHERE backend_type = 'client backend' AND state <> 'idle' AND pid <> pg_backend_pid()"):
                seen[ev] += 1
            samples += 1
            time.sleep(0.02)
        tps = float(re.search(r"tps = ([0-9.]+)", p.stdout.read()).group(1))
        print(f"{kind}: {tps:,.0f} transactions/s; backends, on average:")
        for ev, n in seen.most_common(6):
            print(f"  {n / max(samples, 1):5.2f}  {ev}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("probe", choices=["ab", "waits"])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seconds", type=int, default=15)
    p.add_argument("--clients", type=int, default=8)
    a = p.parse_args()
    cluster = Cluster(worker=True, extra_conf=["max_connections = 100"])
    try:
        with cluster.connect() as c:
            (ab if a.probe == "ab" else waits)(c, cluster, a)
    finally:
        cluster.destroy()


if __name__ == "__main__":
    main()
