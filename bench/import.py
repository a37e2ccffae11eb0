"""tsbucket-import against psql's COPY, side by side in one cluster.

A generated MongoDB time-series collection (--rows measurements over 100
sensors: a meta object, typed fields, optional ones, a nested object; written
by pymongo's `bson` module, see tests/integration/mongo_data.py) is imported
from each input kind: mongoexport JSON lines, a mongodump directory of
version-1 buckets (--gzip), one of version-2 (compressed: BSONColumn, written
by the importer's test encoder), a mongodump --archive (plain and --gzip),
a dump of the documents, canonical Extended JSON as one --jsonArray (gzip).
The reference: the same rows as CSV (the imported table's own COPY TO),
loaded with `psql -c "COPY ... FROM STDIN (FORMAT csv)"` into a table of the
same definition. Prints rows/s of each (best of --runs), its ratio to psql's,
and whether every imported table holds exactly psql's rows (any difference
fails the run).

Run (the release extension installed; builds the release importer):
  . scripts/pg-env.sh && install_extension pg15 --release && \\
    TSBUCKET_PG=pg15 $TSBUCKET_VENV/bin/python bench/import.py
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
from conftest import REPO, Cluster  # noqa: E402
import mongo_data as md  # noqa: E402

BIN = os.path.join(REPO, "target", "release", "tsbucket-import")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--runs", type=int, default=2)
    a = p.parse_args()
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "tsbucket-import"], cwd=REPO, check=True)
    work = tempfile.mkdtemp(prefix="tsbucket-import-bench-")
    t0 = time.monotonic()
    docs = md.collection(a.rows, series=100)
    inputs = {
        "mongoexport JSON lines": (f"{work}/weather.json", ["--time-field", "ts", "--meta-field", "meta"]),
        "mongoexport canonical --jsonArray, gzip": (f"{work}/canon.json.gz", ["--time-field", "ts", "--meta-field", "meta"]),
        "mongodump, v1 buckets, --gzip": (f"{work}/dump/iot", []),
        "mongodump, v2 buckets (BSONColumn)": (f"{work}/v2dump/iot", []),
        "mongodump --archive": (f"{work}/iot.archive", []),
        "mongodump --archive --gzip": (f"{work}/iot.archive.gz", []),
        "mongodump of documents": (f"{work}/docdump/iot", []),
    }
    md.write_json(f"{work}/canon.json.gz", docs, canonical=True, array=True, gz=True)
    md.write_dump(f"{work}/v2dump/iot", "weather", docs, md.options(), buckets=True)
    md.compress_buckets(f"{work}/v2dump/iot/system.buckets.weather.bson", 2)
    md.write_archive(f"{work}/iot.archive.gz", "weather", docs, md.options(), segment=500, gz=True)
    md.write_json(inputs["mongoexport JSON lines"][0], docs)
    md.write_dump(f"{work}/dump/iot", "weather", docs, md.options(), buckets=True, gz=True)
    md.write_archive(f"{work}/iot.archive", "weather", docs, md.options(), segment=500)
    md.write_dump(f"{work}/docdump/iot", "weather", docs, md.options())
    print(f"(inputs written in {time.monotonic() - t0:.0f} s)", file=sys.stderr)
    c = Cluster(worker=True)
    failed = True
    try:
        conninfo = f"host={c.dir} port={c.port} user=postgres dbname=test"
        psql = os.path.join(c.bindir, "psql")
        version = c.connect().execute("SHOW server_version").fetchone()[0]
        # The CSV reference: the rows of a first import, as COPY writes them.
        first, extra = inputs["mongodump, v1 buckets, --gzip"]
        subprocess.run([BIN, first, "-d", conninfo, "--table", "ref", "--no-progress", *extra], check=True)
        csv = f"{work}/rows.csv"
        with open(csv, "wb") as f:
            subprocess.run([psql, "-X", "-q", "-d", conninfo, "-c", "COPY ref TO STDOUT (FORMAT csv)"], stdout=f, check=True)
        with c.connect() as conn:
            ddl = conn.execute("SELECT string_agg(quote_ident(attname) || ' ' || format_type(atttypid, atttypmod) "
                               "|| CASE WHEN attnotnull THEN ' NOT NULL' ELSE '' END, ', ' ORDER BY attnum) "
                               "FROM pg_attribute WHERE attrelid = 'ref'::regclass AND attnum > 0 AND NOT attisdropped").fetchone()[0]
            rows = conn.execute("SELECT count(*) FROM ref").fetchone()[0]
            cols = conn.execute("SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) FROM pg_attribute "
                                "WHERE attrelid = 'ref'::regclass AND attnum > 0 AND NOT attisdropped").fetchone()[0]
        mib = os.path.getsize(csv) / 2**20
        # The first import against the source documents themselves (every
        # other import is then compared with its rows).
        with c.connect() as conn:
            source_same = md.read_rows(conn, "ref") == md.expected_rows(docs)
        del docs

        def fresh(table):
            with c.connect() as conn:
                conn.execute(f"DROP TABLE IF EXISTS {table}")
                conn.execute("DELETE FROM tsbucket_import WHERE target = %s", (f'"{table}"',))

        def timed(fn):
            best = None
            for _ in range(a.runs):
                t = time.monotonic()
                fn()
                e = time.monotonic() - t
                best = e if best is None else min(best, e)
            return best

        def load_psql():
            fresh("by_psql")
            with c.connect() as conn:
                conn.execute(f"CREATE TABLE by_psql ({ddl}) USING tsbucket")
                conn.execute("SELECT tsbucket.create_timeseries('by_psql', 'ts', meta_columns => ARRAY['sensor', 'site'])")
            with open(csv, "rb") as f:
                subprocess.run([psql, "-X", "-q", "-d", conninfo, "-c", "COPY by_psql FROM STDIN (FORMAT csv)"], stdin=f, check=True)

        psql_s = timed(load_psql)
        print(f"## tsbucket-import: {rows:,} measurements (100 sensors), PostgreSQL {version}, "
              f"best of {a.runs}; CSV {mib:.0f} MiB\n")
        failed = not source_same
        print(f"The first import's rows {'equal' if source_same else 'DIFFER FROM'} the source documents' "
              "(tests/integration/mongo_data.py's expected rows).\n")
        print("| input | seconds | rows/s | vs psql COPY (CSV) | rows as psql's |")
        print("|---|---:|---:|---:|---|")
        print(f"| psql `COPY FROM STDIN (FORMAT csv)` | {psql_s:.2f} | {rows / psql_s:,.0f} | 1.00 | - |")
        for i, (name, (path, extra)) in enumerate(inputs.items()):
            table = f"imp{i}"

            def load():
                fresh(table)
                subprocess.run([BIN, path, "-d", conninfo, "--table", table, "--no-progress", *extra],
                               check=True, capture_output=True)

            s = timed(load)
            with c.connect() as conn:
                a_, b_ = f"SELECT {cols} FROM {table}", f"SELECT {cols} FROM by_psql"
                diff = conn.execute(f"SELECT (SELECT count(*) FROM ({a_} EXCEPT ALL {b_}) x) + "
                                    f"(SELECT count(*) FROM ({b_} EXCEPT ALL {a_}) y)").fetchone()[0]
            same = "identical" if diff == 0 else f"{diff} rows differ"
            failed |= diff != 0
            print(f"| {name} | {s:.2f} | {rows / s:,.0f} | {psql_s / s:.2f} | {same} |")
    finally:
        c.destroy()
        subprocess.run(["rm", "-rf", work])
    if failed:
        sys.exit("an import's rows differ (see above)")


if __name__ == "__main__":
    main()
