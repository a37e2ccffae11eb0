"""Documents (jsonb stored by path) where the server's environment differs
from the pg_regress suite's: a database whose encoding is not UTF-8 (keys are
the server encoding's bytes, at planning and in buckets), and a non-superuser
owner with the worker compacting every second while readings arrive row by
row."""

import json
import random
import time

import psycopg

from conftest import Cluster


def test_keys_in_a_latin1_database():
    c = Cluster()
    try:
        with c.connect(dbname="postgres") as conn:
            conn.execute("CREATE DATABASE latin TEMPLATE template0 ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C'")
        with psycopg.connect(host=c.dir, port=c.port, user="postgres", dbname="latin", autocommit=True) as conn:
            conn.execute("SET client_encoding = 'UTF8'")
            conn.execute("CREATE EXTENSION tsbucket")
            for t, am in (("t", " USING tsbucket"), ("h", "")):
                conn.execute(f"CREATE TABLE {t} (time timestamptz NOT NULL, dev text, doc jsonb){am}")
            conn.execute("SELECT tsbucket.create_timeseries('t', 'time', 'dev')")
            rows = [(f"2024-01-01 00:00:{i:02d}+00", "d", json.dumps({"größe": i, "maß": "ü" * (i % 3), "n": i}))
                    for i in range(40)]
            for t in ("t", "h"):
                conn.cursor().executemany(f"INSERT INTO {t} VALUES (%s, %s, %s)", rows)
            conn.execute("SELECT tsbucket.compact('t')")
            plan = "\n".join(r[0] for r in conn.execute("EXPLAIN SELECT doc->>'größe', doc['maß'] FROM t"))
            assert "keys: maß, größe" in plan or "keys: größe, maß" in plan, plan
            q = "SELECT time, doc->>'größe', doc['maß'], doc ? 'größe' FROM {} ORDER BY time"
            assert conn.execute(q.format("t")).fetchall() == conn.execute(q.format("h")).fetchall()
            q = "SELECT time, doc::text FROM {} ORDER BY time"
            assert conn.execute(q.format("t")).fetchall() == conn.execute(q.format("h")).fetchall()
    finally:
        c.destroy()


def test_readings_row_by_row_beside_the_worker():
    """Readings of varying paths written one statement at a time by a
    non-superuser, the worker draining and compacting them every second: the
    documents and the answers by key stay the heap's."""
    c = Cluster(worker=True, extra_conf=["tsbucket.worker_interval = 1"])
    try:
        with c.connect() as conn:
            conn.execute("CREATE ROLE owner LOGIN")
            conn.execute("GRANT CREATE ON SCHEMA public TO owner")
        with psycopg.connect(host=c.dir, port=c.port, user="owner", dbname="test", autocommit=True) as conn:
            for t, am in (("t", " USING tsbucket"), ("h", "")):
                conn.execute(f"CREATE TABLE {t} (time timestamptz NOT NULL, meta jsonb, doc jsonb){am}")
            conn.execute("SELECT tsbucket.create_timeseries('t', 'time', 'meta')")
            rng = random.Random(7)
            for i in range(1500):
                doc = {"temp": f"{rng.randrange(-500, 500) / 10:.{rng.choice([1, 2])}f}", "ok": rng.random() < 0.9}
                if rng.random() < 0.1:
                    doc["gps"] = {"lat": rng.randrange(0, 10**6) / 1e4, "lon": 11.5}
                if rng.random() < 0.05:
                    doc["temp"] = "n/a"
                text = "{" + ", ".join(f'"{k}": {v if k == "temp" and v != "n/a" else json.dumps(v)}' for k, v in doc.items()) + "}"
                meta = json.dumps({"site": f"s{i % 3}", "rack": i % 2})
                for t in ("t", "h"):
                    conn.execute(f"INSERT INTO {t} VALUES ('2024-01-01'::timestamptz + %s * interval '7 s', %s, %s)", (i, meta, text))
            deadline = time.time() + 60
            while time.time() < deadline and conn.execute("SELECT tail_rows FROM tsbucket.stats('t')").fetchone()[0] > 0:
                time.sleep(0.5)
            for q in ["SELECT time, meta::text, doc::text FROM {} ORDER BY time",
                      "SELECT meta->>'site', count(*), count(doc->'gps'), max(doc->>'temp') FROM {} GROUP BY 1 ORDER BY 1",
                      "SELECT count(*) FROM {} WHERE meta @> '{{\"rack\": 1}}' AND doc ? 'gps'",
                      "SELECT sum(CASE WHEN jsonb_typeof(doc->'temp') = 'number' THEN (doc->>'temp')::numeric END) FROM {} "
                      "WHERE meta->>'site' = 's2'"]:
                assert conn.execute(q.format("t")).fetchall() == conn.execute(q.format("h")).fetchall(), q
    finally:
        c.destroy()
