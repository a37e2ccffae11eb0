"""Trickle inserts and compaction, side by side with COPY, in one run:
100 sensors x 2,000 rows inserted one row per statement by 8 concurrent
pgbench clients, then tsbucket.compact(); bytes per row before and after,
against the same rows loaded by COPY."""

import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "integration"))
from conftest import Cluster, as_postgres  # noqa: E402

SENSORS, PER_SENSOR, CLIENTS = 100, 2000, 8
ROWS = SENSORS * PER_SENSOR
VALUE = "round((20 + 5 * sin(n / 1000.0 + n % 100))::numeric, 1)::float8"
ROW = f"'2024-01-01'::timestamptz + (n / {SENSORS}) * interval '1 s', 's' || (n % {SENSORS}), {VALUE}"


def total_bytes(c, table):
    return c.execute(f"SELECT total_bytes FROM tsbucket.stats('{table}')").fetchone()[0]


def main():
    cluster = Cluster(extra_conf=["shared_buffers = 1GB", "synchronous_commit = off", "max_wal_size = 8GB",
                                  "max_connections = 50"])
    try:
        with cluster.connect() as c:
            for t in ("trickle", "loaded"):
                c.execute(f"CREATE TABLE {t} (time timestamptz NOT NULL, sensor text, temp float8) USING tsbucket")
                c.execute(f"SELECT tsbucket.create_timeseries('{t}', 'time', 'sensor')")
            c.execute("CREATE SEQUENCE n_seq MINVALUE 0 START 0")
            t0 = time.perf_counter()
            c.execute(f"COPY (SELECT {ROW} FROM generate_series(0, {ROWS - 1}) n) TO '/tmp/tsbucket-trickle.csv' (FORMAT csv)")
            c.execute("COPY loaded FROM '/tmp/tsbucket-trickle.csv' (FORMAT csv)")
            copy_s = time.perf_counter() - t0
        script = tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False)
        script.write(f"INSERT INTO trickle SELECT {ROW} FROM (SELECT nextval('n_seq') AS n) s;\n")
        script.close()
        os.chmod(script.name, 0o644)
        pgbench = os.path.join(cluster.bindir, "pgbench")
        t0 = time.perf_counter()
        as_postgres([pgbench, "-n", "-h", cluster.dir, "-p", str(cluster.port), "-U", "postgres", "-c", str(CLIENTS),
                     "-j", "2", "-t", str(ROWS // CLIENTS), "-f", script.name, "test"])
        insert_s = time.perf_counter() - t0
        with cluster.connect() as c:
            c.execute("VACUUM trickle")
            before = total_bytes(c, "trickle")
            buckets_before = c.execute("SELECT buckets FROM tsbucket.stats('trickle')").fetchone()[0]
            t0 = time.perf_counter()
            c.execute("SELECT * FROM tsbucket.compact('trickle')")
            compact_s = time.perf_counter() - t0
            # Plain VACUUM leaves freed pages inside the file; rewrite both stores
            # to compare what the buckets themselves take.
            for t in ("trickle", "loaded"):
                store = c.execute(f"SELECT bucket_store FROM tsbucket.timeseries WHERE table_name = '{t}'::regclass").fetchone()[0]
                c.execute(f"VACUUM FULL {store}")
            after = total_bytes(c, "trickle")
            loaded = total_bytes(c, "loaded")
            stats = c.execute("SELECT buckets, avg_rows_per_bucket FROM tsbucket.stats('trickle')").fetchone()
            same = c.execute("SELECT count(*) FROM ((SELECT * FROM trickle EXCEPT ALL SELECT * FROM loaded) "
                             "UNION ALL (SELECT * FROM loaded EXCEPT ALL SELECT * FROM trickle)) d").fetchone()[0] == 0
        print(f"\n## Trickle inserts and compaction: {SENSORS} sensors x {PER_SENSOR:,} rows, "
              f"one row per statement, {CLIENTS} clients\n")
        print("| step | time | rows/s | buckets | bytes/row |")
        print("|---|---:|---:|---:|---:|")
        print(f"| COPY (reference) | {copy_s:.1f} s | {ROWS / copy_s:,.0f} | - | {loaded / ROWS:.2f} |")
        print(f"| single-row INSERTs, {CLIENTS} clients | {insert_s:.1f} s | {ROWS / insert_s:,.0f} | {buckets_before:,} | {before / ROWS:.2f} |")
        print(f"| tsbucket.compact() | {compact_s:.1f} s | {ROWS / compact_s:,.0f} | {stats[0]:,} ({stats[1]} rows each) | {after / ROWS:.2f} |")
        print(f"\nafter compaction: {after / loaded:.3f}x the bytes of the COPY load; same rows: {same}")
    finally:
        cluster.destroy()


if __name__ == "__main__":
    main()
