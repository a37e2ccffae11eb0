//! The TsBucketScan executor: its method tables, begin (what to decode and
//! which conditions prune), starting the scan its mode asks for, returning
//! rows, rescans and the end.

use crate::catalog::config::{self, Config};
use crate::pg::nodes::{list_ptrs, referenced_attnums, strip};
use crate::scan::aggregating::{AggCounters, AggregatingScan};
use crate::scan::explain::explain;
use crate::scan::last_point::LastPointScan;
use crate::scan::ordered::OrderedScan;
use crate::scan::parallel::{estimate_dsm, initialize_dsm, initialize_worker, reinitialize_dsm, shutdown};
use crate::scan::plain::ScanOptions;
use crate::scan::plan::{MODE_LAST_POINT, MODE_PARTIAL_AGG, MODE_SCAN, MODE_SERIES_ORDER, MODE_TIME_ORDER};
use crate::scan::quals::{Candidate, evaluate, find_candidates};
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
///
/// # Safety
/// `cscan` must be a plan node tagged T_CustomScan.
pub unsafe fn is_ours(cscan: *mut pg_sys::CustomScan) -> bool {
    // SAFETY: `cscan` is a node tagged T_CustomScan (this function's contract), so its methods field is there to read.
    unsafe { std::ptr::eq((*cscan).methods, &methods().plan) }
}

/// Whether TsBucketScan `cscan` computes partial aggregates (its
/// custom_scan_tlist their rows' layout, not the table's).
///
/// # Safety
/// `cscan` must be a TsBucketScan plan node.
#[cfg(feature = "pg15")]
unsafe fn is_partial_agg(cscan: *mut pg_sys::CustomScan) -> bool {
    // SAFETY: a TsBucketScan's custom_private is private_list's List, its mode (an Integer node) first.
    unsafe { list_ptrs((*cscan).custom_private).first().is_some_and(|m| (*(*m as *mut pg_sys::Integer)).ival == MODE_PARTIAL_AGG) }
}

#[pg_guard]
unsafe extern "C-unwind" fn create_state(cscan: *mut pg_sys::CustomScan) -> *mut pg_sys::Node {
    // SAFETY: palloc0 in CurrentMemoryContext, the query context ExecInitCustomScan runs in, returns a zeroed
    // TsBucketScanState that lives as long as the executor state.
    let node = unsafe { pg_sys::palloc0(std::mem::size_of::<TsBucketScanState>()) as *mut TsBucketScanState };
    // SAFETY: `node` is that fresh state, not yet seen by the executor; `cscan` is the CustomScan plan node it is made for.
    unsafe {
        (*node).css.ss.ps.type_ = pg_sys::NodeTag::T_CustomScanState;
        (*node).css.flags = (*cscan).flags;
        (*node).css.methods = &methods().exec;
        // Rows of the table carry their bucket version (system columns).
        #[cfg(not(feature = "pg15"))]
        {
            (*node).css.slotOps = crate::store::slot::ops();
        }
    }
    node as *mut pg_sys::Node
}

