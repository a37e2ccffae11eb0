//! One row at a time, as the executor hands them over: lock the row's bucket
//! (once per transaction), say whether the row can be changed where the
//! executor found it, and record the change.

use crate::catalog::config::{self, Config};
use crate::catalog::shape::{Role, TableShape};
use crate::dml::pending::{LOCKED, Meta, Outcome, entry, pending_has};
use crate::pg::datum;
use crate::pg::error::{FEATURE_NOT_SUPPORTED, ts_error};
use crate::store::locks::{self, Lock};
use crate::store::moves::{self, Successor};
use crate::store::rows;
use crate::store::tail_rows;
use pgrx::pg_sys;
use tsbucket_format::{Column, Values};

/// Locks the row's bucket (once per transaction) and says whether the row can
/// be changed where the executor found it.
///
/// # Safety
/// `config` must be the configuration of an existing tsbucket table.
unsafe fn claim(config: &Config, bucket_id: i64, row: usize, cid: pg_sys::CommandId) -> Outcome {
    let relid = config.relid.to_u32();
    if LOCKED.with(|l| l.borrow().contains_key(&(relid, bucket_id))) {
        return Outcome::Done;
    }
    // SAFETY: config.store_relid is the table's bucket store (claim's contract), opened RowExclusive for
    // lock_bucket, which needs `config`'s open store, and closed after with the lock kept.
    let lock = unsafe {
        let store = pg_sys::table_open(config.store_relid, pg_sys::RowExclusiveLock as i32);
        let lock = locks::lock_bucket(store, config, bucket_id, cid, true);
        pg_sys::table_close(store, pg_sys::NoLock as i32);
        lock
    };
    match lock {
        Lock::Held => {
            // SAFETY: GetCurrentSubTransactionId names the subtransaction that now holds the bucket lock, whose
            // abort releases it; it only reads backend state.
            let subxid = unsafe { pg_sys::GetCurrentSubTransactionId() };
            LOCKED.with(|l| l.borrow_mut().insert((relid, bucket_id), subxid));
            Outcome::Done
        }
        // SAFETY: `config` is an existing tsbucket table's (claim's contract), so the moves table successor reads exists.
        Lock::Gone | Lock::Busy => match unsafe { moves::successor(config, bucket_id, row) } {
            Successor::Moved(..) => Outcome::Moved,
            Successor::Deleted | Successor::Gone => Outcome::Deleted,
        },
        Lock::ChangedBySelf => Outcome::ChangedBySelf,
    }
}

/// DELETE of the row at `tid`.
///
/// # Safety
/// `rel` must be an open tsbucket table.
pub unsafe fn record_delete(rel: pg_sys::Relation, tid: &pg_sys::ItemPointerData, cid: pg_sys::CommandId) -> Outcome {
    // SAFETY: `rel` is an open tsbucket table (record_delete's contract), so its relcache entry is readable.
    let relid = unsafe { (*rel).rd_id };
    let config = config::require(relid);
    let (bucket_id, row) = crate::store::tid::get(tid);
    if pending_has(relid, bucket_id, cid, row) {
        return Outcome::AlreadyDoneBySelf;
    }
    // SAFETY: `config` was just looked up for the open table `rel` being deleted from.
    let outcome = unsafe { claim(&config, bucket_id, row, cid) };
    if matches!(outcome, Outcome::Done) {
        entry(relid, bucket_id, cid, |e| e.deleted.insert(row));
    }
    outcome
}

/// The failure record of a row a drain moved into a bucket: the executor
/// follows it (EvalPlanQual through `lock_row`) under READ COMMITTED, and
/// fails with a serialization error otherwise, as for a concurrent update.
fn moved(tid: &pg_sys::ItemPointerData, cid: pg_sys::CommandId, tmfd: &mut pg_sys::TM_FailureData) -> pg_sys::TM_Result::Type {
    tmfd.ctid = *tid;
    tmfd.xmax = pg_sys::InvalidTransactionId;
    tmfd.cmax = cid;
    tmfd.traversed = false;
    pg_sys::TM_Result::TM_Updated
}

