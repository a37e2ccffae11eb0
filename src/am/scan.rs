//! Table scans: the bucket store's buckets (all of them, or the index ranges
//! `access` chose), each decoded once and returned row by row, in either
//! direction (scrollable cursors).

use super::access::{self, Access, MetaCondition};
use crate::store::rows::{self as read, LoadedBucket};
use crate::catalog::config;
use crate::catalog::config::Config;
use crate::catalog::shape::TableShape;
use crate::pg::memory::{own_in_context, owned_mut, take_owned, Owned};
use crate::store::bucket;
use crate::store::reader;
use crate::store::tuple;
use pgrx::pg_sys;
use std::rc::Rc;

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

/// What a custom scan knows that a plain sequential scan does not.
#[derive(Default)]
pub struct ScanOptions {
    /// Attributes the query reads (by attnum - 1); None = all.
    pub needed: Option<Vec<bool>>,
    pub prune: Vec<Prune>,
    /// A parallel scan's shared state of the store's heap: this participant
    /// reads the buckets of the blocks it is handed (pruning still applies).
    pub store_parallel: Option<pg_sys::ParallelTableScanDesc>,
    /// Conditions evaluated on each bucket's decoded arrays (rows failing them
    /// never become tuples).
    pub vector_filter: Option<std::rc::Rc<super::vector_filter::VectorFilter>>,
}

#[derive(Default, Clone, Copy)]
pub struct ScanCounters {
    pub buckets_read: u64,
    pub buckets_skipped: u64,
    /// Rows of read buckets dropped by `row_filters` before a tuple was formed.
    pub rows_filtered: u64,
    /// Buckets whose header answered the query (in-scan aggregation), payload unread.
    pub buckets_from_headers: u64,
    /// Compressed payload bytes of the buckets read (decoded, in the columns the query needs).
    pub payload_bytes: u64,
    /// Their decoded columns' size in memory.
    pub decoded_bytes: u64,
}

impl std::ops::AddAssign for ScanCounters {
    fn add_assign(&mut self, other: ScanCounters) {
        self.buckets_read += other.buckets_read;
        self.buckets_skipped += other.buckets_skipped;
        self.rows_filtered += other.rows_filtered;
        self.buckets_from_headers += other.buckets_from_headers;
        self.payload_bytes += other.payload_bytes;
        self.decoded_bytes += other.decoded_bytes;
    }
}

/// Postgres sees the `base` field; the rest is ours. The Rust state lives in
/// `scan_cxt` (a child of the context the scan began in): an ERROR that skips
/// `end` frees it with that context.
#[repr(C)]
pub struct TsScanDesc {
    base: pg_sys::TableScanDescData,
    state: *mut Owned<ScanState>,
    scan_cxt: pg_sys::MemoryContext,
}

struct ScanState {
    /// None when the table was never configured: it has no rows.
    config: Option<Rc<Config>>,
    shape: Option<TableShape>,
    store: pg_sys::Relation,
    store_scan: Option<reader::StoreScan>,
    /// Holds the current bucket's by-reference values; reset per bucket.
    bucket_cxt: pg_sys::MemoryContext,
    current: Option<LoadedBucket>,
    /// The rows of `current` the vector filter passes (None: no filter).
    mask: Option<Vec<bool>>,
    /// A bucket whose header alone answered (`next_bucket_or_header`).
    header: Option<bucket::StoredBucket>,
    prepared: read::Prepared,
    varying: Vec<usize>,
    /// The slot that holds a row of `current` (written by fill_slot): moving
    /// it to another row only needs the varying columns.
    filled_slot: *mut pg_sys::TupleTableSlot,
    /// Index of the row last returned from `current`.
    pos: isize,
    options: ScanOptions,
    counters: ScanCounters,
    meta_fns: Vec<Option<pg_sys::FmgrInfo>>,
    access: Access,
    /// Range conditions on decoded columns (by attnum - 1), checked per row
    /// before a tuple is formed. They come from the plan's quals, ANDed, so a
    /// row failing one fails the quals too; the quals still run on the rest.
    row_filters: Vec<RowFilter>,
}

