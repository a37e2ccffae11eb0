//! DELETE and UPDATE. The executor hands us one row at a time; we note which
//! rows of which bucket change and, at the end of the statement, rewrite each
//! touched bucket once: dropped when all its rows go, re-labelled (payload
//! untouched) when its whole series moves, otherwise re-encoded without the
//! deleted rows. Rewritten buckets get new ids, so no live TID ever changes
//! meaning; a concurrent rewrite of the same bucket is a 40001.

use crate::am::read::{self, LoadedBucket};
use crate::catalog::{self, Config};
use crate::datum;
use crate::error::{ts_error, FEATURE_NOT_SUPPORTED, SERIALIZATION_FAILURE};
use crate::shape::{Role, TableShape};
use crate::store::{self, BucketContent, CloseReason};
use pgrx::pg_sys;
use std::cell::RefCell;
use std::collections::BTreeMap;
use tsbucket_format::{Column, Values};

type Meta = Vec<Option<Vec<u8>>>;

#[derive(Default)]
struct PendingBucket {
    subxid: u32,
    deleted: Vec<usize>,
    /// Row -> its new meta values.
    moved: BTreeMap<usize, Meta>,
}

thread_local! {
    static PENDING: RefCell<BTreeMap<(u32, i64), PendingBucket>> = const { RefCell::new(BTreeMap::new()) };
}

fn entry<R>(relid: pg_sys::Oid, bucket_id: i64, f: impl FnOnce(&mut PendingBucket) -> R) -> R {
    let subxid = unsafe { pg_sys::GetCurrentSubTransactionId() };
    PENDING.with(|p| {
        let mut p = p.borrow_mut();
        let e = p.entry((relid.to_u32(), bucket_id)).or_insert_with(|| PendingBucket { subxid, ..Default::default() });
        e.subxid = e.subxid.max(subxid);
        f(e)
    })
}

pub fn record_delete(rel: pg_sys::Relation, tid: &pg_sys::ItemPointerData) {
    let (bucket_id, row) = crate::tid::get(tid);
    entry(unsafe { (*rel).rd_id }, bucket_id, |e| e.deleted.push(row));
}

/// UPDATE: only the meta columns may change (MongoDB's rule); the planner hook
/// already refused other SET targets, this re-checks the values themselves.
///
/// # Safety
/// `slot` must hold the new version of the row at `otid` of `rel`.
pub unsafe fn record_update(rel: pg_sys::Relation, otid: &pg_sys::ItemPointerData, slot: *mut pg_sys::TupleTableSlot) {
    unsafe {
        let relid = (*rel).rd_id;
        let config = catalog::require(relid);
        let shape = TableShape::new((*rel).rd_att, &config);
        let (bucket_id, row) = crate::tid::get(otid);
        let store = pg_sys::table_open(config.store_relid, pg_sys::AccessShareLock as i32);
        let old = read::fetch_bucket(&config, &shape, store, bucket_id, store::current_snapshot());
        pg_sys::table_close(store, pg_sys::NoLock as i32);
        let Some(old) = old else {
            ts_error(SERIALIZATION_FAILURE, "row to be updated was changed concurrently", "Retry the statement.");
        };
        pg_sys::slot_getallattrs(slot);
        let natts = shape.attrs.len();
        let values = std::slice::from_raw_parts((*slot).tts_values, natts);
        let nulls = std::slice::from_raw_parts((*slot).tts_isnull, natts);
        let mut meta: Meta = vec![None; config.meta_attnums.len()];
        for attr in &shape.attrs {
            let i = attr.attnum as usize - 1;
            match attr.role {
                Role::Dropped => {}
                Role::Meta(m) => {
                    if !nulls[i] {
                        meta[m] = Some(datum::datum_bytes(&values[i], attr).to_vec());
                    }
                }
                Role::Time | Role::Measurement => {
                    let mut fresh = Column::new(attr.attnum, attr.kind);
                    if nulls[i] {
                        fresh.push_null();
                    } else {
                        datum::push_datum(&mut fresh, attr, values[i]);
                    }
                    let unchanged = same_value(&read::column_or_default((*rel).rd_att, attr, &old), row, &fresh);
                    if !unchanged {
                        ts_error(
                            FEATURE_NOT_SUPPORTED,
                            &format!(
                                "cannot change column \"{}\" of time-series table \"{}\"",
                                crate::shape::attr_name(rel, attr.attnum as i16),
                                catalog::relation_name(relid)
                            ),
                            "An UPDATE of a time-series table may only set its meta columns.",
                        );
                    }
                }
            }
        }
        entry(relid, bucket_id, |e| e.moved.insert(row, meta));
    }
}

