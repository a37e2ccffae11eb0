//! Whole-bucket expiry (MongoDB's expireAfterSeconds), for tsbucket.expire
//! and the worker: a bucket goes when its newest row is older than its
//! table's or series' retention.

use crate::catalog::config;
use crate::store::locks;
use crate::store::reader;
use crate::store::tuple;
use pgrx::pg_sys;
use pgrx::prelude::*;

/// Whole-bucket expiry for `tsbucket.expire` and the worker. The caller must
/// own the table. A series' override is found by its meta values' text, which
/// the meta types' output functions make, run as the table's owner in a
/// security-restricted context (never as the worker's superuser). Buckets that
/// user DML holds are left for a later round.
/// (buckets, rows) expired.
pub fn expire(relid: pg_sys::Oid) -> (i64, i64) {
    let config = config::require(relid);
    // The user table's lock first, as TRUNCATE and DROP take it, then its store.
    // SAFETY: LockRelationOid takes a heavyweight lock on oid `relid` (configured, so it exists: config::require above),
    // in the transaction the caller runs; it is released when that transaction ends.
    unsafe { pg_sys::LockRelationOid(relid, pg_sys::ShareUpdateExclusiveLock as i32) };
    // Rows still in the tail expire with their buckets: drain it first (no
    // other merging; under REPEATABLE READ the tail waits for the worker).
    // SAFETY: in the caller's transaction, whose owner check (_expire) covers compaction too; the command counter
    // then moves on, so that expiry's scan sees the buckets the drain wrote.
    unsafe {
        super::compact::compact(relid, 0, true);
        pg_sys::CommandCounterIncrement();
    }
    // Cutoffs (now() minus each interval, as the time column's type) with built-in operators only.
    let cutoffs: Vec<(Option<String>, Option<i64>)> = config::as_extension_owner(|| {
        Spi::connect(|c| {
            // A timestamp (without time zone) time column holds UTC wall-clock times.
            // Postgres stores both types as microseconds since 2000-01-01.
            let rows = c.select(
                "WITH c AS (SELECT expire_after, time_type = 'timestamp'::regtype AS plain FROM tsbucket.catalog WHERE relid = $1),
                      r AS (SELECT NULL::text AS meta, expire_after, 0 AS ord FROM c
                            UNION ALL SELECT meta, expire_after, 1 FROM tsbucket.series_retention_data WHERE relid = $1)
                 SELECT r.meta, (extract(epoch FROM CASE WHEN c.plain THEN (now() AT TIME ZONE 'UTC') - r.expire_after
                                                         ELSE (now() - r.expire_after) AT TIME ZONE 'UTC' END) * 1000000)::int8
                                - 946684800000000
                   FROM r, c ORDER BY r.ord",
                None,
                &[relid.into()],
            )?;
            let mut out = Vec::new();
            for r in rows {
                out.push((r.get::<String>(1)?, r.get::<i64>(2)?));
            }
            Ok::<_, pgrx::spi::Error>(out)
        })
        .unwrap_or_default()
    });
    let table_cutoff = cutoffs.first().and_then(|(_, c)| *c);
    let overrides: std::collections::HashMap<String, Option<i64>> = cutoffs.iter().skip(1).filter_map(|(m, c)| m.clone().map(|m| (m, *c))).collect();
    // The latest cutoff of any series: no bucket older than it, nothing to do.
    let Some(latest) = std::iter::once(table_cutoff).chain(overrides.values().copied()).flatten().max() else {
        return (0, 0);
    };
    let owner = crate::catalog::privileges::table_owner(relid);
    let (mut buckets, mut rows) = (0i64, 0i64);
    // Nothing old enough for any retention in force: an index look-up, no scan.
    // SAFETY: `config.store_relid` is the store of `relid`, locked above; it is opened here under AccessShareLock, and
    // any_bucket_older_than reads it, with the latest snapshot registered around the look-up, before the table_close.
    // (With a snapshot taken now, which sees what the drain above wrote.)
    let due = unsafe {
        let store_rel = pg_sys::table_open(config.store_relid, pg_sys::AccessShareLock as i32);
        let snapshot = pg_sys::RegisterSnapshot(pg_sys::GetLatestSnapshot());
        let due = reader::any_bucket_older_than(store_rel, latest, snapshot);
        pg_sys::UnregisterSnapshot(snapshot);
        pg_sys::table_close(store_rel, pg_sys::NoLock as i32);
        due
    };
    if due == Some(false) {
        return (0, 0);
    }
    // SAFETY: the store of `relid` (locked above) is opened RowExclusive until the table_close at the end of this
    // function; MetaTypes::of_store reads the types of its `config.meta_attnums.len()` meta columns from its descriptor.
    let (store_rel, mut types) = unsafe {
        let store_rel = pg_sys::table_open(config.store_relid, pg_sys::RowExclusiveLock as i32);
        (store_rel, crate::store::meta_values::MetaTypes::of_store(store_rel, config.meta_attnums.len()))
    };
    // What committed before our lock (an expiry or compaction we waited for may have run).
    // SAFETY: in the caller's transaction, after LockRelationOid on `relid` above, as snapshot_after_lock requires; the
    // snapshot it registers is unregistered after the scan below ends.
    let (cid, snapshot) = unsafe { (pg_sys::GetCurrentCommandId(true), reader::snapshot_after_lock()) };
    // SAFETY: `store_rel` stays open until after scan.end(), and `snapshot` is registered until then.
    let mut scan = unsafe { reader::StoreScan::begin(store_rel, snapshot) };
    while let Some(tuple) = scan.next(true) {
        // SAFETY: `tuple` is the store row the expiry scan just returned, valid until its next call; read_header copies it.
        let b = unsafe { tuple::read_header(store_rel, tuple) };
        if b.max_time >= latest {
            continue;
        }
        let cutoff = if overrides.is_empty() {
            table_cutoff
        } else {
            let meta = types.copy_datums(&b);
            let text = crate::catalog::privileges::as_owner_restricted(owner, || types.text(&meta));
            match text.and_then(|t| overrides.get(&t).copied()) {
                Some(series) => series,
                None => table_cutoff,
            }
        };
        if cutoff.is_some_and(|c| b.max_time < c) {
            // SAFETY: `store_rel` is `config`'s store, open RowExclusive; wait = false, so a bucket user DML holds is
            // skipped, and `cid` is this transaction's command id.
            let lock = unsafe { locks::lock_bucket(store_rel, &config, b.bucket_id, cid, false) };
            if lock == locks::Lock::Held {
                // SAFETY: `store_rel` is open and locked RowExclusive (delete_bucket's requirement), and `b.tid` is the
                // expired bucket's version that lock_bucket just locked for this transaction.
                unsafe { locks::delete_bucket(store_rel, b.tid) };
                buckets += 1;
                rows += i64::from(b.rows);
            }
        }
    }
    scan.end();
    // SAFETY: `snapshot` was registered by snapshot_after_lock and its scan has ended; `store_rel` was opened above and
    // is closed once, NoLock keeping its RowExclusiveLock until the transaction ends.
    unsafe {
        pg_sys::UnregisterSnapshot(snapshot);
        pg_sys::table_close(store_rel, pg_sys::NoLock as i32);
    }
    (buckets, rows)
}
