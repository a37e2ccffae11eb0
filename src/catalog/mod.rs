//! What tsbucket knows of a table: its configuration (`tsbucket.catalog`,
//! cached per backend), the shape its columns take in buckets, the settings a
//! DBA tunes, who may do what, and the security label that carries the
//! configuration through pg_dump.

pub mod config;
pub mod gucs;
pub mod label;
pub mod privileges;
pub mod shape;
