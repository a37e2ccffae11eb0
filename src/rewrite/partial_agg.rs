//! In-scan aggregation, planned by a plan rewrite after `standard_planner`.
//!
//! Postgres plans Partial/Finalize aggregation only for parallel and
//! partitionwise plans, so an aggregate over a tsbucket table is planned as
//! `Agg -> TsBucketScan`, every row passing through the executor as a tuple.
//! The rewrite (`rewrite`, called from planner_hook) turns
//!
//! ```text
//!   Agg (simple)                      Finalize Agg
//!     [Sort | Gather]          =>        [Sort | Gather]
//!       TsBucketScan                       TsBucketScan (partial aggregation)
//! ```
//!
//! and, in parallel plans, drops a Partial Aggregate over a parallel
//! TsBucketScan (under Gather, or Sort under Gather Merge), the scan
//! computing the same partial rows.
//!
//! The scan then computes, per bucket and group, the partial (transition)
//! state of each aggregate over the decoded column arrays (`scan::aggregating`,
//! kernels in the `tsbucket-kernels` crate) and returns one row per bucket
//! and group; Postgres combines and finalises them as it does the partial
//! aggregates of parallel workers, HAVING and the select list included.
//!
//! The rewrite happens only when every piece is understood:
//! - the Agg is a plain, sorted or hashed one without grouping sets, over a
//!   TsBucketScan in its plain mode (directly or through a Sort);
//! - every aggregate is a built-in one the kernels compute (count; sum of
//!   int2/int4/float8; avg of int2/int4/float4/float8; min and max of integer-like, float and
//!   timestamp types, variance and stddev of floats) over a column of the
//!   table, without FILTER, DISTINCT or ORDER BY;
//! - every group key is a meta column, the time column, or a recognised time
//!   bucket of the time column (`monotone_in_time`) with a by-value result.
//!
//! Anything else keeps Postgres's plan and gives the same answers row by row.

use crate::catalog::config::{self, Config};
use crate::pg::nodes::{list_ptrs, list_set_ptr, strip};
use crate::scan::agg_plan::{KeyPlan, classify_aggref, classify_key};
use crate::scan::plan::MODE_SCAN;
use pgrx::pg_sys;

/// Rewrites every Agg over a TsBucketScan in `stmt` that the scan can aggregate.
///
/// # Safety
/// `stmt` must be a freshly planned statement.
pub unsafe fn rewrite(stmt: *mut pg_sys::PlannedStmt) {
    if !crate::catalog::gucs::VECTORIZED_AGGREGATION.get() {
        return;
    }
    // SAFETY: `stmt` is freshly planned (this function's contract); its planTree is the top plan node, which walk accepts.
    unsafe { walk((*stmt).planTree, stmt) };
    // SAFETY: `stmt.subplans` is NIL or the statement's List of subplan trees.
    let subplans = unsafe { list_ptrs((*stmt).subplans) };
    for p in subplans {
        // SAFETY: `p` is one of `stmt`'s subplan trees (null for a removed one, which walk skips).
        unsafe { walk(p as *mut pg_sys::Plan, stmt) };
    }
}

/// # Safety
/// `plan` must be null or a plan node of `stmt`.
unsafe fn walk(plan: *mut pg_sys::Plan, stmt: *mut pg_sys::PlannedStmt) {
    if plan.is_null() {
        return;
    }
    // A Partial Aggregate over a parallel scan (under Gather, or a Sort
    // under Gather Merge) gives way to the scan computing the same partial rows.
    // SAFETY: `plan` is a non-null plan node of `stmt` (this function's contract); its lefttree is null or a plan node.
    let partial = unsafe { partial_in_scan((*plan).lefttree, stmt) };
    if let Some(scan) = partial {
        // SAFETY: `plan` is that same node of the freshly planned tree, which the rewrite may change in place.
        unsafe { (*plan).lefttree = scan };
    }
    let walk_list = |list: *mut pg_sys::List| {
        // SAFETY: `list` is the appendplans, mergeplans or custom_plans List of `plan` below: NIL or a List of plan nodes.
        let children = unsafe { list_ptrs(list) };
        for (i, p) in children.into_iter().enumerate() {
            // A partitionwise aggregate's Partial Aggregate over one partition's
            // scan (an Append's child) gives way to the scan, as under Gather.
            // SAFETY: `p` is a child plan node of `plan`, part of `stmt` like `plan` itself; cell `i` of `list` holds it.
            let p = match unsafe { partial_in_scan(p as *mut pg_sys::Plan, stmt) } {
                Some(scan) => {
                    // SAFETY: cell `i` of `list` exists (it held `p`); the scan takes its place in the plan tree.
                    unsafe { list_set_ptr(list, i, scan as *mut std::ffi::c_void) };
                    scan
                }
                None => p as *mut pg_sys::Plan,
            };
            // SAFETY: `p` is that child (or the scan now in its place), part of `stmt`.
            unsafe { walk(p, stmt) };
        }
    };
    // SAFETY: `plan` is non-null, and every plan node starts with its NodeTag.
    let tag = unsafe { (*plan).type_ };
    match tag {
        // SAFETY: `plan` is tagged T_Agg: an Agg node of `stmt`, as try_rewrite requires.
        pg_sys::NodeTag::T_Agg => unsafe { try_rewrite(plan as *mut pg_sys::Agg, stmt) },
        // SAFETY: `plan` is tagged T_Append, so its appendplans field is there to read.
        pg_sys::NodeTag::T_Append => walk_list(unsafe { (*(plan as *mut pg_sys::Append)).appendplans }),
        // SAFETY: `plan` is tagged T_MergeAppend, so its mergeplans field is there to read.
        pg_sys::NodeTag::T_MergeAppend => walk_list(unsafe { (*(plan as *mut pg_sys::MergeAppend)).mergeplans }),
        // SAFETY: `plan` is tagged T_SubqueryScan; its subplan is the subquery's plan tree, part of `stmt`.
        pg_sys::NodeTag::T_SubqueryScan => unsafe { walk((*(plan as *mut pg_sys::SubqueryScan)).subplan, stmt) },
        // SAFETY: `plan` is tagged T_CustomScan, so its custom_plans field is there to read.
        pg_sys::NodeTag::T_CustomScan => walk_list(unsafe { (*(plan as *mut pg_sys::CustomScan)).custom_plans }),
        _ => {}
    }
    // SAFETY: `plan` is still the valid node above; its lefttree (perhaps just replaced) and righttree are null or plan nodes.
    unsafe {
        walk((*plan).lefttree, stmt);
        walk((*plan).righttree, stmt);
    }
}

