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
use crate::store::rows as read;
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
    // SAFETY: role ids from the catalog and the backend.
    let (user, superuser) = unsafe { (pg_sys::GetUserId(), pg_sys::superuser()) };
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
    // SAFETY: the table is a configured tsbucket table; the sample table was just made with its columns.
    let (rows, buckets) = unsafe { fill_sample(relid, &config, sample_oid, &columns) };
    run(&format!("ANALYZE {sample}"));
    // SAFETY: both relations exist; the sample's column j + 1 is columns[j].
    unsafe { copy_statistics(sample_oid, relid, &columns) };
    run(&format!("DROP TABLE {sample}"));
    debug1!("tsbucket: analyzed {}: {rows} sample rows from {buckets} buckets", crate::pg::relation::relation_name(relid));
}

/// Copies a sample of the table's rows into the sample table: buckets chosen
/// at random over the whole store, an equal share of random rows from each.
unsafe fn fill_sample(relid: pg_sys::Oid, config: &config::Config, sample_oid: pg_sys::Oid, columns: &[(i16, String)]) -> (usize, usize) {
    unsafe {
        let rel = pg_sys::table_open(relid, pg_sys::AccessShareLock as i32);
        let shape = TableShape::new((*rel).rd_att, config);
        let store = pg_sys::table_open(config.store_relid, pg_sys::AccessShareLock as i32);
        let snapshot = reader::current_snapshot();
        let mut scan = reader::StoreScan::begin(store, snapshot);
        let (mut buckets, mut total_rows) = (0usize, 0f64);
        let cxt = pg_sys::AllocSetContextCreateInternal(pg_sys::CurrentMemoryContext, c"tsbucket analyze".as_ptr(), 0, 8 * 1024, 8 * 1024 * 1024);
        while let Some(tuple) = scan.next(true) {
            buckets += 1;
            let old = pg_sys::MemoryContextSwitchTo(cxt);
            total_rows += tuple::read_header(store, tuple).rows as f64;
            pg_sys::MemoryContextSwitchTo(old);
            pg_sys::MemoryContextReset(cxt);
        }
        scan.rescan();
        // The table's size for the planner, as ANALYZE records a heap table's:
        // its rows now, against the store's pages now (the estimate scales by
        // the store's pages later on; see relation_estimate_size).
        let pages = pg_sys::RelationGetNumberOfBlocksInFork(store, pg_sys::ForkNumber::MAIN_FORKNUM);
        record_size(rel, pages, total_rows);
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ u64::from(u32::from(relid)));
        let chosen = choose(&mut rng, buckets, MAX_SAMPLED_BUCKETS);
        let target_rows = 300 * pg_sys::default_statistics_target.max(1) as usize;
        let per_bucket = target_rows.div_ceil(chosen.len().max(1));
        let sample = pg_sys::table_open(sample_oid, pg_sys::RowExclusiveLock as i32);
        let src = pg_sys::MakeSingleTupleTableSlot((*rel).rd_att, &pg_sys::TTSOpsVirtual);
        let dst = pg_sys::MakeSingleTupleTableSlot((*sample).rd_att, &pg_sys::TTSOpsVirtual);
        let (mut index, mut next, mut rows) = (0usize, 0usize, 0usize);
        while next < chosen.len() {
            let Some(tuple) = scan.next(true) else { break };
            index += 1;
            if index - 1 != chosen[next] {
                continue;
            }
            next += 1;
            let old = pg_sys::MemoryContextSwitchTo(cxt);
            let stored = tuple::read_bucket(store, tuple);
            let bucket = read::load(config, &shape, &stored);
            for row in choose(&mut rng, bucket.rows, per_bucket) {
                read::fill_slot(rel, &shape, &bucket, None, row, src);
                pg_sys::ExecClearTuple(dst);
                for (j, (attnum, _)) in columns.iter().enumerate() {
                    *(*dst).tts_values.add(j) = *(*src).tts_values.add(*attnum as usize - 1);
                    *(*dst).tts_isnull.add(j) = *(*src).tts_isnull.add(*attnum as usize - 1);
                }
                pg_sys::ExecStoreVirtualTuple(dst);
                pg_sys::simple_table_tuple_insert(sample, dst);
                rows += 1;
            }
            pg_sys::MemoryContextSwitchTo(old);
            pg_sys::MemoryContextReset(cxt);
        }
        scan.end();
        pg_sys::ExecDropSingleTupleTableSlot(src);
        pg_sys::ExecDropSingleTupleTableSlot(dst);
        pg_sys::MemoryContextDelete(cxt);
        pg_sys::table_close(sample, pg_sys::NoLock as i32);
        pg_sys::table_close(store, pg_sys::NoLock as i32);
        pg_sys::table_close(rel, pg_sys::NoLock as i32);
        (rows, chosen.len())
    }
}

/// Records the table's row count against the store's page count in its
/// pg_class row (relpages, reltuples), in place, as ANALYZE does for a heap.
unsafe fn record_size(rel: pg_sys::Relation, store_pages: pg_sys::BlockNumber, rows: f64) {
    unsafe {
        let (mut frozen, mut multi) = (false, false);
        #[cfg(feature = "pg15")]
        pg_sys::vac_update_relstats(rel, store_pages, rows, 0, false, pg_sys::InvalidTransactionId, pg_sys::TransactionId::from(0u32) /* InvalidMultiXactId */, &mut frozen, &mut multi, true);
        #[cfg(not(feature = "pg15"))]
        pg_sys::vac_update_relstats(rel, store_pages, rows, 0, 0, false, pg_sys::InvalidTransactionId, pg_sys::TransactionId::from(0u32) /* InvalidMultiXactId */, &mut frozen, &mut multi, true);
    }
}

/// Replaces `to`'s statistics by `from`'s, column j + 1 of `from` being
/// `columns[j]` of `to`.
unsafe fn copy_statistics(from: pg_sys::Oid, to: pg_sys::Oid, columns: &[(i16, String)]) {
    unsafe {
        pg_sys::RemoveStatistics(to, 0);
        let statrel = pg_sys::table_open(pg_sys::StatisticRelationId, pg_sys::RowExclusiveLock as i32);
        let tupdesc = (*statrel).rd_att;
        let natts = (*tupdesc).natts as usize;
        for (j, (attnum, _)) in columns.iter().enumerate() {
            let tuple = pg_sys::SearchSysCache3(
                pg_sys::SysCacheIdentifier::STATRELATTINH as i32,
                pg_sys::Datum::from(from),
                pg_sys::Datum::from((j + 1) as i16),
                pg_sys::Datum::from(false),
            );
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
            let copy = pg_sys::heap_modify_tuple(tuple, tupdesc, values.as_mut_ptr(), nulls.as_mut_ptr(), replace.as_mut_ptr());
            pg_sys::CatalogTupleInsert(statrel, copy);
            pg_sys::ReleaseSysCache(tuple);
        }
        pg_sys::table_close(statrel, pg_sys::RowExclusiveLock as i32);
        pg_sys::CommandCounterIncrement();
    }
}
