//! Writing through the table access method: INSERT and COPY into the write
//! path, DELETE and UPDATE into dml, EvalPlanQual's re-fetch of moved rows.

use crate::am::refusals::unsupported;
use crate::store::slot;
use pgrx::pg_sys;
use pgrx::prelude::*;

#[pg_guard]
pub(super) unsafe extern "C-unwind" fn tuple_insert(
    rel: pg_sys::Relation,
    slot: *mut pg_sys::TupleTableSlot,
    cid: pg_sys::CommandId,
    _options: i32,
    _bistate: *mut pg_sys::BulkInsertStateData,
) {
    // SAFETY: the executor passes `rel`, the tsbucket table of this INSERT (opened and locked RowExclusive by ExecInitModifyTable),
    // and `slot`, a slot of it holding the row: insert_row's and set_version's contracts.
    unsafe {
        crate::write::append::insert_row(rel, slot, cid);
        slot::set_version(slot, slot::Version::written_now(cid));
    }
}

#[pg_guard]
pub(super) unsafe extern "C-unwind" fn tuple_insert_speculative(
    _rel: pg_sys::Relation,
    _slot: *mut pg_sys::TupleTableSlot,
    _cid: pg_sys::CommandId,
    _options: i32,
    _bistate: *mut pg_sys::BulkInsertStateData,
    _spec_token: u32,
) {
    unsupported("INSERT ... ON CONFLICT", "Time-series tables have no unique indexes, so there is no conflict to detect.")
}

#[pg_guard]
pub(super) unsafe extern "C-unwind" fn tuple_complete_speculative(
    _rel: pg_sys::Relation,
    _slot: *mut pg_sys::TupleTableSlot,
    _spec_token: u32,
    _succeeded: bool,
) {
    unsupported("INSERT ... ON CONFLICT", "Time-series tables have no unique indexes, so there is no conflict to detect.")
}

#[pg_guard]
pub(super) unsafe extern "C-unwind" fn multi_insert(
    rel: pg_sys::Relation,
    slots: *mut *mut pg_sys::TupleTableSlot,
    nslots: i32,
    cid: pg_sys::CommandId,
    _options: i32,
    _bistate: *mut pg_sys::BulkInsertStateData,
) {
    for i in 0..nslots as usize {
        // SAFETY: `slots` is COPY's array of `nslots` filled slots of `rel` (the table COPY FROM opened and locked), and i < nslots,
        // so `*slots.add(i)` is one of them: a slot holding a row of the open table, as insert_row and set_version want.
        unsafe {
            crate::write::append::insert_row(rel, *slots.add(i), cid);
            slot::set_version(*slots.add(i), slot::Version::written_now(cid));
        }
    }
}

/// Tells the executor what heap would: TM_Ok, or TM_SelfModified for a row
/// this command already changed, or TM_Updated / TM_Deleted for a row a
/// committed transaction moved or deleted (READ COMMITTED then follows it
/// through tuple_lock and EvalPlanQual; REPEATABLE READ raises 40001).
///
/// # Safety
/// `tid` must be readable and `tmfd` writable: the executor's arguments of
/// tuple_delete / tuple_update.
unsafe fn report(outcome: crate::dml::pending::Outcome, tid: pg_sys::ItemPointer, cid: pg_sys::CommandId, tmfd: *mut pg_sys::TM_FailureData) -> pg_sys::TM_Result::Type {
    use crate::dml::pending::Outcome;
    // SAFETY: `tid` (readable) and `tmfd` (writable) are the executor's ItemPointer and TM_FailureData of the
    // tuple_delete / tuple_update call that runs report, as this function's contract requires.
    unsafe {
        (*tmfd).ctid = *tid;
        (*tmfd).xmax = pg_sys::InvalidTransactionId;
        (*tmfd).cmax = cid;
        (*tmfd).traversed = false;
    }
    match outcome {
        Outcome::Done => pg_sys::TM_Result::TM_Ok,
        Outcome::AlreadyDoneBySelf => pg_sys::TM_Result::TM_SelfModified,
        Outcome::ChangedBySelf => {
            // Not this command: the executor raises "already modified by an operation triggered by the current command".
            // SAFETY: the same writable `tmfd` as filled above, still the caller's for this call.
            unsafe { (*tmfd).cmax = pg_sys::InvalidCommandId };
            pg_sys::TM_Result::TM_SelfModified
        }
        Outcome::Moved => pg_sys::TM_Result::TM_Updated,
        Outcome::Deleted => pg_sys::TM_Result::TM_Deleted,
    }
}

#[pg_guard]
pub(super) unsafe extern "C-unwind" fn tuple_delete(
    rel: pg_sys::Relation,
    tid: pg_sys::ItemPointer,
    cid: pg_sys::CommandId,
    snapshot: pg_sys::Snapshot,
    crosscheck: pg_sys::Snapshot,
    wait: bool,
    tmfd: *mut pg_sys::TM_FailureData,
    _changing_part: bool,
) -> pg_sys::TM_Result::Type {
    // SAFETY: `tid` is the executor's TID of the row to delete, readable during this call.
    if crate::store::tail_rows::is_tail_row(unsafe { &*tid }) {
        // SAFETY: the executor's arguments of this call: `rel` open, `tid` readable, `tmfd` writable.
        return unsafe { crate::dml::record::delete_tail(rel, &*tid, cid, snapshot, crosscheck, wait, &mut *tmfd) };
    }
    // SAFETY: `rel` is the open tsbucket table of this DELETE (record_delete's contract), `tid` the executor's TID of the row
    // to delete and `tmfd` its failure record, both valid for this call (report's contract).
    unsafe { report(crate::dml::record::record_delete(rel, &*tid, cid), tid, cid, tmfd) }
}

