//! DELETE and UPDATE. The executor hands us one row at a time. Each touched
//! bucket's store row is locked at once, as heap locks the rows it changes,
//! so that maintenance skips it and a second writer waits; the rows to change
//! are noted, and at the end of the statement each touched bucket is
//! rewritten once: dropped when all its rows go, re-labelled (payload
//! untouched) when its whole series moves, otherwise re-encoded without the
//! deleted rows. Every rewrite records where each surviving row went
//! (`store::record_moves`), so a statement that waited for the rewriter
//! follows its rows there: `tuple_delete`/`tuple_update` report TM_Updated and
//! the executor's EvalPlanQual re-checks the row at its new place through
//! `lock_row` (tuple_lock), exactly as for a heap update chain.

use crate::am::read::{self, LoadedBucket};
use crate::catalog::{self, Config};
use crate::datum;
use crate::error::{ts_error, FEATURE_NOT_SUPPORTED};
use crate::shape::{Role, TableShape};
use crate::store::{self, BucketContent, CloseReason, Lock, RowMoves, Successor};
use pgrx::pg_sys;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use tsbucket_format::{Column, Values};

type Meta = Vec<Option<Vec<u8>>>;

#[derive(Default)]
struct PendingBucket {
    subxid: u32,
    deleted: BTreeSet<usize>,
    /// Row -> its new meta values.
    moved: BTreeMap<usize, Meta>,
}

/// Pending changes by (table, bucket, command): a statement nested in a
/// trigger or function applies only its own at its end.
type Key = (u32, i64, u32);

thread_local! {
    static PENDING: RefCell<BTreeMap<Key, PendingBucket>> = const { RefCell::new(BTreeMap::new()) };
    /// Buckets this transaction holds the lock of: (table, bucket id) -> the
    /// subtransaction that took it (its abort releases the lock).
    static LOCKED: RefCell<BTreeMap<(u32, i64), u32>> = const { RefCell::new(BTreeMap::new()) };
}

/// What the executor is told about a row it wants to change.
pub enum Outcome {
    /// Recorded; it changes at the end of the statement.
    Done,
    /// This command already changed the row (a join offered it twice).
    AlreadyDoneBySelf,
    /// A committed transaction rewrote the bucket: the row lives on elsewhere
    /// (EvalPlanQual follows it through `lock_row`).
    Moved,
    /// A committed transaction deleted the row.
    Deleted,
    /// A later command of this transaction changed the bucket first.
    ChangedBySelf,
}

/// Locks the row's bucket (once per transaction) and says whether the row can
/// be changed where the executor found it.
unsafe fn claim(config: &Config, bucket_id: i64, row: usize, cid: pg_sys::CommandId) -> Outcome {
    let relid = config.relid.to_u32();
    if LOCKED.with(|l| l.borrow().contains_key(&(relid, bucket_id))) {
        return Outcome::Done;
    }
    let lock = unsafe {
        let store = pg_sys::table_open(config.store_relid, pg_sys::RowExclusiveLock as i32);
        let lock = store::lock_bucket(store, config, bucket_id, cid, true);
        pg_sys::table_close(store, pg_sys::NoLock as i32);
        lock
    };
    match lock {
        Lock::Held => {
            // SAFETY: a plain read of the backend's transaction state.
            let subxid = unsafe { pg_sys::GetCurrentSubTransactionId() };
            LOCKED.with(|l| l.borrow_mut().insert((relid, bucket_id), subxid));
            Outcome::Done
        }
        Lock::Gone | Lock::Busy => match unsafe { store::successor(config, bucket_id, row) } {
            Successor::Moved(..) => Outcome::Moved,
            Successor::Deleted | Successor::Gone => Outcome::Deleted,
        },
        Lock::ChangedBySelf => Outcome::ChangedBySelf,
    }
}

fn pending_has(relid: pg_sys::Oid, bucket_id: i64, cid: pg_sys::CommandId, row: usize) -> bool {
    PENDING.with(|p| {
        p.borrow().get(&(relid.to_u32(), bucket_id, cid)).is_some_and(|e| e.deleted.contains(&row) || e.moved.contains_key(&row))
    })
}

