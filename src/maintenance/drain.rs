//! The tail's side of a compaction (src/store/tail.rs says what the tail is):
//! segments drained earlier that no snapshot still reads are truncated and
//! unmarked; "current" moves to an empty segment; the segments no writer
//! holds any more are locked for draining. Their rows are then merged into
//! buckets by `compact`, which marks the segments drained, records where each
//! row went (the moves table, as for a rewritten bucket) and commits it all
//! in one transaction.

use crate::catalog::config::{Config, TailConfig};
use crate::pg::error::ts_error;
use crate::store::tail;
use pgrx::pg_sys;
use pgrx::prelude::*;

/// How long a drain waits for the writers of the segment it just closed.
const LOCK_TRIES: u32 = 100;
const LOCK_WAIT_US: i64 = 10_000;

/// Prepares a drain of `config`'s tail: the segments now locked for it
/// (ExclusiveLock until the transaction ends). Under REPEATABLE READ or
/// SERIALIZABLE nothing is drained: a drain must see every row its segment
/// holds, which only a snapshot taken after its lock does (the worker runs
/// at READ COMMITTED).
///
/// # Safety
/// In a transaction, holding the table's ShareUpdateExclusiveLock (one
/// compaction at a time), before the compaction takes its snapshot.
pub(super) unsafe fn prepare(config: &Config) -> Vec<usize> {
    let Some(tail) = tail::of(config) else { return Vec::new() };
    // SAFETY: XactIsoLevel is the backend's isolation level global, read by value in a transaction.
    if unsafe { pg_sys::XactIsoLevel } >= pg_sys::XACT_REPEATABLE_READ as i32 {
        return Vec::new();
    }
    // SAFETY: in a transaction (the contract); the latest snapshot is registered for the look-up and unregistered after.
    let mut marked = unsafe {
        let latest = pg_sys::RegisterSnapshot(pg_sys::GetLatestSnapshot());
        let marks = tail::drained(config, tail, latest);
        pg_sys::UnregisterSnapshot(latest);
        marks
    };
    let mut emptied = [false; tail::SEGMENTS];
    for segment in 0..tail::SEGMENTS {
        // SAFETY: in a transaction, under the table's maintenance lock (the contract).
        if marked[segment] && unsafe { empty_if_unread(config, tail, segment) } {
            marked[segment] = false;
            emptied[segment] = true;
        }
    }
    let blocks: Vec<u32> = tail.segments.iter().map(|&s| segment_blocks(s)).collect();
    let mut current = tail::current_segment(config, tail);
    // Rows this round leaves in the tail bring the worker back at its next
    // interval: no write may come to make the database due again (after a
    // crash, recovery brings back rows no process counted).
    let mut left = false;
    if blocks[current] > 0 {
        // Never one emptied by this transaction: "current" is a sequence,
        // which a rollback (an error, a crash) does not undo, while it would
        // bring back the segment's rows and its mark, and rows committed to a
        // marked segment are never read. (Writers would also wait for its lock.)
        // The current segment then waits for the next round.
        let free = (0..tail::SEGMENTS).filter(|&s| s != current && !marked[s] && blocks[s] == 0 && !emptied[s]);
        if let Some(next) = free.clone().next() {
            tail::set_current_segment(config, tail, next);
            current = next;
        } else {
            left = true;
        }
    }
    let mut locked = Vec::new();
    for segment in 0..tail::SEGMENTS {
        if segment == current || marked[segment] || blocks[segment] == 0 {
            continue;
        }
        // SAFETY: in a transaction; the lock is kept to its end.
        if unsafe { lock_waiting_briefly(tail.segments[segment], pg_sys::ExclusiveLock as i32) } {
            locked.push(segment);
        } else {
            left = true;
        }
    }
    if left {
        super::schedule::update_my_database(|e| e.dirty = true);
    }
    locked
}

fn segment_blocks(relid: pg_sys::Oid) -> u32 {
    // SAFETY: `relid` is a tail segment, opened AccessShare only to read its length, then closed with the lock kept.
    unsafe {
        let rel = pg_sys::table_open(relid, pg_sys::AccessShareLock as i32);
        let blocks = pg_sys::RelationGetNumberOfBlocksInFork(rel, pg_sys::ForkNumber::MAIN_FORKNUM);
        pg_sys::table_close(rel, pg_sys::NoLock as i32);
        blocks
    }
}

