//! Conditions that rule whole buckets out before their payload is read
//! (time bounds against a bucket's min/max time, meta values, measurement
//! min/max), and the same bounds checked row by row on decoded columns.

use crate::catalog::config::Config;
use crate::store::bucket;
use crate::store::bucket::LoadedBucket;
use pgrx::pg_sys;

/// A condition that rules whole buckets out before their payload is read.
pub enum Prune {
    /// The time column must lie in the range (checked against the bucket's
    /// min/max time, in microseconds).
    Time(BoundRange),
    /// The meta column `meta` must satisfy `op(meta, value)` (or `op(value,
    /// meta)` when `meta_first` is false) for at least one of `values`.
    Meta { meta: usize, op: pg_sys::Oid, collation: pg_sys::Oid, meta_first: bool, values: Vec<pg_sys::Datum> },
    /// A measurement column must lie in the range, checked against the
    /// bucket's stored min/max of that column.
    Column { attnum: u16, range: BoundRange },
    /// A top-level field of a document column, read as float8, must lie in
    /// the range, checked against the bucket's statistics of the field.
    Field { attnum: u16, key: std::rc::Rc<[u8]>, range: BoundRange },
    /// Quals that read only meta columns (`meta->>'site' = 'x'`, `lower(host)
    /// LIKE 'h1%'`): the same for every row of a bucket, so evaluated once per
    /// bucket on its meta values (in `slot`, set as the scan tuple of
    /// `econtext`, the scan node's), and a bucket they fail is skipped.
    MetaQual(MetaQual),
}

/// The compiled meta-only quals of a scan (`Prune::MetaQual`).
pub struct MetaQual {
    pub qual: *mut pg_sys::ExprState,
    pub econtext: *mut pg_sys::ExprContext,
    pub slot: *mut pg_sys::TupleTableSlot,
    /// The table's meta attnums, in the store's meta column order.
    pub meta_attnums: Vec<i16>,
}

/// A bound on an integer-like (timestamps included) or float column.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Bound {
    Int(i64),
    Float(f64),
}

impl Bound {
    /// None for NaN, and for bounds of different kinds.
    fn compare(self, other: Bound) -> Option<std::cmp::Ordering> {
        match (self, other) {
            (Bound::Int(a), Bound::Int(b)) => Some(a.cmp(&b)),
            (Bound::Float(a), Bound::Float(b)) => a.partial_cmp(&b),
            _ => None,
        }
    }

    fn same_kind(self, other: Bound) -> bool {
        matches!((self, other), (Bound::Int(_), Bound::Int(_)) | (Bound::Float(_), Bound::Float(_)))
    }
}

/// The values a condition allows: [lo, hi], each bound optional, `true` = inclusive.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BoundRange {
    pub lo: Option<(Bound, bool)>,
    pub hi: Option<(Bound, bool)>,
}

impl BoundRange {
    /// Narrows by `column <op> v`, op given as a btree strategy (1 <, 2 <=, 3 =, 4 >=, 5 >).
    pub fn narrow(&mut self, strategy: i32, v: Bound) {
        use std::cmp::Ordering::{Equal, Greater, Less};
        // Keep the current bound if it is at least as tight as the new one.
        let tighter = |cur: Option<(Bound, bool)>, new: (Bound, bool), beyond| {
            cur.is_some_and(|(c, inclusive)| c.compare(new.0) == Some(beyond) || (c.compare(new.0) == Some(Equal) && !inclusive))
        };
        let mut lower = |new: (Bound, bool)| {
            if !tighter(self.lo, new, Greater) {
                self.lo = Some(new);
            }
        };
        match strategy {
            3 => lower((v, true)),
            4 => lower((v, true)),
            5 => lower((v, false)),
            _ => {}
        }
        let mut upper = |new: (Bound, bool)| {
            if !tighter(self.hi, new, Less) {
                self.hi = Some(new);
            }
        };
        match strategy {
            1 => upper((v, false)),
            2 | 3 => upper((v, true)),
            _ => {}
        }
    }

