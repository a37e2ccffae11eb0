//! SQL functions that look at a table's buckets: verify, buckets, stats.

use crate::catalog::config;
use crate::store::bucket;
use crate::store::reader;
use crate::store::tuple;
use pgrx::pg_sys;
use pgrx::prelude::*;
use tsbucket_format::{BucketReader, Values};
use tsbucket_format::stats::{column_stats, decode_field_stats, decode_stats, field_stats};

/// Decodes every bucket and reports what is inconsistent.
#[pg_extern]
fn _verify(relid: pg_sys::Oid) -> TableIterator<'static, (name!(bucket_id, i64), name!(problem, String))> {
    // SAFETY: verify_table's contract: this SQL function runs inside the caller's transaction and statement.
    let problems = unsafe { verify_table(relid) };
    TableIterator::new(problems)
}

/// # Safety
/// In a transaction, with an active or transaction snapshot.
unsafe fn verify_table(relid: pg_sys::Oid) -> Vec<(i64, String)> {
    let config = config::require(relid);
    crate::catalog::privileges::require_select(relid);
    // SAFETY: `config.store_relid` is the store of configured table `relid`, opened under AccessShareLock until the
    // table_close below; the scan runs with the statement's snapshot, alive for this call, as this function requires.
    let (store_rel, mut scan) = unsafe {
        let store_rel = pg_sys::table_open(config.store_relid, pg_sys::AccessShareLock as i32);
        (store_rel, reader::StoreScan::begin(store_rel, reader::current_snapshot()))
    };
    // Each bucket's detoasted payload lives only while it is checked: constant memory.
    // SAFETY: CurrentMemoryContext is the SQL function's call context; "tsbucket verify" is its child, deleted below.
    let cxt = unsafe {
        pg_sys::AllocSetContextCreateInternal(pg_sys::CurrentMemoryContext, c"tsbucket verify".as_ptr(), 0, 8 * 1024, 8 * 1024 * 1024)
    };
    let mut problems = Vec::new();
    while let Some(tuple) = scan.next(true) {
        // SAFETY: `tuple` is the store row `scan` just returned, valid until its next call; `cxt` (alive until its
        // deletion after the loop) is current while the bucket is read and checked.
        let (old, b) = unsafe {
            let old = pg_sys::MemoryContextSwitchTo(cxt);
            (old, tuple::read_bucket(store_rel, tuple))
        };
        for p in check_bucket(&config, &b) {
            problems.push((b.bucket_id, p));
        }
        // SAFETY: `old` is the context current before the switch above; the reset frees this bucket's detoasted payload,
        // which `b` no longer reads (the problems found are Rust Strings).
        unsafe {
            pg_sys::MemoryContextSwitchTo(old);
            pg_sys::MemoryContextReset(cxt);
        }
    }
    // SAFETY: "tsbucket verify" (`cxt`) is no longer current (switched back above) and is deleted once, after its last reset.
    unsafe { pg_sys::MemoryContextDelete(cxt) };
    scan.end();
    // SAFETY: `store_rel` was opened at the top of verify_table and its scan has just ended; closed once, NoLock keeping
    // its AccessShareLock until the transaction ends.
    unsafe { pg_sys::table_close(store_rel, pg_sys::NoLock as i32) };
    problems
}

