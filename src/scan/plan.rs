//! The TsBucketScan plan node's data: what it does (its mode and the mode's
//! argument) and the columns it decodes, kept in custom_private.

use pgrx::pg_sys;

/// What a TsBucketScan plan does (the first element of custom_private).
pub const MODE_SCAN: i32 = 0;

/// The last row of each series (DISTINCT ON (meta...) ORDER BY meta..., time DESC).
pub(super) const MODE_LAST_POINT: i32 = 1;

/// Rows in time order across buckets (the second element: 1 = descending).
pub(super) const MODE_TIME_ORDER: i32 = 2;

/// Partial aggregates per bucket and group (`rewrite::partial_agg`); the second
/// element is the number of group keys leading custom_scan_tlist, the
/// aggregates follow; the quals are in custom_exprs.
pub const MODE_PARTIAL_AGG: i32 = 3;

/// Rows in (meta..., time) order (the second element: 1 = all descending).
pub(super) const MODE_SERIES_ORDER: i32 = 4;

/// custom_private: the mode, its argument, then the attnums to decode ([-1] = all).
pub(super) unsafe fn private_list(mode: i32, arg: i32, needed: &[i32]) -> *mut pg_sys::List {
    // SAFETY: makeInteger and lappend allocate the mode and argument nodes and a new List in CurrentMemoryContext,
    // the planner's context while a plan node is made.
    let mut private = unsafe {
        let private = pg_sys::lappend(std::ptr::null_mut(), pg_sys::makeInteger(mode) as *mut std::ffi::c_void);
        pg_sys::lappend(private, pg_sys::makeInteger(arg) as *mut std::ffi::c_void)
    };
    for &a in needed {
        // SAFETY: `private` is the List built above; each decoded attnum is appended as an Integer in the same context.
        private = unsafe { pg_sys::lappend(private, pg_sys::makeInteger(a) as *mut std::ffi::c_void) };
    }
    private
}
