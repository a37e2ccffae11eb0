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
}

pub(super) struct ExecState {
    pub needed: Option<Vec<bool>>,
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
    /// Quals evaluated on the decoded arrays (`am::vector_filter`), and their clauses.
    pub vector_quals: Vec<(*mut std::ffi::c_void, crate::scan::vector_filter::VectorPlan)>,
    /// What one scan (until a rescan) allocates: evaluated conditions, the
    /// scans' own state. Reset when the scan finishes, so that rescans (a
    /// nested loop's inner side) do not accumulate it in the query's context.
    pub scan_cxt: pg_sys::MemoryContext,
    /// Plain and ordered scans of a read-only statement: the quals pruning and
    /// the row filters do not decide (`residual`), run by ExecScan instead of
    /// every qual (`all`) when every pruning value is known.
    pub scan_quals: Option<crate::scan::aggregating::Quals>,
}

pub(super) struct PartialAggExec {
    pub keys: Rc<Vec<crate::scan::aggregating::Key>>,
    pub aggs: Rc<Vec<crate::scan::agg_plan::AggPlan>>,
    pub quals: crate::scan::aggregating::Quals,
    /// The quals, for EXPLAIN.
    pub qual_list: *mut pg_sys::List,
}

impl ExecState {
    /// A finished scan's counters: into the shared ones when the scan is
    /// parallel (the leader collects them at shutdown), else its own.
    pub fn add_counters(&mut self, scan: crate::scan::plain::ScanCounters, agg: AggCounters) {
        match self.shared {
            // SAFETY: the DSM segment outlives every participant's scan.
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
    counters: [std::sync::atomic::AtomicU64; 9],
}

impl SharedScan {
    pub const HEADER: usize = (std::mem::size_of::<SharedScan>() + 15) & !15;

    pub unsafe fn store_scan(shared: *mut SharedScan) -> pg_sys::ParallelTableScanDesc {
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
        ];
        for (c, v) in self.counters.iter().zip(values) {
            c.fetch_add(v, Relaxed);
        }
    }

    pub fn take(&self) -> (crate::scan::plain::ScanCounters, AggCounters) {
        use std::sync::atomic::Ordering::Relaxed;
        let v: Vec<u64> = self.counters.iter().map(|c| c.swap(0, Relaxed)).collect();
        let scan = crate::scan::plain::ScanCounters { buckets_read: v[0], buckets_skipped: v[1], rows_filtered: v[2], buckets_from_headers: v[3], payload_bytes: v[4], decoded_bytes: v[8] };
        let agg = AggCounters { rows_aggregated: v[5], partial_rows: v[6], rows_removed_by_filter: v[7] };
        (scan, agg)
    }
}

/// The store relation of the scan's table (opened and closed again: the
/// scan itself holds a lock on it while it runs).
pub(super) unsafe fn with_store<R>(node: *mut pg_sys::CustomScanState, f: impl FnOnce(pg_sys::Relation) -> R) -> R {
    unsafe {
        let config = config::require((*(*node).ss.ss_currentRelation).rd_id);
        let store = pg_sys::table_open(config.store_relid, pg_sys::AccessShareLock as i32);
        let r = f(store);
        pg_sys::table_close(store, pg_sys::NoLock as i32);
        r
    }
}

pub(super) unsafe fn exec_state<'a>(node: *mut pg_sys::CustomScanState) -> &'a mut ExecState {
    unsafe { crate::pg::memory::owned_mut((*(node as *mut TsBucketScanState)).state) }
}

pub(super) unsafe fn finish_scan(node: *mut pg_sys::CustomScanState) {
    unsafe {
        let st = exec_state(node);
        // ExecScan reads the qual before fetching the first row of a new scan,
        // which is when the residual one may replace it again (start_scan).
        if let Some(q) = &st.scan_quals {
            (*node).ss.ps.qual = q.all;
        }
        if let Some(lp) = st.last_point.take() {
            st.totals += lp.counters;
            lp.end();
        }
        if let Some(o) = st.ordered.take() {
            st.totals += o.counters;
            o.end();
        }
        if let Some(a) = st.aggregating.take() {
            st.access = Some(a.access_taken());
            let (scan, agg) = a.end();
            st.add_counters(scan, agg);
        }
        if !st.scan.is_null() {
            st.add_counters(crate::scan::plain::counters(st.scan), AggCounters::default());
            st.access = Some(crate::scan::plain::access_taken(st.scan));
            crate::scan::plain::end(st.scan);
            st.scan = std::ptr::null_mut();
        }
        // Every scan above is ended: what they and the conditions allocated goes.
        pg_sys::MemoryContextReset(st.scan_cxt);
    }
}
