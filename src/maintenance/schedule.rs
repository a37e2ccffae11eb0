//! What the launcher knows of each database, in shared memory: whether it
//! lacks the extension, whether buckets were written there since its last
//! visit, whether it has expiry, when it was last visited.

use pgrx::pg_sys;
use pgrx::prelude::*;
use pgrx::lwlock::PgLwLock;
use pgrx::shmem::PGRXSharedMemory;

pub(super) const MAX_DATABASES: usize = 1024;

#[derive(Copy, Clone, Default)]
pub(super) struct DbEntry {
    pub(super) oid: u32,
    /// A worker found no extension here; cleared by CREATE EXTENSION.
    pub(super) absent: bool,
    /// Buckets written since the last visit (work for compaction).
    pub(super) dirty: bool,
    /// Some table here expires buckets: visit every interval.
    pub(super) has_expiry: bool,
    /// Launcher clock (ms since it started) of the last visit; 0 = never.
    pub(super) last_visit_ms: u64,
    /// Workers started for this database since the launcher started.
    pub(super) visits: u64,
    /// Bumped when a CREATE EXTENSION tsbucket commits here: a worker that
    /// began before that must not mark the database absent.
    pub(super) generation: u64,
    /// Rows committed to tails since the last visit began.
    pub(super) tail_rows: u64,
    /// Enough of them to drain now (`tsbucket.tail_drain_rows`).
    pub(super) drain_now: bool,
    /// A worker was started here and has not reached its visit's end (it
    /// failed to start, failed or was stopped midway): due again at the next
    /// interval.
    pub(super) unfinished: bool,
}

#[derive(Copy, Clone)]
pub(super) struct Databases {
    pub(super) n: usize,
    pub(super) entries: [DbEntry; MAX_DATABASES],
    /// The launcher's process id (0: none running), for waking it.
    pub(super) launcher_pid: i32,
}

impl Default for Databases {
    fn default() -> Self {
        Databases { n: 0, entries: [DbEntry::default(); MAX_DATABASES], launcher_pid: 0 }
    }
}

impl Databases {
    pub(super) fn find(&self, oid: u32) -> Option<usize> {
        self.entries[..self.n].iter().position(|e| e.oid == oid)
    }

    pub(super) fn entry(&mut self, oid: u32) -> Option<&mut DbEntry> {
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

// SAFETY: PgLwLock::new asks for a name no other lock uses: "tsbucket_databases" is this extension's alone, and
// init_shmem (pg_shmem_init!) attaches it to its shared memory before the launcher or any backend uses it.
pub(super) static DATABASES: PgLwLock<Databases> = unsafe { PgLwLock::new(c"tsbucket_databases") };

/// Shared memory exists only when the library was preloaded.
static mut SHMEM_READY: bool = false;

/// Asks for the databases' shared memory (from _PG_init, when preloaded).
pub(super) fn init_shmem() {
    pgrx::pg_shmem_init!(DATABASES);
    // SAFETY: SHMEM_READY is written only here, from _PG_init in the postmaster while it loads preloaded libraries,
    // before it forks any process, so no read races with this write.
    unsafe { SHMEM_READY = true };
}

pub(super) fn shmem_ready() -> bool {
    // SAFETY: a copy of SHMEM_READY, which init_shmem writes once in the postmaster before any backend forks (each
    // inherits the value); this process never writes it afterwards.
    unsafe { SHMEM_READY }
}

pub(super) fn my_database() -> u32 {
    // SAFETY: MyDatabaseId is an Oid global this backend sets once when it connects to its database, only read here.
    unsafe { pg_sys::MyDatabaseId }.to_u32()
}

pub(super) fn update_my_database(f: impl FnOnce(&mut DbEntry)) {
    if shmem_ready()
        && let Some(e) = DATABASES.exclusive().entry(my_database())
    {
        f(e)
    }
}

/// Tail rows a backend counts before it passes them on to shared memory.
const TAIL_ROWS_BATCH: u64 = 100;

thread_local! {
    static PENDING_TAIL_ROWS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    /// This transaction created the extension: tell the launcher when (and
    /// only if) it commits, so that a worker visiting meanwhile cannot take
    /// the news as handled before it is visible.
    static CREATED_EXTENSION: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Transaction end: pass on what committed work means for the launcher
/// (`wrote`: buckets were written, so compaction may have work; `tail_rows`:
/// rows written to tails, which wake the launcher once there are enough).
pub fn at_transaction_end(committed: bool, wrote: bool, tail_rows: u64) {
    let created = CREATED_EXTENSION.with(|c| c.replace(false));
    if !committed || !shmem_ready() || !(wrote || created || tail_rows > 0) {
        return;
    }
    if tail_rows > 0 {
        let threshold = crate::catalog::gucs::TAIL_DRAIN_ROWS.get().max(1) as u64;
        // Counted here first and passed on in batches: every commit of a
        // single row taking the shared lock exclusively would serialize them.
        let pending = PENDING_TAIL_ROWS.with(|p| p.get()) + tail_rows;
        let known_dirty = {
            let set = DATABASES.share();
            set.find(my_database()).is_some_and(|i| set.entries[i].dirty)
        };
        if known_dirty && pending < TAIL_ROWS_BATCH.min(threshold) && !created {
            PENDING_TAIL_ROWS.with(|p| p.set(pending));
            return;
        }
        PENDING_TAIL_ROWS.with(|p| p.set(0));
        let tail_rows = pending;
        let mut wake = 0;
        {
            let mut set = DATABASES.exclusive();
            let launcher = set.launcher_pid;
            if let Some(e) = set.entry(my_database()) {
                e.dirty = true;
                e.tail_rows += tail_rows;
                if e.tail_rows >= threshold && !e.drain_now {
                    e.drain_now = true;
                    wake = launcher;
                }
            }
        }
        if wake > 0 {
            // SIGUSR1 sets the launcher's latch (procsignal's handler), which wakes it to start a worker here.
            // SAFETY: kill(2) to the launcher's pid, recorded by the launcher itself; a stale pid gets a harmless signal or ESRCH.
            unsafe { libc::kill(wake, libc::SIGUSR1) };
        }
        if !created {
            return;
        }
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

/// The extension script ran: this database has the extension once the
/// CREATE EXTENSION commits.
pub fn note_extension_created() {
    CREATED_EXTENSION.with(|c| c.set(true));
}

/// A table was configured or its expiry changed: visit this database at its
/// next turn (which also finds out whether it has expiry now).
pub fn note_work() {
    update_my_database(|e| e.dirty = true);
}

/// What the launcher knows of each database: (database, visits, pending
/// writes, has expiry, extension absent).
pub fn status() -> Vec<(pg_sys::Oid, i64, bool, bool, bool)> {
    if !shmem_ready() {
        return Vec::new();
    }
    let set = DATABASES.share();
    set.entries[..set.n].iter().map(|e| (pg_sys::Oid::from(e.oid), e.visits as i64, e.dirty, e.has_expiry, e.absent)).collect()
}
