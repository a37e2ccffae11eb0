//! A database's worker: expiry, compaction and statistics for each of its
//! time-series tables, a transaction each, then it exits.

use crate::maintenance::schedule::update_my_database;
use super::launcher::WORKER_TYPE;
use pgrx::pg_sys;
use pgrx::bgworkers::BackgroundWorker;
use pgrx::prelude::*;

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
    // SAFETY: `die` is Postgres's async-signal-safe SIGTERM handler (it only sets flags and the latch); installed with
    // libc::signal before BackgroundWorkerUnblockSignals lets any signal reach this worker.
    unsafe {
        libc::signal(libc::SIGTERM, postgres_die as *const () as libc::sighandler_t);
        pg_sys::BackgroundWorkerUnblockSignals();
    }
    let db = pg_sys::Oid::from(arg.value() as u32);
    BackgroundWorker::connect_worker_to_spi_by_oid(Some(db), None);
    // Maintenance sees what committed before it took each table's lock
    // (README "Background worker"), whatever isolation the DBA made the default.
    // SAFETY: SetConfigOption gets two NUL-terminated static strings and changes default_transaction_isolation of this
    // worker only, after connecting and before its first transaction, with a value the GUC accepts.
    unsafe {
        pg_sys::SetConfigOption(
            c"default_transaction_isolation".as_ptr(),
            c"read committed".as_ptr(),
            pg_sys::GucContext::PGC_SUSET,
            pg_sys::GucSource::PGC_S_OVERRIDE,
        )
    };
    // On a Citus node the shards are this node's tables to maintain; Citus
    // refuses changes to them, and hides them from background workers, unless
    // told otherwise (its own shard operations do the same).
    for (name, value) in [(c"citus.enable_manual_changes_to_shards", c"on"), (c"citus.show_shards_for_app_name_prefixes", c"*")] {
        // SAFETY: GetConfigOption with missing_ok reads the GUC table (NULL when Citus is not loaded); SetConfigOption gets
        // NUL-terminated static strings, for this worker only, values both GUCs accept.
        unsafe {
            if !pg_sys::GetConfigOption(name.as_ptr(), true, false).is_null() {
                pg_sys::SetConfigOption(name.as_ptr(), value.as_ptr(), pg_sys::GucContext::PGC_SUSET, pg_sys::GucSource::PGC_S_OVERRIDE);
            }
        }
    }
    // Commits from now on make the next visit due; read the generation before
    // this visit's snapshot, so a CREATE EXTENSION committing after it is not lost.
    let generation = {
        let mut g = 0;
        update_my_database(|e| {
            e.dirty = false;
            e.tail_rows = 0;
            e.drain_now = false;
            g = e.generation;
        });
        g
    };
    // None: the extension is absent here, or its SQL is another version's.
    let tables: Option<Vec<(pg_sys::Oid, bool)>> = BackgroundWorker::transaction(|| {
        let installed = crate::catalog::config::installed_version();
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
                e.unfinished = false;
            });
            return None;
        }
        Some(Spi::connect(|c| {
            c.select(
                // A Citus table's shell holds no rows (its shards do, here or on other nodes).
                "SELECT c.relid, c.expire_after IS NOT NULL OR EXISTS (SELECT 1 FROM tsbucket.series_retention_data r WHERE r.relid = c.relid)
                   FROM tsbucket.catalog c WHERE NOT tsbucket._citus_table(c.relid) ORDER BY c.relid",
                None,
                &[],
            )
            .map(|rows| rows.filter_map(|r| Some((r.get::<pg_sys::Oid>(1).ok()??, r.get::<bool>(2).ok()??))).collect())
            .unwrap_or_default()
        }))
    });
    // Without the extension's catalog there is nothing more to read here.
    let Some(tables) = tables else { return };
    let has_expiry = tables.iter().any(|(_, e)| *e);
    update_my_database(|e| e.has_expiry = has_expiry);
    for (relid, _) in tables {
        // One short transaction per table; _run_jobs records its own errors.
        BackgroundWorker::transaction(|| {
            let _ = Spi::run_with_args("SELECT tsbucket._run_jobs($1)", &[relid.into()]);
        });
    }
    // A drained tail segment is emptied on a later visit, once no snapshot can
    // still read it: come back.
    let segments_waiting = BackgroundWorker::transaction(|| Spi::get_one::<bool>("SELECT EXISTS (SELECT 1 FROM tsbucket.tail_drained)").ok().flatten());
    if segments_waiting == Some(true) {
        update_my_database(|e| e.dirty = true);
    }
    update_my_database(|e| e.unfinished = false);
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
        // SAFETY: libc::kill only sends SIGTERM to `pid`, which pg_stat_activity reported as a tsbucket worker of
        // database `dbname`; it touches no memory of this process.
        unsafe { libc::kill(pid, libc::SIGTERM) };
    }
}