fn check_bucket(config: &config::Config, b: &bucket::StoredBucket) -> Vec<String> {
    let mut out = Vec::new();
    let reader = match BucketReader::parse(b.payload()) {
        Ok(r) => r,
        Err(e) => return vec![format!("payload does not decode: {e}")],
    };
    if reader.rows() != b.rows as usize {
        out.push(format!("row_count is {} but the payload holds {} rows", b.rows, reader.rows()));
    }
    if b.rows <= 0 {
        out.push("bucket holds no rows".into());
    }
    if b.rows as usize > crate::catalog::gucs::BUCKET_MAX_COUNT_CAP as usize {
        out.push(format!("bucket holds {} rows, over the limit of {}", b.rows, crate::catalog::gucs::BUCKET_MAX_COUNT_CAP));
    }
    let mut decoded = Vec::new();
    for col in reader.columns() {
        match col.decode() {
            Ok(c) => decoded.push(c),
            Err(e) => out.push(format!("column {} does not decode: {e}", col.attnum)),
        }
    }
    let window_end = b.window_start.saturating_add(config.span_micros);
    match decoded.iter().find(|c| c.attnum as i16 == config.time_attnum) {
        None => out.push("payload has no time column".into()),
        Some(time) => {
            if let Values::Int(ts) = &time.values {
                if let (Some(min), Some(max)) = (ts.iter().min(), ts.iter().max()) {
                    if *min != b.min_time || *max != b.max_time {
                        out.push(format!("min/max time ({}, {}) differ from the rows' ({min}, {max})", b.min_time, b.max_time));
                    }
                }
                let outside = ts.iter().filter(|&&t| t < b.window_start || t >= window_end).count();
                if outside > 0 {
                    out.push(format!("{outside} rows lie outside the bucket's window"));
                }
            }
            if time.validity.is_some() {
                out.push("time column holds NULLs".into());
            }
        }
    }
    match decode_stats(b.stats()) {
        Err(e) => out.push(format!("column statistics do not decode: {e}")),
        Ok(stats) => {
            for s in stats {
                let fresh = decoded.iter().find(|c| c.attnum == s.attnum).and_then(column_stats);
                if !fresh.as_ref().is_some_and(|f| s.describes(f)) {
                    out.push(format!("statistics of column {} do not match its values", s.attnum));
                }
            }
        }
    }
    match decode_field_stats(b.stats()) {
        Err(e) => out.push(format!("document field statistics do not decode: {e}")),
        Ok(stored) => {
            // Each column's fields computed once.
            let mut fresh_of: Vec<(u16, Vec<tsbucket_format::stats::FieldStats>)> = Vec::new();
            for f in stored {
                if !fresh_of.iter().any(|(a, _)| *a == f.stats.attnum) {
                    let all = reader.column(f.stats.attnum).ok().flatten().and_then(|c| field_stats(c).ok()).unwrap_or_default();
                    fresh_of.push((f.stats.attnum, all));
                }
                let all = &fresh_of.iter().find(|(a, _)| *a == f.stats.attnum).expect("computed above").1;
                let fresh = all.iter().find(|x| x.key == f.key);
                if !fresh.as_ref().is_some_and(|x| f.stats.describes(&x.stats)) {
                    let key = String::from_utf8_lossy(&f.key);
                    out.push(format!("statistics of field \"{key}\" of column {} do not match its values", f.stats.attnum));
                }
            }
        }
    }
    out
}

/// One row per bucket for `tsbucket.buckets`. Runs as the caller (the SQL
/// wrapper is SECURITY INVOKER): it checks the caller's SELECT right itself
/// and reads the store directly, and the meta columns' output and comparison
/// functions run with the caller's rights.
#[pg_extern]
#[allow(clippy::type_complexity)]
fn _buckets(
    relid: pg_sys::Oid,
) -> TableIterator<
    'static,
    (
        name!(bucket_id, i64),
        name!(meta, Option<String>),
        name!(window_start, String),
        name!(min_time, String),
        name!(max_time, String),
        name!(rows, i32),
        name!(compressed_bytes, i32),
        name!(close_reason, String),
    ),
> {
    let config = config::require(relid);
    crate::catalog::privileges::require_select_without_rls(relid);
    const REASONS: [&str; 7] = ["count", "size", "time_window", "memory_limit", "end_of_statement", "rewrite", "compaction"];
    let mut rows = Vec::new();
    // SAFETY: `config.store_relid` is the store of configured table `relid`, opened AccessShareLock until the table_close
    // below; MetaTypes::of_store reads its `config.meta_attnums.len()` meta columns' types from its descriptor.
    let (store_rel, mut types) = unsafe {
        let store_rel = pg_sys::table_open(config.store_relid, pg_sys::AccessShareLock as i32);
        (store_rel, crate::store::meta_values::MetaTypes::of_store(store_rel, config.meta_attnums.len()))
    };
    // SAFETY: `store_rel` is open, so its rd_att is valid and holds the store's window_start column at COL_WINDOW_START.
    let time_type = unsafe { (*crate::pg::relation::tuple_desc_attr((*store_rel).rd_att, bucket::COL_WINDOW_START)).atttypid };
    let (mut out_fn, mut varlena) = (pg_sys::InvalidOid, false);
    let mut time_out = pg_sys::FmgrInfo::default();
    // SAFETY: `time_type` is the window_start column's type; getTypeOutputInfo writes its output function into the two
    // locals, and fmgr_info fills `time_out`, a local that outlives every call through it.
    unsafe {
        pg_sys::getTypeOutputInfo(time_type, &mut out_fn, &mut varlena);
        pg_sys::fmgr_info(out_fn, &mut time_out);
    }
    let mut time_text = |t: i64| {
        // SAFETY: `time_out` is the output function of the store's time type, set up above, and `t` a datum of that
        // type; OutputFunctionCall returns a palloc'd NUL-terminated string, copied into a String at once.
        let text = unsafe { std::ffi::CStr::from_ptr(pg_sys::OutputFunctionCall(&mut time_out, pg_sys::Datum::from(t))) };
        text.to_string_lossy().into_owned()
    };
    // SAFETY: `store_rel` stays open until after scan.end(); the statement's snapshot stays active for this whole call.
    let mut scan = unsafe { reader::StoreScan::begin(store_rel, reader::current_snapshot()) };
    while let Some(tuple) = scan.next(true) {
        // SAFETY: `tuple` is the row the listing scan just returned, valid until its next call; the meta datums are
        // copied (copy_datums) before the scan moves on.
        let b = unsafe { tuple::read_header(store_rel, tuple) };
        let meta = types.copy_datums(&b);
        let reason = REASONS.get((b.close_reason() - 1) as usize).copied().unwrap_or("unknown");
        let size = b.stored_payload_bytes() as i32;
        rows.push((meta, b.bucket_id, b.window_start, time_text(b.window_start), time_text(b.min_time), time_text(b.max_time), b.rows, size, reason));
    }
    scan.end();
    // SAFETY: `store_rel`, opened for the listing above, is closed once after its scan ended; NoLock keeps the lock.
    unsafe { pg_sys::table_close(store_rel, pg_sys::NoLock as i32) };
    rows.sort_by(|a, b| types.compare(&a.0, &b.0).then(a.2.cmp(&b.2)).then(a.1.cmp(&b.1)));
    let out: Vec<_> = rows
        .into_iter()
        .map(|(meta, id, _, ws, min, max, n, size, reason)| (id, types.text(&meta), ws, min, max, n, size, reason.to_string()))
        .collect();
    TableIterator::new(out)
}

