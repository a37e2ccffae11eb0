//! The TsBucketScan executor: its method tables, begin (what to decode and
//! which conditions prune), starting the scan its mode asks for, returning
//! rows, rescans and the end.

use crate::catalog::config::{self, Config};
use crate::pg::nodes::{list_ptrs, strip};
use crate::scan::aggregating::{AggCounters, AggregatingScan};
use crate::scan::explain::explain;
use crate::scan::last_point::LastPointScan;
use crate::scan::ordered::OrderedScan;
use crate::scan::parallel::{estimate_dsm, initialize_dsm, initialize_worker, reinitialize_dsm, shutdown};
use crate::scan::plain::ScanOptions;
use crate::scan::plan::{MODE_LAST_POINT, MODE_PARTIAL_AGG, MODE_SCAN, MODE_SERIES_ORDER, MODE_TIME_ORDER};
use crate::scan::quals::{evaluate, find_candidates};
use crate::scan::state::{ExecState, PartialAggExec, SharedScan, TsBucketScanState, exec_state, finish_scan};
use pgrx::pg_sys;
use pgrx::prelude::*;
use std::rc::Rc;
use std::sync::OnceLock;

pub(super) struct Methods {
    pub plan: pg_sys::CustomScanMethods,
    exec: pg_sys::CustomExecMethods,
}

// Backends are single-threaded; the tables are immutable once built.
unsafe impl Sync for Methods {}

unsafe impl Send for Methods {}

static METHODS: OnceLock<Methods> = OnceLock::new();

pub(super) fn methods() -> &'static Methods {
    METHODS.get_or_init(|| Methods {
        plan: pg_sys::CustomScanMethods { CustomName: c"TsBucketScan".as_ptr(), CreateCustomScanState: Some(create_state) },
        exec: pg_sys::CustomExecMethods {
            CustomName: c"TsBucketScan".as_ptr(),
            BeginCustomScan: Some(begin),
            ExecCustomScan: Some(exec),
            EndCustomScan: Some(end),
            ReScanCustomScan: Some(rescan),
            ExplainCustomScan: Some(explain),
            EstimateDSMCustomScan: Some(estimate_dsm),
            InitializeDSMCustomScan: Some(initialize_dsm),
            ReInitializeDSMCustomScan: Some(reinitialize_dsm),
            InitializeWorkerCustomScan: Some(initialize_worker),
            ShutdownCustomScan: Some(shutdown),
            ..Default::default()
        },
    })
}

/// Whether `cscan` is a TsBucketScan.
pub fn is_ours(cscan: *mut pg_sys::CustomScan) -> bool {
    // SAFETY: the caller passes a CustomScan node.
    unsafe { std::ptr::eq((*cscan).methods, &methods().plan) }
}

