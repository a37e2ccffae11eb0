"""Random queries over every TsBucketScan path, as a small structure that
renders twice: for the tsbucket table, and for the heap table that answers
as the oracle. The heap form carries what the comparison needs beyond the
answer itself: bounds for order-dependent float sums, and, for first/last,
every value tied at the least or greatest time.

Paths aimed at (README "Queries"): the series index (meta equalities, IN,
= ANY, parameters), the window index (time bounds, stable expressions),
sequential scans, time-ordered merges (ORDER BY time [DESC] LIMIT, a time
bucket ordered), last points (DISTINCT ON), series-ordered merges (ORDER BY
meta..., time), vectorised filters (OR, IN, IS NULL, NOT), aggregation in the
scan (GROUP BY meta and time buckets), header answers (whole buckets in
range), joins on the meta column."""

from dataclasses import dataclass, field

import math

from model import INT_BOUNDS, constant, lit

CMP = ["<", "<=", "=", ">=", ">"]


def fits(v, sql_type):
    """Whether `v` converts to `sql_type` without an error."""
    if v is None or isinstance(v, bool):
        return True
    if sql_type in INT_BOUNDS:
        return isinstance(v, int) and -INT_BOUNDS[sql_type] <= v < INT_BOUNDS[sql_type]
    if sql_type == "float4" and isinstance(v, float):
        return not math.isfinite(v) or v == 0 or 1.2e-38 <= abs(v) <= 3.4e38
    return True


@dataclass
class Out:
    """One output column. `cls` says how it is compared: exact (its text),
    floatagg (a sum or avg of floats: within the bound its aux columns give),
    minmax_float (exact, but -0 equals 0: min/max keep either on a tie), var
    (variance or stddev of a gauge), first/last (one of the tied values)."""

    sql: str
    cls: str = "exact"
    heap_sql: str = None
    aux: list = field(default_factory=list)
    float_key: bool = False
    f4: bool = False


@dataclass
class Query:
    kind: str  # plain | agg | lastpoint | join
    outs: list
    where: list = field(default_factory=list)  # (sql, params) terms, ANDed
    group: list = field(default_factory=list)
    having: str = None
    order: list = field(default_factory=list)  # (1-based output position, desc)
    limit: int = None
    distinct_on: int = 0
    join_values: list = None
    meta_key: str = None
    # On Citus, avg() over several shards is sum() / count() of the shards'
    # partial sums, and sum(float4) adds in float4: within float4's error.
    citus: bool = False

    def params(self):
        return [p for _, ps in self.where for p in ps]

    def has_first_last(self):
        return any(o.cls in ("first", "last") for o in self.outs)

    def render(self, table, heap=False):
        """SQL with %s placeholders (literal % doubled) and its parameters."""
        where = " AND ".join(f"({sql})" for sql, _ in self.where)
        if self.kind == "join":
            on = f"x.{self.meta_key} = v.k"
            cond = f" AND {where}" if where else ""
            values = ", ".join(f"({v})" for v in self.join_values)
            outs = ", ".join(o.sql for o in self.outs)
            sql = (f"SELECT {outs} FROM (VALUES {values}) v(k) LEFT JOIN {table} x ON {on}{cond} "
                   f"GROUP BY v.k ORDER BY 1")
            return sql, self.params()
        outs = [o.heap_sql if heap and o.heap_sql else o.sql for o in self.outs]
        if heap:
            for o in self.outs:
                outs.extend(o.aux)
        source = table
        where_sql = f" WHERE {where}" if where else ""
        if heap and self.has_first_last():
            part = ", ".join(self.group)
            over = f"OVER (PARTITION BY {part})" if part else "OVER ()"
            source = f"(SELECT *, min(time) {over} AS _tmin, max(time) {over} AS _tmax FROM {table}{where_sql}) _s"
            where_sql = ""
        distinct = ""
        if self.distinct_on and not heap:
            distinct = "DISTINCT ON (" + ", ".join(o.sql for o in self.outs[: self.distinct_on]) + ") "
        sql = f"SELECT {distinct}{', '.join(outs)} FROM {source}{where_sql}"
        if self.group:
            sql += " GROUP BY " + ", ".join(self.group)
        if self.having:
            sql += " HAVING " + self.having
        if self.order:
            sql += " ORDER BY " + ", ".join(f"{p}{' DESC' if d else ''}" for p, d in self.order)
        # The oracle returns every row in order; the checker takes the limit (ties).
        if self.limit is not None and not heap:
            sql += f" LIMIT {self.limit}"
        return sql, self.params()

    def shrunk(self):
        """Smaller variants of this query, for minimizing a failure."""
        out = []
        for i in range(len(self.where)):
            out.append(_copy(self, where=self.where[:i] + self.where[i + 1:]))
        if self.kind in ("plain", "agg"):
            keep = {p - 1 for p, _ in self.order} | set(range(len(self.group)))
            for i, o in enumerate(self.outs):
                if i not in keep and len(self.outs) > 1:
                    order = [(p - (p > i + 1), d) for p, d in self.order]
                    out.append(_copy(self, outs=self.outs[:i] + self.outs[i + 1:], order=order))
        if self.having:
            out.append(_copy(self, having=None))
        if self.limit is not None:
            out.append(_copy(self, limit=None))
        return out


