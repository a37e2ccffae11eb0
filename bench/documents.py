"""Documents: the devops data (bench/gen_data.py, 100 hosts x --days) with the
ten metrics and the nine other host tags in one jsonb column, side by side in
one cluster:

  typed       tsbucket, every field a column of its own (bench/tsbs.py's devops table)
  docs        tsbucket: time, hostname (the meta column), doc jsonb
  docs_heap   a heap holding the same jsonb, with TSBS's indexes
  docs_tsdb   TimescaleDB compressed (segmentby hostname), when installed

As the issue states the data: a metric is absent from the document when it is
0, and one row in 500 carries an extra nested object. Prints bytes per row and
the 15 TSBS query types written on the document (`(doc->>'usage_user')::float8`
for each metric) plus ?, @> and #>> queries: per type the median over
instances of the best of --runs runs, each answer compared with the jsonb
heap's, and the typed table's time for the same instances. Also: readings
whose paths vary across rows, as jsonb beside the same values in typed
nullable columns (bytes per row).

Run (builds and installs the release extension, then starts its own cluster):
  . scripts/pg-env.sh && install_extension pg15 --release && \\
    TSBUCKET_PG=pg15 $TSBUCKET_VENV/bin/python bench/documents.py
"""

import argparse
import datetime as dt
import math
import os
import random
import re
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
from conftest import Cluster  # noqa: E402
from gen_data import METRICS, TAGS  # noqa: E402
import tsbs  # noqa: E402

DOC = ("jsonb_strip_nulls(jsonb_build_object("
       + ", ".join(f"'{m}', NULLIF({m}, 0)" for m in METRICS) + ", "
       + ", ".join(f"'{t}', {t}" for t in TAGS[1:])
       + ")) || CASE WHEN extract(epoch FROM time)::bigint / 10 % 500 = 0 "
       "THEN jsonb_build_object('extra', jsonb_build_object('note', 'maintenance', 'level', 3, 'codes', jsonb_build_array(7, 11)))"
       " ELSE '{}'::jsonb END")

# Beyond TSBS's types: the operators documents are queried with.
EXTRA = {
    "key-exists": lambda rng, hosts, days: (
        f"SELECT hostname, count(*) FROM {{t}} WHERE doc ? 'extra' AND time >= '{tsbs.ts(tsbs.random_window(rng, days, 12))}' "
        "GROUP BY hostname ORDER BY hostname"),
    "contains": lambda rng, hosts, days: (
        f"SELECT count(*) FROM {{t}} WHERE doc @> '{{\"region\": \"{rng.choice(['eu-west-1', 'us-east-1'])}\"}}' "
        f"AND time >= '{tsbs.ts(tsbs.random_window(rng, days, 12))}'"),
    "path-text": lambda rng, hosts, days: (
        f"SELECT hostname, max(doc #>> '{{extra,note}}'), sum((doc #>> '{{extra,level}}')::int) FROM {{t}} "
        f"WHERE time >= '{tsbs.ts(tsbs.random_window(rng, days, 24))}' GROUP BY hostname ORDER BY hostname"),
}


def on_doc(sql):
    """A TSBS query on the typed table, written on the document."""
    return re.sub(r"\b(usage_\w+)\b", r"(doc->>'\1')::float8", sql)


def table_bytes(conn, table):
    if table.endswith("heap"):
        return conn.execute(f"SELECT pg_total_relation_size('{table}')").fetchone()[0]
    if table.endswith("tsdb"):
        return conn.execute(f"SELECT hypertable_size('{table}')").fetchone()[0]
    return conn.execute(f"SELECT tsbucket.table_size('{table}')").fetchone()[0]


def bytes_decompressed(conn, sql):
    """The scan's `Bytes Decompressed` summed over an EXPLAIN ANALYZE plan."""
    plan = conn.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}").fetchone()[0]

    def walk(n):
        if isinstance(n, dict):
            return n.get("Bytes Decompressed", 0) + sum(walk(v) for v in n.values())
        if isinstance(n, list):
            return sum(walk(v) for v in n)
        return 0
    return walk(plan)


# Queries reading one path of the documents, beside the same on the typed
# column: what the scan decodes (a query reading one path decodes only it).
ONE_PATH = {
    "one host's rows": "SELECT time, {x} FROM {t} WHERE hostname = 'host_7'",
    "rows over a threshold": "SELECT time, hostname, {x} FROM {t} WHERE {x} > 95",
    "hourly max of one host": "SELECT date_trunc('hour', time), max({x}) FROM {t} WHERE hostname = 'host_3' GROUP BY 1",
    "count of rows over a threshold": "SELECT count(*) FROM {t} WHERE {x} > 90",
}


