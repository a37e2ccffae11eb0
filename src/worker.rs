//! The background worker: expiry and compaction without anyone calling them.
//!
//! A launcher (started when tsbucket is in shared_preload_libraries) wakes
//! every `tsbucket.worker_interval` and starts one short-lived worker per
//! database that accepts connections. A worker leaves at once where the
//! extension is absent; otherwise it runs `tsbucket._run_jobs` for each
//! time-series table, each in a transaction of its own, and exits. Holding no
//! connection between runs keeps DROP DATABASE and shutdown simple; SIGTERM
//! ends a worker at once (its transaction rolls back), and a DROP DATABASE
//! signals the worker of that database first.

use crate::gucs;
use pgrx::bgworkers::{BackgroundWorker, BackgroundWorkerBuilder, BgWorkerStartTime, DynamicBackgroundWorker, SignalWakeFlags};
use pgrx::pg_sys;
use pgrx::prelude::*;
use std::collections::HashMap;
use std::time::Duration;

const WORKER_TYPE: &str = "tsbucket worker";

pub fn register() {
    BackgroundWorkerBuilder::new("tsbucket launcher")
        .set_type("tsbucket launcher")
        .set_library("tsbucket")
        .set_function("tsbucket_launcher_main")
        .enable_spi_access()
        .set_start_time(BgWorkerStartTime::RecoveryFinished)
        .set_restart_time(Some(Duration::from_secs(10)))
        .load();
}

#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn tsbucket_launcher_main(_arg: pg_sys::Datum) {
    BackgroundWorker::attach_signal_handlers(SignalWakeFlags::SIGHUP | SignalWakeFlags::SIGTERM);
    BackgroundWorker::connect_worker_to_spi(Some("postgres"), None);
    let mut running: HashMap<String, DynamicBackgroundWorker> = HashMap::new();
    loop {
        if BackgroundWorker::sighup_received() {
            unsafe { pg_sys::ProcessConfigFile(pg_sys::GucContext::PGC_SIGHUP) };
        }
        if gucs::WORKER_ENABLED.get() {
            let databases: Vec<String> = BackgroundWorker::transaction(|| {
                Spi::connect(|c| {
                    c.select("SELECT datname::text FROM pg_database WHERE datallowconn AND NOT datistemplate", None, &[])
                        .map(|rows| rows.filter_map(|r| r.get::<String>(1).ok().flatten()).collect())
                        .unwrap_or_default()
                })
            });
            running.retain(|_, w| w.pid().is_ok());
            for db in databases {
                if running.contains_key(&db) {
                    continue;
                }
                let started = BackgroundWorkerBuilder::new(&format!("tsbucket worker for {db}"))
                    .set_type(WORKER_TYPE)
                    .set_library("tsbucket")
                    .set_function("tsbucket_db_worker_main")
                    .enable_spi_access()
                    .set_extra(&db)
                    .set_restart_time(None)
                    .set_notify_pid(unsafe { pg_sys::MyProcPid })
                    .load_dynamic();
                if let Ok(worker) = started {
                    running.insert(db, worker);
                }
            }
        }
        let interval = Duration::from_secs(gucs::WORKER_INTERVAL.get().max(1) as u64);
        if !BackgroundWorker::wait_latch(Some(interval)) {
            break;
        }
    }
}

#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn tsbucket_db_worker_main(_arg: pg_sys::Datum) {
    // Default handlers: SIGTERM ends the worker at once, rolling back its transaction.
    unsafe { pg_sys::BackgroundWorkerUnblockSignals() };
    let db = BackgroundWorker::get_extra().to_string();
    BackgroundWorker::connect_worker_to_spi(Some(&db), None);
    let tables: Vec<pg_sys::Oid> = BackgroundWorker::transaction(|| {
        let installed = Spi::get_one::<bool>("SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'tsbucket')")
            .ok()
            .flatten()
            .unwrap_or(false);
        if !installed {
            return Vec::new();
        }
        Spi::connect(|c| {
            c.select("SELECT relid FROM tsbucket.catalog ORDER BY relid", None, &[])
                .map(|rows| rows.filter_map(|r| r.get::<pg_sys::Oid>(1).ok().flatten()).collect())
                .unwrap_or_default()
        })
    });
    for relid in tables {
        // One short transaction per table; _run_jobs records its own errors.
        BackgroundWorker::transaction(|| {
            let _ = Spi::run_with_args("SELECT tsbucket._run_jobs($1)", &[relid.into()]);
        });
    }
}

/// DROP DATABASE: end our worker in that database so the drop need not wait.
pub fn stop_workers_in(dbname: &str) {
    let pids: Vec<i32> = Spi::connect(|c| {
        c.select(
            "SELECT pid FROM pg_stat_activity WHERE datname = $1 AND backend_type = $2",
            None,
            &[dbname.into(), WORKER_TYPE.into()],
        )
        .map(|rows| rows.filter_map(|r| r.get::<i32>(1).ok().flatten()).collect())
        .unwrap_or_default()
    });
    for pid in pids {
        unsafe { libc::kill(pid, libc::SIGTERM) };
    }
}
