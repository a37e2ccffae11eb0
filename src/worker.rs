//! The background worker: expiry and compaction without anyone calling them.
//!
//! A launcher (started when tsbucket is in shared_preload_libraries) keeps no
//! database connection: it lists databases by reading the shared catalog
//! pg_database, as the autovacuum launcher does, so every database (postgres
//! included) can be dropped and a cluster without `postgres` is served too.
//!
//! Shared memory holds one entry per database: whether it lacks the
//! extension, whether buckets were written there since its last visit
//! (`dirty`, set by the write path), whether it has tables with expiry, and
//! when it was last visited. A database is *due* when it was never visited,
//! or when an interval has passed since its last visit and it is dirty or has
//! expiry. The launcher starts at most `tsbucket.max_workers` workers at once,
//! least recently visited first (so every due database is served in turn),
//! and stamps the visit when it starts the worker, so no database is visited
//! twice within an interval however workers start, exit or fail. Databases
//! with nothing due are not visited at all; a visit that finds nothing to do
//! costs a catalog look-up.
//!
//! A worker runs `tsbucket._run_jobs` for each time-series table, each in a
//! transaction of its own, and exits. SIGTERM ends it at once (its
//! transaction rolls back); a DROP DATABASE signals the worker there first.

use crate::gucs;
use pgrx::bgworkers::{
    BackgroundWorker, BackgroundWorkerBuilder, BackgroundWorkerStatus, BgWorkerStartTime, DynamicBackgroundWorker, SignalWakeFlags,
};
use pgrx::lwlock::PgLwLock;
use pgrx::pg_sys;
use pgrx::prelude::*;
use pgrx::shmem::PGRXSharedMemory;
use std::time::{Duration, Instant};

const WORKER_TYPE: &str = "tsbucket worker";
const MAX_DATABASES: usize = 1024;

#[derive(Copy, Clone, Default)]
pub struct DbEntry {
    oid: u32,
    /// A worker found no extension here; cleared by CREATE EXTENSION.
    absent: bool,
    /// Buckets written since the last visit (work for compaction).
    dirty: bool,
    /// Some table here expires buckets: visit every interval.
    has_expiry: bool,
    /// Launcher clock (ms since it started) of the last visit; 0 = never.
    last_visit_ms: u64,
    /// Workers started for this database since the launcher started.
    visits: u64,
    /// Bumped when a CREATE EXTENSION tsbucket commits here: a worker that
    /// began before that must not mark the database absent.
    generation: u64,
}

#[derive(Copy, Clone)]
pub struct Databases {
    n: usize,
    entries: [DbEntry; MAX_DATABASES],
}

impl Default for Databases {
    fn default() -> Self {
        Databases { n: 0, entries: [DbEntry::default(); MAX_DATABASES] }
    }
}

impl Databases {
    fn find(&self, oid: u32) -> Option<usize> {
        self.entries[..self.n].iter().position(|e| e.oid == oid)
    }

    fn entry(&mut self, oid: u32) -> Option<&mut DbEntry> {
        let i = match self.find(oid) {
            Some(i) => i,
            None if self.n < MAX_DATABASES => {
                self.entries[self.n] = DbEntry { oid, ..Default::default() };
                self.n += 1;
                self.n - 1
            }
            None => return None,
        };
        Some(&mut self.entries[i])
    }
}

// SAFETY: plain data without pointers, valid in any process that maps it.
unsafe impl PGRXSharedMemory for Databases {}

static DATABASES: PgLwLock<Databases> = unsafe { PgLwLock::new(c"tsbucket_databases") };
/// Shared memory exists only when the library was preloaded.
static mut SHMEM_READY: bool = false;

fn shmem_ready() -> bool {
    // SAFETY: written once in _PG_init of the postmaster, before any backend forks.
    unsafe { SHMEM_READY }
}

fn my_database() -> u32 {
    // SAFETY: a plain global of the backend.
    unsafe { pg_sys::MyDatabaseId }.to_u32()
}

fn update_my_database(f: impl FnOnce(&mut DbEntry)) {
    if shmem_ready()
        && let Some(e) = DATABASES.exclusive().entry(my_database())
    {
        f(e)
    }
}

