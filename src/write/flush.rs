//! Writing buffered buckets to the store: at the end of a statement, before
//! a scan that must see them, when one closes.

use crate::catalog::config::Config;
use crate::catalog::shape::TableShape;
use crate::store::bucket::{BucketContent, CloseReason};
use crate::store::insert;
use crate::write::buffer::{BUFFER, OpenBucket, Owner, RESCUED, Rescued, Work, current_subxid, prune, take_buckets};
use pgrx::pg_sys;

pub(super) fn write_all(work: Work, reason: CloseReason) {
    for (config, shape, bucket) in work {
        flush_bucket(&config, &shape, bucket, reason);
    }
}

pub(super) fn flush_bucket(config: &Config, shape: &TableShape, bucket: OpenBucket, reason: CloseReason) {
    // SAFETY: config.store_relid is the buffered table's bucket store; it is opened and locked RowExclusive
    // here, for the write below.
    let store = unsafe { pg_sys::table_open(config.store_relid, pg_sys::RowExclusiveLock as i32) };
    let content = BucketContent {
        columns: &bucket.columns,
        rows: bucket.rows,
        meta: &bucket.meta,
        window_start: bucket.window_start,
        uncompressed_bytes: (bucket.bytes + bucket.meta_bytes) as i64,
    };
    // SAFETY: `store` is `config`'s bucket store, open and locked RowExclusive just above, as write_bucket
    // requires; it is closed after the write, the lock kept to the transaction's end.
    unsafe {
        insert::write_bucket(store, config, shape, None, &content, reason, bucket.owner.cid);
        pg_sys::table_close(store, pg_sys::NoLock as i32);
    }
}

