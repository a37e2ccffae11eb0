//! Output columns read from a document field's sub-column, planned by a plan
//! rewrite after `standard_planner` (after `partial_agg`).
//!
//! A plain TsBucketScan of a SELECT that outputs `(doc->>'k')::float8` (or
//! `::int4`, `::int8`) would build every row's document (holding that key)
//! for Postgres to extract and cast it. The rewrite gives the scan a tuple of
//! its own (custom_scan_tlist): the table's columns, in their places, then
//! one column per such field; the target-list entry reads that column
//! instead. The scan fills it from the field's decoded values
//! (`LoadedBucket::fields`), and only where a value needs Postgres's cast (a
//! string, a decimal the cast refuses, a bucket kept as bytes, tail rows)
//! evaluates the expression, kept in custom_scan_tlist, on the row's
//! document: the same value, or the same error, as on heap. EXPLAIN VERBOSE
//! shows that expression as the column's.
//!
//! Only top-level target-list entries of plain scans of a SELECT without row
//! locks or data-modifying CTEs are taken (a row rechecked by EvalPlanQual is
//! a tuple of the table, without the extra columns), where no whole-row
//! reference reads the scan's tuple and every entry before the last field is
//! a column, a constant or a field (the order of errors stays heap's). The
//! quals keep reading the table's columns: they are unchanged.

use crate::catalog::config;
use crate::pg::nodes::{list_ptrs, referenced_attnums};
use crate::scan::doc_keys::numeric_field;
use crate::scan::plan::MODE_SCAN;
use pgrx::pg_sys;

/// Gives every plain TsBucketScan of `stmt` that outputs document fields the
/// extra columns (see the module's text).
///
/// # Safety
/// `stmt` must be a freshly planned statement.
pub unsafe fn rewrite(stmt: *mut pg_sys::PlannedStmt) {
    // SAFETY: `stmt` is freshly planned (the contract): its command, row marks and flags are plain fields.
    let plain_select = unsafe {
        (*stmt).commandType == pg_sys::CmdType::CMD_SELECT && (*stmt).rowMarks.is_null() && !(*stmt).hasModifyingCTE
    };
    if !plain_select {
        return;
    }
    // SAFETY: `stmt` is freshly planned; each_plan visits its plan trees' nodes, which rewrite_scan may change in place.
    unsafe { super::each_plan(stmt, &mut |plan| rewrite_scan(plan, stmt)) };
}

