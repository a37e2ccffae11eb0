//! SQL functions behind the catalog functions (sql/catalog_functions.sql):
//! configuration writes, invalidation, labels, per-series retention.

use crate::catalog::config;
use pgrx::pg_sys;
use pgrx::prelude::*;

/// Tells every backend to re-read the table's configuration.
#[pg_extern]
fn _invalidate(relid: pg_sys::Oid) {
    // Callable by PUBLIC (the catalog functions call it as their caller): owners only.
    crate::catalog::privileges::require_owner(relid);
    // SAFETY: CacheInvalidateRelcacheByRelid queues an invalidation of `relid`, which require_owner just found in
    // pg_class; it errors out cleanly if the relation vanished, and is sent when this transaction commits.
    unsafe { pg_sys::CacheInvalidateRelcacheByRelid(relid) };
    config::invalidate(relid);
}

/// Writes (or with `remove`, deletes) a per-series retention override. The
/// caller must own the table; `meta` is the text the SQL wrapper made with
/// the caller's rights.
#[pg_extern]
fn _write_series_retention(relid: pg_sys::Oid, meta: &str, expire_after: Option<pgrx::datum::Interval>, remove: bool) {
    crate::catalog::privileges::require_owner(relid);
    config::as_extension_owner(|| {
        if remove {
            Spi::run_with_args("DELETE FROM tsbucket.series_retention_data WHERE relid = $1 AND meta = $2", &[relid.into(), meta.into()])
        } else {
            Spi::run_with_args(
                "INSERT INTO tsbucket.series_retention_data VALUES ($1, $2, $3)
                 ON CONFLICT (relid, meta) DO UPDATE SET expire_after = EXCLUDED.expire_after",
                &[relid.into(), meta.into(), expire_after.into()],
            )
        }
        .expect("write series retention")
    });
}

/// Checks that the caller owns the table (for the SQL wrappers, which check
/// ownership before validating their other arguments).
#[pg_extern]
fn _require_owner(relid: pg_sys::Oid) {
    crate::catalog::privileges::require_owner(relid);
}

/// create_timeseries' last step: the calling role must own the table; then
/// tsbucket._create_store makes the store and the catalog row as the
/// extension owner (built-in SQL only).
#[pg_extern]
fn _create_store_for(
    relid: pg_sys::Oid,
    time_attnum: i16,
    meta_attnums: Vec<i16>,
    granularity: Option<&str>,
    span: pgrx::datum::Interval,
    span_micros: i64,
    expire_after: Option<pgrx::datum::Interval>,
) {
    crate::catalog::privileges::require_owner(relid);
    crate::catalog::config::as_extension_owner(|| {
        Spi::run_with_args(
            "SELECT tsbucket._create_store($1, $2, $3, $4, $5, $6, $7)",
            &[relid.into(), time_attnum.into(), meta_attnums.into(), granularity.into(), span.into(), span_micros.into(), expire_after.into()],
        )
        .expect("create the bucket store")
    });
}

/// alter_timeseries' last step: the calling role must own the table; then the
/// catalog row is written as the extension owner.
#[pg_extern]
fn _update_catalog(
    relid: pg_sys::Oid,
    granularity: Option<&str>,
    span: pgrx::datum::Interval,
    span_micros: i64,
    expire_after: Option<pgrx::datum::Interval>,
) {
    crate::catalog::privileges::require_owner(relid);
    crate::catalog::config::as_extension_owner(|| {
        Spi::run_with_args(
            "UPDATE tsbucket.catalog SET granularity = $2, bucket_max_span = $3, span_micros = $4, expire_after = $5 WHERE relid = $1",
            &[relid.into(), granularity.into(), span.into(), span_micros.into(), expire_after.into()],
        )
        .expect("update the catalog")
    });
}

/// Writes the table's label from its current configuration. Callable by
/// PUBLIC (the catalog functions and the DDL guard call it as their caller):
/// owners only.
#[pg_extern]
fn _sync_label(relid: pg_sys::Oid) {
    crate::catalog::privileges::require_owner(relid);
    crate::catalog::label::sync_label(relid);
}
