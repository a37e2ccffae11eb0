//! Relations' and columns' names and descriptors.

use pgrx::pg_sys;
use pgrx::prelude::*;

/// TupleDescAttr is a C macro; its layout differs from PG 18 on.
///
/// # Safety
/// `i` must be below `natts`.
pub unsafe fn tuple_desc_attr(tupdesc: pg_sys::TupleDesc, i: usize) -> *mut pg_sys::FormData_pg_attribute {
    #[cfg(feature = "pg15")]
    unsafe {
        (*tupdesc).attrs.as_mut_ptr().add(i)
    }
    #[cfg(not(feature = "pg15"))]
    unsafe {
        pg_sys::TupleDescAttr(tupdesc, i as i32)
    }
}

/// The current name of a column (columns may be renamed after creation).
pub fn attr_name(rel: pg_sys::Relation, attnum: i16) -> String {
    unsafe {
        let att = &*tuple_desc_attr((*rel).rd_att, attnum as usize - 1);
        std::ffi::CStr::from_ptr(att.attname.data.as_ptr()).to_string_lossy().into_owned()
    }
}

pub fn relation_name(relid: pg_sys::Oid) -> String {
    unsafe {
        let name = pg_sys::get_rel_name(relid);
        if name.is_null() {
            return format!("{}", relid.to_u32());
        }
        std::ffi::CStr::from_ptr(name).to_string_lossy().into_owned()
    }
}

/// `schema.name`, quoted, of a relation.
pub fn qualified_name(relid: pg_sys::Oid) -> String {
    Spi::get_one_with_args::<String>("SELECT $1::regclass::text", &[relid.into()])
        .ok()
        .flatten()
        .unwrap_or_else(|| relation_name(relid))
}
