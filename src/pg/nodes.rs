//! Readers of Postgres node structures: lists, the columns an expression
//! refers to, casts to see through, whether an expression is a constant for
//! the length of a scan; and running a compiled qual.

use pgrx::pg_sys;

/// The pointers of a List of nodes (empty for NIL).
///
/// # Safety
/// `list` must be NIL or a valid pointer List.
pub unsafe fn list_ptrs(list: *mut pg_sys::List) -> Vec<*mut std::ffi::c_void> {
    if list.is_null() {
        return Vec::new();
    }
    // SAFETY: `list` is a non-NIL pointer List (list_ptrs's contract), so its header is readable.
    let n = unsafe { (*list).length as usize };
    // SAFETY: `elements` holds the List's `length` cells, each a pointer cell of this pointer List.
    (0..n).map(|i| unsafe { (*(*list).elements.add(i)).ptr_value }).collect()
}

/// Replaces cell `i` of pointer List `list` with `ptr`.
///
/// # Safety
/// `list` must be a non-NIL pointer List with more than `i` cells.
pub unsafe fn list_set_ptr(list: *mut pg_sys::List, i: usize, ptr: *mut std::ffi::c_void) {
    // SAFETY: cell `i` exists in this pointer List (the contract); only its pointer is written.
    unsafe { (*(*list).elements.add(i)).ptr_value = ptr };
}

/// Attribute numbers of range-table entry `rtindex` that `nodes` refer to
/// (0 = the whole row, negative = system columns).
///
/// # Safety
/// `nodes` must be valid expression trees (or NULL).
pub unsafe fn referenced_attnums(nodes: &[*mut pg_sys::Node], rtindex: u32) -> Vec<i32> {
    let mut bms: *mut pg_sys::Bitmapset = std::ptr::null_mut();
    for &node in nodes {
        // SAFETY: `node` is a valid expression tree or NULL (referenced_attnums's contract); pull_varattnos
        // only reads it and adds members to `bms`, palloc'd in CurrentMemoryContext.
        unsafe { pg_sys::pull_varattnos(node, rtindex, &mut bms) };
    }
    let mut out = Vec::new();
    let mut x = -1;
    loop {
        // SAFETY: `bms` is NULL or the set pull_varattnos built above; bms_next_member only reads it.
        x = unsafe { pg_sys::bms_next_member(bms, x) };
        if x < 0 {
            break;
        }
        out.push(x + pg_sys::FirstLowInvalidHeapAttributeNumber);
    }
    out
}

/// The OIDs of an OID list (`T_OidList`).
///
/// # Safety
/// `list` must be NIL or a valid OID list.
pub unsafe fn list_oids(list: *mut pg_sys::List) -> Vec<pg_sys::Oid> {
    if list.is_null() {
        return Vec::new();
    }
    // SAFETY: `list` is a non-NIL OID list (list_oids's contract), so its header is readable.
    let n = unsafe { (*list).length as usize };
    // SAFETY: `elements` holds the list's `n` cells, each an OID cell of this T_OidList.
    (0..n).map(|i| unsafe { (*(*list).elements.add(i)).oid_value }).collect()
}

/// Strips binary-compatible casts (varchar -> text and the like).
///
/// # Safety
/// `n` must be NULL or a valid expression tree.
pub unsafe fn strip(mut n: *mut pg_sys::Node) -> *mut pg_sys::Node {
    // SAFETY: `n` is checked non-NULL before its tag is read; it is the caller's valid expression node
    // (strip's contract), and so is each RelabelType's `arg` below.
    while !n.is_null() && unsafe { (*n).type_ } == pg_sys::NodeTag::T_RelabelType {
        // SAFETY: the tag just read says `n` is a RelabelType.
        n = unsafe { (*(n as *mut pg_sys::RelabelType)).arg } as *mut pg_sys::Node;
    }
    n
}

/// # Safety
/// `n` must be a valid expression tree.
pub unsafe fn is_pseudo_constant(n: *mut pg_sys::Node) -> bool {
    // SAFETY: `n` is a valid expression tree (is_pseudo_constant's contract); the three contain_* walkers only read it.
    unsafe { !pg_sys::contain_var_clause(n) && !pg_sys::contain_volatile_functions(n) && !pg_sys::contain_subplans(n) }
}

/// ExecQual: a NULL result is false; no qual is true.
///
/// # Safety
/// `qual` must be NULL or an ExprState compiled for the node whose ExprContext
/// `econtext` is, with the tuples its expressions read already set.
pub unsafe fn qual_passes(qual: *mut pg_sys::ExprState, econtext: *mut pg_sys::ExprContext) -> bool {
    if qual.is_null() {
        return true;
    }
    let mut isnull = false;
    // SAFETY: `qual` is a non-null ExprState compiled for the scan node whose ExprContext `econtext` the caller passes,
    // its scan tuple already set.
    let d = unsafe { pg_sys::ExecEvalExprSwitchContext(qual, econtext, &mut isnull) };
    !isnull && d.value() != 0
}
