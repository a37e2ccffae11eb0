"""tsbucket-import as users run it: a non-superuser owner, the worker
compacting every second, inputs written by pymongo's `bson` module (a writer
independent of the importer's), every input kind round-tripped to the same
rows, kill -9 and --resume, and bad inputs that stop with a clear error and
leave the table as the last committed batch left it."""

import os
import random
import shutil
import signal
import struct
import subprocess
import tempfile
import time

import bson
import pytest

import mongo_data as md
from conftest import REPO, Cluster

BIN = os.path.join(REPO, "target", "release", "tsbucket-import")
N = 20_000


@pytest.fixture(scope="module")
def tool():
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "tsbucket-import"], cwd=REPO, check=True)
    return BIN


@pytest.fixture(scope="module")
def cluster():
    c = Cluster(worker=True, extra_conf=["tsbucket.worker_interval = 1"])
    with c.connect() as conn:
        conn.execute("CREATE ROLE alice LOGIN")
        conn.execute("CREATE SCHEMA iot AUTHORIZATION alice")
    yield c
    c.destroy()


@pytest.fixture(scope="module")
def docs():
    return md.collection(N, series=50)


@pytest.fixture()
def work():
    d = tempfile.mkdtemp(prefix="tsbucket-import-")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def conninfo(c):
    return f"host={c.dir} port={c.port} user=alice dbname=test"


def run(tool, c, *args, check=True, **kw):
    p = subprocess.run([tool, "-d", conninfo(c), "--no-progress", *args], capture_output=True, text=True, **kw)
    if check and p.returncode != 0:
        raise AssertionError(f"tsbucket-import {' '.join(args)} exited {p.returncode}:\n{p.stderr}")
    return p


def marker(conn, table):
    if conn.execute("SELECT to_regclass('iot.tsbucket_import')").fetchone()[0] is None:
        return None
    return conn.execute("SELECT rows, finished FROM iot.tsbucket_import WHERE target = %s", (f'"iot"."{table}"',)).fetchone()


def drop(c, table):
    with c.connect() as conn:
        conn.execute(f"DROP TABLE IF EXISTS iot.{table}")
        if marker(conn, table) is not None:
            conn.execute("DELETE FROM iot.tsbucket_import WHERE target = %s", (f'"iot"."{table}"',))


def check_table(c, table, docs):
    with c.connect() as conn:
        got = md.read_rows(conn, f"iot.{table}")
        owner = conn.execute("SELECT tableowner FROM pg_tables WHERE schemaname = 'iot' AND tablename = %s", (table,)).fetchone()[0]
        ts = conn.execute("SELECT time_column, meta_columns::text[], granularity FROM tsbucket.timeseries "
                          "WHERE table_name = %s::regclass", (f"iot.{table}",)).fetchone()
    want = md.expected_rows(docs)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g == w, f"\n got  {g}\n want {w}"
    assert owner == "alice"
    assert ts[0] == "ts" and ts[1] == ["sensor", "site"] and ts[2] == "seconds", ts


def dump_compressed(d, docs, version):
    md.write_dump(f"{d}/dump/iot", "weather", docs, md.options(), buckets=True)
    md.compress_buckets(f"{d}/dump/iot/system.buckets.weather.bson", version)
    return f"{d}/dump"


INPUTS = {
    "json-relaxed": lambda d, docs: md.write_json(f"{d}/weather.json", docs) or f"{d}/weather.json",
    "json-canonical-array-gz": lambda d, docs: md.write_json(f"{d}/weather.json.gz", docs, canonical=True, array=True, gz=True)
    or f"{d}/weather.json.gz",
    "dump-documents": lambda d, docs: md.write_dump(f"{d}/dump/iot", "weather", docs, md.options()) or f"{d}/dump",
    "dump-buckets-v1-gzip": lambda d, docs: md.write_dump(f"{d}/dump/iot", "weather", docs, md.options(), buckets=True, gz=True)
    or f"{d}/dump/iot",
    "dump-buckets-v2": lambda d, docs: dump_compressed(d, docs, 2),
    "dump-buckets-v3": lambda d, docs: dump_compressed(d, docs, 3),
    # mongodump escapes a collection's file names; the metadata names it.
    "dump-escaped-name": lambda d, docs: md.write_dump(f"{d}/dump/iot", "weather/eu 1", docs, md.options(), buckets=True)
    or f"{d}/dump",
    "archive-gzip": lambda d, docs: md.write_archive(f"{d}/iot.archive.gz", "weather", docs, md.options(), gz=True)
    or f"{d}/iot.archive.gz",
    "archive-from-8-3": lambda d, docs: md.write_archive(f"{d}/dump.archive", "weather", docs, md.options(), server="8.3.1")
    or f"{d}/dump.archive",
}


