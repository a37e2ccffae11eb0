//! Writing buffered buckets to the store: at the end of a statement, before
//! a scan that must see them, when one closes.

use crate::catalog::config::Config;
use crate::catalog::shape::TableShape;
use crate::store::bucket::{BucketContent, CloseReason};
use crate::store::ids;
use crate::store::insert;
use crate::write::buffer::{BUFFER, OpenBucket, Owner, Work, current_subxid, prune, take_buckets};
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
        insert::write_bucket(store, config, shape, Some(bucket.bucket_id), &content, reason, bucket.owner.cid);
        pg_sys::table_close(store, pg_sys::NoLock as i32);
    }
}

/// The id of a bucket that starts buffering: its rows' TIDs carry it already.
pub(super) fn new_bucket_id(config: &Config) -> i64 {
    // SAFETY: the table's store is opened RowExclusive for allocate_id, which needs `config`'s open store, and
    // closed right after with the lock kept to the transaction's end.
    unsafe {
        let store = pg_sys::table_open(config.store_relid, pg_sys::RowExclusiveLock as i32);
        let id = ids::allocate_id(store, config);
        pg_sys::table_close(store, pg_sys::NoLock as i32);
        id
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
/// whose trigger reads the table), which that snapshot sees. Rows of the
/// current command stay buffered: its own snapshot cannot see them anyway, and
/// writing them would split its buckets (a rescanned subquery would make one
/// bucket per row).
pub fn flush_for_scan(relid: pg_sys::Oid, curcid: pg_sys::CommandId) {
    let subxid = current_subxid();
    let visible = |o: &Owner| o.subxid == subxid && o.cid < curcid;
    let work = BUFFER.with(|b| {
        let mut buffer = b.borrow_mut();
        let work = take_buckets(&mut buffer, Some(relid), |o| visible(&o.owner), true);
        if let Some(table) = buffer.tables.get_mut(&relid) {
            for series in table.series.values_mut() {
                series.newest.retain(|(o, _)| !visible(o));
            }
        }
        prune(&mut buffer);
        work
    });
    write_all(work, CloseReason::EndOfStatement);
}
