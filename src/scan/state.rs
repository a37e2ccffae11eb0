//! A TsBucketScan's executor state: what it decided at begin (decoded
//! columns, conditions, mode), the scan running now, its counters, and the
//! shared counters of a parallel scan; ending the running scan.

use crate::catalog::config;
use crate::scan::access::Access;
use crate::scan::aggregating::{AggCounters, AggregatingScan};
use crate::scan::last_point::LastPointScan;
use crate::scan::ordered::OrderedScan;
use crate::scan::quals::Candidate;
use pgrx::pg_sys;
use std::rc::Rc;

#[repr(C)]
pub(super) struct TsBucketScanState {
    pub css: pg_sys::CustomScanState,
    /// In the executor's query context: freed with it on ERROR.
    pub state: *mut crate::pg::memory::Owned<ExecState>,
    /// NULL, or how `exec` copies the output columns (`project`); held apart
    /// from `state`, which the access method borrows per row.
    pub direct: *mut crate::pg::memory::Owned<crate::scan::project::DirectProjection>,
}

pub(super) struct ExecState {
    /// Quals on meta columns alone, a slot to run them on a bucket's meta values (`prune::Prune::MetaQual`), their
    /// List (EXPLAIN), and the table's meta attnums (the store's meta column order).
    pub meta_qual: Option<(*mut pg_sys::ExprState, *mut pg_sys::TupleTableSlot, *mut pg_sys::List, Vec<i16>)>,
    pub needed: Option<Vec<bool>>,
    /// Documents the query reads only some top-level keys of (`doc_keys`).
    pub doc_keys: std::rc::Rc<crate::store::rows::DocKeys>,
    pub candidates: Vec<Candidate>,
    pub scan: pg_sys::TableScanDesc,
    pub totals: crate::scan::plain::ScanCounters,
    /// How the last scan reached the store (EXPLAIN ANALYZE).
    pub access: Option<Access>,
    /// MODE_LAST_POINT: one row per series, from `last_point` (begun lazily).
    pub last_point_mode: bool,
    pub last_point: Option<LastPointScan>,
    /// MODE_TIME_ORDER: Some(descending); rows from `ordered` (begun lazily).
    pub time_order: Option<bool>,
    /// MODE_TIME_ORDER with rows of equal time in meta order: Some(meta descending).
    pub meta_ties: Option<bool>,
    /// MODE_SERIES_ORDER: Some(descending); rows from `ordered` too.
    pub series_order: Option<bool>,
    pub ordered: Option<OrderedScan>,
    /// MODE_PARTIAL_AGG: what to compute; partial rows from `aggregating`.
    pub partial_agg: Option<PartialAggExec>,
    pub aggregating: Option<AggregatingScan>,
    pub agg_totals: AggCounters,
    /// A parallel scan's shared state (set when the Gather's DSM is made, or
    /// in a worker): the counters every participant adds to, and the store's
    /// parallel heap scan. None: this participant reads every bucket.
    pub shared: Option<*mut SharedScan>,
    /// This participant's share of a parallel scan was read (until a rescan).
    pub parallel_done: bool,
    /// Quals evaluated on the decoded arrays (`scan::vector_filter`), and their clauses.
    pub vector_quals: Vec<(*mut std::ffi::c_void, crate::scan::vector_filter::VectorPlan)>,
    /// The document fields the scan reads from their sub-columns: those the
    /// vector filters compare, then those the aggregates read.
    pub doc_fields: std::rc::Rc<crate::store::rows::DocFields>,
    /// What one scan (until a rescan) allocates: evaluated conditions, the
    /// scans' own state. Reset when the scan finishes, so that rescans (a
    /// nested loop's inner side) do not accumulate it in the query's context.
    pub scan_cxt: pg_sys::MemoryContext,
    /// Plain and ordered scans of a read-only statement: the quals pruning and
    /// the row filters do not decide (`residual`), run by ExecScan instead of
    /// every qual (`all`) when every pruning value is known.
    pub scan_quals: Option<crate::scan::aggregating::Quals>,
    /// A plain scan's output columns read from document fields.
    pub field_outputs: Option<Rc<crate::scan::plain::FieldOutputs>>,
    /// A plain scan's document columns a decided bucket need not build
    /// (`ScanOptions::unread_when_decided`).
    pub plain_unread: Vec<usize>,
    /// A plain scan's qual, set per row (`scan_quals.decided` in decided buckets).
    pub qual_switch: Option<QualSwitch>,
}

