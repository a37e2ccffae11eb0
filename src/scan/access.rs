//! Which store buckets a scan must read, and how it reaches them: from the
//! conditions a TsBucketScan found (meta equalities and time bounds), a range
//! of the store's (meta..., window_start) index or of its window_start index,
//! else the whole store. The ranges only narrow what the scan reads: every
//! bucket still passes the header checks (`crate::scan::prune::bucket_may_match`), so an
//! index range must select a superset of the matching buckets, never less.
//!
//! Why the window_start bounds hold: a bucket's rows lie in its window,
//! `window_start <= time < window_start + span`, and a table's span only grows
//! (alter_timeseries), so its current span bounds every bucket's. A row with
//! `time >= lo` is in a bucket with `window_start > lo - span`; one with
//! `time <= hi` in one with `window_start <= hi`.

use crate::catalog::config::Config;
use crate::scan::prune::{Bound, BoundRange, Prune};
use crate::store::bucket;
use crate::store::reader::{self, IndexRanges};
use pgrx::pg_sys;

/// Buckets an `IN` list may expand to at most, as separate index scans.
const MAX_KEY_SETS: usize = 1024;

/// An equality condition on a meta column, as the planner found it.
#[derive(Clone, Copy)]
pub(super) struct MetaCondition {
    pub meta: usize,
    pub op: pg_sys::Oid,
    pub collation: pg_sys::Oid,
    /// `meta op value` (true) or `value op meta` (false).
    pub meta_first: bool,
}

/// How a scan reaches the store, decided from the kinds of its conditions.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Access {
    /// The whole store, in physical order.
    Heap,
    /// The (meta..., window_start) index: equality on the first `metas` meta
    /// columns (each with the operator the index uses), window bounds after.
    Series { index: pg_sys::Oid, keys: Vec<MetaKey>, window: bool },
    /// The window_start index, by the time bounds.
    Window { index: pg_sys::Oid },
}

impl Access {
    /// Whether the access names every meta column, so that each of its ranges
    /// (one per combination of values) is one series, in window order.
    pub fn pins_every_series(&self, config: &Config) -> bool {
        matches!(self, Access::Series { keys, .. } if keys.len() == config.meta_attnums.len())
    }
}

/// How one meta condition becomes an index key.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct MetaKey {
    /// Which of the scan's meta conditions (position in the list given to `choose`).
    pub condition: usize,
    /// The operator with the meta column on its left (commuted if needed).
    pub op: pg_sys::Oid,
    pub subtype: pg_sys::Oid,
    pub collation: pg_sys::Oid,
    /// The same-type equality of the value's type, to drop repeated IN values.
    pub value_eq: pg_sys::Oid,
}

/// The store's series index (meta_1, ..., meta_n, window_start), if the table
/// has meta columns.
///
/// # Safety
/// `store` must be `config`'s open bucket store.
pub unsafe fn series_index(store: pg_sys::Relation, config: &Config) -> Option<pg_sys::Oid> {
    let nmeta = config.meta_attnums.len();
    if nmeta == 0 {
        return None;
    }
    let columns: Vec<i16> = (0..nmeta).map(|i| (bucket::COL_FIRST_META + 1 + i) as i16).chain([(bucket::COL_WINDOW_START + 1) as i16]).collect();
    // SAFETY: `store` is `config`'s open bucket store (series_index's contract), whose index list index_on reads.
    unsafe { reader::index_on(store, &columns) }
}

/// The series index of a table with meta columns; an error if it is gone.
///
/// # Safety
/// As `series_index`.
pub(super) unsafe fn require_series_index(store: pg_sys::Relation, config: &Config) -> pg_sys::Oid {
    // SAFETY: `store` is `config`'s open bucket store, the contract require_series_index shares with series_index.
    unsafe { series_index(store, config) }.unwrap_or_else(|| {
        crate::pg::error::ts_error(
            crate::pg::error::DATA_CORRUPTED,
            &format!("the bucket store of table \"{}\" has lost its series index", crate::pg::relation::relation_name(config.relid)),
            "Run SELECT * FROM tsbucket.verify(...) on the table; re-create the table from a dump if the index is gone.",
        )
    })
}

/// The whole window_start index, or the part of it `time` bounds: buckets in
/// window order (None: the store has no such index).
///
/// # Safety
/// `store` must be `config`'s open bucket store.
pub(super) unsafe fn window_ranges(store: pg_sys::Relation, config: &Config, time: Option<&BoundRange>) -> Option<IndexRanges> {
    // SAFETY: `store` is `config`'s open bucket store (window_ranges' contract); index_on reads its index list.
    let index = unsafe { reader::index_on(store, &[(bucket::COL_WINDOW_START + 1) as i16]) }?;
    // SAFETY: the same open `store`, whose descriptor window_keys reads for the window_start column's type.
    let keys = unsafe { window_keys(store, config, time) };
    Some(IndexRanges { index, key_sets: vec![keys] })
}