#[pg_guard]
unsafe extern "C-unwind" fn begin(node: *mut pg_sys::CustomScanState, estate: *mut pg_sys::EState, eflags: i32) {
    // SAFETY: `node` is create_state's TsBucketScanState, to which ExecInitCustomScan gave its open scan relation and plan.
    let (rel, cscan) = unsafe { ((*node).ss.ss_currentRelation, (*node).ss.ps.plan as *mut pg_sys::CustomScan) };
    // PostgreSQL 15 gives every custom scan a virtual scan slot (16 on take
    // css.slotOps): ours is a virtual slot that also knows its row's bucket
    // version, so the plan's expressions, compiled for a virtual slot, read
    // it alike, and system columns from it.
    // A plain scan given extra columns (`rewrite::field_output`) returns rows
    // of the table too, and so the same slot.
    #[cfg(feature = "pg15")]
    // SAFETY: `cscan` is this node's CustomScan plan, alive as long as the executor state.
    if unsafe { (*cscan).custom_scan_tlist.is_null() || !is_partial_agg(cscan) } {
        // SAFETY: `ss_ScanTupleSlot` is the slot ExecInitCustomScan made for `node`; ExecAllocTableSlot registers the
        // replacement in `estate.es_tupleTable`, which the executor frees at its end.
        unsafe {
            let tupdesc = (*(*node).ss.ss_ScanTupleSlot).tts_tupleDescriptor;
            (*node).ss.ss_ScanTupleSlot = pg_sys::ExecAllocTableSlot(&mut (*estate).es_tupleTable, tupdesc, crate::store::slot::ops());
        }
    }
    #[cfg(not(feature = "pg15"))]
    let _ = estate;
    // SAFETY: `rel` is the scan relation ExecInitCustomScan opened and locked for the whole execution; rd_att is its descriptor.
    let (relid, natts) = unsafe { ((*rel).rd_id, (*(*rel).rd_att).natts as usize) };
    let config = config::require(relid);
    // SAFETY: `cscan.custom_private` is the List private_list built at planning.
    let (private, doc_keys) = unsafe { crate::scan::plan::read_private((*cscan).custom_private) };
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
    // SAFETY: `cscan` is this node's plan (`node.ss.ps.plan`): its custom_exprs, qual List and scanrelid are read by value.
    let (custom_exprs, plan_qual, scanrelid) = unsafe { ((*cscan).custom_exprs, (*(*node).ss.ps.plan).qual, (*cscan).scan.scanrelid) };
    let quals = if *mode == MODE_PARTIAL_AGG { custom_exprs } else { plan_qual };
    // SAFETY: `node` is being initialized by ExecInitCustomScan; find_candidates compiles the constant sides into
    // CurrentMemoryContext, the query context, which outlives the node.
    let candidates = unsafe { find_candidates(node, &config, scanrelid, quals) };
    // Other quals the scan can evaluate on the decoded arrays (plain scans and
    // aggregation; ordered and last-point scans leave them to the executor).
    // Document fields the filters compare, read from their sub-columns (the aggregates' follow).
    let mut doc_fields = Vec::new();
    let vector_quals: Vec<(*mut std::ffi::c_void, crate::scan::vector_filter::VectorPlan)> = if matches!(*mode, MODE_SCAN | MODE_PARTIAL_AGG) {
        // SAFETY: `quals` is this plan's qual List (custom_exprs or the scan qual), alive with the plan.
        let qual_ptrs = unsafe { list_ptrs(quals) };
        qual_ptrs
            .into_iter()
            .filter(|q| !candidates.iter().any(|c| c.target.decides() && std::ptr::eq(c.clause as *mut std::ffi::c_void, *q)))
            .filter_map(|q| {
                // SAFETY: `q` is one of those quals, `rel` the open scan relation and `node.ss.ps` the PlanState that
                // vector_filter::plan compiles the filter's parameters for.
                let plan = unsafe {
                    crate::scan::vector_filter::plan(q as *mut pg_sys::Node, rel, scanrelid, &config.meta_attnums, &mut (*node).ss.ps, &mut doc_fields)
                }?;
                Some((q, plan))
            })
            .collect()
    } else {
        Vec::new()
    };
    // Output columns read from document fields (`rewrite::field_output`): the
    // entries of custom_scan_tlist past the table's columns.
    // SAFETY: `cscan` is this node's plan and `node.ss.ps` the PlanState being initialized, which the outputs' expressions
    // are compiled for (in the query context, current during begin).
    let field_outputs = unsafe { field_outputs(node, cscan, *mode, natts, &mut doc_fields) };
    // SAFETY: `quals` is this plan's qual List and `node.ss.ps` the PlanState being initialized; meta_only_quals compiles
    // in the query context, current during begin.
    let meta_qual = unsafe { meta_only_quals(node, rel, quals, scanrelid, &config.meta_attnums, &candidates) };
    let mut decided: Vec<*mut std::ffi::c_void> =
        candidates.iter().filter(|c| c.target.decides()).map(|c| c.clause as *mut std::ffi::c_void).collect();
    decided.extend(vector_quals.iter().filter(|(_, v)| v.exact).map(|(q, _)| *q));
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
    // A document only field outputs read (neither the rest of the target list
    // nor a qual) is not decoded: its fields are, and its documents only in a
    // bucket whose values need Postgres's cast.
    // SAFETY: the plan's targetlist and `quals` are expressions of this plan; referenced_attnums only reads them.
    let read_by_plan = unsafe { referenced_attnums(&[(*cscan).scan.plan.targetlist as *mut pg_sys::Node, quals as *mut pg_sys::Node], scanrelid) };
    let needed = match needed {
        Some(mut mask) if !read_by_plan.contains(&0) => {
            field_outputs.iter().flat_map(|o| o.list.iter()).filter(|o| !read_by_plan.contains(&(o.column as i32 + 1))).for_each(|o| mask[o.column] = false);
            Some(mask)
        }
        needed => needed,
    };
    let vector: Vec<*mut std::ffi::c_void> = vector_quals.iter().map(|(q, _)| *q).collect();
    // SAFETY: `node` and `cscan` are this scan's state and its partial-aggregation plan; partial_agg_exec compiles the
    // keys and quals into the query context current during begin.
    let partial_agg = (*mode == MODE_PARTIAL_AGG).then(|| unsafe { partial_agg_exec(node, &config, cscan, *arg as usize, (&decided, &vector), doc_fields.clone()) });
    let doc_fields: Rc<crate::store::rows::DocFields> = match &partial_agg {
        Some(pa) => pa.fields.clone(),
        None => Rc::from(doc_fields),
    };
    let needed = match (needed, &partial_agg) {
        (Some(mut mask), Some(pa)) => {
            pa.fields_only.iter().for_each(|&c| mask[c] = false);
            Some(mask)
        }
        (needed, _) => needed,
    };
    // Not where a row may be rechecked after a concurrent update (EvalPlanQual
    // re-runs the quals on the new version, which pruning never saw).
    // SAFETY: `node.ss.ps.state` is the EState running this plan, and its es_plannedstmt the statement executed.
    let command = unsafe { (*(*(*node).ss.ps.state).es_plannedstmt).commandType };
    let read_only = matches!(command, pg_sys::CmdType::CMD_SELECT | pg_sys::CmdType::CMD_INSERT);
    // A plain scan's bucket whose mask decides the vector filter's conditions
    // runs the quals without them (`QualSwitch`).
    let per_bucket = read_only && *mode == MODE_SCAN && !vector.is_empty();
    let may_narrow_quals = read_only && matches!(*mode, MODE_SCAN | MODE_TIME_ORDER | MODE_SERIES_ORDER) && (!decided.is_empty() || per_bucket);
    // SAFETY: contain_subplans only walks `quals`, the plan's qual List read above.
    let scan_quals = (may_narrow_quals && !unsafe { pg_sys::contain_subplans(quals as *mut pg_sys::Node) }).then(|| {
        let without_vector: Vec<*mut std::ffi::c_void> = decided.iter().chain(&vector).copied().collect();
        // SAFETY: residual_list copies the pointers of the quals of this plan neither the candidates nor the vector filter
        // decide into a new List; ExecInitQual compiles it for `node.ss.ps` in the query context.
        let decided_quals = per_bucket.then(|| unsafe {
            let list = residual_list(quals, &without_vector);
            (pg_sys::ExecInitQual(list, &mut (*node).ss.ps), list)
        });
        // SAFETY: `node.ss.ps.qual` is the ExprState ExecInitCustomScan compiled from the same quals; residual_qual compiles
        // the undecided ones for `node` in the query context.
        unsafe { crate::scan::aggregating::Quals { all: (*node).ss.ps.qual, residual: residual_qual(node, quals, &decided), decided: decided_quals } }
    });
    // The documents a bucket so decided need not build: those only field
    // outputs and the vector filter's conditions read.
    let plain_unread: Vec<usize> = match scan_quals.as_ref().and_then(|q| q.decided) {
        Some((_, list)) => {
            // SAFETY: the plan's targetlist and `list` (quals of this plan) are expressions of it; referenced_attnums reads them.
            let read = unsafe { referenced_attnums(&[(*cscan).scan.plan.targetlist as *mut pg_sys::Node, list as *mut pg_sys::Node], scanrelid) };
            let mut unread: Vec<usize> = doc_fields.iter().map(|(c, ..)| *c).filter(|c| !read.contains(&0) && !read.contains(&(*c as i32 + 1))).collect();
            unread.sort_unstable();
            unread.dedup();
            unread
        }
        None => Vec::new(),
    };
    // ExecScan reads the node's qual before the first row is fetched (and the
    // scan begun), so the switch is the node's qual from now on: every qual
    // until start_scan knows whether pruning decides some. Output columns
    // evaluated by Postgres need it too: their row's quals run first
    // (`next`), so ExecScan must not run them again.
    // SAFETY: `node.ss.ps.qual` is the qual ExecInitCustomScan compiled for the node (NULL: none), read by value.
    let has_qual = unsafe { !(*node).ss.ps.qual.is_null() };
    let wants_switch = scan_quals.as_ref().is_some_and(|q| q.decided.is_some()) || (field_outputs.is_some() && has_qual);
    // SAFETY: QualSwitch::new pallocs in the query context, current during begin, so the switch lives as long as the node,
    // whose qual it becomes (ExecScan reads `node.ss.ps.qual` only once the node is begun).
    let qual_switch = wants_switch.then(|| unsafe {
        let switch = crate::scan::state::QualSwitch::new((*node).ss.ps.qual);
        (*node).ss.ps.qual = switch.state;
        switch
    });
    // SAFETY: CurrentMemoryContext is the executor's query context during begin; the per-scan context is its child, so it
    // is deleted with the query even on ERROR.
    let scan_cxt =
        unsafe { pg_sys::AllocSetContextCreateInternal(pg_sys::CurrentMemoryContext, c"TsBucketScan per scan".as_ptr(), 0, 1024, 8 * 1024) };
    let state = ExecState {
        meta_qual,
        needed,
        doc_keys: std::rc::Rc::from(doc_keys),
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
        doc_fields,
        scan_cxt,
        scan_quals,
        field_outputs,
        plain_unread,
        qual_switch,
    };
    // A parallel plan's workers read the store as the leader wrote it: rows
    // this transaction buffered go there before they start (and before the
    // executor enters parallel mode, which forbids writes).
    // SAFETY: the EState `node.ss.ps.state` outlives begin; its planned statement says whether Gather will run workers.
    let parallel_mode_needed = unsafe { (*(*(*node).ss.ps.state).es_plannedstmt).parallelModeNeeded };
    if parallel_mode_needed && eflags & pg_sys::EXEC_FLAG_EXPLAIN_ONLY as i32 == 0 {
        // SAFETY: `rel` is the open scan relation and `es_snapshot` the EState's active snapshot; the executor is not yet
        // in parallel mode, so write_buffered_rows may write the store.
        unsafe { crate::scan::plain::write_buffered_rows(rel, (*(*node).ss.ps.state).es_snapshot) };
    }
    // SAFETY: `node` was allocated by create_state as a TsBucketScanState; CurrentMemoryContext is still the query context,
    // which outlives the node and drops `state` if the query fails.
    unsafe { (*(node as *mut TsBucketScanState)).state = crate::pg::memory::own_in_context(pg_sys::CurrentMemoryContext, state) };
    // SAFETY: ExecInitCustomScan set the node's projection, scan slot and plan before calling begin.
    if let Some(direct) = unsafe { crate::scan::project::plan(node) } {
        // SAFETY: as for `state` above: the query context outlives the node and drops the value if the query fails.
        unsafe { (*(node as *mut TsBucketScanState)).direct = crate::pg::memory::own_in_context(pg_sys::CurrentMemoryContext, direct) };
    }
}