fn entry<R>(relid: pg_sys::Oid, bucket_id: i64, cid: pg_sys::CommandId, f: impl FnOnce(&mut PendingBucket) -> R) -> R {
    // SAFETY: a plain read of the backend's transaction state.
    let subxid = unsafe { pg_sys::GetCurrentSubTransactionId() };
    PENDING.with(|p| {
        let mut p = p.borrow_mut();
        let e = p.entry((relid.to_u32(), bucket_id, cid)).or_insert_with(|| PendingBucket { subxid, ..Default::default() });
        e.subxid = e.subxid.max(subxid);
        f(e)
    })
}

/// DELETE of the row at `tid`.
///
/// # Safety
/// `rel` must be an open tsbucket table.
pub unsafe fn record_delete(rel: pg_sys::Relation, tid: &pg_sys::ItemPointerData, cid: pg_sys::CommandId) -> Outcome {
    let relid = unsafe { (*rel).rd_id };
    let config = catalog::require(relid);
    let (bucket_id, row) = crate::tid::get(tid);
    if pending_has(relid, bucket_id, cid, row) {
        return Outcome::AlreadyDoneBySelf;
    }
    let outcome = unsafe { claim(&config, bucket_id, row, cid) };
    if matches!(outcome, Outcome::Done) {
        entry(relid, bucket_id, cid, |e| e.deleted.insert(row));
    }
    outcome
}

/// EvalPlanQual's tuple_lock: follows the row at `tid` to where it lives now
/// (through every rewrite committed since), locks that bucket, fills `slot`
/// with the row and moves `tid` there.
///
/// # Safety
/// `rel` must be an open tsbucket table and `slot` a virtual slot of it.
pub unsafe fn lock_row(
    rel: pg_sys::Relation,
    tid: &mut pg_sys::ItemPointerData,
    cid: pg_sys::CommandId,
    follow: bool,
    slot: *mut pg_sys::TupleTableSlot,
) -> (pg_sys::TM_Result::Type, bool) {
    unsafe {
        let config = catalog::require((*rel).rd_id);
        let shape = TableShape::new((*rel).rd_att, &config);
        let mut traversed = false;
        loop {
            let (bucket_id, row) = crate::tid::get(tid);
            match claim(&config, bucket_id, row, cid) {
                Outcome::Done | Outcome::AlreadyDoneBySelf => {
                    let store = pg_sys::table_open(config.store_relid, pg_sys::AccessShareLock as i32);
                    let bucket = read::fetch_bucket(&config, &shape, store, bucket_id, &raw mut pg_sys::SnapshotSelfData);
                    pg_sys::table_close(store, pg_sys::NoLock as i32);
                    return match bucket {
                        Some(b) if row < b.rows => {
                            read::fill_slot(rel, &shape, &b, None, row, slot);
                            (pg_sys::TM_Result::TM_Ok, traversed)
                        }
                        _ => (pg_sys::TM_Result::TM_Deleted, traversed),
                    };
                }
                Outcome::Moved if follow => {
                    let Successor::Moved(new_id, new_row) = store::successor(&config, bucket_id, row) else {
                        return (pg_sys::TM_Result::TM_Deleted, traversed);
                    };
                    crate::tid::set(tid, new_id, new_row);
                    traversed = true;
                }
                Outcome::Moved => return (pg_sys::TM_Result::TM_Updated, traversed),
                Outcome::Deleted => return (pg_sys::TM_Result::TM_Deleted, traversed),
                Outcome::ChangedBySelf => return (pg_sys::TM_Result::TM_SelfModified, traversed),
            }
        }
    }
}