def _copy(q, **changes):
    d = dict(q.__dict__)
    d.update(changes)
    return Query(**d)


class QueryGen:
    def __init__(self, rng, schema, times, params):
        self.rng = rng
        self.schema = schema
        self.times = times
        # Constants as parameters (generic plans, `= ANY($1)`), else literals.
        self.params = params

    # -- predicates -------------------------------------------------------

    def const(self, col, sql_type=None):
        """(sql, params) of a constant compared with `col` (as `sql_type`, in its range:
        a cast that fails would fail when the scan starts, as on an index scan,
        not only when a row reaches it, as on a heap's sequential scan)."""
        sql_type = sql_type or col.type
        v = constant(self.rng, col, self.times)
        while not fits(v, sql_type):
            v = constant(self.rng, col, self.times)
        if self.params:
            return f"%s::{sql_type}", [v]
        return lit(v, sql_type), []

    def term(self, depth=0):
        rng = self.rng
        s = self.schema
        r = rng.random()
        cols = [c for c in s.columns if c.role != "time"]
        if r < 0.3:
            return self.time_term()
        if r < 0.5 and s.meta_columns():
            return self.meta_term(rng.choice(s.meta_columns()))
        if r < 0.6 and depth < 2:
            a, b = self.term(depth + 1), self.term(depth + 1)
            return f"({a[0]}) OR ({b[0]})", a[1] + b[1]
        if r < 0.65 and depth < 2:
            a = self.term(depth + 1)
            return f"NOT ({a[0]})", a[1]
        col = rng.choice(cols)
        return self.column_term(col)

    def time_term(self, name="time"):
        rng = self.rng
        t = self.schema.time
        r = rng.random()
        if r < 0.15:
            (a, pa), (b, pb) = self.const(t), self.const(t)
            return f"{name} BETWEEN {a} AND {b}", pa + pb
        if r < 0.25:
            # A stable expression (evaluated once, at scan start).
            c, p = self.const(t)
            sign = rng.choice(["-", "+"])
            return f"{name} {rng.choice(CMP)} {c} {sign} interval '{rng.choice([1, 30, 3600])} seconds'", p
        c, p = self.const(t)
        if rng.random() < 0.2:
            return f"{c} {rng.choice(CMP)} {name}", p
        return f"{name} {rng.choice(CMP)} {c}", p

    def meta_term(self, col):
        rng = self.rng
        r = rng.random()
        if r < 0.4:
            c, p = self.const(col)
            return f"{col.name} = {c}", p
        if r < 0.55:
            vals = [self.const(col) for _ in range(rng.randrange(1, 4))]
            if rng.random() < 0.3:
                vals.append((f"NULL::{col.type}", []))
            return f"{col.name} IN ({', '.join(v for v, _ in vals)})", [x for _, p in vals for x in p]
        if r < 0.7:
            vals = [constant(rng, col, self.times) for _ in range(rng.randrange(0, 4))]
            if self.params:
                return f"{col.name} = ANY (%s::{col.type}[])", [vals]
            arr = ", ".join(lit(v, col.type) for v in vals)
            return f"{col.name} = ANY (ARRAY[{arr}]::{col.type}[])", []
        if r < 0.8:
            return f"{col.name} IS {rng.choice(['', 'NOT '])}NULL", []
        c, p = self.const(col)
        return f"{col.name} {rng.choice(['<>', '<', '>='])} {c}", p

    def column_term(self, col):
        rng = self.rng
        r = rng.random()
        if r < 0.15:
            return f"{col.name} IS {rng.choice(['', 'NOT '])}NULL", []
        if col.kind == "bool":
            return rng.choice([f"{col.name}", f"NOT {col.name}", f"{col.name} IS NOT TRUE", f"{col.name} = true"]), []
        if col.kind == "text" and r < 0.4:
            return f"{col.name} LIKE {lit(rng.choice(['w%', '%a%', 'd_', '']), 'text')}", []
        if col.kind == "jsonb" and r < 0.6:
            n = col.name
            return rng.choice([
                f"{n} ? 'gps'", f"{n} ? 't'", f"{n} @> jsonb_build_object('s', 'warn')", f"{n} @> jsonb_build_object('on', true)",
                f"{n}->>'s' = 'ok'", f"{n}->'t' > '1.5'::jsonb", f"jsonb_typeof({n}->'t') = 'number'",
                f"{n} #>> ARRAY['gps', 'lat'] IS NOT NULL", f"{n}->>'t' LIKE '1%%'",
                f"{n}['s'] = '\"ok\"'::jsonb", f"jsonb_extract_path_text({n}, 'gps', 'lon') = '11.50'",
                f"{n} ?| ARRAY['gps', 'v']", f"{n} ?& ARRAY['t', 's']", f"{n}[0] IS NOT NULL", f"{n}->0 IS NULL",
                # Constants the planner sees as such (key narrowing; `?` read on the key's sub-column).
                # (Braces doubled twice: the query text is str.format()ed with the table's name.)
                f"NOT {n} ? 's'", f"({n} ? 'n' OR {n} ? 'zz')", f"{n} @> '{{{{\"s\": \"warn\"}}}}'", f"{n} @> '{{{{\"t\": 1.50}}}}'::jsonb",
                f"{n} #> ARRAY['gps', 'lat'] IS NOT NULL", f"jsonb_extract_path({n}, 'gps') IS NULL",
                f"CASE WHEN jsonb_typeof({n}->'t') = 'number' THEN ({n}->>'t')::numeric END > 1",
                # Fields cast to numbers: pruned by the buckets' field statistics, filtered on the sub-columns.
                f"({n}->>'t')::float8 > {rng.choice(['0.5', '1.5', '-3', '10', '1e300'])}", f"({n}->>'v')::float8 <= 2.5",
                f"({n}->>'n')::int <= {rng.choice(['0', '3', '-1'])}", f"NOT ({n}->>'t')::float8 >= 1",
                f"({n}->>'at')::timestamptz < '2024-06-01'", f"({n}->>'at')::timestamptz IS NOT NULL",
                f"(({n}->>'t')::float8 > 1 OR ({n}->>'n')::bigint = 2)", f"1.5 < ({n}->>'t')::float8",
                # Forms read on whole documents: jsonpath, a key from another column.
                f"jsonb_path_exists({n}, '$.t ? (@ > 1)')", f"{n} ? coalesce(dev, 't')",
            ]), []
        if r < 0.3:
            vals = [self.const(col) for _ in range(rng.randrange(1, 4))]
            return f"{col.name} IN ({', '.join(v for v, _ in vals)})", [x for _, p in vals for x in p]
        # A constant of another width (int2 > 5::int8, float4 > 0.5::float8) now and then.
        other = {"int2": "int8", "int4": "int2", "int8": "int4", "float4": "float8", "float8": "float4"}.get(col.type)
        if other and rng.random() < 0.2:
            c, p = self.const(col, other)
        else:
            c, p = self.const(col)
        return f"{col.name} {rng.choice(CMP)} {c}", p

    def where(self, most=3):
        return [self.term() for _ in range(self.rng.randrange(0, most + 1))]

    # -- queries ----------------------------------------------------------

    def plain_out(self, col):
        if col.kind == "jsonb":
            r = self.rng.random()
            # A field cast to a number: the scan fills it from the field's sub-column.
            if r < 0.25:
                return Out(f"({col.name}->>'{self.rng.choice(['t', 't', 'n', 'v'])}')::float8", float_key=True)
            if r < 0.35:
                return Out(f"({col.name}->>'n')::{self.rng.choice(['int', 'bigint'])}")
            if r < 0.45:
                # Other accessors and casts in the select list (keys decoded, Postgres's projection).
                return Out(self.rng.choice([f"{col.name}->'s'", f"{col.name} #>> ARRAY['gps', 'lat']", f"({col.name}['on'])::text",
                                            f"jsonb_extract_path_text({col.name}, 'gps', 'lon')", f"({col.name}->>'at')::timestamptz",
                                            f"({col.name}->>'t')::numeric"]) + "::text")
            # As text: psycopg would read jsonb into Python values, where 1.50 equals 1.5.
            return Out(f"{col.name}::text")
        return Out(col.name, float_key=col.kind == "float")

    def query(self):
        rng = self.rng
        s = self.schema
        r = rng.random()
        metas = s.meta_columns()
        if r < 0.16 and metas:
            return self.last_point()
        if r < 0.22:
            return self.header_friendly()
        if r < 0.25:
            return self.time_ordered()
        if r < 0.33 and metas:
            return self.series_ordered()
        if r < 0.38 and metas:
            return self.join()
        if r < 0.72:
            return self.aggregate()
        return self.plain()

    def some_columns(self, most=4):
        cols = [c for c in self.schema.columns if c.role != "time"]
        return self.rng.sample(cols, self.rng.randrange(0, min(most, len(cols)) + 1))

    def plain(self):
        rng = self.rng
        cols = [self.schema.time] + self.some_columns()
        outs = [self.plain_out(c) for c in cols]
        q = Query("plain", outs, where=self.where())
        if rng.random() < 0.5:
            n = rng.randrange(1, len(outs) + 1)
            q.order = [(i + 1, rng.random() < 0.3) for i in rng.sample(range(len(outs)), n)]
            if rng.random() < 0.5:
                q.limit = rng.choice([1, 3, 10, 50])
        return q

    def time_ordered(self):
        rng = self.rng
        s = self.schema
        desc = rng.random() < 0.5
        if rng.random() < 0.35:
            # A time bucket, grouped and ordered by it, with a limit.
            key = self.time_bucket()
            aggs = [self.aggregate_out(c) for c in self.some_columns(2)] + [Out("count(*)")]
            q = Query("agg", [Out(key)] + aggs, where=self.where(2), group=[key], order=[(1, desc)])
            q.limit = rng.choice([1, 5, 7, 30])
            return q
        outs = [Out("time")]
        metas = s.meta_columns()
        # ORDER BY time, meta...: the merge breaks ties by meta order.
        tie_metas = metas if metas and rng.random() < 0.4 else []
        outs += [self.plain_out(c) for c in tie_metas]
        outs += [self.plain_out(c) for c in self.some_columns(3) if c not in tie_metas]
        order = [(1, desc)] + [(i + 2, desc if rng.random() < 0.7 else not desc) for i in range(len(tie_metas))]
        return Query("plain", outs, where=self.where(2), order=order, limit=rng.choice([1, 3, 10, 25, 100, None]))

    def series_ordered(self):
        rng = self.rng
        s = self.schema
        metas = s.meta_columns()
        desc = rng.random() < 0.4
        outs = [self.plain_out(c) for c in metas] + [Out("time")]
        outs += [self.plain_out(c) for c in self.some_columns(2) if c not in metas]
        order = [(i + 1, desc) for i in range(len(metas) + 1)]
        return Query("plain", outs, where=self.where(2), order=order, limit=rng.choice([None, None, 5, 40]))

    def last_point(self):
        rng = self.rng
        metas = self.schema.meta_columns()
        outs = [self.plain_out(c) for c in metas] + [Out("time")]
        outs += [self.plain_out(c) for c in self.some_columns(3) if c not in metas]
        order = [(i + 1, False) for i in range(len(metas))] + [(len(metas) + 1, True)]
        return Query("lastpoint", outs, where=self.where(2), order=order, distinct_on=len(metas))

    def join(self):
        rng = self.rng
        col = self.schema.meta_columns()[0]
        values = [lit(constant(rng, col, self.times), col.type) for _ in range(rng.randrange(1, 4))]
        outs = [Out("v.k"), Out("count(x.*)"), Out("count(x.time)"), Out("max(x.time)")]
        q = Query("join", outs, where=[], join_values=values, meta_key=col.name)
        if rng.random() < 0.5:
            q.where = [self.time_term("x.time")]
        return q

    def time_bucket(self):
        rng = self.rng
        unit = rng.choice(["minute", "hour", "day", "second"])
        return rng.choice([
            f"date_trunc('{unit}', time)",
            f"date_bin('{rng.choice(['7 minutes', '15 minutes', '1 hour', '90 seconds'])}', time, '2024-01-01')",
            f"tsbucket.date_trunc('{unit}', time, {rng.choice([1, 5])})",
        ])

    def aggregate_out(self, col):
        rng = self.rng
        k = col.kind
        n = col.name
        options = [Out(f"count({n})")]
        if k == "float":
            f4 = col.type == "float4"
            v = f"{n}::float8" if f4 else n
            finite = f"{n} <> 'NaN' AND {n} <> 'Infinity' AND {n} <> '-Infinity'"
            aux = [f"sum(abs({v})) FILTER (WHERE {finite})", f"count(*) FILTER (WHERE {n} = 'NaN')",
                   f"count(*) FILTER (WHERE {n} = 'Infinity')", f"count(*) FILTER (WHERE {n} = '-Infinity')", f"count({n})"]
            options += [Out(f"sum({n})", "floatagg", aux=aux, f4=f4), Out(f"avg({n})", "floatagg_avg", aux=aux, f4=f4),
                        Out(f"min({n})", "minmax_float"), Out(f"max({n})", "minmax_float")]
            if col.tame:
                options += [Out(f"variance({n})", "var"), Out(f"stddev({n})", "var"), Out(f"stddev_pop({n})", "var")]
        elif k in ("int", "numeric"):
            options += [Out(f"sum({n})"), Out(f"avg({n})"), Out(f"min({n})"), Out(f"max({n})")]
        elif k in ("timestamp", "timestamptz", "date", "text"):
            options += [Out(f"min({n})"), Out(f"max({n})")]
        elif k == "bool":
            options += [Out(f"bool_and({n})"), Out(f"bool_or({n})")]
        elif k == "jsonb":
            numbers = [self.doc_number_out(col)]
            return rng.choice(options + numbers + [Out(f"max({n}->>'s')"), Out(f"count(*) FILTER (WHERE {n} ? 'gps')"),
                                                   Out(f"string_agg({n}->>'s', ',' ORDER BY {n}::text, time)"),
                                                   Out(f"sum(CASE WHEN jsonb_typeof({n}->'t') = 'number' THEN ({n}->>'t')::numeric END)")])
        if rng.random() < 0.15:
            first = rng.random() < 0.5
            f = "first" if first else "last"
            return Out(f"tsbucket.{f}({n}, time)", f, heap_sql=f"array_agg({n}) FILTER (WHERE time = {'_tmin' if first else '_tmax'})")
        return rng.choice(options)

    def header_friendly(self):
        """Aggregates bucket headers can answer: whole buckets in a time range
        (or all), grouped by meta columns or not at all."""
        rng = self.rng
        s = self.schema
        keys = [m.name for m in s.meta_columns() if rng.random() < 0.5]
        aggs = [Out("count(*)")]
        for c in self.some_columns(3):
            if c.role == "meta":
                aggs.append(Out(f"count({c.name})"))
            elif c.kind in ("int", "float", "timestamp", "timestamptz", "date"):
                aggs.append(self.aggregate_out(c))
        where = [self.time_term()] if rng.random() < 0.6 else []
        return Query("agg", [Out(k) for k in keys] + aggs, where=where, group=keys)

    def doc_number_out(self, col):
        """An aggregate of a document field cast to float8: the scan aggregates the
        field's sub-column; a row holding a string or a boolean fails the cast on
        both sides, with the same SQLSTATE."""
        rng = self.rng
        v = f"({col.name}->>'{rng.choice(['t', 't', 'n', 'v'])}')::float8"
        finite = f"{v} <> 'NaN' AND {v} <> 'Infinity' AND {v} <> '-Infinity'"
        aux = [f"sum(abs({v})) FILTER (WHERE {finite})", f"count(*) FILTER (WHERE {v} = 'NaN')",
               f"count(*) FILTER (WHERE {v} = 'Infinity')", f"count(*) FILTER (WHERE {v} = '-Infinity')", f"count({v})"]
        # An integer cast of the counter (its values fit int4), and first/last of it (not of the float
        # casts: those fail on some rows, which the heap side's FILTER would never cast).
        i = f"({col.name}->>'c')::{rng.choice(['int', 'bigint'])}"
        f = rng.choice(["first", "last"])
        first_last = Out(f"tsbucket.{f}({i}, time)", f, heap_sql=f"array_agg({i}) FILTER (WHERE time = {'_tmin' if f == 'first' else '_tmax'})")
        return rng.choice([Out(f"sum({v})", "floatagg", aux=aux), Out(f"avg({v})", "floatagg_avg", aux=aux),
                           Out(f"min({v})", "minmax_float"), Out(f"max({v})", "minmax_float"), Out(f"count({v})"),
                           Out(f"sum({i})"), Out(f"min({i})"), Out(f"max({i})"), Out(f"count({i})"), first_last])

    def aggregate(self):
        rng = self.rng
        s = self.schema
        keys = []
        for m in s.meta_columns():
            if rng.random() < 0.5:
                keys.append(m.name)
        if rng.random() < 0.4:
            keys.append(self.time_bucket())
        if rng.random() < 0.08:
            keys.append("time")
        if rng.random() < 0.08:
            # A measurement key: Postgres's plan, row by row.
            keys.append(rng.choice([c for c in s.measurements() if c.kind in ("bool", "int", "text")] or [s.time]).name)
        keys = list(dict.fromkeys(keys))
        outs = [Out(k, float_key=False) for k in keys]
        aggs = [Out("count(*)")] if rng.random() < 0.6 else []
        docs = [c for c in s.columns if c.kind == "jsonb"]
        if docs and rng.random() < 0.35:
            # Only document fields and columns the scan aggregates, so that it does.
            aggs += [self.doc_number_out(docs[0]) for _ in range(rng.randrange(1, 3))]
        else:
            for c in self.some_columns(4) + ([s.time] if rng.random() < 0.3 else []):
                aggs.append(self.aggregate_out(c))
        if not aggs:
            aggs = [Out("count(*)")]
        q = Query("agg", outs + aggs, where=self.where(), group=keys)
        if rng.random() < 0.1:
            q.having = f"count(*) > {rng.choice([0, 1, 5])}"
        if keys and rng.random() < 0.4:
            q.order = [(i + 1, rng.random() < 0.3) for i in range(len(keys))]
            if rng.random() < 0.4:
                q.limit = rng.choice([1, 3, 10])
        return q