/// What the in-scan aggregation computes, from the plan `rewrite::partial_agg` rewrote.
unsafe fn partial_agg_exec(
    node: *mut pg_sys::CustomScanState,
    config: &Config,
    cscan: *mut pg_sys::CustomScan,
    nkeys: usize,
    (decided, vector): (&[*mut std::ffi::c_void], &[*mut std::ffi::c_void]),
    filter_fields: Vec<(usize, Vec<u8>, crate::scan::doc_keys::FieldCast)>,
) -> PartialAggExec {
    // SAFETY: `node` is the scan state begin is initializing, with its open scan relation; `cscan` is its plan node.
    let (rel, scanrelid, ps) = unsafe { ((*node).ss.ss_currentRelation, (*cscan).scan.scanrelid, &mut (*node).ss.ps as *mut pg_sys::PlanState) };
    let mut keys = Vec::new();
    let mut aggs = Vec::new();
    let mut fields = filter_fields;
    let mut args_of = Vec::new();
    // SAFETY: `cscan.custom_scan_tlist` is the TargetEntry List partial_agg's rewrite gave the plan: group keys, then Aggrefs.
    let tlist = unsafe { list_ptrs((*cscan).custom_scan_tlist) };
    for (i, te) in tlist.into_iter().enumerate() {
        // SAFETY: `te` is a TargetEntry of custom_scan_tlist; its expr is a node of the plan tree.
        let e = unsafe { (*(te as *mut pg_sys::TargetEntry)).expr as *mut pg_sys::Node };
        let broken = || -> ! { panic!("TsBucketScan: a partial aggregation plan this build cannot run (column {})", i + 1) };
        if i < nkeys {
            // SAFETY: `e` is a group-key expression of the plan, valid as classify_key's contract asks.
            let plan = unsafe { crate::scan::agg_plan::classify_key(e, config, scanrelid) }.unwrap_or_else(|| broken());
            let expr = if plan == crate::scan::agg_plan::KeyPlan::TimeBucket {
                // SAFETY: ExecInitExpr compiles the time-bucket key `e` for this node's PlanState `ps` in the query context.
                unsafe { pg_sys::ExecInitExpr(e as *mut pg_sys::Expr, ps) }
            } else {
                std::ptr::null_mut()
            };
            let fixed = if plan == crate::scan::agg_plan::KeyPlan::TimeBucket {
                // SAFETY: `e` is the key's expression node and `scanrelid` its scan's range-table index.
                unsafe { crate::scan::time_bucket::fixed_bucket(e, scanrelid, config.time_attnum) }
            } else {
                None
            };
            keys.push(crate::scan::aggregating::Key { plan, expr, fixed });
        } else {
            let aggref = e as *mut pg_sys::Aggref;
            // SAFETY: entries after the keys are Aggrefs; `aggref.args` is their List of argument TargetEntries.
            let args: Vec<*mut pg_sys::Node> = unsafe {
                list_ptrs((*aggref).args).into_iter().map(|te| strip((*(te as *mut pg_sys::TargetEntry)).expr as *mut pg_sys::Node)).collect()
            };
            // SAFETY: classify_aggref's contract holds: `aggref` is a valid Aggref and `rel` the open table of `config`.
            let plan = unsafe { crate::scan::agg_plan::classify_aggref(aggref, &args, config, rel, scanrelid, &mut fields) }.unwrap_or_else(|| broken());
            args_of.push(args);
            aggs.push(plan);
        }
    }
    // SAFETY: `cscan.custom_exprs` holds the quals partial_agg moved into the plan.
    let qual_list = unsafe { (*cscan).custom_exprs };
    // SAFETY: contain_subplans only walks `qual_list`, the partial-aggregation plan's quals.
    let quals = if unsafe { pg_sys::contain_subplans(qual_list as *mut pg_sys::Node) } {
        // Compiled once (a SubPlan registers with the node when compiled): every qual per row.
        // SAFETY: ExecInitQual compiles `qual_list` (with its SubPlans) once for PlanState `ps`, in the query context.
        let all = unsafe { pg_sys::ExecInitQual(qual_list, ps) };
        crate::scan::aggregating::Quals { all, residual: all, decided: None }
    } else {
        let without_vector: Vec<*mut std::ffi::c_void> = decided.iter().chain(vector).copied().collect();
        // SAFETY: `qual_list` is this plan's qual List; residual_list copies the pointers of those neither the candidates
        // nor the vector filter decide into a new List in the query context.
        let list = unsafe { residual_list(qual_list, &without_vector) };
        // SAFETY: ExecInitQual compiles every qual of `qual_list` for `ps`, then residual_qual those the candidates leave
        // undecided, and `list`, all into the query context.
        unsafe {
            crate::scan::aggregating::Quals {
                all: pg_sys::ExecInitQual(qual_list, ps),
                residual: residual_qual(node, qual_list, decided),
                decided: Some((pg_sys::ExecInitQual(list, ps), list)),
            }
        }
    };
    // A field argument's rows that hold no decimal are evaluated by its expression, on the row.
    let field_exprs = aggs
        .iter()
        .zip(&args_of)
        .map(|(a, args)| match a.arg {
            // SAFETY: ExecInitExpr compiles the aggregate's argument (an expression of the plan) for `ps` in the query context.
            crate::scan::agg_plan::ArgSource::Field { .. } => unsafe { pg_sys::ExecInitExpr(args[0] as *mut pg_sys::Expr, ps) },
            _ => std::ptr::null_mut(),
        })
        .collect();
    // The jsonb columns nothing but field arguments read: their documents need no decoding.
    let mut others: Vec<*mut pg_sys::Node> = vec![qual_list as *mut pg_sys::Node];
    // SAFETY: `tlist` entries are TargetEntries of the plan; the first `nkeys` are the group keys.
    others.extend(unsafe { list_ptrs((*cscan).custom_scan_tlist) }.into_iter().take(nkeys).map(|te| unsafe { (*(te as *mut pg_sys::TargetEntry)).expr as *mut pg_sys::Node }));
    for (a, args) in aggs.iter().zip(&args_of) {
        if !matches!(a.arg, crate::scan::agg_plan::ArgSource::Field { .. }) {
            others.extend(args.iter().copied());
        }
    }
    // SAFETY: `others` are expressions of this plan; referenced_attnums only reads them.
    let read_otherwise = unsafe { referenced_attnums(&others, scanrelid) };
    let fields_only = fields.iter().map(|(c, ..)| *c).filter(|c| !read_otherwise.contains(&(*c as i32 + 1))).collect();
    // The same, in a bucket where the vector filter decides its conditions:
    // the jsonb columns only they and field arguments read.
    let unread_when_decided = match &quals.decided {
        Some((_, list)) => {
            others[0] = *list as *mut pg_sys::Node;
            // SAFETY: as above; the List holds quals of this plan.
            let read = unsafe { referenced_attnums(&others, scanrelid) };
            // A whole-row reference (attnum 0) reads every column.
            let whole_row = read.contains(&0);
            fields.iter().map(|(c, ..)| *c).filter(|c| !whole_row && !read.contains(&(*c as i32 + 1))).collect()
        }
        None => Vec::new(),
    };
    PartialAggExec {
        keys: Rc::new(keys),
        aggs: Rc::new(aggs),
        quals,
        qual_list,
        fields: Rc::from(fields),
        field_exprs: Rc::new(field_exprs),
        fields_only,
        unread_when_decided,
    }
}

