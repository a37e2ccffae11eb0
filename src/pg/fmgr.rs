//! Helpers for functions with Postgres's C calling convention (aggregate
//! transition and final functions): arguments, NULL results, the aggregate's
//! memory context.

use crate::pg::error::ts_error;
use pgrx::pg_sys;

/// The version-1 info records of C functions written by hand (aggregate
/// support functions with Postgres's calling convention).
macro_rules! finfo {
    ($($name:ident),* $(,)?) => {
        $(
            #[unsafe(no_mangle)]
            #[doc(hidden)]
            pub extern "C" fn $name() -> &'static pgrx::pg_sys::Pg_finfo_record {
                const V1: pgrx::pg_sys::Pg_finfo_record = pgrx::pg_sys::Pg_finfo_record { api_version: 1 };
                &V1
            }
        )*
    };
}
pub(crate) use finfo;

/// Argument `i` of a call with Postgres's calling convention, or None when NULL.
///
/// # Safety
/// `fcinfo` must be a call's with more than `i` arguments.
pub unsafe fn arg(fcinfo: pg_sys::FunctionCallInfo, i: usize) -> Option<pg_sys::Datum> {
    // SAFETY: `fcinfo` is the running call's and has more than `i` arguments (arg's contract), so
    // args[i] is inside its argument array for the whole call.
    let a = unsafe { &*(*fcinfo).args.as_ptr().add(i) };
    if a.isnull { None } else { Some(a.value) }
}

/// Returns SQL NULL from a call with Postgres's calling convention.
///
/// # Safety
/// `fcinfo` must be a call's.
pub unsafe fn return_null(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: `fcinfo` is the running call's (return_null's contract); its isnull flag is how a
    // version-1 function reports a NULL result.
    unsafe { (*fcinfo).isnull = true };
    pg_sys::Datum::from(0)
}

/// The calling aggregate's memory context, where states live; an error
/// naming `what` when the function is not called as an aggregate.
///
/// # Safety
/// `fcinfo` must be a call's.
pub unsafe fn aggregate_context(fcinfo: pg_sys::FunctionCallInfo, what: &str) -> pg_sys::MemoryContext {
    let mut cxt: pg_sys::MemoryContext = std::ptr::null_mut();
    // SAFETY: `fcinfo` is the running call's (aggregate_context's contract); AggCheckCallContext only
    // reads its context node and writes the aggregate's memory context into the local `cxt`.
    if unsafe { pg_sys::AggCheckCallContext(fcinfo, &mut cxt) } == 0 {
        ts_error(
            pgrx::PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
            &format!("{what} must be called as an aggregate"),
            "Use it in SELECT ... OVER (...) or with GROUP BY.",
        );
    }
    cxt
}

/// Which function of a type's default btree operator class `type_support` copies.
#[derive(Clone, Copy)]
pub enum Support {
    /// Its comparison (three-way) function.
    Compare,
    /// Its equality operator's function.
    Equal,
}

/// A type's btree comparison or equality function, ready to call: copied
/// from the backend's type cache, its extra state in `cxt`.
///
/// # Safety
/// In a transaction; `cxt` must outlive every call of the result.
pub unsafe fn type_support(typid: pg_sys::Oid, which: Support, cxt: pg_sys::MemoryContext) -> pg_sys::FmgrInfo {
    let flag = match which {
        Support::Compare => pg_sys::TYPECACHE_CMP_PROC_FINFO,
        Support::Equal => pg_sys::TYPECACHE_EQ_OPR_FINFO,
    };
    let mut finfo = pg_sys::FmgrInfo::default();
    // SAFETY: lookup_type_cache returns the backend's entry for `typid` (or raises ERROR), alive until the backend
    // exits; fmgr_info_copy copies the cached function into the local `finfo`, its extra state in `cxt` (the contract).
    unsafe {
        let cache = pg_sys::lookup_type_cache(typid, flag as i32);
        let source = match which {
            Support::Compare => &raw mut (*cache).cmp_proc_finfo,
            Support::Equal => &raw mut (*cache).eq_opr_finfo,
        };
        if (*source).fn_oid == pg_sys::InvalidOid {
            ts_error(
                crate::pg::error::FEATURE_NOT_SUPPORTED,
                &format!("type {} has no default btree operator class", u32::from(typid)),
                "Meta columns need a type with a default btree operator class.",
            );
        }
        pg_sys::fmgr_info_copy(&mut finfo, source, cxt);
    }
    finfo
}