pub(super) struct PartialAggExec {
    pub keys: Rc<Vec<crate::scan::aggregating::Key>>,
    pub aggs: Rc<Vec<crate::scan::agg_plan::AggPlan>>,
    pub quals: crate::scan::aggregating::Quals,
    /// The quals, for EXPLAIN.
    pub qual_list: *mut pg_sys::List,
    /// The document fields the aggregates read as numbers.
    pub fields: Rc<crate::store::rows::DocFields>,
    /// Per aggregate: its argument compiled, for a field argument (else NULL).
    pub field_exprs: Rc<Vec<*mut pg_sys::ExprState>>,
    /// The jsonb columns (attnum - 1) only field arguments read.
    pub fields_only: Vec<usize>,
    /// Those only field arguments and the vector filter's conditions read
    /// (`ScanOptions::unread_when_decided`).
    pub unread_when_decided: Vec<usize>,
}

impl ExecState {
    /// The quals a plain scan's row needs, with a qual switch: every qual
    /// unless every pruning value is known; then those pruning does not
    /// decide, without the vector filter's where the row's bucket is decided
    /// (`decided_bucket`).
    pub fn row_qual(&self, decided_bucket: bool) -> *mut pg_sys::ExprState {
        let Some(switch) = &self.qual_switch else { return std::ptr::null_mut() };
        match &self.scan_quals {
            Some(q) if switch.exact.get() => match q.decided {
                Some((decided, _)) if decided_bucket => decided,
                _ => q.residual,
            },
            _ => switch.all,
        }
    }

    /// A finished scan's counters: into the shared ones when the scan is
    /// parallel (the leader collects them at shutdown), else its own.
    pub fn add_counters(&mut self, scan: crate::scan::plain::ScanCounters, agg: AggCounters) {
        match self.shared {
            // SAFETY: `shared` points into the Gather's DSM segment (initialize_dsm / initialize_worker), which stays mapped
            // until after this participant's last scan has ended.
            Some(shared) => unsafe { (*shared).add(scan, agg) },
            None => {
                self.totals += scan;
                self.agg_totals.rows_aggregated += agg.rows_aggregated;
                self.agg_totals.partial_rows += agg.partial_rows;
                self.agg_totals.rows_removed_by_filter += agg.rows_removed_by_filter;
            }
        }
    }
}

/// The shared memory of a parallel TsBucketScan: counters, then (aligned)
/// the store's ParallelTableScanDesc.
#[repr(C)]
pub(super) struct SharedScan {
    counters: [std::sync::atomic::AtomicU64; 10],
    /// Set by the participant that reads the table's tail (one of them does).
    pub tail_claim: std::sync::atomic::AtomicU32,
}

impl SharedScan {
    pub const HEADER: usize = (std::mem::size_of::<SharedScan>() + 15) & !15;

    pub unsafe fn store_scan(shared: *mut SharedScan) -> pg_sys::ParallelTableScanDesc {
        // SAFETY: `shared` is the start of the DSM chunk estimate_dsm sized as HEADER plus the store's parallel scan, so
        // the offset stays inside that chunk.
        unsafe { (shared as *mut u8).add(Self::HEADER) as pg_sys::ParallelTableScanDesc }
    }

    pub fn add(&self, scan: crate::scan::plain::ScanCounters, agg: AggCounters) {
        use std::sync::atomic::Ordering::Relaxed;
        let values = [
            scan.buckets_read,
            scan.buckets_skipped,
            scan.rows_filtered,
            scan.buckets_from_headers,
            scan.payload_bytes,
            agg.rows_aggregated,
            agg.partial_rows,
            agg.rows_removed_by_filter,
            scan.decoded_bytes,
            scan.tail_rows,
        ];
        for (c, v) in self.counters.iter().zip(values) {
            c.fetch_add(v, Relaxed);
        }
    }