    /// Whether every value in [min, max] lies in the range (integer-like bounds).
    pub fn contains(&self, min: i64, max: i64) -> bool {
        let lo_ok = self.lo.is_none_or(|(b, inclusive)| match b {
            Bound::Int(v) => min > v || (inclusive && min == v),
            Bound::Float(_) => false,
        });
        let hi_ok = self.hi.is_none_or(|(b, inclusive)| match b {
            Bound::Int(v) => max < v || (inclusive && max == v),
            Bound::Float(_) => false,
        });
        lo_ok && hi_ok
    }

    /// Whether values spanning [min, max] (plus NaN where `has_nan`; Postgres
    /// sorts NaN above every number) may include one in the range.
    pub fn admits(&self, min: Bound, max: Bound, has_nan: bool) -> bool {
        use std::cmp::Ordering::{Equal, Greater, Less};
        let meets = |x: Bound, (v, inclusive): (Bound, bool), beyond| {
            // Bounds of another kind say nothing: admit.
            !x.same_kind(v) || x.compare(v) == Some(beyond) || (inclusive && x.compare(v) == Some(Equal))
        };
        let lo_ok = has_nan || self.lo.is_none_or(|lo| meets(max, lo, Greater));
        let hi_ok = self.hi.is_none_or(|hi| meets(min, hi, Less));
        lo_ok && hi_ok
    }
}

/// A range condition checked per row on a decoded column.
#[derive(Clone, Copy)]
pub(super) struct RowFilter {
    /// attnum - 1.
    pub attr: usize,
    pub range: BoundRange,
    /// Whether the column's value in buckets written before it was added (its
    /// default, or NULL) passes: such buckets hold no array for it.
    pub missing_passes: bool,
}

/// The time range of a scan's pruning conditions, if it has one.
pub(super) fn time_range(prune: &[Prune]) -> Option<&BoundRange> {
    prune.iter().find_map(|p| match p {
        Prune::Time(range) => Some(range),
        _ => None,
    })
}

/// The value of a by-value datum of a column stored as `kind`, `typlen` bytes long.
pub(super) fn datum_bound(value: pg_sys::Datum, kind: tsbucket_format::ColumnKind, typlen: i16) -> Bound {
    use tsbucket_format::ColumnKind;
    match kind {
        ColumnKind::Float64 => Bound::Float(f64::from_bits(value.value() as u64)),
        ColumnKind::Float32 => Bound::Float(f32::from_bits(value.value() as u32) as f64),
        _ => Bound::Int(crate::pg::datum::int_of(value, typlen)),
    }
}

/// The value of column `attr` (attnum - 1) in buckets written before the
/// column was added (its default, or NULL): as a Bound when by value, and
/// whether it is NULL.
///
/// # Safety
/// `tupdesc` is the table's; `attr` one of its attributes.
pub(super) unsafe fn missing_bound(tupdesc: pg_sys::TupleDesc, attr: usize) -> (Option<Bound>, bool) {
    // SAFETY: `attr` is below the natts of `tupdesc`, the table's descriptor (missing_bound's contract); the attribute
    // stays valid as long as the descriptor, which outlives this call.
    let att = unsafe { &*crate::pg::relation::tuple_desc_attr(tupdesc, attr) };
    let mut isnull = false;
    // SAFETY: getmissingattr reads attribute `attr + 1` of the same `tupdesc` (its missing value, or its NULL) into a Datum and `isnull`.
    let d = unsafe { pg_sys::getmissingattr(tupdesc, attr as i32 + 1, &mut isnull) };
    let bound = (!isnull && att.attbyval && !att.attisdropped)
        .then(|| datum_bound(d, crate::pg::datum::kind_for_type(att.atttypid, att.attlen, att.attbyval), att.attlen));
    (bound, isnull)
}

