//! The `tsbucket` table access method. Each callback turns Postgres's raw
//! pointers into calls of plain Rust in the modules below; version
//! differences (15 vs 18) stay in this file behind `cfg` seams.

pub mod access;
pub mod aggscan;
pub mod lastpoint;
pub mod ordered;
pub mod scan;
pub mod vector_filter;

use crate::catalog::config;
use crate::pg::error::{ts_error, FEATURE_NOT_SUPPORTED};
use crate::catalog::shape::TableShape;
use crate::store::rows as read;
use crate::store::slot;

use pgrx::pg_sys;
use pgrx::prelude::*;
use std::sync::OnceLock;

struct Routine(pg_sys::TableAmRoutine);
// Postgres backends are single-threaded; the routine is immutable once built.
unsafe impl Sync for Routine {}
unsafe impl Send for Routine {}

static ROUTINE: OnceLock<Routine> = OnceLock::new();

pub fn routine() -> *const pg_sys::TableAmRoutine {
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

fn unsupported(what: &str, hint: &str) -> ! {
    ts_error(FEATURE_NOT_SUPPORTED, &format!("{what} is not supported on time-series tables"), hint)
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

#[pg_guard]
unsafe extern "C-unwind" fn scan_begin(
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
    unsafe { scan::begin_with(rel, snapshot, nkeys, key, pscan, flags, scan::ScanOptions::default()) }
}

#[pg_guard]
unsafe extern "C-unwind" fn scan_end(scan: pg_sys::TableScanDesc) {
    unsafe { scan::end(scan) }
}

#[pg_guard]
unsafe extern "C-unwind" fn scan_rescan(
    scan: pg_sys::TableScanDesc,
    _key: *mut pg_sys::ScanKeyData,
    _set_params: bool,
    _allow_strat: bool,
    _allow_sync: bool,
    _allow_pagemode: bool,
) {
    unsafe { scan::rescan(scan) }
}

#[pg_guard]
unsafe extern "C-unwind" fn scan_getnextslot(
    scan: pg_sys::TableScanDesc,
    direction: pg_sys::ScanDirection::Type,
    slot: *mut pg_sys::TupleTableSlot,
) -> bool {
    unsafe { scan::getnextslot(scan, direction, slot) }
}

#[pg_guard]
unsafe extern "C-unwind" fn parallelscan_estimate(_rel: pg_sys::Relation) -> pg_sys::Size {
    unsupported("a parallel scan of the table access method", PARALLEL_HINT)
}

#[pg_guard]
unsafe extern "C-unwind" fn parallelscan_initialize(_rel: pg_sys::Relation, _pscan: pg_sys::ParallelTableScanDesc) -> pg_sys::Size {
    unsupported("a parallel scan of the table access method", PARALLEL_HINT)
}

#[pg_guard]
unsafe extern "C-unwind" fn parallelscan_reinitialize(_rel: pg_sys::Relation, _pscan: pg_sys::ParallelTableScanDesc) {
    unsupported("a parallel scan of the table access method", PARALLEL_HINT)
}

/// tsbucket's planner replaces every partial path over a time-series table
/// with a parallel TsBucketScan: only another extension's paths get here.
const PARALLEL_HINT: &str = "Parallel plans read tsbucket tables through TsBucketScan; SET max_parallel_workers_per_gather = 0 to plan without parallel workers.";

const INDEX_HINT: &str = "Queries that filter on the meta and time columns read only the buckets they need; no index is required.";

#[pg_guard]
unsafe extern "C-unwind" fn index_fetch_begin(_rel: pg_sys::Relation) -> *mut pg_sys::IndexFetchTableData {
    ts_error(FEATURE_NOT_SUPPORTED, "index scans are not supported on time-series tables", INDEX_HINT)
}

#[pg_guard]
unsafe extern "C-unwind" fn index_fetch_reset(_data: *mut pg_sys::IndexFetchTableData) {}

#[pg_guard]
unsafe extern "C-unwind" fn index_fetch_end(_data: *mut pg_sys::IndexFetchTableData) {}

#[pg_guard]
unsafe extern "C-unwind" fn index_fetch_tuple(
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
unsafe extern "C-unwind" fn tuple_fetch_row_version(
    rel: pg_sys::Relation,
    tid: pg_sys::ItemPointer,
    snapshot: pg_sys::Snapshot,
    slot: *mut pg_sys::TupleTableSlot,
) -> bool {
    unsafe {
        let Some(config) = config::lookup((*rel).rd_id) else { return false };
        let shape = TableShape::new((*rel).rd_att, &config);
        let (bucket_id, row) = crate::store::tid::get(&*tid);
        let store = pg_sys::table_open(config.store_relid, pg_sys::AccessShareLock as i32);
        let bucket = read::fetch_bucket(&config, &shape, store, bucket_id, snapshot);
        pg_sys::table_close(store, pg_sys::NoLock as i32);
        match bucket {
            Some(b) if row < b.rows => {
                read::fill_slot(rel, &shape, &b, None, row, slot);
                true
            }
            _ => false,
        }
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn tuple_tid_valid(_scan: pg_sys::TableScanDesc, tid: pg_sys::ItemPointer) -> bool {
    unsafe { (*tid).ip_posid >= 1 }
}

#[pg_guard]
unsafe extern "C-unwind" fn tuple_get_latest_tid(_scan: pg_sys::TableScanDesc, _tid: pg_sys::ItemPointer) {}

/// Whether the bucket version the slot's row came from is visible to the snapshot.
#[pg_guard]
unsafe extern "C-unwind" fn tuple_satisfies_snapshot(
    rel: pg_sys::Relation,
    slot: *mut pg_sys::TupleTableSlot,
    snapshot: pg_sys::Snapshot,
) -> bool {
    unsafe {
        let Some(config) = config::lookup((*rel).rd_id) else { return false };
        let (bucket_id, _) = crate::store::tid::get(&(*slot).tts_tid);
        let store = pg_sys::table_open(config.store_relid, pg_sys::AccessShareLock as i32);
        let found = crate::store::tuple::find_bucket_tuple(store, config.id_index, bucket_id, snapshot);
        pg_sys::table_close(store, pg_sys::NoLock as i32);
        match found {
            Some(t) => {
                pg_sys::heap_freetuple(t);
                true
            }
            None => false,
        }
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn index_delete_tuples(_rel: pg_sys::Relation, _delstate: *mut pg_sys::TM_IndexDeleteOp) -> pg_sys::TransactionId {
    ts_error(FEATURE_NOT_SUPPORTED, "indexes are not supported on time-series tables", INDEX_HINT)
}

#[pg_guard]
unsafe extern "C-unwind" fn tuple_insert(
    rel: pg_sys::Relation,
    slot: *mut pg_sys::TupleTableSlot,
    cid: pg_sys::CommandId,
    _options: i32,
    _bistate: *mut pg_sys::BulkInsertStateData,
) {
    // SAFETY: the executor passes an open tsbucket table and a slot holding a row of it.
    unsafe {
        crate::write::append::insert_row(rel, slot, cid);
        slot::set_version(slot, slot::Version::written_now(cid));
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn tuple_insert_speculative(
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
unsafe extern "C-unwind" fn tuple_complete_speculative(
    _rel: pg_sys::Relation,
    _slot: *mut pg_sys::TupleTableSlot,
    _spec_token: u32,
    _succeeded: bool,
) {
    unsupported("INSERT ... ON CONFLICT", "Time-series tables have no unique indexes, so there is no conflict to detect.")
}

#[pg_guard]
unsafe extern "C-unwind" fn multi_insert(
    rel: pg_sys::Relation,
    slots: *mut *mut pg_sys::TupleTableSlot,
    nslots: i32,
    cid: pg_sys::CommandId,
    _options: i32,
    _bistate: *mut pg_sys::BulkInsertStateData,
) {
    unsafe {
        for i in 0..nslots as usize {
            crate::write::append::insert_row(rel, *slots.add(i), cid);
            slot::set_version(*slots.add(i), slot::Version::written_now(cid));
        }
    }
}

/// Tells the executor what heap would: TM_Ok, or TM_SelfModified for a row
/// this command already changed, or TM_Updated / TM_Deleted for a row a
/// committed transaction moved or deleted (READ COMMITTED then follows it
/// through tuple_lock and EvalPlanQual; REPEATABLE READ raises 40001).
unsafe fn report(outcome: crate::dml::pending::Outcome, tid: pg_sys::ItemPointer, cid: pg_sys::CommandId, tmfd: *mut pg_sys::TM_FailureData) -> pg_sys::TM_Result::Type {
    use crate::dml::pending::Outcome;
    unsafe {
        (*tmfd).ctid = *tid;
        (*tmfd).xmax = pg_sys::InvalidTransactionId;
        (*tmfd).cmax = cid;
        (*tmfd).traversed = false;
        match outcome {
            Outcome::Done => pg_sys::TM_Result::TM_Ok,
            Outcome::AlreadyDoneBySelf => pg_sys::TM_Result::TM_SelfModified,
            Outcome::ChangedBySelf => {
                // Not this command: the executor raises "already modified by an operation triggered by the current command".
                (*tmfd).cmax = pg_sys::InvalidCommandId;
                pg_sys::TM_Result::TM_SelfModified
            }
            Outcome::Moved => pg_sys::TM_Result::TM_Updated,
            Outcome::Deleted => pg_sys::TM_Result::TM_Deleted,
        }
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn tuple_delete(
    rel: pg_sys::Relation,
    tid: pg_sys::ItemPointer,
    cid: pg_sys::CommandId,
    _snapshot: pg_sys::Snapshot,
    _crosscheck: pg_sys::Snapshot,
    _wait: bool,
    tmfd: *mut pg_sys::TM_FailureData,
    _changing_part: bool,
) -> pg_sys::TM_Result::Type {
    unsafe { report(crate::dml::record::record_delete(rel, &*tid, cid), tid, cid, tmfd) }
}

#[cfg(feature = "pg15")]
type UpdateIndexes = bool;
#[cfg(not(feature = "pg15"))]
type UpdateIndexes = pg_sys::TU_UpdateIndexes::Type;

#[pg_guard]
unsafe extern "C-unwind" fn tuple_update(
    rel: pg_sys::Relation,
    otid: pg_sys::ItemPointer,
    slot: *mut pg_sys::TupleTableSlot,
    cid: pg_sys::CommandId,
    _snapshot: pg_sys::Snapshot,
    _crosscheck: pg_sys::Snapshot,
    _wait: bool,
    tmfd: *mut pg_sys::TM_FailureData,
    lockmode: *mut pg_sys::LockTupleMode::Type,
    update_indexes: *mut UpdateIndexes,
) -> pg_sys::TM_Result::Type {
    unsafe {
        *lockmode = pg_sys::LockTupleMode::LockTupleExclusive;
        let result = report(crate::dml::record::record_update(rel, &*otid, slot, cid), otid, cid, tmfd);
        if result != pg_sys::TM_Result::TM_Ok {
            return result;
        }
        (*slot).tts_tid = *otid;
        (*slot).tts_tableOid = (*rel).rd_id;
        // The row lives on in a bucket this transaction writes at the end of the statement.
        slot::set_version(slot, slot::Version::written_now(cid));
        #[cfg(feature = "pg15")]
        {
            *update_indexes = false;
        }
        #[cfg(not(feature = "pg15"))]
        {
            *update_indexes = pg_sys::TU_UpdateIndexes::TU_None;
        }
    }
    pg_sys::TM_Result::TM_Ok
}

/// EvalPlanQual's re-fetch of a row a concurrent transaction moved (row
/// locking by SELECT ... FOR UPDATE is refused when the query is parsed).
#[pg_guard]
unsafe extern "C-unwind" fn tuple_lock(
    rel: pg_sys::Relation,
    tid: pg_sys::ItemPointer,
    _snapshot: pg_sys::Snapshot,
    slot: *mut pg_sys::TupleTableSlot,
    cid: pg_sys::CommandId,
    _mode: pg_sys::LockTupleMode::Type,
    _wait_policy: pg_sys::LockWaitPolicy::Type,
    flags: u8,
    tmfd: *mut pg_sys::TM_FailureData,
) -> pg_sys::TM_Result::Type {
    unsafe {
        let follow = flags & pg_sys::TUPLE_LOCK_FLAG_FIND_LAST_VERSION as u8 != 0;
        let (result, traversed) = crate::dml::record::lock_row(rel, &mut *tid, cid, follow, slot);
        (*tmfd).ctid = *tid;
        (*tmfd).xmax = pg_sys::InvalidTransactionId;
        // TM_SelfModified here means a later command of ours (a trigger) changed the
        // bucket: the executor then refuses, as for heap.
        (*tmfd).cmax = if result == pg_sys::TM_Result::TM_SelfModified { pg_sys::InvalidCommandId } else { cid };
        (*tmfd).traversed = traversed;
        result
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn finish_bulk_insert(rel: pg_sys::Relation, _options: i32) {
    crate::write::flush::flush(Some(unsafe { (*rel).rd_id }), crate::store::bucket::CloseReason::EndOfStatement, None);
}

#[cfg(feature = "pg15")]
type FileLocator = pg_sys::RelFileNode;
#[cfg(not(feature = "pg15"))]
type FileLocator = pg_sys::RelFileLocator;

/// New storage for the table itself (it stays empty: rows live in the store).
/// On TRUNCATE of a configured table the store is truncated too, in the same
/// transaction, so ROLLBACK brings the rows back.
#[pg_guard]
unsafe extern "C-unwind" fn relation_set_new_filelocator(
    rel: pg_sys::Relation,
    newrlocator: *const FileLocator,
    persistence: std::ffi::c_char,
    freeze_xid: *mut pg_sys::TransactionId,
    minmulti: *mut pg_sys::MultiXactId,
) {
    unsafe {
        // No transaction ids live in this relation's own storage.
        *freeze_xid = pg_sys::InvalidTransactionId;
        *minmulti = pg_sys::InvalidTransactionId;
        if persistence == pg_sys::RELPERSISTENCE_UNLOGGED as std::ffi::c_char {
            unsupported("UNLOGGED", "Create the table without UNLOGGED; its buckets are WAL-logged in the bucket store.");
        }
        let srel = pg_sys::RelationCreateStorage(*newrlocator, persistence, true);
        pg_sys::smgrclose(srel);
        truncate_store(rel);
    }
}

unsafe fn truncate_store(rel: pg_sys::Relation) {
    let relid = unsafe { (*rel).rd_id };
    if let Some(config) = config::lookup(relid) {
        crate::write::buffer::discard_table(relid);
        crate::catalog::config::as_extension_owner(|| {
            let mut relations = crate::pg::relation::qualified_name(config.store_relid);
            if let Some((moves, _)) = config.moves {
                relations = format!("{relations}, {}", crate::pg::relation::qualified_name(moves));
            }
            Spi::run(&format!("TRUNCATE {relations}")).expect("truncate bucket store");
        });
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn relation_nontransactional_truncate(rel: pg_sys::Relation) {
    unsafe { truncate_store(rel) }
}

#[pg_guard]
unsafe extern "C-unwind" fn relation_copy_data(_rel: pg_sys::Relation, _newrlocator: *const FileLocator) {
    unsupported("ALTER TABLE ... SET TABLESPACE", "Move the bucket store (tsbucket.timeseries.bucket_store) instead.")
}

#[pg_guard]
unsafe extern "C-unwind" fn relation_copy_for_cluster(
    _old: pg_sys::Relation,
    _new: pg_sys::Relation,
    _old_index: pg_sys::Relation,
    _use_sort: bool,
    _oldest_xmin: pg_sys::TransactionId,
    _xid_cutoff: *mut pg_sys::TransactionId,
    _multi_cutoff: *mut pg_sys::MultiXactId,
    _num_tuples: *mut f64,
    _tups_vacuumed: *mut f64,
    _tups_recently_dead: *mut f64,
) {
    unsupported(
        "VACUUM FULL or CLUSTER",
        "Plain VACUUM reclaims the space of deleted buckets; buckets are already ordered by series and time.",
    )
}

/// VACUUM of the table vacuums its bucket store, where the dead versions are.
#[pg_guard]
unsafe extern "C-unwind" fn relation_vacuum(
    rel: pg_sys::Relation,
    params: *mut pg_sys::VacuumParams,
    bstrategy: pg_sys::BufferAccessStrategy,
) {
    unsafe {
        let Some(config) = config::lookup((*rel).rd_id) else { return };
        let store = pg_sys::table_open(config.store_relid, pg_sys::ShareUpdateExclusiveLock as i32);
        if let Some(vacuum) = (*(*store).rd_tableam).relation_vacuum {
            vacuum(store, params, bstrategy);
        }
        pg_sys::table_close(store, pg_sys::NoLock as i32);
    }
}

// The table's own storage is empty, so ANALYZE samples nothing from it; row
// estimates come from relation_estimate_size instead.
#[cfg(feature = "pg15")]
#[pg_guard]
unsafe extern "C-unwind" fn scan_analyze_next_block(
    _scan: pg_sys::TableScanDesc,
    _blockno: pg_sys::BlockNumber,
    _bstrategy: pg_sys::BufferAccessStrategy,
) -> bool {
    false
}

#[cfg(not(feature = "pg15"))]
#[pg_guard]
unsafe extern "C-unwind" fn scan_analyze_next_block(_scan: pg_sys::TableScanDesc, _stream: *mut pg_sys::ReadStream) -> bool {
    false
}

#[pg_guard]
unsafe extern "C-unwind" fn scan_analyze_next_tuple(
    _scan: pg_sys::TableScanDesc,
    _oldest_xmin: pg_sys::TransactionId,
    _liverows: *mut f64,
    _deadrows: *mut f64,
    _slot: *mut pg_sys::TupleTableSlot,
) -> bool {
    false
}

#[pg_guard]
unsafe extern "C-unwind" fn index_build_range_scan(
    _table_rel: pg_sys::Relation,
    _index_rel: pg_sys::Relation,
    index_info: *mut pg_sys::IndexInfo,
    _allow_sync: bool,
    _anyvisible: bool,
    _progress: bool,
    _start_blockno: pg_sys::BlockNumber,
    _numblocks: pg_sys::BlockNumber,
    _callback: pg_sys::IndexBuildCallback,
    _callback_state: *mut std::ffi::c_void,
    _scan: pg_sys::TableScanDesc,
) -> f64 {
    unsafe {
        if (*index_info).ii_Unique || !(*index_info).ii_ExclusionOps.is_null() {
            ts_error(
                FEATURE_NOT_SUPPORTED,
                "unique indexes, primary keys, UNIQUE and EXCLUDE constraints are not supported on time-series tables",
                "Time-series tables accept duplicate measurements, as MongoDB's time-series collections do.",
            );
        }
    }
    ts_error(FEATURE_NOT_SUPPORTED, "indexes are not supported on time-series tables", INDEX_HINT)
}

#[pg_guard]
unsafe extern "C-unwind" fn index_validate_scan(
    _table_rel: pg_sys::Relation,
    _index_rel: pg_sys::Relation,
    _index_info: *mut pg_sys::IndexInfo,
    _snapshot: pg_sys::Snapshot,
    _state: *mut pg_sys::ValidateIndexState,
) {
    ts_error(FEATURE_NOT_SUPPORTED, "indexes are not supported on time-series tables", INDEX_HINT)
}

#[pg_guard]
unsafe extern "C-unwind" fn relation_size(_rel: pg_sys::Relation, _fork: pg_sys::ForkNumber::Type) -> u64 {
    0
}

#[pg_guard]
unsafe extern "C-unwind" fn relation_needs_toast_table(_rel: pg_sys::Relation) -> bool {
    false
}

/// Pages and rows for the planner: the store's pages, and its bucket count
/// times the average bucket fill (exact for small stores, sampled otherwise).
#[pg_guard]
unsafe extern "C-unwind" fn relation_estimate_size(
    rel: pg_sys::Relation,
    _attr_widths: *mut i32,
    pages: *mut pg_sys::BlockNumber,
    tuples: *mut f64,
    allvisfrac: *mut f64,
) {
    unsafe {
        *pages = 0;
        *tuples = 0.0;
        *allvisfrac = 0.0;
        let Some(config) = config::lookup((*rel).rd_id) else { return };
        let store = pg_sys::table_open(config.store_relid, pg_sys::AccessShareLock as i32);
        // After ANALYZE (tsbucket's, src/stats.rs): its row count, scaled by how
        // the store has grown since, as Postgres scales a heap's reltuples.
        let (analyzed_pages, analyzed_rows) = ((*(*rel).rd_rel).relpages, (*(*rel).rd_rel).reltuples);
        if analyzed_pages > 0 && analyzed_rows >= 0.0 {
            let nblocks = pg_sys::RelationGetNumberOfBlocksInFork(store, pg_sys::ForkNumber::MAIN_FORKNUM);
            *pages = nblocks;
            *tuples = (analyzed_rows as f64 * nblocks as f64 / analyzed_pages as f64).round();
        } else {
            let (buckets, sampled_buckets, sampled_rows, nblocks) = crate::store::reader::estimate(store);
            *pages = nblocks;
            *tuples = if sampled_buckets == 0 { 0.0 } else { buckets * sampled_rows / sampled_buckets as f64 };
        }
        pg_sys::table_close(store, pg_sys::NoLock as i32);
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn scan_sample_next_block(_scan: pg_sys::TableScanDesc, _scanstate: *mut pg_sys::SampleScanState) -> bool {
    unsupported("TABLESAMPLE", "Sample with WHERE random() < fraction instead.")
}

#[pg_guard]
unsafe extern "C-unwind" fn scan_sample_next_tuple(
    _scan: pg_sys::TableScanDesc,
    _scanstate: *mut pg_sys::SampleScanState,
    _slot: *mut pg_sys::TupleTableSlot,
) -> bool {
    unsupported("TABLESAMPLE", "Sample with WHERE random() < fraction instead.")
}
