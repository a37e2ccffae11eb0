//! The TsBucketScan plan node's data: what it does (its mode and the mode's
//! argument) and the columns it decodes, kept in custom_private.

use crate::pg::nodes::list_ptrs;
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

/// custom_private: the mode, its argument, the attnums to decode ([-1] = all),
/// then per jsonb column read only through key accessors a List of its attnum
/// and the keys (`doc_keys`).
pub(super) unsafe fn private_list(mode: i32, arg: i32, needed: &[i32], doc_keys: &super::doc_keys::Keys) -> *mut pg_sys::List {
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
    for (attnum, keys) in doc_keys {
        // SAFETY: as above: the attnum and each key (a String node of a palloc'd copy) go into a new List.
        unsafe {
            let mut entry = pg_sys::lappend(std::ptr::null_mut(), pg_sys::makeInteger(*attnum as i32) as *mut std::ffi::c_void);
            for key in keys {
                let text = std::ffi::CString::new(key.clone()).expect("jsonb keys hold no NUL");
                entry = pg_sys::lappend(entry, pg_sys::makeString(pg_sys::pstrdup(text.as_ptr())) as *mut std::ffi::c_void);
            }
            private = pg_sys::lappend(private, entry as *mut std::ffi::c_void);
        }
    }
    private
}

/// custom_private read back: the mode, its argument, the attnums to decode,
/// and the jsonb keys by attnum - 1.
///
/// # Safety
/// `private` must be a List private_list built.
pub(super) unsafe fn read_private(private: *mut pg_sys::List) -> (Vec<i32>, Vec<(usize, Vec<Vec<u8>>)>) {
    let mut ints = Vec::new();
    let mut docs = Vec::new();
    // SAFETY: `private` is private_list's List (the contract): Integer nodes, then Lists of an Integer and String nodes.
    unsafe {
        for p in list_ptrs(private) {
            let node = p as *mut pg_sys::Node;
            if (*node).type_ == pg_sys::NodeTag::T_Integer {
                ints.push((*(node as *mut pg_sys::Integer)).ival);
                continue;
            }
            let entry = list_ptrs(node as *mut pg_sys::List);
            let attnum = (*(entry[0] as *mut pg_sys::Integer)).ival;
            let keys = entry[1..].iter().map(|s| std::ffi::CStr::from_ptr((*(*s as *mut pg_sys::String)).sval).to_bytes().to_vec()).collect();
            docs.push((attnum as usize - 1, keys));
        }
    }
    (ints, docs)
}