/// # Safety
/// `plan` must be null or a valid plan node.
unsafe fn is_plain_tsbucket_scan(plan: *mut pg_sys::Plan) -> bool {
    // SAFETY: `plan` is non-null here and a valid plan node (this function's contract), NodeTag first.
    if plan.is_null() || unsafe { (*plan).type_ } != pg_sys::NodeTag::T_CustomScan {
        return false;
    }
    let cscan = plan as *mut pg_sys::CustomScan;
    // SAFETY: `cscan` is tagged T_CustomScan, as is_ours requires, so its custom_scan_tlist field is there to read.
    if unsafe { !crate::scan::exec::is_ours(cscan) || !(*cscan).custom_scan_tlist.is_null() } {
        return false;
    }
    // SAFETY: a TsBucketScan's custom_private is a List of Integer nodes, its mode first.
    let private = unsafe { list_ptrs((*cscan).custom_private) };
    // SAFETY: `private[0]` is that mode Integer node, present (checked non-empty first).
    !private.is_empty() && unsafe { (*(private[0] as *mut pg_sys::Integer)).ival } == MODE_SCAN
}

/// `plan`, if it is a Partial Aggregate (plain or hashed) over a plain
/// TsBucketScan whose aggregates and group keys the scan computes: that scan,
/// turned into one that returns the Partial Aggregate's rows itself (its
/// output: the group columns, then the partial states, as Postgres lays a
/// partial aggregate's target out). A sorted Partial Aggregate over a Sort
/// of the scan becomes that Sort, now of the scan's partial rows by their
/// group keys (a Gather Merge above needs them in that order).
///
/// # Safety
/// `plan` must be null or a plan node of `stmt`.
unsafe fn partial_in_scan(plan: *mut pg_sys::Plan, stmt: *mut pg_sys::PlannedStmt) -> Option<*mut pg_sys::Plan> {
    // SAFETY: `plan` is non-null here and a plan node of `stmt` (this function's contract), NodeTag first.
    if plan.is_null() || unsafe { (*plan).type_ } != pg_sys::NodeTag::T_Agg {
        return None;
    }
    // SAFETY: `plan` is tagged T_Agg; the node lives in the plan tree for the whole rewrite, which writes only other nodes
    // (the scan and the Sort) while this shared reference is alive.
    let a = unsafe { &*(plan as *mut pg_sys::Agg) };
    if a.aggsplit != pg_sys::AggSplit::AGGSPLIT_INITIAL_SERIAL
        || !a.groupingSets.is_null()
        || !a.chain.is_null()
        || !a.plan.qual.is_null()
    {
        return None;
    }
    let child = a.plan.lefttree;
    let (sort, scan) = match a.aggstrategy {
        pg_sys::AggStrategy::AGG_PLAIN | pg_sys::AggStrategy::AGG_HASHED
            // SAFETY: `child` is the Partial Aggregate's input: null or a plan node, as is_plain_tsbucket_scan accepts.
            if unsafe { is_plain_tsbucket_scan(child) } =>
        {
            (None, child as *mut pg_sys::CustomScan)
        }
        pg_sys::AggStrategy::AGG_SORTED
            // SAFETY: `child` is read only when non-null: a plan node whose lefttree is null or a plan node.
            if !child.is_null() && unsafe { (*child).type_ == pg_sys::NodeTag::T_Sort && is_plain_tsbucket_scan((*child).lefttree) } =>
        {
            // SAFETY: `child` is the Sort just checked; its lefttree is the plain TsBucketScan.
            (Some(child as *mut pg_sys::Sort), unsafe { (*child).lefttree } as *mut pg_sys::CustomScan)
        }
        _ => return None,
    };
    // Agg input column -> scan output column (through the Sort, which passes columns on).
    let to_scan_column = |k: i16| -> Option<i16> {
        match sort {
            None => Some(k),
            // SAFETY: `s` is the Sort under the Partial Aggregate; its targetlist holds TargetEntry nodes with valid exprs.
            Some(s) => unsafe { outer_attno(tle_expr((*s).plan.targetlist, k)?) },
        }
    };
    // SAFETY: `scan` is the plain TsBucketScan found above; its scanrelid indexes `stmt.rtable`, whose entry rt_fetch returns.
    let (scanrelid, rte) = unsafe {
        let scanrelid = (*scan).scan.scanrelid;
        (scanrelid, pg_sys::rt_fetch(scanrelid, (*stmt).rtable))
    };
    // SAFETY: `rte` is the parallel scan's RangeTblEntry in the statement's range table.
    let relid = unsafe { (*rte).relid };
    let config = config::lookup(relid)?;
    // SAFETY: `scan` is the TsBucketScan plan node; its target list pointer is read in place.
    let scan_tlist = unsafe { (*scan).scan.plan.targetlist };
    // SAFETY: i < numCols, within the Partial Aggregate's grpColIdx array.
    let group_cols: Vec<i16> = (0..a.numCols as usize).map(|i| unsafe { *a.grpColIdx.add(i) as i16 }).collect();
    // SAFETY: the planner keeps the scanned table locked; RelationIdGetRelation takes a relcache reference on it that the
    // RelationClose after the loop below drops.
    let rel = unsafe { pg_sys::RelationIdGetRelation(relid) };
    if rel.is_null() {
        return None;
    }
    // An Agg input column, as the scan's expression for it.
    // SAFETY: tle_expr reads the entry at a column of `scan_tlist`, the target list of the scan under the Partial Aggregate.
    let resolve = |k: i16| to_scan_column(k).and_then(|sc| unsafe { tle_expr(scan_tlist, sc) });
    let mut out: *mut pg_sys::List = std::ptr::null_mut();
    let mut nkeys = 0;
    let mut aggs = 0;
    let mut time_keys = 0;
    let mut ok = true;
    // (Agg input column, its position in the partial rows) of each group key.
    let mut key_positions: Vec<(i16, i16)> = Vec::new();
    // SAFETY: the Partial Aggregate's targetlist is NIL or a List of TargetEntry nodes.
    let entries = unsafe { list_ptrs(a.plan.targetlist) };
    for (i, te) in entries.into_iter().enumerate() {
        // SAFETY: `te` is a TargetEntry of that list; its expr is an expression node, NodeTag first.
        let (e, is_aggref) = unsafe {
            let e = (*(te as *mut pg_sys::TargetEntry)).expr as *mut pg_sys::Node;
            (e, (*e).type_ == pg_sys::NodeTag::T_Aggref)
        };
        let resno = (i + 1) as i16;
        let expr = if is_aggref {
            let aggref = e as *mut pg_sys::Aggref;
            // SAFETY: `aggref` is an Aggref of the Partial Aggregate's targetlist and `rel` the open table of `config`
            // until the RelationClose below (computable_args' contract).
            let args = unsafe { computable_args(aggref, &resolve, &config, rel, scanrelid) };
            let Some(args) = args else {
                ok = false;
                break;
            };
            // SAFETY: `aggref` is a valid Aggref: copyObjectImpl deep-copies it and arg_list builds the copy's arguments over
            // the scan, both in the planner's CurrentMemoryContext.
            let partial = unsafe {
                let partial = pg_sys::copyObjectImpl(aggref as *const _) as *mut pg_sys::Aggref;
                (*partial).args = arg_list(&args);
                partial
            };
            aggs += 1;
            partial as *mut pg_sys::Node
        } else {
            // A group column, ahead of every aggregate.
            // SAFETY: `e` is the target entry's expression node, as outer_attno requires.
            let Some(k) = unsafe { outer_attno(e) }.filter(|k| group_cols.contains(k)) else {
                ok = false;
                break;
            };
            let Some(x) = resolve(k) else {
                ok = false;
                break;
            };
            key_positions.push((k, resno));
            // SAFETY: `x` is the scan's expression for this group column, a valid expression for classify_key.
            match unsafe { classify_key(x, &config, scanrelid) } {
                Some(KeyPlan::Meta(_)) => {}
                Some(_) => time_keys += 1,
                None => {
                    ok = false;
                    break;
                }
            }
            if aggs > 0 {
                ok = false;
                break;
            }
            nkeys += 1;
            // SAFETY: `x` is a valid expression node, deep-copied in the planner's CurrentMemoryContext.
            unsafe { pg_sys::copyObjectImpl(x as *const _) as *mut pg_sys::Node }
        };
        // SAFETY: makeTargetEntry wraps `expr` (the copy made above) and lappend appends it to `out`, NIL or the List built
        // by this loop, both allocating in the planner's CurrentMemoryContext.
        out = unsafe { pg_sys::lappend(out, pg_sys::makeTargetEntry(expr as *mut pg_sys::Expr, resno, std::ptr::null_mut(), false) as *mut _) };
    }
    // SAFETY: `rel` is the relcache reference RelationIdGetRelation gave partial_in_scan above, dropped once here.
    unsafe { pg_sys::RelationClose(rel) };
    if !ok || time_keys > 1 || nkeys != group_cols.len() {
        return None;
    }
    // The Sort's keys, as positions in the partial rows.
    let sort_positions: Option<Vec<i16>> = match sort {
        None => Some(Vec::new()),
        Some(s) => {
            // SAFETY: `s` is the Sort under the Partial Aggregate; numCols counts the entries of its sortColIdx array.
            let ncols = unsafe { (*s).numCols } as usize;
            (0..ncols)
                .map(|i| {
                    // SAFETY: i < numCols, within the Sort's sortColIdx array.
                    let k = unsafe { *(*s).sortColIdx.add(i) } as i16;
                    key_positions.iter().find(|(c, _)| *c == k).map(|(_, p)| *p)
                })
                .collect()
        }
    };
    let sort_positions = sort_positions?;
    // SAFETY: `scan` is the plain TsBucketScan under the Partial Aggregate, rewritten in place to return `out` with the
    // aggregate's row estimate.
    unsafe {
        into_partial_scan(scan, out, nkeys as i32);
        (*scan).scan.plan.plan_rows = a.plan.plan_rows;
    }
    match sort {
        None => Some(scan as *mut pg_sys::Plan),
        Some(s) => {
            // SAFETY: `s` is the Sort between the Partial Aggregate and the scan; references builds its new OUTER_VAR target
            // list over `out` in the planner's CurrentMemoryContext.
            unsafe { (*s).plan.targetlist = references(out, pg_sys::OUTER_VAR) };
            for (i, &p) in sort_positions.iter().enumerate() {
                // SAFETY: sort_positions has one entry per slot of the Sort's sortColIdx (numCols, collected above).
                unsafe { *(*s).sortColIdx.add(i) = p as pg_sys::AttrNumber };
            }
            // SAFETY: `s` is still that Sort node; it now sorts the partial rows, as many as the Partial Aggregate made.
            unsafe { (*s).plan.plan_rows = a.plan.plan_rows };
            Some(s as *mut pg_sys::Plan)
        }
    }
}

