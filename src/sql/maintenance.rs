//! SQL functions behind maintenance: compaction, expiry, statistics, and the
//! worker's own notices.

use pgrx::pg_sys;
use pgrx::prelude::*;

/// `max_groups` bounds the series-windows merged in one call (NULL: all).
#[pg_extern]
fn _compact(
    relid: pg_sys::Oid,
    max_groups: default!(Option<i32>, "NULL"),
) -> TableIterator<'static, (name!(buckets_before, i64), name!(buckets_after, i64), name!(rows_moved, i64))> {
    crate::catalog::privileges::require_owner(relid);
    // SAFETY: compact's contract: this SQL function runs in the caller's transaction, and require_owner above checked
    // that the caller may compact `relid`; compact opens, locks and closes the relations it reads.
    let c = unsafe { crate::maintenance::compact::compact(relid, max_groups.map_or(usize::MAX, |n| n.max(1) as usize), false) };
    TableIterator::once((c.before, c.after, c.rows_moved))
}

/// The background worker's compaction round: as `_compact`, except that
/// windows that have not ended keep their buckets growing size-tiered
/// (src/maintenance/compact.rs); `deferred` counts the series-windows left so.
#[pg_extern]
fn _compact_round(
    relid: pg_sys::Oid,
    max_groups: i32,
) -> TableIterator<'static, (name!(buckets_before, i64), name!(buckets_after, i64), name!(rows_moved, i64), name!(deferred, i64))> {
    crate::catalog::privileges::require_owner(relid);
    // SAFETY: as for _compact: the caller's transaction, its ownership checked just above.
    let c = unsafe { crate::maintenance::compact::compact(relid, max_groups.max(1) as usize, true) };
    TableIterator::once((c.before, c.after, c.rows_moved, c.deferred))
}

/// Whole-bucket expiry for `tsbucket.expire` and the worker. The caller must
/// own the table.
#[pg_extern]
fn _expire(relid: pg_sys::Oid) -> TableIterator<'static, (name!(buckets_expired, i64), name!(rows_expired, i64))> {
    crate::catalog::privileges::require_owner(relid);
    TableIterator::once(crate::maintenance::expire::expire(relid))
}

/// The background worker's (and anyone's) way in: ANALYZE of one table.
#[pg_extern]
fn _analyze(relation: pg_sys::Oid) {
    crate::maintenance::analyze::analyze(relation);
}

/// Called by the extension script: this database has the extension once the
/// CREATE EXTENSION commits.
#[pg_extern]
fn _extension_created() {
    crate::maintenance::schedule::note_extension_created();
}

/// A table was configured or its expiry changed: visit this database at its
/// next turn.
#[pg_extern]
fn _worker_notice() {
    crate::maintenance::schedule::note_work();
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
    TableIterator::new(crate::maintenance::schedule::status())
}

/// Refuses to run `what` inside a transaction block (25001, as VACUUM): on a
/// Citus table it works through each shard's own transaction
/// (run_command_on_shards), which a rollback of the caller's would not undo.
#[pg_extern]
fn _outside_transaction_block(what: &str) {
    // SAFETY: IsTransactionBlock and IsSubTransaction read this backend's transaction state; no pointers.
    let (block, sub) = unsafe { (pg_sys::IsTransactionBlock(), pg_sys::IsSubTransaction()) };
    if block || sub {
        crate::pg::error::ts_error(
            pgrx::PgSqlErrorCode::ERRCODE_ACTIVE_SQL_TRANSACTION,
            &format!("{what} cannot run inside a transaction block"),
            "On a distributed table it runs on each shard in a transaction of its own, which a rollback here would not undo: run it on its own.",
        );
    }
}