def decompressed(conn):
    print("Bytes the scan decompresses (EXPLAIN ANALYZE's `Bytes Decompressed`) for queries reading usage_user:\n")
    print("| query | typed bytes | docs bytes | docs / typed |")
    print("|---|---:|---:|---:|")
    for name, q in ONE_PATH.items():
        typed = bytes_decompressed(conn, q.format(t="typed", x="usage_user"))
        docs = bytes_decompressed(conn, q.format(t="docs", x="(doc->>'usage_user')::float8"))
        ratio = f"{docs / typed:.2f}" if typed else "-"
        print(f"| {name} | {typed:,} | {docs:,} | {ratio} |")
    print()


VARYING_ROWS = 200_000


def varying_paths(conn):
    """Readings whose paths vary across rows (a sensor that sends `gps` in two
    rows of seven, `hum` in nine of ten, `status` as text), as jsonb and as
    the same values in typed nullable columns, both tsbucket tables."""
    conn.execute("CREATE TABLE vp_typed (time timestamptz NOT NULL, dev text, temp float8, hum float8, status text, "
                 "gps_lat float8, gps_lon float8) USING tsbucket")
    conn.execute("SELECT tsbucket.create_timeseries('vp_typed', 'time', 'dev')")
    conn.execute(f"""INSERT INTO vp_typed SELECT '2024-01-01'::timestamptz + (i / 20) * interval '10 s', 'd' || (i % 20),
        round((20 + sin(i / 5000.0) * 5 + (i % 20))::numeric, 1), CASE WHEN i % 10 <> 3 THEN round((40 + cos(i / 3000.0) * 10)::numeric, 1) END,
        CASE WHEN i % 97 = 0 THEN 'warn' ELSE 'ok' END,
        CASE WHEN i % 7 < 2 THEN round((48 + (i % 20) * 0.01 + sin(i / 9000.0) * 0.001)::numeric, 5) END,
        CASE WHEN i % 7 < 2 THEN 11.5 END
        FROM generate_series(0, {VARYING_ROWS - 1}) i ORDER BY 1""")
    conn.execute("CREATE TABLE vp_docs (time timestamptz NOT NULL, dev text, doc jsonb) USING tsbucket")
    conn.execute("SELECT tsbucket.create_timeseries('vp_docs', 'time', 'dev')")
    conn.execute("INSERT INTO vp_docs SELECT time, dev, jsonb_strip_nulls(jsonb_build_object('temp', temp, 'hum', hum, "
                 "'status', status, 'gps', CASE WHEN gps_lat IS NOT NULL THEN jsonb_build_object('lat', gps_lat, 'lon', gps_lon) END)) "
                 "FROM vp_typed ORDER BY time")
    for t in ("vp_typed", "vp_docs"):
        conn.execute(f"VACUUM ANALYZE {t}")
    typed, docs = table_bytes(conn, "vp_typed"), table_bytes(conn, "vp_docs")
    print(f"Readings whose paths vary ({VARYING_ROWS:,} rows, `gps` in 2 of 7, `hum` in 9 of 10), jsonb against the same values "
          "in typed nullable columns (both tsbucket):\n")
    print("| table | bytes/row | vs typed |")
    print("|---|---:|---:|")
    print(f"| typed nullable columns | {typed / VARYING_ROWS:.2f} | 1.00 |")
    print(f"| jsonb | {docs / VARYING_ROWS:.2f} | {docs / typed:.3f} |")
    print()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--days", type=int, default=3)
    p.add_argument("--instances", type=int, default=5, help="random instances per query type")
    p.add_argument("--runs", type=int, default=3, help="best of this many runs per instance")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--sizes-only", action="store_true", help="load and print bytes per row, run no query")
    a = p.parse_args()
    path = tsbs.csv_path(a.days, tsbs.HOSTS, "devops")
    shape = tsbs.SHAPES["devops"]
    # TimescaleDB, when installed, preloaded as bench/tsbs.py does it.
    tsdb_conf = [c for c in tsbs.cluster_conf(a) if "timescaledb" in c]
    cluster = Cluster(extra_conf=["max_wal_size = '8GB'", "shared_buffers = '2GB'"] + tsdb_conf)
    try:
        run(cluster, a, path, shape)
    finally:
        cluster.destroy()


