//! tsbucket: MongoDB-style time-series tables for PostgreSQL.
//!
//! One layer per folder, each using only those below it (README
//! "Architecture"): `pg` (audited FFI helpers) <- `catalog` (configuration)
//! <- `store` (the bucket store) <- `write`, `dml` <- `scan` (TsBucketScan)
//! <- `rewrite`, `am` (the table AM), `maintenance` <- `hooks`, `sql`,
//! `timefn`. The pure crates `tsbucket-format`, `-timecalc` and `-kernels`
//! hold what needs no server.

use pgrx::pg_sys;
use pgrx::prelude::*;

mod am;
mod catalog;
mod dml;
mod hooks;
mod maintenance;
mod pg;
mod rewrite;
mod scan;
mod sql;
mod store;
mod timefn;
mod write;

#[cfg(any(test, feature = "pg_test"))]
mod tests;

::pgrx::pg_module_magic!();

extension_sql_file!("../sql/bootstrap.sql", name = "bootstrap", bootstrap);
extension_sql_file!("../sql/catalog_functions.sql", name = "catalog_functions", finalize);
extension_sql_file!("../sql/time_functions.sql", name = "time_functions", requires = ["catalog_functions"]);

#[pg_guard]
pub extern "C-unwind" fn _PG_init() {
    // Errors carry their message, detail and hint only, whatever the server's
    // environment: pgrx attaches a Rust backtrace to an error's DETAIL when
    // backtraces are enabled, and Rust reads this variable once, before
    // RUST_BACKTRACE. Set before any Rust code of this process could capture one.
    // SAFETY: Postgres backends (and the postmaster loading preloaded libraries)
    // are single-threaded, so nothing reads the environment concurrently.
    unsafe { std::env::set_var("RUST_LIB_BACKTRACE", "0") };
    catalog::gucs::init();
    catalog::config::init();
    hooks::init();
    scan::exec::register();
    catalog::label::init();
    // No background maintenance while pg_upgrade restores a cluster.
    // SAFETY: process_shared_preload_libraries_in_progress and IsBinaryUpgrade are bool globals the postmaster sets
    // before it loads libraries; _PG_init, single-threaded, only copies them.
    if unsafe { pg_sys::process_shared_preload_libraries_in_progress && !pg_sys::IsBinaryUpgrade } {
        crate::maintenance::launcher::register();
    }
}

/// Required by `cargo pgrx test`.
#[cfg(test)]
pub mod pg_test {
    pub fn setup(_options: Vec<&str>) {}

    pub fn postgresql_conf_options() -> Vec<&'static str> {
        vec![]
    }
}