/// The output columns `rewrite::field_output` gave a plain scan (None for
/// any other): per entry of custom_scan_tlist past the table's `natts`
/// columns, its field (added to `doc_fields`) and its expression compiled.
///
/// # Safety
/// `node` must be the scan state being begun, `cscan` its plan.
unsafe fn field_outputs(
    node: *mut pg_sys::CustomScanState,
    cscan: *mut pg_sys::CustomScan,
    mode: i32,
    natts: usize,
    doc_fields: &mut Vec<(usize, Vec<u8>, crate::scan::doc_keys::FieldCast)>,
) -> Option<Rc<crate::scan::plain::FieldOutputs>> {
    // SAFETY: `cscan` is this node's plan (the contract); its custom_scan_tlist is a field of it.
    let tlist = unsafe { (*cscan).custom_scan_tlist };
    if mode != MODE_SCAN || tlist.is_null() {
        return None;
    }
    // SAFETY: `cscan` is the plan of `node`; its scanrelid and the node's PlanState and ExprContext are read by value.
    let (scanrelid, ps, econtext) = unsafe { ((*cscan).scan.scanrelid, &mut (*node).ss.ps as *mut pg_sys::PlanState, (*node).ss.ps.ps_ExprContext) };
    // SAFETY: custom_scan_tlist is field_output's List of TargetEntries: the table's columns, then the fields.
    let list = unsafe { list_ptrs(tlist) }
        .into_iter()
        .skip(natts)
        .enumerate()
        .map(|(j, te)| {
            // SAFETY: `te` is a TargetEntry of custom_scan_tlist; its expression is a node of the plan.
            let e = unsafe { (*(te as *mut pg_sys::TargetEntry)).expr };
            // SAFETY: `e` is that valid expression; numeric_field only reads it.
            let (attnum, key, cast) = unsafe { crate::scan::doc_keys::numeric_field(e as *mut pg_sys::Node, scanrelid) }
                .unwrap_or_else(|| panic!("TsBucketScan: an output column this build cannot fill (column {})", natts + j + 1));
            let column = attnum as usize - 1;
            let field = crate::scan::doc_keys::field_index(doc_fields, column, &key, cast);
            // SAFETY: ExecInitExpr compiles `e` for `ps`, the node's PlanState, in the query context.
            let expr = unsafe { pg_sys::ExecInitExpr(e, ps) };
            crate::scan::plain::FieldOutput { field, column, cast, expr }
        })
        .collect();
    Some(Rc::new(crate::scan::plain::FieldOutputs { first: natts, list, econtext }))
}