/// The whole series index (meta..., window_start), its window_start bounded
/// by `time`: every series, in (meta, window) order, without the buckets of
/// windows outside the range (the btree checks the non-leading key inside
/// the index instead of the scan reading each such bucket's header; a
/// series-ordered scan of one day of a month-long table reads 1/30 of them).
///
/// # Safety
/// `store` must be `config`'s open bucket store and `index` its series index.
pub(super) unsafe fn series_ranges(store: pg_sys::Relation, config: &Config, index: pg_sys::Oid, time: Option<&BoundRange>) -> IndexRanges {
    // SAFETY: `store` is `config`'s open bucket store (series_ranges' contract), whose descriptor window_keys reads.
    let keys = unsafe { window_keys(store, config, time) };
    IndexRanges { index, key_sets: vec![keys] }
}

/// The first and last window_start of the store's buckets (None without the
/// index, or without buckets), for costing and estimates.
///
/// # Safety
/// `store` must be `config`'s open bucket store.
pub unsafe fn window_extent(store: pg_sys::Relation, config: &Config) -> Option<(i64, i64)> {
    // SAFETY: `store` is `config`'s open bucket store, as window_extent's contract requires.
    let ranges = unsafe { window_ranges(store, config, None) }?;
    // SAFETY: `store` stays open past `walk.end()` below (the caller holds it); `ranges.index` is its window_start index.
    let mut walk = unsafe { reader::StoreScan::begin_index(store, reader::current_snapshot(), ranges) };
    let window_of = |t: Option<pg_sys::HeapTuple>| {
        t.map(|t| {
            let mut isnull = false;
            // SAFETY: `t` was just returned by `walk.next` and stays valid until the walk's next call; `(*store).rd_att`
            // is the open store's descriptor, which has the window_start column.
            unsafe { pg_sys::heap_getattr(t, (bucket::COL_WINDOW_START + 1) as i32, (*store).rd_att, &mut isnull) }.value() as i64
        })
    };
    let first = window_of(walk.next(true));
    walk.rescan();
    let last = window_of(walk.next(false));
    walk.end();
    Some((first?, last?))
}

/// How many windows the store's buckets span, for costing ordered scans.
///
/// # Safety
/// As `window_extent`.
pub(super) unsafe fn window_count(store: pg_sys::Relation, config: &Config) -> Option<f64> {
    // SAFETY: `store` is `config`'s open bucket store, the contract window_count shares with window_extent.
    unsafe { window_extent(store, config) }.map(|(a, b)| ((b - a) as f64 / config.span_micros as f64) + 1.0)
}

/// The index key for `cond` on index column `column` (0-based), if the index's
/// operator family has the condition's equality with the same collation.
unsafe fn meta_key(index: pg_sys::Relation, column: usize, condition: usize, cond: &MetaCondition) -> Option<MetaKey> {
    // SAFETY: get_commutator reads the syscache entry of `cond.op`, an operator the planner found in the scan's quals.
    let op = if cond.meta_first { cond.op } else { unsafe { pg_sys::get_commutator(cond.op) } };
    if op == pg_sys::InvalidOid {
        return None;
    }
    // SAFETY: `index` is the series index `choose` opened with index_open (closed after its last meta_key call); `column` is
    // below its number of key columns, so rd_opfamily has that entry.
    let family = unsafe { *(*index).rd_opfamily.add(column) };
    // SAFETY: catalog lookups of `op` (a valid operator, checked above) in `family`, the index column's operator family.
    let equality_in_family =
        unsafe { pg_sys::op_in_opfamily(op, family) && pg_sys::get_op_opfamily_strategy(op, family) == pg_sys::BTEqualStrategyNumber as i32 };
    if !equality_in_family {
        return None;
    }
    // SAFETY: `index` is still open (see above) and rd_indcollation has one entry per key column, `column` among them.
    let index_collation = unsafe { *(*index).rd_indcollation.add(column) };
    if index_collation != pg_sys::InvalidOid && index_collation != cond.collation {
        return None;
    }
    let (mut left, mut right) = (pg_sys::InvalidOid, pg_sys::InvalidOid);
    // SAFETY: `op` is a btree equality of `family` (checked above); both calls read the catalogs and write only `left` and `right`.
    let value_eq = unsafe {
        pg_sys::op_input_types(op, &mut left, &mut right);
        pg_sys::get_opfamily_member(family, right, right, pg_sys::BTEqualStrategyNumber as i16)
    };
    if value_eq == pg_sys::InvalidOid {
        return None;
    }
    // SAFETY: `index` is still open, choose closes it only after this returns; rd_opcintype has an entry for `column`.
    let opcintype = unsafe { *(*index).rd_opcintype.add(column) };
    let subtype = if right == opcintype { pg_sys::InvalidOid } else { right };
    Some(MetaKey { condition, op, subtype, collation: cond.collation, value_eq })
}

