//! Readers of Postgres node structures: lists, the columns an expression
//! refers to, casts to see through, whether an expression is a constant for
//! the length of a scan.

use pgrx::pg_sys;

/// The pointers of a List of nodes (empty for NIL).
///
/// # Safety
/// `list` must be NIL or a valid pointer List.
pub unsafe fn list_ptrs(list: *mut pg_sys::List) -> Vec<*mut std::ffi::c_void> {
    if list.is_null() {
        return Vec::new();
    }
    unsafe { (0..(*list).length as usize).map(|i| (*(*list).elements.add(i)).ptr_value).collect() }
}

/// Attribute numbers of range-table entry `rtindex` that `nodes` refer to
/// (0 = the whole row, negative = system columns).
///
/// # Safety
/// `nodes` must be valid expression trees (or NULL).
pub unsafe fn referenced_attnums(nodes: &[*mut pg_sys::Node], rtindex: u32) -> Vec<i32> {
    unsafe {
        let mut bms: *mut pg_sys::Bitmapset = std::ptr::null_mut();
        for &node in nodes {
            pg_sys::pull_varattnos(node, rtindex, &mut bms);
        }
        let mut out = Vec::new();
        let mut x = -1;
        loop {
            x = pg_sys::bms_next_member(bms, x);
            if x < 0 {
                break;
            }
            out.push(x + pg_sys::FirstLowInvalidHeapAttributeNumber);
        }
        out
    }
}

/// The OIDs of an OID list (`T_OidList`).
///
/// # Safety
/// `list` must be NIL or a valid OID list.
pub unsafe fn list_oids(list: *mut pg_sys::List) -> Vec<pg_sys::Oid> {
    if list.is_null() {
        return Vec::new();
    }
    unsafe {
        let n = (*list).length as usize;
        (0..n).map(|i| (*(*list).elements.add(i)).oid_value).collect()
    }
}

/// Strips binary-compatible casts (varchar -> text and the like).
pub unsafe fn strip(mut n: *mut pg_sys::Node) -> *mut pg_sys::Node {
    unsafe {
        while !n.is_null() && (*n).type_ == pg_sys::NodeTag::T_RelabelType {
            n = (*(n as *mut pg_sys::RelabelType)).arg as *mut pg_sys::Node;
        }
        n
    }
}

pub unsafe fn is_pseudo_constant(n: *mut pg_sys::Node) -> bool {
    unsafe { !pg_sys::contain_var_clause(n) && !pg_sys::contain_volatile_functions(n) && !pg_sys::contain_subplans(n) }
}