thread_local! {
    /// This transaction wrote buckets / created the extension: tell the
    /// launcher when (and only if) it commits, so that a worker visiting
    /// meanwhile cannot take the news as handled before it is visible.
    static WROTE_BUCKETS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    static CREATED_EXTENSION: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// The write path wrote a bucket here: compaction may have work once this commits.
pub fn note_bucket_written() {
    WROTE_BUCKETS.with(|w| w.set(true));
}

/// Transaction end: pass on what committed work means for the launcher.
pub fn at_transaction_end(committed: bool) {
    let wrote = WROTE_BUCKETS.with(|w| w.replace(false));
    let created = CREATED_EXTENSION.with(|c| c.replace(false));
    if !committed || !shmem_ready() || !(wrote || created) {
        return;
    }
    let me = my_database();
    let already = {
        let set = DATABASES.share();
        set.find(me).is_some_and(|i| set.entries[i].dirty) && !created
    };
    if !already {
        update_my_database(|e| {
            e.dirty = true;
            if created {
                e.absent = false;
                e.generation += 1;
            }
        });
    }
}

/// Called by the extension script: this database has the extension once the
/// CREATE EXTENSION commits.
#[pg_extern]
fn _extension_created() {
    CREATED_EXTENSION.with(|c| c.set(true));
}

/// A table was configured or its expiry changed: visit this database at its
/// next turn (which also finds out whether it has expiry now).
#[pg_extern]
fn _worker_notice() {
    update_my_database(|e| e.dirty = true);
}

/// What the launcher knows of each database (README: "Background worker").
#[pg_extern]
fn worker_status() -> TableIterator<
    'static,
    (
        name!(database, pg_sys::Oid),
        name!(visits, i64),
        name!(pending_writes, bool),
        name!(has_expiry, bool),
        name!(extension_absent, bool),
    ),
> {
    let rows: Vec<_> = if shmem_ready() {
        let set = DATABASES.share();
        set.entries[..set.n]
            .iter()
            .map(|e| (pg_sys::Oid::from(e.oid), e.visits as i64, e.dirty, e.has_expiry, e.absent))
            .collect()
    } else {
        Vec::new()
    };
    TableIterator::new(rows)
}

pub fn register() {
    pgrx::pg_shmem_init!(DATABASES);
    // SAFETY: _PG_init runs in the postmaster before any other process exists.
    unsafe { SHMEM_READY = true };
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
    // SAFETY: a transaction around a plain catalog scan of a shared relation,
    // as the autovacuum launcher's get_database_list does.
    unsafe {
        pg_sys::StartTransactionCommand();
        let rel = pg_sys::table_open(pg_sys::DatabaseRelationId, pg_sys::AccessShareLock as i32);
        let scan = pg_sys::table_beginscan_catalog(rel, 0, std::ptr::null_mut());
        loop {
            let tuple = pg_sys::heap_getnext(scan, pg_sys::ScanDirection::ForwardScanDirection);
            if tuple.is_null() {
                break;
            }
            let db = &*((*tuple).t_data as *const u8).add((*(*tuple).t_data).t_hoff as usize).cast::<pg_sys::FormData_pg_database>();
            if db.datallowconn && !db.datistemplate {
                out.push(db.oid.to_u32());
            }
        }
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
    loop {
        if BackgroundWorker::sighup_received() {
            // SAFETY: the launcher is a plain backend-like process; reloading is what SIGHUP asks.
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
                    if e.last_visit_ms == 0 {
                        due.push((0, oid));
                    } else if e.dirty || e.has_expiry {
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
                let started = BackgroundWorkerBuilder::new(&format!("tsbucket worker for database {oid}"))
                    .set_type(WORKER_TYPE)
                    .set_library("tsbucket")
                    .set_function("tsbucket_db_worker_main")
                    .enable_spi_access()
                    .set_argument(Some(pg_sys::Datum::from(oid)))
                    .set_restart_time(None)
                    // Woken when it exits, to give its slot to the next due database.
                    .set_notify_pid(unsafe { pg_sys::MyProcPid })
                    .load_dynamic();
                if let Ok(worker) = started {
                    if let Some(e) = DATABASES.exclusive().entry(oid) {
                        e.last_visit_ms = now;
                        e.visits += 1;
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
pub extern "C-unwind" fn tsbucket_db_worker_main(arg: pg_sys::Datum) {
    // SIGTERM ends the worker at its next interrupt check, rolling back its transaction.
    // SAFETY: installs Postgres's own handler before signals are unblocked.
    unsafe {
        libc::signal(libc::SIGTERM, postgres_die as *const () as libc::sighandler_t);
        pg_sys::BackgroundWorkerUnblockSignals();
    }
    let db = pg_sys::Oid::from(arg.value() as u32);
    BackgroundWorker::connect_worker_to_spi_by_oid(Some(db), None);
    // Maintenance sees what committed before it took each table's lock
    // (README "Background worker"), whatever isolation the DBA made the default.
    // SAFETY: sets a GUC of this process before its first transaction.
    unsafe {
        pg_sys::SetConfigOption(
            c"default_transaction_isolation".as_ptr(),
            c"read committed".as_ptr(),
            pg_sys::GucContext::PGC_SUSET,
            pg_sys::GucSource::PGC_S_OVERRIDE,
        )
    };
    // Commits from now on make the next visit due; read the generation before
    // this visit's snapshot, so a CREATE EXTENSION committing after it is not lost.
    let generation = {
        let mut g = 0;
        update_my_database(|e| {
            e.dirty = false;
            g = e.generation;
        });
        g
    };
    let tables: Vec<(pg_sys::Oid, bool)> = BackgroundWorker::transaction(|| {
        let installed = crate::catalog::installed_version();
        let library = env!("CARGO_PKG_VERSION");
        if let Some(sql) = installed.as_deref().filter(|v| *v != library) {
            // The catalog may not be what this library reads: leave the database
            // alone until ALTER EXTENSION tsbucket UPDATE (which calls
            // _extension_created) makes it due again.
            log!(
                "tsbucket: skipping maintenance of database {}: its tsbucket SQL is version {sql}, the library {library}; run ALTER EXTENSION tsbucket UPDATE there",
                u32::from(db)
            );
        }
        if installed.as_deref() != Some(library) {
            update_my_database(|e| {
                if e.generation == generation {
                    e.absent = true;
                }
            });
            return Vec::new();
        }
        Spi::connect(|c| {
            c.select(
                "SELECT c.relid, c.expire_after IS NOT NULL OR EXISTS (SELECT 1 FROM tsbucket.series_retention_data r WHERE r.relid = c.relid)
                   FROM tsbucket.catalog c ORDER BY c.relid",
                None,
                &[],
            )
            .map(|rows| rows.filter_map(|r| Some((r.get::<pg_sys::Oid>(1).ok()??, r.get::<bool>(2).ok()??))).collect())
            .unwrap_or_default()
        })
    });
    let has_expiry = tables.iter().any(|(_, e)| *e);
    update_my_database(|e| e.has_expiry = has_expiry);
    for (relid, _) in tables {
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
        // SAFETY: signalling a process id Postgres reported as one of our workers.
        unsafe { libc::kill(pid, libc::SIGTERM) };
    }
}
