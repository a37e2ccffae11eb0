//! ExecutorStart and ExecutorFinish: the start of a statement, where buckets
//! earlier INSERTs left open are written unless it is an INSERT too, and its
//! end (or a nested one's), where buffered rows are written (or, after an
//! INSERT, left open for the next) and pending DELETEs and UPDATEs applied.

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
    #[link_name = "standard_ExecutorStart"]
    fn standard_executor_start(query_desc: *mut pg_sys::QueryDesc, eflags: i32);
}

static mut PREV_EXECUTOR_FINISH: pg_sys::ExecutorFinish_hook_type = None;
static mut PREV_EXECUTOR_START: pg_sys::ExecutorStart_hook_type = None;

/// Whether the statement is a plain INSERT (no data-modifying WITH).
///
/// # Safety
/// `query_desc` must be a live QueryDesc.
unsafe fn is_plain_insert(query_desc: *mut pg_sys::QueryDesc) -> bool {
    // SAFETY: `query_desc` is live (the contract); its plannedstmt is set from ExecutorStart to ExecutorEnd.
    unsafe { (*query_desc).operation == pg_sys::CmdType::CMD_INSERT && !(*(*query_desc).plannedstmt).hasModifyingCTE }
}

#[pg_guard]
unsafe extern "C-unwind" fn before_executor_start(query_desc: *mut pg_sys::QueryDesc) {
    // SAFETY: ExecutorStart's own `query_desc`, live for the call.
    if !unsafe { is_plain_insert(query_desc) } {
        crate::write::flush::flush_carried();
    }
}

// No #[pg_guard] (see standard_executor_finish above): only Copy values live here.
unsafe extern "C-unwind" fn executor_start(query_desc: *mut pg_sys::QueryDesc, eflags: i32) {
    // SAFETY: ExecutorStart's `query_desc`, passed on unchanged.
    unsafe { before_executor_start(query_desc) };
    // SAFETY: PREV_EXECUTOR_START is written only by install() in _PG_init, before any statement runs; this copies it.
    let prev = unsafe { PREV_EXECUTOR_START };
    match prev {
        // SAFETY: the hook installed before ours gets ExecutorStart's arguments unchanged.
        Some(prev) => unsafe { prev(query_desc, eflags) },
        // SAFETY: standard_ExecutorStart gets ExecutorStart's arguments; nothing with a destructor lives in this frame.
        None => unsafe { standard_executor_start(query_desc, eflags) },
    }
}

/// End of a statement (or of a nested one): write what commands from
/// `from_cid` on buffered, and apply their DELETEs and UPDATEs. A statement
/// nested in a trigger or function has a later command id than the statement
/// that runs it, so its end never touches the outer statement's work.
pub(super) fn end_of_statement(from_cid: Option<pg_sys::CommandId>) {
    crate::write::flush::flush(None, crate::store::bucket::CloseReason::EndOfStatement, from_cid);
    crate::dml::apply::apply(from_cid);
}

/// End of an INSERT (or COPY FROM): its open buckets stay open for the next
/// statements of the transaction (written before anything reads the table,
/// and at commit).
pub(super) fn end_of_insert(relid: Option<pg_sys::Oid>, from_cid: Option<pg_sys::CommandId>) {
    crate::write::buffer::carry(relid, from_cid);
    crate::dml::apply::apply(from_cid);
}

#[pg_guard]
unsafe extern "C-unwind" fn executor_finish(query_desc: *mut pg_sys::QueryDesc) {
    // A plain SELECT writes nothing (its command id is not even assigned):
    // its end must not touch the work of a statement it is nested in.
    // SAFETY: `query_desc` is the QueryDesc of the statement ExecutorFinish is called for; it and its `plannedstmt` live
    // until ExecutorEnd (`plannedstmt` is dereferenced only for a SELECT).
    let (estate, writes) = unsafe {
        ((*query_desc).estate, (*query_desc).operation != pg_sys::CmdType::CMD_SELECT || (*(*query_desc).plannedstmt).hasModifyingCTE)
    };
    // SAFETY: `estate` was checked non-null: the statement's EState, created by ExecutorStart and freed only by ExecutorEnd.
    let cid = (writes && !estate.is_null()).then(|| unsafe { (*estate).es_output_cid });
    // SAFETY: ExecutorFinish's live `query_desc`.
    let insert = unsafe { is_plain_insert(query_desc) };
    // Before: AFTER STATEMENT triggers must see this statement's rows (a scan
    // of the table writes carried buckets first).
    if cid.is_some() {
        if insert { end_of_insert(None, cid) } else { end_of_statement(cid) }
    }
    // SAFETY: PREV_EXECUTOR_FINISH is written only by install() in _PG_init, before any statement runs; this copies it.
    let prev = unsafe { PREV_EXECUTOR_FINISH };
    match prev {
        // SAFETY: the hook installed before ours gets ExecutorFinish's own `query_desc`, unchanged.
        Some(prev) => unsafe { prev(query_desc) },
        // SAFETY: standard_ExecutorFinish gets the live `query_desc`; only `cid` and `prev` (Copy values, no destructor)
        // are alive in this frame if its ERROR jumps over it.
        None => unsafe { standard_executor_finish(query_desc) },
    }
    // After: data-modifying CTEs finished inside ExecutorFinish.
    if cid.is_some() {
        if insert { end_of_insert(None, cid) } else { end_of_statement(cid) }
    }
}

/// Installs ExecutorStart and ExecutorFinish (from _PG_init).
pub(super) fn install() {
    // SAFETY: _PG_init calls this once per process, before any statement reads ExecutorFinish_hook or
    // PREV_EXECUTOR_FINISH; the hook found there is kept and executor_finish calls it.
    unsafe {
        PREV_EXECUTOR_FINISH = pg_sys::ExecutorFinish_hook;
        pg_sys::ExecutorFinish_hook = Some(executor_finish);
        PREV_EXECUTOR_START = pg_sys::ExecutorStart_hook;
        pg_sys::ExecutorStart_hook = Some(executor_start);
    }
}
