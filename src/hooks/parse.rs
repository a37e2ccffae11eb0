//! post_parse_analyze: MongoDB's rules, checked when a statement is parsed
//! (SET and WHERE on meta columns only in UPDATE; no ON CONFLICT, MERGE or
//! row locks). The parser opens the target table before this hook runs,
//! which loads this library, so the rules hold even for a session's first
//! statement without preloading.

use crate::catalog::config;
use crate::pg::error::{FEATURE_NOT_SUPPORTED, ts_error};
use crate::pg::nodes::{list_ptrs, referenced_attnums};
use pgrx::pg_sys;
use pgrx::prelude::*;

static mut PREV_POST_PARSE_ANALYZE: pg_sys::post_parse_analyze_hook_type = None;

#[pg_guard]
unsafe extern "C-unwind" fn post_parse_analyze(pstate: *mut pg_sys::ParseState, query: *mut pg_sys::Query, jstate: *mut pg_sys::JumbleState) {
    // SAFETY: PREV_POST_PARSE_ANALYZE is set once by install() in _PG_init and only copied here afterwards.
    let prev = unsafe { PREV_POST_PARSE_ANALYZE };
    if let Some(prev) = prev {
        // SAFETY: the previously installed post_parse_analyze hook gets the parser's `pstate`, `query` and `jstate` unchanged.
        unsafe { prev(pstate, query, jstate) };
    }
    // SAFETY: `query` is the Query parse analysis just produced (or null), which lives as long as the statement's
    // parse tree: what check_query's contract asks.
    unsafe { check_query(query) };
}

/// Refuses what the query (or a CTE in it) asks of a time-series table that
/// tsbucket does not allow.
///
/// # Safety
/// `query` must be null or an analyzed Query.
unsafe fn check_query(query: *mut pg_sys::Query) {
    if query.is_null() {
        return;
    }
    // SAFETY: `query` is a non-null analyzed Query (this function's contract); its cteList is NIL or a List of CommonTableExpr.
    let ctes = unsafe { list_ptrs((*query).cteList) };
    for cte in ctes {
        // SAFETY: `cte` is a CommonTableExpr of `query`'s cteList; its ctequery is null or an analyzed node of the same tree.
        let sub = unsafe { (*(cte as *mut pg_sys::CommonTableExpr)).ctequery };
        // SAFETY: `sub` was just checked non-null; every node starts with its NodeTag.
        if !sub.is_null() && unsafe { (*sub).type_ } == pg_sys::NodeTag::T_Query {
            // SAFETY: `sub` is tagged T_Query, so it is an analyzed Query as check_query requires.
            unsafe { check_query(sub as *mut pg_sys::Query) };
        }
    }
    // SAFETY: `query`'s rowMarks is NIL or a List of RowMarkClause nodes of this analyzed Query.
    let marks = unsafe { list_ptrs((*query).rowMarks) };
    for mark in marks {
        // SAFETY: `mark` is a RowMarkClause of `query`, whose `rti` indexes `query.rtable`; rt_fetch returns that
        // RangeTblEntry (or null, which as_ref maps to None).
        let relid = unsafe {
            let rti = (*(mark as *mut pg_sys::RowMarkClause)).rti;
            pg_sys::rt_fetch(rti, (*query).rtable).as_ref().map(|rte| rte.relid)
        };
        if let Some(relid) = relid.filter(|r| *r != pg_sys::InvalidOid && config::is_tsbucket_table(*r)) {
            ts_error(
                FEATURE_NOT_SUPPORTED,
                &format!("row locking (SELECT ... FOR UPDATE/SHARE) is not supported on time-series table \"{}\"", crate::pg::relation::relation_name(relid)),
                "Lock the table instead: LOCK TABLE ... IN SHARE ROW EXCLUSIVE MODE.",
            );
        }
    }
    // SAFETY: `query` is non-null and analyzed; resultRelation is a plain int field of it.
    let result_rel = unsafe { (*query).resultRelation };
    if result_rel <= 0 {
        return;
    }
    // SAFETY: a positive resultRelation indexes `query.rtable`, so rt_fetch returns the target's RangeTblEntry (or null).
    let relid = unsafe { pg_sys::rt_fetch(result_rel as u32, (*query).rtable).as_ref().map(|rte| rte.relid) };
    let Some(relid) = relid else { return };
    if relid == pg_sys::InvalidOid || !config::is_tsbucket_table(relid) {
        return;
    }
    let name = || crate::pg::relation::relation_name(relid);
    // SAFETY: `query` is still the analyzed Query of this hook; commandType and onConflict are read in place.
    let (command, on_conflict) = unsafe { ((*query).commandType, (*query).onConflict) };
    match command {
        pg_sys::CmdType::CMD_INSERT if !on_conflict.is_null() => ts_error(
            FEATURE_NOT_SUPPORTED,
            &format!("INSERT ... ON CONFLICT is not supported on time-series table \"{}\"", name()),
            "Time-series tables have no unique indexes, so there is no conflict to detect.",
        ),
        pg_sys::CmdType::CMD_MERGE => ts_error(
            FEATURE_NOT_SUPPORTED,
            &format!("MERGE is not supported on time-series table \"{}\"", name()),
            "Use INSERT, DELETE, or an UPDATE that changes only the meta columns.",
        ),
        // SAFETY: `query` is an analyzed UPDATE whose result relation is the configured table `relid`.
        pg_sys::CmdType::CMD_UPDATE => unsafe { check_update(query, relid, &name()) },
        _ => {}
    }
}

