//! Reading through the table access method: sequential scans (the plain
//! reader of `scan::plain`), fetches by TID, visibility checks; index scans,
//! parallel table scans and TABLESAMPLE refused.

use crate::am::refusals::{INDEX_HINT, PARALLEL_HINT, unsupported};
use crate::catalog::config;
use crate::catalog::shape::TableShape;
use crate::pg::error::{FEATURE_NOT_SUPPORTED, ts_error};
use crate::store::rows;
use pgrx::pg_sys;
use pgrx::prelude::*;

#[pg_guard]
pub(super) unsafe extern "C-unwind" fn scan_begin(
    rel: pg_sys::Relation,
    snapshot: pg_sys::Snapshot,
    nkeys: i32,
    key: *mut pg_sys::ScanKeyData,
    pscan: pg_sys::ParallelTableScanDesc,
    flags: u32,
) -> pg_sys::TableScanDesc {
    if !pscan.is_null() {
        unsupported("a parallel scan of the table access method", PARALLEL_HINT);
    }
    // SAFETY: table_beginscan passes `rel`, open for the whole scan, with its snapshot and `nkeys` keys at `key`; a
    // plain scan of the table AM uses the default options, as begin_with's contract describes.
    unsafe { crate::scan::plain::begin_with(rel, snapshot, nkeys, key, pscan, flags, crate::scan::plain::ScanOptions::default()) }
}

#[pg_guard]
pub(super) unsafe extern "C-unwind" fn scan_end(scan: pg_sys::TableScanDesc) {
    // SAFETY: `scan` is the descriptor scan_begin returned through begin_with; table_endscan hands it back once, last.
    unsafe { crate::scan::plain::end(scan) }
}

#[pg_guard]
pub(super) unsafe extern "C-unwind" fn scan_rescan(
    scan: pg_sys::TableScanDesc,
    _key: *mut pg_sys::ScanKeyData,
    _set_params: bool,
    _allow_strat: bool,
    _allow_sync: bool,
    _allow_pagemode: bool,
) {
    // SAFETY: `scan` came from scan_begin (begin_with) and table_rescan calls this before scan_end frees it.
    unsafe { crate::scan::plain::rescan(scan) }
}

#[pg_guard]
pub(super) unsafe extern "C-unwind" fn scan_getnextslot(
    scan: pg_sys::TableScanDesc,
    direction: pg_sys::ScanDirection::Type,
    slot: *mut pg_sys::TupleTableSlot,
) -> bool {
    // SAFETY: `scan` came from begin_with (via scan_begin) and is not yet ended; `slot` is the executor's slot made with
    // this AM's slot_callbacks for the scanned relation.
    unsafe { crate::scan::plain::getnextslot(scan, direction, slot) }
}

#[pg_guard]
pub(super) unsafe extern "C-unwind" fn parallelscan_estimate(_rel: pg_sys::Relation) -> pg_sys::Size {
    unsupported("a parallel scan of the table access method", PARALLEL_HINT)
}

#[pg_guard]
pub(super) unsafe extern "C-unwind" fn parallelscan_initialize(_rel: pg_sys::Relation, _pscan: pg_sys::ParallelTableScanDesc) -> pg_sys::Size {
    unsupported("a parallel scan of the table access method", PARALLEL_HINT)
}

#[pg_guard]
pub(super) unsafe extern "C-unwind" fn parallelscan_reinitialize(_rel: pg_sys::Relation, _pscan: pg_sys::ParallelTableScanDesc) {
    unsupported("a parallel scan of the table access method", PARALLEL_HINT)
}

#[pg_guard]
pub(super) unsafe extern "C-unwind" fn index_fetch_begin(_rel: pg_sys::Relation) -> *mut pg_sys::IndexFetchTableData {
    ts_error(FEATURE_NOT_SUPPORTED, "index scans are not supported on time-series tables", INDEX_HINT)
}

#[pg_guard]
pub(super) unsafe extern "C-unwind" fn index_fetch_reset(_data: *mut pg_sys::IndexFetchTableData) {}

#[pg_guard]
pub(super) unsafe extern "C-unwind" fn index_fetch_end(_data: *mut pg_sys::IndexFetchTableData) {}

#[pg_guard]
pub(super) unsafe extern "C-unwind" fn index_fetch_tuple(
    _scan: *mut pg_sys::IndexFetchTableData,
    _tid: pg_sys::ItemPointer,
    _snapshot: pg_sys::Snapshot,
    _slot: *mut pg_sys::TupleTableSlot,
    _call_again: *mut bool,
    _all_dead: *mut bool,
) -> bool {
    ts_error(FEATURE_NOT_SUPPORTED, "index scans are not supported on time-series tables", INDEX_HINT)
}

