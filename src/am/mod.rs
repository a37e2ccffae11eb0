//! The `tsbucket` table access method. Each callback turns Postgres's raw
//! pointers into calls of plain Rust in the modules below; version
//! differences (15 vs 18) stay in this file behind `cfg` seams.
//!
//! `routine` builds the routine from the callbacks of `scan` (reading),
//! `modify` (writing) and `relation` (storage, sizes); `refusals` holds what
//! they refuse.

pub mod modify;
pub mod refusals;
pub mod relation;
pub mod routine;
pub mod scan;