/// The range conditions to check per row. They decide their conditions
/// exactly: NULL fails, NaN sorts above every number, and a column added
/// after a bucket was written has its default there.
///
/// # Safety
/// `tupdesc` is the table's.
pub(super) unsafe fn row_filters(config: &Config, prune: &[Prune], tupdesc: pg_sys::TupleDesc) -> Vec<RowFilter> {
    prune
        .iter()
        .filter_map(|p| match p {
            Prune::Time(range) => Some((config.time_attnum as usize - 1, *range)),
            Prune::Column { attnum, range } => Some((*attnum as usize - 1, *range)),
            Prune::Meta { .. } | Prune::MetaQual(_) | Prune::Field { .. } => None,
        })
        .map(|(attr, range)| {
            // SAFETY: `attr` is an attribute of the table whose descriptor `tupdesc` is (the planner found it in the quals).
            let (missing, _) = unsafe { missing_bound(tupdesc, attr) };
            let missing_passes = missing.is_some_and(|v| range.admits(v, v, matches!(v, Bound::Float(f) if f.is_nan())));
            RowFilter { attr, range, missing_passes }
        })
        .collect()
}

/// Marks the row filters' columns as needed: a filter decides only on decoded values.
pub(super) fn decode_filtered_columns(needed: &mut Option<Vec<bool>>, filters: &[RowFilter]) {
    if let Some(n) = needed.as_mut() {
        filters.iter().for_each(|f| n[f.attr] = true);
    }
}

/// Whether row `row` satisfies every row filter.
pub(super) fn row_passes(bucket: &LoadedBucket, filters: &[RowFilter], row: usize) -> bool {
    use tsbucket_format::Values;
    filters.iter().all(|f| match &bucket.columns[f.attr] {
        None => f.missing_passes,
        Some(col) if col.is_null(row) => false,
        Some(col) => match &col.values {
            Values::Int(v) => f.range.admits(Bound::Int(v[row]), Bound::Int(v[row]), false),
            Values::Float(v) => f.range.admits(Bound::Float(v[row]), Bound::Float(v[row]), v[row].is_nan()),
            _ => true,
        },
    })
}

/// Clears in `pass` (one flag per row of `bucket`) the rows that fail one of
/// `filters`: what `row_passes` tells row by row, a column at a time (a
/// comparison a loop over the decoded array, not a match per row and filter).
pub(super) fn clear_failing_rows(bucket: &LoadedBucket, filters: &[RowFilter], pass: &mut [bool]) {
    for f in filters {
        clear_failing(bucket.columns[f.attr].as_ref(), f, pass);
    }
}

fn clear_failing(col: Option<&tsbucket_format::Column>, f: &RowFilter, pass: &mut [bool]) {
    use tsbucket_format::Values;
    let Some(col) = col else {
        if !f.missing_passes {
            pass.fill(false);
        }
        return;
    };
    // Columns hold a value (or a NULL's place) for every row of the bucket.
    debug_assert_eq!(col.len(), pass.len());
    if let Some(valid) = &col.validity {
        pass.iter_mut().zip(valid).for_each(|(p, v)| *p &= *v);
    }
    // A bound of the other kind says nothing (as in `admits`).
    match &col.values {
        Values::Int(v) => {
            if let Some((Bound::Int(lo), inclusive)) = f.range.lo {
                pass.iter_mut().zip(v).for_each(|(p, &x)| *p &= x > lo || (inclusive && x == lo));
            }
            if let Some((Bound::Int(hi), inclusive)) = f.range.hi {
                pass.iter_mut().zip(v).for_each(|(p, &x)| *p &= x < hi || (inclusive && x == hi));
            }
        }
        Values::Float(v) => {
            // NaN sorts above every number: it passes any low bound and fails any high one.
            if let Some((Bound::Float(lo), inclusive)) = f.range.lo {
                pass.iter_mut().zip(v).for_each(|(p, &x)| *p &= x.is_nan() || x > lo || (inclusive && x == lo));
            }
            if let Some((Bound::Float(hi), inclusive)) = f.range.hi {
                pass.iter_mut().zip(v).for_each(|(p, &x)| *p &= x < hi || (inclusive && x == hi));
            }
        }
        _ => {}
    }
}

