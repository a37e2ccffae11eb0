//! ExecScan for a TsBucketScan whose output columns are columns of the
//! table itself (`SELECT time, series, a FROM t WHERE ...`): the scan slot's
//! values are copied to the result slot, as ExecProject's interpreter would
//! copy them, without running it. A plain scan handing hundreds of thousands
//! of rows to its parent spent about a sixth of its time in ExecScan's
//! projection and per-row context reset (float threshold scan, issue 21).
//!
//! Everything else ExecScan does per row is kept, in its order: the per-tuple
//! context reset, the interrupt check, the qual (with its count of filtered
//! rows for EXPLAIN ANALYZE), and an empty result slot at the end. A plan
//! whose target list is anything else, or a row rechecked by EvalPlanQual,
//! goes through ExecScan itself.

use crate::pg::nodes::list_ptrs;
use crate::pg::relation::tuple_desc_attr;
use pgrx::pg_sys;

/// The scan slot's column (0-based) each result column copies, and the
/// number of leading scan columns that must be valid.
pub(super) struct DirectProjection {
    pub sources: Vec<usize>,
    width: usize,
}

/// A DirectProjection when the node projects (its target list is not the
/// scan slot's layout) and every target entry is a plain column of the
/// scanned table, of the type the scan slot has there: what
/// ExecBuildProjectionInfo compiles to a bare copy of the scan slot's value
/// (EEOP_ASSIGN_SCAN_VAR). None otherwise (expressions, system columns, a
/// custom_scan_tlist layout, no projection at all).
///
/// # Safety
/// `node` must be a CustomScanState ExecInitCustomScan initialized (its
/// projection, scan slot and plan set).
pub(super) unsafe fn plan(node: *mut pg_sys::CustomScanState) -> Option<DirectProjection> {
    // SAFETY: `node` is initialized (the contract): its plan is a CustomScan, its projection and scan slot are set.
    let (cscan, proj, scan_slot) = unsafe { ((*node).ss.ps.plan as *mut pg_sys::CustomScan, (*node).ss.ps.ps_ProjInfo, (*node).ss.ss_ScanTupleSlot) };
    // SAFETY: `cscan` is the node's CustomScan plan, read by value.
    if proj.is_null() || unsafe { !(*cscan).custom_scan_tlist.is_null() } {
        return None;
    }
    // SAFETY: `proj` is the node's ProjectionInfo, whose result slot ExecInitCustomScan made from the target list.
    let (result_desc, scan_desc) = unsafe { ((*(*proj).pi_state.resultslot).tts_tupleDescriptor, (*scan_slot).tts_tupleDescriptor) };
    // SAFETY: `cscan` is the node's plan; its targetlist is a List of TargetEntry and scanrelid a plain field.
    let (targets, scanrelid) = unsafe { (list_ptrs((*cscan).scan.plan.targetlist), (*cscan).scan.scanrelid) };
    // SAFETY: both descriptors belong to the node's slots, alive with it.
    let (result_natts, scan_natts) = unsafe { ((*result_desc).natts as usize, (*scan_desc).natts as usize) };
    if targets.len() != result_natts {
        return None;
    }
    let mut sources = Vec::with_capacity(targets.len());
    for (i, te) in targets.into_iter().enumerate() {
        // SAFETY: `te` is a TargetEntry of the plan's target list; its expression is a node of the plan.
        let (resno, expr) = unsafe { ((*(te as *mut pg_sys::TargetEntry)).resno, (*(te as *mut pg_sys::TargetEntry)).expr) };
        // SAFETY: `expr` is a node of the plan (NULL checked first), so its tag is readable.
        if resno as usize != i + 1 || expr.is_null() || unsafe { (*expr).type_ } != pg_sys::NodeTag::T_Var {
            return None;
        }
        // SAFETY: the tag just read says `expr` is a Var.
        let v = unsafe { &*(expr as *mut pg_sys::Var) };
        if v.varno as u32 != scanrelid || v.varlevelsup != 0 || v.varattno <= 0 || v.varattno as usize > scan_natts {
            return None;
        }
        // SAFETY: 0 < varattno <= the scan descriptor's natts, checked above.
        let att = unsafe { &*tuple_desc_attr(scan_desc, v.varattno as usize - 1) };
        if att.attisdropped || att.atttypid != v.vartype {
            return None;
        }
        sources.push(v.varattno as usize - 1);
    }
    let width = sources.iter().map(|&s| s + 1).max().unwrap_or(0);
    Some(DirectProjection { sources, width })
}

