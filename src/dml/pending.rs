//! What DELETE and UPDATE have recorded but not yet applied, per table,
//! bucket and command, and the buckets this transaction holds the lock of.

use crate::store::rows;
use pgrx::pg_sys;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};

pub(super) type Meta = Vec<Option<Vec<u8>>>;

#[derive(Default)]
pub(super) struct PendingBucket {
    pub(super) subxid: u32,
    pub(super) deleted: BTreeSet<usize>,
    /// Row -> its new meta values.
    pub(super) moved: BTreeMap<usize, Meta>,
}

/// Pending changes by (table, bucket, command): a statement nested in a
/// trigger or function applies only its own at its end.
pub(super) type Key = (u32, i64, u32);

thread_local! {
    pub(super) static PENDING: RefCell<BTreeMap<Key, PendingBucket>> = const { RefCell::new(BTreeMap::new()) };
    /// Buckets this transaction holds the lock of: (table, bucket id) -> the
    /// subtransaction that took it (its abort releases the lock).
    pub(super) static LOCKED: RefCell<BTreeMap<(u32, i64), u32>> = const { RefCell::new(BTreeMap::new()) };
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

pub(super) fn pending_has(relid: pg_sys::Oid, bucket_id: i64, cid: pg_sys::CommandId, row: usize) -> bool {
    PENDING.with(|p| {
        p.borrow().get(&(relid.to_u32(), bucket_id, cid)).is_some_and(|e| e.deleted.contains(&row) || e.moved.contains_key(&row))
    })
}

pub(super) fn entry<R>(relid: pg_sys::Oid, bucket_id: i64, cid: pg_sys::CommandId, f: impl FnOnce(&mut PendingBucket) -> R) -> R {
    // SAFETY: GetCurrentSubTransactionId returns the id of the subtransaction recording this change; it
    // reads backend state only.
    let subxid = unsafe { pg_sys::GetCurrentSubTransactionId() };
    PENDING.with(|p| {
        let mut p = p.borrow_mut();
        let e = p.entry((relid.to_u32(), bucket_id, cid)).or_insert_with(|| PendingBucket { subxid, ..Default::default() });
        e.subxid = e.subxid.max(subxid);
        f(e)
    })
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
    rows::forget_fetched();
}
