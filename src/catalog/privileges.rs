//! Who may do what, checked in Rust against the role that is really calling
//! (`GetUserId()`; the SQL wrappers around these functions are SECURITY
//! INVOKER, so that is the caller, as for any SQL command), and the one place
//! that runs a user's code for tsbucket's maintenance: as the table's owner in
//! a security-restricted context, as VACUUM and REFRESH MATERIALIZED VIEW do.

use crate::pg::error::ts_error;
use pgrx::{PgSqlErrorCode, pg_sys};
use pgrx::prelude::*;

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
        ts_error(INSUFFICIENT_PRIVILEGE, &format!("must be owner of table {}", crate::pg::relation::qualified_name(relid)), "");
    }
}

/// The caller must be allowed to SELECT from the table.
pub fn require_select(relid: pg_sys::Oid) {
    // SAFETY: a catalog look-up by oid for the current user.
    if unsafe { pg_sys::pg_class_aclcheck(relid, current_user(), pg_sys::ACL_SELECT as pg_sys::AclMode) } != pg_sys::AclResult::ACLCHECK_OK {
        ts_error(INSUFFICIENT_PRIVILEGE, &format!("permission denied for table {}", crate::pg::relation::relation_name(relid)), "");
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
                &format!("row-level security is active on table {} for this role", crate::pg::relation::relation_name(relid)),
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
    crate::pg::role::as_user(owner, true, f)
}