unsafe extern "C-unwind" {
    // Called directly, not through pgrx's wrappers: an error raised in them
    // (a query cancel) passes through `exec` as through ExecScan, whose frame
    // holds nothing to drop.
    #[link_name = "MemoryContextReset"]
    fn memory_context_reset(context: pg_sys::MemoryContext);
    #[link_name = "ProcessInterrupts"]
    fn process_interrupts();
    #[link_name = "ExecStoreVirtualTuple"]
    fn exec_store_virtual_tuple(slot: *mut pg_sys::TupleTableSlot) -> *mut pg_sys::TupleTableSlot;
    #[link_name = "slot_getsomeattrs_int"]
    fn slot_getsomeattrs_int(slot: *mut pg_sys::TupleTableSlot, attnum: i32);
}

/// A row written straight into the result slot by the scan, where no qual
/// is left to run on it (`plain::next_direct`); false: none, fetch one.
pub(super) type DirectRow =
    unsafe extern "C-unwind" fn(*mut pg_sys::CustomScanState, *const DirectProjection, *mut pg_sys::TupleTableSlot) -> bool;

/// ExecScan's loop (executor/execScan.c) with `direct` in place of
/// ExecProject: a row `direct_row` writes, or rows from `access` until one
/// passes the node's qual, copied into the projection's result slot; that
/// slot emptied at the end. None, having done nothing, if the result slot's
/// ops or the qual lack the function this calls (the caller runs ExecScan):
/// this frame must not panic.
///
/// # Safety
/// `node` must be a begun CustomScanState whose `direct` came from `plan`,
/// with no EvalPlanQual recheck active; `access` its access method.
pub(super) unsafe fn exec_scan(
    node: *mut pg_sys::CustomScanState,
    direct: &DirectProjection,
    access: unsafe extern "C-unwind" fn(*mut pg_sys::ScanState) -> *mut pg_sys::TupleTableSlot,
    direct_row: DirectRow,
) -> Option<*mut pg_sys::TupleTableSlot> {
    // SAFETY: `node` is begun (the contract): its qual (possibly NULL), ExprContext and projection (non-NULL, as `plan`
    // required) are set for the whole execution.
    let (qual, econtext, result) = unsafe { ((*node).ss.ps.qual, (*node).ss.ps.ps_ExprContext, (*(*node).ss.ps.ps_ProjInfo).pi_state.resultslot) };
    // SAFETY: `result` is the projection's slot, whose ops table lives as long as the backend.
    let clear = unsafe { (*(*result).tts_ops).clear }?;
    // SAFETY: a non-NULL `qual` is a compiled ExprState of this node.
    let eval = if qual.is_null() { None } else { Some(unsafe { (*qual).evalfunc }?) };
    loop {
        // SAFETY: the per-tuple context belongs to the node's ExprContext; reset as ExecScan resets it before each fetch.
        unsafe { reset_per_tuple(econtext) };
        // SAFETY: InterruptPending is the backend's flag, read as CHECK_FOR_INTERRUPTS reads it.
        if unsafe { std::ptr::read_volatile(&raw const pg_sys::InterruptPending) } != 0 {
            // SAFETY: ProcessInterrupts may raise an ERROR, which passes through this frame (it holds nothing to drop).
            unsafe { process_interrupts() };
        }
        // SAFETY: `result` is the projection's slot, emptied through its ops (ExecClearTuple) before the scan writes
        // a row into it; `direct_row` is the node's, called with its begun state.
        unsafe {
            clear(result);
            if direct_row(node, direct, result) {
                exec_store_virtual_tuple(result);
                return Some(result);
            }
        }
        // SAFETY: `access` is the node's access method, called with its ScanState as ExecScanFetch calls it.
        let slot = unsafe { access(&mut (*node).ss) };
        // SAFETY: a non-NULL `slot` is the node's scan slot, just filled or cleared.
        if slot.is_null() || unsafe { (*slot).tts_flags } & pg_sys::TTS_FLAG_EMPTY as u16 != 0 {
            // SAFETY: `result` is the projection's result slot; its ops' clear empties it, as ExecClearTuple does.
            unsafe { clear(result) };
            return Some(result);
        }
        // SAFETY: `econtext` is the node's; the qual reads the row from its scan tuple.
        unsafe { (*econtext).ecxt_scantuple = slot };
        // SAFETY: `eval` is `qual`'s evaluation function (`qual` compiled for this node, or its qual switch), with the
        // scan tuple just set.
        if unsafe { qual_passes(qual, eval, econtext) } {
            // SAFETY: `slot` holds the row that passed, `result` the projection's slot (emptied by `clear`), `direct`
            // fits both (`plan`).
            unsafe {
                clear(result);
                project(direct, slot, result);
            }
            return Some(result);
        }
        // SAFETY: `instrument` is NULL or the node's Instrumentation, counting the rows the qual removed (InstrCountFiltered1).
        unsafe {
            let instrument = (*node).ss.ps.instrument;
            if !instrument.is_null() {
                (*instrument).nfiltered1 += 1.0;
            }
        }
    }
}

