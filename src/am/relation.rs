//! The relation-level callbacks: new storage (and TRUNCATE of the store),
//! VACUUM of the store, ANALYZE and index builds, sizes and estimates.

use crate::am::refusals::{INDEX_HINT, unsupported};
use crate::catalog::config;
use crate::pg::error::{FEATURE_NOT_SUPPORTED, ts_error};
use pgrx::pg_sys;
use pgrx::prelude::*;

#[cfg(feature = "pg15")]
type FileLocator = pg_sys::RelFileNode;

#[cfg(not(feature = "pg15"))]
type FileLocator = pg_sys::RelFileLocator;

/// New storage for the table itself (it stays empty: rows live in the store).
/// On TRUNCATE of a configured table the store is truncated too, in the same
/// transaction, so ROLLBACK brings the rows back.
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn relation_set_new_filelocator(
    rel: pg_sys::Relation,
    newrlocator: *const FileLocator,
    persistence: std::ffi::c_char,
    freeze_xid: *mut pg_sys::TransactionId,
    minmulti: *mut pg_sys::MultiXactId,
) {
    // No transaction ids live in this relation's own storage.
    // SAFETY: `freeze_xid` and `minmulti` are the out-parameters heap_create (or TRUNCATE's new-relfilenode swap) passes
    // for the new storage's cutoffs, writable during this call.
    unsafe {
        *freeze_xid = pg_sys::InvalidTransactionId;
        *minmulti = pg_sys::InvalidTransactionId;
    }
    if persistence == pg_sys::RELPERSISTENCE_UNLOGGED as std::ffi::c_char {
        unsupported("UNLOGGED", "Create the table without UNLOGGED; its buckets are WAL-logged in the bucket store.");
    }
    // SAFETY: `newrlocator` points to the file locator Postgres just assigned to `rel`, read once for RelationCreateStorage,
    // whose SMgrRelation `srel` is closed at once; `rel` is the relation being created or truncated, open and locked
    // AccessExclusive by its DDL, as truncate_store requires.
    unsafe {
        let srel = pg_sys::RelationCreateStorage(*newrlocator, persistence, true);
        pg_sys::smgrclose(srel);
        truncate_store(rel);
    }
}

/// Empties the bucket store (and moves table) of `rel` if it is configured.
///
/// # Safety
/// `rel` must be an open relation.
unsafe fn truncate_store(rel: pg_sys::Relation) {
    // SAFETY: `rel` is open, as this function's contract requires, so its relcache entry can be read.
    let relid = unsafe { (*rel).rd_id };
    if let Some(config) = config::lookup(relid) {
        crate::write::buffer::discard_table(relid);
        crate::catalog::config::as_extension_owner(|| {
            let mut relations = crate::pg::relation::qualified_name(config.store_relid);
            if let Some((moves, _)) = config.moves {
                relations = format!("{relations}, {}", crate::pg::relation::qualified_name(moves));
            }
            // The tail's segments too, and their drained marks with them.
            if let Some(tail) = &config.tail {
                for &segment in &tail.segments {
                    relations = format!("{relations}, {}", crate::pg::relation::qualified_name(segment));
                }
                Spi::run_with_args("DELETE FROM tsbucket.tail_drained WHERE relid = $1", &[relid.into()]).expect("forget drained marks");
            }
            Spi::run(&format!("TRUNCATE {relations}")).expect("truncate bucket store");
        });
    }
}

#[pg_guard]
pub(super) unsafe extern "C-unwind" fn relation_nontransactional_truncate(rel: pg_sys::Relation) {
    // SAFETY: `rel` is the table TRUNCATE (of a table created in this transaction) holds open and AccessExclusive-locked.
    unsafe { truncate_store(rel) }
}

#[pg_guard]
pub(super) unsafe extern "C-unwind" fn relation_copy_data(_rel: pg_sys::Relation, _newrlocator: *const FileLocator) {
    unsupported("ALTER TABLE ... SET TABLESPACE", "Move the bucket store (tsbucket.timeseries.bucket_store) instead.")
}

