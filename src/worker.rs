//! The background worker: expiry and compaction without anyone calling them.
//!
//! A launcher (started when tsbucket is in shared_preload_libraries) wakes
//! every `tsbucket.worker_interval` and starts one short-lived worker per
//! database that has the extension. A database is visited once to find out:
//! a worker that finds no extension records that in shared memory and leaves,
//! and the launcher skips the database until CREATE EXTENSION tsbucket runs
//! there. Otherwise the worker runs `tsbucket._run_jobs` for each
//! time-series table, each in a transaction of its own, and exits. Holding no
//! connection between runs keeps DROP DATABASE and shutdown simple; SIGTERM
//! ends a worker at once (its transaction rolls back), and a DROP DATABASE
//! signals the worker of that database first.

use crate::gucs;
use pgrx::bgworkers::{
    BackgroundWorker, BackgroundWorkerBuilder, BackgroundWorkerStatus, BgWorkerStartTime, DynamicBackgroundWorker, SignalWakeFlags,
};
use pgrx::lwlock::PgLwLock;
use pgrx::pg_sys;
use pgrx::prelude::*;
use pgrx::shmem::PGRXSharedMemory;
use std::collections::HashMap;
use std::time::Duration;

const WORKER_TYPE: &str = "tsbucket worker";
const MAX_ABSENT: usize = 1024;

/// Databases a worker found without the extension: the launcher leaves them
/// alone until CREATE EXTENSION tsbucket runs there (which removes the entry).
#[derive(Copy, Clone)]
pub struct AbsentDatabases {
    n: usize,
    oids: [u32; MAX_ABSENT],
}

impl Default for AbsentDatabases {
    fn default() -> Self {
        AbsentDatabases { n: 0, oids: [0; MAX_ABSENT] }
    }
}

unsafe impl PGRXSharedMemory for AbsentDatabases {}

static ABSENT: PgLwLock<AbsentDatabases> = unsafe { PgLwLock::new(c"tsbucket_absent_databases") };
/// Shared memory exists only when the library was preloaded.
static mut SHMEM_READY: bool = false;

fn shmem_ready() -> bool {
    unsafe { SHMEM_READY }
}

fn is_absent(db: u32) -> bool {
    shmem_ready() && {
        let set = ABSENT.share();
        set.oids[..set.n].contains(&db)
    }
}

fn mark_absent(db: u32) {
    if !shmem_ready() {
        return;
    }
    let mut set = ABSENT.exclusive();
    let n = set.n;
    if !set.oids[..n].contains(&db) && n < MAX_ABSENT {
        set.oids[n] = db;
        set.n += 1;
    }
}

fn forget(keep: impl Fn(u32) -> bool) {
    if !shmem_ready() {
        return;
    }
    let mut set = ABSENT.exclusive();
    let kept: Vec<u32> = set.oids[..set.n].iter().copied().filter(|d| keep(*d)).collect();
    set.oids[..kept.len()].copy_from_slice(&kept);
    set.n = kept.len();
}

/// Called by the extension script: this database has the extension now.
#[pg_extern]
fn _extension_created() {
    let me = unsafe { pg_sys::MyDatabaseId }.to_u32();
    forget(|d| d != me);
}

pub fn register() {
    pgrx::pg_shmem_init!(ABSENT);
    unsafe { SHMEM_READY = true };
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
            let databases: Vec<(u32, String)> = BackgroundWorker::transaction(|| {
                Spi::connect(|c| {
                    c.select("SELECT oid, datname::text FROM pg_database WHERE datallowconn AND NOT datistemplate", None, &[])
                        .map(|rows| {
                            rows.filter_map(|r| Some((r.get::<pg_sys::Oid>(1).ok()??.to_u32(), r.get::<String>(2).ok()??)))
                                .collect()
                        })
                        .unwrap_or_default()
                })
            });
            // A worker counts as gone once it has stopped (not while it is still starting).
            running.retain(|_, w| !matches!(w.pid(), Err(BackgroundWorkerStatus::Stopped | BackgroundWorkerStatus::PostmasterDied)));
            // Dropped databases leave the absent set.
            forget(|d| databases.iter().any(|(oid, _)| *oid == d));
            for (oid, db) in databases {
                if running.contains_key(&db) || is_absent(oid) {
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

// Postgres's backend SIGTERM handler. The background-worker default raises
// FATAL inside the signal handler, which turns into a PANIC (and a cluster
// restart) if the signal lands in a critical section; `die` only sets a flag
// that the next CHECK_FOR_INTERRUPTS acts on. Declared here because pgrx's
// binding is a guarded wrapper, not the C function a signal handler must be.
unsafe extern "C-unwind" {
    #[link_name = "die"]
    fn postgres_die(signal: std::ffi::c_int);
}

#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn tsbucket_db_worker_main(_arg: pg_sys::Datum) {
    // SIGTERM ends the worker at its next interrupt check, rolling back its transaction.
    unsafe {
        libc::signal(libc::SIGTERM, postgres_die as *const () as libc::sighandler_t);
        pg_sys::BackgroundWorkerUnblockSignals();
    }
    let db = BackgroundWorker::get_extra().to_string();
    BackgroundWorker::connect_worker_to_spi(Some(&db), None);
    let tables: Vec<pg_sys::Oid> = BackgroundWorker::transaction(|| {
        let installed = Spi::get_one::<bool>("SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'tsbucket')")
            .ok()
            .flatten()
            .unwrap_or(false);
        if !installed {
            mark_absent(unsafe { pg_sys::MyDatabaseId }.to_u32());
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
