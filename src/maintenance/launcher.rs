//! The launcher: lists the databases from the shared catalog, without a
//! connection to any, and starts a worker for each due database in turn.

use crate::catalog::gucs;
use crate::maintenance::schedule::{DATABASES, DbEntry};
use pgrx::pg_sys;
use pgrx::bgworkers::{BackgroundWorker, BackgroundWorkerBuilder, BackgroundWorkerStatus, BgWorkerStartTime, DynamicBackgroundWorker, SignalWakeFlags};
use pgrx::prelude::*;
use std::time::{Duration, Instant};

pub(super) const WORKER_TYPE: &str = "tsbucket worker";

pub fn register() {
    crate::maintenance::schedule::init_shmem();
    BackgroundWorkerBuilder::new("tsbucket launcher")
        .set_type("tsbucket launcher")
        .set_library("tsbucket")
        .set_function("tsbucket_launcher_main")
        // A connection to no database: enough to read the shared catalog.
        .enable_spi_access()
        .set_start_time(BgWorkerStartTime::RecoveryFinished)
        .set_restart_time(Some(Duration::from_secs(10)))
        .load();
}

/// Databases that accept connections, read from the shared catalog without
/// being connected to any database.
fn list_databases() -> Vec<u32> {
    let mut out = Vec::new();
    // SAFETY: the launcher is between transactions here and may start one; pg_database is a shared catalog, readable
    // without a database connection, opened under AccessShareLock until the table_close below, as the autovacuum
    // launcher's get_database_list does.
    let (rel, scan) = unsafe {
        pg_sys::StartTransactionCommand();
        let rel = pg_sys::table_open(pg_sys::DatabaseRelationId, pg_sys::AccessShareLock as i32);
        (rel, pg_sys::table_beginscan_catalog(rel, 0, std::ptr::null_mut()))
    };
    loop {
        // SAFETY: `scan` is the pg_database catalog scan begun above; it is ended only after this loop.
        let tuple = unsafe { pg_sys::heap_getnext(scan, pg_sys::ScanDirection::ForwardScanDirection) };
        if tuple.is_null() {
            break;
        }
        // SAFETY: `tuple` is the non-NULL pg_database row heap_getnext just returned, valid until its next call; its
        // data from t_hoff on starts with the fixed-length FormData_pg_database, read here before that call.
        let db = unsafe { &*((*tuple).t_data as *const u8).add((*(*tuple).t_data).t_hoff as usize).cast::<pg_sys::FormData_pg_database>() };
        // datconnlimit -2: a database an interrupted DROP DATABASE left invalid, which refuses connections (as
        // autovacuum's get_database_list skips it); a worker there would fail at every interval.
        if db.datallowconn && !db.datistemplate && db.datconnlimit != -2 {
            out.push(db.oid.to_u32());
        }
    }
    // SAFETY: `scan` and `rel` are the scan and relation opened above, each ended once here, with the lock taken by
    // table_open; the commit ends the transaction StartTransactionCommand began.
    unsafe {
        pg_sys::table_endscan(scan);
        pg_sys::table_close(rel, pg_sys::AccessShareLock as i32);
        pg_sys::CommitTransactionCommand();
    }
    out
}

#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn tsbucket_launcher_main(_arg: pg_sys::Datum) {
    BackgroundWorker::attach_signal_handlers(SignalWakeFlags::SIGHUP | SignalWakeFlags::SIGTERM);
    BackgroundWorker::connect_worker_to_spi(None, None);
    let clock = Instant::now();
    // The launcher's own clock: 1 + ms, so that 0 means "never visited".
    let now_ms = || clock.elapsed().as_millis() as u64 + 1;
    let mut running: Vec<(u32, DynamicBackgroundWorker)> = Vec::new();
    // SAFETY: MyProcPid is set once when this process starts and only read afterwards.
    DATABASES.exclusive().launcher_pid = unsafe { pg_sys::MyProcPid };
    loop {
        if BackgroundWorker::sighup_received() {
            // SAFETY: ProcessConfigFile(PGC_SIGHUP) rereads the configuration files in this launcher process, outside any
            // transaction, as a postmaster child does on SIGHUP (pgrx's handler only set the flag read above).
            unsafe { pg_sys::ProcessConfigFile(pg_sys::GucContext::PGC_SIGHUP) };
        }
        let interval_ms = gucs::WORKER_INTERVAL.get().max(1) as u64 * 1000;
        // A worker counts as gone once it has stopped (not while it is still starting).
        running.retain(|(_, w)| !matches!(w.pid(), Err(BackgroundWorkerStatus::Stopped | BackgroundWorkerStatus::PostmasterDied)));
        let mut next_wake_ms = interval_ms;
        if gucs::WORKER_ENABLED.get() {
            let databases = list_databases();
            let now = now_ms();
            let mut due: Vec<(u64, u32)> = Vec::new();
            {
                let mut set = DATABASES.exclusive();
                // Dropped databases leave the set.
                let kept: Vec<DbEntry> = set.entries[..set.n].iter().copied().filter(|e| databases.contains(&e.oid)).collect();
                set.entries[..kept.len()].copy_from_slice(&kept);
                set.n = kept.len();
                for &oid in &databases {
                    let Some(e) = set.entry(oid) else { continue };
                    if e.absent || running.iter().any(|(r, _)| *r == oid) {
                        continue;
                    }
                    if e.last_visit_ms == 0 || e.drain_now {
                        due.push((0, oid));
                    } else if e.dirty || e.has_expiry || e.unfinished {
                        let due_at = e.last_visit_ms + interval_ms;
                        if due_at <= now {
                            due.push((e.last_visit_ms, oid));
                        } else {
                            next_wake_ms = next_wake_ms.min(due_at - now);
                        }
                    }
                }
            }
            // Least recently visited first: every due database gets its turn.
            due.sort();
            let slots = (gucs::MAX_WORKERS.get().max(1) as usize).saturating_sub(running.len());
            for (_, oid) in due.into_iter().take(slots) {
                // SAFETY: MyProcPid is set once when this process starts and only read afterwards.
                let my_pid = unsafe { pg_sys::MyProcPid };
                let started = BackgroundWorkerBuilder::new(&format!("tsbucket worker for database {oid}"))
                    .set_type(WORKER_TYPE)
                    .set_library("tsbucket")
                    .set_function("tsbucket_db_worker_main")
                    .enable_spi_access()
                    .set_argument(Some(pg_sys::Datum::from(oid)))
                    .set_restart_time(None)
                    // Woken when it exits, to give its slot to the next due database.
                    .set_notify_pid(my_pid)
                    .load_dynamic();
                if let Ok(worker) = started {
                    if let Some(e) = DATABASES.exclusive().entry(oid) {
                        e.last_visit_ms = now;
                        e.visits += 1;
                        e.unfinished = true;
                    }
                    running.push((oid, worker));
                }
            }
        }
        if !BackgroundWorker::wait_latch(Some(Duration::from_millis(next_wake_ms.max(100)))) {
            break;
        }
    }
}