#[pg_guard]
unsafe extern "C-unwind" fn create_state(cscan: *mut pg_sys::CustomScan) -> *mut pg_sys::Node {
    unsafe {
        let node = pg_sys::palloc0(std::mem::size_of::<TsBucketScanState>()) as *mut TsBucketScanState;
        (*node).css.ss.ps.type_ = pg_sys::NodeTag::T_CustomScanState;
        (*node).css.flags = (*cscan).flags;
        (*node).css.methods = &methods().exec;
        // Rows of the table carry their bucket version (system columns).
        #[cfg(not(feature = "pg15"))]
        {
            (*node).css.slotOps = crate::store::slot::ops();
        }
        node as *mut pg_sys::Node
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn begin(node: *mut pg_sys::CustomScanState, estate: *mut pg_sys::EState, eflags: i32) {
    unsafe {
        let rel = (*node).ss.ss_currentRelation;
        // PostgreSQL 15 gives every custom scan a virtual scan slot (16 on take
        // css.slotOps): ours is a virtual slot that also knows its row's bucket
        // version, so the plan's expressions, compiled for a virtual slot, read
        // it alike, and system columns from it.
        #[cfg(feature = "pg15")]
        if (*((*node).ss.ps.plan as *mut pg_sys::CustomScan)).custom_scan_tlist.is_null() {
            let tupdesc = (*(*node).ss.ss_ScanTupleSlot).tts_tupleDescriptor;
            (*node).ss.ss_ScanTupleSlot = pg_sys::ExecAllocTableSlot(&mut (*estate).es_tupleTable, tupdesc, crate::store::slot::ops());
        }
        #[cfg(not(feature = "pg15"))]
        let _ = estate;
        let config = config::require((*rel).rd_id);
        let cscan = (*node).ss.ps.plan as *mut pg_sys::CustomScan;
        let natts = (*(*rel).rd_att).natts as usize;
        let private: Vec<i32> = list_ptrs((*cscan).custom_private).iter().map(|p| (*(*p as *mut pg_sys::Integer)).ival).collect();
        let [mode, arg, attnums @ ..] = private.as_slice() else { panic!("custom_private starts with the mode and its argument") };
        let last_point_mode = *mode == MODE_LAST_POINT;
        let time_order = (*mode == MODE_TIME_ORDER).then_some(*arg & 1 == 1);
        let meta_ties = (*mode == MODE_TIME_ORDER && *arg & 2 != 0).then_some(*arg & 4 != 0);
        let series_order = (*mode == MODE_SERIES_ORDER).then_some(*arg == 1);
        let needed = if attnums.contains(&-1) {
            None
        } else {
            let mut mask = vec![false; natts];
            attnums.iter().filter(|&&a| a >= 1 && (a as usize) <= natts).for_each(|&a| mask[a as usize - 1] = true);
            if last_point_mode || time_order.is_some() || series_order.is_some() {
                // Rows are ranked by time even when the query does not read it.
                mask[config.time_attnum as usize - 1] = true;
            }
            Some(mask)
        };
        let quals = if *mode == MODE_PARTIAL_AGG { (*cscan).custom_exprs } else { (*(*node).ss.ps.plan).qual };
        let candidates = find_candidates(node, &config, (*cscan).scan.scanrelid, quals);
        // Other quals the scan can evaluate on the decoded arrays (plain scans and
        // aggregation; ordered and last-point scans leave them to the executor).
        let vector_quals: Vec<(*mut std::ffi::c_void, crate::scan::vector_filter::VectorPlan)> = if matches!(*mode, MODE_SCAN | MODE_PARTIAL_AGG) {
            list_ptrs(quals)
                .into_iter()
                .filter(|q| !candidates.iter().any(|c| std::ptr::eq(c.clause as *mut std::ffi::c_void, *q)))
                .filter_map(|q| {
                    let plan = crate::scan::vector_filter::plan(q as *mut pg_sys::Node, rel, (*cscan).scan.scanrelid, &config.meta_attnums, &mut (*node).ss.ps)?;
                    Some((q, plan))
                })
                .collect()
        } else {
            Vec::new()
        };
        let mut decided: Vec<*mut std::ffi::c_void> = candidates.iter().map(|c| c.clause as *mut std::ffi::c_void).collect();
        decided.extend(vector_quals.iter().map(|(q, _)| *q));
        let needed = match needed {
            // The filters' columns are decoded even when the query reads them nowhere else.
            Some(mut mask) => {
                for (_, v) in &vector_quals {
                    v.attrs().into_iter().for_each(|a| mask[a] = true);
                }
                Some(mask)
            }
            None => None,
        };
        let partial_agg = (*mode == MODE_PARTIAL_AGG).then(|| partial_agg_exec(node, &config, cscan, *arg as usize, &decided));
        // Not where a row may be rechecked after a concurrent update (EvalPlanQual
        // re-runs the quals on the new version, which pruning never saw).
        let command = (*(*(*node).ss.ps.state).es_plannedstmt).commandType;
        let read_only = matches!(command, pg_sys::CmdType::CMD_SELECT | pg_sys::CmdType::CMD_INSERT);
        let scan_quals = (read_only
            && matches!(*mode, MODE_SCAN | MODE_TIME_ORDER | MODE_SERIES_ORDER)
            && !decided.is_empty()
            && !pg_sys::contain_subplans(quals as *mut pg_sys::Node))
            .then(|| crate::scan::aggregating::Quals { all: (*node).ss.ps.qual, residual: residual_qual(node, quals, &decided) });
        let state = ExecState {
            needed,
            candidates,
            scan: std::ptr::null_mut(),
            totals: Default::default(),
            access: None,
            last_point_mode,
            last_point: None,
            time_order,
            meta_ties,
            series_order,
            ordered: None,
            partial_agg,
            aggregating: None,
            agg_totals: AggCounters::default(),
            shared: None,
            parallel_done: false,
            vector_quals,
            scan_cxt: pg_sys::AllocSetContextCreateInternal(pg_sys::CurrentMemoryContext, c"TsBucketScan per scan".as_ptr(), 0, 1024, 8 * 1024),
            scan_quals,
        };
        // A parallel plan's workers read the store as the leader wrote it: rows
        // this transaction buffered go there before they start (and before the
        // executor enters parallel mode, which forbids writes).
        if (*(*(*node).ss.ps.state).es_plannedstmt).parallelModeNeeded && eflags & pg_sys::EXEC_FLAG_EXPLAIN_ONLY as i32 == 0 {
            crate::scan::plain::write_buffered_rows(rel, (*(*node).ss.ps.state).es_snapshot);
        }
        (*(node as *mut TsBucketScanState)).state = crate::pg::memory::own_in_context(pg_sys::CurrentMemoryContext, state);
    }
}

/// What the in-scan aggregation computes, from the plan `partial_agg` rewrote.
unsafe fn partial_agg_exec(node: *mut pg_sys::CustomScanState, config: &Config, cscan: *mut pg_sys::CustomScan, nkeys: usize, decided: &[*mut std::ffi::c_void]) -> PartialAggExec {
    unsafe {
        let rel = (*node).ss.ss_currentRelation;
        let scanrelid = (*cscan).scan.scanrelid;
        let ps = &mut (*node).ss.ps as *mut pg_sys::PlanState;
        let mut keys = Vec::new();
        let mut aggs = Vec::new();
        for (i, te) in list_ptrs((*cscan).custom_scan_tlist).into_iter().enumerate() {
            let e = (*(te as *mut pg_sys::TargetEntry)).expr as *mut pg_sys::Node;
            let broken = || -> ! { panic!("TsBucketScan: a partial aggregation plan this build cannot run (column {})", i + 1) };
            if i < nkeys {
                let plan = crate::scan::agg_plan::classify_key(e, config, scanrelid).unwrap_or_else(|| broken());
                let expr = if plan == crate::scan::agg_plan::KeyPlan::TimeBucket { pg_sys::ExecInitExpr(e as *mut pg_sys::Expr, ps) } else { std::ptr::null_mut() };
                keys.push(crate::scan::aggregating::Key { plan, expr });
            } else {
                let aggref = e as *mut pg_sys::Aggref;
                let args: Vec<*mut pg_sys::Node> = list_ptrs((*aggref).args).into_iter().map(|te| strip((*(te as *mut pg_sys::TargetEntry)).expr as *mut pg_sys::Node)).collect();
                aggs.push(crate::scan::agg_plan::classify_aggref(aggref, &args, config, rel, scanrelid).unwrap_or_else(|| broken()));
            }
        }
        let qual_list = (*cscan).custom_exprs;
        let quals = if pg_sys::contain_subplans(qual_list as *mut pg_sys::Node) {
            // Compiled once (a SubPlan registers with the node when compiled): every qual per row.
            let all = pg_sys::ExecInitQual(qual_list, ps);
            crate::scan::aggregating::Quals { all, residual: all }
        } else {
            crate::scan::aggregating::Quals { all: pg_sys::ExecInitQual(qual_list, ps), residual: residual_qual(node, qual_list, decided) }
        };
        PartialAggExec { keys: Rc::new(keys), aggs: Rc::new(aggs), quals, qual_list }
    }
}

/// The quals the candidates do not decide (those they decide, when their
/// values are known, need no row-by-row check), ready to run.
unsafe fn residual_qual(node: *mut pg_sys::CustomScanState, quals: *mut pg_sys::List, decided: &[*mut std::ffi::c_void]) -> *mut pg_sys::ExprState {
    unsafe {
        let mut residual: *mut pg_sys::List = std::ptr::null_mut();
        for q in list_ptrs(quals) {
            if !decided.iter().any(|d| std::ptr::eq(*d, q)) {
                residual = pg_sys::lappend(residual, q);
            }
        }
        pg_sys::ExecInitQual(residual, &mut (*node).ss.ps)
    }
}

unsafe fn start_scan(node: *mut pg_sys::CustomScanState) {
    unsafe {
        let old = pg_sys::MemoryContextSwitchTo(exec_state(node).scan_cxt);
        start_scan_in_context(node);
        pg_sys::MemoryContextSwitchTo(old);
    }
}

unsafe fn start_scan_in_context(node: *mut pg_sys::CustomScanState) {
    unsafe {
        let st = exec_state(node);
        let rel = (*node).ss.ss_currentRelation;
        let (prune, exact) = evaluate(node, &st.candidates, st.scan_cxt);
        let estate = (*node).ss.ps.state;
        let vector_filter = (!st.vector_quals.is_empty()).then(|| {
            let econtext = (*node).ss.ps.ps_ExprContext;
            let tupdesc = (*rel).rd_att;
            let bound: Vec<_> = st.vector_quals.iter().map(|(_, p)| p.bind(econtext, tupdesc)).collect();
            std::rc::Rc::new(crate::scan::vector_filter::VectorFilter::all(bound))
        });
        if let Some(q) = &st.scan_quals {
            (*node).ss.ps.qual = if exact { q.residual } else { q.all };
        }
        if let Some(pa) = &st.partial_agg {
            let options = ScanOptions { needed: st.needed.clone(), prune, store_parallel: st.shared.map(|s| SharedScan::store_scan(s)), vector_filter };
            let econtext = (*node).ss.ps.ps_ExprContext;
            st.aggregating = Some(AggregatingScan::begin(rel, (*estate).es_snapshot, options, pa.keys.clone(), pa.aggs.clone(), &pa.quals, exact, econtext));
            return;
        }
        if st.last_point_mode {
            let config = config::require((*rel).rd_id);
            let store = pg_sys::table_open(config.store_relid, pg_sys::AccessShareLock as i32);
            let index = crate::scan::access::require_series_index(store, &config);
            pg_sys::table_close(store, pg_sys::NoLock as i32);
            st.last_point = Some(LastPointScan::begin(rel, (*estate).es_snapshot, index, st.needed.clone(), prune));
            return;
        }
        if let Some(descending) = st.time_order {
            st.ordered = Some(OrderedScan::begin(rel, (*estate).es_snapshot, descending, st.meta_ties, st.needed.clone(), prune));
            return;
        }
        if let Some(descending) = st.series_order {
            st.ordered = Some(OrderedScan::begin_series_order(rel, (*estate).es_snapshot, descending, st.needed.clone(), prune));
            return;
        }
        let options = ScanOptions { needed: st.needed.clone(), prune, store_parallel: st.shared.map(|s| SharedScan::store_scan(s)), vector_filter };
        st.scan = crate::scan::plain::begin_with(rel, (*estate).es_snapshot, 0, std::ptr::null_mut(), std::ptr::null_mut(), 0, options);
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn next(ss: *mut pg_sys::ScanState) -> *mut pg_sys::TupleTableSlot {
    unsafe {
        let node = ss as *mut pg_sys::CustomScanState;
        let st = exec_state(node);
        let slot = (*ss).ss_ScanTupleSlot;
        if st.parallel_done {
            pg_sys::ExecClearTuple(slot);
            return slot;
        }
        if st.scan.is_null() && st.last_point.is_none() && st.ordered.is_none() && st.aggregating.is_none() {
            start_scan(node);
        }
        if let Some(a) = exec_state(node).aggregating.as_mut() {
            a.next(slot);
            parallel_scan_ended(node, slot);
            return slot;
        }
        if let Some(o) = exec_state(node).ordered.as_mut() {
            o.next(slot);
            return slot;
        }
        if let Some(lp) = exec_state(node).last_point.as_mut() {
            lp.next(slot, (*ss).ps.qual, (*ss).ps.ps_ExprContext);
            return slot;
        }
        let direction = (*(*ss).ps.state).es_direction;
        crate::scan::plain::getnextslot(exec_state(node).scan, direction, slot);
        parallel_scan_ended(node, slot);
        slot
    }
}

/// A parallel participant whose share ran out adds its counters to the
/// shared ones now: the leader collects them when the plan shuts down, which
/// may be before this worker's executor ends.
unsafe fn parallel_scan_ended(node: *mut pg_sys::CustomScanState, slot: *mut pg_sys::TupleTableSlot) {
    unsafe {
        let empty = (*slot).tts_flags & pg_sys::TTS_FLAG_EMPTY as u16 != 0;
        if empty && exec_state(node).shared.is_some() {
            finish_scan(node);
            exec_state(node).parallel_done = true;
        }
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn recheck(_ss: *mut pg_sys::ScanState, _slot: *mut pg_sys::TupleTableSlot) -> bool {
    true
}

unsafe extern "C-unwind" {
    /// executor/execScan.c, called directly rather than through pgrx's wrapper:
    /// an error raised while evaluating the query's quals or projection (a
    /// division by zero, a PL/pgSQL function's error with its CONTEXT) then
    /// reaches the client with every field, as from a heap scan; pgrx's
    /// wrapper re-raises it with only some of them.
    #[link_name = "ExecScan"]
    fn exec_scan(node: *mut pg_sys::ScanState, access: pg_sys::ExecScanAccessMtd, recheck: pg_sys::ExecScanRecheckMtd) -> *mut pg_sys::TupleTableSlot;
}

// No #[pg_guard]: this frame holds nothing to drop, so an error may pass
// through it as it passes through Postgres's own executor nodes (`next`, the
// Rust that runs inside, is guarded).
unsafe extern "C-unwind" fn exec(node: *mut pg_sys::CustomScanState) -> *mut pg_sys::TupleTableSlot {
    // SAFETY: node is our CustomScanState, begun by `begin`.
    unsafe { exec_scan(&mut (*node).ss, Some(next), Some(recheck)) }
}

#[pg_guard]
pub(super) unsafe extern "C-unwind" fn end(node: *mut pg_sys::CustomScanState) {
    unsafe {
        finish_scan(node);
        drop(crate::pg::memory::take_owned((*(node as *mut TsBucketScanState)).state));
    }
}

#[pg_guard]
pub(super) unsafe extern "C-unwind" fn rescan(node: *mut pg_sys::CustomScanState) {
    // Parameters may have changed: start over, re-evaluating the conditions.
    unsafe {
        finish_scan(node);
        exec_state(node).parallel_done = false;
    }
}

/// Registers TsBucketScan's plan methods, so that plans can be copied and
/// read back (from _PG_init).
pub fn register() {
    // SAFETY: a static table, registered once per process.
    unsafe { pg_sys::RegisterCustomScanMethods(&methods().plan) };
}
