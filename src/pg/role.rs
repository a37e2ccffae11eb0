//! Running code as another role, as SECURITY DEFINER functions and VACUUM do.

use pgrx::pg_sys;

/// Runs `f` as `user` (as SECURITY DEFINER switches users), and with
/// `restricted` in a security-restricted context (as VACUUM runs a table
/// owner's code: no session state may change). An ERROR restores the user
/// with the (sub)transaction abort.
pub fn as_user<R>(user: pg_sys::Oid, restricted: bool, f: impl FnOnce() -> R) -> R {
    let (mut saved_user, mut saved_context) = (pg_sys::InvalidOid, 0i32);
    let mut context = pg_sys::SECURITY_LOCAL_USERID_CHANGE as i32;
    if restricted {
        context |= pg_sys::SECURITY_RESTRICTED_OPERATION as i32;
    }
    // SAFETY: GetUserIdAndSecContext writes the backend's current user and security context into the two
    // locals; SetUserIdAndSecContext only sets backend globals, which an ERROR's (sub)transaction abort restores.
    unsafe {
        pg_sys::GetUserIdAndSecContext(&mut saved_user, &mut saved_context);
        pg_sys::SetUserIdAndSecContext(user, saved_context | context);
    }
    let result = f();
    // SAFETY: puts back the user id and security context saved by GetUserIdAndSecContext before `f` ran.
    unsafe { pg_sys::SetUserIdAndSecContext(saved_user, saved_context) };
    result
}
