//! The planner's hooks: TsBucketScan paths for each time-series table
//! (set_rel_pathlist), upper paths (last points, time-bucket grouping), and
//! the plan rewrite after planning (aggregation in the scan).

use pgrx::pg_sys;
use pgrx::prelude::*;

static mut PREV_SET_REL_PATHLIST: pg_sys::set_rel_pathlist_hook_type = None;

static mut PREV_CREATE_UPPER_PATHS: pg_sys::create_upper_paths_hook_type = None;

static mut PREV_PLANNER: pg_sys::planner_hook_type = None;

unsafe extern "C-unwind" {
    /// optimizer/planner.c, called without pgrx's error trap so that planning
    /// errors reach the client with every field (see hooks/executor.rs).
    #[link_name = "standard_planner"]
    fn standard_planner_raw(
        parse: *mut pg_sys::Query,
        query_string: *const std::ffi::c_char,
        cursor_options: i32,
        bound_params: pg_sys::ParamListInfo,
    ) -> *mut pg_sys::PlannedStmt;
}

// No #[pg_guard]: nothing here needs dropping when planning raises an error;
// the Rust that runs after it is guarded.
unsafe extern "C-unwind" fn planner(
    parse: *mut pg_sys::Query,
    query_string: *const std::ffi::c_char,
    cursor_options: i32,
    bound_params: pg_sys::ParamListInfo,
) -> *mut pg_sys::PlannedStmt {
    // SAFETY: PREV_PLANNER is written only by install() in _PG_init, before any planning; this copies it.
    let prev = unsafe { PREV_PLANNER };
    // SAFETY: `parse` is the Query being planned, which partitionwise_level only reads.
    let level = unsafe { partitionwise_level(parse) };
    let stmt = match prev {
        // SAFETY: planner()'s `parse`, `query_string`, `cursor_options` and `bound_params` go to the earlier planner_hook unchanged.
        Some(prev) => unsafe { prev(parse, query_string, cursor_options, bound_params) },
        // SAFETY: standard_planner gets planner()'s own arguments; nothing with a destructor lives in this frame if it raises.
        None => unsafe { standard_planner_raw(parse, query_string, cursor_options, bound_params) },
    };
    // SAFETY: `stmt` is the PlannedStmt just returned, allocated in the caller's memory context and not yet used by anyone;
    // `level` is the GUC nest level partitionwise_level opened for this planning, if any.
    unsafe { rewrite_plan(stmt, level) };
    stmt
}

