//! ProcessUtility: ALTER TABLE forms that would rewrite a time-series table
//! refused before they start, DROP DATABASE stopping our worker there, the
//! end of COPY's row-by-row path, and ANALYZE gathering statistics from the
//! store.

use crate::catalog::config;
use crate::hooks::executor::{end_of_insert, end_of_statement};
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
    // SAFETY: `pstmt` is the PlannedStmt ProcessUtility runs, alive for the whole command; its utilityStmt is a parse node.
    let stmt = unsafe { (*pstmt).utilityStmt };
    // SAFETY: `stmt` is non-null here, and every parse node starts with its NodeTag.
    let tag = (!stmt.is_null()).then(|| unsafe { (*stmt).type_ });
    // Buckets earlier INSERTs left open are written before other commands
    // (DDL may change the table's columns under them), as before a query;
    // not before those that only run statements (each of which does this as
    // it starts), nor before COPY FROM, transaction control and settings.
    use pg_sys::NodeTag::*;
    let leaves_buffers = matches!(
        tag,
        Some(
            T_CopyStmt
                | T_TransactionStmt
                | T_DoStmt
                | T_CallStmt
                | T_ExecuteStmt
                | T_PrepareStmt
                | T_DeallocateStmt
                | T_DeclareCursorStmt
                | T_FetchStmt
                | T_ClosePortalStmt
                | T_VariableSetStmt
                | T_VariableShowStmt
        )
    );
    if !leaves_buffers {
        crate::write::flush::flush_carried();
    }
    if tag == Some(pg_sys::NodeTag::T_AlterTableStmt) {
        // SAFETY: `stmt` is tagged T_AlterTableStmt, the parse node check_alter_table's contract asks for.
        unsafe { check_alter_table(stmt as *mut pg_sys::AlterTableStmt) };
    }
    if tag == Some(pg_sys::NodeTag::T_DropdbStmt) {
        // SAFETY: `stmt` is tagged T_DropdbStmt; its dbname is null or a NUL-terminated string of the parse tree.
        let name = unsafe { (*(stmt as *mut pg_sys::DropdbStmt)).dbname };
        if !name.is_null() {
            // Only for a caller DROP DATABASE will let through: a refused drop disturbs nothing.
            // SAFETY: `name` is DROP DATABASE's non-null database name, NUL-terminated, owned by the statement's parse tree.
            let name = unsafe { std::ffi::CStr::from_ptr(name) }.to_string_lossy().into_owned();
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
    // SAFETY: `stmt` is tagged T_CopyStmt when read, a CopyStmt parse node alive for the command.
    let copy_from = (tag == Some(pg_sys::NodeTag::T_CopyStmt)).then(|| unsafe { (*(stmt as *mut pg_sys::CopyStmt)).is_from });
    // SAFETY: PREV_PROCESS_UTILITY is set only by install() in _PG_init, before any utility command; this copies it.
    let prev = unsafe { PREV_PROCESS_UTILITY };
    match prev {
        // SAFETY: the earlier ProcessUtility_hook gets process_utility's eight arguments exactly as Postgres passed them.
        Some(prev) => unsafe { prev(pstmt, query_string, read_only_tree, context, params, query_env, dest, qc) },
        // SAFETY: standard_ProcessUtility gets this hook's own arguments, valid for the command; no value with a
        // destructor is alive in this frame, so an ERROR may jump over it.
        None => unsafe { standard_process_utility(pstmt, query_string, read_only_tree, context, params, query_env, dest, qc) },
    }
    // COPY's row-by-row path (BEFORE ROW triggers, volatile defaults, WHERE)
    // never calls finish_bulk_insert: its buckets are left open here, at the
    // end of the statement, as an INSERT's are. (COPY TO wrote them before
    // reading.)
    match copy_from {
        Some(true) => end_of_insert(None, None),
        Some(false) => end_of_statement(None),
        None => {}
    }
    // ANALYZE found no rows in the (empty) user relation: gather the statistics
    // from the store. (Its tables are listed only now: a list made before the
    // command would be alive while an ERROR could jump over this frame.)
    if tag == Some(pg_sys::NodeTag::T_VacuumStmt) {
        // SAFETY: `stmt` is tagged T_VacuumStmt, the VACUUM/ANALYZE parse node tables_to_analyze's contract asks
        // for; the parse tree lives in the command's context, which outlasts VACUUM's own transactions.
        for relid in unsafe { tables_to_analyze(stmt as *mut pg_sys::VacuumStmt) } {
            crate::maintenance::analyze::analyze(relid);
        }
    }
}

/// The time-series tables an ANALYZE (or VACUUM ANALYZE) names, or all of
/// this database's when it names none.
///
/// # Safety
/// `stmt` must be a VacuumStmt parse node.
unsafe fn tables_to_analyze(stmt: *mut pg_sys::VacuumStmt) -> Vec<pg_sys::Oid> {
    // SAFETY: `stmt` is a VacuumStmt (this function's contract); `options` is NIL or its List of DefElem options.
    let (is_vacuumcmd, options) = unsafe { ((*stmt).is_vacuumcmd, (*stmt).options) };
    // SAFETY: `options` is the VacuumStmt's NIL-or-DefElem List read above, as list_ptrs requires.
    let analyzes = !is_vacuumcmd || unsafe { list_ptrs(options) }.iter().any(|o| {
        // SAFETY: each element of a VacuumStmt's options is a DefElem; its defname is null or a NUL-terminated string.
        let name = unsafe { (*(*o as *mut pg_sys::DefElem)).defname };
        // SAFETY: `name` was just checked non-null: the option's NUL-terminated name in the parse tree.
        !name.is_null() && unsafe { std::ffi::CStr::from_ptr(name) }.to_bytes() == b"analyze"
    });
    if !analyzes || !crate::catalog::config::extension_installed() {
        return Vec::new();
    }
    // SAFETY: `(*stmt).rels` is NIL or the VacuumStmt's List of VacuumRelation nodes.
    let rels = unsafe { list_ptrs((*stmt).rels) };
    if rels.is_empty() {
        return crate::catalog::config::all_tables();
    }
    rels.iter()
        .filter_map(|r| {
            let vr = *r as *mut pg_sys::VacuumRelation;
            // SAFETY: `vr` is a VacuumRelation of `stmt.rels`: an oid, or a RangeVar (or null) naming the table.
            let (oid, relation) = unsafe { ((*vr).oid, (*vr).relation) };
            let relid = if oid != pg_sys::InvalidOid {
                oid
            } else if !relation.is_null() {
                // SAFETY: `relation` is the VacuumRelation's non-null RangeVar; with NoLock and RVR_MISSING_OK the lookup
                // takes no lock and returns InvalidOid for a missing table.
                unsafe {
                    pg_sys::RangeVarGetRelidExtended(relation, pg_sys::NoLock as i32, pg_sys::RVROption::RVR_MISSING_OK, None, std::ptr::null_mut())
                }
            } else {
                pg_sys::InvalidOid
            };
            (relid != pg_sys::InvalidOid && config::is_tsbucket_table(relid) && config::lookup(relid).is_some()).then_some(relid)
        })
        .collect()
}

/// Refuses the ALTER TABLE forms that would rewrite a time-series table.
///
/// # Safety
/// `stmt` must be an AlterTableStmt parse node.
unsafe fn check_alter_table(stmt: *mut pg_sys::AlterTableStmt) {
    // SAFETY: `stmt` is an AlterTableStmt (this function's contract); its relation is null or a RangeVar.
    let relation = unsafe { (*stmt).relation };
    if relation.is_null() {
        return;
    }
    // SAFETY: `relation` is the ALTER TABLE's non-null RangeVar; NoLock with RVR_MISSING_OK only resolves the name
    // (InvalidOid when there is no such table), ProcessUtility locks it later.
    let relid = unsafe {
        pg_sys::RangeVarGetRelidExtended(relation, pg_sys::NoLock as i32, pg_sys::RVROption::RVR_MISSING_OK, None, std::ptr::null_mut())
    };
    if relid == pg_sys::InvalidOid {
        return;
    }
    if !config::is_tsbucket_table(relid) {
        // SAFETY: as above; `relid` was just resolved and is only read here.
        unsafe { check_set_tsbucket(stmt, relid) };
        return;
    }
    let Some(config) = config::lookup(relid) else { return };
    let name = crate::pg::relation::relation_name(relid);
    // SAFETY: `(*stmt).cmds` is the AlterTableStmt's List of AlterTableCmd nodes.
    let cmds = unsafe { list_ptrs((*stmt).cmds) };
    for cmd in cmds {
        let cmd = cmd as *mut pg_sys::AlterTableCmd;
        // SAFETY: `cmd` is an AlterTableCmd of `stmt.cmds`; its name is null or the NUL-terminated column name.
        let (cmd_name, subtype) = unsafe { ((*cmd).name, (*cmd).subtype) };
        let column = if cmd_name.is_null() {
            String::new()
        } else {
            // SAFETY: `cmd_name` is non-null: the command's NUL-terminated column name in the parse tree.
            let cmd_name = unsafe { std::ffi::CStr::from_ptr(cmd_name) };
            cmd_name.to_string_lossy().into_owned()
        };
        match subtype {
            pg_sys::AlterTableType::AT_AlterColumnType => {
                // SAFETY: `relid` is the altered table's oid and `cmd_name` a NUL-terminated column name for get_attnum's
                // catalog lookup (null cannot reach here: ALTER COLUMN TYPE always names its column).
                let attnum = unsafe { pg_sys::get_attnum(relid, cmd_name) };
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

/// `ALTER TABLE ... SET ACCESS METHOD tsbucket` of a table that holds rows
/// elsewhere: the rewrite would insert them into an unconfigured table (no
/// time or meta columns chosen). A partitioned table's (PostgreSQL 17+) only
/// names its future partitions' method, and is left alone.
///
/// # Safety
/// `stmt` is an AlterTableStmt parse node naming `relid`.
unsafe fn check_set_tsbucket(stmt: *mut pg_sys::AlterTableStmt, relid: pg_sys::Oid) {
    // SAFETY: get_rel_relkind reads `relid`'s syscache entry (0 when there is none).
    if unsafe { pg_sys::get_rel_relkind(relid) } as u8 != pg_sys::RELKIND_RELATION {
        return;
    }
    // SAFETY: `stmt.cmds` is the AlterTableStmt's List of AlterTableCmd nodes (this function's contract).
    for cmd in unsafe { list_ptrs((*stmt).cmds) } {
        let cmd = cmd as *mut pg_sys::AlterTableCmd;
        // SAFETY: `cmd` is an AlterTableCmd of `stmt.cmds`; for SET ACCESS METHOD its name is the method's (or null).
        let (subtype, method) = unsafe { ((*cmd).subtype, (*cmd).name) };
        if subtype != pg_sys::AlterTableType::AT_SetAccessMethod || method.is_null() {
            continue;
        }
        // SAFETY: `method` is non-null: the command's NUL-terminated access method name.
        let to_tsbucket = unsafe { std::ffi::CStr::from_ptr(method) } == c"tsbucket";
        if to_tsbucket && holds_rows(relid) {
            ts_error(
                FEATURE_NOT_SUPPORTED,
                &format!("cannot change the access method of table \"{}\" to tsbucket", crate::pg::relation::relation_name(relid)),
                "Create a table USING tsbucket, configure it with tsbucket.create_timeseries(), and copy the rows into it (INSERT ... SELECT).",
            );
        }
    }
}

/// Whether the table's owner (the caller: anyone else is refused by Postgres
/// itself, after this hook) sees a row in it, read as that owner; an empty
/// table may become a tsbucket table and then be configured.
fn holds_rows(relid: pg_sys::Oid) -> bool {
    let owner = crate::catalog::privileges::table_owner(relid);
    // SAFETY: GetUserId reads this backend's current user id.
    let user = unsafe { pg_sys::GetUserId() };
    // SAFETY: has_privs_of_role compares two role oids through the role membership cache.
    if unsafe { !pg_sys::superuser() && !pg_sys::has_privs_of_role(user, owner) } {
        return false;
    }
    crate::pg::role::as_user(owner, true, || {
        Spi::get_one::<bool>(&format!("SELECT EXISTS (SELECT 1 FROM ONLY {})", crate::pg::relation::qualified_name(relid)))
            .ok()
            .flatten()
            .unwrap_or(false)
    })
}

/// Installs ProcessUtility (from _PG_init).
pub(super) fn install() {
    // SAFETY: _PG_init calls this once per process before any utility command runs, so neither ProcessUtility_hook nor
    // PREV_PROCESS_UTILITY is read meanwhile; the hook found is kept and process_utility calls it.
    unsafe {
        PREV_PROCESS_UTILITY = pg_sys::ProcessUtility_hook;
        pg_sys::ProcessUtility_hook = Some(process_utility);
    }
}