@pytest.mark.parametrize("kind", list(INPUTS))
def test_every_input_kind_gives_the_source_rows(tool, cluster, docs, work, kind):
    path = INPUTS[kind](work, docs)
    table = kind.replace("-", "_")
    drop(cluster, table)
    extra = ["--time-field", "ts", "--meta-field", "meta"] if kind.startswith("json") else []
    if kind == "dump-escaped-name":
        extra = ["--collection", "iot.weather/eu 1"]
    run(tool, cluster, path, "--table", f"iot.{table}", "--batch-rows", "7000", *extra)
    check_table(cluster, table, docs)
    # The marker says finished: a second run refuses instead of doubling the rows.
    p = run(tool, cluster, path, "--table", f"iot.{table}", *extra, check=False)
    assert p.returncode == 2 and "already imported" in p.stderr, p.stderr


def test_standard_input_and_dry_run(tool, cluster, docs, work):
    md.write_json(f"{work}/w.json", docs[:500])
    p = run(tool, cluster, f"{work}/w.json", "--time-field", "ts", "--meta-field", "meta", "--table", "iot.dry", "--dry-run")
    assert "CREATE TABLE \"iot\".\"dry\"" in p.stdout and "USING tsbucket" in p.stdout
    assert "meta_columns => ARRAY['sensor', 'site']::name[]" in p.stdout, p.stdout
    with cluster.connect() as conn:
        assert conn.execute("SELECT to_regclass('iot.dry')").fetchone()[0] is None
    drop(cluster, "stdin")
    with open(f"{work}/w.json", "rb") as f:
        run(tool, cluster, "-", "--time-field", "ts", "--meta-field", "meta", "--table", "iot.stdin", stdin=f)
    check_table(cluster, "stdin", docs[:500])


KILLED = {
    "dump-buckets-v1": lambda d, docs: md.write_dump(f"{d}/dump/iot", "weather", docs, md.options(), buckets=True)
    or [f"{d}/dump/iot"],
    "dump-buckets-v2": lambda d, docs: [dump_compressed(d, docs, 2)],
    "json-gzip": lambda d, docs: md.write_json(f"{d}/w.json.gz", docs, gz=True)
    or [f"{d}/w.json.gz", "--time-field", "ts", "--meta-field", "meta"],
    "archive-gzip": lambda d, docs: md.write_archive(f"{d}/iot.archive.gz", "weather", docs, md.options(), gz=True)
    or [f"{d}/iot.archive.gz"],
}