/// Makes `scan` return `output` (group keys, then partial aggregates): its
/// target list references them as its scan tuple, its quals move to
/// custom_exprs (the scan evaluates them itself).
///
/// # Safety
/// `scan` must be a plain TsBucketScan plan node; `output` a target list.
unsafe fn into_partial_scan(scan: *mut pg_sys::CustomScan, output: *mut pg_sys::List, nkeys: i32) {
    // SAFETY: `scan` is a plain TsBucketScan (this function's contract), rewritten in place; references builds its
    // INDEX_VAR target list over `output` in the planner's CurrentMemoryContext.
    unsafe {
        (*scan).custom_scan_tlist = output;
        (*scan).scan.plan.targetlist = references(output, pg_sys::INDEX_VAR);
        (*scan).custom_exprs = (*scan).scan.plan.qual;
        (*scan).scan.plan.qual = std::ptr::null_mut();
        // Partial rows only go forward.
        (*scan).flags &= !pg_sys::CUSTOMPATH_SUPPORT_BACKWARD_SCAN;
    }
    // SAFETY: the TsBucketScan's custom_private is its List of Integer nodes (mode, then number of group keys).
    let private = unsafe { list_ptrs((*scan).custom_private) };
    // SAFETY: `private[0]` and `private[1]` are those two Integer nodes, owned by the plan and written in place.
    unsafe {
        (*(private[0] as *mut pg_sys::Integer)).ival = crate::scan::plan::MODE_PARTIAL_AGG;
        (*(private[1] as *mut pg_sys::Integer)).ival = nkeys;
    }
}