/// The rows of a bucket whose times lie in every range of `time_ranges` and
/// that pass `other`, in time order (`descending`: latest first), rows of
/// equal time in their stored order (as a stable sort by time leaves them).
/// Buckets keep their rows in time order: then each range is one stretch of
/// rows, found by binary search, and only its rows are checked by `other`.
pub(super) fn rows_in_time_order(times: &[i64], time_ranges: &[BoundRange], descending: bool, mut other: impl FnMut(usize) -> bool) -> Vec<usize> {
    let admits = |r: &BoundRange, t: i64| r.admits(Bound::Int(t), Bound::Int(t), false);
    if !times.is_sorted() {
        let mut order: Vec<usize> = (0..times.len()).filter(|&r| time_ranges.iter().all(|range| admits(range, times[r])) && other(r)).collect();
        if descending {
            order.sort_by(|&a, &b| times[b].cmp(&times[a]));
        } else {
            order.sort_by_key(|&r| times[r]);
        }
        return order;
    }
    // Over sorted times a low bound fails a prefix of the rows and a high bound a suffix.
    let start = time_ranges.iter().map(|r| times.partition_point(|&t| !admits(&BoundRange { hi: None, ..*r }, t))).max().unwrap_or(0);
    let end = time_ranges.iter().map(|r| times.partition_point(|&t| admits(&BoundRange { lo: None, ..*r }, t))).min().unwrap_or(times.len());
    if start >= end {
        return Vec::new();
    }
    let mut order = Vec::with_capacity(end - start);
    if !descending {
        order.extend((start..end).filter(|&r| other(r)));
        return order;
    }
    // Latest first, each run of one time in stored order.
    let mut run_end = end;
    while run_end > start {
        let t = times[run_end - 1];
        let mut run_start = run_end - 1;
        while run_start > start && times[run_start - 1] == t {
            run_start -= 1;
        }
        order.extend((run_start..run_end).filter(|&r| other(r)));
        run_end = run_start;
    }
    order
}

/// Whether any row of the bucket could satisfy every pruning condition.
pub(super) unsafe fn bucket_may_match(prune: &[Prune], meta_fns: &mut [Option<pg_sys::FmgrInfo>], b: &bucket::StoredBucket) -> bool {
    for (i, p) in prune.iter().enumerate() {
        match p {
            Prune::Time(range) => {
                let planted;
                let range = if crate::catalog::gucs::planted_bug() == 1 && range.hi.is_some_and(|(_, inclusive)| inclusive) {
                    planted = BoundRange { hi: range.hi.map(|(b, _)| (b, false)), ..*range };
                    &planted
                } else {
                    range
                };
                if !range.admits(Bound::Int(b.min_time), Bound::Int(b.max_time), false) {
                    return false;
                }
            }
            Prune::Column { attnum, range } => {
                if !column_may_match(b, *attnum, range) {
                    return false;
                }
            }
            Prune::Field { attnum, key, range } => {
                if !field_may_match(b, *attnum, key, range) {
                    return false;
                }
            }
            Prune::Meta { meta, collation, meta_first, values, .. } => {
                let Some(m) = b.meta_datum(*meta) else { return false };
                let finfo = meta_fns[i].as_mut().expect("built with the condition");
                let any = values.iter().any(|v| {
                    let (a, b) = if *meta_first { (m, *v) } else { (*v, m) };
                    // SAFETY: `finfo` is the condition's operator function, set up by meta_functions for this position of
                    // `prune`; `m` and `v` are values of the operand types the planner checked.
                    unsafe { pg_sys::FunctionCall2Coll(finfo, *collation, a, b) }.value() != 0
                });
                if !any {
                    return false;
                }
            }
            Prune::MetaQual(q) => {
                // SAFETY: `q` holds the scan's compiled meta-only quals, its ExprContext and a virtual slot of the
                // table's descriptor (exec::begin); `b`'s meta datums live while the stored bucket does.
                if !unsafe { meta_qual_passes(q, b) } {
                    return false;
                }
            }
        }
    }
    true
}

