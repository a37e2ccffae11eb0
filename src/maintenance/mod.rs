//! Maintenance: compaction of under-filled buckets, whole-bucket expiry,
//! column statistics from a sample of buckets, and the background launcher
//! and workers that run them without anyone calling.
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
//! twice within an interval however workers start, exit or fail; except that
//! a database whose transactions wrote `tsbucket.tail_drain_rows` rows to
//! tails since its last visit is due at once (the committing backend wakes
//! the launcher), which bounds how much waits in tails; and a drain that
//! left rows waiting marks its database dirty, to come back. Databases
//! with nothing due are not visited at all; a visit that finds nothing to do
//! costs a catalog look-up.
//!
//! A worker runs `tsbucket._run_jobs` for each time-series table, each in a
//! transaction of its own, and exits. SIGTERM ends it at once (its
//! transaction rolls back); a DROP DATABASE signals the worker there first.

pub mod analyze;
pub mod compact;
pub mod drain;
pub mod expire;
pub mod launcher;
pub mod schedule;
pub mod worker;
