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
//! state of each aggregate over the decoded column arrays (`am::aggscan`,
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
use crate::pg::nodes::{list_ptrs, strip};
use crate::scan::agg_plan::{KeyPlan, classify_aggref, classify_key};
use crate::scan::plan::MODE_SCAN;
use pgrx::pg_sys;

/// Rewrites every Agg over a TsBucketScan in `stmt` that the scan can aggregate.
///
/// # Safety
/// `stmt` must be a freshly planned statement.
pub unsafe fn rewrite(stmt: *mut pg_sys::PlannedStmt) {
    unsafe {
        if !crate::catalog::gucs::VECTORIZED_AGGREGATION.get() {
            return;
        }
        walk((*stmt).planTree, stmt);
        for p in list_ptrs((*stmt).subplans) {
            walk(p as *mut pg_sys::Plan, stmt);
        }
    }
}

unsafe fn walk(plan: *mut pg_sys::Plan, stmt: *mut pg_sys::PlannedStmt) {
    unsafe {
        if plan.is_null() {
            return;
        }
        // A Partial Aggregate over a parallel scan (under Gather, or a Sort
        // under Gather Merge) gives way to the scan computing the same partial rows.
        if let Some(scan) = partial_in_scan((*plan).lefttree, stmt) {
            (*plan).lefttree = scan;
        }
        match (*plan).type_ {
            pg_sys::NodeTag::T_Agg => try_rewrite(plan as *mut pg_sys::Agg, stmt),
            pg_sys::NodeTag::T_Append => list_ptrs((*(plan as *mut pg_sys::Append)).appendplans).into_iter().for_each(|p| walk(p as _, stmt)),
            pg_sys::NodeTag::T_MergeAppend => list_ptrs((*(plan as *mut pg_sys::MergeAppend)).mergeplans).into_iter().for_each(|p| walk(p as _, stmt)),
            pg_sys::NodeTag::T_SubqueryScan => walk((*(plan as *mut pg_sys::SubqueryScan)).subplan, stmt),
            pg_sys::NodeTag::T_CustomScan => list_ptrs((*(plan as *mut pg_sys::CustomScan)).custom_plans).into_iter().for_each(|p| walk(p as _, stmt)),
            _ => {}
        }
        walk((*plan).lefttree, stmt);
        walk((*plan).righttree, stmt);
    }
}

unsafe fn is_plain_tsbucket_scan(plan: *mut pg_sys::Plan) -> bool {
    unsafe {
        if plan.is_null() || (*plan).type_ != pg_sys::NodeTag::T_CustomScan {
            return false;
        }
        let cscan = plan as *mut pg_sys::CustomScan;
        if !crate::scan::exec::is_ours(cscan) || !(*cscan).custom_scan_tlist.is_null() {
            return false;
        }
        let private = list_ptrs((*cscan).custom_private);
        !private.is_empty() && (*(private[0] as *mut pg_sys::Integer)).ival == MODE_SCAN
    }
}

