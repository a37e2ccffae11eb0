//! How a user table's columns map onto bucket storage: which attribute is the
//! time column, which are meta (series identity, stored once per bucket), and
//! which storage kind each measurement column uses.

use crate::catalog::Config;
use pgrx::pg_sys;
use tsbucket_format::ColumnKind;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Time,
    /// Index into the config's meta column list.
    Meta(usize),
    Measurement,
    Dropped,
}

#[derive(Clone, Debug)]
pub struct Attr {
    pub attnum: u16,
    pub typlen: i16,
    pub typbyval: bool,
    pub kind: ColumnKind,
    pub role: Role,
}

#[derive(Clone, Debug)]
pub struct TableShape {
    pub attrs: Vec<Attr>,
}

pub fn kind_for_type(typid: pg_sys::Oid, typlen: i16, typbyval: bool) -> ColumnKind {
    match typid {
        pg_sys::FLOAT8OID => ColumnKind::Float64,
        pg_sys::FLOAT4OID => ColumnKind::Float32,
        pg_sys::TIMESTAMPTZOID | pg_sys::TIMESTAMPOID => ColumnKind::Timestamp,
        pg_sys::BOOLOID => ColumnKind::Bool,
        _ if typbyval && matches!(typlen, 1 | 2 | 4 | 8) => ColumnKind::Int,
        _ => ColumnKind::Bytes,
    }
}

impl TableShape {
    /// # Safety
    /// `tupdesc` must be a valid tuple descriptor.
    pub unsafe fn new(tupdesc: pg_sys::TupleDesc, config: &Config) -> TableShape {
        let natts = unsafe { (*tupdesc).natts } as usize;
        let attrs = (0..natts)
            .map(|i| {
                let att = unsafe { &*tuple_desc_attr(tupdesc, i) };
                let attnum = (i + 1) as u16;
                let role = if att.attisdropped {
                    Role::Dropped
                } else if attnum as i16 == config.time_attnum {
                    Role::Time
                } else if let Some(m) = config.meta_attnums.iter().position(|&m| m == attnum as i16) {
                    Role::Meta(m)
                } else {
                    Role::Measurement
                };
                Attr {
                    attnum,
                    typlen: att.attlen,
                    typbyval: att.attbyval,
                    kind: kind_for_type(att.atttypid, att.attlen, att.attbyval),
                    role,
                }
            })
            .collect();
        TableShape { attrs }
    }

    /// Attributes stored in the payload: the time column and the measurements.
    pub fn payload_attrs(&self) -> impl Iterator<Item = &Attr> {
        self.attrs.iter().filter(|a| matches!(a.role, Role::Time | Role::Measurement))
    }

    pub fn meta_attrs(&self) -> Vec<&Attr> {
        let mut metas: Vec<(usize, &Attr)> =
            self.attrs.iter().filter_map(|a| if let Role::Meta(i) = a.role { Some((i, a)) } else { None }).collect();
        metas.sort_by_key(|(i, _)| *i);
        metas.into_iter().map(|(_, a)| a).collect()
    }
}

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
