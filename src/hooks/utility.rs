//! ProcessUtility: ALTER TABLE forms that would rewrite a time-series table
//! refused before they start, DROP DATABASE stopping our worker there, the
//! end of COPY's row-by-row path, and ANALYZE gathering statistics from the
//! store.

use crate::catalog::config;
use crate::hooks::executor::end_of_statement;
use crate::pg::error::{FEATURE_NOT_SUPPORTED, ts_error};
use crate::pg::nodes::list_ptrs;
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

static mut PREV_PROCESS_UTILITY: pg_sys::ProcessUtility_hook_type = None;

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

/// Installs ProcessUtility (from _PG_init).
pub(super) fn install() {
    // SAFETY: _PG_init runs once per process before any statement; the previous
    // hook is kept and called first.
    unsafe {
        PREV_PROCESS_UTILITY = pg_sys::ProcessUtility_hook;
        pg_sys::ProcessUtility_hook = Some(process_utility);
    }
}
