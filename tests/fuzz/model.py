"""The fuzzer's data model: the columns a round's tables have, random values
with the edges tsbucket must get right (NULLs, NaN, infinities, signed
zeros, integer bounds, TOASTed text, times from 44 AD to 2100 and on window
boundaries), and SQL literals of them."""

import datetime as dt
import decimal
import json
import math
import random
from dataclasses import dataclass, field

UTC = dt.timezone.utc
T0 = dt.datetime(2024, 3, 1, tzinfo=UTC)

# name -> (SQL type, kind)
TYPES = {
    "float8": "float",
    "float4": "float",
    "int8": "int",
    "int4": "int",
    "int2": "int",
    "bool": "bool",
    "text": "text",
    "numeric": "numeric",
    "timestamp": "timestamp",
    "timestamptz": "timestamptz",
    "date": "date",
    "jsonb": "jsonb",
}
INT_BOUNDS = {"int2": 2**15, "int4": 2**31, "int8": 2**63}


@dataclass
class Column:
    name: str
    type: str
    role: str = "measurement"  # time | meta | measurement
    # A gauge: finite values of moderate size (variance and stddev are
    # compared on these only: with extremes their results depend on the order
    # of addition, on heap too).
    tame: bool = False
    null_p: float = 0.1

    @property
    def kind(self):
        return TYPES[self.type]


@dataclass
class Schema:
    time_type: str
    metas: list
    columns: list = field(default_factory=list)
    span_seconds: int = 3600
    added: int = 0

    @property
    def time(self):
        return self.columns[0]

    def meta_columns(self):
        return [c for c in self.columns if c.role == "meta"]

    def measurements(self):
        return [c for c in self.columns if c.role == "measurement"]

    def names(self):
        return [c.name for c in self.columns]

    def column(self, name):
        return next(c for c in self.columns if c.name == name)


def new_schema(rng, need_meta=False):
    """need_meta: at least one meta column (a distributed table's distribution
    column is its first, and never NULL)."""
    time_type = "timestamptz" if rng.random() < 0.8 else "timestamp"
    metas = rng.choice([["dev"], ["dev"], ["dev", "site"], ["site"]] + ([] if need_meta else [[]]))
    cols = [
        Column("time", time_type, "time"),
        Column("dev", "text", "meta" if "dev" in metas else "measurement", null_p=0.05),
        Column("site", "int4", "meta" if "site" in metas else "measurement", null_p=0.05),
        Column("f8", "float8"),
        Column("f4", "float4"),
        Column("g", "float8", tame=True),
        Column("i8", "int8"),
        Column("i4", "int4"),
        Column("i2", "int2"),
        Column("b", "bool"),
        Column("txt", "text"),
        Column("num", "numeric"),
        Column("ts", "timestamp"),
        Column("d", "date"),
        Column("doc", "jsonb"),
    ]
    for c in cols[3:]:
        c.null_p = rng.choice([0.0, 0.05, 0.2, 0.6, 1.0]) if rng.random() < 0.3 else 0.1
    if need_meta:
        next(c for c in cols if c.name == metas[0]).null_p = 0.0
    return Schema(time_type=time_type, metas=metas, columns=cols)