/// Vars (`varno`: INDEX_VAR for the scan's own target list, OUTER_VAR for a
/// node above) referencing each column of `output` in turn.
///
/// # Safety
/// `output` must be NIL or a target list.
unsafe fn references(output: *mut pg_sys::List, varno: i32) -> *mut pg_sys::List {
    let mut out: *mut pg_sys::List = std::ptr::null_mut();
    // SAFETY: `output` is NIL or a List of TargetEntry nodes (this function's contract).
    let entries = unsafe { list_ptrs(output) };
    for (i, te) in entries.into_iter().enumerate() {
        let attno = (i + 1) as i16;
        // SAFETY: `te` is a TargetEntry of `output` with a valid expression `e`; makeVar, makeTargetEntry and lappend
        // allocate the referencing Var, its entry and the list cell in the planner's CurrentMemoryContext.
        unsafe {
            let e = (*(te as *mut pg_sys::TargetEntry)).expr as *mut pg_sys::Node;
            let var = pg_sys::makeVar(varno, attno, pg_sys::exprType(e), pg_sys::exprTypmod(e), pg_sys::exprCollation(e), 0);
            out = pg_sys::lappend(out, pg_sys::makeTargetEntry(var as *mut pg_sys::Expr, attno, std::ptr::null_mut(), false) as *mut _);
        }
    }
    out
}

