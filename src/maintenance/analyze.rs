//! Column statistics for time-series tables.
//!
//! Postgres's ANALYZE samples a table by blocks of its own relation, which is
//! empty here: the rows live in the bucket store. (PostgreSQL 17 and later
//! read those blocks through a read stream, so a table AM cannot map them onto
//! buckets either.) So tsbucket gathers the sample itself: rows from buckets
//! chosen at random over the whole store go into a temporary heap table with
//! the same columns, Postgres's own ANALYZE computes that table's statistics,
//! and they are copied to the time-series table's columns in pg_statistic,
//! where the planner reads them.
//!
//! The temporary table belongs to the time-series table's owner, so ANALYZE
//! runs the column types' comparison functions as that owner, in a
//! security-restricted operation, as it would for the table itself.

use crate::catalog::config;
use crate::catalog::shape::TableShape;
use crate::store::reader;
use crate::store::rows;
use crate::store::tuple;
use pgrx::pg_sys;
use pgrx::prelude::*;

/// Buckets sampled at most; rows are taken from each in equal shares.
const MAX_SAMPLED_BUCKETS: usize = 3000;

/// A small deterministic generator (xorshift64*): the same table gives the
/// same sample, which keeps plans reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// `k` distinct indexes of `0..n`, ascending (all of them when k >= n).
fn choose(rng: &mut Rng, n: usize, k: usize) -> Vec<usize> {
    if k >= n {
        return (0..n).collect();
    }
    // Floyd's algorithm.
    let mut picked = std::collections::BTreeSet::new();
    for j in n - k..n {
        let t = rng.below(j + 1);
        if !picked.insert(t) {
            picked.insert(j);
        }
    }
    picked.into_iter().collect()
}

/// Recomputes the statistics of time-series table `relid`. The caller must own
/// it (membership in the owning role counts) or be a superuser; others are
/// skipped, as ANALYZE skips them.
pub fn analyze(relid: pg_sys::Oid) {
    let owner = crate::catalog::privileges::table_owner(relid);
    // SAFETY: GetUserId reads this backend's current user id and superuser() looks that role up in the syscache; the
    // transaction ANALYZE runs in keeps the catalog readable.
    let (user, superuser) = unsafe { (pg_sys::GetUserId(), pg_sys::superuser()) };
    // SAFETY: has_privs_of_role only compares role oids (`user` from GetUserId, `owner` the relowner of `relid`)
    // through the role membership cache of this transaction.
    if !superuser && !unsafe { pg_sys::has_privs_of_role(user, owner) } {
        return;
    }
    let Some(config) = config::lookup(relid) else { return };
    let columns: Vec<(i16, String)> = Spi::connect(|c| {
        c.select(
            "SELECT attnum, format('%I %s%s', attname, format_type(atttypid, atttypmod),
                           CASE WHEN attcollation <> 0 THEN ' COLLATE ' || attcollation::regcollation::text ELSE '' END)
               FROM pg_catalog.pg_attribute WHERE attrelid = $1 AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
            None,
            &[relid.into()],
        )
        .map(|rows| rows.filter_map(|r| Some((r.get::<i16>(1).ok()??, r.get::<String>(2).ok()??))).collect())
        .unwrap_or_default()
    });
    if columns.is_empty() {
        return;
    }
    let sample = format!("pg_temp.tsbucket_analyze_{}", u32::from(relid));
    let definition = columns.iter().map(|(_, d)| d.as_str()).collect::<Vec<_>>().join(", ");
    let run = |sql: &str| Spi::run(sql).unwrap_or_else(|e| error!("tsbucket ANALYZE: {e}"));
    // (No DROP IF EXISTS first: it would tell the client about a table it never
    // made. An earlier failure rolled the sample table back with its transaction.)
    // Made as the table's owner, so that ANALYZE runs the column types'
    // functions as that owner (in a security-restricted operation), as for the
    // table itself, whoever calls. (CREATE TABLE runs no user code; a
    // restricted operation could not make a temporary table.)
    crate::pg::role::as_user(owner, false, || run(&format!("CREATE TEMP TABLE {} ({definition})", sample.trim_start_matches("pg_temp."))));
    let sample_oid = Spi::get_one::<pg_sys::Oid>(&format!("SELECT '{sample}'::regclass::oid"))
        .ok()
        .flatten()
        .unwrap_or_else(|| error!("tsbucket ANALYZE: the sample table vanished"));
    // SAFETY: fill_sample's contract: `config` is `relid`'s configuration (config::lookup above) and `sample_oid` the
    // temporary table just created with `columns`, in this order, in this transaction.
    let (rows, buckets) = unsafe { fill_sample(relid, &config, sample_oid, &columns) };
    run(&format!("ANALYZE {sample}"));
    // SAFETY: copy_statistics' contract: `sample_oid` (just analyzed) and `relid` both exist in this transaction, and
    // the sample's column j + 1 is columns[j] of `relid`, as CREATE TEMP TABLE made it.
    unsafe { copy_statistics(sample_oid, relid, &columns) };
    run(&format!("DROP TABLE {sample}"));
    debug1!("tsbucket: analyzed {}: {rows} sample rows from {buckets} buckets", crate::pg::relation::relation_name(relid));
}