/// UPDATE: only the meta columns may change (MongoDB's rule); the planner hook
/// already refused other SET targets, this re-checks the values themselves.
///
/// # Safety
/// `slot` must hold the new version of the row at `otid` of `rel`.
pub unsafe fn record_update(
    rel: pg_sys::Relation,
    otid: &pg_sys::ItemPointerData,
    slot: *mut pg_sys::TupleTableSlot,
    cid: pg_sys::CommandId,
) -> Outcome {
    unsafe {
        let relid = (*rel).rd_id;
        let config = catalog::require(relid);
        let shape = TableShape::new((*rel).rd_att, &config);
        let (bucket_id, row) = crate::tid::get(otid);
        if pending_has(relid, bucket_id, cid, row) {
            return Outcome::AlreadyDoneBySelf;
        }
        let outcome = claim(&config, bucket_id, row, cid);
        if !matches!(outcome, Outcome::Done) {
            return outcome;
        }
        // The version we hold the lock of: its id names exactly one store tuple.
        let store = pg_sys::table_open(config.store_relid, pg_sys::AccessShareLock as i32);
        let old = read::fetch_bucket(&config, &shape, store, bucket_id, &raw mut pg_sys::SnapshotSelfData);
        pg_sys::table_close(store, pg_sys::NoLock as i32);
        let Some(old) = old.filter(|b| row < b.rows) else { return Outcome::Deleted };
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
        entry(relid, bucket_id, cid, |e| e.moved.insert(row, meta));
        Outcome::Done
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

/// Applies the pending changes of the current subtransaction that commands
/// from `from_cid` on made (None: all of them).
pub fn apply(from_cid: Option<pg_sys::CommandId>) {
    // SAFETY: a plain read of the backend's transaction state.
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
    read::forget_fetched();
    let mut by_table: BTreeMap<u32, Vec<(i64, PendingBucket)>> = BTreeMap::new();
    for ((relid, bucket_id, _), p) in work {
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
            // We hold the bucket's lock, so only a later command of ours can have changed it.
            let stored = store::find_bucket(store, config.id_index, bucket_id, &raw mut pg_sys::SnapshotSelfData);
            let Some(stored) = stored else {
                ts_error(
                    crate::error::TRIGGERED_DATA_CHANGE_VIOLATION,
                    "rows to be changed were already changed by an operation triggered by the current command",
                    "A trigger or function changed rows of the same bucket while the statement ran; change them in separate statements.",
                );
            };
            let rows = stored.rows as usize;
            let mut deleted = vec![false; rows];
            pending.deleted.iter().filter(|&&r| r < rows).for_each(|&r| deleted[r] = true);
            let n_deleted = deleted.iter().filter(|d| **d).count();
            store::delete_bucket(store, stored.tid);
            LOCKED.with(|l| l.borrow_mut().remove(&(relid.to_u32(), bucket_id)));
            if n_deleted == rows {
                continue;
            }
            let first_meta = pending.moved.values().next();
            let whole_move = n_deleted == 0
                && pending.moved.len() == rows
                && pending.moved.values().all(|m| Some(m) == first_meta);
            if whole_move {
                let new_id = store::relabel_bucket(store, &config, &shape, &stored, first_meta.expect("rows > 0"));
                let moves: RowMoves = (0..rows).map(|r| Some((0, r as u16))).collect();
                store::record_moves(&config, bucket_id, &[new_id], &moves);
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
    let mut moves: RowMoves = vec![None; loaded.rows];
    let mut new_ids = Vec::new();
    for (meta, keep) in groups {
        let kept = keep.iter().filter(|k| **k).count();
        let columns: Vec<Column> = loaded.columns.iter().flatten().map(|c| c.filter(&keep)).collect();
        let id = unsafe {
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
                pg_sys::GetCurrentCommandId(true),
            )
        };
        for (new_row, old_row) in keep.iter().enumerate().filter(|(_, k)| **k).map(|(r, _)| r).enumerate() {
            moves[old_row] = Some((new_ids.len() as u16, new_row as u16));
        }
        new_ids.push(id);
    }
    unsafe { store::record_moves(config, stored.bucket_id, &new_ids, &moves) };
}

pub fn discard_subxact(subxid: u32) {
    PENDING.with(|p| p.borrow_mut().retain(|_, v| v.subxid < subxid));
    LOCKED.with(|l| l.borrow_mut().retain(|_, s| *s < subxid));
}

pub fn reassign_subxact(child: u32, parent: u32) {
    PENDING.with(|p| {
        p.borrow_mut().values_mut().filter(|v| v.subxid == child).for_each(|v| v.subxid = parent);
    });
    LOCKED.with(|l| l.borrow_mut().values_mut().filter(|s| **s == child).for_each(|s| *s = parent));
}

pub fn discard_all() {
    PENDING.with(|p| p.borrow_mut().clear());
    LOCKED.with(|l| l.borrow_mut().clear());
    read::forget_fetched();
}

