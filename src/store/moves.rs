//! Where the rows of a rewritten bucket went: recorded in the table's moves
//! table in the rewriting transaction, followed by DML that waited for it.

use crate::catalog::config::Config;
use crate::pg::error::{DATA_CORRUPTED, ts_error};
use super::reader::StoreScan;
use super::tuple::id_in_use;
use pgrx::pg_sys;
use pgrx::varlena::{vardata_any, varsize_any_exhdr};

/// Where the rows of a rewritten bucket went: for each old row, the index of
/// its new bucket in `new_ids` and its row there, or None if it was deleted.
pub type RowMoves = Vec<Option<(u16, u16)>>;

/// What became of row `row` of a bucket that is gone.
#[derive(Debug, PartialEq, Eq)]
pub enum Successor {
    /// The bucket went whole (expiry, a DELETE of all its rows, TRUNCATE).
    Gone,
    /// The row was deleted.
    Deleted,
    /// The row lives on as this row of this bucket.
    Moved(i64, usize),
}

/// Records where the rows of bucket `old_id` went; written in the same
/// transaction as the rewrite, so it becomes visible exactly when the rewrite
/// commits. A DML statement that waited on the rewrite follows it
/// (`successor`), as heap's EvalPlanQual follows an update chain.
///
/// # Safety
/// `config`'s relations must exist; the caller rewrites `old_id` in this transaction.
pub unsafe fn record_moves(config: &Config, old_id: i64, new_ids: &[i64], moves: &RowMoves) {
    let Some((moves_relid, _)) = config.moves else { return };
    if new_ids.is_empty() {
        return;
    }
    let mut map = Vec::with_capacity(moves.len() * 4);
    for m in moves {
        let (bucket, row) = m.unwrap_or((u16::MAX, 0));
        map.extend_from_slice(&bucket.to_le_bytes());
        map.extend_from_slice(&row.to_le_bytes());
    }
    // SAFETY: config.moves names the table's moves table, which exists (record_moves's contract); it is
    // held RowExclusive from here to the table_close below.
    let rel = unsafe { pg_sys::table_open(moves_relid, pg_sys::RowExclusiveLock as i32) };
    let ids: Vec<pg_sys::Datum> = new_ids.iter().map(|&i| pg_sys::Datum::from(i)).collect();
    // SAFETY: `ids` holds ids.len() int8 datums (8 bytes, by value, double-aligned), which construct_array
    // copies into an array palloc'd in the current memory context.
    let array = unsafe {
        pg_sys::construct_array(
            ids.as_ptr() as *mut pg_sys::Datum,
            ids.len() as i32,
            pg_sys::INT8OID,
            8,
            true,
            pg_sys::TYPALIGN_DOUBLE as std::ffi::c_char,
        )
    };
    let mut values = [pg_sys::Datum::from(old_id), pg_sys::Datum::from(array), crate::pg::datum::bytea(&map)];
    let mut nulls = [false; 3];
    // SAFETY: `rel` is the moves table opened above and `values` its three columns (old id, new ids, row map);
    // CatalogTupleInsert adds the tuple and its index entries, then the tuple is freed and `rel` closed, lock kept.
    unsafe {
        let tuple = pg_sys::heap_form_tuple((*rel).rd_att, values.as_mut_ptr(), nulls.as_mut_ptr());
        pg_sys::CatalogTupleInsert(rel, tuple);
        pg_sys::heap_freetuple(tuple);
        pg_sys::table_close(rel, pg_sys::NoLock as i32);
    }
}