/// Takes `mode` on `relid` if no other transaction holds a conflicting lock,
/// trying for up to a second: the writers of a segment just closed finish
/// their commits within milliseconds, but one that is prepared (two-phase) or
/// long-running keeps it, and the drain leaves that segment for its next round.
///
/// # Safety
/// In a transaction.
unsafe fn lock_waiting_briefly(relid: pg_sys::Oid, mode: i32) -> bool {
    for _ in 0..LOCK_TRIES {
        // SAFETY: in a transaction (the contract); the lock, once granted, is kept to its end.
        if unsafe { pg_sys::ConditionalLockRelationOid(relid, mode) } {
            return true;
        }
        // SAFETY: a plain sleep of this backend.
        unsafe { pg_sys::pg_usleep(LOCK_WAIT_US) };
        pgrx::check_for_interrupts!();
    }
    false
}

/// Empties drained segment `segment` (TRUNCATE, its mark and its moves
/// entries deleted) once no snapshot can miss its mark: the transaction that
/// marked it precedes every running snapshot's xmin. Returns whether it did.
///
/// # Safety
/// In a transaction, under the table's maintenance lock.
unsafe fn empty_if_unread(config: &Config, tail: &TailConfig, segment: usize) -> bool {
    let relid = tail.segments[segment];
    let marked_by: Option<i64> = crate::pg::role::as_user(config.id_owner, false, || {
        Spi::get_one_with_args(
            "SELECT xmin::text::bigint FROM tsbucket.tail_drained WHERE relid = $1 AND segment = $2",
            &[config.relid.into(), (segment as i16).into()],
        )
        .ok()
        .flatten()
    });
    let Some(marked_by) = marked_by else { return false };
    // SAFETY: the segment is opened AccessShare to ask for its horizon (the oldest xmin a snapshot of this database may
    // still read it with), then closed with the lock kept.
    let horizon = unsafe {
        let rel = pg_sys::table_open(relid, pg_sys::AccessShareLock as i32);
        let h = pg_sys::GetOldestNonRemovableTransactionId(rel);
        pg_sys::table_close(rel, pg_sys::NoLock as i32);
        h
    };
    let marked_by = pg_sys::TransactionId::from(marked_by as u32);
    // SAFETY: TransactionIdPrecedes compares two transaction ids modulo wrap-around; it reads nothing else.
    if !unsafe { pg_sys::TransactionIdPrecedes(marked_by, horizon) } {
        return false;
    }
    // No reader may be inside it either (one that began before the mark and has not finished).
    // SAFETY: in a transaction (the contract); a lock granted is kept to its end.
    if !unsafe { pg_sys::ConditionalLockRelationOid(relid, pg_sys::AccessExclusiveLock as i32) } {
        return false;
    }
    let (lo, hi) = crate::store::tid::tail_id_range(segment);
    crate::pg::role::as_user(config.id_owner, false, || {
        Spi::run(&format!("TRUNCATE {}", crate::pg::relation::qualified_name(relid))).unwrap_or_else(|e| fail(&e));
        Spi::run_with_args("DELETE FROM tsbucket.tail_drained WHERE relid = $1 AND segment = $2", &[config.relid.into(), (segment as i16).into()])
            .unwrap_or_else(|e| fail(&e));
        if let Some((moves, _)) = config.moves {
            Spi::run_with_args(
                &format!("DELETE FROM {} WHERE old_id BETWEEN $1 AND $2", crate::pg::relation::qualified_name(moves)),
                &[lo.into(), hi.into()],
            )
            .unwrap_or_else(|e| fail(&e));
        }
    });
    true
}

fn fail(e: &dyn std::fmt::Display) -> ! {
    ts_error(crate::pg::error::DATA_CORRUPTED, &format!("emptying a drained tail segment failed: {e}"), "This is a bug in tsbucket; please report it.")
}

/// Marks `segments` drained: from this transaction's commit on, scans read
/// their rows from the buckets this compaction wrote.
pub(super) fn mark_drained(config: &Config, segments: &[usize]) {
    tail::forget_checked_segments();
    if let Some(tail) = tail::of(config) {
        for &segment in segments {
            // Writers trust their last look at "current" while no relcache invalidation comes in
            // (tail::open_current): the one this commit sends tells them to look again.
            // SAFETY: the segment is a relation of this database, locked ExclusiveLock by this drain.
            unsafe { pg_sys::CacheInvalidateRelcacheByRelid(tail.segments[segment]) };
        }
    }
    crate::pg::role::as_user(config.id_owner, false, || {
        for &segment in segments {
            Spi::run_with_args("INSERT INTO tsbucket.tail_drained (relid, segment) VALUES ($1, $2)", &[config.relid.into(), (segment as i16).into()])
                .unwrap_or_else(|e| fail(&e));
        }
    });
}
