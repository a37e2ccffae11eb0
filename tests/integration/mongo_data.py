"""MongoDB time-series collections written by an independent BSON writer
(pymongo's `bson` module), in the forms mongoexport and mongodump leave them,
and the rows tsbucket-import must make of them. Used by test_import.py and
bench/import.py."""

import datetime as dt
import gzip
import json
import os
import urllib.parse
import random
import subprocess
from decimal import Decimal

import bson
from bson import json_util
from bson.decimal128 import Decimal128
from bson.int64 import Int64
from bson.objectid import ObjectId

UTC = dt.timezone.utc
EPOCH = dt.datetime(1970, 1, 1, tzinfo=UTC)


def collection(n, series=100, seed=1, start=dt.datetime(2024, 1, 1, tzinfo=UTC), step_s=10):
    """n measurements over `series` sensors: a meta object, typed fields
    (double, int32, int64, decimal, string, bool, date, ObjectId), optional
    ones (absent or null now and then), a nested object and an array."""
    rng = random.Random(seed)
    docs = []
    for i in range(n):
        s = i % series
        t = start + dt.timedelta(seconds=step_s * (i // series), milliseconds=rng.randrange(1000))
        d = {
            "ts": t,
            "meta": {"sensor": f"s{s:03d}", "site": s % 7},
            "temp": round(rng.uniform(-20, 40), rng.choice([0, 1, 2])),
            "count": rng.randrange(1 << 20),
            "total": Int64(rng.randrange(1 << 50)),
            "price": Decimal128(f"{rng.randrange(100000)}.{rng.randrange(100):02d}"),
            "status": rng.choice(["ok", "warn", "fail"]),
            "on": rng.random() < 0.5,
        }
        if rng.random() < 0.3:
            d["hum"] = rng.uniform(0, 100)
        if rng.random() < 0.05:
            d["hum"] = None
        if rng.random() < 0.1:
            d["gps"] = {"lat": rng.uniform(-90, 90), "lon": rng.uniform(-180, 180), "fix": [1, "x", None]}
        if rng.random() < 0.02:
            d["note"] = rng.choice(["tab\there", "line\nbreak", "back\\slash", "ünïcødé ✓", "quote\"s"])
        if rng.random() < 0.02:
            d["seen"] = EPOCH + dt.timedelta(days=rng.randrange(-719000, 800000))
        if rng.random() < 0.01:
            d["ref"] = ObjectId(bytes(rng.randrange(256) for _ in range(12)))
        docs.append(d)
    return docs


def options(meta=True, granularity="seconds", expire=None):
    ts = {"timeField": "ts", "granularity": granularity, "bucketMaxSpanSeconds": {"seconds": 3600, "minutes": 86400, "hours": 2592000}[granularity]}
    if meta:
        ts["metaField"] = "meta"
    o = {"timeseries": ts}
    if expire:
        o["expireAfterSeconds"] = Int64(expire)
    return o


def write_json(path, docs, canonical=False, array=False, gz=False):
    mode = json_util.CANONICAL_JSON_OPTIONS if canonical else json_util.RELAXED_JSON_OPTIONS
    lines = [json_util.dumps(d, json_options=mode) for d in docs]
    text = ("[" + ",\n".join(lines) + "]\n") if array else "\n".join(lines) + "\n"
    data = text.encode()
    with open(path, "wb") as f:
        f.write(gzip.compress(data) if gz else data)


def metadata(coll, opts):
    return json_util.dumps({"indexes": [], "uuid": "0123456789abcdef0123456789abcdef", "collectionName": coll,
                            "type": "timeseries", "options": opts}, json_options=json_util.CANONICAL_JSON_OPTIONS)


def _open(path, gz):
    return gzip.open(path + ".gz", "wb") if gz else open(path, "wb")


def buckets_v1(docs, span_s=3600, max_count=1000):
    """Version-1 bucket documents, as MongoDB 5.0 writes them: per series and
    window, `data.<field>` objects keyed by row index (absent where a
    measurement lacks the field)."""
    open_b = {}
    out = []
    for d in docs:
        meta = d.get("meta")
        key = (json_util.dumps(meta), int((d["ts"] - EPOCH).total_seconds()) // span_s)
        b = open_b.get(key)
        if b is None or b["n"] >= max_count:
            b = {"meta": meta, "rows": [], "n": 0}
            open_b[key] = b
            out.append(b)
        b["rows"].append(d)
        b["n"] += 1
    result = []
    for b in out:
        data = {}
        for i, d in enumerate(b["rows"]):
            for k, v in d.items():
                if k == "meta":
                    continue
                data.setdefault(k, {})[str(i)] = v
        times = [d["ts"] for d in b["rows"]]
        bucket = {"_id": ObjectId(), "control": {"version": 1, "min": {"ts": min(times)}, "max": {"ts": max(times)}}}
        if b["meta"] is not None:
            bucket["meta"] = b["meta"]
        bucket["data"] = data
        result.append(bucket)
    return result


def file_stem(coll):
    """The stem of mongodump's file names for `coll`: Go's url.PathEscape."""
    return urllib.parse.quote(coll, safe="$&+:=@-_.~")


def write_dump(dirpath, coll, docs, opts, buckets=False, gz=False):
    """A mongodump directory of one database holding `coll`: its metadata and
    either its documents or its version-1 buckets."""
    os.makedirs(dirpath, exist_ok=True)
    with _open(os.path.join(dirpath, f"{file_stem(coll)}.metadata.json"), gz) as f:
        f.write(metadata(coll, opts).encode())
    if buckets:
        name = f"{file_stem('system.buckets.' + coll)}.bson"
        recs = buckets_v1(docs)
    else:
        name = f"{file_stem(coll)}.bson"
        recs = docs
    with _open(os.path.join(dirpath, name), gz) as f:
        for r in recs:
            f.write(bson.encode(r))


def _plain(v):
    """A value as the importer's jsonb holds it (compared numerically)."""
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_plain(x) for x in v]
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return v
    if isinstance(v, (int, Int64)):
        return Decimal(int(v))
    if isinstance(v, float):
        return Decimal(repr(v))
    if isinstance(v, Decimal128):
        return v.to_decimal()
    if isinstance(v, dt.datetime):
        return v.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{v.microsecond // 1000:03d}Z"
    if isinstance(v, ObjectId):
        return str(v)
    raise TypeError(type(v))


def expected_rows(docs):
    """The rows of the table the importer infers for `collection()`'s
    documents, in the column order `SELECT * ... ORDER BY sensor, ts` gives."""
    rows = []
    typed = ("temp", "count", "total", "price", "status", "on", "hum", "note", "seen", "ref")
    for d in docs:
        rest = {k: _plain(v) for k, v in d.items() if k not in ("ts", "meta", "_id") + typed}
        rows.append((
            d["ts"].replace(tzinfo=UTC) if d["ts"].tzinfo is None else d["ts"],
            d["meta"]["sensor"], d["meta"]["site"],
            float(d["temp"]), d["count"], int(d["total"]), d["price"].to_decimal(), d["status"], d["on"],
            d.get("hum"), d.get("note"), d.get("seen"), str(d["ref"]) if "ref" in d else None,
            rest or None,
        ))
    rows.sort(key=lambda r: (r[1], r[0]))
    return rows


def read_rows(conn, table):
    """The table's rows in the same form (jsonb read with exact numbers)."""
    cur = conn.execute(f"SELECT ts, sensor, site, temp, count, total, price, status, \"on\", hum, note, seen, ref, doc::text "
                       f"FROM {table} ORDER BY sensor, ts")
    out = []
    for r in cur:
        rest = json.loads(r[13], parse_float=Decimal, parse_int=Decimal) if r[13] is not None else None
        out.append(tuple(r[:13]) + (rest,))
    return out


def _crc64_table():
    poly = 0xC96C5795D7870F42
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ poly if c & 1 else c >> 1
        table.append(c)
    return table


_CRC_TABLE = _crc64_table()


def crc64_xz(data, crc=0):
    """CRC-64/XZ (Go's crc64 with the ECMA table), as mongodump checks each
    collection's documents."""
    c = crc ^ 0xFFFFFFFFFFFFFFFF
    t = _CRC_TABLE
    for b in data:
        c = t[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFFFFFFFFFF


TERM = b"\xff\xff\xff\xff"


def write_archive(path, coll, docs, opts, db="iot", server="7.0.0", gz=False, other_docs=5, segment=30):
    """A `mongodump --archive` of database `db` holding the time-series
    collection `coll` (as version-1 buckets in `system.buckets.<coll>`, or in
    `<coll>` for servers from 8.3) and a plain collection `other`, their
    blocks interleaved as mongodump's multiplexer leaves them."""
    out = [b"\x6d\xe2\x99\x81",
           bson.encode({"concurrent_collections": 4, "version": "0.1", "server_version": server, "tool_version": "100.10.0"}),
           bson.encode({"db": db, "collection": coll, "metadata": metadata(coll, opts), "size": 0, "type": "timeseries"}),
           bson.encode({"db": db, "collection": "other", "metadata": metadata("other", {}), "size": 0, "type": "collection"}),
           TERM]
    major, minor = (int(x) for x in server.split(".")[:2])
    ns = coll if (major, minor) >= (8, 3) else f"system.buckets.{coll}"
    recs = [bson.encode(b) for b in buckets_v1(docs)]
    others = [bson.encode({"_id": i, "x": "y" * i}) for i in range(other_docs)]

    def header(name, eof=False, crc=0):
        signed = crc - (1 << 64) if crc >= 1 << 63 else crc
        return bson.encode({"db": db, "collection": name, "EOF": eof, "CRC": Int64(signed)})

    crc = 0
    for i in range(0, len(recs), segment):
        chunk = recs[i:i + segment]
        out += [header(ns)] + chunk + [TERM]
        for r in chunk:
            crc = crc64_xz(r, crc)
        if i == 0:
            out += [header("other")] + others + [TERM]
            ocrc = 0
            for r in others:
                ocrc = crc64_xz(r, ocrc)
            out += [header("other", True, ocrc), TERM]
    out += [header(ns), TERM]  # an empty segment, as the last flush writes
    out += [header(ns, True, crc), TERM]
    data = b"".join(out)
    with open(path, "wb") as f:
        f.write(gzip.compress(data) if gz else data)


def compress_buckets(path, version):
    """Rewrites a file of version-1 buckets in place as compressed buckets of
    `version` (2 or 3), through the importer's own test encoder (no MongoDB
    runs here): `cargo test` of the ignored source::bucket::tests::compress_bucket_file."""
    repo = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
    env = dict(os.environ, TSBUCKET_COMPRESS_IN=path, TSBUCKET_COMPRESS_OUT=path, TSBUCKET_COMPRESS_VERSION=str(version))
    subprocess.run(["cargo", "test", "--release", "-q", "-p", "tsbucket-import", "--lib", "--",
                    "--ignored", "--exact", "source::bucket::tests::compress_bucket_file"],
                   cwd=repo, env=env, check=True, capture_output=True)
