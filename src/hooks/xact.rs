//! Transaction callbacks: pre-commit writes what is buffered, abort discards
//! it, savepoints hand it over or drop it; the launcher hears what committed.

use crate::hooks::executor::end_of_statement;
use pgrx::pg_sys;
use pgrx::prelude::*;

#[pg_guard]
unsafe extern "C-unwind" fn xact_callback(event: pg_sys::XactEvent::Type, _arg: *mut std::ffi::c_void) {
    use pg_sys::XactEvent::*;
    match event {
        XACT_EVENT_PRE_COMMIT | XACT_EVENT_PARALLEL_PRE_COMMIT | XACT_EVENT_PRE_PREPARE => {
            crate::write::flush::flush_at_commit();
            crate::dml::apply::apply(None);
        }
        XACT_EVENT_ABORT | XACT_EVENT_PARALLEL_ABORT | XACT_EVENT_COMMIT | XACT_EVENT_PARALLEL_COMMIT | XACT_EVENT_PREPARE => {
            crate::write::buffer::discard_all();
            crate::dml::pending::discard_all();
            crate::store::tail::forget_checked_segments();
            crate::maintenance::schedule::at_transaction_end(
                matches!(event, XACT_EVENT_COMMIT | XACT_EVENT_PARALLEL_COMMIT | XACT_EVENT_PREPARE),
                crate::store::insert::take_buckets_written(),
                crate::store::tail::take_rows_written(),
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
            crate::store::tail::forget_checked_segments();
            crate::write::buffer::discard_subxact(my_subid);
            crate::dml::pending::discard_subxact(my_subid);
        }
        _ => {}
    }
}

/// Registers the transaction callbacks (from _PG_init).
pub(super) fn install() {
    // SAFETY: called once from _PG_init; RegisterXactCallback and RegisterSubXactCallback keep the two #[pg_guard]
    // callbacks in Postgres's lists for the life of the backend, with a null argument neither callback reads.
    unsafe {
        pg_sys::RegisterXactCallback(Some(xact_callback), std::ptr::null_mut());
        pg_sys::RegisterSubXactCallback(Some(subxact_callback), std::ptr::null_mut());
    }
}