/// The quals the candidates do not decide (those they decide, when their
/// values are known, need no row-by-row check), ready to run.
unsafe fn residual_qual(node: *mut pg_sys::CustomScanState, quals: *mut pg_sys::List, decided: &[*mut std::ffi::c_void]) -> *mut pg_sys::ExprState {
    // SAFETY: `quals` is a qual List of this node's plan (residual_qual's caller), alive with the plan.
    let residual = unsafe { residual_list(quals, decided) };
    // SAFETY: ExecInitQual compiles `residual` for `node.ss.ps`, the PlanState of the node being initialized.
    unsafe { pg_sys::ExecInitQual(residual, &mut (*node).ss.ps) }
}

/// The quals of `quals` not in `decided`, as a new List.
///
/// # Safety
/// `quals` is a qual List of the plan being initialized.
unsafe fn residual_list(quals: *mut pg_sys::List, decided: &[*mut std::ffi::c_void]) -> *mut pg_sys::List {
    let mut residual: *mut pg_sys::List = std::ptr::null_mut();
    // SAFETY: `quals` is a qual List of this node's plan, alive with the plan.
    for q in unsafe { list_ptrs(quals) } {
        if !decided.iter().any(|d| std::ptr::eq(*d, q)) {
            // SAFETY: lappend grows `residual`, a fresh List in CurrentMemoryContext (the query context during begin).
            residual = unsafe { pg_sys::lappend(residual, q) };
        }
    }
    residual
}

/// The quals that read only meta columns (and no volatile function or
/// sub-plan; none where row-level security applies), compiled for `node`, with a virtual slot of the table's
/// descriptor to evaluate them on a bucket's meta values (`Prune::MetaQual`).
/// Those the meta conditions of `candidates` already apply are left out.
unsafe fn meta_only_quals(
    node: *mut pg_sys::CustomScanState,
    rel: pg_sys::Relation,
    quals: *mut pg_sys::List,
    scanrelid: u32,
    meta_attnums: &[i16],
    candidates: &[Candidate],
) -> Option<(*mut pg_sys::ExprState, *mut pg_sys::TupleTableSlot, *mut pg_sys::List, Vec<i16>)> {
    if meta_attnums.is_empty() {
        return None;
    }
    // Where row-level security applies, a qual run on every bucket's meta value would see values the policy hides
    // from the caller (before the policy's quals filter them): none is run so.
    // SAFETY: check_enable_rls looks up the open scan relation `rel` by OID for the current user.
    if unsafe { pg_sys::check_enable_rls((*rel).rd_id, pg_sys::InvalidOid, true) } == pg_sys::CheckEnableRlsResult::RLS_ENABLED as i32 {
        return None;
    }
    let mut list: *mut pg_sys::List = std::ptr::null_mut();
    // SAFETY: `quals` is this node's qual List, alive with the plan.
    for q in unsafe { list_ptrs(quals) } {
        if candidates.iter().any(|c| std::ptr::eq(c.clause as *mut std::ffi::c_void, q)) {
            continue;
        }
        let n = q as *mut pg_sys::Node;
        // SAFETY: `n` is a qual expression of the plan: the walkers only read it.
        let (used, volatile, subplans) =
            unsafe { (referenced_attnums(&[n], scanrelid), pg_sys::contain_volatile_functions(n), pg_sys::contain_subplans(n)) };
        if !used.is_empty() && used.iter().all(|a| meta_attnums.contains(&(*a as i16))) && !volatile && !subplans {
            // SAFETY: lappend grows `list`, a new List in the query context.
            list = unsafe { pg_sys::lappend(list, q) };
        }
    }
    if list.is_null() {
        return None;
    }
    // SAFETY: ExecInitQual compiles `list` for `node.ss.ps`, the PlanState being initialized; the slot, of the open
    // relation's descriptor, goes in the EState's tuple table, which the executor releases (and unpins) at its end.
    unsafe {
        let estate = (*node).ss.ps.state;
        let slot = pg_sys::ExecAllocTableSlot(&mut (*estate).es_tupleTable, (*rel).rd_att, &pg_sys::TTSOpsVirtual);
        Some((pg_sys::ExecInitQual(list, &mut (*node).ss.ps), slot, list, meta_attnums.to_vec()))
    }
}