EDGE_TIMES = [
    dt.datetime(44, 3, 15, 12, tzinfo=UTC),
    dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
    dt.datetime(1970, 1, 1, tzinfo=UTC),
    dt.datetime(1999, 12, 31, 23, 59, 59, tzinfo=UTC),
    dt.datetime(2000, 1, 1, tzinfo=UTC),
    dt.datetime(2038, 1, 19, 3, 14, 8, tzinfo=UTC),
    dt.datetime(2100, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
]


class TimeGen:
    """Times of one round: most within a few days (in order or not, whole
    seconds so that series have equal times), some on the windows' edges,
    some far away. Remembers what it produced: query constants come from it,
    so bounds land exactly on rows."""

    def __init__(self, rng, span_seconds):
        self.rng = rng
        self.span = span_seconds
        self.spread = rng.choice([600, 6 * 3600, 2 * 86400, 5 * 86400])
        self.whole_seconds = rng.random() < 0.4
        self.seen = []

    def next(self):
        r = self.rng.random()
        if r < 0.03:
            t = self.rng.choice(EDGE_TIMES)
        elif r < 0.12:
            # A window boundary of the main range, or a microsecond either side of it.
            k = self.rng.randrange(0, max(1, self.spread // self.span) + 1)
            t = T0 + dt.timedelta(seconds=k * self.span, microseconds=self.rng.choice([-1, 0, 0, 1]))
        elif r < 0.17 and self.seen:
            t = self.rng.choice(self.seen)  # an equal time (ties)
        else:
            t = T0 + dt.timedelta(seconds=self.rng.randrange(0, self.spread))
            if not self.whole_seconds:
                t += dt.timedelta(microseconds=self.rng.randrange(0, 1000000))
        if len(self.seen) < 20000:
            self.seen.append(t)
        return t

    def constant(self):
        """A time to compare with: one a row has (often), or near one."""
        if self.seen and self.rng.random() < 0.8:
            t = self.rng.choice(self.seen)
            return t + dt.timedelta(microseconds=self.rng.choice([0, 0, 0, -1, 1]))
        return self.rng.choice(EDGE_TIMES + [T0, T0 + dt.timedelta(seconds=self.spread)])


def as_time(t, sql_type):
    """A time value as the column's Python type (timestamp columns hold UTC wall-clock times)."""
    return t if sql_type == "timestamptz" else t.replace(tzinfo=None)


FLOAT8_EDGES = [math.nan, math.inf, -math.inf, -0.0, 0.0, 1e308, -1e308, 5e-324, 1e-300, 2.5, -1.0]
FLOAT4_EDGES = [math.nan, math.inf, -math.inf, -0.0, 0.0, 3.4e38, -3.4e38, 1.4e-45, 0.5]
TEXTS = ["", "a", "ok", "warn", "fault", "ü€", "😀x", "tab\tand\nnewline", "back\\slash", "o'quote", "Zz", "zz"]


def value(rng, col, times):
    """A random value of `col` (None for NULL)."""
    if col.role == "time":
        return as_time(times.next(), col.type)
    if rng.random() < col.null_p:
        return None
    if col.name == "dev":
        return rng.choice(["d1", "d2", "d3", "d4", "d5", "D1", "d10", ""])
    if col.name == "site":
        return rng.choice([1, 2, 3, -1, 0])
    kind = col.kind
    if kind == "float":
        if col.tame:
            return round(rng.uniform(-1000, 1000), 2)
        r = rng.random()
        if r < 0.12:
            v = rng.choice(FLOAT8_EDGES if col.type == "float8" else FLOAT4_EDGES)
        elif r < 0.3:
            v = float(rng.randrange(-100, 100))
        else:
            v = round(rng.uniform(-100, 100), rng.choice([1, 2]))
        return v
    if kind == "int":
        bound = INT_BOUNDS[col.type]
        r = rng.random()
        if r < 0.08:
            return rng.choice([-bound, bound - 1, 0, -1, 1])
        if r < 0.15:
            return rng.randrange(-bound, bound)
        return rng.randrange(-50, 50)
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "text":
        r = rng.random()
        if r < 0.03:
            return "long " * rng.randrange(200, 1000)  # TOASTed beside the row
        return rng.choice(TEXTS)
    if kind == "numeric":
        r = rng.random()
        if r < 0.05:
            return decimal.Decimal("NaN")
        if r < 0.1:
            return decimal.Decimal(rng.randrange(-10**30, 10**30))
        return decimal.Decimal(rng.randrange(-10**6, 10**6)) / (10 ** rng.randrange(0, 4))
    if kind in ("timestamp", "timestamptz"):
        t = times.constant() if rng.random() < 0.3 else T0 + dt.timedelta(seconds=rng.randrange(-10**8, 10**8))
        return as_time(t, kind)
    if kind == "date":
        return dt.date(2024, 1, 1) + dt.timedelta(days=rng.randrange(-700000, 27000))
    if kind == "jsonb":
        return document(rng)
    raise AssertionError(kind)


JSON_KEYS = ["t", "n", "s", "on", "gps", "v", "", "ü", "a_much_longer_key_name"]
JSON_NUMBERS = ["0", "-0", "1.50", "0.000", "-12.5", "1e-20", "1E+30", "9223372036854775807", "9223372036854775808",
                "123456789012345678901234567890.123456789", "0.1", "42"]


def json_number(rng):
    r = rng.random()
    if r < 0.2:
        return rng.choice(JSON_NUMBERS)
    if r < 0.4:
        return str(rng.randrange(-1000, 1000))
    return f"{rng.randrange(-10**6, 10**6) / 10 ** rng.choice([1, 2]):.{rng.choice([1, 2, 3])}f}"


def json_value(rng, depth):
    """JSON text of a random value: nesting, arrays of mixed types, empty containers, JSON null."""
    r = rng.random()
    if depth < 4 and r < 0.12:
        return "[" + ", ".join(json_value(rng, depth + 1) for _ in range(rng.choice([0, 1, 3, 40]))) + "]"
    if depth < 4 and r < 0.22:
        keys = rng.sample(JSON_KEYS, rng.randrange(0, 4))
        if rng.random() < 0.05:
            keys = [f"k{i}" for i in range(40)]
        return "{" + ", ".join(f'"{k}": {json_value(rng, depth + 1)}' for k in keys) + "}"
    if r < 0.3:
        return rng.choice(["null", "true", "false"])
    if r < 0.5:
        return json.dumps(rng.choice(TEXTS + ["long " * 300]), ensure_ascii=False)
    return json_number(rng)


def document(rng):
    """A jsonb document as JSON text: mostly a sensor's reading (paths that come
    and go, a value that changes type now and then), sometimes anything."""
    if rng.random() < 0.15:
        return json_value(rng, 0)
    fields = {"t": json_number(rng), "s": json.dumps(rng.choice(["ok", "warn", "fault"])), "on": rng.choice(["true", "false"])}
    if rng.random() < 0.3:
        fields["gps"] = f'{{"lat": {json_number(rng)}, "lon": 11.50}}'
    if rng.random() < 0.8:
        # A counter the integer casts read (regress `documents` has their failures).
        fields["c"] = str(rng.randrange(-10**6, 10**6))
    if rng.random() < 0.3:
        # A time as text (`::timestamptz` reads each form).
        at = dt.datetime(2024, 1, 1) + dt.timedelta(seconds=rng.randrange(0, 400 * 86400))
        fields["at"] = json.dumps(rng.choice([at.isoformat() + "Z", at.isoformat() + "+02:00", str(at.date())]))
    if rng.random() < 0.1:
        fields["t"] = json_value(rng, 1)
    if rng.random() < 0.2:
        fields[rng.choice(JSON_KEYS)] = json_value(rng, 1)
    return "{" + ", ".join(f'"{k}": {v}' for k, v in fields.items()) + "}"


def row(rng, schema, times):
    return [value(rng, c, times) for c in schema.columns]


def lit(v, sql_type):
    """A SQL literal of `v` as `sql_type` (with its cast), for query text."""
    if v is None:
        return f"NULL::{sql_type}"
    kind = TYPES.get(sql_type, sql_type)
    if kind == "float":
        if math.isnan(v):
            s = "NaN"
        elif math.isinf(v):
            s = "Infinity" if v > 0 else "-Infinity"
        else:
            s = repr(v)
        return f"'{s}'::{sql_type}"
    if kind == "bool":
        return "true" if v else "false"
    if kind in ("int", "numeric"):
        return f"'{v}'::{sql_type}"
    if kind in ("timestamp", "timestamptz"):
        return f"'{v.isoformat()}'::{sql_type}"
    if kind == "date":
        return f"'{v.isoformat()}'::date"
    # Doubled braces: queries are str.format templates ({t} is the table).
    text = str(v).replace("'", "''").replace("%", "%%").replace("{", "{{").replace("}", "}}")
    return "'" + text + f"'::{sql_type}"


def constant(rng, col, times):
    """A value to compare `col` with: edges and values the data has."""
    if col.role == "time" or col.kind in ("timestamp", "timestamptz"):
        return as_time(times.constant(), col.type)
    for _ in range(5):
        v = value(rng, col, times)
        if v is not None:
            return v
    return value(rng, Column(col.name, col.type, col.role, col.tame, 0.0), times)