/// DELETE of a tail row: heap's delete of its segment tuple.
///
/// # Safety
/// `rel` must be an open tsbucket table; the rest are table_tuple_delete's arguments.
pub unsafe fn delete_tail(
    rel: pg_sys::Relation,
    tid: &pg_sys::ItemPointerData,
    cid: pg_sys::CommandId,
    snapshot: pg_sys::Snapshot,
    crosscheck: pg_sys::Snapshot,
    wait: bool,
    tmfd: &mut pg_sys::TM_FailureData,
) -> pg_sys::TM_Result::Type {
    // SAFETY: `rel` is an open tsbucket table (the contract), so its relcache entry is readable.
    let config = config::require(unsafe { (*rel).rd_id });
    // SAFETY: in the executor's transaction, with its arguments.
    match unsafe { tail_rows::delete(&config, tid, cid, snapshot, crosscheck, wait, tmfd) } {
        tail_rows::Change::Heap(result, _) => result,
        tail_rows::Change::Drained => moved(tid, cid, tmfd),
    }
}

/// UPDATE of a tail row (its meta values only): heap's update of its segment
/// tuple; on TM_Ok `slot` gets the new version's TID.
///
/// # Safety
/// As `record_update`; the rest are table_tuple_update's arguments.
#[allow(clippy::too_many_arguments)]
pub unsafe fn update_tail(
    rel: pg_sys::Relation,
    otid: &pg_sys::ItemPointerData,
    slot: *mut pg_sys::TupleTableSlot,
    cid: pg_sys::CommandId,
    snapshot: pg_sys::Snapshot,
    crosscheck: pg_sys::Snapshot,
    wait: bool,
    tmfd: &mut pg_sys::TM_FailureData,
    lockmode: &mut pg_sys::LockTupleMode::Type,
) -> pg_sys::TM_Result::Type {
    // SAFETY: `rel` is the open table the updated row belongs to (the contract).
    let config = config::require(unsafe { (*rel).rd_id });
    // SAFETY: rd_att of the open `rel` is the descriptor of the table being updated, as TableShape::new needs.
    let shape = unsafe { TableShape::new((*rel).rd_att, &config) };
    // SAFETY: in the executor's transaction; SnapshotAny reads the version the executor found, whatever its state.
    let Some(old) = (unsafe { tail_rows::fetch(&config, &shape, otid, &raw mut pg_sys::SnapshotAnyData) }) else {
        return moved(otid, cid, tmfd);
    };
    // SAFETY: `slot` holds the new version of the one row of `old`, of the open `rel` (the contract).
    unsafe { new_meta(rel, &shape, &old, 0, slot) };
    // SAFETY: new_meta deformed the slot: its values are the new row's, one per attribute of `rel`.
    let metas: Vec<Option<pg_sys::Datum>> = unsafe {
        shape
            .meta_attrs()
            .iter()
            .map(|a| {
                let i = a.attnum as usize - 1;
                (!*(*slot).tts_isnull.add(i)).then(|| *(*slot).tts_values.add(i))
            })
            .collect()
    };
    // SAFETY: in the executor's transaction; `metas` are datums of the meta columns' types from the new row.
    match unsafe { tail_rows::update_meta(&config, otid, &metas, cid, snapshot, crosscheck, wait, tmfd, lockmode) } {
        tail_rows::Change::Heap(result, new_tid) => {
            if result == pg_sys::TM_Result::TM_Ok {
                // SAFETY: `slot` is ExecUpdate's slot of the new version; its TID, table and version are its own fields.
                unsafe {
                    (*slot).tts_tid = new_tid;
                    (*slot).tts_tableOid = (*rel).rd_id;
                    crate::store::slot::set_version(slot, crate::store::slot::Version::written_now(cid));
                }
            }
            result
        }
        tail_rows::Change::Drained => moved(otid, cid, tmfd),
    }
}

