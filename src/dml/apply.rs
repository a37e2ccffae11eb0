//! The end of a statement: each bucket it touched is rewritten once (deleted,
//! re-labelled, or re-encoded without the deleted rows), and where each
//! surviving row went is recorded.

use crate::catalog::config::{self, Config};
use crate::catalog::shape::TableShape;
use crate::dml::pending::{Key, LOCKED, Meta, PENDING, PendingBucket};
use crate::pg::error::ts_error;
use crate::store::bucket::{self, BucketContent, CloseReason};
use crate::store::insert;
use crate::store::locks;
use crate::store::moves::{self, RowMoves};
use crate::store::bucket::LoadedBucket;
use crate::store::rows;
use crate::store::tuple;
use pgrx::pg_sys;
use std::collections::BTreeMap;
use tsbucket_format::Column;

/// Applies the pending changes of the current subtransaction that commands
/// from `from_cid` on made (None: all of them).
pub fn apply(from_cid: Option<pg_sys::CommandId>) {
    // SAFETY: GetCurrentSubTransactionId returns the id of the subtransaction whose statement is ending, to
    // pick its pending changes; no pointer is involved.
    let subxid = unsafe { pg_sys::GetCurrentSubTransactionId() };
    let work: Vec<(Key, PendingBucket)> = PENDING.with(|p| {
        let mut p = p.borrow_mut();
        let keys: Vec<Key> =
            p.iter().filter(|((_, _, c), v)| v.subxid == subxid && from_cid.is_none_or(|f| *c >= f)).map(|(k, _)| *k).collect();
        keys.into_iter().map(|k| (k, p.remove(&k).expect("present"))).collect()
    });
    if work.is_empty() {
        return;
    }
    rows::forget_fetched();
    let mut by_table: BTreeMap<u32, Vec<(i64, PendingBucket)>> = BTreeMap::new();
    for ((relid, bucket_id, _), p) in work {
        by_table.entry(relid).or_default().push((bucket_id, p));
    }
    for (relid, buckets) in by_table {
        // SAFETY: `relid` is a tsbucket table this transaction's DML recorded changes of, so it exists and is
        // locked by that DML, as apply_table requires.
        unsafe { apply_table(pg_sys::Oid::from(relid), buckets) };
    }
    rows::forget_fetched();
}

/// # Safety
/// `relid` must be a tsbucket table that this transaction's DML holds a lock on.
unsafe fn apply_table(relid: pg_sys::Oid, buckets: Vec<(i64, PendingBucket)>) {
    let config = config::require(relid);
    // SAFETY: the statement's DML already holds a lock on `relid` (apply_table's contract), so NoLock suffices;
    // its descriptor is read while the relation is open.
    let shape = unsafe {
        let rel = pg_sys::table_open(relid, pg_sys::NoLock as i32);
        let shape = TableShape::new((*rel).rd_att, &config);
        pg_sys::table_close(rel, pg_sys::NoLock as i32);
        shape
    };
    // SAFETY: config.store_relid is the table's bucket store, held RowExclusive for the rewrites below until
    // the table_close after the loop.
    let store = unsafe { pg_sys::table_open(config.store_relid, pg_sys::RowExclusiveLock as i32) };
    for (bucket_id, pending) in buckets {
        // We hold the bucket's lock, so only a later command of ours can have changed it.
        // SAFETY: `store` is open (above) and config.id_index its bucket_id index; SnapshotSelf sees our own changes.
        let stored = unsafe { tuple::find_bucket(store, config.id_index, bucket_id, &raw mut pg_sys::SnapshotSelfData) };
        let Some(stored) = stored else {
            ts_error(
                crate::pg::error::TRIGGERED_DATA_CHANGE_VIOLATION,
                "rows to be changed were already changed by an operation triggered by the current command",
                "A trigger or function changed rows of the same bucket while the statement ran; change them in separate statements.",
            );
        };
        let rows = stored.rows as usize;
        let mut deleted = vec![false; rows];
        pending.deleted.iter().filter(|&&r| r < rows).for_each(|&r| deleted[r] = true);
        let n_deleted = deleted.iter().filter(|d| **d).count();
        // SAFETY: `store` is open and locked RowExclusive, and stored.tid the bucket version whose lock we hold.
        unsafe { locks::delete_bucket(store, stored.tid) };
        LOCKED.with(|l| l.borrow_mut().remove(&(relid.to_u32(), bucket_id)));
        if n_deleted == rows {
            continue;
        }
        let first_meta = pending.moved.values().next();
        let whole_move = n_deleted == 0
            && pending.moved.len() == rows
            && pending.moved.values().all(|m| Some(m) == first_meta);
        if whole_move {
            let meta = first_meta.expect("rows > 0");
            // SAFETY: `store` is `config`'s bucket store, open and locked RowExclusive, and `stored` was read from it.
            let new_id = unsafe { insert::relabel_bucket(store, &config, &shape, &stored, meta) };
            let moves: RowMoves = (0..rows).map(|r| Some((0, r as u16))).collect();
            // SAFETY: `config`'s moves table exists, and this transaction rewrote `bucket_id` just above.
            unsafe { moves::record_moves(&config, bucket_id, &[new_id], &moves) };
            continue;
        }
        let loaded = rows::load(&config, &shape, &stored);
        // SAFETY: `store` is the open, RowExclusive-locked store `stored` came from, as rewrite requires.
        unsafe { rewrite(&config, &shape, store, &stored, &loaded, &deleted, &pending.moved) };
    }
    // SAFETY: closes the store opened before the loop; its RowExclusive lock stays until the transaction ends.
    unsafe { pg_sys::table_close(store, pg_sys::NoLock as i32) };
}

