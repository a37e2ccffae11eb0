//! Plain scans: the store's buckets (all of them, or the index ranges
//! `access` chose), each decoded once and returned row by row, in either
//! direction (scrollable cursors); or bucket by bucket, for the aggregating
//! scan. The table AM's sequential scan is one of these too.

use crate::catalog::config::{self, Config};
use crate::catalog::shape::TableShape;
use crate::pg::memory::{Owned, own_in_context, owned_mut, take_owned};
use crate::scan::access::{Access, meta_conditions};
use crate::scan::prune::{Prune, RowFilter, bucket_may_match, clear_failing_rows, decode_filtered_columns, meta_functions, row_filters};
use crate::store::bucket;
use crate::store::reader;
use crate::store::bucket::LoadedBucket;
use crate::store::rows;
use crate::store::tuple;
use pgrx::pg_sys;
use std::rc::Rc;

/// What a custom scan knows that a plain sequential scan does not.
#[derive(Default)]
pub struct ScanOptions {
    /// Attributes the query reads (by attnum - 1); None = all.
    pub needed: Option<Vec<bool>>,
    /// Documents the query reads only some top-level keys of (`rows::DocKeys`).
    pub doc_keys: Rc<rows::DocKeys>,
    /// Document fields the in-scan aggregation reads as numbers (`rows::DocFields`).
    pub doc_fields: Rc<rows::DocFields>,
    pub prune: Vec<Prune>,
    /// A parallel scan's shared state of the store's heap: this participant
    /// reads the buckets of the blocks it is handed (pruning still applies).
    pub store_parallel: Option<pg_sys::ParallelTableScanDesc>,
    /// Conditions evaluated on each bucket's decoded arrays (rows failing them
    /// never become tuples).
    pub vector_filter: Option<std::rc::Rc<super::vector_filter::VectorFilter>>,
    /// A parallel scan's claim on the tail: the participant that sets it
    /// first reads the tail's rows (None: this scan reads them).
    pub tail_claim: Option<*const std::sync::atomic::AtomicU32>,
    /// Document attributes (attnum - 1) read only by conditions the vector
    /// filter holds and by fields read as numbers: a bucket whose mask
    /// decides every condition, and whose fields hold nothing Postgres must
    /// cast, builds none of their documents (`BucketRows::decided`).
    pub unread_when_decided: Vec<usize>,
    /// Slot columns past the table's that hold document fields the query
    /// outputs (`rewrite::field_output`).
    pub field_outputs: Option<Rc<FieldOutputs>>,
}

/// Output columns a plain scan fills from document fields: column
/// `first + j` of the slot holds `list[j]`.
pub struct FieldOutputs {
    /// The table's number of attributes: the outputs follow its columns.
    pub first: usize,
    pub list: Vec<FieldOutput>,
    /// The scan node's ExprContext, to evaluate an output's expression in.
    pub econtext: *mut pg_sys::ExprContext,
}

/// One output column: field `field` of `ScanOptions::doc_fields` (of
/// document column `column`, attnum - 1) cast by `cast`; where the value
/// needs Postgres's cast, `expr` (the target's expression, compiled for the
/// scan node) evaluated on the row.
pub struct FieldOutput {
    pub field: usize,
    pub column: usize,
    pub cast: crate::scan::doc_keys::FieldCast,
    pub expr: *mut pg_sys::ExprState,
}

