//! Group counts for grouping by a time bucket.
//!
//! Postgres has no statistics for `date_trunc('hour', time)`: it takes the
//! distinct count of `time` itself (every row) for the expression, so it
//! expects as many groups as rows, rejects hashing them, and sorts every row
//! on disk instead. A time bucket has at most (time range / bucket width) + 1
//! values, and the range is known: the query's time bounds, else the table's
//! windows. For a query over one time-series table grouped by such a bucket
//! (and possibly other columns, estimated by Postgres), this adds a hashed
//! aggregate with that estimate; Postgres then picks the cheaper plan.

use crate::catalog::config::{self, Config};
use crate::pg::nodes::list_ptrs;
use pgrx::pg_sys;

unsafe extern "C-unwind" {
    /// optimizer/planmain.h (PostgreSQL 14 and later); pgrx does not bind it.
    fn get_agg_clause_costs(root: *mut pg_sys::PlannerInfo, aggsplit: pg_sys::AggSplit::Type, costs: *mut pg_sys::AggClauseCosts);
}

/// Microseconds in one `date_trunc` unit: exact to a day, calendar averages beyond.
fn unit_micros(unit: &str) -> Option<f64> {
    const DAY: f64 = crate::scan::time_bucket::USECS_PER_DAY as f64;
    if let Some(w) = crate::scan::time_bucket::fixed_unit_width(unit) {
        return Some(w as f64);
    }
    Some(match unit.to_ascii_lowercase().as_str() {
        "week" => 7.0 * DAY,
        "month" => 30.436_875 * DAY,
        "quarter" => 3.0 * 30.436_875 * DAY,
        "year" => 365.2425 * DAY,
        "decade" => 3_652.425 * DAY,
        "century" => 36_524.25 * DAY,
        "millennium" => 365_242.5 * DAY,
        _ => return None,
    })
}

/// The bucket width, if `e` is date_trunc(constant unit, time) or
/// date_bin(constant stride, time, origin) of `rel`'s time column.
///
/// # Safety
/// `e` must be a valid expression node.
unsafe fn bucket_width(e: *mut pg_sys::Node, relid: u32, time_attnum: i16) -> Option<f64> {
    use crate::scan::time_bucket::BucketCall;
    // SAFETY: `e` is a valid expression node (this function's contract).
    match unsafe { crate::scan::time_bucket::bucket_call(e, relid, time_attnum) }? {
        BucketCall::Trunc { unit, .. } => unit_micros(&unit),
        BucketCall::Bin { stride, .. } => {
            let micros = stride.time as f64 + stride.day as f64 * 86_400e6 + stride.month as f64 * 30.0 * 86_400e6;
            (micros > 0.0).then_some(micros)
        }
    }
}

/// The time range the query reads: its constant bounds on the time column,
/// else the table's first and last windows.
///
/// # Safety
/// `rel` must be the planner's base rel of `config`'s table.
unsafe fn time_range(rel: *mut pg_sys::RelOptInfo, config: &Config) -> Option<(i64, i64)> {
    let (mut lo, mut hi) = (None::<i64>, None::<i64>);
    // SAFETY: `rel` is the planner's base rel (this function's contract); baserestrictinfo is NIL or its List of RestrictInfo.
    let restrictions = unsafe { list_ptrs((*rel).baserestrictinfo) };
    for ri in restrictions {
        // SAFETY: `ri` is a RestrictInfo of `rel`, whose clause time_bound only reads; `rel.relid` is its range-table index.
        let bound = unsafe {
            let clause = (*(ri as *mut pg_sys::RestrictInfo)).clause as *mut pg_sys::Node;
            crate::scan::quals::time_bound(clause, (*rel).relid, config.time_attnum)
        };
        let Some((strategy, value)) = bound else { continue };
        if matches!(strategy, 3..=5) {
            lo = Some(lo.map_or(value, |l| l.max(value)));
        }
        if matches!(strategy, 1..=3) {
            hi = Some(hi.map_or(value, |h| h.min(value)));
        }
    }
    if lo.is_none() || hi.is_none() {
        // SAFETY: `config`'s store is open and AccessShare-locked from table_open to table_close, as window_extent requires.
        let extent = unsafe {
            let store = pg_sys::table_open(config.store_relid, pg_sys::AccessShareLock as i32);
            let extent = crate::scan::access::window_extent(store, config);
            pg_sys::table_close(store, pg_sys::NoLock as i32);
            extent
        };
        let (first, last) = extent?;
        lo = lo.or(Some(first));
        hi = hi.or(Some(last.saturating_add(config.span_micros)));
    }
    Some((lo?, hi?))
}