fn same_value(old: &Column, row: usize, fresh: &Column) -> bool {
    if old.is_null(row) || fresh.is_null(0) {
        return old.is_null(row) == fresh.is_null(0);
    }
    match (&old.values, &fresh.values) {
        (Values::Int(a), Values::Int(b)) => a[row] == b[0],
        (Values::Float(a), Values::Float(b)) => a[row].to_bits() == b[0].to_bits(),
        (Values::Bool(a), Values::Bool(b)) => a[row] == b[0],
        (Values::Bytes(a), Values::Bytes(b)) => a.get(row) == b.get(0),
        _ => false,
    }
}

/// Applies the pending changes of the current subtransaction.
pub fn apply() {
    let subxid = unsafe { pg_sys::GetCurrentSubTransactionId() };
    let work: Vec<((u32, i64), PendingBucket)> = PENDING.with(|p| {
        let mut p = p.borrow_mut();
        let keys: Vec<_> = p.iter().filter(|(_, v)| v.subxid == subxid).map(|(k, _)| *k).collect();
        keys.into_iter().map(|k| (k, p.remove(&k).expect("present"))).collect()
    });
    if work.is_empty() {
        return;
    }
    read::forget_fetched();
    let mut by_table: BTreeMap<u32, Vec<(i64, PendingBucket)>> = BTreeMap::new();
    for ((relid, bucket_id), p) in work {
        by_table.entry(relid).or_default().push((bucket_id, p));
    }
    for (relid, buckets) in by_table {
        unsafe { apply_table(pg_sys::Oid::from(relid), buckets) };
    }
    read::forget_fetched();
}

unsafe fn apply_table(relid: pg_sys::Oid, buckets: Vec<(i64, PendingBucket)>) {
    unsafe {
        let config = catalog::require(relid);
        let rel = pg_sys::table_open(relid, pg_sys::NoLock as i32);
        let shape = TableShape::new((*rel).rd_att, &config);
        pg_sys::table_close(rel, pg_sys::NoLock as i32);
        let store = pg_sys::table_open(config.store_relid, pg_sys::RowExclusiveLock as i32);
        for (bucket_id, pending) in buckets {
            let Some(stored) = store::find_bucket(store, config.id_index, bucket_id, store::current_snapshot()) else {
                ts_error(
                    SERIALIZATION_FAILURE,
                    "could not serialize access due to concurrent change of the same bucket",
                    "Another transaction changed rows of this bucket; retry the statement.",
                );
            };
            let rows = stored.rows as usize;
            let mut deleted = vec![false; rows];
            pending.deleted.iter().filter(|&&r| r < rows).for_each(|&r| deleted[r] = true);
            let n_deleted = deleted.iter().filter(|d| **d).count();
            store::delete_bucket(store, stored.tid);
            if n_deleted == rows {
                continue;
            }
            let first_meta = pending.moved.values().next();
            let whole_move = n_deleted == 0
                && pending.moved.len() == rows
                && pending.moved.values().all(|m| Some(m) == first_meta);
            if whole_move {
                store::relabel_bucket(store, &config, &shape, &stored, first_meta.expect("rows > 0"));
                continue;
            }
            let loaded = read::load(&config, &shape, &stored);
            rewrite(&config, &shape, store, &stored, &loaded, &deleted, &pending.moved);
        }
        pg_sys::table_close(store, pg_sys::NoLock as i32);
    }
}

/// Writes the surviving rows of a bucket as new buckets, one per resulting meta value.
unsafe fn rewrite(
    config: &Config,
    shape: &TableShape,
    store: pg_sys::Relation,
    stored: &store::StoredBucket,
    loaded: &LoadedBucket,
    deleted: &[bool],
    moved: &BTreeMap<usize, Meta>,
) {
    let mut groups: BTreeMap<Meta, Vec<bool>> = BTreeMap::new();
    for row in (0..loaded.rows).filter(|&r| !deleted[r]) {
        let meta = moved.get(&row).cloned().unwrap_or_else(|| loaded.meta.clone());
        groups.entry(meta).or_insert_with(|| vec![false; loaded.rows])[row] = true;
    }
    let old_bytes = stored.values[store::COL_UNCOMPRESSED_BYTES].value() as i64;
    for (meta, keep) in groups {
        let kept = keep.iter().filter(|k| **k).count();
        let columns: Vec<Column> = loaded.columns.iter().flatten().map(|c| c.filter(&keep)).collect();
        unsafe {
            store::write_bucket(
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
            );
        }
    }
}

pub fn discard_subxact(subxid: u32) {
    PENDING.with(|p| p.borrow_mut().retain(|_, v| v.subxid < subxid));
}

pub fn reassign_subxact(child: u32, parent: u32) {
    PENDING.with(|p| {
        p.borrow_mut().values_mut().filter(|v| v.subxid == child).for_each(|v| v.subxid = parent);
    });
}

pub fn discard_all() {
    PENDING.with(|p| p.borrow_mut().clear());
    read::forget_fetched();
}

