//! Relations' and columns' names and descriptors.

use pgrx::pg_sys;
use pgrx::prelude::*;

/// TupleDescAttr is a C macro; its layout differs from PG 18 on.
///
/// # Safety
/// `i` must be below `natts`.
pub unsafe fn tuple_desc_attr(tupdesc: pg_sys::TupleDesc, i: usize) -> *mut pg_sys::FormData_pg_attribute {
    #[cfg(feature = "pg15")]
    // SAFETY: PG 15 keeps the attributes inline after the TupleDesc header and `i` < natts (tuple_desc_attr's
    // contract), so the pointer stays inside `tupdesc`.
    unsafe {
        (*tupdesc).attrs.as_mut_ptr().add(i)
    }
    #[cfg(not(feature = "pg15"))]
    // SAFETY: TupleDescAttr, PG 18's inline accessor exported by pgrx, indexes `tupdesc`'s attributes with `i` < natts.
    unsafe {
        pg_sys::TupleDescAttr(tupdesc, i as i32)
    }
}

/// The current name of a column (columns may be renamed after creation).
///
/// # Safety
/// `rel` must be an open relation and `attnum` one of its columns (1-based).
pub unsafe fn attr_name(rel: pg_sys::Relation, attnum: i16) -> String {
    // SAFETY: `rel` is open and `attnum` one of its columns (this function's contract), so the attribute
    // lies in rd_att, the relcache entry's descriptor, while the name is copied out here.
    let att = unsafe { &*tuple_desc_attr((*rel).rd_att, attnum as usize - 1) };
    // SAFETY: attname is a NUL-terminated NameData inside that attribute.
    unsafe { std::ffi::CStr::from_ptr(att.attname.data.as_ptr()) }.to_string_lossy().into_owned()
}

pub fn relation_name(relid: pg_sys::Oid) -> String {
    // SAFETY: get_rel_name looks `relid` up in the syscache and returns a palloc'd copy of its name, or NULL.
    let name = unsafe { pg_sys::get_rel_name(relid) };
    if name.is_null() {
        return format!("{}", relid.to_u32());
    }
    // SAFETY: `name` is the non-NULL, NUL-terminated string get_rel_name palloc'd in CurrentMemoryContext.
    unsafe { std::ffi::CStr::from_ptr(name) }.to_string_lossy().into_owned()
}

/// `schema.name`, quoted, of a relation.
pub fn qualified_name(relid: pg_sys::Oid) -> String {
    Spi::get_one_with_args::<String>("SELECT $1::regclass::text", &[relid.into()])
        .ok()
        .flatten()
        .unwrap_or_else(|| relation_name(relid))
}