/// Rows earlier commands of this transaction buffered for the table (an outer
/// statement whose trigger reads the table) are written before a scan reads
/// the store, so that it sees them. Every reader of a table (this scan, the
/// time-ordered merge, the last-point scan) calls this first.
///
/// # Safety
/// `rel` must be open; `snapshot` the scan's (or NULL).
pub unsafe fn write_buffered_rows(rel: pg_sys::Relation, snapshot: pg_sys::Snapshot) {
    unsafe {
        if crate::write::buffer::has_buffered((*rel).rd_id) && !snapshot.is_null() && (*snapshot).snapshot_type == pg_sys::SnapshotType::SNAPSHOT_MVCC {
            crate::write::flush::flush_for_scan((*rel).rd_id, (*snapshot).curcid);
        }
    }
}

/// # Safety
/// Called for scan_begin (plain scans pass default options) and by TsBucketScan.
pub unsafe fn begin_with(
    rel: pg_sys::Relation,
    snapshot: pg_sys::Snapshot,
    nkeys: i32,
    key: *mut pg_sys::ScanKeyData,
    pscan: pg_sys::ParallelTableScanDesc,
    flags: u32,
    options: ScanOptions,
) -> pg_sys::TableScanDesc {
    unsafe {
        let scan = pg_sys::palloc0(std::mem::size_of::<TsScanDesc>()) as *mut TsScanDesc;
        (*scan).base.rs_rd = rel;
        (*scan).base.rs_snapshot = snapshot;
        (*scan).base.rs_nkeys = nkeys;
        (*scan).base.rs_key = key;
        (*scan).base.rs_flags = flags;
        (*scan).base.rs_parallel = pscan;

        write_buffered_rows(rel, snapshot);
        let config = config::lookup((*rel).rd_id);
        let shape = config.as_ref().map(|c| TableShape::new((*rel).rd_att, c));
        let mut access_taken = Access::Heap;
        let row_filters = config.as_ref().map(|c| row_filters(c, &options.prune, (*rel).rd_att)).unwrap_or_default();
        let mut options = options;
        decode_filtered_columns(&mut options.needed, &row_filters);
        let (store, store_scan) = match &config {
            Some(c) => {
                let store = pg_sys::table_open(c.store_relid, pg_sys::AccessShareLock as i32);
                let (metas, values) = meta_conditions(&options.prune);
                let time = options.prune.iter().find_map(|p| match p {
                    Prune::Time(range) => Some(range),
                    _ => None,
                });
                let (chosen, scan) = match options.store_parallel {
                    Some(pscan) => (Access::Heap, reader::StoreScan::begin_parallel(store, pscan)),
                    None => {
                        let chosen = access::choose(store, c, &metas, time.is_some());
                        let scan = access::open(store, snapshot, c, &chosen, &values, time);
                        (chosen, scan)
                    }
                };
                access_taken = chosen;
                (store, Some(scan))
            }
            None => (std::ptr::null_mut(), None),
        };
        let scan_cxt = pg_sys::AllocSetContextCreateInternal(pg_sys::CurrentMemoryContext, c"tsbucket scan".as_ptr(), 0, 1024, 8 * 1024);
        let bucket_cxt = pg_sys::AllocSetContextCreateInternal(scan_cxt, c"tsbucket scan bucket".as_ptr(), 0, 8 * 1024, 8 * 1024 * 1024);
        let meta_fns = meta_functions(&options.prune);
        let state = own_in_context(scan_cxt, ScanState {
            config,
            shape,
            store,
            store_scan,
            bucket_cxt,
            current: None,
            mask: None,
            header: None,
            prepared: read::Prepared::default(),
            varying: Vec::new(),
            filled_slot: std::ptr::null_mut(),
            pos: -1,
            options,
            counters: ScanCounters::default(),
            meta_fns,
            access: access_taken,
            row_filters,
        });
        (*scan).state = state;
        (*scan).scan_cxt = scan_cxt;
        scan as pg_sys::TableScanDesc
    }
}

unsafe fn state<'a>(scan: pg_sys::TableScanDesc) -> &'a mut ScanState {
    unsafe { owned_mut((*(scan as *mut TsScanDesc)).state) }
}