#[pg_guard]
pub(super) unsafe extern "C-unwind" fn tuple_fetch_row_version(
    rel: pg_sys::Relation,
    tid: pg_sys::ItemPointer,
    snapshot: pg_sys::Snapshot,
    slot: *mut pg_sys::TupleTableSlot,
) -> bool {
    // SAFETY: `rel` is the tsbucket table the executor fetches from, open for this call.
    let relid = unsafe { (*rel).rd_id };
    let Some(config) = config::lookup(relid) else { return false };
    // SAFETY: `rel` is open, so its tuple descriptor `rd_att` is valid for as long as `shape` is built (TableShape::new's contract).
    let shape = unsafe { TableShape::new((*rel).rd_att, &config) };
    // SAFETY: `tid` is the executor's ItemPointer of the row version to fetch, readable during this call.
    let tid = unsafe { &*tid };
    if crate::store::tail_rows::is_tail_row(tid) {
        // SAFETY: in the caller's transaction with its snapshot.
        let Some(b) = (unsafe { crate::store::tail_rows::fetch(&config, &shape, tid, snapshot) }) else { return false };
        // SAFETY: `slot` is the caller's slot of `rel`, made with this AM's slot_callbacks; the bucket holds one row.
        unsafe { rows::fill_slot(rel, &shape, &b, None, 0, slot) };
        return true;
    }
    let (bucket_id, row) = crate::store::tid::get(tid);
    // SAFETY: `store` is `config`'s store, open and AccessShare-locked from table_open to table_close (fetch_bucket's
    // contract); `snapshot` is the caller's, registered for this fetch.
    let bucket = unsafe {
        let store = pg_sys::table_open(config.store_relid, pg_sys::AccessShareLock as i32);
        let bucket = rows::fetch_bucket(&config, &shape, store, bucket_id, snapshot);
        pg_sys::table_close(store, pg_sys::NoLock as i32);
        bucket
    };
    match bucket {
        Some(b) if row < b.rows => {
            // SAFETY: `slot` is the caller's slot of `rel`, made with this AM's slot_callbacks (fill_slot's contract);
            // `row` is below the fetched bucket's row count.
            unsafe { rows::fill_slot(rel, &shape, &b, None, row, slot) };
            true
        }
        _ => false,
    }
}

#[pg_guard]
pub(super) unsafe extern "C-unwind" fn tuple_tid_valid(_scan: pg_sys::TableScanDesc, tid: pg_sys::ItemPointer) -> bool {
    // SAFETY: `tid` is the ItemPointer the caller asks about, readable during this call.
    unsafe { (*tid).ip_posid >= 1 }
}

#[pg_guard]
pub(super) unsafe extern "C-unwind" fn tuple_get_latest_tid(_scan: pg_sys::TableScanDesc, _tid: pg_sys::ItemPointer) {}

/// Whether the bucket version the slot's row came from is visible to the snapshot.
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn tuple_satisfies_snapshot(
    rel: pg_sys::Relation,
    slot: *mut pg_sys::TupleTableSlot,
    snapshot: pg_sys::Snapshot,
) -> bool {
    // SAFETY: `rel` is the open tsbucket table whose row the caller checks.
    let relid = unsafe { (*rel).rd_id };
    let Some(config) = config::lookup(relid) else { return false };
    // SAFETY: `slot` holds a row of `rel` fetched earlier; its tts_tid is read in place while the caller keeps the slot.
    let tid = unsafe { &(*slot).tts_tid };
    if crate::store::tail_rows::is_tail_row(tid) {
        // SAFETY: `rel` is open, so its descriptor is valid for the shape.
        let shape = unsafe { TableShape::new((*rel).rd_att, &config) };
        // SAFETY: in the caller's transaction with its snapshot.
        return unsafe { crate::store::tail_rows::fetch(&config, &shape, tid, snapshot) }.is_some();
    }
    let (bucket_id, _) = crate::store::tid::get(tid);
    // SAFETY: the store is open and AccessShare-locked from table_open to table_close, and `config.id_index` is its
    // bucket_id index (find_bucket_tuple's contract); `snapshot` is the caller's.
    let found = unsafe {
        let store = pg_sys::table_open(config.store_relid, pg_sys::AccessShareLock as i32);
        let found = crate::store::tuple::find_bucket_tuple(store, config.id_index, bucket_id, snapshot);
        pg_sys::table_close(store, pg_sys::NoLock as i32);
        found
    };
    match found {
        Some(t) => {
            // SAFETY: `t` is the palloc'd tuple copy find_bucket_tuple returned, owned here and freed once.
            unsafe { pg_sys::heap_freetuple(t) };
            true
        }
        None => false,
    }
}

#[pg_guard]
pub(super) unsafe extern "C-unwind" fn index_delete_tuples(_rel: pg_sys::Relation, _delstate: *mut pg_sys::TM_IndexDeleteOp) -> pg_sys::TransactionId {
    ts_error(FEATURE_NOT_SUPPORTED, "indexes are not supported on time-series tables", INDEX_HINT)
}

#[pg_guard]
pub(super) unsafe extern "C-unwind" fn scan_sample_next_block(_scan: pg_sys::TableScanDesc, _scanstate: *mut pg_sys::SampleScanState) -> bool {
    unsupported("TABLESAMPLE", "Sample with WHERE random() < fraction instead.")
}

#[pg_guard]
pub(super) unsafe extern "C-unwind" fn scan_sample_next_tuple(
    _scan: pg_sys::TableScanDesc,
    _scanstate: *mut pg_sys::SampleScanState,
    _slot: *mut pg_sys::TupleTableSlot,
) -> bool {
    unsupported("TABLESAMPLE", "Sample with WHERE random() < fraction instead.")
}