#[cfg(feature = "pg15")]
type UpdateIndexes = bool;

#[cfg(not(feature = "pg15"))]
type UpdateIndexes = pg_sys::TU_UpdateIndexes::Type;

#[pg_guard]
pub(super) unsafe extern "C-unwind" fn tuple_update(
    rel: pg_sys::Relation,
    otid: pg_sys::ItemPointer,
    slot: *mut pg_sys::TupleTableSlot,
    cid: pg_sys::CommandId,
    snapshot: pg_sys::Snapshot,
    crosscheck: pg_sys::Snapshot,
    wait: bool,
    tmfd: *mut pg_sys::TM_FailureData,
    lockmode: *mut pg_sys::LockTupleMode::Type,
    update_indexes: *mut UpdateIndexes,
) -> pg_sys::TM_Result::Type {
    // SAFETY: `lockmode` is ExecUpdate's out-parameter for the lock mode taken, writable during this call.
    unsafe { *lockmode = pg_sys::LockTupleMode::LockTupleExclusive };
    // SAFETY: `otid` is the executor's TID of the row to update, readable during this call.
    if crate::store::tail_rows::is_tail_row(unsafe { &*otid }) {
        // SAFETY: ExecUpdate's arguments of this call, valid until it returns; a tail row has no index entries.
        return unsafe {
            #[cfg(feature = "pg15")]
            {
                *update_indexes = false;
            }
            #[cfg(not(feature = "pg15"))]
            {
                *update_indexes = pg_sys::TU_UpdateIndexes::TU_None;
            }
            crate::dml::record::update_tail(rel, &*otid, slot, cid, snapshot, crosscheck, wait, &mut *tmfd, &mut *lockmode)
        };
    }
    // SAFETY: `slot` holds the new version of the row at `otid` of `rel`, the open table of this UPDATE (record_update's
    // contract); `otid` and `tmfd` are the executor's TID and failure record for this call (report's contract).
    let result = unsafe { report(crate::dml::record::record_update(rel, &*otid, slot, cid), otid, cid, tmfd) };
    if result != pg_sys::TM_Result::TM_Ok {
        return result;
    }
    // SAFETY: `slot`, `otid` and `rel` are still ExecUpdate's: the slot of the new row version, the old row's TID and the
    // open table, all valid until this callback returns.
    unsafe {
        (*slot).tts_tid = *otid;
        (*slot).tts_tableOid = (*rel).rd_id;
        // The row lives on in a bucket this transaction writes at the end of the statement.
        slot::set_version(slot, slot::Version::written_now(cid));
    }
    #[cfg(feature = "pg15")]
    {
        // SAFETY: `update_indexes` is ExecUpdate's bool out-parameter (PostgreSQL 15), writable during this call.
        unsafe { *update_indexes = false };
    }
    #[cfg(not(feature = "pg15"))]
    {
        // SAFETY: `update_indexes` is ExecUpdate's TU_UpdateIndexes out-parameter (PostgreSQL 16 on), writable during this call.
        unsafe { *update_indexes = pg_sys::TU_UpdateIndexes::TU_None };
    }
    pg_sys::TM_Result::TM_Ok
}

/// EvalPlanQual's re-fetch of a row a concurrent transaction moved (row
/// locking by SELECT ... FOR UPDATE is refused when the query is parsed).
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn tuple_lock(
    rel: pg_sys::Relation,
    tid: pg_sys::ItemPointer,
    snapshot: pg_sys::Snapshot,
    slot: *mut pg_sys::TupleTableSlot,
    cid: pg_sys::CommandId,
    mode: pg_sys::LockTupleMode::Type,
    wait_policy: pg_sys::LockWaitPolicy::Type,
    flags: u8,
    tmfd: *mut pg_sys::TM_FailureData,
) -> pg_sys::TM_Result::Type {
    // SAFETY: `rel` is the open tsbucket table EvalPlanQual re-fetches from and `slot` a slot of it (lock_row's contract);
    // `tid` is the executor's ItemPointer, writable during this call, which lock_row moves to the row's latest place;
    // `tmfd` its failure record, writable too.
    let (result, traversed) = unsafe { crate::dml::record::lock_row(rel, &mut *tid, snapshot, cid, mode, wait_policy, flags, &mut *tmfd, slot) };
    // TM_SelfModified here means a later command of ours (a trigger) changed the
    // bucket: the executor then refuses, as for heap.
    let cmax = if result == pg_sys::TM_Result::TM_SelfModified { pg_sys::InvalidCommandId } else { cid };
    // SAFETY: `tmfd` is the executor's TM_FailureData for this tuple_lock call, writable until it returns; `tid` is read
    // after lock_row moved it.
    unsafe {
        (*tmfd).ctid = *tid;
        (*tmfd).xmax = pg_sys::InvalidTransactionId;
        (*tmfd).cmax = cmax;
        (*tmfd).traversed = traversed;
    }
    result
}

#[pg_guard]
pub(super) unsafe extern "C-unwind" fn finish_bulk_insert(rel: pg_sys::Relation, _options: i32) {
    // SAFETY: `rel` is the table COPY FROM wrote into, still open (and locked) when it calls finish_bulk_insert.
    let relid = unsafe { (*rel).rd_id };
    // Its buckets stay open for later statements of the transaction, as an INSERT's do.
    crate::write::buffer::carry(Some(relid), None);
}