/// Copies a sample of the table's rows into the sample table: buckets chosen
/// at random over the whole store, an equal share of random rows from each.
///
/// # Safety
/// In a transaction; `config` is `relid`'s configuration, and `sample_oid` a
/// table whose column j + 1 is `columns[j]` of `relid`.
unsafe fn fill_sample(relid: pg_sys::Oid, config: &config::Config, sample_oid: pg_sys::Oid, columns: &[(i16, String)]) -> (usize, usize) {
    // SAFETY: `relid` and its store `config.store_relid` exist (this function's contract); AccessShareLock is held on
    // each until the transaction ends, so `rel` and its rd_att stay valid until the table_close at the end.
    let (rel, shape, store) = unsafe {
        let rel = pg_sys::table_open(relid, pg_sys::AccessShareLock as i32);
        let shape = TableShape::new((*rel).rd_att, config);
        let store = pg_sys::table_open(config.store_relid, pg_sys::AccessShareLock as i32);
        (rel, shape, store)
    };
    let snapshot = reader::current_snapshot();
    // SAFETY: `store` was opened just above and stays open until after scan.end(); `snapshot` is the statement's
    // (or transaction's) snapshot, alive for the whole of this call.
    let mut scan = unsafe { reader::StoreScan::begin(store, snapshot) };
    let (mut buckets, mut total_rows) = (0usize, 0f64);
    // SAFETY: CurrentMemoryContext is the caller's live context; "tsbucket analyze" is made its child and deleted by
    // the MemoryContextDelete at the end of this function.
    let cxt = unsafe {
        pg_sys::AllocSetContextCreateInternal(pg_sys::CurrentMemoryContext, c"tsbucket analyze".as_ptr(), 0, 8 * 1024, 8 * 1024 * 1024)
    };
    while let Some(tuple) = scan.next(true) {
        buckets += 1;
        // SAFETY: `tuple` was just returned by `scan` over `store` and stays valid until its next call; the header is
        // read in `cxt` (alive until its deletion below), and the previous context is current again before the reset.
        let header_rows = unsafe {
            let old = pg_sys::MemoryContextSwitchTo(cxt);
            let header_rows = tuple::read_header(store, tuple).rows as f64;
            pg_sys::MemoryContextSwitchTo(old);
            pg_sys::MemoryContextReset(cxt);
            header_rows
        };
        total_rows += header_rows;
    }
    scan.rescan();
    // The table's size for the planner, as ANALYZE records a heap table's:
    // its rows now, against the store's pages now (the estimate scales by
    // the store's pages later on; see relation_estimate_size).
    // SAFETY: `store` is open under AccessShareLock (table_open above); `rel` is the open time-series table that
    // record_size's contract asks for.
    unsafe {
        let pages = pg_sys::RelationGetNumberOfBlocksInFork(store, pg_sys::ForkNumber::MAIN_FORKNUM);
        record_size(rel, pages, total_rows);
    }
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ u64::from(u32::from(relid)));
    let chosen = choose(&mut rng, buckets, MAX_SAMPLED_BUCKETS);
    // SAFETY: default_statistics_target is an int GUC of this backend; only SET changes it, never during this call.
    let target_rows = 300 * unsafe { pg_sys::default_statistics_target }.max(1) as usize;
    let per_bucket = target_rows.div_ceil(chosen.len().max(1));
    // SAFETY: `sample_oid` is the sample table of this function's contract, locked RowExclusive here until the
    // transaction ends; the virtual slots take `rel`'s and `sample`'s descriptors, which stay valid while both are open.
    let (sample, src, dst) = unsafe {
        let sample = pg_sys::table_open(sample_oid, pg_sys::RowExclusiveLock as i32);
        let src = pg_sys::MakeSingleTupleTableSlot((*rel).rd_att, &pg_sys::TTSOpsVirtual);
        let dst = pg_sys::MakeSingleTupleTableSlot((*sample).rd_att, &pg_sys::TTSOpsVirtual);
        (sample, src, dst)
    };
    let (mut index, mut next, mut rows) = (0usize, 0usize, 0usize);
    while next < chosen.len() {
        let Some(tuple) = scan.next(true) else { break };
        index += 1;
        if index - 1 != chosen[next] {
            continue;
        }
        next += 1;
        // SAFETY: `tuple` is the chosen bucket's tuple, just returned by `scan` over `store`; its payload is detoasted
        // into `cxt`, which stays current until the switch back to `old` after the rows are copied.
        let (old, stored) = unsafe {
            let old = pg_sys::MemoryContextSwitchTo(cxt);
            (old, tuple::read_bucket(store, tuple))
        };
        let bucket = rows::load(config, &shape, &stored);
        for row in choose(&mut rng, bucket.rows, per_bucket) {
            // SAFETY: `src` is the virtual slot of `rel`'s descriptor made above, and `shape` was built from that same
            // descriptor; `row` < bucket.rows, as choose() returns; `dst` is `sample`'s slot, cleared before refilling.
            unsafe {
                rows::fill_slot(rel, &shape, &bucket, None, row, src);
                pg_sys::ExecClearTuple(dst);
            }
            for (j, (attnum, _)) in columns.iter().enumerate() {
                let from = *attnum as usize - 1;
                // SAFETY: `dst` has one entry per column of `sample` (j < columns.len() of them) and `src` one per
                // attribute of `rel` (attnum is one of them, from pg_attribute); both slots live until dropped below.
                unsafe {
                    *(*dst).tts_values.add(j) = *(*src).tts_values.add(from);
                    *(*dst).tts_isnull.add(j) = *(*src).tts_isnull.add(from);
                }
            }
            // SAFETY: `dst` now holds a full row of `sample`'s columns; `sample` is open RowExclusive since table_open
            // above, so simple_table_tuple_insert may add the row to it.
            unsafe {
                pg_sys::ExecStoreVirtualTuple(dst);
                pg_sys::simple_table_tuple_insert(sample, dst);
            }
            rows += 1;
        }
        // SAFETY: `old` is the context that was current before the switch to `cxt` for this bucket; the reset frees
        // this bucket's detoasted payload, and `stored` and `bucket` are not read after it.
        unsafe {
            pg_sys::MemoryContextSwitchTo(old);
            pg_sys::MemoryContextReset(cxt);
        }
    }
    scan.end();
    // SAFETY: `src`, `dst`, `cxt` and the relations `sample`, `store` and `rel` were made or opened above, are no
    // longer used, and are released exactly once here; NoLock keeps the locks until the transaction ends.
    unsafe {
        pg_sys::ExecDropSingleTupleTableSlot(src);
        pg_sys::ExecDropSingleTupleTableSlot(dst);
        pg_sys::MemoryContextDelete(cxt);
        pg_sys::table_close(sample, pg_sys::NoLock as i32);
        pg_sys::table_close(store, pg_sys::NoLock as i32);
        pg_sys::table_close(rel, pg_sys::NoLock as i32);
    }
    (rows, chosen.len())
}

