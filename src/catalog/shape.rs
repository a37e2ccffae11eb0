//! How a user table's columns map onto bucket storage: which attribute is the
//! time column, which are meta (series identity, stored once per bucket), and
//! which storage kind each measurement column uses.

use crate::pg::datum::{Layout, kind_for_type};
use crate::pg::relation::tuple_desc_attr;
use super::config::Config;
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
    /// The meta attributes in the configuration's order (made once: every buffered row reads them).
    metas: Vec<Attr>,
}

impl Attr {
    /// How the column's values lie in a Datum.
    pub fn layout(&self) -> Layout {
        Layout { typlen: self.typlen, typbyval: self.typbyval, kind: self.kind }
    }
}

impl TableShape {
    /// # Safety
    /// `tupdesc` must be a valid tuple descriptor.
    pub unsafe fn new(tupdesc: pg_sys::TupleDesc, config: &Config) -> TableShape {
        // SAFETY: `tupdesc` is a valid tuple descriptor, as this function's contract requires.
        let natts = unsafe { (*tupdesc).natts } as usize;
        let attrs = (0..natts)
            .map(|i| {
                // SAFETY: i < natts of the valid `tupdesc` (the contract), so attribute i exists; the reference is only
                // read while this closure builds the Attr, and the caller keeps the descriptor alive during new().
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
            .collect::<Vec<Attr>>();
        let metas = config.meta_attnums.iter().filter_map(|&m| attrs.get((m as usize).wrapping_sub(1))).cloned().collect();
        TableShape { attrs, metas }
    }

    /// Attributes stored in the payload: the time column and the measurements.
    pub fn payload_attrs(&self) -> impl Iterator<Item = &Attr> {
        self.attrs.iter().filter(|a| matches!(a.role, Role::Time | Role::Measurement))
    }

    pub fn meta_attrs(&self) -> &[Attr] {
        &self.metas
    }
}