    pub fn take(&self) -> (crate::scan::plain::ScanCounters, AggCounters) {
        use std::sync::atomic::Ordering::Relaxed;
        let v: Vec<u64> = self.counters.iter().map(|c| c.swap(0, Relaxed)).collect();
        let scan = crate::scan::plain::ScanCounters { buckets_read: v[0], buckets_skipped: v[1], rows_filtered: v[2], buckets_from_headers: v[3], payload_bytes: v[4], decoded_bytes: v[8], tail_rows: v[9] };
        let agg = AggCounters { rows_aggregated: v[5], partial_rows: v[6], rows_removed_by_filter: v[7] };
        (scan, agg)
    }
}

/// The store relation of the scan's table (opened and closed again: the
/// scan itself holds a lock on it while it runs).
pub(super) unsafe fn with_store<R>(node: *mut pg_sys::CustomScanState, f: impl FnOnce(pg_sys::Relation) -> R) -> R {
    // SAFETY: `node` is a begun TsBucketScanState; the executor keeps its scan relation open until EndCustomScan.
    let relid = unsafe { (*(*node).ss.ss_currentRelation).rd_id };
    let config = config::require(relid);
    // SAFETY: table_open takes AccessShareLock on the store `config.store_relid`; the relation stays open while `f` runs.
    let store = unsafe { pg_sys::table_open(config.store_relid, pg_sys::AccessShareLock as i32) };
    let r = f(store);
    // SAFETY: `store` is the relation opened above, which `f` only used; the lock stays until the transaction ends.
    unsafe { pg_sys::table_close(store, pg_sys::NoLock as i32) };
    r
}

/// The node's Rust state.
///
/// # Safety
/// `node` must be a begun, not yet ended TsBucketScanState. The reference is
/// unbounded: callers hold one at a time (each call site lets the previous
/// borrow end before it borrows again), never across a call that borrows it.
pub(super) unsafe fn exec_state<'a>(node: *mut pg_sys::CustomScanState) -> &'a mut ExecState {
    // SAFETY: `node` is a TsBucketScanState whose `state` holder `begin` put in the query context, its value not yet
    // taken by `end` (this function's callers run between the two).
    unsafe { crate::pg::memory::owned_mut((*(node as *mut TsBucketScanState)).state) }
}

pub(super) unsafe fn finish_scan(node: *mut pg_sys::CustomScanState) {
    // SAFETY: `node` is begun and not yet ended, so its ExecState is still in the query context's holder.
    let st = unsafe { exec_state(node) };
    // ExecScan reads the qual before fetching the first row of a new scan,
    // which is when the residual one may replace it again (start_scan).
    // A qual switch stays the node's qual (ExecScan reads it before
    // start_scan runs again): every qual until the scan knows more.
    match (&st.qual_switch, &st.scan_quals) {
        (Some(switch), _) => {
            switch.set(switch.all);
            switch.exact.set(false);
            // SAFETY: `node.ss.ps.qual` is the qual ExecScan runs for this node; the switch was made for it in begin.
            unsafe { (*node).ss.ps.qual = switch.state };
        }
        // SAFETY: `node.ss.ps.qual` is the qual ExecScan runs for this node; `q.all` was compiled for it in begin.
        (None, Some(q)) => unsafe { (*node).ss.ps.qual = q.all },
        (None, None) => {}
    }
    if let Some(lp) = st.last_point.take() {
        st.totals += lp.counters;
        // SAFETY: `lp` is the last-point scan start_scan began, taken out of the state so it is ended exactly once.
        unsafe { lp.end() };
    }
    if let Some(o) = st.ordered.take() {
        st.totals += o.counters;
        // SAFETY: `o` is the ordered scan start_scan began (time or series order), taken out of the state and ended once.
        unsafe { o.end() };
    }
    if let Some(a) = st.aggregating.take() {
        // SAFETY: `a` is the aggregating scan start_scan began; its buckets and relations are still open before `end`.
        st.access = Some(unsafe { a.access_taken() });
        // SAFETY: `a` was taken out of the state, so AggregatingScan::end closes its store scan exactly once.
        let (scan, agg) = unsafe { a.end() };
        st.add_counters(scan, agg);
    }
    if !st.scan.is_null() {
        // SAFETY: `st.scan` is the descriptor plain::begin_with made in `scan_cxt`, not yet ended.
        let counters = unsafe { crate::scan::plain::counters(st.scan) };
        st.add_counters(counters, AggCounters::default());
        // SAFETY: `st.scan` is still that open plain scan descriptor; access_taken only reads it.
        st.access = Some(unsafe { crate::scan::plain::access_taken(st.scan) });
        // SAFETY: plain::end closes the plain scan `st.scan` once; the field is nulled right after.
        unsafe { crate::scan::plain::end(st.scan) };
        st.scan = std::ptr::null_mut();
    }
    // Every scan above is ended: what they and the conditions allocated goes.
    // SAFETY: `st.scan_cxt` is the per-scan child context begin created; every scan allocating in it has just ended.
    unsafe { pg_sys::MemoryContextReset(st.scan_cxt) };
}