/// # Safety
/// `plan` must be a plan node of `stmt`.
unsafe fn rewrite_scan(plan: *mut pg_sys::Plan, stmt: *mut pg_sys::PlannedStmt) {
    // SAFETY: `plan` is a plan node (the contract), NodeTag first.
    if unsafe { (*plan).type_ } != pg_sys::NodeTag::T_CustomScan {
        return;
    }
    let cscan = plan as *mut pg_sys::CustomScan;
    // SAFETY: `cscan` is tagged T_CustomScan, as is_ours requires; its custom_scan_tlist and custom_private are fields of it.
    if unsafe { !crate::scan::exec::is_ours(cscan) || !(*cscan).custom_scan_tlist.is_null() } {
        return;
    }
    // SAFETY: a TsBucketScan's custom_private is private_list's List, its mode (an Integer node) first.
    let private = unsafe { list_ptrs((*cscan).custom_private) };
    // SAFETY: `private[0]` is that mode Integer node, present (checked non-empty first).
    if private.is_empty() || unsafe { (*(private[0] as *mut pg_sys::Integer)).ival } != MODE_SCAN {
        return;
    }
    // SAFETY: `cscan.scan.scanrelid` indexes `stmt.rtable` (set_plan_references made it so); rt_fetch returns that entry.
    let (scanrelid, relid) = unsafe {
        let scanrelid = (*cscan).scan.scanrelid;
        (scanrelid, (*pg_sys::rt_fetch(scanrelid, (*stmt).rtable)).relid)
    };
    if config::lookup(relid).is_none() {
        return;
    }
    // SAFETY: the scan's targetlist is a List of TargetEntry nodes whose exprs are valid expressions of the plan.
    let entries: Vec<*mut pg_sys::TargetEntry> = unsafe { list_ptrs((*cscan).scan.plan.targetlist) }.into_iter().map(|te| te as *mut pg_sys::TargetEntry).collect();
    // SAFETY: each `te` is a TargetEntry of the scan's targetlist; numeric_field only reads its expression.
    let is_field = |te: *mut pg_sys::TargetEntry| unsafe { numeric_field((*te).expr as *mut pg_sys::Node, scanrelid) }.is_some();
    let fields: Vec<*mut pg_sys::TargetEntry> = entries.iter().copied().filter(|&te| is_field(te)).collect();
    let Some(last) = entries.iter().rposition(|&te| is_field(te)) else { return };
    // Postgres evaluates the entries in order, and the scan casts the fields
    // Postgres must cast before projecting: an entry before a field that
    // could raise an error (anything but a column or a constant) would raise
    // it first on heap. A whole-row reference reads the table's row type,
    // which the scan's own tuple is not.
    // SAFETY: `te` is a TargetEntry of the scan's targetlist; its expression's tag is read.
    let simple = |te: *mut pg_sys::TargetEntry| unsafe {
        matches!((*((*te).expr as *mut pg_sys::Node)).type_, pg_sys::NodeTag::T_Var | pg_sys::NodeTag::T_Const)
    };
    if entries[..last].iter().any(|&te| !is_field(te) && !simple(te)) {
        return;
    }
    // SAFETY: the targetlist and quals are expressions of the plan; referenced_attnums only reads them.
    let read = unsafe { referenced_attnums(&[(*cscan).scan.plan.targetlist as *mut pg_sys::Node, (*cscan).scan.plan.qual as *mut pg_sys::Node], scanrelid) };
    if read.contains(&0) {
        return;
    }
    // SAFETY: the planner keeps the scanned table locked; RelationIdGetRelation takes a relcache reference that
    // RelationClose below drops.
    let rel = unsafe { pg_sys::RelationIdGetRelation(relid) };
    if rel.is_null() {
        return;
    }
    // SAFETY: `rel` is open (just above); its descriptor has natts attributes; makeVar, makeNullConst, makeTargetEntry
    // and copyObjectImpl allocate in CurrentMemoryContext, the planner's, where the plan lives.
    unsafe {
        let tupdesc = (*rel).rd_att;
        let natts = (*tupdesc).natts as usize;
        let mut tlist: *mut pg_sys::List = std::ptr::null_mut();
        for i in 0..natts {
            let att = &*crate::pg::relation::tuple_desc_attr(tupdesc, i);
            // A dropped column keeps its place (the scan fills its slot column with NULL, as for the table's tuple).
            let expr = if att.attisdropped {
                pg_sys::makeNullConst(pg_sys::INT4OID, -1, pg_sys::InvalidOid) as *mut pg_sys::Expr
            } else {
                pg_sys::makeVar(scanrelid as _, (i + 1) as i16, att.atttypid, att.atttypmod, att.attcollation, 0) as *mut pg_sys::Expr
            };
            tlist = pg_sys::lappend(tlist, pg_sys::makeTargetEntry(expr, (i + 1) as i16, std::ptr::null_mut(), false) as *mut std::ffi::c_void);
        }
        let mut extra: Vec<*mut pg_sys::Node> = Vec::new();
        for te in fields {
            let e = (*te).expr as *mut pg_sys::Node;
            // The same field twice reads one column.
            let j = match extra.iter().position(|x| pg_sys::equal(*x as *const std::ffi::c_void, e as *const std::ffi::c_void)) {
                Some(j) => j,
                None => {
                    extra.push(e);
                    let copy = pg_sys::copyObjectImpl(e as *const std::ffi::c_void) as *mut pg_sys::Expr;
                    let resno = (natts + extra.len()) as i16;
                    tlist = pg_sys::lappend(tlist, pg_sys::makeTargetEntry(copy, resno, std::ptr::null_mut(), false) as *mut std::ffi::c_void);
                    extra.len() - 1
                }
            };
            let column = (natts + j + 1) as i16;
            (*te).expr = pg_sys::makeVar(pg_sys::INDEX_VAR as _, column, pg_sys::exprType(e), pg_sys::exprTypmod(e), pg_sys::exprCollation(e), 0) as *mut pg_sys::Expr;
        }
        (*cscan).custom_scan_tlist = tlist;
        pg_sys::RelationClose(rel);
    }
}
