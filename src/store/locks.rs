//! Bucket locks, as heap locks the rows a DELETE or UPDATE changes: user DML
//! waits for them, maintenance skips what they hold; and the delete of a
//! locked bucket's store row, whose failures are those locks' conflicts.

use crate::catalog::config::Config;
use crate::pg::error::{DATA_CORRUPTED, SERIALIZATION_FAILURE, ts_error};
use super::tuple::find_bucket_tuple;
use pgrx::pg_sys;

/// Deletes a bucket row, failing with 40001 if a concurrent transaction
/// changed it first (we cannot re-apply row-level changes to its new version).
///
/// # Safety
/// `store` must be open and locked RowExclusive.
pub unsafe fn delete_bucket(store: pg_sys::Relation, tid: pg_sys::ItemPointerData) {
    let mut tid = tid;
    let mut tmfd = pg_sys::TM_FailureData::default();
    // SAFETY: `store` is open and locked RowExclusive (delete_bucket's contract); `tid` and `tmfd` are locals
    // heap_delete reads and fills, and wait = true makes it wait for a concurrent updater to finish.
    let result = unsafe {
        pg_sys::heap_delete(
            store,
            &mut tid,
            pg_sys::GetCurrentCommandId(true),
            std::ptr::null_mut(),
            true,
            &mut tmfd,
            false,
        )
    };
    match result {
        pg_sys::TM_Result::TM_Ok => {}
        pg_sys::TM_Result::TM_SelfModified => ts_error(
            SERIALIZATION_FAILURE,
            "bucket was already modified by this statement",
            "A statement may not change the same rows twice (for example through a trigger or a function it calls).",
        ),
        pg_sys::TM_Result::TM_Updated | pg_sys::TM_Result::TM_Deleted => ts_error(
            SERIALIZATION_FAILURE,
            "could not serialize access due to concurrent change of the same bucket",
            "Another transaction changed rows of this bucket; retry the statement.",
        ),
        other => ts_error(DATA_CORRUPTED, &format!("unexpected result {other} deleting a bucket"), "Retry the statement."),
    }
}

/// The outcome of locking a bucket's store row.
#[derive(Debug, PartialEq, Eq)]
pub enum Lock {
    /// Locked (or already ours) and live: it can be rewritten by this transaction.
    Held,
    /// Deleted or rewritten by a committed transaction (follow `successor`).
    Gone,
    /// Locked by another transaction and we asked not to wait.
    Busy,
    /// Deleted or rewritten by this transaction's own later command.
    ChangedBySelf,
}

/// Locks the store row of bucket `bucket_id` against rewrites by others, as
/// heap locks a row a DELETE or UPDATE is about to change. User DML waits;
/// maintenance (compaction, expiry) passes `wait = false` and skips buckets
/// that user DML holds. Waiting ends when the holder ends: then the row is
/// either ours (Held) or gone (the holder rewrote or deleted it).
///
/// # Safety
/// `store` must be `config`'s open bucket store.
pub unsafe fn lock_bucket(store: pg_sys::Relation, config: &Config, bucket_id: i64, cid: pg_sys::CommandId, wait: bool) -> Lock {
    // The current version: committed and not deleted, or being deleted by a
    // transaction still running (then we wait for it below).
    // SAFETY: `store` is `config`'s open bucket store (lock_bucket's contract) and config.id_index its
    // bucket_id index, as find_bucket_tuple requires; SnapshotSelf is a static snapshot of the server.
    let found = unsafe { find_bucket_tuple(store, config.id_index, bucket_id, &raw mut pg_sys::SnapshotSelfData) };
    let Some(found) = found else {
        // SAFETY: the same store and index, with SnapshotAny: any version of the bucket, dead ones included.
        let any_version = unsafe { find_bucket_tuple(store, config.id_index, bucket_id, &raw mut pg_sys::SnapshotAnyData) };
        let deleted_by_us = any_version.is_some_and(|t| {
            // SAFETY: `t` is the palloc'd copy find_bucket_tuple returned: its header is read, then it is freed.
            unsafe {
                let xmax = (*(*t).t_data).t_choice.t_heap.t_xmax;
                pg_sys::heap_freetuple(t);
                pg_sys::TransactionIdIsCurrentTransactionId(xmax)
            }
        });
        return if deleted_by_us { Lock::ChangedBySelf } else { Lock::Gone };
    };
    // SAFETY: `found` is the palloc'd copy of the current version: its TID is read, then the copy is freed
    // and not used again.
    let t_self = unsafe {
        let t_self = (*found).t_self;
        pg_sys::heap_freetuple(found);
        t_self
    };
    let mut tuple = pg_sys::HeapTupleData { t_self, ..Default::default() };
    let mut buffer: pg_sys::Buffer = 0;
    let mut tmfd = pg_sys::TM_FailureData::default();
    let policy = if wait { pg_sys::LockWaitPolicy::LockWaitBlock } else { pg_sys::LockWaitPolicy::LockWaitSkip };
    // SAFETY: `store` is open; `tuple` names the version to lock by its TID, and heap_lock_tuple fills it,
    // `buffer` (pinned when non-zero) and `tmfd`, all locals.
    let result = unsafe {
        pg_sys::heap_lock_tuple(store, &mut tuple, cid, pg_sys::LockTupleMode::LockTupleExclusive, policy, false, &mut buffer, &mut tmfd)
    };
    if buffer != 0 {
        // SAFETY: heap_lock_tuple left `buffer` pinned for us; the pin is released exactly once.
        unsafe { pg_sys::ReleaseBuffer(buffer) };
    }
    match result {
        pg_sys::TM_Result::TM_Ok => Lock::Held,
        pg_sys::TM_Result::TM_WouldBlock => Lock::Busy,
        pg_sys::TM_Result::TM_Updated | pg_sys::TM_Result::TM_Deleted => Lock::Gone,
        pg_sys::TM_Result::TM_SelfModified => Lock::ChangedBySelf,
        other => ts_error(
            DATA_CORRUPTED,
            &format!("unexpected result {other} locking bucket {bucket_id}"),
            "This is a bug in tsbucket; please report it.",
        ),
    }
}
