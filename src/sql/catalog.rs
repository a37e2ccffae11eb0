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

/// Writes the configuration label of a partitioned time-series table the
/// caller owns (tsbucket.alter_timeseries and the series retention functions
/// change it): SetSecurityLabel, which does not call the label hook, since the
/// hook keeps a configured table's label from changing by SECURITY LABEL.
#[pg_extern]
fn _set_partitioned_label(relid: pg_sys::Oid, label: &str) {
    crate::catalog::privileges::require_owner(relid);
    crate::catalog::label::set_partitioned_label(relid, label);
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

/// Makes one of a table's internal relations (store, moves, segments,
/// sequences) a member of the extension, or no longer one (`add` false,
/// before it is dropped): the pg_depend rows ALTER EXTENSION ADD / DROP
/// records (for the relation, and from PostgreSQL 17 on its row type and that
/// type's array type too), so
/// that pg_dump leaves it out and pg_upgrade carries it over. Without ALTER
/// EXTENSION's ShareUpdateExclusiveLock on the extension, which conflicts
/// with itself: Citus configures the shards of one table over parallel
/// connections of one distributed transaction, and they would wait for each
/// other until it ends (40P01). AccessShareLock still keeps DROP EXTENSION out.
/// Only for relations in tsbucket_internal; called as the extension owner.
#[pg_extern]
fn _extension_member(rel: pg_sys::Oid, add: bool) {
    // SAFETY: catalog lookups by oid in the caller's transaction; get_rel_namespace returns InvalidOid for a missing one.
    let (namespace, internal) = unsafe {
        (pg_sys::get_rel_namespace(rel), pg_sys::get_namespace_oid(c"tsbucket_internal".as_ptr(), true))
    };
    if namespace == pg_sys::InvalidOid || namespace != internal {
        crate::pg::error::ts_error(
            crate::pg::error::SqlState::ERRCODE_INVALID_PARAMETER_VALUE,
            &format!("relation {} is not one of tsbucket's internal relations", u32::from(rel)),
            "Only tsbucket's catalog functions manage which relations belong to the extension.",
        );
    }
    // SAFETY: get_extension_oid with missing_ok = false errors out if tsbucket is not installed; the lock on the
    // extension object is held to the end of the transaction, as ALTER EXTENSION holds its own.
    let ext = unsafe {
        let ext = pg_sys::get_extension_oid(c"tsbucket".as_ptr(), false);
        pg_sys::LockDatabaseObject(pg_sys::ExtensionRelationId, ext, 0, pg_sys::AccessShareLock as i32);
        ext
    };
    let extension = pg_sys::ObjectAddress { classId: pg_sys::ExtensionRelationId, objectId: ext, objectSubId: 0 };
    #[cfg_attr(feature = "pg15", allow(unused_mut))]
    let mut objects = vec![(pg_sys::RelationRelationId, rel)];
    #[cfg(not(feature = "pg15"))]
    {
        // SAFETY: syscache lookups of the relation's row type and of that type's array type (InvalidOid if none).
        let rowtype = unsafe { pg_sys::get_rel_type_id(rel) };
        if rowtype != pg_sys::InvalidOid {
            objects.push((pg_sys::TypeRelationId, rowtype));
            // SAFETY: as above.
            let array = unsafe { pg_sys::get_array_type(rowtype) };
            if array != pg_sys::InvalidOid {
                objects.push((pg_sys::TypeRelationId, array));
            }
        }
    }
    for (class, oid) in objects {
        // SAFETY: pg_depend and pg_init_privs writes for an existing object of `class` (the relation, checked above,
        // or its row type) and the installed extension, in the caller's transaction; what ALTER EXTENSION does.
        unsafe {
            let member = pg_sys::getExtensionOfObject(class, oid) == ext;
            if add && !member {
                let object = pg_sys::ObjectAddress { classId: class, objectId: oid, objectSubId: 0 };
                pg_sys::recordDependencyOn(&object, &extension, pg_sys::DependencyType::DEPENDENCY_EXTENSION);
                pg_sys::recordExtObjInitPriv(oid, class);
            } else if !add && member {
                pg_sys::deleteDependencyRecordsForSpecific(
                    class,
                    oid,
                    pg_sys::DependencyType::DEPENDENCY_EXTENSION as _,
                    pg_sys::ExtensionRelationId,
                    ext,
                );
                pg_sys::removeExtObjInitPriv(oid, class);
            }
        }
    }
    // SAFETY: makes the pg_depend changes visible to the rest of the caller's transaction.
    unsafe { pg_sys::CommandCounterIncrement() };
}