@pytest.mark.parametrize("kind", list(KILLED))
def test_killed_and_resumed_ends_with_exactly_the_source_rows(tool, cluster, work, kind):
    docs = md.collection(150_000, series=100, seed=3)
    args = [tool, "-d", conninfo(cluster), "--no-progress", *KILLED[kind](work, docs), "--batch-rows", "5000"]
    # How long an uninterrupted import takes, to kill at points spread over one.
    drop(cluster, "whole")
    t0 = time.monotonic()
    subprocess.run(args + ["--table", "iot.whole"], check=True, capture_output=True)
    whole = time.monotonic() - t0
    drop(cluster, "killed")
    args += ["--table", "iot.killed"]
    rng = random.Random(7)
    kills = 0
    for attempt in range(80):
        with cluster.connect() as conn:
            started = marker(conn, "killed") is not None
        p = subprocess.Popen(args + (["--resume"] if started else []), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            # Five kills at random points, then a run to the end.
            _, err = p.communicate(timeout=rng.uniform(0.1, 0.6) * whole if kills < 5 else 20 * whole + 30)
            assert p.returncode == 0, err
            break
        except subprocess.TimeoutExpired:
            p.send_signal(signal.SIGKILL)
            p.communicate()
            kills += 1
    else:
        raise AssertionError("never finished")
    assert kills >= 2, kills
    check_table(cluster, "killed", docs)
    drop(cluster, "killed")


def write_bytes(path, data):
    with open(path, "wb") as f:
        f.write(data)
    return path


def bad_inputs(work, docs):
    """(name, path, extra args, message fragments) of inputs that must stop the import."""
    good = b"".join(bson.encode(d) for d in docs[:3000])
    first = bson.encode(docs[0])
    cases = []

    def dump_with(name, recs, opts=None, buckets=False, raw=None):
        d = f"{work}/{name}/iot"
        os.makedirs(d, exist_ok=True)
        with open(f"{d}/weather.metadata.json", "w") as f:
            f.write(md.metadata("weather", opts or md.options()))
        fname = f"system.buckets.weather.bson" if buckets else "weather.bson"
        with open(f"{d}/{fname}", "wb") as f:
            f.write(raw if raw is not None else b"".join(bson.encode(r) for r in recs))
        return d

    cases.append(("truncated bson", dump_with("trunc", None, raw=good[:-7]), [], ["weather.bson", "truncated"]))
    cases.append(("bad length", dump_with("len", None, raw=good + struct.pack("<i", 3) + b"xxx"), [], ["offset", "length of 3"]))
    corrupt = bytearray(first)
    corrupt[4] = 0x7F  # an element type BSON does not have
    cases.append(("corrupt element", dump_with("elem", None, raw=good + bytes(corrupt)), [], ["offset", "not valid BSON"]))
    no_nul = bytearray(first)
    no_nul[-1] = 1
    cases.append(("no terminator", dump_with("nul", None, raw=good + bytes(no_nul)), [], ["NUL"]))
    late = [dict(d) for d in docs[:3000]]
    late.append(dict(docs[0], temp="hot"))
    cases.append(("late type conflict", dump_with("conflict", late), [], ["field \"temp\"", "--schema"]))
    notime = dict(docs[0])
    del notime["ts"]
    cases.append(("missing time field", dump_with("notime", docs[:3000] + [notime]), [], ["field \"ts\"", "without its time field"]))
    cases.append(("time not a date", dump_with("strtime", docs[:3000] + [dict(docs[0], ts="yesterday")]), [], ["field \"ts\"", "not a date"]))
    cases.append(("NUL in a string", dump_with("nulstr", docs[:3000] + [dict(docs[0], status="a\x00b")]), [], ["status", "NUL"]))
    far = dict(docs[0], seen=bson.DatetimeMS(-300_000_000_000_000))
    cases.append(("date out of range", dump_with("fardate", docs[:3000] + [far]), [], ["seen", "out of PostgreSQL's range"]))
    b = md.buckets_v1(docs[:3000])
    bad_version = dict(b[-1], control=dict(b[-1]["control"], version=9))
    cases.append(("bucket version", dump_with("bver", b[:-1] + [bad_version], buckets=True), [], ["control.version", "version 9"]))
    bad_col = dict(b[-1], control=dict(b[-1]["control"], version=2), data=dict(b[-1]["data"], temp=bson.Binary(b"\x01\x02", 7)))
    cases.append(("corrupt BSONColumn", dump_with("bcol", b[:-1] + [bad_col], buckets=True), [], ["data.temp", "BSONColumn"]))
    bad_key = dict(b[-1], data=dict(b[-1]["data"], temp={"zero": 1.0}))
    cases.append(("bucket row key", dump_with("bkey", b[:-1] + [bad_key], buckets=True), [], ["data.temp.zero", "row index"]))
    j = f"{work}/bad.json"
    md.write_json(j, docs[:3000])
    with open(j, "a") as f:
        f.write('{"ts": {"$date": "2024-01-01T00:00:00Z"}, "temp": }\n')
    cases.append(("invalid JSON", j, ["--time-field", "ts", "--meta-field", "meta"], ["bad.json", "offset", "not valid JSON"]))
    j2 = f"{work}/trunc.json"
    md.write_json(j2, docs[:3000])
    with open(j2, "a") as f:
        f.write('{"ts": {"$date": "2024-01-01T00:00:00Z"}, "temp": [1, 2')
    cases.append(("truncated JSON", j2, ["--time-field", "ts", "--meta-field", "meta"], ["trunc.json", "truncated"]))
    j3 = f"{work}/ejson.json"
    md.write_json(j3, docs[:3000])
    with open(j3, "a") as f:
        f.write('{"ts": {"$date": "not a date"}}\n')
    cases.append(("bad Extended JSON", j3, ["--time-field", "ts", "--meta-field", "meta"], ["ejson.json", "Extended JSON"]))
    a = f"{work}/crc.archive"
    md.write_archive(a, "weather", docs[:3000], md.options())
    data = bytearray(open(a, "rb").read())
    data[-12] ^= 0xFF  # inside the last EOF header's CRC
    write_bytes(a, bytes(data))
    cases.append(("archive checksum", a, [], ["crc.archive", "checksum"]))
    a2 = f"{work}/magic.archive"
    write_bytes(a2, b"\x00\x01\x02\x03" + bytes(100))
    cases.append(("not an archive", a2, ["--format", "archive"], ["magic.archive", "magic number"]))
    g = f"{work}/broken.json.gz"
    md.write_json(g, docs[:3000], gz=True)
    raw = open(g, "rb").read()
    write_bytes(g, raw[: len(raw) // 2])
    cases.append(("truncated gzip", g, ["--time-field", "ts", "--meta-field", "meta"], ["broken.json.gz"]))
    return cases


def test_an_error_early_in_a_large_input_stops_promptly(tool, cluster, work):
    # The reader is far ahead when the bad record is met: every thread must
    # still stop, and the error be told.
    docs = md.collection(120_000, series=100, seed=5)
    j = f"{work}/early.json"
    md.write_json(j, docs[:4000])
    with open(j, "a") as f:
        f.write('{"ts": {"$date": "2024-01-01T00:00:00Z"}, "temp": }\n')
    with open(j, "ab") as f:
        f.write(b"".join(md.json_util.dumps(d).encode() + b"\n" for d in docs[4000:]))
    drop(cluster, "early")
    p = run(tool, cluster, j, "--table", "iot.early", "--time-field", "ts", "--meta-field", "meta", "--batch-rows", "1000",
            check=False, timeout=120)
    assert p.returncode == 1 and "not valid JSON" in p.stderr, p.stderr
    with cluster.connect() as conn:
        rows = conn.execute("SELECT count(*) FROM iot.early").fetchone()[0]
        assert rows == marker(conn, "early")[0] and rows <= 4000, rows


def test_bad_inputs_stop_with_a_clear_error_and_leave_the_last_batch(tool, cluster, docs, work):
    cases = bad_inputs(work, docs)
    assert len(cases) >= 12
    for i, (name, path, extra, fragments) in enumerate(cases):
        table = f"bad{i}"
        drop(cluster, table)
        p = run(tool, cluster, path, "--table", f"iot.{table}", "--batch-rows", "1000", *extra, check=False)
        assert p.returncode == 1, f"{name}: exit {p.returncode}\n{p.stderr}"
        for frag in fragments:
            assert frag in p.stderr, f"{name}: {frag!r} not in {p.stderr!r}"
        # Every error names where: the file, and the offset of the record.
        assert path.rstrip("/").split("/")[-1] in p.stderr or "weather" in p.stderr, f"{name}: no file in {p.stderr!r}"
        assert "offset" in p.stderr, f"{name}: no offset in {p.stderr!r}"
        with cluster.connect() as conn:
            if conn.execute("SELECT to_regclass(%s)", (f"iot.{table}",)).fetchone()[0] is None:
                continue
            # A corrupt archive file is checked through before anything is created.
            assert name != "archive checksum", "the archive's checksum was checked after rows were written"
            rows = conn.execute(f"SELECT count(*) FROM iot.{table}").fetchone()[0]
            m = marker(conn, table)
        # Only whole committed batches are in, and the marker counts exactly them.
        assert m is not None and not m[1], name
        assert rows == m[0], (name, rows, m)


def test_skip_invalid_counts_and_goes_on(tool, cluster, docs, work):
    j = f"{work}/mixed.json"
    md.write_json(j, docs[:2000])
    with open(j, "a") as f:
        f.write('{"ts": {"$date": "2024-01-01T00:00:00Z"}, "temp": }\n')
        f.write('{"temp": 1.5}\n')
        f.write('[1, 2]\n')
    with open(j, "ab") as f:
        f.write(b"".join(md.json_util.dumps(d).encode() + b"\n" for d in docs[2000:2500]))
    drop(cluster, "skipping")
    p = run(tool, cluster, j, "--table", "iot.skipping", "--time-field", "ts", "--meta-field", "meta", "--skip-invalid")
    assert "3 invalid records skipped" in p.stderr, p.stderr
    check_table(cluster, "skipping", docs[:2500])


def test_resume_refuses_a_replaced_file(tool, cluster, docs, work):
    j = f"{work}/replaced.json"
    md.write_json(j, docs[:3000])
    with open(j, "a") as f:
        f.write('{"ts": {"$date": "2024-01-01T00:00:00Z"}, "temp": }\n')
    drop(cluster, "replaced")
    args = [j, "--table", "iot.replaced", "--time-field", "ts", "--meta-field", "meta", "--batch-rows", "1000"]
    p = run(tool, cluster, *args, check=False)
    assert p.returncode == 1 and "not valid JSON" in p.stderr, p.stderr
    # Other records under the same name: resuming would pass over records it never read.
    md.write_json(j, docs[3000:9000])
    p = run(tool, cluster, *args, "--resume", check=False)
    assert p.returncode == 2 and "resume with the same input" in p.stderr, p.stderr
    with cluster.connect() as conn:
        rows = conn.execute("SELECT count(*) FROM iot.replaced").fetchone()[0]
        assert 0 < rows == marker(conn, "replaced")[0] < 3000, rows


def test_collection_options_become_the_tables(tool, cluster, docs, work):
    # minutes granularity, a custom span, expireAfterSeconds, and --keep-id.
    # (Far enough that the worker, every second here, expires none of 2024's rows.)
    opts = md.options(granularity="minutes", expire=86400 * 36500)
    md.write_dump(f"{work}/o1/iot", "weather", docs[:2000], opts, buckets=True)
    custom = {"timeseries": {"timeField": "ts", "metaField": "meta", "bucketMaxSpanSeconds": 7200, "bucketRoundingSeconds": 7200}}
    withid = [dict(d, _id=bson.ObjectId(bytes([i % 256] * 12))) for i, d in enumerate(docs[:500])]
    md.write_dump(f"{work}/o2/iot", "weather", withid, custom)
    for t in ("opt_minutes", "opt_custom"):
        drop(cluster, t)
    run(tool, cluster, f"{work}/o1/iot", "--table", "iot.opt_minutes")
    run(tool, cluster, f"{work}/o2/iot", "--table", "iot.opt_custom", "--keep-id")
    with cluster.connect() as conn:
        q = ("SELECT granularity, bucket_max_span = interval '1 day', extract(epoch FROM expire_after) = 3153600000, "
             "bucket_max_span = interval '2 hours', expire_after IS NULL FROM tsbucket.timeseries WHERE table_name = %s::regclass")
        assert conn.execute(q, ("iot.opt_minutes",)).fetchone()[:3] == ("minutes", True, True)
        g, _, _, span, no_expiry = conn.execute(q, ("iot.opt_custom",)).fetchone()
        assert span and no_expiry, g
        ids = conn.execute("SELECT _id FROM iot.opt_custom ORDER BY ts, sensor LIMIT 1").fetchone()
        assert ids is not None and len(ids[0]) == 24, ids
        assert conn.execute("SELECT count(*) FROM iot.opt_minutes").fetchone()[0] == 2000