/// # Safety
/// `scan` must come from `begin_with`.
pub unsafe fn end(scan: pg_sys::TableScanDesc) {
    unsafe {
        let ts = scan as *mut TsScanDesc;
        if let Some(mut state) = take_owned((*ts).state) {
            if let Some(s) = state.store_scan.take() {
                s.end();
            }
            if !state.store.is_null() {
                pg_sys::table_close(state.store, pg_sys::NoLock as i32);
            }
        }
        // Deletes bucket_cxt with it.
        pg_sys::MemoryContextDelete((*ts).scan_cxt);
        pg_sys::pfree(scan as *mut std::ffi::c_void);
    }
}

/// # Safety
/// `scan` must come from `begin_with`.
pub unsafe fn rescan(scan: pg_sys::TableScanDesc) {
    unsafe {
        let st = state(scan);
        if let Some(s) = st.store_scan.as_mut() {
            s.rescan();
        }
        st.current = None;
        st.filled_slot = std::ptr::null_mut();
        st.pos = -1;
    }
}

/// Moves to the next (or previous) bucket; false at either end.
unsafe fn advance_bucket(st: &mut ScanState, forward: bool) -> bool {
    unsafe { advance_bucket_or_header(st, forward, None) == Advanced::Rows }
}

#[derive(PartialEq)]
enum Advanced {
    Rows,
    /// `answerable` said the header answers: it is in `st.header`, the payload unread.
    Header,
    End,
}

unsafe fn advance_bucket_or_header(st: &mut ScanState, forward: bool, mut answerable: Option<&mut dyn FnMut(&bucket::StoredBucket) -> bool>) -> Advanced {
    unsafe {
        st.header = None;
        let config = st.config.as_ref().expect("configured");
        let shape = st.shape.as_ref().expect("configured");
        loop {
            let Some(tuple) = st.store_scan.as_mut().expect("configured").next(forward) else {
                st.current = None;
                return Advanced::End;
            };
            pg_sys::MemoryContextReset(st.bucket_cxt);
            let old = pg_sys::MemoryContextSwitchTo(st.bucket_cxt);
            let mut stored = tuple::read_header(st.store, tuple);
            if !bucket_may_match(&st.options.prune, &mut st.meta_fns, &stored) {
                pg_sys::MemoryContextSwitchTo(old);
                st.counters.buckets_skipped += 1;
                continue;
            }
            if stored.rows > 0 && answerable.as_mut().is_some_and(|f| f(&stored)) {
                pg_sys::MemoryContextSwitchTo(old);
                st.counters.buckets_from_headers += 1;
                st.current = None;
                st.header = Some(stored);
                return Advanced::Header;
            }
            st.counters.buckets_read += 1;
            stored.load_payload();
            st.counters.payload_bytes += stored.payload().len() as u64;
            let loaded = read::load_columns(config, shape, &stored, st.options.needed.as_deref());
            st.counters.decoded_bytes += read::decoded_bytes(&loaded);
            st.prepared = read::prepare(shape, &loaded);
            st.varying = read::varying_columns(shape, &loaded);
            st.filled_slot = std::ptr::null_mut();
            pg_sys::MemoryContextSwitchTo(old);
            if loaded.rows == 0 {
                continue;
            }
            st.pos = if forward { -1 } else { loaded.rows as isize };
            st.mask = st.options.vector_filter.as_ref().map(|f| f.mask(&loaded));
            st.current = Some(loaded);
            return Advanced::Rows;
        }
    }
}

/// # Safety
/// `scan` must come from `begin_with`; `slot` a virtual slot of its relation.
pub unsafe fn getnextslot(scan: pg_sys::TableScanDesc, direction: pg_sys::ScanDirection::Type, slot: *mut pg_sys::TupleTableSlot) -> bool {
    unsafe {
        let st = state(scan);
        if st.config.is_none() {
            pg_sys::ExecClearTuple(slot);
            return false;
        }
        let forward = direction != pg_sys::ScanDirection::BackwardScanDirection;
        loop {
            if let Some(bucket) = &st.current {
                let next = if forward { st.pos + 1 } else { st.pos - 1 };
                if next >= 0 && (next as usize) < bucket.rows {
                    st.pos = next;
                    if !row_passes(bucket, &st.row_filters, next as usize) || st.mask.as_ref().is_some_and(|m| !m[next as usize]) {
                        st.counters.rows_filtered += 1;
                        continue;
                    }
                    let shape = st.shape.as_ref().expect("configured");
                    let old = pg_sys::MemoryContextSwitchTo(st.bucket_cxt);
                    // The executor may have cleared or reused the slot; refill fully then.
                    let empty = (*slot).tts_flags & pg_sys::TTS_FLAG_EMPTY as u16 != 0;
                    if std::ptr::eq(st.filled_slot, slot) && !empty {
                        read::refill_slot(shape, bucket, &st.prepared, &st.varying, next as usize, slot);
                    } else {
                        read::fill_slot((*scan).rs_rd, shape, bucket, Some(&st.prepared), next as usize, slot);
                        st.filled_slot = slot;
                    }
                    pg_sys::MemoryContextSwitchTo(old);
                    return true;
                }
            }
            if !advance_bucket(st, forward) {
                pg_sys::ExecClearTuple(slot);
                return false;
            }
        }
    }
}

