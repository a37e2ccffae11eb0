//! Postgres's hooks into tsbucket: each a thin dispatch into the layer that
//! does the work.
//!
//! - post_parse_analyze: MongoDB's update rule (SET and WHERE on meta columns
//!   only), no ON CONFLICT, no MERGE. The parser opens the target table before
//!   this hook runs, which loads this library, so the rule holds even for a
//!   session's first statement without preloading.
//! - ExecutorFinish: the end of a statement, where buffered rows are written
//!   and pending deletes/updates applied.
//! - transaction callbacks: pre-commit flush, abort discards, savepoints.
//! - planner, set_rel_pathlist, create_upper_paths: TsBucketScan paths and
//!   plan rewrites (`scan`, `rewrite`).

pub mod executor;
pub mod parse;
pub mod planner;
pub mod utility;
pub mod xact;

/// Installs every hook and callback (from _PG_init).
pub fn init() {
    parse::install();
    executor::install();
    utility::install();
    xact::install();
    planner::install();
}
