//! Settings a DBA can tune; README's "GUCs" section documents each.

use pgrx::guc::{GucContext, GucFlags, GucRegistry, GucSetting};

/// Rows per bucket. Capped below 2047 so that a row's offset fits the 11 bits
/// GIN and other index AMs assume of an ItemPointer offset.
pub(super) static BUCKET_MAX_COUNT: GucSetting<i32> = GucSetting::<i32>::new(1000);
pub const BUCKET_MAX_COUNT_CAP: i32 = 2000;
pub(super) static BUCKET_MAX_SIZE: GucSetting<i32> = GucSetting::<i32>::new(125 * 1024);
/// kB of buffered, not yet written rows per backend.
pub(super) static CATALOG_MEMORY_LIMIT: GucSetting<i32> = GucSetting::<i32>::new(256 * 1024);

/// Buckets a transaction leaves with fewer rows go to the table's tail, row by row.
pub(super) static TAIL_BUCKET_ROWS: GucSetting<i32> = GucSetting::<i32>::new(16);
/// Tail rows written in a database since the worker's last drain that make
/// the launcher start a worker at once.
pub static TAIL_DRAIN_ROWS: GucSetting<i32> = GucSetting::<i32>::new(20_000);

/// Seconds between background runs of expiry and compaction.
pub static WORKER_INTERVAL: GucSetting<i32> = GucSetting::<i32>::new(60);
pub static WORKER_ENABLED: GucSetting<bool> = GucSetting::<bool>::new(true);
/// Background workers running at once (besides the launcher).
pub static MAX_WORKERS: GucSetting<i32> = GucSetting::<i32>::new(2);

/// Whether aggregates over tsbucket tables are computed inside the scan
/// (`rewrite::partial_agg`); off gives Postgres's row-by-row plan, for comparison.
pub static VECTORIZED_AGGREGATION: GucSetting<bool> = GucSetting::<bool>::new(true);

/// A bug planted for the randomized differential fuzzer to find (tests/fuzz):
/// 1 reads an inclusive upper time bound as exclusive when pruning buckets.
/// Debug builds only (tests run them); release builds have no such setting.
#[cfg(debug_assertions)]
pub(super) static DEBUG_PLANT_BUG: GucSetting<i32> = GucSetting::<i32>::new(0);

/// The planted bug in force (0: none; always 0 in release builds).
pub fn planted_bug() -> i32 {
    #[cfg(debug_assertions)]
    {
        DEBUG_PLANT_BUG.get()
    }
    #[cfg(not(debug_assertions))]
    {
        0
    }
}

pub fn init() {
    #[cfg(debug_assertions)]
    GucRegistry::define_int_guc(
        c"tsbucket.debug_plant_bug",
        c"Plants a known bug, for the fuzzer's self-test (debug builds only).",
        c"0 = none; 1 = an off-by-one in the time-pruning bound. Never set it on data you care about.",
        &DEBUG_PLANT_BUG,
        0,
        1,
        GucContext::Suset,
        GucFlags::NO_SHOW_ALL,
    );
    GucRegistry::define_bool_guc(
        c"tsbucket.vectorized_aggregation",
        c"Whether aggregates over tsbucket tables are computed inside the scan, bucket by bucket.",
        c"Off plans every aggregate row by row, as over a heap table; answers are the same.",
        &VECTORIZED_AGGREGATION,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"tsbucket.worker_interval",
        c"Time between runs of the background expiry and compaction.",
        c"Needs shared_preload_libraries = 'tsbucket'.",
        &WORKER_INTERVAL,
        1,
        86_400,
        GucContext::Sighup,
        GucFlags::UNIT_S,
    );
    GucRegistry::define_int_guc(
        c"tsbucket.max_workers",
        c"Background workers that expire and compact at once, one database each.",
        c"Each takes one of max_worker_processes, besides the launcher; databases wait their turn.",
        &MAX_WORKERS,
        1,
        64,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"tsbucket.worker_enabled",
        c"Whether the background worker expires and compacts buckets.",
        c"Needs shared_preload_libraries = 'tsbucket'; tsbucket.expire() and tsbucket.compact() work either way.",
        &WORKER_ENABLED,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"tsbucket.bucket_max_count",
        c"Maximum number of rows in one bucket.",
        c"A bucket closes when it holds this many rows (MongoDB: timeseriesBucketMaxCount).",
        &BUCKET_MAX_COUNT,
        1,
        BUCKET_MAX_COUNT_CAP,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"tsbucket.bucket_max_size",
        c"Maximum uncompressed size of the measurements in one bucket.",
        c"A bucket closes when its rows' values reach this size; a single larger row gets a bucket of its own (MongoDB: timeseriesBucketMaxSize).",
        &BUCKET_MAX_SIZE,
        1024,
        64 * 1024 * 1024,
        GucContext::Userset,
        GucFlags::UNIT_BYTE,
    );
    GucRegistry::define_int_guc(
        c"tsbucket.tail_bucket_rows",
        c"Buckets a transaction leaves with fewer rows than this go to the table's tail, row by row.",
        c"The worker drains the tail into full buckets; 0 writes every bucket as it is (one-row buckets from single-row INSERTs).",
        &TAIL_BUCKET_ROWS,
        0,
        BUCKET_MAX_COUNT_CAP,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"tsbucket.tail_drain_rows",
        c"Rows written to tails in a database that start a drain at once, before the worker's next interval.",
        c"Needs shared_preload_libraries = 'tsbucket'. Bounds how many rows wait in tails (and their bytes) at a steady ingest rate.",
        &TAIL_DRAIN_ROWS,
        100,
        100_000_000,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"tsbucket.catalog_memory_limit",
        c"Memory one backend may use for buffered rows of open buckets.",
        c"When reached, the fullest open buckets are written out early (close reason memory_limit).",
        &CATALOG_MEMORY_LIMIT,
        64,
        16 * 1024 * 1024,
        GucContext::Userset,
        GucFlags::UNIT_KB,
    );
}

pub fn bucket_max_count() -> usize {
    BUCKET_MAX_COUNT.get().clamp(1, BUCKET_MAX_COUNT_CAP) as usize
}

pub fn bucket_max_size() -> usize {
    BUCKET_MAX_SIZE.get() as usize
}

pub fn tail_bucket_rows() -> usize {
    TAIL_BUCKET_ROWS.get().max(0) as usize
}

pub fn catalog_memory_limit_bytes() -> usize {
    CATALOG_MEMORY_LIMIT.get() as usize * 1024
}
