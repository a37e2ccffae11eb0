//! SQL functions implemented in Rust. The user-facing ones are wrapped in
//! sql/catalog_functions.sql, which gives them their documented signatures;
//! each here checks the caller's rights and calls the layer that does the work.

pub mod catalog;
pub mod inspect;
pub mod maintenance;