/// The argument of an Aggref above the scan, as the scan's expression for it
/// (`resolve` maps the node's input column to it): Some(None) for count(*),
/// None when it is not a single input column.
/// The arguments of `aggref` (an Aggref of an Agg over the scan, whose
/// arguments reference its input columns) as expressions over the scan's
/// relation, when the scan computes the aggregate; `resolve` maps an input
/// column to the scan's expression for it.
///
/// # Safety
/// `aggref` must be a valid Aggref; `rel` the open table of `config`.
unsafe fn computable_args(
    aggref: *mut pg_sys::Aggref,
    resolve: impl Fn(i16) -> Option<*mut pg_sys::Node>,
    config: &Config,
    rel: pg_sys::Relation,
    scanrelid: u32,
) -> Option<Vec<*mut pg_sys::Node>> {
    // SAFETY: `aggref` is a valid Aggref (this function's contract): its args is a List of TargetEntry whose exprs are
    // nodes, and strip follows only RelabelType nodes of the resolved scan expressions.
    let args = unsafe {
        list_ptrs((*aggref).args)
            .into_iter()
            .map(|te| over_scan((*(te as *mut pg_sys::TargetEntry)).expr as *mut pg_sys::Node, &resolve))
            .collect::<Option<Vec<_>>>()?
    };
    // SAFETY: `aggref` is valid and `rel` the open table of `config`, the contract classify_aggref shares with this function.
    let _ = unsafe { classify_aggref(aggref, &args, config, rel, scanrelid, &mut Vec::new()) }?;
    Some(args)
}

/// An aggregate argument `e` (over the Agg's input columns) as an
/// expression over the scan's relation: the scan's expression for an input
/// column, or a copy of `e` whose input-column Vars are the scan's Vars for
/// them when that reads a document field (`(doc->>'k')::float8`); None
/// otherwise, or where a column it reads is no plain column of the scan.
///
/// # Safety
/// `e` must be a valid expression of the Agg; `resolve`'s expressions valid.
unsafe fn over_scan(e: *mut pg_sys::Node, resolve: &dyn Fn(i16) -> Option<*mut pg_sys::Node>) -> Option<*mut pg_sys::Node> {
    // SAFETY: `e` is a valid expression node (the contract), as outer_attno requires.
    if let Some(k) = unsafe { outer_attno(e) } {
        // SAFETY: `resolve`'s expressions are valid (the contract); strip follows RelabelTypes only.
        return resolve(k).map(|x| unsafe { strip(x) });
    }
    struct Subst<'a> {
        resolve: &'a dyn Fn(i16) -> Option<*mut pg_sys::Node>,
        ok: bool,
    }
    #[pgrx::pg_guard]
    unsafe extern "C-unwind" fn subst(node: *mut pg_sys::Node, context: *mut std::ffi::c_void) -> bool {
        if node.is_null() {
            return false;
        }
        // SAFETY: `context` is the Subst over_scan passes, alive for the walk; `node` a node of the copied tree, read as a
        // Var only when tagged T_Var, and overwritten in place by the scan's Var (same struct) it stands for.
        unsafe {
            let cx = &mut *(context as *mut Subst);
            if (*node).type_ == pg_sys::NodeTag::T_Var {
                let v = node as *mut pg_sys::Var;
                let scan_var = ((*v).varno == pg_sys::OUTER_VAR).then(|| (cx.resolve)((*v).varattno)).flatten().map(|x| strip(x));
                match scan_var.filter(|x| (**x).type_ == pg_sys::NodeTag::T_Var) {
                    Some(x) => *v = *(x as *mut pg_sys::Var),
                    None => cx.ok = false,
                }
                return !cx.ok;
            }
            pg_sys::expression_tree_walker(node, Some(subst), context)
        }
    }
    // SAFETY: copyObjectImpl deep-copies the valid expression `e` in the planner's CurrentMemoryContext; the walk only
    // rewrites that copy's Vars, and `cx` outlives it.
    unsafe {
        let copy = pg_sys::copyObjectImpl(e as *const _) as *mut pg_sys::Node;
        let mut cx = Subst { resolve, ok: true };
        subst(copy, &mut cx as *mut Subst as *mut std::ffi::c_void);
        // Only the forms that read a document field (agg_plan::classify_aggref): a cast of `->>`.
        (cx.ok && (*copy).type_ == pg_sys::NodeTag::T_CoerceViaIO).then_some(copy)
    }
}

/// The type of `aggref`'s partial state as passed between plan nodes: its
/// transition type, serialized to bytea when that is `internal`.
///
/// # Safety
/// `aggref` must be a valid Aggref.
unsafe fn partial_type(aggref: *mut pg_sys::Aggref) -> pg_sys::Oid {
    // SAFETY: `aggref` is a valid Aggref (this function's contract), its aggtranstype read in place.
    let transtype = unsafe { (*aggref).aggtranstype };
    if transtype == pg_sys::INTERNALOID { pg_sys::BYTEAOID } else { transtype }
}