/// One bucket for a consumer of whole buckets (the in-scan aggregation): its
/// decoded columns, prepared datums and the rows that pass the row filters.
pub struct BucketRows<'a> {
    pub bucket: &'a LoadedBucket,
    pub prepared: &'a read::Prepared,
    pub shape: &'a TableShape,
    /// Rows passing every row filter, ascending.
    pub selected: Vec<u32>,
}

/// A bucket for a consumer of whole buckets: decoded, or only its header
/// when that answers the consumer.
pub enum NextBucket<'a> {
    Rows(BucketRows<'a>),
    /// The header answered (`answerable` returned true for it).
    Header,
}

/// The next bucket past pruning, forward, or None at the end: its header
/// alone when `answerable` says it answers, else decoded. The previous
/// bucket's rows and datums are freed.
///
/// # Safety
/// `scan` must come from `begin_with` and be read only through this function.
pub unsafe fn next_bucket_or_header<'a>(scan: pg_sys::TableScanDesc, answerable: &mut dyn FnMut(&bucket::StoredBucket) -> bool) -> Option<NextBucket<'a>> {
    unsafe {
        let st = state(scan);
        st.config.as_ref()?;
        match advance_bucket_or_header(st, true, Some(answerable)) {
            Advanced::End => return None,
            Advanced::Header => return Some(NextBucket::Header),
            Advanced::Rows => {}
        }
        let bucket = st.current.as_ref().expect("advance_bucket set it");
        let mask = st.mask.as_deref();
        let selected: Vec<u32> = (0..bucket.rows)
            .filter(|&r| mask.is_none_or(|m| m[r]) && (st.row_filters.is_empty() || row_passes(bucket, &st.row_filters, r)))
            .map(|r| r as u32)
            .collect();
        st.counters.rows_filtered += (bucket.rows - selected.len()) as u64;
        Some(NextBucket::Rows(BucketRows { bucket, prepared: &st.prepared, shape: st.shape.as_ref().expect("configured"), selected }))
    }
}

/// The comparison functions of the meta conditions, by position in `prune`.
///
/// # Safety
/// Looks operators up in the catalogs.
pub unsafe fn meta_functions(prune: &[Prune]) -> Vec<Option<pg_sys::FmgrInfo>> {
    prune
        .iter()
        .map(|p| match p {
            Prune::Meta { op, .. } => {
                let mut finfo = pg_sys::FmgrInfo::default();
                // SAFETY: op is an operator the planner found in the quals.
                unsafe { pg_sys::fmgr_info(pg_sys::get_opcode(*op), &mut finfo) };
                Some(finfo)
            }
            Prune::Time { .. } | Prune::Column { .. } => None,
        })
        .collect()
}

/// A range condition checked per row on a decoded column.
#[derive(Clone, Copy)]
pub struct RowFilter {
    /// attnum - 1.
    pub attr: usize,
    pub range: BoundRange,
    /// Whether the column's value in buckets written before it was added (its
    /// default, or NULL) passes: such buckets hold no array for it.
    pub missing_passes: bool,
}

