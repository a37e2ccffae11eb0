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
    unsafe {
        if let Some(prev) = PREV_POST_PARSE_ANALYZE {
            prev(pstate, query, jstate);
        }
        check_query(query);
    }
}

unsafe fn check_query(query: *mut pg_sys::Query) {
    unsafe {
        if query.is_null() {
            return;
        }
        for cte in list_ptrs((*query).cteList) {
            let sub = (*(cte as *mut pg_sys::CommonTableExpr)).ctequery;
            if !sub.is_null() && (*sub).type_ == pg_sys::NodeTag::T_Query {
                check_query(sub as *mut pg_sys::Query);
            }
        }
        for mark in list_ptrs((*query).rowMarks) {
            let rti = (*(mark as *mut pg_sys::RowMarkClause)).rti;
            let relid = pg_sys::rt_fetch(rti, (*query).rtable).as_ref().map(|rte| rte.relid);
            if let Some(relid) = relid.filter(|r| *r != pg_sys::InvalidOid && config::is_tsbucket_table(*r)) {
                ts_error(
                    FEATURE_NOT_SUPPORTED,
                    &format!("row locking (SELECT ... FOR UPDATE/SHARE) is not supported on time-series table \"{}\"", crate::pg::relation::relation_name(relid)),
                    "Lock the table instead: LOCK TABLE ... IN SHARE ROW EXCLUSIVE MODE.",
                );
            }
        }
        let result_rel = (*query).resultRelation;
        if result_rel <= 0 {
            return;
        }
        let relid = pg_sys::rt_fetch(result_rel as u32, (*query).rtable).as_ref().map(|rte| rte.relid);
        let Some(relid) = relid else { return };
        if relid == pg_sys::InvalidOid || !config::is_tsbucket_table(relid) {
            return;
        }
        let name = crate::pg::relation::relation_name(relid);
        match (*query).commandType {
            pg_sys::CmdType::CMD_INSERT if !(*query).onConflict.is_null() => ts_error(
                FEATURE_NOT_SUPPORTED,
                &format!("INSERT ... ON CONFLICT is not supported on time-series table \"{name}\""),
                "Time-series tables have no unique indexes, so there is no conflict to detect.",
            ),
            pg_sys::CmdType::CMD_MERGE => ts_error(
                FEATURE_NOT_SUPPORTED,
                &format!("MERGE is not supported on time-series table \"{name}\""),
                "Use INSERT, DELETE, or an UPDATE that changes only the meta columns.",
            ),
            pg_sys::CmdType::CMD_UPDATE => check_update(query, relid, &name),
            _ => {}
        }
    }
}

unsafe fn check_update(query: *mut pg_sys::Query, relid: pg_sys::Oid, name: &str) {
    unsafe {
        let Some(config) = config::lookup(relid) else { return };
        let rel = pg_sys::RelationIdGetRelation(relid);
        let violation = update_violation(query, rel, &config, name);
        pg_sys::RelationClose(rel);
        if let Some((message, hint)) = violation {
            ts_error(FEATURE_NOT_SUPPORTED, &message, &hint);
        }
    }
}

/// The first way this UPDATE breaks the meta-only rule, as (message, hint).
unsafe fn update_violation(query: *mut pg_sys::Query, rel: pg_sys::Relation, config: &config::Config, name: &str) -> Option<(String, String)> {
    unsafe {
        let is_meta = |attnum: i32| config.meta_attnums.iter().any(|&m| i32::from(m) == attnum);
        let column_name = |attnum: i32| match attnum {
            0 => "the whole row".to_string(),
            a if a < 0 => "a system column".to_string(),
            a => format!("column \"{}\"", crate::pg::relation::attr_name(rel, a as i16)),
        };
        let meta_names = config.meta_attnums.iter().map(|&m| crate::pg::relation::attr_name(rel, m)).collect::<Vec<_>>().join(", ");
        let result_rel = (*query).resultRelation as u32;
        if config.meta_attnums.is_empty() {
            return Some((
                format!("UPDATE is not supported on time-series table \"{name}\", which has no meta column"),
                "Delete the rows and insert them again.".into(),
            ));
        }
        for tle in list_ptrs((*query).targetList) {
            let tle = tle as *mut pg_sys::TargetEntry;
            if (*tle).resjunk {
                continue;
            }
            let attnum = i32::from((*tle).resno);
            if !is_meta(attnum) {
                return Some((
                    format!("cannot update {} of time-series table \"{name}\": only meta columns may be changed", column_name(attnum)),
                    format!("An UPDATE of a time-series table may only set its meta columns ({meta_names})."),
                ));
            }
            if let Some(used) = referenced_attnums(&[(*tle).expr as *mut pg_sys::Node], result_rel).into_iter().find(|a| !is_meta(*a)) {
                return Some((
                    format!("cannot compute the new meta value of time-series table \"{name}\" from {}", column_name(used)),
                    format!("The new value may only depend on the meta columns ({meta_names}) and constants."),
                ));
            }
        }
        referenced_attnums(&[(*query).jointree as *mut pg_sys::Node], result_rel).into_iter().find(|a| !is_meta(*a)).map(|used| {
            (
                format!("UPDATE of time-series table \"{name}\" may only filter on meta columns, not on {}", column_name(used)),
                format!("Filter on the meta columns ({meta_names}) only, or DELETE the rows and insert them again."),
            )
        })
    }
}

/// Installs post_parse_analyze (from _PG_init).
pub(super) fn install() {
    // SAFETY: _PG_init runs once per process before any statement; the previous
    // hook is kept and called first.
    unsafe {
        PREV_POST_PARSE_ANALYZE = pg_sys::post_parse_analyze_hook;
        pg_sys::post_parse_analyze_hook = Some(post_parse_analyze);
    }
}