/// EvalPlanQual's tuple_lock: follows the row at `tid` to where it lives now
/// (through every rewrite committed since), locks that bucket, fills `slot`
/// with the row and moves `tid` there.
///
/// # Safety
/// `rel` must be an open tsbucket table and `slot` a virtual slot of it.
#[allow(clippy::too_many_arguments)]
pub unsafe fn lock_row(
    rel: pg_sys::Relation,
    tid: &mut pg_sys::ItemPointerData,
    snapshot: pg_sys::Snapshot,
    cid: pg_sys::CommandId,
    mode: pg_sys::LockTupleMode::Type,
    wait_policy: pg_sys::LockWaitPolicy::Type,
    flags: u8,
    tmfd: &mut pg_sys::TM_FailureData,
    slot: *mut pg_sys::TupleTableSlot,
) -> (pg_sys::TM_Result::Type, bool) {
    let follow = flags & pg_sys::TUPLE_LOCK_FLAG_FIND_LAST_VERSION as u8 != 0;
    // SAFETY: `rel` is an open tsbucket table (lock_row's contract), so its relcache entry is readable.
    let relid = unsafe { (*rel).rd_id };
    let config = config::require(relid);
    // SAFETY: rd_att of the open `rel` is the valid descriptor of the table `config` was looked up for.
    let shape = unsafe { TableShape::new((*rel).rd_att, &config) };
    let mut traversed = false;
    loop {
        if tail_rows::is_tail_row(tid) {
            // SAFETY: in the executor's transaction; heap locks the segment tuple with the executor's own arguments.
            let (change, row) = unsafe { tail_rows::lock(&config, &shape, tid, snapshot, cid, mode, wait_policy, flags, tmfd) };
            match change {
                tail_rows::Change::Heap(result, latest) => {
                    if let Some(b) = row {
                        traversed |= latest.ip_posid != tid.ip_posid || latest.ip_blkid.bi_lo != tid.ip_blkid.bi_lo || latest.ip_blkid.bi_hi != tid.ip_blkid.bi_hi;
                        *tid = latest;
                        // SAFETY: `slot` is a virtual slot of `rel` (lock_row's contract); the bucket holds the row found.
                        unsafe { rows::fill_slot(rel, &shape, &b, None, 0, slot) };
                    } else if result != pg_sys::TM_Result::TM_Ok {
                        *tid = tmfd.ctid;
                    }
                    return (result, traversed || tmfd.traversed);
                }
                tail_rows::Change::Drained if follow => {
                    // SAFETY: in the executor's transaction; `tid` names a tail row of the open table.
                    let latest = unsafe { tail_rows::latest_version(&config, tid) };
                    let (tail_id, row) = crate::store::tid::get(&latest);
                    // SAFETY: `config` is the open table's; the drain that moved the row has committed.
                    let Successor::Moved(new_id, new_row) = (unsafe { moves::successor(&config, tail_id, row) }) else {
                        return (pg_sys::TM_Result::TM_Deleted, traversed);
                    };
                    crate::store::tid::set(tid, new_id, new_row);
                    traversed = true;
                    continue;
                }
                tail_rows::Change::Drained => return (pg_sys::TM_Result::TM_Updated, traversed),
            }
        }
        let (bucket_id, row) = crate::store::tid::get(tid);
        // SAFETY: `config` belongs to the open table `rel` whose row EvalPlanQual follows.
        match unsafe { claim(&config, bucket_id, row, cid) } {
            Outcome::Done | Outcome::AlreadyDoneBySelf => {
                // SAFETY: the table's store is opened AccessShare to read the bucket we hold the lock of, as
                // SnapshotSelf sees it, and closed right after with the lock kept.
                let bucket = unsafe {
                    let store = pg_sys::table_open(config.store_relid, pg_sys::AccessShareLock as i32);
                    let bucket = rows::fetch_bucket(&config, &shape, store, bucket_id, &raw mut pg_sys::SnapshotSelfData);
                    pg_sys::table_close(store, pg_sys::NoLock as i32);
                    bucket
                };
                return match bucket {
                    Some(b) if row < b.rows => {
                        // SAFETY: `slot` is a virtual slot of `rel` (lock_row's contract), as fill_slot requires.
                        unsafe { rows::fill_slot(rel, &shape, &b, None, row, slot) };
                        (pg_sys::TM_Result::TM_Ok, traversed)
                    }
                    _ => (pg_sys::TM_Result::TM_Deleted, traversed),
                };
            }
            Outcome::Moved if follow => {
                // SAFETY: `config` is the open table's, so its moves table exists; claim waited for the rewriter.
                let next = unsafe { moves::successor(&config, bucket_id, row) };
                let Successor::Moved(new_id, new_row) = next else {
                    return (pg_sys::TM_Result::TM_Deleted, traversed);
                };
                crate::store::tid::set(tid, new_id, new_row);
                traversed = true;
            }
            Outcome::Moved => return (pg_sys::TM_Result::TM_Updated, traversed),
            Outcome::Deleted => return (pg_sys::TM_Result::TM_Deleted, traversed),
            Outcome::ChangedBySelf => return (pg_sys::TM_Result::TM_SelfModified, traversed),
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
    // SAFETY: `rel` is the open table the updated row belongs to (record_update's contract).
    let relid = unsafe { (*rel).rd_id };
    let config = config::require(relid);
    // SAFETY: rd_att of the open `rel` is the descriptor of the table being updated, as TableShape::new needs.
    let shape = unsafe { TableShape::new((*rel).rd_att, &config) };
    let (bucket_id, row) = crate::store::tid::get(otid);
    if pending_has(relid, bucket_id, cid, row) {
        return Outcome::AlreadyDoneBySelf;
    }
    // SAFETY: `config` was looked up above for the open table `rel` being updated.
    let outcome = unsafe { claim(&config, bucket_id, row, cid) };
    if !matches!(outcome, Outcome::Done) {
        return outcome;
    }
    // The version we hold the lock of: its id names exactly one store tuple.
    // SAFETY: the table's store is opened AccessShare just to fetch that locked version, then closed (lock kept).
    let old = unsafe {
        let store = pg_sys::table_open(config.store_relid, pg_sys::AccessShareLock as i32);
        let old = rows::fetch_bucket(&config, &shape, store, bucket_id, &raw mut pg_sys::SnapshotSelfData);
        pg_sys::table_close(store, pg_sys::NoLock as i32);
        old
    };
    let Some(old) = old.filter(|b| row < b.rows) else { return Outcome::Deleted };
    // SAFETY: `slot` holds the new version of row `row` of `old`, of the open table `rel` (record_update's contract).
    let meta = unsafe { new_meta(rel, &shape, &old, row, slot) };
    entry(relid, bucket_id, cid, |e| e.moved.insert(row, meta));
    Outcome::Done
}


/// The new meta values of an UPDATE's row (identifying bytes per meta
/// column), after checking that nothing else changes: the row's other values
/// must equal those of row `row` of `old`.
///
/// # Safety
/// `slot` must hold the new version of row `row` of `old`, of the open table `rel` that `shape` describes.
unsafe fn new_meta(rel: pg_sys::Relation, shape: &TableShape, old: &crate::store::bucket::LoadedBucket, row: usize, slot: *mut pg_sys::TupleTableSlot) -> Meta {
    // SAFETY: `rel` is open (the contract), so its relcache entry is readable.
    let relid = unsafe { (*rel).rd_id };
    let meta_count = shape.meta_attrs().len();
    let natts = shape.attrs.len();
    // SAFETY: `slot` holds the new version of the row (new_meta's contract): slot_getallattrs fills its
    // tts_values/tts_isnull, one entry per attribute of `rel`, which nothing changes while they are read below.
    let (values, nulls) = unsafe {
        pg_sys::slot_getallattrs(slot);
        (std::slice::from_raw_parts((*slot).tts_values, natts), std::slice::from_raw_parts((*slot).tts_isnull, natts))
    };
    let mut meta: Meta = vec![None; meta_count];
    for attr in &shape.attrs {
        let i = attr.attnum as usize - 1;
        match attr.role {
            Role::Dropped => {}
            Role::Meta(m) => {
                if !nulls[i] {
                    // SAFETY: values[i] is the new row's non-NULL datum of meta attribute `attr`'s type; to_vec copies it.
                    meta[m] = Some(unsafe { datum::datum_bytes(&values[i], attr.layout()) }.to_vec());
                }
            }
            Role::Time | Role::Measurement => {
                let mut fresh = Column::new(attr.attnum, attr.kind);
                if nulls[i] {
                    fresh.push_null();
                } else {
                    // SAFETY: values[i] is the new row's non-NULL datum of payload attribute `attr`'s type.
                    unsafe { datum::push_datum(&mut fresh, attr.layout(), values[i]) };
                }
                // SAFETY: rd_att of the open `rel` is the user table's descriptor, and `attr` one of its payload attributes.
                let old_values = unsafe { rows::column_or_default((*rel).rd_att, attr, &old) };
                let unchanged = same_value(&old_values, row, &fresh);
                if !unchanged {
                    // SAFETY: `rel` is the UPDATE's open result relation and `attr` one of its columns.
                    let column = unsafe { crate::pg::relation::attr_name(rel, attr.attnum as i16) };
                    ts_error(
                        FEATURE_NOT_SUPPORTED,
                        &format!("cannot change column \"{}\" of time-series table \"{}\"", column, crate::pg::relation::relation_name(relid)),
                        "An UPDATE of a time-series table may only set its meta columns.",
                    );
                }
            }
        }
    }
    meta
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