/// The meta-only quals on the bucket's meta values (every other column NULL:
/// the quals read none).
///
/// # Safety
/// `q` must hold live pointers of this scan (see `Prune::MetaQual`).
unsafe fn meta_qual_passes(q: &MetaQual, b: &bucket::StoredBucket) -> bool {
    let slot = q.slot;
    // SAFETY: `q.slot` is a virtual slot of the table's descriptor (the contract): cleared, then every attribute NULL.
    let (values, nulls) = unsafe {
        pg_sys::ExecClearTuple(slot);
        let natts = (*(*slot).tts_tupleDescriptor).natts as usize;
        (std::slice::from_raw_parts_mut((*slot).tts_values, natts), std::slice::from_raw_parts_mut((*slot).tts_isnull, natts))
    };
    nulls.fill(true);
    for (i, &attnum) in q.meta_attnums.iter().enumerate() {
        if let Some(d) = b.meta_datum(i) {
            values[attnum as usize - 1] = d;
            nulls[attnum as usize - 1] = false;
        }
    }
    // SAFETY: the slot's values are set; the quals run with it as the scan tuple of the node's ExprContext, whose
    // previous scan tuple is put back after.
    unsafe {
        pg_sys::ExecStoreVirtualTuple(slot);
        let saved = (*q.econtext).ecxt_scantuple;
        (*q.econtext).ecxt_scantuple = slot;
        let pass = crate::pg::nodes::qual_passes(q.qual, q.econtext);
        (*q.econtext).ecxt_scantuple = saved;
        pass
    }
}

/// Whether the bucket's min/max of column `attnum` allow a row in the range.
/// Without statistics (an all-NULL column, one added later) it may.
fn column_may_match(b: &bucket::StoredBucket, attnum: u16, range: &BoundRange) -> bool {
    use tsbucket_format::stats::{decode_stats, Range};
    let Ok(stats) = decode_stats(b.stats()) else { return true };
    match stats.into_iter().find(|s| s.attnum == attnum).map(|s| s.range) {
        None => true,
        Some(Range::Int { min, max }) => range.admits(Bound::Int(min), Bound::Int(max), false),
        Some(Range::Float { min, max, has_nan }) => range.admits(Bound::Float(min), Bound::Float(max), has_nan),
    }
}

/// Whether a row of `b` may hold `(doc->>'key')::float8` in `range`: no when
/// the bucket's statistics of the field (kept where all its values are
/// decimals float8 reads, or missing) lie outside it. A field without them
/// (no number somewhere, or beyond the header's limits) may match.
fn field_may_match(b: &bucket::StoredBucket, attnum: u16, key: &[u8], range: &BoundRange) -> bool {
    use tsbucket_format::stats::{decode_field_stats, Range};
    let Ok(fields) = decode_field_stats(b.stats()) else { return true };
    match fields.into_iter().find(|f| f.stats.attnum == attnum && *f.key == *key).map(|f| f.stats.range) {
        Some(Range::Float { min, max, has_nan }) => range.admits(Bound::Float(min), Bound::Float(max), has_nan),
        _ => true,
    }
}