/// A target list of copies of `args`, as an Aggref's arguments.
///
/// # Safety
/// `args` must be valid expression nodes.
unsafe fn arg_list(args: &[*mut pg_sys::Node]) -> *mut pg_sys::List {
    let mut list: *mut pg_sys::List = std::ptr::null_mut();
    for (i, &x) in args.iter().enumerate() {
        // SAFETY: `x` is a valid expression node (this function's contract); copyObjectImpl, makeTargetEntry and lappend
        // allocate its copy, the entry and the list cell in the planner's CurrentMemoryContext.
        list = unsafe {
            let te = pg_sys::makeTargetEntry(pg_sys::copyObjectImpl(x as *const _) as *mut pg_sys::Expr, (i + 1) as i16, std::ptr::null_mut(), false);
            pg_sys::lappend(list, te as *mut _)
        };
    }
    list
}

/// # Safety
/// `tlist` must be NIL or a target list.
unsafe fn tle_expr(tlist: *mut pg_sys::List, resno: i16) -> Option<*mut pg_sys::Node> {
    // SAFETY: `tlist` is NIL or a List of TargetEntry nodes (this function's contract).
    let entries = unsafe { list_ptrs(tlist) };
    let te = *entries.get((resno as usize).checked_sub(1)?)? as *mut pg_sys::TargetEntry;
    // SAFETY: `te` is the entry at position `resno` of that target list.
    Some(unsafe { (*te).expr } as *mut pg_sys::Node)
}

/// The special Var `e` references (OUTER_VAR), by attribute number.
///
/// # Safety
/// `e` must be a valid expression node.
unsafe fn outer_attno(e: *mut pg_sys::Node) -> Option<i16> {
    // SAFETY: `e` is a valid node (this function's contract), read as a Var only when tagged T_Var.
    unsafe {
        ((*e).type_ == pg_sys::NodeTag::T_Var && (*(e as *mut pg_sys::Var)).varno == pg_sys::OUTER_VAR).then(|| (*(e as *mut pg_sys::Var)).varattno)
    }
}

