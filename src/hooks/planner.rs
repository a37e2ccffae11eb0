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
    /// errors reach the client with every field (see hooks.rs).
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
    // SAFETY: the arguments are the planner's, passed on unchanged.
    unsafe {
        let stmt = match PREV_PLANNER {
            Some(prev) => prev(parse, query_string, cursor_options, bound_params),
            None => standard_planner_raw(parse, query_string, cursor_options, bound_params),
        };
        rewrite_plan(stmt);
        stmt
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn rewrite_plan(stmt: *mut pg_sys::PlannedStmt) {
    // SAFETY: a plan just made by the planner.
    unsafe { crate::rewrite::partial_agg::rewrite(stmt) }
}

/// Installs the planner's hooks (from _PG_init).
pub(super) fn install() {
    // SAFETY: _PG_init runs once per process, before any planning; the
    // previous hooks are kept and called first.
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
    unsafe {
        if let Some(prev) = PREV_CREATE_UPPER_PATHS {
            prev(root, stage, input_rel, output_rel, extra);
        }
        if stage == pg_sys::UpperRelationKind::UPPERREL_DISTINCT {
            crate::rewrite::last_point::add_last_point_path(root, input_rel, output_rel);
        }
        if stage == pg_sys::UpperRelationKind::UPPERREL_GROUP_AGG {
            crate::rewrite::grouping::add_time_bucket_hashagg(root, input_rel, output_rel, extra as *mut pg_sys::GroupPathExtraData);
        }
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn set_rel_pathlist(
    root: *mut pg_sys::PlannerInfo,
    rel: *mut pg_sys::RelOptInfo,
    rti: pg_sys::Index,
    rte: *mut pg_sys::RangeTblEntry,
) {
    // SAFETY: the planner's own arguments, passed on during planning.
    unsafe {
        if let Some(prev) = PREV_SET_REL_PATHLIST {
            prev(root, rel, rti, rte);
        }
        crate::scan::path::add_paths(root, rel, rte);
    }
}