/// The comparison functions of the meta conditions, by position in `prune`.
///
/// # Safety
/// Looks operators up in the catalogs.
pub(super) unsafe fn meta_functions(prune: &[Prune]) -> Vec<Option<pg_sys::FmgrInfo>> {
    prune
        .iter()
        .map(|p| match p {
            Prune::Meta { op, .. } => {
                let mut finfo = pg_sys::FmgrInfo::default();
                // SAFETY: `op` is the btree comparison operator of a meta condition taken from the quals (scan::quals);
                // get_opcode finds its function and fmgr_info fills the local `finfo`, any extra state in CurrentMemoryContext,
                // the context the scan begins in, which outlives the scan's calls.
                unsafe { pg_sys::fmgr_info(pg_sys::get_opcode(*op), &mut finfo) };
                Some(finfo)
            }
            Prune::Time { .. } | Prune::Column { .. } | Prune::MetaQual(_) | Prune::Field { .. } => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(conditions: &[(i32, Bound)]) -> BoundRange {
        let mut r = BoundRange::default();
        conditions.iter().for_each(|(s, v)| r.narrow(*s, *v));
        r
    }

    /// rows_in_time_order against filtering every row and a stable sort, on sorted and unsorted times with ties.
    #[test]
    fn rows_in_time_order_matches_a_filter_and_stable_sort() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut rand = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for case in 0..3000 {
            let n = rand(40) as usize;
            let mut times: Vec<i64> = (0..n).map(|_| rand(12) as i64 - 3).collect();
            if case % 3 != 0 {
                times.sort();
            }
            let mut ranges = Vec::new();
            for _ in 0..rand(3) {
                let mut r = BoundRange::default();
                for _ in 0..1 + rand(2) {
                    r.narrow(1 + rand(5) as i32, Bound::Int(rand(14) as i64 - 4));
                }
                ranges.push(r);
            }
            let skip = rand(4) as usize;
            let other = |r: usize| skip == 0 || r % (skip + 1) != 0;
            for descending in [false, true] {
                let mut expected: Vec<usize> = (0..n)
                    .filter(|&r| ranges.iter().all(|g| g.admits(Bound::Int(times[r]), Bound::Int(times[r]), false)) && other(r))
                    .collect();
                if descending {
                    expected.sort_by(|&a, &b| times[b].cmp(&times[a]));
                } else {
                    expected.sort_by_key(|&r| times[r]);
                }
                assert_eq!(rows_in_time_order(&times, &ranges, descending, other), expected, "times {times:?} ranges {ranges:?} desc {descending}");
            }
        }
    }

    #[test]
    fn narrowing_keeps_the_tightest_bounds() {
        let r = range(&[(4, Bound::Int(5)), (5, Bound::Int(5)), (4, Bound::Int(3)), (1, Bound::Int(9)), (2, Bound::Int(12))]);
        assert_eq!(r, BoundRange { lo: Some((Bound::Int(5), false)), hi: Some((Bound::Int(9), false)) });
        let eq = range(&[(3, Bound::Int(7))]);
        assert!(eq.admits(Bound::Int(7), Bound::Int(7), false));
        assert!(!eq.admits(Bound::Int(8), Bound::Int(9), false));
    }

    #[test]
    fn column_filters_clear_what_row_by_row_filters_reject() {
        use tsbucket_format::{Column, ColumnKind};
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let floats = [f64::NAN, -0.0, 0.0, 1.5, -1.5, f64::INFINITY, f64::NEG_INFINITY, 7.0];
        for case in 0..2000 {
            let rows = (next() % 40) as usize;
            let is_float = case % 2 == 0;
            let mut col = Column::new(1, if is_float { ColumnKind::Float64 } else { ColumnKind::Int });
            for _ in 0..rows {
                match next() % 5 {
                    0 => col.push_null(),
                    _ if is_float => col.push_float(floats[(next() % floats.len() as u64) as usize]),
                    _ => col.push_int((next() % 9) as i64 - 4),
                }
            }
            let bound = |next: &mut dyn FnMut() -> u64| {
                let b = match next() % 3 {
                    0 => Bound::Int((next() % 9) as i64 - 4),
                    _ => Bound::Float(floats[(next() % floats.len() as u64) as usize]),
                };
                (next() % 3 != 0).then_some((b, next() % 2 == 0))
            };
            let range = BoundRange { lo: bound(&mut next), hi: bound(&mut next) };
            let filter = RowFilter { attr: 0, range, missing_passes: next() % 2 == 0 };
            // A bucket without the column: one written before it was added.
            let present = next() % 8 != 0;
            let bucket = LoadedBucket {
                bucket_id: 1,
                store_tid: Default::default(),
                rows,
                columns: vec![present.then_some(col)],
                meta: Vec::new(),
                skipped: None,
                version: Default::default(),
                tail: None,
                fields: Vec::new(),
            };
            let mut pass = vec![true; rows];
            clear_failing_rows(&bucket, &[filter], &mut pass);
            for (r, got) in pass.iter().enumerate() {
                assert_eq!(*got, row_passes(&bucket, &[filter], r), "case {case}, row {r}, {range:?}");
            }
        }
    }

    #[test]
    fn admits_respects_inclusivity_and_nan() {
        let above = range(&[(5, Bound::Float(10.0))]);
        assert!(!above.admits(Bound::Float(0.0), Bound::Float(10.0), false));
        assert!(above.admits(Bound::Float(0.0), Bound::Float(10.0), true));
        assert!(range(&[(4, Bound::Float(10.0))]).admits(Bound::Float(0.0), Bound::Float(10.0), false));
        assert!(!range(&[(1, Bound::Float(0.0))]).admits(Bound::Float(f64::NAN), Bound::Float(f64::NAN), true));
        assert!(range(&[(1, Bound::Int(0))]).admits(Bound::Float(5.0), Bound::Float(6.0), false));
    }
}