def run(cluster, a, path, shape):
    conn = cluster.connect()
    conn.execute("SET timezone = 'UTC'")
    tsdb = conn.execute("SELECT count(*) FROM pg_available_extensions WHERE name = 'timescaledb'").fetchone()[0] > 0
    conn.execute(f"CREATE UNLOGGED TABLE staging ({shape.columns})")
    conn.execute(f"COPY staging FROM '{path}' (FORMAT csv)")
    rows = conn.execute("SELECT count(*) FROM staging").fetchone()[0]
    conn.execute(f"CREATE TABLE typed ({shape.columns}) USING tsbucket")
    conn.execute("SELECT tsbucket.create_timeseries('typed', 'time', 'hostname')")
    conn.execute("INSERT INTO typed SELECT * FROM staging ORDER BY time")
    doc_cols = "time timestamptz NOT NULL, hostname text, doc jsonb"
    conn.execute(f"CREATE TABLE docs ({doc_cols}) USING tsbucket")
    conn.execute("SELECT tsbucket.create_timeseries('docs', 'time', 'hostname')")
    conn.execute(f"INSERT INTO docs SELECT time, hostname, {DOC} FROM staging ORDER BY time")
    conn.execute(f"CREATE TABLE docs_heap ({doc_cols})")
    conn.execute("INSERT INTO docs_heap SELECT * FROM docs")
    conn.execute("CREATE INDEX ON docs_heap (hostname, time DESC)")
    conn.execute("CREATE INDEX ON docs_heap (time DESC)")
    tables = {"docs": "docs", "docs_heap": "docs_heap"}
    if tsdb:
        conn.execute("CREATE EXTENSION IF NOT EXISTS timescaledb")
        conn.execute(f"CREATE TABLE docs_tsdb ({doc_cols})")
        conn.execute("SELECT create_hypertable('docs_tsdb', 'time', chunk_time_interval => interval '12 hours')")
        conn.execute("ALTER TABLE docs_tsdb SET (timescaledb.compress, timescaledb.compress_segmentby = 'hostname', "
                     "timescaledb.compress_orderby = 'time DESC')")
        conn.execute("INSERT INTO docs_tsdb SELECT * FROM docs_heap")
        conn.execute("SELECT count(compress_chunk(c)) FROM show_chunks('docs_tsdb') c")
        tables["docs_tsdb"] = "docs_tsdb"
    for t in ["typed"] + list(tables):
        conn.execute(f"VACUUM ANALYZE {t}")
    version = conn.execute("SHOW server_version").fetchone()[0]
    print(f"## Documents: devops data as jsonb, {a.days} days, {rows:,} rows; PostgreSQL {version}, {dt.date.today()}\n")
    typed_bytes = table_bytes(conn, "typed")
    print("| table | bytes/row | vs typed tsbucket |")
    print("|---|---:|---:|")
    print(f"| typed (tsbucket) | {typed_bytes / rows:.2f} | 1.00 |")
    for label, t in tables.items():
        b = table_bytes(conn, t)
        print(f"| {label} | {b / rows:.2f} | {b / typed_bytes:.3f} |")
    print()
    varying_paths(conn)
    decompressed(conn)
    if a.sizes_only:
        return
    rng = random.Random(a.seed)
    types = {name: (lambda q: lambda r, h, d: q.build(r, h, d, False))(q) for name, q in tsbs.DEVOPS_QUERIES.items()}
    print(f"| type | typed ms | docs ms | docs / typed | docs_heap ms |{' docs_tsdb ms |' if tsdb else ''} answers |")
    print(f"|---|---:|---:|---:|---:|{'---:|' if tsdb else ''}---|")
    ratios = []
    for name, build in list(types.items()) + list(EXTRA.items()):
        typed_sqls = [build(rng, tsbs.HOSTS, a.days) for _ in range(a.instances)]
        doc_sqls = [on_doc(s) for s in typed_sqls]
        ordered = "ORDER BY" in typed_sqls[0] and not name.startswith("high-cpu")
        ms, worst, _ = tsbs.measure(conn, {"docs_heap": "docs_heap", "docs": "docs", **({"docs_tsdb": "docs_tsdb"} if tsdb else {})},
                                    {label: doc_sqls for label in ("docs_heap", "docs", "docs_tsdb")}, a.runs, ordered)
        if name in EXTRA:
            typed_ms = None
        else:
            typed_ms = tsbs.measure(conn, {"typed": "typed"}, {"typed": typed_sqls}, a.runs, ordered)[0]["typed"]
            ratios.append(ms["docs"] / typed_ms)
        typed_col = "" if typed_ms is None else tsbs.fmt_ms(typed_ms)
        ratio_col = "" if typed_ms is None else f"{ms['docs'] / typed_ms:.2f}"
        tsdb_col = f" {tsbs.fmt_ms(ms['docs_tsdb'])} |" if tsdb else ""
        print(f"| {name} | {typed_col} | {tsbs.fmt_ms(ms['docs'])} | {ratio_col} | {tsbs.fmt_ms(ms['docs_heap'])} |{tsdb_col} "
              f"{tsbs.answers(worst)} |", flush=True)
    print(f"\nGeomean docs / typed over the 15 TSBS types: {math.exp(statistics.fmean(map(math.log, ratios))):.2f}")


if __name__ == "__main__":
    main()