/// Writes the surviving rows of a bucket as new buckets, one per resulting meta value.
///
/// # Safety
/// `store` must be `config`'s open bucket store, locked RowExclusive, and `stored` read from it.
unsafe fn rewrite(
    config: &Config,
    shape: &TableShape,
    store: pg_sys::Relation,
    stored: &bucket::StoredBucket,
    loaded: &LoadedBucket,
    deleted: &[bool],
    moved: &BTreeMap<usize, Meta>,
) {
    let mut groups: BTreeMap<Meta, Vec<bool>> = BTreeMap::new();
    for row in (0..loaded.rows).filter(|&r| !deleted[r]) {
        let meta = moved.get(&row).cloned().unwrap_or_else(|| loaded.meta.clone());
        groups.entry(meta).or_insert_with(|| vec![false; loaded.rows])[row] = true;
    }
    let old_bytes = stored.values[bucket::COL_UNCOMPRESSED_BYTES].value() as i64;
    let mut moves: RowMoves = vec![None; loaded.rows];
    let mut new_ids = Vec::new();
    for (meta, keep) in groups {
        let kept = keep.iter().filter(|k| **k).count();
        let columns: Vec<Column> = loaded.columns.iter().flatten().map(|c| c.filter(&keep)).collect();
        // SAFETY: `store` is `config`'s open store locked RowExclusive (rewrite's contract); `meta` and the filtered
        // columns come from the bucket's own decoded values.
        let id = unsafe {
            insert::write_bucket(
                store,
                config,
                shape,
                None,
                &BucketContent {
                    columns: &columns,
                    rows: kept,
                    meta: &meta,
                    window_start: stored.window_start,
                    uncompressed_bytes: old_bytes * kept as i64 / loaded.rows.max(1) as i64,
                },
                CloseReason::Rewrite,
                pg_sys::GetCurrentCommandId(true),
            )
        };
        for (new_row, old_row) in keep.iter().enumerate().filter(|(_, k)| **k).map(|(r, _)| r).enumerate() {
            moves[old_row] = Some((new_ids.len() as u16, new_row as u16));
        }
        new_ids.push(id);
    }
    // SAFETY: `config`'s moves table exists, and stored.bucket_id is being rewritten in this transaction.
    unsafe { moves::record_moves(config, stored.bucket_id, &new_ids, &moves) };
}