/// `plan`, if it is a Partial Aggregate (plain or hashed) over a plain
/// TsBucketScan whose aggregates and group keys the scan computes: that scan,
/// turned into one that returns the Partial Aggregate's rows itself (its
/// output: the group columns, then the partial states, as Postgres lays a
/// partial aggregate's target out). A sorted Partial Aggregate over a Sort
/// of the scan becomes that Sort, now of the scan's partial rows by their
/// group keys (a Gather Merge above needs them in that order).
unsafe fn partial_in_scan(plan: *mut pg_sys::Plan, stmt: *mut pg_sys::PlannedStmt) -> Option<*mut pg_sys::Plan> {
    unsafe {
        if plan.is_null() || (*plan).type_ != pg_sys::NodeTag::T_Agg {
            return None;
        }
        let a = &*(plan as *mut pg_sys::Agg);
        if a.aggsplit != pg_sys::AggSplit::AGGSPLIT_INITIAL_SERIAL
            || !a.groupingSets.is_null()
            || !a.chain.is_null()
            || !a.plan.qual.is_null()
        {
            return None;
        }
        let child = a.plan.lefttree;
        let (sort, scan) = match a.aggstrategy {
            pg_sys::AggStrategy::AGG_PLAIN | pg_sys::AggStrategy::AGG_HASHED if is_plain_tsbucket_scan(child) => (None, child as *mut pg_sys::CustomScan),
            pg_sys::AggStrategy::AGG_SORTED
                if !child.is_null() && (*child).type_ == pg_sys::NodeTag::T_Sort && is_plain_tsbucket_scan((*child).lefttree) =>
            {
                (Some(child as *mut pg_sys::Sort), (*child).lefttree as *mut pg_sys::CustomScan)
            }
            _ => return None,
        };
        // Agg input column -> scan output column (through the Sort, which passes columns on).
        let to_scan_column = |k: i16| -> Option<i16> {
            match sort {
                None => Some(k),
                Some(s) => outer_attno(tle_expr((*s).plan.targetlist, k)?),
            }
        };
        let scanrelid = (*scan).scan.scanrelid;
        let rte = pg_sys::rt_fetch(scanrelid, (*stmt).rtable);
        let config = config::lookup((*rte).relid)?;
        let scan_tlist = (*scan).scan.plan.targetlist;
        let group_cols: Vec<i16> = (0..a.numCols as usize).map(|i| *a.grpColIdx.add(i) as i16).collect();
        let rel = pg_sys::RelationIdGetRelation((*rte).relid);
        if rel.is_null() {
            return None;
        }
        let mut out: *mut pg_sys::List = std::ptr::null_mut();
        let mut nkeys = 0;
        let mut aggs = 0;
        let mut time_keys = 0;
        let mut ok = true;
        // (Agg input column, its position in the partial rows) of each group key.
        let mut key_positions: Vec<(i16, i16)> = Vec::new();
        for (i, te) in list_ptrs(a.plan.targetlist).into_iter().enumerate() {
            let e = (*(te as *mut pg_sys::TargetEntry)).expr as *mut pg_sys::Node;
            let resno = (i + 1) as i16;
            let expr = if (*e).type_ == pg_sys::NodeTag::T_Aggref {
                let aggref = e as *mut pg_sys::Aggref;
                let Some(args) = computable_args(aggref, |k| to_scan_column(k).and_then(|sc| tle_expr(scan_tlist, sc)), &config, rel, scanrelid) else {
                    ok = false;
                    break;
                };
                let partial = pg_sys::copyObjectImpl(aggref as *const _) as *mut pg_sys::Aggref;
                (*partial).args = arg_list(&args);
                aggs += 1;
                partial as *mut pg_sys::Node
            } else {
                // A group column, ahead of every aggregate.
                let Some(k) = outer_attno(e).filter(|k| group_cols.contains(k)) else {
                    ok = false;
                    break;
                };
                let Some(x) = to_scan_column(k).and_then(|sc| tle_expr(scan_tlist, sc)) else {
                    ok = false;
                    break;
                };
                key_positions.push((k, resno));
                match classify_key(x, &config, scanrelid) {
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
                pg_sys::copyObjectImpl(x as *const _) as *mut pg_sys::Node
            };
            out = pg_sys::lappend(out, pg_sys::makeTargetEntry(expr as *mut pg_sys::Expr, resno, std::ptr::null_mut(), false) as *mut _);
        }
        pg_sys::RelationClose(rel);
        if !ok || time_keys > 1 || nkeys != group_cols.len() {
            return None;
        }
        // The Sort's keys, as positions in the partial rows.
        let sort_positions: Option<Vec<i16>> = match sort {
            None => Some(Vec::new()),
            Some(s) => (0..(*s).numCols as usize)
                .map(|i| {
                    let k = *(*s).sortColIdx.add(i) as i16;
                    key_positions.iter().find(|(c, _)| *c == k).map(|(_, p)| *p)
                })
                .collect(),
        };
        let sort_positions = sort_positions?;
        into_partial_scan(scan, out, nkeys as i32);
        (*scan).scan.plan.plan_rows = a.plan.plan_rows;
        match sort {
            None => Some(scan as *mut pg_sys::Plan),
            Some(s) => {
                (*s).plan.targetlist = references(out, pg_sys::OUTER_VAR);
                for (i, &p) in sort_positions.iter().enumerate() {
                    *(*s).sortColIdx.add(i) = p as pg_sys::AttrNumber;
                }
                (*s).plan.plan_rows = a.plan.plan_rows;
                Some(s as *mut pg_sys::Plan)
            }
        }
    }
}

/// Makes `scan` return `output` (group keys, then partial aggregates): its
/// target list references them as its scan tuple, its quals move to
/// custom_exprs (the scan evaluates them itself).
unsafe fn into_partial_scan(scan: *mut pg_sys::CustomScan, output: *mut pg_sys::List, nkeys: i32) {
    unsafe {
        (*scan).custom_scan_tlist = output;
        (*scan).scan.plan.targetlist = references(output, pg_sys::INDEX_VAR);
        (*scan).custom_exprs = (*scan).scan.plan.qual;
        (*scan).scan.plan.qual = std::ptr::null_mut();
        // Partial rows only go forward.
        (*scan).flags &= !pg_sys::CUSTOMPATH_SUPPORT_BACKWARD_SCAN;
        let private = list_ptrs((*scan).custom_private);
        (*(private[0] as *mut pg_sys::Integer)).ival = crate::scan::plan::MODE_PARTIAL_AGG;
        (*(private[1] as *mut pg_sys::Integer)).ival = nkeys;
    }
}

/// Vars (`varno`: INDEX_VAR for the scan's own target list, OUTER_VAR for a
/// node above) referencing each column of `output` in turn.
unsafe fn references(output: *mut pg_sys::List, varno: i32) -> *mut pg_sys::List {
    unsafe {
        let mut out: *mut pg_sys::List = std::ptr::null_mut();
        for (i, te) in list_ptrs(output).into_iter().enumerate() {
            let e = (*(te as *mut pg_sys::TargetEntry)).expr as *mut pg_sys::Node;
            let var = pg_sys::makeVar(varno, (i + 1) as i16, pg_sys::exprType(e), pg_sys::exprTypmod(e), pg_sys::exprCollation(e), 0);
            out = pg_sys::lappend(out, pg_sys::makeTargetEntry(var as *mut pg_sys::Expr, (i + 1) as i16, std::ptr::null_mut(), false) as *mut _);
        }
        out
    }
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
    // SAFETY: node reads of a valid Aggref's argument list.
    unsafe {
        let args = list_ptrs((*aggref).args)
            .into_iter()
            .map(|te| outer_attno((*(te as *mut pg_sys::TargetEntry)).expr as *mut pg_sys::Node).and_then(&resolve).map(|x| strip(x)))
            .collect::<Option<Vec<_>>>()?;
        classify_aggref(aggref, &args, config, rel, scanrelid)?;
        Some(args)
    }
}

/// The type of `aggref`'s partial state as passed between plan nodes: its
/// transition type, serialized to bytea when that is `internal`.
unsafe fn partial_type(aggref: *mut pg_sys::Aggref) -> pg_sys::Oid {
    unsafe { if (*aggref).aggtranstype == pg_sys::INTERNALOID { pg_sys::BYTEAOID } else { (*aggref).aggtranstype } }
}

/// A target list of copies of `args`, as an Aggref's arguments.
unsafe fn arg_list(args: &[*mut pg_sys::Node]) -> *mut pg_sys::List {
    unsafe {
        let mut list: *mut pg_sys::List = std::ptr::null_mut();
        for (i, &x) in args.iter().enumerate() {
            let te = pg_sys::makeTargetEntry(pg_sys::copyObjectImpl(x as *const _) as *mut pg_sys::Expr, (i + 1) as i16, std::ptr::null_mut(), false);
            list = pg_sys::lappend(list, te as *mut _);
        }
        list
    }
}

unsafe fn tle_expr(tlist: *mut pg_sys::List, resno: i16) -> Option<*mut pg_sys::Node> {
    unsafe {
        let entries = list_ptrs(tlist);
        let te = *entries.get((resno as usize).checked_sub(1)?)? as *mut pg_sys::TargetEntry;
        Some((*te).expr as *mut pg_sys::Node)
    }
}

/// The special Var `e` references (OUTER_VAR), by attribute number.
unsafe fn outer_attno(e: *mut pg_sys::Node) -> Option<i16> {
    unsafe {
        ((*e).type_ == pg_sys::NodeTag::T_Var && (*(e as *mut pg_sys::Var)).varno == pg_sys::OUTER_VAR).then(|| (*(e as *mut pg_sys::Var)).varattno)
    }
}

unsafe fn try_rewrite(agg: *mut pg_sys::Agg, stmt: *mut pg_sys::PlannedStmt) {
    unsafe {
        let a = &mut *agg;
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
        let passes_on = |p: *mut pg_sys::Plan| !p.is_null() && matches!((*p).type_, pg_sys::NodeTag::T_Sort | pg_sys::NodeTag::T_Gather) && is_plain_tsbucket_scan((*p).lefttree);
        let (between, scan) = if is_plain_tsbucket_scan(child) {
            (None, child as *mut pg_sys::CustomScan)
        } else if passes_on(child) {
            (Some(child), (*child).lefttree as *mut pg_sys::CustomScan)
        } else {
            return;
        };
        let sort = between.filter(|p| (**p).type_ == pg_sys::NodeTag::T_Sort).map(|p| p as *mut pg_sys::Sort);
        let scanrelid = (*scan).scan.scanrelid;
        let rte = pg_sys::rt_fetch(scanrelid, (*stmt).rtable);
        let Some(config) = config::lookup((*rte).relid) else { return };
        let scan_tlist = (*scan).scan.plan.targetlist;
        // Agg input column -> scan output column (through the node between).
        let to_scan_column = |k: i16| -> Option<i16> {
            match between {
                None => Some(k),
                Some(p) => outer_attno(tle_expr((*p).targetlist, k)?),
            }
        };

        // Group keys.
        let ncols = a.numCols as usize;
        let group_cols: Vec<i16> = (0..ncols).map(|i| *a.grpColIdx.add(i) as i16).collect();
        let mut key_exprs = Vec::with_capacity(ncols);
        let mut time_keys = 0;
        for &k in &group_cols {
            let Some(sc) = to_scan_column(k) else { return };
            let Some(e) = tle_expr(scan_tlist, sc) else { return };
            match classify_key(e, &config, scanrelid) {
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
        let rel = pg_sys::RelationIdGetRelation((*rte).relid);
        if rel.is_null() {
            return;
        }
        let mut vars: Vec<(*mut pg_sys::Var, i16)> = Vec::new();
        // Distinct aggregates (equal Aggrefs share a partial column) and their uses.
        let mut distinct: Vec<(*mut pg_sys::Aggref, Vec<*mut pg_sys::Node>)> = Vec::new();
        let mut uses: Vec<(*mut pg_sys::Aggref, usize)> = Vec::new();
        let mut ok = true;
        for n in list_ptrs(found) {
            let n = n as *mut pg_sys::Node;
            match (*n).type_ {
                pg_sys::NodeTag::T_Var => match outer_attno(n).and_then(new_position_of) {
                    Some(pos) => vars.push((n as *mut pg_sys::Var, pos)),
                    None => ok = false,
                },
                pg_sys::NodeTag::T_Aggref => {
                    let aggref = n as *mut pg_sys::Aggref;
                    if let Some(i) = distinct.iter().position(|(d, _)| pg_sys::equal(*d as *const _, aggref as *const _)) {
                        uses.push((aggref, i));
                        continue;
                    }
                    let Some(args) = computable_args(aggref, |k| to_scan_column(k).and_then(|sc| tle_expr(scan_tlist, sc)), &config, rel, scanrelid) else {
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
        pg_sys::RelationClose(rel);
        // A Sort must order by group columns only (it is there for the grouping).
        let sort_cols: Option<Vec<i16>> = match sort {
            None => Some(Vec::new()),
            Some(s) => (0..(*s).numCols as usize).map(|i| new_position_of(*(*s).sortColIdx.add(i) as i16)).collect(),
        };
        let Some(sort_cols) = sort_cols else { return };
        if !ok || distinct.is_empty() && ncols == 0 {
            return;
        }

        // Everything is understood: rewrite. The scan's output: keys, then partial states.
        let mut scan_out: *mut pg_sys::List = std::ptr::null_mut();
        let mut resno: i16 = 1;
        for &e in &key_exprs {
            scan_out = pg_sys::lappend(scan_out, pg_sys::makeTargetEntry(pg_sys::copyObjectImpl(e as *const _) as *mut pg_sys::Expr, resno, std::ptr::null_mut(), false) as *mut _);
            resno += 1;
        }
        for (aggref, args) in &distinct {
            let partial = pg_sys::copyObjectImpl(*aggref as *const _) as *mut pg_sys::Aggref;
            (*partial).aggsplit = pg_sys::AggSplit::AGGSPLIT_INITIAL_SERIAL;
            (*partial).aggtype = partial_type(*aggref);
            (*partial).args = arg_list(args);
            scan_out = pg_sys::lappend(scan_out, pg_sys::makeTargetEntry(partial as *mut pg_sys::Expr, resno, std::ptr::null_mut(), false) as *mut _);
            resno += 1;
        }
        let nkeys = key_exprs.len() as i32;
        into_partial_scan(scan, scan_out, nkeys);
        (*scan).scan.plan.plan_rows = (*scan).scan.plan.plan_rows.min(a.plan.plan_rows.max(1.0) * 4.0);
        if let Some(p) = between {
            (*p).targetlist = references(scan_out, pg_sys::OUTER_VAR);
            (*p).plan_rows = (*scan).scan.plan.plan_rows;
        }
        if let Some(s) = sort {
            for (i, &c) in sort_cols.iter().enumerate() {
                *(*s).sortColIdx.add(i) = c as pg_sys::AttrNumber;
            }
        }
        for (i, _) in group_cols.iter().enumerate() {
            *a.grpColIdx.add(i) = (i + 1) as pg_sys::AttrNumber;
        }
        for (var, pos) in vars {
            (*var).varattno = pos;
        }
        for (aggref, i) in uses {
            (*aggref).aggsplit = pg_sys::AggSplit::AGGSPLIT_FINAL_DESERIAL;
            let state = pg_sys::makeVar(pg_sys::OUTER_VAR, (nkeys as usize + i + 1) as i16, partial_type(aggref), -1, pg_sys::InvalidOid, 0);
            let te = pg_sys::makeTargetEntry(state as *mut pg_sys::Expr, 1, std::ptr::null_mut(), false);
            (*aggref).args = pg_sys::lappend(std::ptr::null_mut(), te as *mut _);
        }
        a.aggsplit = pg_sys::AggSplit::AGGSPLIT_FINAL_DESERIAL;
    }
}