/// Records the table's row count against the store's page count in its
/// pg_class row (relpages, reltuples), in place, as ANALYZE does for a heap.
///
/// # Safety
/// `rel` is open (and locked) by the caller.
unsafe fn record_size(rel: pg_sys::Relation, store_pages: pg_sys::BlockNumber, rows: f64) {
    let (mut frozen, mut multi) = (false, false);
    // SAFETY: `rel` is open and locked by the caller, as this function's contract requires; vac_update_relstats
    // writes its pg_class row in place and only writes back through `frozen` and `multi`, locals of this frame.
    unsafe {
        #[cfg(feature = "pg15")]
        pg_sys::vac_update_relstats(rel, store_pages, rows, 0, false, pg_sys::InvalidTransactionId, pg_sys::TransactionId::from(0u32) /* InvalidMultiXactId */, &mut frozen, &mut multi, true);
        #[cfg(not(feature = "pg15"))]
        pg_sys::vac_update_relstats(rel, store_pages, rows, 0, 0, false, pg_sys::InvalidTransactionId, pg_sys::TransactionId::from(0u32) /* InvalidMultiXactId */, &mut frozen, &mut multi, true);
    }
}

/// Replaces `to`'s statistics by `from`'s, column j + 1 of `from` being
/// `columns[j]` of `to`.
///
/// # Safety
/// In a transaction; both relations exist.
unsafe fn copy_statistics(from: pg_sys::Oid, to: pg_sys::Oid, columns: &[(i16, String)]) {
    // SAFETY: `to` exists (this function's contract); pg_statistic is opened RowExclusive until the table_close
    // below, so `statrel` and its descriptor `tupdesc` stay valid for the whole loop.
    let (statrel, tupdesc, natts) = unsafe {
        pg_sys::RemoveStatistics(to, 0);
        let statrel = pg_sys::table_open(pg_sys::StatisticRelationId, pg_sys::RowExclusiveLock as i32);
        let tupdesc = (*statrel).rd_att;
        (statrel, tupdesc, (*tupdesc).natts as usize)
    };
    for (j, (attnum, _)) in columns.iter().enumerate() {
        // SAFETY: STATRELATTINH is keyed by (starelid oid, staattnum int2, stainherit bool), the three datums given;
        // a hit stays pinned until the ReleaseSysCache below.
        let tuple = unsafe {
            pg_sys::SearchSysCache3(
                pg_sys::SysCacheIdentifier::STATRELATTINH as i32,
                pg_sys::Datum::from(from),
                pg_sys::Datum::from((j + 1) as i16),
                pg_sys::Datum::from(false),
            )
        };
        if tuple.is_null() {
            continue;
        }
        let mut values = vec![pg_sys::Datum::from(0); natts];
        let mut nulls = vec![false; natts];
        let mut replace = vec![false; natts];
        // pg_statistic's first two columns: starelid, staattnum.
        values[0] = pg_sys::Datum::from(to);
        values[1] = pg_sys::Datum::from(*attnum);
        replace[0] = true;
        replace[1] = true;
        // SAFETY: `tuple` is the pinned syscache copy of `from`'s row; values, nulls and replace hold `natts` entries,
        // as `tupdesc` (pg_statistic's) has; `statrel` is open RowExclusive for CatalogTupleInsert.
        unsafe {
            let copy = pg_sys::heap_modify_tuple(tuple, tupdesc, values.as_mut_ptr(), nulls.as_mut_ptr(), replace.as_mut_ptr());
            pg_sys::CatalogTupleInsert(statrel, copy);
            pg_sys::ReleaseSysCache(tuple);
        }
    }
    // SAFETY: `statrel` was opened above with RowExclusiveLock and is closed once, with that lock; the command counter
    // increment makes the new pg_statistic rows visible to this transaction.
    unsafe {
        pg_sys::table_close(statrel, pg_sys::RowExclusiveLock as i32);
        pg_sys::CommandCounterIncrement();
    }
}