/// The access for a scan with these meta conditions and, if `has_time`, time
/// bounds: the series index when the leading meta column has an equality,
/// else the window index when time is bounded, else the heap.
///
/// # Safety
/// `store` must be `config`'s open bucket store.
pub(super) unsafe fn choose(store: pg_sys::Relation, config: &Config, metas: &[MetaCondition], has_time: bool) -> Access {
    let nmeta = config.meta_attnums.len();
    // SAFETY: `store` is `config`'s open bucket store, as choose's contract requires.
    if let Some(oid) = unsafe { series_index(store, config) } {
        // SAFETY: `oid` is one of the open store's indexes, just found in its index list; the AccessShareLock taken here is
        // released by the index_close below.
        let index = unsafe { pg_sys::index_open(oid, pg_sys::AccessShareLock as i32) };
        let mut keys = Vec::new();
        for column in 0..nmeta {
            // SAFETY: `index` stays open until the index_close below; `column` < nmeta, one of its meta key columns.
            let key = metas.iter().enumerate().filter(|(_, m)| m.meta == column).find_map(|(i, m)| unsafe { meta_key(index, column, i, m) });
            match key {
                Some(k) => keys.push(k),
                None => break,
            }
        }
        // SAFETY: closes the series `index` opened above, releasing the AccessShareLock it was opened with.
        unsafe { pg_sys::index_close(index, pg_sys::AccessShareLock as i32) };
        if !keys.is_empty() {
            // Window bounds narrow each series' range only when every meta column has a key.
            let window = has_time && keys.len() == nmeta;
            return Access::Series { index: oid, keys, window };
        }
    }
    if has_time {
        // SAFETY: `store` is still the caller's open bucket store; index_on looks for its window_start index.
        if let Some(index) = unsafe { reader::index_on(store, &[(bucket::COL_WINDOW_START + 1) as i16]) } {
            return Access::Window { index };
        }
    }
    Access::Heap
}

/// Begins the store scan for `access`, given the conditions' values
/// (`meta_values[i]` for the i-th meta condition given to `choose`) and the
/// time range.
///
/// # Safety
/// `store` must be `config`'s open bucket store; the values of the types the
/// conditions compare with.
pub(super) unsafe fn open(
    store: pg_sys::Relation,
    snapshot: pg_sys::Snapshot,
    config: &Config,
    access: &Access,
    meta_values: &[&[pg_sys::Datum]],
    time: Option<&BoundRange>,
) -> reader::StoreScan {
    // SAFETY: `store` is `config`'s open bucket store and `meta_values` are of the conditions' types (open's contract).
    let index_ranges = unsafe { ranges(store, config, access, meta_values, time) };
    match index_ranges {
        // SAFETY: `store` is open for as long as the caller's scan (it ends the StoreScan first); `r.index` is one of its
        // indexes, picked by `choose`.
        Some(r) => unsafe { reader::StoreScan::begin_index(store, snapshot, r) },
        // SAFETY: heap scan of the open `store` with the caller's `snapshot`; the caller ends it before closing the store.
        None => unsafe { reader::StoreScan::begin(store, snapshot) },
    }
}