#[derive(Default, Clone, Copy)]
pub(super) struct ScanCounters {
    pub buckets_read: u64,
    pub buckets_skipped: u64,
    /// Rows of read buckets dropped by `row_filters` before a tuple was formed.
    pub rows_filtered: u64,
    /// Rows read from the table's tail (not yet in buckets).
    pub tail_rows: u64,
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
        self.tail_rows += other.tail_rows;
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
    snapshot: pg_sys::Snapshot,
    /// Where the scan is: in the store's buckets, or at tail group `i` (-1:
    /// before the first; len: past the last). The tail comes after the store.
    phase: Phase,
    /// The tail's groups as bucket headers, read when the scan first reaches
    /// them (in `scan_cxt`); None before.
    tail: Option<Vec<bucket::StoredBucket>>,
    scan_cxt: pg_sys::MemoryContext,
    /// Holds the current bucket's by-reference values; reset per bucket.
    bucket_cxt: pg_sys::MemoryContext,
    current: Option<LoadedBucket>,
    /// The rows of `current` the vector filter and the row filters pass (None: neither).
    mask: Option<Vec<bool>>,
    /// Whether `mask` decides every condition of the vector filter in `current`.
    decided: bool,
    /// The row returned last has output columns to evaluate (`outputs_pending`).
    outputs_pending: bool,
    /// A bucket whose header alone answered (`next_bucket_or_header`).
    header: Option<bucket::StoredBucket>,
    prepared: rows::Prepared,
    varying: Vec<usize>,
    /// The slot that holds a row of `current` (written by fill_slot): moving
    /// it to another row only needs the varying columns.
    filled_slot: *mut pg_sys::TupleTableSlot,
    /// Index of the row last returned from `current`.
    pos: isize,
    options: ScanOptions,
    counters: ScanCounters,
    /// How many payload bytes to fetch first (`StoredBucket::load_payload_for`).
    prefix_hint: usize,
    meta_fns: Vec<Option<pg_sys::FmgrInfo>>,
    access: Access,
    /// Range conditions on decoded columns (by attnum - 1), checked per row
    /// before a tuple is formed. They come from the plan's quals, ANDed, so a
    /// row failing one fails the quals too; the quals still run on the rest.
    row_filters: Vec<RowFilter>,
    /// Document attributes built only for the rows the filters pass (none
    /// when nothing filters rows): `rows::decode_late`.
    late: Vec<usize>,
}

#[derive(Clone, Copy, PartialEq)]
enum Phase {
    /// Not started: a first step forward reads the store, backward the tail.
    Start,
    Store,
    Tail(isize),
}

