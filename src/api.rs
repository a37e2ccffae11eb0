//! SQL functions implemented in Rust. The user-facing ones are wrapped in
//! sql/catalog_functions.sql, which gives them their documented signatures.

use crate::catalog;
use crate::store;
use pgrx::pg_sys;
use pgrx::prelude::*;
use tsbucket_format::stats::{column_stats, decode_stats};
use tsbucket_format::{BucketReader, Values};

/// Tells every backend to re-read the table's configuration.
#[pg_extern]
fn _invalidate(relid: pg_sys::Oid) {
    unsafe { pg_sys::CacheInvalidateRelcacheByRelid(relid) };
    catalog::invalidate(relid);
}

/// Decodes every bucket and reports what is inconsistent.
#[pg_extern]
fn _verify(relid: pg_sys::Oid) -> TableIterator<'static, (name!(bucket_id, i64), name!(problem, String))> {
    let problems = unsafe { verify_table(relid) };
    TableIterator::new(problems)
}

unsafe fn verify_table(relid: pg_sys::Oid) -> Vec<(i64, String)> {
    unsafe {
        let config = catalog::require(relid);
        let store_rel = pg_sys::table_open(config.store_relid, pg_sys::AccessShareLock as i32);
        let mut scan = store::StoreScan::begin(store_rel, store::current_snapshot());
        // Each bucket's detoasted payload lives only while it is checked: constant memory.
        let cxt = pg_sys::AllocSetContextCreateInternal(pg_sys::CurrentMemoryContext, c"tsbucket verify".as_ptr(), 0, 8 * 1024, 8 * 1024 * 1024);
        let mut problems = Vec::new();
        while let Some(tuple) = scan.next(true) {
            let old = pg_sys::MemoryContextSwitchTo(cxt);
            let b = store::read_bucket(store_rel, tuple);
            for p in check_bucket(&config, &b) {
                problems.push((b.bucket_id, p));
            }
            pg_sys::MemoryContextSwitchTo(old);
            pg_sys::MemoryContextReset(cxt);
        }
        pg_sys::MemoryContextDelete(cxt);
        scan.end();
        pg_sys::table_close(store_rel, pg_sys::NoLock as i32);
        problems
    }
}

fn check_bucket(config: &catalog::Config, b: &store::StoredBucket) -> Vec<String> {
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
    if b.rows as usize > crate::gucs::BUCKET_MAX_COUNT_CAP as usize {
        out.push(format!("bucket holds {} rows, over the limit of {}", b.rows, crate::gucs::BUCKET_MAX_COUNT_CAP));
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
                if !fresh.as_ref().is_some_and(|f| f.matches(&s)) {
                    out.push(format!("statistics of column {} do not match its values", s.attnum));
                }
            }
        }
    }
    out
}
