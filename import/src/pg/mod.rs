//! The server side: libpq (the only FFI), and the import's progress marker,
//! which commits in the same transaction as each batch's rows.

pub mod libpq;
pub mod progress;
