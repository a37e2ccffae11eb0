//! Plain scans: the store's buckets (all of them, or the index ranges
//! `access` chose), each decoded once and returned row by row, in either
//! direction (scrollable cursors); or bucket by bucket, for the aggregating
//! scan. The table AM's sequential scan is one of these too.

use crate::catalog::config::{self, Config};
use crate::catalog::shape::TableShape;
use crate::pg::memory::{Owned, own_in_context, owned_mut, take_owned};
use crate::scan::access::{Access, meta_conditions};
use crate::scan::prune::{Prune, RowFilter, bucket_may_match, decode_filtered_columns, meta_functions, row_filters, row_passes};
use crate::store::bucket;
use crate::store::reader;
use crate::store::rows::{self as read, LoadedBucket};
use crate::store::tuple;
use pgrx::pg_sys;
use std::rc::Rc;

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
pub(super) struct ScanCounters {
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
pub(super) struct TsScanDesc {
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
pub(super) unsafe fn write_buffered_rows(rel: pg_sys::Relation, snapshot: pg_sys::Snapshot) {
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
                        let chosen = crate::scan::access::choose(store, c, &metas, time.is_some());
                        let scan = crate::scan::access::open(store, snapshot, c, &chosen, &values, time);
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
pub(super) struct BucketRows<'a> {
    pub bucket: &'a LoadedBucket,
    pub prepared: &'a read::Prepared,
    pub shape: &'a TableShape,
    /// Rows passing every row filter, ascending.
    pub selected: Vec<u32>,
}

/// A bucket for a consumer of whole buckets: decoded, or only its header
/// when that answers the consumer.
pub(super) enum NextBucket<'a> {
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
pub(super) unsafe fn next_bucket_or_header<'a>(scan: pg_sys::TableScanDesc, answerable: &mut dyn FnMut(&bucket::StoredBucket) -> bool) -> Option<NextBucket<'a>> {
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

/// How the scan reaches the store's buckets.
///
/// # Safety
/// `scan` must come from `begin_with`.
pub(super) unsafe fn access_taken(scan: pg_sys::TableScanDesc) -> Access {
    unsafe { state(scan).access.clone() }
}

/// # Safety
/// `scan` must come from `begin_with`.
pub(super) unsafe fn counters(scan: pg_sys::TableScanDesc) -> ScanCounters {
    unsafe { state(scan).counters }
}