/// # Safety
/// `query` must be an analyzed UPDATE whose result relation is `relid`.
unsafe fn check_update(query: *mut pg_sys::Query, relid: pg_sys::Oid, name: &str) {
    let Some(config) = config::lookup(relid) else { return };
    // SAFETY: parse analysis locked `relid` RowExclusive as the UPDATE's target (held to transaction end), so
    // RelationIdGetRelation returns its relcache entry with one more reference, which RelationClose drops; update_violation
    // reads `rel` in between.
    let violation = unsafe {
        let rel = pg_sys::RelationIdGetRelation(relid);
        let violation = update_violation(query, rel, &config, name);
        pg_sys::RelationClose(rel);
        violation
    };
    if let Some((message, hint)) = violation {
        ts_error(FEATURE_NOT_SUPPORTED, &message, &hint);
    }
}

/// The first way this UPDATE breaks the meta-only rule, as (message, hint).
///
/// # Safety
/// `query` must be an analyzed UPDATE of `rel`, an open relation.
unsafe fn update_violation(query: *mut pg_sys::Query, rel: pg_sys::Relation, config: &config::Config, name: &str) -> Option<(String, String)> {
    let is_meta = |attnum: i32| config.meta_attnums.iter().any(|&m| i32::from(m) == attnum);
    let column_name = |attnum: i32| match attnum {
        0 => "the whole row".to_string(),
        a if a < 0 => "a system column".to_string(),
        // SAFETY: `rel` is the UPDATE's open target and `a` a column number its query refers to.
        a => format!("column \"{}\"", unsafe { crate::pg::relation::attr_name(rel, a as i16) }),
    };
    // SAFETY: the meta column numbers of `rel`'s configuration are columns of `rel`, open for this check.
    let meta_names = config.meta_attnums.iter().map(|&m| unsafe { crate::pg::relation::attr_name(rel, m) }).collect::<Vec<_>>().join(", ");
    // SAFETY: `query` is the analyzed UPDATE of this function's contract; resultRelation is read in place.
    let result_rel = unsafe { (*query).resultRelation } as u32;
    if config.meta_attnums.is_empty() {
        return Some((
            format!("UPDATE is not supported on time-series table \"{name}\", which has no meta column"),
            "Delete the rows and insert them again.".into(),
        ));
    }
    // SAFETY: the UPDATE's targetList is a List of TargetEntry nodes of `query`.
    let targets = unsafe { list_ptrs((*query).targetList) };
    for tle in targets {
        let tle = tle as *mut pg_sys::TargetEntry;
        // SAFETY: `tle` is a TargetEntry of `query.targetList`, alive with the query tree.
        let (resjunk, resno, expr) = unsafe { ((*tle).resjunk, (*tle).resno, (*tle).expr) };
        if resjunk {
            continue;
        }
        let attnum = i32::from(resno);
        if !is_meta(attnum) {
            return Some((
                format!("cannot update {} of time-series table \"{name}\": only meta columns may be changed", column_name(attnum)),
                format!("An UPDATE of a time-series table may only set its meta columns ({meta_names})."),
            ));
        }
        // SAFETY: `expr` is the SET expression of a TargetEntry of `query`, a valid expression tree (referenced_attnums' contract).
        let used = unsafe { referenced_attnums(&[expr as *mut pg_sys::Node], result_rel) };
        if let Some(used) = used.into_iter().find(|a| !is_meta(*a)) {
            return Some((
                format!("cannot compute the new meta value of time-series table \"{name}\" from {}", column_name(used)),
                format!("The new value may only depend on the meta columns ({meta_names}) and constants."),
            ));
        }
    }
    // SAFETY: `query.jointree` is the UPDATE's FromExpr (with its WHERE), a valid node tree for referenced_attnums.
    let filtered = unsafe { referenced_attnums(&[(*query).jointree as *mut pg_sys::Node], result_rel) };
    filtered.into_iter().find(|a| !is_meta(*a)).map(|used| {
        (
            format!("UPDATE of time-series table \"{name}\" may only filter on meta columns, not on {}", column_name(used)),
            format!("Filter on the meta columns ({meta_names}) only, or DELETE the rows and insert them again."),
        )
    })
}

/// Installs post_parse_analyze (from _PG_init).
pub(super) fn install() {
    // SAFETY: _PG_init calls this once per process before any statement is parsed, so nothing reads
    // post_parse_analyze_hook or PREV_POST_PARSE_ANALYZE meanwhile; the earlier hook is kept and called first.
    unsafe {
        PREV_POST_PARSE_ANALYZE = pg_sys::post_parse_analyze_hook;
        pg_sys::post_parse_analyze_hook = Some(post_parse_analyze);
    }
}