/// Rows earlier commands of this transaction buffered for the table (an outer
/// statement whose trigger reads the table) are written before a scan reads
/// the store, so that it sees them. Every reader of a table (this scan, the
/// time-ordered merge, the last-point scan) calls this first.
///
/// # Safety
/// `rel` must be open; `snapshot` the scan's (or NULL).
pub(super) unsafe fn write_buffered_rows(rel: pg_sys::Relation, snapshot: pg_sys::Snapshot) {
    // SAFETY: `rel` is open, as this function's contract requires, so its relcache entry's rd_id is readable.
    let relid = unsafe { (*rel).rd_id };
    if !crate::write::buffer::has_buffered(relid) || snapshot.is_null() {
        return;
    }
    // SAFETY: `snapshot` is not NULL (checked above), so it is the scan's snapshot, alive while the scan runs (the contract).
    let (snapshot_type, curcid) = unsafe { ((*snapshot).snapshot_type, (*snapshot).curcid) };
    if snapshot_type == pg_sys::SnapshotType::SNAPSHOT_MVCC {
        crate::write::flush::flush_for_scan(relid, curcid);
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
    // SAFETY: palloc0 in CurrentMemoryContext, the context scan_begin (or TsBucketScan's BeginCustomScan) runs in; the
    // zeroed TsScanDesc is filled below and pfree'd by `end`.
    let scan = unsafe { pg_sys::palloc0(std::mem::size_of::<TsScanDesc>()) as *mut TsScanDesc };
    // SAFETY: `scan` was just allocated above with room for a whole TsScanDesc, and nothing else points to it yet.
    unsafe {
        (*scan).base.rs_rd = rel;
        (*scan).base.rs_snapshot = snapshot;
        (*scan).base.rs_nkeys = nkeys;
        (*scan).base.rs_key = key;
        (*scan).base.rs_flags = flags;
        (*scan).base.rs_parallel = pscan;
    }

    // SAFETY: `rel` is the relation scan_begin was given, open for the whole scan, and `snapshot` the scan's (or NULL).
    unsafe { write_buffered_rows(rel, snapshot) };
    // SAFETY: `rel` stays open for the scan (its caller's table_open), so rd_id is readable.
    let config = config::lookup(unsafe { (*rel).rd_id });
    // SAFETY: `(*rel).rd_att` is the descriptor of the open relation `c` configures, valid while it stays open.
    let shape = config.as_ref().map(|c| unsafe { TableShape::new((*rel).rd_att, c) });
    let mut access_taken = Access::Heap;
    // SAFETY: row_filters reads attributes of `(*rel).rd_att`, the scanned table's own descriptor, as its contract asks.
    let row_filters = config.as_ref().map(|c| unsafe { row_filters(c, &options.prune, (*rel).rd_att) }).unwrap_or_default();
    let mut options = options;
    decode_filtered_columns(&mut options.needed, &row_filters);
    let filters_rows = options.vector_filter.is_some() || !row_filters.is_empty();
    let late: Vec<usize> = match &shape {
        Some(shape) if filters_rows => shape
            .payload_attrs()
            .map(|a| a.attnum as usize - 1)
            .filter(|&a| shape.attrs[a].kind == tsbucket_format::ColumnKind::Document)
            .filter(|&a| options.needed.as_ref().is_none_or(|n| n[a]) && !options.vector_filter.as_ref().is_some_and(|f| f.reads(a)))
            .collect(),
        _ => Vec::new(),
    };
    let (store, store_scan) = match &config {
        Some(c) => {
            // SAFETY: opens the bucket store `c.store_relid` of the configured table; AccessShareLock until the transaction
            // ends (`end` closes it with NoLock).
            let store = unsafe { pg_sys::table_open(c.store_relid, pg_sys::AccessShareLock as i32) };
            let (metas, values) = meta_conditions(&options.prune);
            let time = crate::scan::prune::time_range(&options.prune);
            let (chosen, scan) = match options.store_parallel {
                // SAFETY: `store` stays open until `end`; `pscan` is the parallel query's shared state of its heap
                // (ScanOptions::store_parallel, initialized by the leader).
                Some(pscan) => (Access::Heap, unsafe { reader::StoreScan::begin_parallel(store, pscan) }),
                // SAFETY: `store` is `c`'s bucket store, opened just above and open until `end`; `values` are the
                // planner's constants of the meta conditions `metas`, of the types their operators compare.
                None => unsafe {
                    let chosen = crate::scan::access::choose(store, c, &metas, time.is_some());
                    let scan = crate::scan::access::open(store, snapshot, c, &chosen, &values, time);
                    (chosen, scan)
                },
            };
            access_taken = chosen;
            (store, Some(scan))
        }
        None => (std::ptr::null_mut(), None),
    };
    // SAFETY: `scan_cxt` is created under CurrentMemoryContext, the context the scan begins in, and deleted by `end` (or
    // with its parent after an ERROR); `bucket_cxt` is its child.
    let (scan_cxt, bucket_cxt) = unsafe {
        let scan_cxt = pg_sys::AllocSetContextCreateInternal(pg_sys::CurrentMemoryContext, c"tsbucket scan".as_ptr(), 0, 1024, 8 * 1024);
        let bucket_cxt = pg_sys::AllocSetContextCreateInternal(scan_cxt, c"tsbucket scan bucket".as_ptr(), 0, 8 * 1024, 8 * 1024 * 1024);
        (scan_cxt, bucket_cxt)
    };
    // SAFETY: meta_functions looks up the operators of the meta conditions in `options.prune`, which the planner found in the quals.
    let meta_fns = unsafe { meta_functions(&options.prune) };
    let scan_state = ScanState {
        config,
        shape,
        store,
        store_scan,
        snapshot,
        phase: Phase::Start,
        tail: None,
        scan_cxt,
        bucket_cxt,
        current: None,
        mask: None,
        decided: false,
        outputs_pending: false,
        header: None,
        prepared: rows::Prepared::default(),
        varying: Vec::new(),
        filled_slot: std::ptr::null_mut(),
        pos: -1,
        options,
        counters: ScanCounters::default(),
        prefix_hint: 0,
        meta_fns,
        access: access_taken,
        row_filters,
        late,
    };
    // SAFETY: `scan_cxt` was created above and outlives every use of the state: `end` takes it out before deleting the context.
    let state = unsafe { own_in_context(scan_cxt, scan_state) };
    // SAFETY: `scan` is the TsScanDesc palloc0'd at the top of this function, not yet handed to anyone.
    unsafe {
        (*scan).state = state;
        (*scan).scan_cxt = scan_cxt;
    }
    scan as pg_sys::TableScanDesc
}

unsafe fn state<'a>(scan: pg_sys::TableScanDesc) -> &'a mut ScanState {
    // SAFETY: `scan` is a TsScanDesc made by `begin_with` (every caller's contract), whose `state` holder lives in its
    // `scan_cxt` until `end` takes it.
    unsafe { owned_mut((*(scan as *mut TsScanDesc)).state) }
}

/// # Safety
/// `scan` must come from `begin_with`.
pub unsafe fn end(scan: pg_sys::TableScanDesc) {
    let ts = scan as *mut TsScanDesc;
    // SAFETY: `ts` is the TsScanDesc `begin_with` made (this function's contract), its `scan_cxt` not yet deleted.
    if let Some(mut state) = unsafe { take_owned((*ts).state) } {
        if let Some(s) = state.store_scan.take() {
            s.end();
        }
        if !state.store.is_null() {
            // SAFETY: `state.store` was opened by begin_with's table_open and its scan just ended; NoLock keeps the
            // AccessShareLock until the transaction ends.
            unsafe { pg_sys::table_close(state.store, pg_sys::NoLock as i32) };
        }
    }
    // Deletes bucket_cxt with it.
    // SAFETY: `(*ts).scan_cxt` was created by begin_with and is deleted only here, after its state was taken out; `scan`
    // was palloc'd by begin_with and is not used after this.
    unsafe {
        pg_sys::MemoryContextDelete((*ts).scan_cxt);
        pg_sys::pfree(scan as *mut std::ffi::c_void);
    }
}

/// # Safety
/// `scan` must come from `begin_with`.
pub unsafe fn rescan(scan: pg_sys::TableScanDesc) {
    // SAFETY: `scan` comes from `begin_with` and is not ended, as rescan's contract requires.
    let st = unsafe { state(scan) };
    if let Some(s) = st.store_scan.as_mut() {
        s.rescan();
    }
    st.phase = Phase::Start;
    st.current = None;
    st.filled_slot = std::ptr::null_mut();
    st.pos = -1;
}

/// Moves to the next (or previous) bucket; false at either end.
unsafe fn advance_bucket(st: &mut ScanState, forward: bool) -> bool {
    // SAFETY: `st` is the state of a configured scan from begin_with (getnextslot's caller checked), its store still open.
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
    st.header = None;
    loop {
        // SAFETY: the scan is configured (its caller checked), so its store scan and contexts exist until `end`.
        let Some((old, mut stored)) = (unsafe { next_header(st, forward) }) else {
            st.current = None;
            return Advanced::End;
        };
        let config = st.config.as_ref().expect("configured");
        let shape = st.shape.as_ref().expect("configured");
        // SAFETY: `st.meta_fns` were built by meta_functions from `st.options.prune`, one per condition, by position.
        if !unsafe { bucket_may_match(&st.options.prune, &mut st.meta_fns, &stored) } {
            // SAFETY: back to `old`, the context current before the switch to bucket_cxt, as the bucket is skipped.
            unsafe { pg_sys::MemoryContextSwitchTo(old) };
            st.counters.buckets_skipped += 1;
            continue;
        }
        if stored.rows > 0 && stored.tail.is_none() && answerable.as_mut().is_some_and(|f| f(&stored)) {
            // SAFETY: back to `old` before the header (allocated in bucket_cxt, kept until the next reset) goes to the caller.
            unsafe { pg_sys::MemoryContextSwitchTo(old) };
            st.counters.buckets_from_headers += 1;
            st.current = None;
            st.header = Some(stored);
            return Advanced::Header;
        }
        if stored.tail.is_some() {
            st.counters.tail_rows += stored.rows as u64;
        } else {
            st.counters.buckets_read += 1;
        }
        let o = &st.options;
        rows::load_payload(&mut stored, o.needed.as_deref(), &o.doc_fields, &st.late, &mut st.prefix_hint);
        st.counters.payload_bytes += stored.payload().len() as u64;
        let mut loaded = rows::load_deferring(config, shape, &stored, o.needed.as_deref(), &o.doc_keys, &o.doc_fields, &st.late);
        // Filters first, then the documents of the rows they pass.
        let (mut mask, decided) = match o.vector_filter.as_ref().map(|f| f.mask(&loaded)) {
            Some((mask, decided)) => (Some(mask), decided && rows::fields_all_cast(&loaded, &o.doc_fields)),
            None => (None, false),
        };
        // The row filters join the mask, so that a row is tested once, by one flag.
        if !st.row_filters.is_empty() {
            clear_failing_rows(&loaded, &st.row_filters, mask.get_or_insert_with(|| vec![true; loaded.rows]));
        }
        let late: std::borrow::Cow<[usize]> = if decided && st.late.iter().any(|a| o.unread_when_decided.contains(a)) {
            let (unread, read): (Vec<usize>, Vec<usize>) = st.late.iter().partition(|a| o.unread_when_decided.contains(a));
            let skipped = loaded.skipped.get_or_insert_with(|| vec![false; shape.attrs.len()]);
            unread.iter().for_each(|&a| skipped[a] = true);
            read.into()
        } else {
            (&st.late[..]).into()
        };
        if !late.is_empty() {
            let pass = mask.get_or_insert_with(|| vec![true; loaded.rows]);
            rows::decode_late(config, shape, &stored, &mut loaded, &late, &o.doc_keys, pass);
        }
        st.counters.decoded_bytes += rows::decoded_bytes(&loaded);
        // SAFETY: bucket_cxt is current, so the prepared datums live until the next bucket resets it, as long as `loaded`.
        // By-value datums only for rows getnextslot returns: the in-scan aggregation (`answerable`) reads the arrays.
        st.prepared = unsafe { rows::prepare(shape, &loaded, answerable.is_none()) };
        st.varying = rows::varying_columns(shape, &loaded);
        st.filled_slot = std::ptr::null_mut();
        // SAFETY: back to `old` once the bucket's columns and prepared datums are in bucket_cxt.
        unsafe { pg_sys::MemoryContextSwitchTo(old) };
        if loaded.rows == 0 {
            continue;
        }
        st.pos = if forward { -1 } else { loaded.rows as isize };
        st.mask = mask;
        st.decided = decided;
        st.current = Some(loaded);
        return Advanced::Rows;
    }
}

/// The next bucket header in the scan's direction, from the store, then the
/// tail; in `bucket_cxt` (reset for it, and current on return, with the
/// context to return to). None at either end.
///
/// # Safety
/// `st` is the state of a configured scan from begin_with.
unsafe fn next_header(st: &mut ScanState, forward: bool) -> Option<(pg_sys::MemoryContext, bucket::StoredBucket)> {
    if st.phase == Phase::Start {
        st.phase = if forward { Phase::Store } else { Phase::Tail(isize::MAX) };
    }
    loop {
        match st.phase {
            Phase::Start => unreachable!("set above"),
            Phase::Store => {
                let Some(tuple) = st.store_scan.as_mut().expect("configured").next(forward) else {
                    if !forward {
                        return None;
                    }
                    st.phase = Phase::Tail(-1);
                    continue;
                };
                // SAFETY: `st.bucket_cxt` is the scan's bucket context (a child of scan_cxt, alive until `end`), and nothing
                // of the previous bucket is used past this reset; `tuple` was just returned by the walk of `st.store` and
                // stays valid until its next call.
                return Some(unsafe {
                    pg_sys::MemoryContextReset(st.bucket_cxt);
                    let old = pg_sys::MemoryContextSwitchTo(st.bucket_cxt);
                    (old, tuple::read_header(st.store, tuple))
                });
            }
            Phase::Tail(pos) => {
                // SAFETY: the scan's state is configured (next_header's contract).
                let len = unsafe { tail_headers(st) }.len() as isize;
                let next = if forward { pos.saturating_add(1) } else { pos.min(len) - 1 };
                if next < 0 {
                    st.phase = Phase::Store;
                    continue;
                }
                st.phase = Phase::Tail(next.min(len));
                if next >= len {
                    return None;
                }
                let stored = st.tail.as_ref().expect("read")[next as usize].clone();
                // SAFETY: as for a store bucket: bucket_cxt is reset for the group, whose header lives in scan_cxt.
                let old = unsafe {
                    pg_sys::MemoryContextReset(st.bucket_cxt);
                    pg_sys::MemoryContextSwitchTo(st.bucket_cxt)
                };
                return Some((old, stored));
            }
        }
    }
}

/// The tail's groups, read on first use with the scan's snapshot (none when
/// another participant of a parallel scan claimed them).
///
/// # Safety
/// `st` is the state of a configured scan from begin_with.
unsafe fn tail_headers(st: &mut ScanState) -> &[bucket::StoredBucket] {
    if st.tail.is_none() {
        let claimed = st.options.tail_claim.is_none_or(|claim| {
            // SAFETY: the claim lives in the parallel scan's shared memory, mapped while the scan runs.
            unsafe { &*claim }.compare_exchange(0, 1, std::sync::atomic::Ordering::AcqRel, std::sync::atomic::Ordering::Acquire).is_ok()
        });
        let config = st.config.as_ref().expect("configured");
        let shape = st.shape.as_ref().expect("configured");
        let snapshot_is_mvcc =
            // SAFETY: a non-null snapshot is the scan's, alive while it runs.
            !st.snapshot.is_null() && unsafe { (*st.snapshot).snapshot_type } == pg_sys::SnapshotType::SNAPSHOT_MVCC;
        let headers = if claimed && snapshot_is_mvcc {
            // SAFETY: scan_cxt lives until `end`, so the groups' headers read into it outlast the scan's use of them;
            // the snapshot is the scan's MVCC snapshot.
            unsafe {
                let old = pg_sys::MemoryContextSwitchTo(st.scan_cxt);
                let groups = crate::store::tail::read_groups(config, shape, st.snapshot);
                let headers = groups.iter().map(|g| g.header(shape)).collect();
                pg_sys::MemoryContextSwitchTo(old);
                headers
            }
        } else {
            Vec::new()
        };
        st.tail = Some(headers);
    }
    st.tail.as_deref().expect("read")
}

/// # Safety
/// `scan` must come from `begin_with`; `slot` a virtual slot of its relation.
pub unsafe fn getnextslot(scan: pg_sys::TableScanDesc, direction: pg_sys::ScanDirection::Type, slot: *mut pg_sys::TupleTableSlot) -> bool {
    // SAFETY: `scan` comes from `begin_with` and is not ended, as getnextslot's contract requires.
    let st = unsafe { state(scan) };
    if st.config.is_none() {
        // SAFETY: `slot` is a virtual slot of the scanned relation (the contract); an unconfigured table has no rows.
        unsafe { pg_sys::ExecClearTuple(slot) };
        return false;
    }
    let forward = direction != pg_sys::ScanDirection::BackwardScanDirection;
    loop {
        if let Some(bucket) = &st.current {
            let next = if forward { st.pos + 1 } else { st.pos - 1 };
            if next >= 0 && (next as usize) < bucket.rows {
                st.pos = next;
                if st.mask.as_ref().is_some_and(|m| !m[next as usize]) {
                    st.counters.rows_filtered += 1;
                    continue;
                }
                let shape = st.shape.as_ref().expect("configured");
                // SAFETY: `st.bucket_cxt` holds `bucket`'s values and is reset only when the next bucket is read, so the
                // row's by-reference values allocated in it last as long as the slot may show them.
                let old = unsafe { pg_sys::MemoryContextSwitchTo(st.bucket_cxt) };
                // The executor may have cleared or reused the slot; refill fully then.
                // SAFETY: `slot` is the caller's live slot of the scanned relation (getnextslot's contract).
                let empty = unsafe { (*slot).tts_flags } & pg_sys::TTS_FLAG_EMPTY as u16 != 0;
                if std::ptr::eq(st.filled_slot, slot) && !empty {
                    // SAFETY: `slot` still holds a row of `bucket` written by fill_slot with `st.prepared` (filled_slot is
                    // reset whenever the bucket changes, and the slot is not empty).
                    unsafe { rows::refill_slot(shape, bucket, &st.prepared, &st.varying, next as usize, slot) };
                } else {
                    // SAFETY: `(*scan).rs_rd` is the scanned relation begin_with stored; `slot` is a virtual slot of it and
                    // `st.prepared` was made for `bucket`.
                    unsafe { rows::fill_slot((*scan).rs_rd, shape, bucket, Some(&st.prepared), next as usize, slot) };
                    st.filled_slot = slot;
                }
                // SAFETY: `old` is the context getnextslot was called in, current before the switch to bucket_cxt above.
                unsafe { pg_sys::MemoryContextSwitchTo(old) };
                if let Some(outputs) = &st.options.field_outputs {
                    // SAFETY: `slot` holds row `next` of `bucket` just written; the scan's slot has the outputs' columns.
                    st.outputs_pending = unsafe { fill_field_outputs(outputs, bucket, next as usize, slot, false) };
                }
                return true;
            }
        }
        // SAFETY: the table is configured (checked above), so `st` has the open store and store scan begin_with made.
        if !unsafe { advance_bucket(st, forward) } {
            // SAFETY: `slot` is the caller's slot; cleared, it tells the executor the scan is at its end.
            unsafe { pg_sys::ExecClearTuple(slot) };
            return false;
        }
    }
}

/// For `exec`'s own projection (`scan::project`): the next row of the
/// current bucket written straight into `result`, its column `j` the
/// table's column `sources[j]`, for a node with no qual left to run on it
/// (with `decided_only`, none in a bucket whose mask decided every
/// condition, so only such buckets qualify). A varying column's value comes
/// from the decoded arrays; the others, constant in the bucket, from
/// `scan_slot`, which holds a row of it (getnextslot filled it) and takes
/// the returned row's identity (a cursor's WHERE CURRENT OF reads it there).
/// False when the current bucket has no such row: getnextslot goes on from
/// there.
///
/// # Safety
/// `scan` must come from `begin_with`, `scan_slot` be the slot getnextslot
/// fills, and `result` an emptied virtual slot of `sources.len()` columns.
pub(super) unsafe fn next_direct(
    scan: pg_sys::TableScanDesc,
    forward: bool,
    decided_only: bool,
    sources: &[usize],
    scan_slot: *mut pg_sys::TupleTableSlot,
    result: *mut pg_sys::TupleTableSlot,
) -> bool {
    // SAFETY: `scan` comes from `begin_with` and is not ended (the contract); its state is borrowed for this row only.
    let st = unsafe { state(scan) };
    let (Some(bucket), Some(shape)) = (&st.current, &st.shape) else { return false };
    // SAFETY: `scan_slot` is the caller's live scan slot (the contract).
    let filled = std::ptr::eq(st.filled_slot, scan_slot) && unsafe { (*scan_slot).tts_flags } & pg_sys::TTS_FLAG_EMPTY as u16 == 0;
    if (decided_only && !st.decided) || !filled || st.options.field_outputs.is_some() {
        return false;
    }
    loop {
        let next = if forward { st.pos + 1 } else { st.pos - 1 };
        if next < 0 || next as usize >= bucket.rows {
            return false;
        }
        st.pos = next;
        let row = next as usize;
        if st.mask.as_ref().is_some_and(|m| !m[row]) {
            st.counters.rows_filtered += 1;
            continue;
        }
        // SAFETY: `scan_slot` holds a row of `bucket` (checked above), whose columns `sources` index; `result` has
        // one column per source (the contract). A value column_datum builds goes to bucket_cxt, as getnextslot's do.
        unsafe {
            let old = pg_sys::MemoryContextSwitchTo(st.bucket_cxt);
            let (to_values, to_nulls) = ((*result).tts_values, (*result).tts_isnull);
            for (j, &i) in sources.iter().enumerate() {
                let (value, isnull) = match bucket.columns[i].as_ref().filter(|_| st.varying.contains(&i)) {
                    Some(col) => rows::varying_datum(shape, col, &st.prepared, i, row),
                    None => (*(*scan_slot).tts_values.add(i), *(*scan_slot).tts_isnull.add(i)),
                };
                *to_values.add(j) = value;
                *to_nulls.add(j) = isnull;
            }
            pg_sys::MemoryContextSwitchTo(old);
            // The scan slot is the row's identity for WHERE CURRENT OF (execCurrentOf reads its ctid).
            rows::set_identity(bucket, row, scan_slot);
        }
        return true;
    }
}

/// Sets the output columns of `outputs` in `slot`, which holds row `row` of
/// `bucket`: the field's value where the cast reads it without Postgres.
/// The others need the output's expression evaluated on the row (its
/// document is decoded then: `rows::load_deferring`), for heap's value or
/// error: with `evaluate`, they are; else they are left, and the result says
/// whether there are any (the caller evaluates them once the row passes
/// the quals, as heap projects only rows that do: `evaluate_outputs`).
///
/// # Safety
/// `slot` must be the scan node's slot holding row `row` of `bucket`, with
/// the outputs' columns (its descriptor is custom_scan_tlist's).
unsafe fn fill_field_outputs(outputs: &FieldOutputs, bucket: &LoadedBucket, row: usize, slot: *mut pg_sys::TupleTableSlot, evaluate: bool) -> bool {
    use crate::scan::doc_keys::FieldCast;
    use tsbucket_format::codec::document::CastValue;
    let mut pending = false;
    for (j, o) in outputs.list.iter().enumerate() {
        let field = bucket.fields.get(o.field).and_then(Option::as_ref).filter(|f| f.len() == bucket.rows).map(|f| o.cast.of(f.get(row)));
        let (value, isnull) = match field {
            Some(CastValue::Null) => (pg_sys::Datum::from(0), true),
            // float8, int4 and int8 are passed by value.
            Some(CastValue::Float(v)) => (pg_sys::Datum::from(v.to_bits()), false),
            Some(CastValue::Int(v)) if o.cast == FieldCast::Int4 => (pg_sys::Datum::from(v as i32), false),
            Some(CastValue::Int(v)) => (pg_sys::Datum::from(v), false),
            Some(CastValue::Evaluate) | None if !evaluate => {
                pending = true;
                continue;
            }
            Some(CastValue::Evaluate) | None => {
                // Cast on no document, the expression would give NULL: a wrong answer.
                if bucket.skipped.as_ref().is_some_and(|s| s[o.column]) {
                    panic!("bucket {}: a document field to cast was read without its documents", bucket.bucket_id);
                }
                let mut isnull = false;
                // SAFETY: `o.expr` is compiled for the scan node whose ExprContext `outputs.econtext` is; its scan tuple is
                // `slot`, holding the row with its document (checked above).
                let d = unsafe {
                    (*outputs.econtext).ecxt_scantuple = slot;
                    pg_sys::ExecEvalExprSwitchContext(o.expr, outputs.econtext, &mut isnull)
                };
                (d, isnull)
            }
        };
        // SAFETY: the slot's descriptor has the outputs' columns after the table's `first` (the contract), so
        // `first + j` lies inside its values and isnull arrays.
        unsafe {
            *(*slot).tts_values.add(outputs.first + j) = value;
            *(*slot).tts_isnull.add(outputs.first + j) = isnull;
        }
    }
    pending
}

/// Whether the row getnextslot returned last has output columns left to
/// evaluate (`fill_field_outputs`).
///
/// # Safety
/// `scan` must come from `begin_with`.
pub(super) unsafe fn outputs_pending(scan: pg_sys::TableScanDesc) -> bool {
    // SAFETY: `scan` comes from `begin_with` and is not ended (the contract).
    unsafe { state(scan) }.outputs_pending
}

/// Evaluates the output columns left pending in `slot`, which holds the row
/// getnextslot returned last.
///
/// # Safety
/// `scan` must come from `begin_with`; `slot` the slot getnextslot filled.
pub(super) unsafe fn evaluate_outputs(scan: pg_sys::TableScanDesc, slot: *mut pg_sys::TupleTableSlot) {
    // SAFETY: `scan` comes from `begin_with` and is not ended (the contract).
    let st = unsafe { state(scan) };
    if let (Some(outputs), Some(bucket)) = (&st.options.field_outputs, &st.current) {
        // SAFETY: `slot` holds row `st.pos` of the current bucket (getnextslot returned it last: the contract).
        unsafe { fill_field_outputs(outputs, bucket, st.pos as usize, slot, true) };
    }
    st.outputs_pending = false;
}

/// Whether the vector filter's mask decided every condition it holds in
/// the current bucket (`BucketRows::decided`).
///
/// # Safety
/// `scan` must come from `begin_with`.
pub(super) unsafe fn current_decided(scan: pg_sys::TableScanDesc) -> bool {
    // SAFETY: `scan` comes from `begin_with` and is not ended (the contract).
    let st = unsafe { state(scan) };
    st.current.is_some() && st.decided
}

/// One bucket for a consumer of whole buckets (the in-scan aggregation): its
/// decoded columns, prepared datums and the rows that pass the row filters.
pub(super) struct BucketRows<'a> {
    pub bucket: &'a LoadedBucket,
    pub prepared: &'a rows::Prepared,
    pub shape: &'a TableShape,
    /// Rows passing every row filter, ascending.
    pub selected: Vec<u32>,
    /// Whether the vector filter decided every condition it holds on these
    /// rows (`ScanOptions::unread_when_decided`): they need not run again.
    pub decided: bool,
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
    // SAFETY: `scan` comes from `begin_with` and only this function reads it (next_bucket_or_header's contract).
    let st = unsafe { state(scan) };
    st.config.as_ref()?;
    // SAFETY: the table is configured (checked just above), so begin_with opened the store and its scan, open until `end`.
    match unsafe { advance_bucket_or_header(st, true, Some(answerable)) } {
        Advanced::End => return None,
        Advanced::Header => return Some(NextBucket::Header),
        Advanced::Rows => {}
    }
    let bucket = st.current.as_ref().expect("advance_bucket set it");
    let mask = st.mask.as_deref();
    let selected: Vec<u32> = (0..bucket.rows)
        .filter(|&r| mask.is_none_or(|m| m[r]))
        .map(|r| r as u32)
        .collect();
    st.counters.rows_filtered += (bucket.rows - selected.len()) as u64;
    Some(NextBucket::Rows(BucketRows { bucket, prepared: &st.prepared, shape: st.shape.as_ref().expect("configured"), selected, decided: st.decided }))
}

/// How the scan reaches the store's buckets.
///
/// # Safety
/// `scan` must come from `begin_with`.
pub(super) unsafe fn access_taken(scan: pg_sys::TableScanDesc) -> Access {
    // SAFETY: `scan` comes from `begin_with` and is not ended yet (access_taken's contract); the Access is cloned out.
    unsafe { state(scan).access.clone() }
}

/// # Safety
/// `scan` must come from `begin_with`.
pub(super) unsafe fn counters(scan: pg_sys::TableScanDesc) -> ScanCounters {
    // SAFETY: `scan` comes from `begin_with` and its state is still in scan_cxt (the caller reads counters before `end`).
    unsafe { state(scan).counters }
}