unsafe fn start_scan(node: *mut pg_sys::CustomScanState) {
    // SAFETY: `node` is begun, its ExecState owned by the query context; its `scan_cxt` is current only while
    // start_scan_in_context runs, then `old` is restored.
    unsafe {
        let old = pg_sys::MemoryContextSwitchTo(exec_state(node).scan_cxt);
        start_scan_in_context(node);
        pg_sys::MemoryContextSwitchTo(old);
    }
}

unsafe fn start_scan_in_context(node: *mut pg_sys::CustomScanState) {
    // SAFETY: `node` is a TsBucketScanState begin filled; exec_state borrows its ExecState from the query context.
    let st = unsafe { exec_state(node) };
    // SAFETY: `node`'s scan relation is open for the whole execution and `ss.ps.state` is the EState running it.
    let (rel, estate) = unsafe { ((*node).ss.ss_currentRelation, (*node).ss.ps.state) };
    // SAFETY: evaluate runs the candidates' ExprStates in `node`'s ExprContext and copies kept values into `st.scan_cxt`.
    let (mut prune, exact) = unsafe { evaluate(node, &st.candidates, st.scan_cxt) };
    if let Some((qual, slot, _, meta_attnums)) = &st.meta_qual {
        // SAFETY: `ps_ExprContext` is this node's ExprContext, alive for the execution.
        let econtext = unsafe { (*node).ss.ps.ps_ExprContext };
        let q = crate::scan::prune::MetaQual { qual: *qual, econtext, slot: *slot, meta_attnums: meta_attnums.clone() };
        prune.push(crate::scan::prune::Prune::MetaQual(q));
    }
    let vector_filter = (!st.vector_quals.is_empty()).then(|| {
        // SAFETY: `ps_ExprContext` is this node's ExprContext and `rel.rd_att` the open relation's descriptor.
        let (econtext, tupdesc) = unsafe { ((*node).ss.ps.ps_ExprContext, (*rel).rd_att) };
        // SAFETY: bind's contract: `econtext` is the context the filters were planned for and `tupdesc` the table's.
        let bound: Vec<_> = st.vector_quals.iter().map(|(_, p)| unsafe { p.bind(econtext, tupdesc) }).collect();
        std::rc::Rc::new(crate::scan::vector_filter::VectorFilter::all(bound))
    });
    match (&st.qual_switch, &st.scan_quals) {
        // Where every pruning value is known, a bucket the vector filter decides
        // runs fewer quals: ExecScan runs the switch, `next` sets it per row.
        (Some(switch), _) => switch.exact.set(exact),
        // SAFETY: `node.ss.ps.qual` is the qual ExecScan runs per row; the quals were compiled for this node in begin.
        (None, Some(q)) => unsafe { (*node).ss.ps.qual = if exact { q.residual } else { q.all } },
        (None, None) => {}
    }
    if let Some(pa) = &st.partial_agg {
        // SAFETY: `st.shared` is the parallel scan's DSM segment (initialize_dsm / initialize_worker), mapped while the scan runs.
        let store_parallel = st.shared.map(|s| unsafe { SharedScan::store_scan(s) });
        // SAFETY: `shared` points into the Gather's DSM chunk, mapped while this participant scans.
        let tail_claim = st.shared.map(|s| unsafe { &raw const (*s).tail_claim });
        let options = ScanOptions {
            needed: st.needed.clone(),
            doc_keys: st.doc_keys.clone(),
            doc_fields: pa.fields.clone(),
            prune,
            store_parallel,
            vector_filter,
            tail_claim,
            // Only where the candidates' values are known: the conditions the mask decides then never run.
            unread_when_decided: if exact { pa.unread_when_decided.clone() } else { Vec::new() },
            field_outputs: None,
        };
        // SAFETY: `rel` is open, `es_snapshot` the query's snapshot and `ps_ExprContext` the node's; AggregatingScan::begin
        // allocates in `scan_cxt`, the context start_scan made current.
        let aggregating = unsafe {
            let econtext = (*node).ss.ps.ps_ExprContext;
            AggregatingScan::begin(rel, (*estate).es_snapshot, options, pa.keys.clone(), pa.aggs.clone(), pa.field_exprs.clone(), &pa.quals, exact, econtext)
        };
        st.aggregating = Some(aggregating);
        return;
    }
    if st.last_point_mode {
        // SAFETY: `rel` is the open scan relation of a last-point plan.
        let config = config::require(unsafe { (*rel).rd_id });
        // SAFETY: the store `config.store_relid` is open under AccessShareLock while require_series_index looks up its series
        // index; table_close keeps the lock until the transaction ends.
        let index = unsafe {
            let store = pg_sys::table_open(config.store_relid, pg_sys::AccessShareLock as i32);
            let index = crate::scan::access::require_series_index(store, &config);
            pg_sys::table_close(store, pg_sys::NoLock as i32);
            index
        };
        // SAFETY: `node.ss.ps.qual` was set above for this execution.
        let rows_unfiltered = unsafe { (*node).ss.ps.qual.is_null() };
        // SAFETY: `rel` is open and `estate.es_snapshot` the query's snapshot; LastPointScan::begin allocates in `scan_cxt`.
        let mut scan = unsafe { LastPointScan::begin(rel, (*estate).es_snapshot, index, st.needed.clone(), prune, rows_unfiltered) };
        scan.doc_keys = st.doc_keys.clone();
        st.last_point = Some(scan);
        return;
    }
    if let Some(descending) = st.time_order {
        // SAFETY: `rel` is open and `estate.es_snapshot` the query's snapshot; the time-ordered merge allocates in `scan_cxt`.
        let mut scan = unsafe { OrderedScan::begin(rel, (*estate).es_snapshot, descending, st.meta_ties, st.needed.clone(), prune) };
        scan.doc_keys = st.doc_keys.clone();
        st.ordered = Some(scan);
        return;
    }
    if let Some(descending) = st.series_order {
        // SAFETY: `rel` is open and `estate.es_snapshot` the query's snapshot; the series-order walk allocates in `scan_cxt`.
        let mut scan = unsafe { OrderedScan::begin_series_order(rel, (*estate).es_snapshot, descending, st.needed.clone(), prune) };
        scan.doc_keys = st.doc_keys.clone();
        st.ordered = Some(scan);
        return;
    }
    // SAFETY: `st.shared`, when set, points into the Gather's DSM segment, mapped until the parallel scan shuts down.
    let store_parallel = st.shared.map(|s| unsafe { SharedScan::store_scan(s) });
    // SAFETY: `shared` points into the Gather's DSM chunk, mapped while this participant scans.
    let tail_claim = st.shared.map(|s| unsafe { &raw const (*s).tail_claim });
    let options = ScanOptions {
        needed: st.needed.clone(),
        doc_keys: st.doc_keys.clone(),
        doc_fields: st.doc_fields.clone(),
        prune,
        store_parallel,
        vector_filter,
        tail_claim,
        // Only where the candidates' values are known: the switch then runs the conditions the mask decides nowhere.
        unread_when_decided: if exact && st.qual_switch.is_some() { st.plain_unread.clone() } else { Vec::new() },
        field_outputs: st.field_outputs.clone(),
    };
    // SAFETY: `rel` is open and `estate.es_snapshot` the query's snapshot; the plain scan's descriptor goes in `scan_cxt`.
    st.scan = unsafe { crate::scan::plain::begin_with(rel, (*estate).es_snapshot, 0, std::ptr::null_mut(), std::ptr::null_mut(), 0, options) };
}