/// An aggregate over a partitioned time-series table is planned partitionwise
/// (`enable_partitionwise_aggregate` on for this planning only, as a
/// function's SET clause sets it): each partition's Partial Aggregate then
/// goes into its TsBucketScan (rewrite::partial_agg). Postgres leaves the
/// setting off by default for its planning cost on many partitions; here it
/// is what lets a partition's scan aggregate bucket by bucket. Returns the
/// GUC nest level to close after planning (an error closes it with the
/// (sub)transaction).
///
/// # Safety
/// `parse` is the Query being planned.
#[pg_guard]
unsafe extern "C-unwind" fn partitionwise_level(parse: *mut pg_sys::Query) -> i32 {
    // SAFETY: enable_partitionwise_aggregate is the planner's GUC variable, read by value.
    if !crate::catalog::gucs::VECTORIZED_AGGREGATION.get() || unsafe { pg_sys::enable_partitionwise_aggregate } {
        return 0;
    }
    // SAFETY: `parse` is the Query being planned (the contract): its flags and range table are read in place.
    let (aggregates, rtable) = unsafe { ((*parse).hasAggs || !(*parse).groupClause.is_null(), (*parse).rtable) };
    // SAFETY: the range table is NIL or a List of RangeTblEntry nodes.
    let partitioned_timeseries = aggregates && unsafe { crate::pg::nodes::list_ptrs(rtable) }.into_iter().any(|rte| {
        let rte = rte as *mut pg_sys::RangeTblEntry;
        // SAFETY: `rte` is a RangeTblEntry of the query; relkind and relid are read for plain relations only.
        let (partitioned, relid) = unsafe {
            ((*rte).rtekind == pg_sys::RTEKind::RTE_RELATION && (*rte).relkind as u8 == pg_sys::RELKIND_PARTITIONED_TABLE, (*rte).relid)
        };
        partitioned && crate::catalog::label::is_partitioned_timeseries(relid)
    });
    if !partitioned_timeseries {
        return 0;
    }
    // SAFETY: in a transaction (planning); the nest level is closed by AtEOXact_GUC after planning, or by the
    // (sub)transaction's abort if planning fails. The setting is a valid boolean of a user-settable GUC.
    unsafe {
        let level = pg_sys::NewGUCNestLevel();
        pg_sys::set_config_option(
            c"enable_partitionwise_aggregate".as_ptr(),
            c"on".as_ptr(),
            pg_sys::GucContext::PGC_USERSET,
            pg_sys::GucSource::PGC_S_SESSION,
            pg_sys::GucAction::GUC_ACTION_SAVE,
            true,
            0,
            false,
        );
        level
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn rewrite_plan(stmt: *mut pg_sys::PlannedStmt, level: i32) {
    if level > 0 {
        // SAFETY: `level` is the nest level partitionwise_level opened for this planning, still the innermost one.
        unsafe { pg_sys::AtEOXact_GUC(true, level) };
    }
    // SAFETY: `stmt` is the plan planner() just received from standard_planner (or the earlier hook): freshly planned,
    // as partial_agg::rewrite and field_output::rewrite require (the latter takes the plain scans the former left).
    unsafe {
        crate::rewrite::partial_agg::rewrite(stmt);
        crate::rewrite::field_output::rewrite(stmt);
    }
}

/// Installs the planner's hooks (from _PG_init).
pub(super) fn install() {
    // SAFETY: _PG_init calls this once per process, before any planning reads set_rel_pathlist_hook,
    // create_upper_paths_hook, planner_hook or our PREV_* copies; the previous hooks are kept and called first.
    unsafe {
        PREV_SET_REL_PATHLIST = pg_sys::set_rel_pathlist_hook;
        pg_sys::set_rel_pathlist_hook = Some(set_rel_pathlist);
        PREV_CREATE_UPPER_PATHS = pg_sys::create_upper_paths_hook;
        pg_sys::create_upper_paths_hook = Some(create_upper_paths);
        PREV_PLANNER = pg_sys::planner_hook;
        pg_sys::planner_hook = Some(planner);
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn create_upper_paths(
    root: *mut pg_sys::PlannerInfo,
    stage: pg_sys::UpperRelationKind::Type,
    input_rel: *mut pg_sys::RelOptInfo,
    output_rel: *mut pg_sys::RelOptInfo,
    extra: *mut std::ffi::c_void,
) {
    // SAFETY: PREV_CREATE_UPPER_PATHS is set once by install() in _PG_init, before planning starts; this copies it.
    let prev = unsafe { PREV_CREATE_UPPER_PATHS };
    if let Some(prev) = prev {
        // SAFETY: the earlier create_upper_paths_hook gets this stage's `root`, rels and `extra` exactly as Postgres passed them.
        unsafe { prev(root, stage, input_rel, output_rel, extra) };
    }
    if stage == pg_sys::UpperRelationKind::UPPERREL_DISTINCT {
        // SAFETY: at UPPERREL_DISTINCT, `root` is the query's PlannerInfo, `input_rel` the rel under DISTINCT and `output_rel`
        // the distinct rel being built, all alive in the planner's memory context.
        unsafe { crate::rewrite::last_point::add_last_point_path(root, input_rel, output_rel) };
    }
    if stage == pg_sys::UpperRelationKind::UPPERREL_GROUP_AGG {
        // SAFETY: at UPPERREL_GROUP_AGG, `extra` is the GroupPathExtraData create_ordinary_grouping_paths passes, and the
        // other arguments are this hook's own (add_time_bucket_hashagg's contract).
        unsafe { crate::rewrite::grouping::add_time_bucket_hashagg(root, input_rel, output_rel, extra as *mut pg_sys::GroupPathExtraData) };
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn set_rel_pathlist(
    root: *mut pg_sys::PlannerInfo,
    rel: *mut pg_sys::RelOptInfo,
    rti: pg_sys::Index,
    rte: *mut pg_sys::RangeTblEntry,
) {
    // SAFETY: PREV_SET_REL_PATHLIST is written by install() alone, in _PG_init before planning; this copies it.
    let prev = unsafe { PREV_SET_REL_PATHLIST };
    if let Some(prev) = prev {
        // SAFETY: the earlier set_rel_pathlist_hook gets set_rel_pathlist's `root`, `rel`, `rti` and `rte` unchanged.
        unsafe { prev(root, rel, rti, rte) };
    }
    // SAFETY: `root` is the PlannerInfo being planned and `rel` the base rel of range-table entry `rte`, set_rel_pathlist's
    // own arguments during planning, as add_paths' contract requires.
    unsafe { crate::scan::path::add_paths(root, rel, rte) };
}