/// The value of a by-value datum of a column stored as `kind`, `typlen` bytes long.
pub fn datum_bound(value: pg_sys::Datum, kind: tsbucket_format::ColumnKind, typlen: i16) -> Bound {
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
pub unsafe fn missing_bound(tupdesc: pg_sys::TupleDesc, attr: usize) -> (Option<Bound>, bool) {
    // SAFETY: as the caller promises.
    unsafe {
        let att = &*crate::pg::relation::tuple_desc_attr(tupdesc, attr);
        let mut isnull = false;
        let d = pg_sys::getmissingattr(tupdesc, attr as i32 + 1, &mut isnull);
        let bound = (!isnull && att.attbyval && !att.attisdropped)
            .then(|| datum_bound(d, crate::pg::datum::kind_for_type(att.atttypid, att.attlen, att.attbyval), att.attlen));
        (bound, isnull)
    }
}

/// The range conditions to check per row. They decide their conditions
/// exactly: NULL fails, NaN sorts above every number, and a column added
/// after a bucket was written has its default there.
///
/// # Safety
/// `tupdesc` is the table's.
pub unsafe fn row_filters(config: &Config, prune: &[Prune], tupdesc: pg_sys::TupleDesc) -> Vec<RowFilter> {
    prune
        .iter()
        .filter_map(|p| match p {
            Prune::Time(range) => Some((config.time_attnum as usize - 1, *range)),
            Prune::Column { attnum, range } => Some((*attnum as usize - 1, *range)),
            Prune::Meta { .. } => None,
        })
        .map(|(attr, range)| {
            // SAFETY: attr is an attribute of the table (the planner found it in the quals).
            let (missing, _) = unsafe { missing_bound(tupdesc, attr) };
            let missing_passes = missing.is_some_and(|v| range.admits(v, v, matches!(v, Bound::Float(f) if f.is_nan())));
            RowFilter { attr, range, missing_passes }
        })
        .collect()
}

/// Marks the row filters' columns as needed: a filter decides only on decoded values.
pub fn decode_filtered_columns(needed: &mut Option<Vec<bool>>, filters: &[RowFilter]) {
    if let Some(n) = needed.as_mut() {
        filters.iter().for_each(|f| n[f.attr] = true);
    }
}

/// Whether row `row` satisfies every row filter.
pub fn row_passes(bucket: &LoadedBucket, filters: &[RowFilter], row: usize) -> bool {
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

/// Whether any row of the bucket could satisfy every pruning condition.
pub unsafe fn bucket_may_match(prune: &[Prune], meta_fns: &mut [Option<pg_sys::FmgrInfo>], b: &bucket::StoredBucket) -> bool {
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
            Prune::Meta { meta, collation, meta_first, values, .. } => {
                let Some(m) = b.meta_datum(*meta) else { return false };
                let finfo = meta_fns[i].as_mut().expect("built with the condition");
                let any = values.iter().any(|v| {
                    let (a, b) = if *meta_first { (m, *v) } else { (*v, m) };
                    unsafe { pg_sys::FunctionCall2Coll(finfo, *collation, a, b) }.value() != 0
                });
                if !any {
                    return false;
                }
            }
        }
    }
    true
}

/// The meta equalities among the conditions, with their values, for `access`.
pub fn meta_conditions(prune: &[Prune]) -> (Vec<MetaCondition>, Vec<&[pg_sys::Datum]>) {
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

/// How the scan reaches the store's buckets.
///
/// # Safety
/// `scan` must come from `begin_with`.
pub unsafe fn access_taken(scan: pg_sys::TableScanDesc) -> Access {
    unsafe { state(scan).access.clone() }
}

/// # Safety
/// `scan` must come from `begin_with`.
pub unsafe fn counters(scan: pg_sys::TableScanDesc) -> ScanCounters {
    unsafe { state(scan).counters }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn range(conditions: &[(i32, Bound)]) -> BoundRange {
        let mut r = BoundRange::default();
        conditions.iter().for_each(|(s, v)| r.narrow(*s, *v));
        r
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
    fn admits_respects_inclusivity_and_nan() {
        let above = range(&[(5, Bound::Float(10.0))]);
        assert!(!above.admits(Bound::Float(0.0), Bound::Float(10.0), false));
        assert!(above.admits(Bound::Float(0.0), Bound::Float(10.0), true));
        assert!(range(&[(4, Bound::Float(10.0))]).admits(Bound::Float(0.0), Bound::Float(10.0), false));
        assert!(!range(&[(1, Bound::Float(0.0))]).admits(Bound::Float(f64::NAN), Bound::Float(f64::NAN), true));
        assert!(range(&[(1, Bound::Int(0))]).admits(Bound::Float(5.0), Bound::Float(6.0), false));
    }
}
