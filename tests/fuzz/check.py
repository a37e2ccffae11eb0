"""Comparing a tsbucket answer with the heap table's. Values arrive as their
text output (exact: -0 and 0, NaN, every digit of a float). Rows compare as
multisets; ordered answers by their sort keys, where rows tied on the keys
may come in any order and a LIMIT may cut a run of ties anywhere; float sums
and averages within the bound their order of addition allows (computed from
the heap's aux columns); first/last as one of the values tied at the least or
greatest time; DISTINCT ON as one row of each group's newest."""

import math

N_AUX = {"floatagg": 5, "floatagg_avg": 5}
EPS = {False: 2.3e-16, True: 1.2e-7}


def split_heap(q, rows):
    """Heap rows as (values, auxes): aux columns follow the outputs."""
    n = len(q.outs)
    out = []
    for r in rows:
        vals = list(r[:n])
        aux = []
        i = n
        for o in q.outs:
            k = N_AUX.get(o.cls, len(o.aux))
            aux.append(r[i:i + k])
            i += k
        out.append((vals, aux))
    return out


def norm_key(v, float_key):
    if v is None:
        return None
    if float_key and v in ("-0", "0"):
        return "0"
    return v


def exact_part(q, vals):
    """The values compared exactly (minmax_float with -0 = 0)."""
    out = []
    for o, v in zip(q.outs, vals):
        if o.cls == "exact":
            out.append(v)
        elif o.cls == "minmax_float":
            out.append(norm_key(v, True))
    return tuple(out)


def as_float(s):
    return float(s) if s is not None else None


def float_agg_ok(a, b, aux, avg, f4):
    if a is None or b is None:
        return a is None and b is None
    fa, fb = float(a), float(b)
    sumabs, nnan, npinf, nninf, n = (as_float(x) if x is not None else 0.0 for x in aux)
    if nnan > 0 or (npinf > 0 and nninf > 0):
        return math.isnan(fa) and math.isnan(fb)
    if npinf > 0:
        return fa == fb == math.inf
    if nninf > 0:
        return fa == fb == -math.inf
    limit = 3e38 if f4 else 1e307
    if sumabs > limit or math.isinf(sumabs):
        # The sum may overflow or not, depending on the order of addition.
        return not math.isnan(fa) and not math.isnan(fb)
    bound = sumabs / n if avg and n else sumabs
    tol = 4 * max(n, 1) * EPS[f4] * bound + 1e-300
    return abs(fa - fb) <= tol


def close_ok(q, vals, aux, hvals, haux):
    for o, a, b, x, hx in zip(q.outs, vals, hvals, aux, haux):
        if o.cls in ("exact", "minmax_float"):
            continue
        if o.cls == "floatagg":
            if not float_agg_ok(a, b, hx, False, o.f4):
                return False
        elif o.cls == "floatagg_avg":
            if not float_agg_ok(a, b, hx, True, o.f4 and q.citus):
                return False
        elif o.cls == "var":
            if (a is None) != (b is None):
                return False
            if a is not None and abs(float(a) - float(b)) > 1e-8 * (abs(float(b)) + 1e6):
                return False
        elif o.cls in ("first", "last"):
            # b: every value at the group's least (greatest) time, as an array.
            if b is None:
                if a is not None:
                    return False
            elif not any(a == x or (isinstance(a, float) and isinstance(x, float) and math.isnan(a) and math.isnan(x)) for x in b):
                return False
    return True


def match_multiset(q, ts, heap):
    """ts rows (values) against heap rows ((values, aux)): a perfect matching
    by exact parts, then within tolerance."""
    if len(ts) != len(heap):
        return f"{len(ts)} rows, the heap has {len(heap)}"
    groups = {}
    for hv, ha in heap:
        groups.setdefault(exact_part(q, hv), []).append((hv, ha))
    for v in ts:
        cands = groups.get(exact_part(q, v))
        if not cands:
            return f"row {v} is not in the heap's answer"
        for i, (hv, ha) in enumerate(cands):
            if close_ok(q, v, [None] * len(q.outs), hv, ha):
                cands.pop(i)
                break
        else:
            return f"row {v} differs from the heap's {cands[0][0]} beyond tolerance"
    return None


def sort_key(q, vals):
    return tuple(norm_key(vals[p - 1], q.outs[p - 1].float_key) for p, _ in q.order)


def runs(keys):
    """Maximal runs [start, end) of equal keys."""
    out = []
    start = 0
    for i in range(1, len(keys) + 1):
        if i == len(keys) or keys[i] != keys[start]:
            out.append((start, i))
            start = i
    return out


def compare(q, ts_rows, heap_rows):
    """None if the answers agree, else what differs."""
    ts = [list(r) for r in ts_rows]
    heap = split_heap(q, heap_rows)
    if q.kind == "lastpoint":
        return compare_distinct_on(q, ts, heap)
    if not q.order:
        return match_multiset(q, ts, heap)
    hkeys = [sort_key(q, hv) for hv, _ in heap]
    n = len(heap) if q.limit is None else min(q.limit, len(heap))
    if len(ts) != n:
        return f"{len(ts)} rows, expected {n}"
    tkeys = [sort_key(q, v) for v in ts]
    if tkeys != hkeys[:n]:
        first = next(i for i in range(n) if tkeys[i] != hkeys[i])
        return f"order differs at row {first}: {tkeys[first]} vs the heap's {hkeys[first]}"
    for start, end in runs(hkeys):
        if start >= n:
            break
        # Rows tied on the keys: any of the heap's run, as many as the limit leaves.
        got = ts[start:min(end, n)]
        pool = heap[start:end]
        if end <= n:
            problem = match_multiset(q, got, pool)
        else:
            problem = sub_multiset(q, got, pool)
        if problem:
            return f"among rows {start}..{end - 1} tied on {hkeys[start]}: {problem}"
    return None


def sub_multiset(q, got, pool):
    pool = list(pool)
    for v in got:
        for i, (hv, ha) in enumerate(pool):
            if exact_part(q, v) == exact_part(q, hv) and close_ok(q, v, [None] * len(q.outs), hv, ha):
                pool.pop(i)
                break
        else:
            return f"row {v} is not among the heap's tied rows"
    return None


def compare_distinct_on(q, ts, heap):
    """DISTINCT ON (k...) ... ORDER BY k..., time DESC: per group, one row at its newest time."""
    k = q.distinct_on
    tpos = k  # time follows the distinct keys
    groups = []
    for hv, ha in heap:
        key = tuple(norm_key(x, q.outs[i].float_key) for i, x in enumerate(hv[:k]))
        if not groups or groups[-1][0] != key:
            groups.append((key, hv[tpos], []))
        if hv[tpos] == groups[-1][1]:
            groups[-1][2].append((hv, ha))
    if len(ts) != len(groups):
        return f"{len(ts)} rows, expected one for each of {len(groups)} series"
    for v, (key, _, cands) in zip(ts, groups):
        if tuple(norm_key(x, q.outs[i].float_key) for i, x in enumerate(v[:k])) != key:
            return f"series {v[:k]} where the heap has {key}"
        if not any(exact_part(q, v) == exact_part(q, hv) for hv, _ in cands):
            return f"row {v} is not one of the newest rows of its series {[c[0] for c in cands][:3]}"
    return None