thread_local! {
    static NEXT_BUFFERED: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// The provisional id of a bucket that starts buffering (its rows' TIDs
/// carry it): the store's id is drawn when the bucket is written as one,
/// which a bucket bound for the tail never is.
pub(super) fn new_bucket_id() -> i64 {
    NEXT_BUFFERED.with(|n| {
        let id = n.get();
        n.set(if id >= u32::MAX - 1 { 0 } else { id + 1 });
        crate::store::tid::buffered_id(id)
    })
}

/// Transaction end (commit or PREPARE): writes everything still buffered. A
/// bucket left with fewer rows than `tsbucket.tail_bucket_rows` goes to the
/// table's tail instead, row by row, for the worker to drain into fuller
/// buckets: a transaction of a few rows costs a few heap rows, not a bucket
/// (with its index entries) per series.
pub fn flush_at_commit() {
    let subxid = current_subxid();
    let work = BUFFER.with(|b| {
        let mut buffer = b.borrow_mut();
        let work = take_buckets(&mut buffer, None, |o| o.owner.subxid == subxid, true);
        for table in buffer.tables.values_mut() {
            for series in table.series.values_mut() {
                series.newest.retain(|(o, _)| o.subxid != subxid);
            }
        }
        prune(&mut buffer);
        work
    });
    let tail_below = crate::catalog::gucs::tail_bucket_rows();
    let (mut to_tail, to_store): (Vec<_>, Vec<_>) = work.into_iter().partition(|(config, _, b)| b.rows < tail_below && config.tail.is_some());
    write_all(to_store, CloseReason::EndOfStatement);
    // One append per table (and shape): its current segment is looked up and locked once. The sort is
    // stable, so each table's buckets keep their order.
    to_tail.sort_by_key(|(config, shape, _)| (config.relid.to_u32(), std::rc::Rc::as_ptr(shape) as usize));
    for group in to_tail.chunk_by(|a, b| a.0.relid == b.0.relid && std::rc::Rc::ptr_eq(&a.1, &b.1)) {
        let (config, shape) = (&group[0].0, &group[0].1);
        let parts: Vec<crate::store::tail::TailRows> = group
            .iter()
            .map(|(_, _, b)| crate::store::tail::TailRows { meta: &b.meta, columns: &b.columns, rows: b.rows, cid: b.owner.cid })
            .collect();
        // SAFETY: at commit, in the transaction; each bucket's columns were buffered for its table's `shape`.
        unsafe { crate::store::tail::append(config, shape, &parts) };
    }
}

/// Writes the open buckets of the current subtransaction (of one table, or
/// all) that commands from `from_cid` on wrote (None: every command's).
pub fn flush(relid: Option<pg_sys::Oid>, reason: CloseReason, from_cid: Option<pg_sys::CommandId>) {
    let subxid = current_subxid();
    let mine = |o: &Owner| o.subxid == subxid && from_cid.is_none_or(|c| o.cid >= c);
    let work = BUFFER.with(|b| {
        let mut buffer = b.borrow_mut();
        let work = take_buckets(&mut buffer, relid, |o| mine(&o.owner), true);
        for (id, table) in buffer.tables.iter_mut() {
            if relid.is_some_and(|r| r != *id) {
                continue;
            }
            for series in table.series.values_mut() {
                series.newest.retain(|(o, _)| !mine(o));
            }
        }
        prune(&mut buffer);
        work
    });
    write_all(work, reason);
}

/// A scan of `relid` with a snapshot of command `curcid` is starting: write
/// the rows of earlier commands of this subtransaction (an outer statement
/// whose trigger reads the table) and those enclosing subtransactions hold,
/// which that snapshot sees. Rows of the current command stay buffered: its
/// own snapshot cannot see them anyway, and writing them would split its
/// buckets (a rescanned subquery would make one bucket per row).
pub fn flush_for_scan(relid: pg_sys::Oid, curcid: pg_sys::CommandId) {
    let subxid = current_subxid();
    write_visible(Some(relid), &|o: &OpenBucket| o.owner.subxid != subxid || o.owner.cid < curcid);
}

/// A statement other than an INSERT starts: the buckets earlier statements
/// left open (`buffer::carry`) are written, as they would have been at
/// their statements' ends. So nothing reads the store without them, and no
/// later command adds rows to a bucket a snapshot of this statement (or a
/// cursor it opens) could see.
///
/// The buckets are written as the commands that inserted them, but TOAST
/// writes a big payload's chunks as the current command, the one starting:
/// the command counter then moves on, so that this statement (which may
/// delete those buckets: a DELETE, a compaction) acts as a later command
/// than its chunks, as heap requires. Its snapshot, taken before, still sees
/// the buckets (their own tuples are older) and not its own changes.
pub fn flush_carried() {
    if crate::write::buffer::is_empty() {
        return;
    }
    if write_visible(None, &|o: &OpenBucket| o.open_across) {
        // SAFETY: between statements of the transaction (before the next one's executor starts, or in a utility
        // hook): no scan of this backend is in the middle of reading with the current command id.
        unsafe { pg_sys::CommandCounterIncrement() };
    }
}

/// Writes every bucket buffered for `relid` (its columns changed under them).
pub(super) fn flush_table(relid: pg_sys::Oid) {
    write_visible(Some(relid), &|_| true);
}

/// Writes the buckets `pick` selects; those of an enclosing subtransaction
/// are remembered, to be buffered again if this one aborts (rows are written
/// as the current subtransaction, the only one Postgres writes as).
fn write_visible(relid: Option<pg_sys::Oid>, pick: &dyn Fn(&OpenBucket) -> bool) -> bool {
    let subxid = current_subxid();
    let work = BUFFER.with(|b| {
        let mut buffer = b.borrow_mut();
        let work = take_buckets(&mut buffer, relid, pick, true);
        let owners: Vec<Owner> = work.iter().map(|(_, _, b)| b.owner).collect();
        for (id, table) in buffer.tables.iter_mut() {
            if relid.is_some_and(|r| r != *id) {
                continue;
            }
            for series in table.series.values_mut() {
                series.newest.retain(|(o, _)| !owners.contains(o));
            }
        }
        prune(&mut buffer);
        work
    });
    for (config, shape, bucket) in &work {
        if bucket.owner.subxid != subxid {
            RESCUED.with(|r| {
                r.borrow_mut().push(Rescued {
                    written_in: subxid,
                    relid: config.relid,
                    config: config.clone(),
                    shape: shape.clone(),
                    bucket: bucket.clone(),
                })
            });
        }
    }
    let wrote = !work.is_empty();
    write_all(work, CloseReason::EndOfStatement);
    wrote
}