/// The index ranges of `access` for these values (None: read the heap).
///
/// # Safety
/// As `open`.
pub(super) unsafe fn ranges(
    store: pg_sys::Relation,
    config: &Config,
    access: &Access,
    meta_values: &[&[pg_sys::Datum]],
    time: Option<&BoundRange>,
) -> Option<IndexRanges> {
    // SAFETY: `store` is `config`'s open bucket store (the contract of `ranges`), whose descriptor window_keys reads.
    let window_keys = || unsafe { window_keys(store, config, time) };
    let ranges = match access {
        Access::Heap => None,
        Access::Window { index } => Some(IndexRanges { index: *index, key_sets: vec![window_keys()] }),
        Access::Series { index, keys, window } => {
            // One key set per combination of the meta columns' distinct values.
            let mut key_sets: Vec<Vec<pg_sys::ScanKeyData>> = vec![Vec::new()];
            let mut complete = true;
            for (column, key) in keys.iter().enumerate() {
                // SAFETY: `meta_values[key.condition]` are values of the type `key.value_eq` compares (the contract of `ranges`).
                let values = unsafe { distinct(meta_values[key.condition], key) };
                if key_sets.len() * values.len() > MAX_KEY_SETS {
                    complete = false;
                    break;
                }
                key_sets = key_sets
                    .iter()
                    .flat_map(|set| {
                        values.iter().map(move |v| {
                            let mut set = set.clone();
                            let mut k = pg_sys::ScanKeyData::default();
                            // SAFETY: ScanKeyEntryInitialize fills the local `k`; `key.op` is the btree equality meta_key
                            // found in the index column's family, whose function get_opcode looks up.
                            unsafe {
                                pg_sys::ScanKeyEntryInitialize(
                                    &mut k,
                                    0,
                                    (bucket::COL_FIRST_META + 1 + column) as i16,
                                    pg_sys::BTEqualStrategyNumber as u16,
                                    key.subtype,
                                    key.collation,
                                    pg_sys::get_opcode(key.op),
                                    *v,
                                )
                            };
                            set.push(k);
                            set
                        })
                    })
                    .collect();
            }
            if *window && complete {
                let bounds = window_keys();
                key_sets.iter_mut().for_each(|set| set.extend_from_slice(&bounds));
            }
            // Too many values even for the first column: read the store instead.
            (!key_sets.iter().any(Vec::is_empty)).then_some(IndexRanges { index: *index, key_sets })
        }
    };
    ranges
}

/// The values without repeats under the column's equality, so that no two
/// index scans return the same bucket.
unsafe fn distinct(values: &[pg_sys::Datum], key: &MetaKey) -> Vec<pg_sys::Datum> {
    let mut eq = pg_sys::FmgrInfo::default();
    // SAFETY: `key.value_eq` is the same-type btree equality meta_key found in the index's family; fmgr_info fills the local `eq`.
    unsafe { pg_sys::fmgr_info(pg_sys::get_opcode(key.value_eq), &mut eq) };
    let mut out: Vec<pg_sys::Datum> = Vec::with_capacity(values.len());
    for &v in values {
        // SAFETY: `eq` was set up just above for `key.value_eq`; `o` and `v` are both values of its input type (the caller's).
        if !out.iter().any(|&o| unsafe { pg_sys::FunctionCall2Coll(&mut eq, key.collation, o, v) }.value() != 0) {
            out.push(v);
        }
    }
    out
}

/// window_start keys that keep every bucket which may hold a row in `time`.
unsafe fn window_keys(store: pg_sys::Relation, config: &Config, time: Option<&BoundRange>) -> Vec<pg_sys::ScanKeyData> {
    let Some(range) = time else { return Vec::new() };
    // SAFETY: `store` is the caller's open bucket store; COL_WINDOW_START is below its natts, so the attribute exists.
    let time_type = unsafe { (*crate::pg::relation::tuple_desc_attr((*store).rd_att, bucket::COL_WINDOW_START)).atttypid };
    let tz = time_type == pg_sys::TIMESTAMPTZOID;
    let mut keys = Vec::new();
    let mut push = |strategy: u32, proc: u32, value: i64| {
        let mut k = pg_sys::ScanKeyData::default();
        // SAFETY: ScanKeyInit fills the local `k` with `proc`, a built-in timestamp(tz) comparison (F_TIMESTAMP*_GE or _LE).
        unsafe {
            pg_sys::ScanKeyInit(&mut k, (bucket::COL_WINDOW_START + 1) as i16, strategy as u16, pg_sys::Oid::from(proc), pg_sys::Datum::from(value))
        };
        keys.push(k);
    };
    if let Some((Bound::Int(lo), _)) = range.lo {
        let from = lo.saturating_sub(config.span_micros).saturating_add(1);
        push(pg_sys::BTGreaterEqualStrategyNumber, if tz { pg_sys::F_TIMESTAMPTZ_GE } else { pg_sys::F_TIMESTAMP_GE }, from);
    }
    if let Some((Bound::Int(hi), _)) = range.hi {
        push(pg_sys::BTLessEqualStrategyNumber, if tz { pg_sys::F_TIMESTAMPTZ_LE } else { pg_sys::F_TIMESTAMP_LE }, hi);
    }
    keys
}

/// The meta equalities among the conditions, with their values, for `access`.
pub(super) fn meta_conditions(prune: &[Prune]) -> (Vec<MetaCondition>, Vec<&[pg_sys::Datum]>) {
    prune
        .iter()
        .filter_map(|p| match p {
            Prune::Meta { meta, op, collation, meta_first, values } => {
                Some((MetaCondition { meta: *meta, op: *op, collation: *collation, meta_first: *meta_first }, values.as_slice()))
            }
            _ => None,
        })
        .unzip()
}