/// UPPERREL_GROUP_AGG: a hashed aggregate with the time-bucket group estimate.
///
/// # Safety
/// Called from create_upper_paths_hook with its arguments.
pub unsafe fn add_time_bucket_hashagg(
    root: *mut pg_sys::PlannerInfo,
    input_rel: *mut pg_sys::RelOptInfo,
    output_rel: *mut pg_sys::RelOptInfo,
    extra: *mut pg_sys::GroupPathExtraData,
) {
    // SAFETY: `root` is create_upper_paths' PlannerInfo (this function's contract); `parse` is the Query it plans.
    let parse = unsafe { (*root).parse };
    // PostgreSQL 16 and later plan from the group clause without redundant keys.
    #[cfg(feature = "pg15")]
    // SAFETY: `parse` is the planned Query; on PostgreSQL 15 its groupClause is what the planner groups by.
    let group_clause = unsafe { (*parse).groupClause };
    #[cfg(not(feature = "pg15"))]
    // SAFETY: `root` is the planner's PlannerInfo; processed_groupClause is the group clause it plans from.
    let group_clause = unsafe { (*root).processed_groupClause };
    // SAFETY: `parse` and `input_rel` are planner data alive for the whole planning; grouping_is_hashable only reads the
    // SortGroupClause List `group_clause`, non-null by then.
    let not_hashable = extra.is_null() || group_clause.is_null() || unsafe {
        !(*parse).groupingSets.is_null()
            || (*input_rel).reloptkind != pg_sys::RelOptKind::RELOPT_BASEREL
            || (*input_rel).cheapest_total_path.is_null()
            || !pg_sys::grouping_is_hashable(group_clause)
    };
    if not_hashable {
        return;
    }
    // Aggregates with ORDER BY or DISTINCT are left to Postgres's own choice.
    // SAFETY: `parse` is the planned Query; its target list and HAVING qual are read as nodes (or null).
    let nodes = unsafe { [(*parse).targetList as *mut pg_sys::Node, (*parse).havingQual] };
    for node in nodes {
        // SAFETY: `node` is the query's target list or HAVING qual (or null); pull_var_clause returns a fresh List of its
        // Vars and Aggrefs, allocated in the planner's CurrentMemoryContext.
        let items = unsafe { list_ptrs(pg_sys::pull_var_clause(node, pg_sys::PVC_INCLUDE_AGGREGATES as i32)) };
        for item in items {
            let n = item as *mut pg_sys::Node;
            // SAFETY: `n` is a node pull_var_clause found, read as an Aggref only when tagged T_Aggref.
            let ordered_or_distinct = unsafe {
                (*n).type_ == pg_sys::NodeTag::T_Aggref && {
                    let a = n as *mut pg_sys::Aggref;
                    !(*a).aggorder.is_null() || !(*a).aggdistinct.is_null()
                }
            };
            if ordered_or_distinct {
                return;
            }
        }
    }
    // SAFETY: `input_rel` is a base rel (checked above), so simple_rte_array holds its RangeTblEntry at index `relid`.
    let (input_relid, rte) = unsafe {
        let input_relid = (*input_rel).relid;
        (input_relid, *(*root).simple_rte_array.add(input_relid as usize))
    };
    // SAFETY: `rte` is input_rel's RangeTblEntry in the query's range table, read in place.
    let (rtekind, inh, relid) = unsafe { ((*rte).rtekind, (*rte).inh, (*rte).relid) };
    if rtekind != pg_sys::RTEKind::RTE_RELATION || inh || !crate::catalog::config::is_tsbucket_table(relid) {
        return;
    }
    let Some(config) = config::lookup(relid) else { return };
    let mut width = None;
    let mut others: *mut pg_sys::List = std::ptr::null_mut();
    // SAFETY: `group_clause` is the non-null List of SortGroupClause nodes checked above.
    let group_items = unsafe { list_ptrs(group_clause) };
    for sc in group_items {
        // SAFETY: `sc` is a SortGroupClause of the group clause; get_sortgroupclause_tle finds its TargetEntry in the
        // query's targetList, whose expr is the grouping expression.
        let expr = unsafe {
            let tle = pg_sys::get_sortgroupclause_tle(sc as *mut pg_sys::SortGroupClause, (*parse).targetList);
            (*tle).expr as *mut pg_sys::Node
        };
        // SAFETY: `expr` is that grouping expression, a valid node for bucket_width.
        match unsafe { bucket_width(expr, input_relid, config.time_attnum) } {
            Some(w) if width.is_none() => width = Some(w),
            // SAFETY: lappend extends `others` (NIL or the List built here) in the planner's CurrentMemoryContext.
            _ => others = unsafe { pg_sys::lappend(others, expr as *mut std::ffi::c_void) },
        }
    }
    let Some(width) = width else { return };
    // SAFETY: `input_rel` is the planner's base rel of `config`'s table, as time_range requires.
    let range = unsafe { time_range(input_rel, &config) };
    let Some((lo, hi)) = range else { return };
    // SAFETY: `input_rel` is the planner's base rel; rows is its row estimate.
    let input_rows = unsafe { (*input_rel).rows }.max(1.0);
    let buckets = ((hi.saturating_sub(lo)).max(0) as f64 / width).floor() + 1.0;
    let other_groups = if others.is_null() {
        1.0
    } else {
        // SAFETY: `others` is the non-null List of the other grouping expressions built above; estimate_num_groups reads
        // them with `root`'s statistics.
        unsafe { pg_sys::estimate_num_groups(root, others, input_rows, std::ptr::null_mut(), std::ptr::null_mut()) }
    };
    let groups = (buckets * other_groups).clamp(1.0, input_rows);
    // extra->agg_final_costs is filled only when partial aggregation is
    // considered: compute the costs as Postgres does for a plain Agg.
    let mut costs = pg_sys::AggClauseCosts::default();
    // SAFETY: get_agg_clause_costs sums `root`'s aggregate costs into the local `costs`; create_agg_path builds a hashed Agg
    // over input_rel's cheapest path (non-null, checked above) with `extra`'s HAVING qual (`extra` non-null too), and
    // add_path hands it to `output_rel`, all in the planner's memory context.
    unsafe {
        get_agg_clause_costs(root, pg_sys::AggSplit::AGGSPLIT_SIMPLE, &mut costs);
        let path = pg_sys::create_agg_path(
            root,
            output_rel,
            (*input_rel).cheapest_total_path,
            (*output_rel).reltarget,
            pg_sys::AggStrategy::AGG_HASHED,
            pg_sys::AggSplit::AGGSPLIT_SIMPLE,
            group_clause,
            (*extra).havingQual as *mut pg_sys::List,
            &costs,
            groups,
        );
        pg_sys::add_path(output_rel, path as *mut pg_sys::Path);
    }
}