#[pg_guard]
unsafe extern "C-unwind" fn next(ss: *mut pg_sys::ScanState) -> *mut pg_sys::TupleTableSlot {
    let node = ss as *mut pg_sys::CustomScanState;
    // SAFETY: ExecScan calls `next` with this node's ScanState, begun by `begin` (its ExecState in the query context);
    // `ss_ScanTupleSlot` is its scan slot.
    let (st, slot) = unsafe { (exec_state(node), (*ss).ss_ScanTupleSlot) };
    if st.parallel_done {
        // SAFETY: `slot` is this node's scan slot; an empty slot tells ExecScan this participant's share is read.
        unsafe { pg_sys::ExecClearTuple(slot) };
        return slot;
    }
    if st.scan.is_null() && st.last_point.is_none() && st.ordered.is_none() && st.aggregating.is_none() {
        // SAFETY: `node` is begun and has no running scan; start_scan begins one in its per-scan context.
        unsafe { start_scan(node) };
    }
    // SAFETY: the ExecState of `node` is borrowed anew, after start_scan set its scan; the borrow ends with this block,
    // before parallel_scan_ended borrows it again.
    let aggregated = unsafe { exec_state(node).aggregating.as_mut() }.map(|a| {
        // SAFETY: `slot` is the node's scan slot, which the aggregating scan fills.
        unsafe { a.next(slot) };
    });
    if aggregated.is_some() {
        // SAFETY: `slot` was just filled (or cleared) by the aggregating scan of the begun `node`.
        unsafe { parallel_scan_ended(node, slot) };
        return slot;
    }
    // SAFETY: `node`'s ExecState, borrowed again for its ordered scan.
    if let Some(o) = unsafe { exec_state(node).ordered.as_mut() } {
        // SAFETY: the ordered scan fills `slot`, the node's scan slot, from buckets it holds in `scan_cxt`.
        unsafe { o.next(slot) };
        return slot;
    }
    // SAFETY: `node`'s ExecState, borrowed again for its last-point scan.
    if let Some(lp) = unsafe { exec_state(node).last_point.as_mut() } {
        // SAFETY: `ss.ps.qual` and `ss.ps.ps_ExprContext` are this node's compiled qual and ExprContext, alive with the node.
        unsafe { lp.next(slot, (*ss).ps.qual, (*ss).ps.ps_ExprContext) };
        return slot;
    }
    // SAFETY: `ss.ps.state` is the EState running the plan; getnextslot fills `slot` from the plain scan start_scan began,
    // and parallel_scan_ended reads the result.
    unsafe {
        let direction = (*(*ss).ps.state).es_direction;
        let st = exec_state(node);
        loop {
            crate::scan::plain::getnextslot(st.scan, direction, slot);
            let empty = (*slot).tts_flags & pg_sys::TTS_FLAG_EMPTY as u16 != 0;
            let pending = !empty && crate::scan::plain::outputs_pending(st.scan);
            let Some(switch) = &st.qual_switch else {
                if pending {
                    crate::scan::plain::evaluate_outputs(st.scan, slot);
                }
                break;
            };
            // The quals for this row: fewer where its bucket is decided.
            let qual = st.row_qual(crate::scan::plain::current_decided(st.scan));
            if !pending {
                switch.set(qual);
                break;
            }
            // As heap projects only rows its quals pass, the output columns
            // Postgres must cast are evaluated past them; ExecScan then runs none.
            let econtext = (*ss).ps.ps_ExprContext;
            (*econtext).ecxt_scantuple = slot;
            if !crate::pg::nodes::qual_passes(qual, econtext) {
                let instrument = (*ss).ps.instrument;
                if !instrument.is_null() {
                    (*instrument).nfiltered1 += 1.0;
                }
                pg_sys::MemoryContextReset((*econtext).ecxt_per_tuple_memory);
                // Rows skipped here never return to ExecScan, which checks once per row it gets.
                pgrx::check_for_interrupts!();
                continue;
            }
            crate::scan::plain::evaluate_outputs(st.scan, slot);
            switch.set(std::ptr::null_mut());
            break;
        }
        parallel_scan_ended(node, slot);
    }
    slot
}