/// Totals over the bucket headers for `tsbucket.stats`: buckets, rows, stored
/// and uncompressed bytes, and buckets by close reason (1..=7). Runs as the
/// caller: SELECT on the table is required, and refused where row-level
/// security applies (the counts would describe hidden rows).
#[pg_extern]
#[allow(clippy::type_complexity)]
fn _store_totals(
    relid: pg_sys::Oid,
) -> TableIterator<
    'static,
    (name!(buckets, i64), name!(rows, i64), name!(compressed_bytes, i64), name!(uncompressed_bytes, i64), name!(by_reason, Vec<i64>)),
> {
    let config = config::require(relid);
    crate::catalog::privileges::require_select_without_rls(relid);
    let (mut buckets, mut rows, mut compressed, mut uncompressed) = (0i64, 0i64, 0i64, 0i64);
    let mut by_reason = vec![0i64; 7];
    // SAFETY: `config.store_relid` is the store of configured table `relid`, opened AccessShareLock until the table_close
    // below; the scan uses the statement's snapshot, active for this whole call.
    let (store_rel, mut scan) = unsafe {
        let store_rel = pg_sys::table_open(config.store_relid, pg_sys::AccessShareLock as i32);
        (store_rel, reader::StoreScan::begin(store_rel, reader::current_snapshot()))
    };
    while let Some(tuple) = scan.next(true) {
        // SAFETY: `tuple` is the row the totals scan just returned, valid until its next call.
        let b = unsafe { tuple::read_header(store_rel, tuple) };
        buckets += 1;
        rows += i64::from(b.rows);
        compressed += b.stored_payload_bytes();
        if !b.nulls[bucket::COL_STATS] {
            // SAFETY: COL_STATS of header `b` is a bytea datum, not NULL (checked just above), valid while `tuple` is.
            compressed += unsafe { pg_sys::toast_datum_size(b.values[bucket::COL_STATS]) } as i64;
        }
        uncompressed += b.values[bucket::COL_UNCOMPRESSED_BYTES].value() as i64;
        if let Some(n) = by_reason.get_mut((b.close_reason() - 1) as usize) {
            *n += 1;
        }
    }
    scan.end();
    // SAFETY: `store_rel` was opened for the totals above and its scan has ended; closed once, NoLock keeping the lock.
    unsafe { pg_sys::table_close(store_rel, pg_sys::NoLock as i32) };
    TableIterator::once((buckets, rows, compressed, uncompressed, by_reason))
}

/// Rows of the table's tail (not yet in buckets) the statement's snapshot
/// sees, for `tsbucket.stats`. Runs as the caller, with the same checks as
/// `_store_totals`.
#[pg_extern]
fn _tail_rows(relid: pg_sys::Oid) -> i64 {
    let config = config::require(relid);
    crate::catalog::privileges::require_select_without_rls(relid);
    // SAFETY: the configured table `relid` is locked AccessShare (as a SELECT locks it, kept to the transaction's end)
    // while its tail is read with the statement's snapshot.
    unsafe {
        pg_sys::LockRelationOid(relid, pg_sys::AccessShareLock as i32);
        crate::store::tail::row_count(&config, reader::current_snapshot()) as i64
    }
}