/// Where row `row` of the gone bucket `old_id` lives now, as the latest
/// committed state says (the caller has waited for the rewriter to end).
///
/// # Safety
/// `config`'s relations must exist.
pub unsafe fn successor(config: &Config, old_id: i64, row: usize) -> Successor {
    let Some((moves_relid, moves_index)) = config.moves else { return Successor::Gone };
    // SAFETY: the moves table of `config` exists (successor's contract) and stays open AccessShare until the
    // table_close below; the latest snapshot is registered until the UnregisterSnapshot below.
    let (rel, snapshot) = unsafe {
        let rel = pg_sys::table_open(moves_relid, pg_sys::AccessShareLock as i32);
        (rel, pg_sys::RegisterSnapshot(pg_sys::GetLatestSnapshot()))
    };
    let mut key = pg_sys::ScanKeyData::default();
    // SAFETY: `moves_index` is the moves table's index on old_id, `key` a local int8eq key the scan copies,
    // and `rel` and `snapshot` stay valid until the scan ends below.
    let scan = unsafe {
        pg_sys::ScanKeyInit(&mut key, 1, pg_sys::BTEqualStrategyNumber as u16, pg_sys::Oid::from(pg_sys::F_INT8EQ), pg_sys::Datum::from(old_id));
        pg_sys::systable_beginscan(rel, moves_index, true, snapshot, 1, &mut key)
    };
    // SAFETY: `scan` was begun just above and is ended only after `result` is computed.
    let tuple = unsafe { pg_sys::systable_getnext(scan) };
    let result = if tuple.is_null() {
        Successor::Gone
    } else {
        let mut values = [pg_sys::Datum::from(0); 3];
        let mut nulls = [false; 3];
        // SAFETY: `tuple` is the scan's current moves entry, valid until systable_endscan below, and rd_att of
        // `rel` describes it; its row map (never NULL) is read, detoasted if needed, only before the scan ends.
        let map = unsafe {
            pg_sys::heap_deform_tuple(tuple, (*rel).rd_att, values.as_mut_ptr(), nulls.as_mut_ptr());
            let map = pg_sys::pg_detoast_datum_packed(values[2].cast_mut_ptr());
            std::slice::from_raw_parts(vardata_any(map) as *const u8, varsize_any_exhdr(map))
        };
        // SAFETY: values[1] is the entry's int8[] of new ids, NULL exactly when nulls[1] says; it is copied out.
        let ids: Vec<i64> = unsafe { pgrx::FromDatum::from_datum(values[1], nulls[1]) }.unwrap_or_default();
        match map.get(row * 4..row * 4 + 4) {
            Some(entry) => {
                let bucket = u16::from_le_bytes([entry[0], entry[1]]);
                let new_row = u16::from_le_bytes([entry[2], entry[3]]) as usize;
                match ids.get(bucket as usize) {
                    Some(&id) => Successor::Moved(id, new_row),
                    None => Successor::Deleted,
                }
            }
            None => Successor::Deleted,
        }
    };
    // SAFETY: ends the scan begun above, unregisters its snapshot and closes `rel`, keeping its lock.
    unsafe {
        pg_sys::systable_endscan(scan);
        pg_sys::UnregisterSnapshot(snapshot);
        pg_sys::table_close(rel, pg_sys::NoLock as i32);
    }
    result
}

/// Forgets where the rows of `old_id` went: its id is free for reuse, so no
/// store version carries it and no transaction can still be following it.
///
/// # Safety
/// `config`'s relations must exist.
pub(super) unsafe fn forget_moves(config: &Config, old_id: i64) {
    let Some((moves_relid, moves_index)) = config.moves else { return };
    // SAFETY: config.moves names the existing moves table (forget_moves's contract), held RowExclusive from
    // here to the table_close below.
    let rel = unsafe { pg_sys::table_open(moves_relid, pg_sys::RowExclusiveLock as i32) };
    let mut key = pg_sys::ScanKeyData::default();
    // SAFETY: `moves_index` is the moves table's old_id index and `key` a local int8eq key the scan copies;
    // a NULL snapshot makes systable_beginscan use the catalog snapshot.
    let scan = unsafe {
        pg_sys::ScanKeyInit(&mut key, 1, pg_sys::BTEqualStrategyNumber as u16, pg_sys::Oid::from(pg_sys::F_INT8EQ), pg_sys::Datum::from(old_id));
        pg_sys::systable_beginscan(rel, moves_index, true, std::ptr::null_mut(), 1, &mut key)
    };
    loop {
        // SAFETY: `scan` stays open until systable_endscan below; a tuple it returns is valid until the next call.
        let tuple = unsafe { pg_sys::systable_getnext(scan) };
        if tuple.is_null() {
            break;
        }
        // SAFETY: `rel` is the moves table locked RowExclusive above and `tuple` the entry of it just fetched.
        unsafe { retire_moves_entry(rel, (*tuple).t_self) };
    }
    // SAFETY: ends the old_id scan and closes the moves table; its RowExclusive lock stays until commit.
    unsafe {
        pg_sys::systable_endscan(scan);
        pg_sys::table_close(rel, pg_sys::NoLock as i32);
    }
}