/// `project::DirectRow` for this node: the plain scan's next row of its
/// current bucket, written into `result` by `direct`, when no qual is left
/// for Postgres to run on it: the node has none, or its qual switch runs
/// none in a bucket the mask decided (`ExecState::row_qual`).
#[pg_guard]
unsafe extern "C-unwind" fn next_direct(
    node: *mut pg_sys::CustomScanState,
    direct: *const crate::scan::project::DirectProjection,
    result: *mut pg_sys::TupleTableSlot,
) -> bool {
    // SAFETY: `node` is begun (project::exec_scan calls this between begin and end), so its ExecState is in the
    // query context; its qual, scan slot and EState are the executor's.
    let (st, qual, scan_slot, direction) =
        unsafe { (exec_state(node), (*node).ss.ps.qual, (*node).ss.ss_ScanTupleSlot, (*(*node).ss.ps.state).es_direction) };
    if st.parallel_done || st.scan.is_null() || st.aggregating.is_some() || st.ordered.is_some() || st.last_point.is_some() {
        return false;
    }
    let decided_only = match &st.qual_switch {
        None if qual.is_null() => false,
        Some(_) if st.row_qual(true).is_null() => true,
        _ => return false,
    };
    let forward = direction != pg_sys::ScanDirection::BackwardScanDirection;
    // SAFETY: `direct` is the node's projection (owned by the query context); `st.scan` the plain scan start_scan
    // began, whose rows fill `scan_slot`; `result` the projection's emptied slot, one column per source.
    unsafe { crate::scan::plain::next_direct(st.scan, forward, decided_only, &(*direct).sources, scan_slot, result) }
}

/// A parallel participant whose share ran out adds its counters to the
/// shared ones now: the leader collects them when the plan shuts down, which
/// may be before this worker's executor ends.
unsafe fn parallel_scan_ended(node: *mut pg_sys::CustomScanState, slot: *mut pg_sys::TupleTableSlot) {
    // SAFETY: `slot` is the node's scan slot, just filled or cleared by its running scan.
    let empty = unsafe { (*slot).tts_flags } & pg_sys::TTS_FLAG_EMPTY as u16 != 0;
    // SAFETY: `node` is begun, so exec_state finds its ExecState in the query context.
    if empty && unsafe { exec_state(node) }.shared.is_some() {
        // SAFETY: finish_scan ends the running scan of the begun `node` and resets its per-scan context; the ExecState,
        // still owned by the query context, is then borrowed again.
        unsafe {
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
    // SAFETY: ExecCustomScan passes `node`, the CustomScanState `begin` set up (create_state made it a TsBucketScanState);
    // its EState is the one running the plan.
    let (direct, epq) = unsafe { ((*(node as *mut TsBucketScanState)).direct, (*(*node).ss.ps.state).es_epq_active) };
    if !direct.is_null() && epq.is_null() {
        // SAFETY: `direct` is the node's projection, owned by the query context until `end` takes it; project::exec_scan
        // calls `next` with the node as ExecScan would, outside any recheck.
        let projected = unsafe { crate::pg::memory::owned_ref(direct) }.and_then(|d| unsafe { crate::scan::project::exec_scan(node, d, next, next_direct) });
        if let Some(slot) = projected {
            return slot;
        }
    }
    // SAFETY: ExecCustomScan passes `node`, the CustomScanState `begin` set up; ExecScan calls back `next`/`recheck` with it.
    unsafe { exec_scan(&mut (*node).ss, Some(next), Some(recheck)) }
}

#[pg_guard]
pub(super) unsafe extern "C-unwind" fn end(node: *mut pg_sys::CustomScanState) {
    // SAFETY: EndCustomScan runs once per begun `node`: finish_scan ends its scan, then its ExecState is taken out of the
    // holder begin put in the query context, and dropped.
    unsafe {
        finish_scan(node);
        drop(crate::pg::memory::take_owned((*(node as *mut TsBucketScanState)).state));
        let direct = (*(node as *mut TsBucketScanState)).direct;
        if !direct.is_null() {
            drop(crate::pg::memory::take_owned(direct));
        }
    }
}

#[pg_guard]
pub(super) unsafe extern "C-unwind" fn rescan(node: *mut pg_sys::CustomScanState) {
    // Parameters may have changed: start over, re-evaluating the conditions.
    // SAFETY: ExecReScan passes a begun `node`; finish_scan ends its running scan and resets `scan_cxt` before the flag is cleared.
    unsafe {
        finish_scan(node);
        exec_state(node).parallel_done = false;
    }
}

/// Registers TsBucketScan's plan methods, so that plans can be copied and
/// read back (from _PG_init).
pub fn register() {
    // SAFETY: `methods().plan` is a 'static table that RegisterCustomScanMethods may keep; _PG_init calls this once per process.
    unsafe { pg_sys::RegisterCustomScanMethods(&methods().plan) };
}