/// # Safety
/// `agg` must be an Agg plan node of `stmt`.
unsafe fn try_rewrite(agg: *mut pg_sys::Agg, stmt: *mut pg_sys::PlannedStmt) {
    // SAFETY: `agg` is an Agg plan node of `stmt` (this function's contract), alive in the plan tree for the whole rewrite;
    // no other reference to it exists while try_rewrite runs.
    let a = unsafe { &mut *agg };
    if a.aggsplit != pg_sys::AggSplit::AGGSPLIT_SIMPLE
        || !a.groupingSets.is_null()
        || !a.chain.is_null()
        || !matches!(a.aggstrategy, pg_sys::AggStrategy::AGG_PLAIN | pg_sys::AggStrategy::AGG_SORTED | pg_sys::AggStrategy::AGG_HASHED)
    {
        return;
    }
    let child = a.plan.lefttree;
    // Between the Agg and the scan: nothing, a Sort (for a sorted Agg), or
    // a Gather over a parallel scan (whose rows the leader aggregates):
    // nodes that pass columns on.
    let passes_on = |p: *mut pg_sys::Plan| {
        // SAFETY: `p` is read only when non-null: a plan node whose lefttree is null or a plan node.
        !p.is_null() && unsafe { matches!((*p).type_, pg_sys::NodeTag::T_Sort | pg_sys::NodeTag::T_Gather) && is_plain_tsbucket_scan((*p).lefttree) }
    };
    // SAFETY: `child` is the Agg's lefttree, null or a plan node, as is_plain_tsbucket_scan accepts.
    let (between, scan) = if unsafe { is_plain_tsbucket_scan(child) } {
        (None, child as *mut pg_sys::CustomScan)
    } else if passes_on(child) {
        // SAFETY: `child` is the Sort or Gather passes_on just checked; its lefttree is the plain TsBucketScan.
        (Some(child), unsafe { (*child).lefttree } as *mut pg_sys::CustomScan)
    } else {
        return;
    };
    // SAFETY: `between`, when present, is the non-null Sort or Gather checked above, NodeTag first.
    let sort = between.filter(|p| unsafe { (**p).type_ == pg_sys::NodeTag::T_Sort }).map(|p| p as *mut pg_sys::Sort);
    // SAFETY: `scan` is the plain TsBucketScan under the Agg; its scanrelid indexes `stmt.rtable`, whose entry rt_fetch returns.
    let (scanrelid, rte) = unsafe {
        let scanrelid = (*scan).scan.scanrelid;
        (scanrelid, pg_sys::rt_fetch(scanrelid, (*stmt).rtable))
    };
    // SAFETY: `rte` is the RangeTblEntry of the table the Agg's scan reads, in the statement's range table.
    let relid = unsafe { (*rte).relid };
    let Some(config) = config::lookup(relid) else { return };
    // SAFETY: `scan` is the TsBucketScan plan node under the Agg; its targetlist pointer is read in place.
    let scan_tlist = unsafe { (*scan).scan.plan.targetlist };
    // Agg input column -> scan output column (through the node between).
    let to_scan_column = |k: i16| -> Option<i16> {
        match between {
            None => Some(k),
            // SAFETY: `p` is the Sort or Gather between the Agg and the scan; its targetlist holds TargetEntry nodes.
            Some(p) => unsafe { outer_attno(tle_expr((*p).targetlist, k)?) },
        }
    };
    // An Agg input column, as the scan's expression for it.
    // SAFETY: tle_expr reads the entry at a column of `scan_tlist`, the target list of the scan under the (simple) Agg.
    let resolve = |k: i16| to_scan_column(k).and_then(|sc| unsafe { tle_expr(scan_tlist, sc) });

    // Group keys.
    let ncols = a.numCols as usize;
    // SAFETY: i < numCols, within the Agg's grpColIdx array.
    let group_cols: Vec<i16> = (0..ncols).map(|i| unsafe { *a.grpColIdx.add(i) as i16 }).collect();
    let mut key_exprs = Vec::with_capacity(ncols);
    let mut time_keys = 0;
    for &k in &group_cols {
        let Some(e) = resolve(k) else { return };
        // SAFETY: `e` is the scan's expression for group column `k`, a valid expression for classify_key.
        match unsafe { classify_key(e, &config, scanrelid) } {
            Some(KeyPlan::Meta(_)) => {}
            Some(_) => time_keys += 1,
            None => return,
        }
        key_exprs.push(e);
    }
    if time_keys > 1 {
        return;
    }
    let new_position_of = |k: i16| group_cols.iter().position(|&g| g == k).map(|i| (i + 1) as i16);

    // Aggregates, and plain Vars (which must be group columns).
    // SAFETY: the Agg's targetlist and qual are expression trees of the plan; pull_var_clause returns fresh Lists of their
    // Vars and Aggrefs, which list_concat joins, in the planner's CurrentMemoryContext.
    let found = unsafe {
        let mut found = pg_sys::pull_var_clause(
            a.plan.targetlist as *mut pg_sys::Node,
            (pg_sys::PVC_INCLUDE_AGGREGATES | pg_sys::PVC_RECURSE_WINDOWFUNCS | pg_sys::PVC_RECURSE_PLACEHOLDERS) as i32,
        );
        found = pg_sys::list_concat(
            found,
            pg_sys::pull_var_clause(
                a.plan.qual as *mut pg_sys::Node,
                (pg_sys::PVC_INCLUDE_AGGREGATES | pg_sys::PVC_RECURSE_WINDOWFUNCS | pg_sys::PVC_RECURSE_PLACEHOLDERS) as i32,
            ),
        );
        found
    };
    // SAFETY: the table the Agg reads is locked by the planner; RelationIdGetRelation takes a relcache reference on it,
    // which try_rewrite's RelationClose after the loop below drops.
    let rel = unsafe { pg_sys::RelationIdGetRelation(relid) };
    if rel.is_null() {
        return;
    }
    let mut vars: Vec<(*mut pg_sys::Var, i16)> = Vec::new();
    // Distinct aggregates (equal Aggrefs share a partial column) and their uses.
    let mut distinct: Vec<(*mut pg_sys::Aggref, Vec<*mut pg_sys::Node>)> = Vec::new();
    let mut uses: Vec<(*mut pg_sys::Aggref, usize)> = Vec::new();
    let mut ok = true;
    // SAFETY: `found` is the List of Var and Aggref nodes pulled above.
    let found_nodes = unsafe { list_ptrs(found) };
    for n in found_nodes {
        let n = n as *mut pg_sys::Node;
        // SAFETY: `n` is a Var or Aggref pulled from the Agg's expressions, NodeTag first.
        match unsafe { (*n).type_ } {
            // SAFETY: `n` is tagged T_Var, a valid node for outer_attno.
            pg_sys::NodeTag::T_Var => match unsafe { outer_attno(n) }.and_then(new_position_of) {
                Some(pos) => vars.push((n as *mut pg_sys::Var, pos)),
                None => ok = false,
            },
            pg_sys::NodeTag::T_Aggref => {
                let aggref = n as *mut pg_sys::Aggref;
                // SAFETY: `aggref` and each kept `d` are Aggref nodes of the Agg; equal only compares the two trees.
                if let Some(i) = distinct.iter().position(|(d, _)| unsafe { pg_sys::equal(*d as *const _, aggref as *const _) }) {
                    uses.push((aggref, i));
                    continue;
                }
                // SAFETY: `aggref` is an Aggref of the simple Agg's expressions and `rel` the open table of `config`
                // until the RelationClose below, as computable_args requires.
                let args = unsafe { computable_args(aggref, &resolve, &config, rel, scanrelid) };
                let Some(args) = args else {
                    ok = false;
                    break;
                };
                uses.push((aggref, distinct.len()));
                distinct.push((aggref, args));
            }
            _ => ok = false,
        }
        if !ok {
            break;
        }
    }
    // SAFETY: `rel` is the relcache reference try_rewrite took above, dropped exactly once here.
    unsafe { pg_sys::RelationClose(rel) };
    // A Sort must order by group columns only (it is there for the grouping).
    let sort_cols: Option<Vec<i16>> = match sort {
        None => Some(Vec::new()),
        Some(s) => {
            // SAFETY: `s` is the Sort between the Agg and the scan; numCols counts its sortColIdx entries.
            let ncols = unsafe { (*s).numCols } as usize;
            // SAFETY: each i < numCols indexes that Sort's sortColIdx array.
            (0..ncols).map(|i| new_position_of(unsafe { *(*s).sortColIdx.add(i) } as i16)).collect()
        }
    };
    let Some(sort_cols) = sort_cols else { return };
    if !ok || distinct.is_empty() && ncols == 0 {
        return;
    }

    // Everything is understood: rewrite. The scan's output: keys, then partial states.
    let mut scan_out: *mut pg_sys::List = std::ptr::null_mut();
    let mut resno: i16 = 1;
    for &e in &key_exprs {
        // SAFETY: `e` is a group key expression over the scan; its copy, entry and list cell are allocated in the planner's
        // CurrentMemoryContext and appended to `scan_out`, NIL or the List built here.
        scan_out = unsafe {
            let copy = pg_sys::copyObjectImpl(e as *const _) as *mut pg_sys::Expr;
            pg_sys::lappend(scan_out, pg_sys::makeTargetEntry(copy, resno, std::ptr::null_mut(), false) as *mut _)
        };
        resno += 1;
    }
    for (aggref, args) in &distinct {
        // SAFETY: `aggref` is one of the distinct Aggrefs found above: its deep copy becomes the partial aggregate, with
        // arguments over the scan from arg_list, all allocated in the planner's CurrentMemoryContext.
        scan_out = unsafe {
            let partial = pg_sys::copyObjectImpl(*aggref as *const _) as *mut pg_sys::Aggref;
            (*partial).aggsplit = pg_sys::AggSplit::AGGSPLIT_INITIAL_SERIAL;
            (*partial).aggtype = partial_type(*aggref);
            (*partial).args = arg_list(args);
            pg_sys::lappend(scan_out, pg_sys::makeTargetEntry(partial as *mut pg_sys::Expr, resno, std::ptr::null_mut(), false) as *mut _)
        };
        resno += 1;
    }
    let nkeys = key_exprs.len() as i32;
    // SAFETY: `scan` is the plain TsBucketScan under the Agg, rewritten in place to return `scan_out`; its row estimate is
    // capped from the Agg's.
    unsafe {
        into_partial_scan(scan, scan_out, nkeys);
        (*scan).scan.plan.plan_rows = (*scan).scan.plan.plan_rows.min(a.plan.plan_rows.max(1.0) * 4.0);
    }
    if let Some(p) = between {
        // SAFETY: `p` is the Sort or Gather between the Agg and the scan: it now passes the scan's partial rows on, through
        // OUTER_VAR Vars that references builds in the planner's CurrentMemoryContext.
        unsafe {
            (*p).targetlist = references(scan_out, pg_sys::OUTER_VAR);
            (*p).plan_rows = (*scan).scan.plan.plan_rows;
        }
    }
    if let Some(s) = sort {
        for (i, &c) in sort_cols.iter().enumerate() {
            // SAFETY: sort_cols has one entry per sortColIdx slot of the Sort `s` (numCols of them, collected above).
            unsafe { *(*s).sortColIdx.add(i) = c as pg_sys::AttrNumber };
        }
    }
    for (i, _) in group_cols.iter().enumerate() {
        // SAFETY: i < numCols, so this writes within the Agg's own grpColIdx array.
        unsafe { *a.grpColIdx.add(i) = (i + 1) as pg_sys::AttrNumber };
    }
    for (var, pos) in vars {
        // SAFETY: `var` is a Var pulled from the Agg's target list or qual, now pointing at the group column's new position.
        unsafe { (*var).varattno = pos };
    }
    for (aggref, i) in uses {
        let column = (nkeys as usize + i + 1) as i16;
        // SAFETY: `aggref` is an Aggref in the Agg's own expressions: it becomes the final step, reading its partial state
        // from the scan's output through a Var and entry allocated in the planner's CurrentMemoryContext.
        unsafe {
            (*aggref).aggsplit = pg_sys::AggSplit::AGGSPLIT_FINAL_DESERIAL;
            let state = pg_sys::makeVar(pg_sys::OUTER_VAR, column, partial_type(aggref), -1, pg_sys::InvalidOid, 0);
            let te = pg_sys::makeTargetEntry(state as *mut pg_sys::Expr, 1, std::ptr::null_mut(), false);
            (*aggref).args = pg_sys::lappend(std::ptr::null_mut(), te as *mut _);
        }
    }
    a.aggsplit = pg_sys::AggSplit::AGGSPLIT_FINAL_DESERIAL;
}