/// Deletes a moves entry unless another transaction (a compaction that held
/// the table's maintenance lock before us, or a writer reusing the id) or an
/// earlier command of ours already did: either way the entry is gone, which
/// is all that is asked.
///
/// # Safety
/// `rel` must be the open moves table, locked RowExclusive; `tid` one of its tuples.
unsafe fn retire_moves_entry(rel: pg_sys::Relation, tid: pg_sys::ItemPointerData) {
    let mut tid = tid;
    let mut tmfd = pg_sys::TM_FailureData::default();
    // SAFETY: `rel` is the open moves table locked RowExclusive and `tid` one of its tuples (retire_moves_entry's
    // contract); wait = true waits for a concurrent deleter, as simple_heap_delete does.
    let result = unsafe { pg_sys::heap_delete(rel, &mut tid, pg_sys::GetCurrentCommandId(true), std::ptr::null_mut(), true, &mut tmfd, false) };
    match result {
        pg_sys::TM_Result::TM_Ok | pg_sys::TM_Result::TM_Deleted | pg_sys::TM_Result::TM_Updated | pg_sys::TM_Result::TM_SelfModified => {}
        other => ts_error(DATA_CORRUPTED, &format!("unexpected result {other} removing a moves entry"), "This is a bug in tsbucket; please report it."),
    }
}

/// Removes the moves entries whose old bucket no store version carries any
/// more (VACUUM removed it): no transaction can still be following them.
/// Run by compaction rounds, so the moves table stays as small as the set of
/// recently rewritten buckets.
///
/// # Safety
/// `store` must be `config`'s open bucket store; `snapshot` registered (`snapshot_after_lock`).
pub unsafe fn prune_moves(store: pg_sys::Relation, config: &Config, snapshot: pg_sys::Snapshot) {
    let Some((moves_relid, _)) = config.moves else { return };
    // SAFETY: config.moves names `config`'s existing moves table, held RowExclusive until the table_close below.
    let rel = unsafe { pg_sys::table_open(moves_relid, pg_sys::RowExclusiveLock as i32) };
    // SAFETY: `rel` stays open until after scan.end() below; `snapshot` is registered (prune_moves's contract).
    let mut scan = unsafe { StoreScan::begin(rel, snapshot) };
    while let Some(tuple) = scan.next(true) {
        let mut isnull = false;
        // SAFETY: `tuple` is the moves entry scan.next just returned, valid until its next call, described by
        // rd_att of `rel`; column 1 is old_id, never NULL.
        let old_id = unsafe { pg_sys::heap_getattr(tuple, 1, (*rel).rd_att, &mut isnull) }.value() as i64;
        // A tail block's entry goes when its segment is emptied for reuse (maintenance::drain).
        if super::tid::is_tail_id(old_id) {
            continue;
        }
        // SAFETY: `store` is `config`'s open bucket store (prune_moves's contract), config.id_index its bucket_id index.
        let in_use = unsafe { id_in_use(store, config.id_index, old_id) };
        if !in_use {
            // SAFETY: `rel` is the moves table locked RowExclusive above, and `tuple` its current entry.
            unsafe { retire_moves_entry(rel, (*tuple).t_self) };
        }
    }
    scan.end();
    // SAFETY: closes the moves table opened above for pruning; its lock is kept to the transaction's end.
    unsafe { pg_sys::table_close(rel, pg_sys::NoLock as i32) };
}