#[pg_guard]
pub(super) unsafe extern "C-unwind" fn relation_copy_for_cluster(
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
pub(super) unsafe extern "C-unwind" fn relation_vacuum(
    rel: pg_sys::Relation,
    params: *mut pg_sys::VacuumParams,
    bstrategy: pg_sys::BufferAccessStrategy,
) {
    // SAFETY: `rel` is the table vacuum_rel has open and locked ShareUpdateExclusive for this callback.
    let relid = unsafe { (*rel).rd_id };
    let Some(config) = config::lookup(relid) else { return };
    // SAFETY: table_open locks the store ShareUpdateExclusive (as VACUUM of a heap would), so `store` and its rd_tableam stay
    // valid until the table_close below; `params` and `bstrategy` are VACUUM's own, handed on unchanged.
    unsafe {
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
pub(super) unsafe extern "C-unwind" fn scan_analyze_next_block(
    _scan: pg_sys::TableScanDesc,
    _blockno: pg_sys::BlockNumber,
    _bstrategy: pg_sys::BufferAccessStrategy,
) -> bool {
    false
}

#[cfg(not(feature = "pg15"))]
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn scan_analyze_next_block(_scan: pg_sys::TableScanDesc, _stream: *mut pg_sys::ReadStream) -> bool {
    false
}

#[pg_guard]
pub(super) unsafe extern "C-unwind" fn scan_analyze_next_tuple(
    _scan: pg_sys::TableScanDesc,
    _oldest_xmin: pg_sys::TransactionId,
    _liverows: *mut f64,
    _deadrows: *mut f64,
    _slot: *mut pg_sys::TupleTableSlot,
) -> bool {
    false
}

#[pg_guard]
pub(super) unsafe extern "C-unwind" fn index_build_range_scan(
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
    // SAFETY: `index_info` is the IndexInfo index_build made for the index being created, valid during this call.
    let unique_or_exclusion = unsafe { (*index_info).ii_Unique || !(*index_info).ii_ExclusionOps.is_null() };
    if unique_or_exclusion {
        ts_error(
            FEATURE_NOT_SUPPORTED,
            "unique indexes, primary keys, UNIQUE and EXCLUDE constraints are not supported on time-series tables",
            "Time-series tables accept duplicate measurements, as MongoDB's time-series collections do.",
        );
    }
    ts_error(FEATURE_NOT_SUPPORTED, "indexes are not supported on time-series tables", INDEX_HINT)
}

#[pg_guard]
pub(super) unsafe extern "C-unwind" fn index_validate_scan(
    _table_rel: pg_sys::Relation,
    _index_rel: pg_sys::Relation,
    _index_info: *mut pg_sys::IndexInfo,
    _snapshot: pg_sys::Snapshot,
    _state: *mut pg_sys::ValidateIndexState,
) {
    ts_error(FEATURE_NOT_SUPPORTED, "indexes are not supported on time-series tables", INDEX_HINT)
}

#[pg_guard]
pub(super) unsafe extern "C-unwind" fn relation_size(_rel: pg_sys::Relation, _fork: pg_sys::ForkNumber::Type) -> u64 {
    0
}

#[pg_guard]
pub(super) unsafe extern "C-unwind" fn relation_needs_toast_table(_rel: pg_sys::Relation) -> bool {
    false
}

/// A tail row takes about 70 bytes of an 8 kB page (tuple header, time, meta, encoded values).
const TAIL_ROWS_PER_PAGE: f64 = 110.0;

/// Pages and rows for the planner: the store's pages, and its bucket count
/// times the average bucket fill (exact for small stores, sampled otherwise).
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn relation_estimate_size(
    rel: pg_sys::Relation,
    _attr_widths: *mut i32,
    pages: *mut pg_sys::BlockNumber,
    tuples: *mut f64,
    allvisfrac: *mut f64,
) {
    // SAFETY: `pages`, `tuples` and `allvisfrac` are estimate_rel_size's out-parameters, writable during this call.
    unsafe {
        *pages = 0;
        *tuples = 0.0;
        *allvisfrac = 0.0;
    }
    // SAFETY: `rel` is the table the planner holds open (and locked) while it estimates its size.
    let relid = unsafe { (*rel).rd_id };
    let Some(config) = config::lookup(relid) else { return };
    // SAFETY: table_open of the configured store, locked AccessShare; it stays open until the table_close at the end.
    let store = unsafe { pg_sys::table_open(config.store_relid, pg_sys::AccessShareLock as i32) };
    // After ANALYZE (tsbucket's, maintenance/analyze.rs): its row count, scaled by how
    // the store has grown since, as Postgres scales a heap's reltuples.
    // SAFETY: `rel` is still open, so its pg_class row `rd_rel` is valid to read.
    let (analyzed_pages, analyzed_rows) = unsafe { ((*(*rel).rd_rel).relpages, (*(*rel).rd_rel).reltuples) };
    let (nblocks, estimated_tuples) = if analyzed_pages > 0 && analyzed_rows >= 0.0 {
        // SAFETY: `store` is open under the AccessShareLock taken by table_open above.
        let nblocks = unsafe { pg_sys::RelationGetNumberOfBlocksInFork(store, pg_sys::ForkNumber::MAIN_FORKNUM) };
        (nblocks, (analyzed_rows as f64 * nblocks as f64 / analyzed_pages as f64).round())
    } else {
        // SAFETY: `store` is open (estimate's contract), from the table_open above until the table_close below.
        let (buckets, sampled_buckets, sampled_rows, nblocks) = unsafe { crate::store::reader::estimate(store) };
        (nblocks, if sampled_buckets == 0 { 0.0 } else { buckets * sampled_rows / sampled_buckets as f64 })
    };
    // Rows not yet in buckets: the tail's pages, at a typical row's width (its segments are never analyzed).
    let tail_blocks: u32 = config
        .tail
        .iter()
        .flat_map(|t| t.segments.iter())
        .map(|&segment| {
            // SAFETY: a tail segment of the configured table, opened AccessShare to read its length, then closed (lock kept).
            unsafe {
                let seg = pg_sys::table_open(segment, pg_sys::AccessShareLock as i32);
                let n = pg_sys::RelationGetNumberOfBlocksInFork(seg, pg_sys::ForkNumber::MAIN_FORKNUM);
                pg_sys::table_close(seg, pg_sys::NoLock as i32);
                n
            }
        })
        .sum();
    // SAFETY: `pages` and `tuples` are the same writable out-parameters as above; `store` is the relation opened above,
    // closed once here (its lock is kept until the transaction ends).
    unsafe {
        *pages = nblocks + tail_blocks;
        *tuples = estimated_tuples + f64::from(tail_blocks) * TAIL_ROWS_PER_PAGE;
        pg_sys::table_close(store, pg_sys::NoLock as i32);
    }
}