/// ResetExprContext, without the call when there is nothing to reset.
///
/// # Safety
/// `econtext` must be a live ExprContext.
unsafe fn reset_per_tuple(econtext: *mut pg_sys::ExprContext) {
    // SAFETY: the per-tuple context of a live ExprContext (the contract); MemoryContextReset does nothing else when it
    // is already reset and has no children.
    unsafe {
        let cxt = (*econtext).ecxt_per_tuple_memory;
        if !(*cxt).isReset || !(*cxt).firstchild.is_null() {
            memory_context_reset(cxt);
        }
    }
}

/// ExecQual: evaluated in the per-tuple context; NULL is false, no qual true.
///
/// # Safety
/// `qual` must be NULL or an ExprState compiled for the node whose ExprContext
/// `econtext` is, its scan tuple set; `eval` its evaluation function.
unsafe fn qual_passes(qual: *mut pg_sys::ExprState, eval: pg_sys::ExprStateEvalFunc, econtext: *mut pg_sys::ExprContext) -> bool {
    let Some(eval) = eval else { return true };
    let mut isnull = false;
    // SAFETY: `eval` is the compiled `qual`'s evaluation function (the contract); it runs in the per-tuple context as
    // ExecEvalExprSwitchContext runs it, and an error it raises passes through this frame.
    let d = unsafe {
        let old = pg_sys::MemoryContextSwitchTo((*econtext).ecxt_per_tuple_memory);
        let d = eval(qual, econtext, &mut isnull);
        pg_sys::MemoryContextSwitchTo(old);
        d
    };
    !isnull && d.value() != 0
}

/// Copies the row in `slot` into `result` by `direct`, as ExecProject does
/// for plain columns: the same datums (by-reference values stay where the
/// scan slot points, for as long as the scan keeps them there).
///
/// # Safety
/// `slot` must hold a row of the scan slot's layout and `result` be the
/// projection's result slot `direct` was planned for, emptied.
unsafe fn project(direct: &DirectProjection, slot: *mut pg_sys::TupleTableSlot, result: *mut pg_sys::TupleTableSlot) {
    // SAFETY: `slot` holds a row (the contract); its first `width` values are made valid as ExecProject makes them.
    unsafe {
        if ((*slot).tts_nvalid as usize) < direct.width {
            slot_getsomeattrs_int(slot, direct.width as i32);
        }
    }
    // SAFETY: `sources` index below `width` <= the scan slot's natts, now valid; `result` has one column per source
    // (`plan` checked the count), so both arrays are indexed in bounds.
    unsafe {
        let (from_values, from_nulls) = ((*slot).tts_values, (*slot).tts_isnull);
        let (to_values, to_nulls) = ((*result).tts_values, (*result).tts_isnull);
        for (i, &s) in direct.sources.iter().enumerate() {
            *to_values.add(i) = *from_values.add(s);
            *to_nulls.add(i) = *from_nulls.add(s);
        }
        exec_store_virtual_tuple(result);
    }
}
