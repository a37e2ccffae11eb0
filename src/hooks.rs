//! Planner-side rules and statement boundaries.
//!
//! - post_parse_analyze: MongoDB's update rule (SET and WHERE on meta columns
//!   only), no ON CONFLICT, no MERGE. The parser opens the target table before
//!   this hook runs, which loads this library, so the rule holds even for a
//!   session's first statement without preloading.
//! - ExecutorFinish: the end of a statement, where buffered rows are written
//!   and pending deletes/updates applied.
//! - transaction callbacks: pre-commit flush, abort discards, savepoints.

use crate::pg::error::{ts_error, FEATURE_NOT_SUPPORTED};
use crate::pg::nodes::{list_ptrs, referenced_attnums};
use crate::catalog::config;
use pgrx::pg_sys;
use pgrx::prelude::*;

// Postgres's own implementations, declared here without pgrx's error trap: an
// ERROR raised inside them (a foreign-key violation from an AFTER trigger at
// ExecutorFinish, a utility command's error with its position) then reaches
// the client exactly as Postgres raised it, every field included, instead of
// being caught and re-raised with only code, message, detail and hint.
// Calling them is sound only while no Rust value with a destructor is alive in
// the calling frames, which the hooks below keep to (an ERROR jumps over them).
unsafe extern "C-unwind" {
    #[link_name = "standard_ExecutorFinish"]
    fn standard_executor_finish(query_desc: *mut pg_sys::QueryDesc);
    #[link_name = "standard_ProcessUtility"]
    fn standard_process_utility(
        pstmt: *mut pg_sys::PlannedStmt,
        query_string: *const std::ffi::c_char,
        read_only_tree: bool,
        context: pg_sys::ProcessUtilityContext::Type,
        params: pg_sys::ParamListInfo,
        query_env: *mut pg_sys::QueryEnvironment,
        dest: *mut pg_sys::DestReceiver,
        qc: *mut pg_sys::QueryCompletion,
    );
}

static mut PREV_POST_PARSE_ANALYZE: pg_sys::post_parse_analyze_hook_type = None;
static mut PREV_EXECUTOR_FINISH: pg_sys::ExecutorFinish_hook_type = None;
static mut PREV_PROCESS_UTILITY: pg_sys::ProcessUtility_hook_type = None;

pub fn init() {
    unsafe {
        PREV_POST_PARSE_ANALYZE = pg_sys::post_parse_analyze_hook;
        pg_sys::post_parse_analyze_hook = Some(post_parse_analyze);
        PREV_EXECUTOR_FINISH = pg_sys::ExecutorFinish_hook;
        pg_sys::ExecutorFinish_hook = Some(executor_finish);
        PREV_PROCESS_UTILITY = pg_sys::ProcessUtility_hook;
        pg_sys::ProcessUtility_hook = Some(process_utility);
        pg_sys::RegisterXactCallback(Some(xact_callback), std::ptr::null_mut());
        pg_sys::RegisterSubXactCallback(Some(subxact_callback), std::ptr::null_mut());
    }
}

/// End of a statement (or of a nested one): write what commands from
/// `from_cid` on buffered, and apply their DELETEs and UPDATEs. A statement
/// nested in a trigger or function has a later command id than the statement
/// that runs it, so its end never touches the outer statement's work.
pub fn end_of_statement(from_cid: Option<pg_sys::CommandId>) {
    crate::write::flush::flush(None, crate::store::bucket::CloseReason::EndOfStatement, from_cid);
    crate::dml::apply::apply(from_cid);
}

