//! Who may do what, checked in Rust against the role that is really calling
//! (`GetUserId()`; the SQL wrappers around these functions are SECURITY
//! INVOKER, so that is the caller, as for any SQL command), and the one place
//! that runs a user's code for tsbucket's maintenance: as the table's owner in
//! a security-restricted context, as VACUUM and REFRESH MATERIALIZED VIEW do.

use crate::catalog;
use crate::error::ts_error;
use pgrx::pg_sys;
use pgrx::prelude::*;
use pgrx::PgSqlErrorCode;

const INSUFFICIENT_PRIVILEGE: PgSqlErrorCode = PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE;

pub fn table_owner(relid: pg_sys::Oid) -> pg_sys::Oid {
    Spi::get_one_with_args::<pg_sys::Oid>("SELECT relowner FROM pg_catalog.pg_class WHERE oid = $1", &[relid.into()])
        .ok()
        .flatten()
        .unwrap_or_else(|| ts_error(PgSqlErrorCode::ERRCODE_UNDEFINED_TABLE, &format!("relation {} does not exist", relid.to_u32()), ""))
}

fn current_user() -> pg_sys::Oid {
    // SAFETY: a plain read of the backend's user id.
    unsafe { pg_sys::GetUserId() }
}

/// The caller must own the table (membership in the owning role counts, and
/// superusers own everything), as for ALTER TABLE.
pub fn require_owner(relid: pg_sys::Oid) {
    // SAFETY: role ids from the catalog and the backend.
    if !unsafe { pg_sys::has_privs_of_role(current_user(), table_owner(relid)) } {
        ts_error(INSUFFICIENT_PRIVILEGE, &format!("must be owner of table {}", catalog::qualified_name(relid)), "");
    }
}

/// The caller must be allowed to SELECT from the table.
pub fn require_select(relid: pg_sys::Oid) {
    // SAFETY: a catalog look-up by oid for the current user.
    if unsafe { pg_sys::pg_class_aclcheck(relid, current_user(), pg_sys::ACL_SELECT as pg_sys::AclMode) } != pg_sys::AclResult::ACLCHECK_OK {
        ts_error(INSUFFICIENT_PRIVILEGE, &format!("permission denied for table {}", catalog::relation_name(relid)), "");
    }
}

/// The caller must be allowed to SELECT from the table; and where row-level
/// security applies to the caller, per-bucket listings would show series and
/// counts the policies hide, so they are refused.
pub fn require_select_without_rls(relid: pg_sys::Oid) {
    require_select(relid);
    // SAFETY: a catalog look-up by oid for the current user.
    unsafe {
        if pg_sys::check_enable_rls(relid, pg_sys::InvalidOid, true) == pg_sys::CheckEnableRlsResult::RLS_ENABLED as i32 {
            ts_error(
                INSUFFICIENT_PRIVILEGE,
                &format!("row-level security is active on table {} for this role", catalog::relation_name(relid)),
                "Per-bucket listings would show series the policies hide; query the table itself instead.",
            );
        }
    }
}

/// Runs `f` as `owner` in a security-restricted context: whatever user code
/// `f` calls (type output functions, comparison functions of a meta column's
/// type) runs with the table owner's rights, never with the caller's or the
/// worker's, and may not change session state.
pub fn as_owner_restricted<R>(owner: pg_sys::Oid, f: impl FnOnce() -> R) -> R {
    crate::pgutil::as_user(owner, true, f)
}

/// Checks that the caller owns the table (for the SQL wrappers, which check
/// ownership before validating their other arguments).
#[pg_extern]
fn _require_owner(relid: pg_sys::Oid) {
    require_owner(relid);
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
    require_owner(relid);
    catalog::as_extension_owner(|| {
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
    require_owner(relid);
    catalog::as_extension_owner(|| {
        Spi::run_with_args(
            "UPDATE tsbucket.catalog SET granularity = $2, bucket_max_span = $3, span_micros = $4, expire_after = $5 WHERE relid = $1",
            &[relid.into(), granularity.into(), span.into(), span_micros.into(), expire_after.into()],
        )
        .expect("update the catalog")
    });
}
