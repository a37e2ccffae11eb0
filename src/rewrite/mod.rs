//! Planner-hook plan rewrites and upper paths over TsBucketScan: aggregation
//! computed inside the scan (`partial_agg`), hashed grouping by a time bucket
//! with a real group estimate (`grouping`), last points per series
//! (`last_point`), output columns read from document fields (`field_output`).
//! They build on the scan's path and plan constructors.

pub mod grouping;
pub mod last_point;
pub mod partial_agg;
pub mod field_output;

use crate::pg::nodes::list_ptrs;
use pgrx::pg_sys;

/// Calls `f` on every plan node of `stmt` (its plan tree and sub-plans),
/// parents before children.
///
/// # Safety
/// `stmt` must be a planned statement; `f` may change a node in place but
/// not the tree's shape.
pub(crate) unsafe fn each_plan(stmt: *mut pg_sys::PlannedStmt, f: &mut dyn FnMut(*mut pg_sys::Plan)) {
    // SAFETY: `stmt` is a planned statement (the contract): planTree and subplans are its plan trees.
    unsafe {
        visit((*stmt).planTree, f);
        for p in list_ptrs((*stmt).subplans) {
            visit(p as *mut pg_sys::Plan, f);
        }
    }
}

/// # Safety
/// `plan` must be null or a plan node.
unsafe fn visit(plan: *mut pg_sys::Plan, f: &mut dyn FnMut(*mut pg_sys::Plan)) {
    if plan.is_null() {
        return;
    }
    f(plan);
    // SAFETY: `plan` is a plan node (the contract): its tag says which struct it is, whose child Lists hold plan nodes.
    unsafe {
        let children = match (*plan).type_ {
            pg_sys::NodeTag::T_Append => list_ptrs((*(plan as *mut pg_sys::Append)).appendplans),
            pg_sys::NodeTag::T_MergeAppend => list_ptrs((*(plan as *mut pg_sys::MergeAppend)).mergeplans),
            pg_sys::NodeTag::T_BitmapAnd => list_ptrs((*(plan as *mut pg_sys::BitmapAnd)).bitmapplans),
            pg_sys::NodeTag::T_BitmapOr => list_ptrs((*(plan as *mut pg_sys::BitmapOr)).bitmapplans),
            pg_sys::NodeTag::T_CustomScan => list_ptrs((*(plan as *mut pg_sys::CustomScan)).custom_plans),
            pg_sys::NodeTag::T_SubqueryScan => vec![(*(plan as *mut pg_sys::SubqueryScan)).subplan as *mut std::ffi::c_void],
            _ => Vec::new(),
        };
        for c in children {
            visit(c as *mut pg_sys::Plan, f);
        }
        visit((*plan).lefttree, f);
        visit((*plan).righttree, f);
    }
}
