//! The `tsbucket` table access method's routine: which callback serves each
//! of its entries, and its handler.

use crate::am::modify::{finish_bulk_insert, multi_insert, tuple_complete_speculative, tuple_delete, tuple_insert, tuple_insert_speculative, tuple_lock, tuple_update};
use crate::am::relation::{index_build_range_scan, index_validate_scan, relation_copy_data, relation_copy_for_cluster, relation_estimate_size, relation_needs_toast_table, relation_nontransactional_truncate, relation_set_new_filelocator, relation_size, relation_vacuum, scan_analyze_next_block, scan_analyze_next_tuple};
use crate::am::scan::{index_delete_tuples, index_fetch_begin, index_fetch_end, index_fetch_reset, index_fetch_tuple, parallelscan_estimate, parallelscan_initialize, parallelscan_reinitialize, scan_begin, scan_end, scan_getnextslot, scan_rescan, scan_sample_next_block, scan_sample_next_tuple, tuple_fetch_row_version, tuple_get_latest_tid, tuple_satisfies_snapshot, tuple_tid_valid};
use crate::store::slot;
use pgrx::pg_sys;
use pgrx::prelude::*;
use std::sync::OnceLock;

struct Routine(pg_sys::TableAmRoutine);

// Postgres backends are single-threaded; the routine is immutable once built.
unsafe impl Sync for Routine {}

unsafe impl Send for Routine {}

static ROUTINE: OnceLock<Routine> = OnceLock::new();

pub(super) fn routine() -> *const pg_sys::TableAmRoutine {
    &ROUTINE.get_or_init(|| Routine(build())).0
}

#[unsafe(no_mangle)]
#[doc(hidden)]
pub extern "C" fn pg_finfo_tsbucket_tableam_handler() -> &'static pg_sys::Pg_finfo_record {
    const V1: pg_sys::Pg_finfo_record = pg_sys::Pg_finfo_record { api_version: 1 };
    &V1
}

#[unsafe(no_mangle)]
#[pg_guard]
pub unsafe extern "C-unwind" fn tsbucket_tableam_handler(_fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    pg_sys::Datum::from(routine())
}

fn build() -> pg_sys::TableAmRoutine {
    let mut r = pg_sys::TableAmRoutine { type_: pg_sys::NodeTag::T_TableAmRoutine, ..Default::default() };
    r.slot_callbacks = Some(slot_callbacks);
    r.scan_begin = Some(scan_begin);
    r.scan_end = Some(scan_end);
    r.scan_rescan = Some(scan_rescan);
    r.scan_getnextslot = Some(scan_getnextslot);
    r.parallelscan_estimate = Some(parallelscan_estimate);
    r.parallelscan_initialize = Some(parallelscan_initialize);
    r.parallelscan_reinitialize = Some(parallelscan_reinitialize);
    r.index_fetch_begin = Some(index_fetch_begin);
    r.index_fetch_reset = Some(index_fetch_reset);
    r.index_fetch_end = Some(index_fetch_end);
    r.index_fetch_tuple = Some(index_fetch_tuple);
    r.tuple_fetch_row_version = Some(tuple_fetch_row_version);
    r.tuple_tid_valid = Some(tuple_tid_valid);
    r.tuple_get_latest_tid = Some(tuple_get_latest_tid);
    r.tuple_satisfies_snapshot = Some(tuple_satisfies_snapshot);
    r.index_delete_tuples = Some(index_delete_tuples);
    r.tuple_insert = Some(tuple_insert);
    r.tuple_insert_speculative = Some(tuple_insert_speculative);
    r.tuple_complete_speculative = Some(tuple_complete_speculative);
    r.multi_insert = Some(multi_insert);
    r.tuple_delete = Some(tuple_delete);
    r.tuple_update = Some(tuple_update);
    r.tuple_lock = Some(tuple_lock);
    r.finish_bulk_insert = Some(finish_bulk_insert);
    #[cfg(feature = "pg15")]
    {
        r.relation_set_new_filenode = Some(relation_set_new_filelocator);
    }
    #[cfg(not(feature = "pg15"))]
    {
        r.relation_set_new_filelocator = Some(relation_set_new_filelocator);
    }
    r.relation_nontransactional_truncate = Some(relation_nontransactional_truncate);
    r.relation_copy_data = Some(relation_copy_data);
    r.relation_copy_for_cluster = Some(relation_copy_for_cluster);
    r.relation_vacuum = Some(relation_vacuum);
    r.scan_analyze_next_block = Some(scan_analyze_next_block);
    r.scan_analyze_next_tuple = Some(scan_analyze_next_tuple);
    r.index_build_range_scan = Some(index_build_range_scan);
    r.index_validate_scan = Some(index_validate_scan);
    r.relation_size = Some(relation_size);
    r.relation_needs_toast_table = Some(relation_needs_toast_table);
    r.relation_estimate_size = Some(relation_estimate_size);
    r.scan_sample_next_block = Some(scan_sample_next_block);
    r.scan_sample_next_tuple = Some(scan_sample_next_tuple);
    r
}

#[pg_guard]
unsafe extern "C-unwind" fn slot_callbacks(_rel: pg_sys::Relation) -> *const pg_sys::TupleTableSlotOps {
    slot::ops()
}
