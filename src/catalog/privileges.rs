//! Who may do what, checked in Rust against the role that is really calling
//! (`GetUserId()`; the SQL wrappers around these functions are SECURITY
//! INVOKER, so that is the caller, as for any SQL command), and the one place
//! that runs a user's code for tsbucket's maintenance: as the table's owner in
//! a security-restricted context, as VACUUM and REFRESH MATERIALIZED VIEW do.

use crate::pg::error::ts_error;
use pgrx::{PgSqlErrorCode, pg_sys};

const INSUFFICIENT_PRIVILEGE: PgSqlErrorCode = PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE;

/// From the syscache, not a query of pg_class: Citus hides its shards from
/// queries of background workers and of some applications.
pub fn table_owner(relid: pg_sys::Oid) -> pg_sys::Oid {
    // SAFETY: a syscache lookup of `relid`'s pg_class row, released before returning; relowner is a fixed-width
    // column of the form the row maps onto.
    let owner = unsafe {
        let tuple = pg_sys::SearchSysCache1(pg_sys::SysCacheIdentifier::RELOID as i32, pg_sys::Datum::from(relid));
        if tuple.is_null() {
            None
        } else {
            let form = pg_sys::GETSTRUCT(tuple) as *const pg_sys::FormData_pg_class;
            let owner = (*form).relowner;
            pg_sys::ReleaseSysCache(tuple);
            Some(owner)
        }
    };
    owner.unwrap_or_else(|| ts_error(PgSqlErrorCode::ERRCODE_UNDEFINED_TABLE, &format!("relation {} does not exist", relid.to_u32()), ""))
}

fn current_user() -> pg_sys::Oid {
    // SAFETY: GetUserId only returns the user id this backend keeps for permission checks (set by login, SET ROLE and
    // security-definer calls).
    unsafe { pg_sys::GetUserId() }
}

/// The caller must own the table (membership in the owning role counts, and
/// superusers own everything), as for ALTER TABLE.
pub fn require_owner(relid: pg_sys::Oid) {
    let (user, owner) = (current_user(), table_owner(relid));
    // SAFETY: has_privs_of_role compares the role oids `user` (GetUserId) and `owner` (relowner of `relid`) through the
    // role membership cache, inside the caller's transaction.
    if !unsafe { pg_sys::has_privs_of_role(user, owner) } {
        ts_error(INSUFFICIENT_PRIVILEGE, &format!("must be owner of table {}", crate::pg::relation::qualified_name(relid)), "");
    }
}

/// The caller must be allowed to SELECT from the table.
pub fn require_select(relid: pg_sys::Oid) {
    let user = current_user();
    // SAFETY: pg_class_aclcheck reads the ACL of `relid` from the syscache for role `user` inside the caller's
    // transaction; it errors out cleanly when the relation does not exist.
    if unsafe { pg_sys::pg_class_aclcheck(relid, user, pg_sys::ACL_SELECT as pg_sys::AclMode) } != pg_sys::AclResult::ACLCHECK_OK {
        ts_error(INSUFFICIENT_PRIVILEGE, &format!("permission denied for table {}", crate::pg::relation::relation_name(relid)), "");
    }
}

/// The caller must be allowed to SELECT from the table; and where row-level
/// security applies to the caller, per-bucket listings would show series and
/// counts the policies hide, so they are refused.
pub fn require_select_without_rls(relid: pg_sys::Oid) {
    require_select(relid);
    // SAFETY: check_enable_rls reads the pg_class row of `relid` through the syscache (RLS_NONE when there is none)
    // for the current user (InvalidOid), inside the caller's transaction; noError makes it report instead of raise.
    let rls = unsafe { pg_sys::check_enable_rls(relid, pg_sys::InvalidOid, true) };
    if rls == pg_sys::CheckEnableRlsResult::RLS_ENABLED as i32 {
        ts_error(
            INSUFFICIENT_PRIVILEGE,
            &format!("row-level security is active on table {} for this role", crate::pg::relation::relation_name(relid)),
            "Per-bucket listings would show series the policies hide; query the table itself instead.",
        );
    }
}

/// Runs `f` as `owner` in a security-restricted context: whatever user code
/// `f` calls (type output functions, comparison functions of a meta column's
/// type) runs with the table owner's rights, never with the caller's or the
/// worker's, and may not change session state.
pub fn as_owner_restricted<R>(owner: pg_sys::Oid, f: impl FnOnce() -> R) -> R {
    crate::pg::role::as_user(owner, true, f)
}
