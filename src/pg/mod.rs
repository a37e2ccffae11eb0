//! The audited FFI helpers: thin, documented wrappers over Postgres that know
//! nothing of buckets. Errors with a SQLSTATE, datum layouts, node lists,
//! Rust values owned by memory contexts, role switches, relation names.
//! Every layer above calls Postgres through these where it can.

pub mod datum;
pub mod error;
pub mod fmgr;
pub mod memory;
pub mod nodes;
pub mod relation;
pub mod role;
