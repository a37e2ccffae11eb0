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

/// Microseconds in one `date_trunc` unit (months and longer on average).
fn unit_micros(unit: &str) -> Option<f64> {
    const SECOND: f64 = 1e6;
    const DAY: f64 = 86_400.0 * SECOND;
    Some(match unit.to_ascii_lowercase().as_str() {
        "microseconds" => 1.0,
        "milliseconds" => 1e3,
        "second" => SECOND,
        "minute" => 60.0 * SECOND,
        "hour" => 3_600.0 * SECOND,
        "day" => DAY,
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
unsafe fn bucket_width(e: *mut pg_sys::Node, relid: u32, time_attnum: i16) -> Option<f64> {
    unsafe {
        let e = crate::pg::nodes::strip(e);
        if (*e).type_ != pg_sys::NodeTag::T_FuncExpr {
            return None;
        }
        let f = e as *mut pg_sys::FuncExpr;
        let args = list_ptrs((*f).args);
        let time = args.get(1).map(|a| crate::pg::nodes::strip(*a as *mut pg_sys::Node))?;
        let is_time = (*time).type_ == pg_sys::NodeTag::T_Var && {
            let v = time as *mut pg_sys::Var;
            (*v).varno as u32 == relid && (*v).varlevelsup == 0 && (*v).varattno == time_attnum
        };
        let first = args[0] as *mut pg_sys::Node;
        if !is_time || (*first).type_ != pg_sys::NodeTag::T_Const || (*(first as *mut pg_sys::Const)).constisnull {
            return None;
        }
        let value = (*(first as *mut pg_sys::Const)).constvalue;
        match u32::from((*f).funcid) {
            pg_sys::F_DATE_TRUNC_TEXT_TIMESTAMPTZ | pg_sys::F_DATE_TRUNC_TEXT_TIMESTAMP | pg_sys::F_DATE_TRUNC_TEXT_TIMESTAMPTZ_TEXT => {
                let text = pg_sys::text_to_cstring(value.cast_mut_ptr());
                unit_micros(&std::ffi::CStr::from_ptr(text).to_string_lossy())
            }
            pg_sys::F_DATE_BIN_INTERVAL_TIMESTAMPTZ_TIMESTAMPTZ | pg_sys::F_DATE_BIN_INTERVAL_TIMESTAMP_TIMESTAMP => {
                let i = value.cast_mut_ptr::<pg_sys::Interval>();
                let micros = (*i).time as f64 + (*i).day as f64 * 86_400e6 + (*i).month as f64 * 30.0 * 86_400e6;
                (micros > 0.0).then_some(micros)
            }
            _ => None,
        }
    }
}

/// The time range the query reads: its constant bounds on the time column,
/// else the table's first and last windows.
unsafe fn time_range(rel: *mut pg_sys::RelOptInfo, config: &Config) -> Option<(i64, i64)> {
    unsafe {
        let (mut lo, mut hi) = (None::<i64>, None::<i64>);
        for ri in list_ptrs((*rel).baserestrictinfo) {
            let clause = (*(ri as *mut pg_sys::RestrictInfo)).clause as *mut pg_sys::Node;
            let Some((strategy, value)) = crate::scan::quals::time_bound(clause, (*rel).relid, config.time_attnum) else { continue };
            if matches!(strategy, 3..=5) {
                lo = Some(lo.map_or(value, |l| l.max(value)));
            }
            if matches!(strategy, 1..=3) {
                hi = Some(hi.map_or(value, |h| h.min(value)));
            }
        }
        if lo.is_none() || hi.is_none() {
            let store = pg_sys::table_open(config.store_relid, pg_sys::AccessShareLock as i32);
            let extent = crate::scan::access::window_extent(store, config);
            pg_sys::table_close(store, pg_sys::NoLock as i32);
            let (first, last) = extent?;
            lo = lo.or(Some(first));
            hi = hi.or(Some(last.saturating_add(config.span_micros)));
        }
        Some((lo?, hi?))
    }
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
    unsafe {
        let parse = (*root).parse;
        // PostgreSQL 16 and later plan from the group clause without redundant keys.
        #[cfg(feature = "pg15")]
        let group_clause = (*parse).groupClause;
        #[cfg(not(feature = "pg15"))]
        let group_clause = (*root).processed_groupClause;
        if extra.is_null()
            || group_clause.is_null()
            || !(*parse).groupingSets.is_null()
            || (*input_rel).reloptkind != pg_sys::RelOptKind::RELOPT_BASEREL
            || (*input_rel).cheapest_total_path.is_null()
            || !pg_sys::grouping_is_hashable(group_clause)
        {
            return;
        }
        // Aggregates with ORDER BY or DISTINCT are left to Postgres's own choice.
        for node in [(*parse).targetList as *mut pg_sys::Node, (*parse).havingQual] {
            for item in list_ptrs(pg_sys::pull_var_clause(node, pg_sys::PVC_INCLUDE_AGGREGATES as i32)) {
                let n = item as *mut pg_sys::Node;
                if (*n).type_ == pg_sys::NodeTag::T_Aggref {
                    let a = n as *mut pg_sys::Aggref;
                    if !(*a).aggorder.is_null() || !(*a).aggdistinct.is_null() {
                        return;
                    }
                }
            }
        }
        let rte = *(*root).simple_rte_array.add((*input_rel).relid as usize);
        if (*rte).rtekind != pg_sys::RTEKind::RTE_RELATION || (*rte).inh || !crate::catalog::config::is_tsbucket_table((*rte).relid) {
            return;
        }
        let Some(config) = config::lookup((*rte).relid) else { return };
        let mut width = None;
        let mut others: *mut pg_sys::List = std::ptr::null_mut();
        for sc in list_ptrs(group_clause) {
            let tle = pg_sys::get_sortgroupclause_tle(sc as *mut pg_sys::SortGroupClause, (*parse).targetList);
            let expr = (*tle).expr as *mut pg_sys::Node;
            match bucket_width(expr, (*input_rel).relid, config.time_attnum) {
                Some(w) if width.is_none() => width = Some(w),
                _ => others = pg_sys::lappend(others, expr as *mut std::ffi::c_void),
            }
        }
        let Some(width) = width else { return };
        let Some((lo, hi)) = time_range(input_rel, &config) else { return };
        let input_rows = (*input_rel).rows.max(1.0);
        let buckets = ((hi.saturating_sub(lo)).max(0) as f64 / width).floor() + 1.0;
        let other_groups = if others.is_null() {
            1.0
        } else {
            pg_sys::estimate_num_groups(root, others, input_rows, std::ptr::null_mut(), std::ptr::null_mut())
        };
        let groups = (buckets * other_groups).clamp(1.0, input_rows);
        // extra->agg_final_costs is filled only when partial aggregation is
        // considered: compute the costs as Postgres does for a plain Agg.
        let mut costs = pg_sys::AggClauseCosts::default();
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