#[pg_guard]
unsafe extern "C-unwind" fn executor_finish(query_desc: *mut pg_sys::QueryDesc) {
    // A plain SELECT writes nothing (its command id is not even assigned):
    // its end must not touch the work of a statement it is nested in.
    let cid = unsafe {
        let estate = (*query_desc).estate;
        let writes = (*query_desc).operation != pg_sys::CmdType::CMD_SELECT || (*(*query_desc).plannedstmt).hasModifyingCTE;
        (writes && !estate.is_null()).then(|| (*estate).es_output_cid)
    };
    // Before: AFTER STATEMENT triggers must see this statement's rows.
    if cid.is_some() {
        end_of_statement(cid);
    }
    unsafe {
        match PREV_EXECUTOR_FINISH {
            Some(prev) => prev(query_desc),
            None => standard_executor_finish(query_desc),
        }
    }
    // After: data-modifying CTEs finished inside ExecutorFinish.
    if cid.is_some() {
        end_of_statement(cid);
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn xact_callback(event: pg_sys::XactEvent::Type, _arg: *mut std::ffi::c_void) {
    use pg_sys::XactEvent::*;
    match event {
        XACT_EVENT_PRE_COMMIT | XACT_EVENT_PARALLEL_PRE_COMMIT | XACT_EVENT_PRE_PREPARE => end_of_statement(None),
        XACT_EVENT_ABORT | XACT_EVENT_PARALLEL_ABORT | XACT_EVENT_COMMIT | XACT_EVENT_PARALLEL_COMMIT | XACT_EVENT_PREPARE => {
            crate::write::buffer::discard_all();
            crate::dml::pending::discard_all();
            crate::maintenance::schedule::at_transaction_end(
                matches!(event, XACT_EVENT_COMMIT | XACT_EVENT_PARALLEL_COMMIT | XACT_EVENT_PREPARE),
                crate::store::insert::take_buckets_written(),
            );
        }
        _ => {}
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn subxact_callback(
    event: pg_sys::SubXactEvent::Type,
    my_subid: pg_sys::SubTransactionId,
    parent_subid: pg_sys::SubTransactionId,
    _arg: *mut std::ffi::c_void,
) {
    use pg_sys::SubXactEvent::*;
    match event {
        SUBXACT_EVENT_PRE_COMMIT_SUB => end_of_statement(None),
        SUBXACT_EVENT_COMMIT_SUB => {
            crate::write::buffer::reassign_subxact(my_subid, parent_subid);
            crate::dml::pending::reassign_subxact(my_subid, parent_subid);
        }
        SUBXACT_EVENT_ABORT_SUB => {
            crate::write::buffer::discard_subxact(my_subid);
            crate::dml::pending::discard_subxact(my_subid);
        }
        _ => {}
    }
}

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

/// ALTER TABLE forms that would rewrite a time-series table are refused before
/// they start (a rewrite would copy rows into a table that is not configured).
/// The ddl_command_end event trigger backs the time/meta rules up when this
/// library was not loaded yet.
#[pg_guard]
#[allow(clippy::too_many_arguments)]
unsafe extern "C-unwind" fn process_utility(
    pstmt: *mut pg_sys::PlannedStmt,
    query_string: *const std::ffi::c_char,
    read_only_tree: bool,
    context: pg_sys::ProcessUtilityContext::Type,
    params: pg_sys::ParamListInfo,
    query_env: *mut pg_sys::QueryEnvironment,
    dest: *mut pg_sys::DestReceiver,
    qc: *mut pg_sys::QueryCompletion,
) {
    unsafe {
        let stmt = (*pstmt).utilityStmt;
        if !stmt.is_null() && (*stmt).type_ == pg_sys::NodeTag::T_AlterTableStmt {
            check_alter_table(stmt as *mut pg_sys::AlterTableStmt);
        }
        if !stmt.is_null() && (*stmt).type_ == pg_sys::NodeTag::T_DropdbStmt {
            let name = (*(stmt as *mut pg_sys::DropdbStmt)).dbname;
            if !name.is_null() {
                // Only for a caller DROP DATABASE will let through: a refused drop disturbs nothing.
                let name = std::ffi::CStr::from_ptr(name).to_string_lossy().into_owned();
                let may_drop = Spi::get_one_with_args::<bool>(
                    "SELECT pg_has_role(datdba, 'USAGE') FROM pg_catalog.pg_database WHERE datname = $1",
                    &[name.as_str().into()],
                )
                .ok()
                .flatten()
                .unwrap_or(false);
                if may_drop {
                    crate::maintenance::worker::stop_workers_in(&name);
                }
            }
        }
        let is_copy = !stmt.is_null() && (*stmt).type_ == pg_sys::NodeTag::T_CopyStmt;
        let analyze = if !stmt.is_null() && (*stmt).type_ == pg_sys::NodeTag::T_VacuumStmt {
            tables_to_analyze(stmt as *mut pg_sys::VacuumStmt)
        } else {
            Vec::new()
        };
        match PREV_PROCESS_UTILITY {
            Some(prev) => prev(pstmt, query_string, read_only_tree, context, params, query_env, dest, qc),
            None => standard_process_utility(pstmt, query_string, read_only_tree, context, params, query_env, dest, qc),
        }
        // COPY's row-by-row path (BEFORE ROW triggers, volatile defaults, WHERE)
        // never calls finish_bulk_insert: its rows are written here, at the end
        // of the statement, like every other statement's.
        if is_copy {
            end_of_statement(None);
        }
        // ANALYZE found no rows in the (empty) user relation: gather the statistics from the store.
        for relid in analyze {
            crate::maintenance::analyze::analyze(relid);
        }
    }
}

/// The time-series tables an ANALYZE (or VACUUM ANALYZE) names, or all of
/// this database's when it names none.
unsafe fn tables_to_analyze(stmt: *mut pg_sys::VacuumStmt) -> Vec<pg_sys::Oid> {
    unsafe {
        let analyzes = !(*stmt).is_vacuumcmd
            || list_ptrs((*stmt).options).iter().any(|o| {
                let name = (*(*o as *mut pg_sys::DefElem)).defname;
                !name.is_null() && std::ffi::CStr::from_ptr(name).to_bytes() == b"analyze"
            });
        if !analyzes || !crate::catalog::config::extension_installed() {
            return Vec::new();
        }
        let rels = list_ptrs((*stmt).rels);
        if rels.is_empty() {
            return crate::catalog::config::all_tables();
        }
        rels.iter()
            .filter_map(|r| {
                let vr = *r as *mut pg_sys::VacuumRelation;
                let relid = if (*vr).oid != pg_sys::InvalidOid {
                    (*vr).oid
                } else if !(*vr).relation.is_null() {
                    pg_sys::RangeVarGetRelidExtended((*vr).relation, pg_sys::NoLock as i32, pg_sys::RVROption::RVR_MISSING_OK, None, std::ptr::null_mut())
                } else {
                    pg_sys::InvalidOid
                };
                (relid != pg_sys::InvalidOid && config::is_tsbucket_table(relid) && config::lookup(relid).is_some()).then_some(relid)
            })
            .collect()
    }
}

unsafe fn check_alter_table(stmt: *mut pg_sys::AlterTableStmt) {
    unsafe {
        if (*stmt).relation.is_null() {
            return;
        }
        let relid = pg_sys::RangeVarGetRelidExtended(
            (*stmt).relation,
            pg_sys::NoLock as i32,
            pg_sys::RVROption::RVR_MISSING_OK,
            None,
            std::ptr::null_mut(),
        );
        if relid == pg_sys::InvalidOid || !config::is_tsbucket_table(relid) {
            return;
        }
        let Some(config) = config::lookup(relid) else { return };
        let name = crate::pg::relation::relation_name(relid);
        for cmd in list_ptrs((*stmt).cmds) {
            let cmd = cmd as *mut pg_sys::AlterTableCmd;
            let column = if (*cmd).name.is_null() {
                String::new()
            } else {
                std::ffi::CStr::from_ptr((*cmd).name).to_string_lossy().into_owned()
            };
            match (*cmd).subtype {
                pg_sys::AlterTableType::AT_AlterColumnType => {
                    let attnum = pg_sys::get_attnum(relid, (*cmd).name);
                    if attnum == config.time_attnum || config.meta_attnums.contains(&attnum) {
                        ts_error(
                            FEATURE_NOT_SUPPORTED,
                            &format!("cannot change the type of column \"{column}\" of time-series table \"{name}\""),
                            "The time and meta columns are fixed at creation; renaming them is allowed.",
                        );
                    }
                    ts_error(
                        FEATURE_NOT_SUPPORTED,
                        &format!("cannot change the type of column \"{column}\" of time-series table \"{name}\""),
                        "Add a column of the new type, fill it with INSERT ... SELECT into a new table, or keep the old type.",
                    );
                }
                pg_sys::AlterTableType::AT_SetAccessMethod => ts_error(
                    FEATURE_NOT_SUPPORTED,
                    &format!("cannot change the access method of time-series table \"{name}\""),
                    "Copy the rows into a new table with INSERT ... SELECT.",
                ),
                _ => {}
            }
        }
    }
}