/// The qual ExecScan runs on a plain scan's rows when some buckets need
/// fewer quals than others: an ExprState of its own evaluation function
/// that runs whichever qual `set` chose last. ExecScan reads its qual once
/// per call, across rows of several buckets; the switch lets `next` choose
/// per row.
pub(super) struct QualSwitch {
    pub state: *mut pg_sys::ExprState,
    /// The qual it runs (NULL: none, true).
    target: *mut *mut pg_sys::ExprState,
    /// Every qual of the node (what it replaced as the node's qual).
    pub all: *mut pg_sys::ExprState,
    /// Whether this scan's pruning values are all known (decided buckets then run fewer quals).
    pub exact: std::cell::Cell<bool>,
}

impl QualSwitch {
    /// # Safety
    /// Allocates in CurrentMemoryContext, which must outlive the node's execution.
    pub(super) unsafe fn new(initial: *mut pg_sys::ExprState) -> QualSwitch {
        // SAFETY: palloc0 in CurrentMemoryContext (the contract) returns zeroed memory for an ExprState and the target cell;
        // the ExprState is a node with only its tag, flags and evaluation function set, which is all ExecQual reads.
        unsafe {
            let target = pg_sys::palloc0(std::mem::size_of::<*mut pg_sys::ExprState>()) as *mut *mut pg_sys::ExprState;
            *target = initial;
            let state = pg_sys::palloc0(std::mem::size_of::<pg_sys::ExprState>()) as *mut pg_sys::ExprState;
            (*state).type_ = pg_sys::NodeTag::T_ExprState;
            (*state).flags = pg_sys::EEO_FLAG_IS_QUAL as u8;
            (*state).evalfunc = Some(run_switched);
            (*state).evalfunc_private = target as *mut std::ffi::c_void;
            QualSwitch { state, target, all: initial, exact: std::cell::Cell::new(false) }
        }
    }

    pub fn set(&self, qual: *mut pg_sys::ExprState) {
        // SAFETY: `target` was palloc'd with the switch in the query context and is read only by run_switched.
        unsafe { *self.target = qual };
    }
}

// No #[pg_guard]: like `exec`, this frame holds nothing to drop, and an
// error of the qual it runs passes through it as through ExecQual.
unsafe extern "C-unwind" fn run_switched(state: *mut pg_sys::ExprState, econtext: *mut pg_sys::ExprContext, isnull: *mut bool) -> pg_sys::Datum {
    // SAFETY: `state` is a QualSwitch's ExprState, whose private field is its target cell; ExecQual passes a valid `isnull`.
    unsafe {
        let qual = *((*state).evalfunc_private as *mut *mut pg_sys::ExprState);
        if qual.is_null() {
            *isnull = false;
            return pg_sys::Datum::from(true);
        }
        (*qual).evalfunc.expect("a compiled qual has its evaluation function")(qual, econtext, isnull)
    }
}
