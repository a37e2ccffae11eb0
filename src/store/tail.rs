//! The tail: rows that transactions left in under-filled buckets wait here,
//! one heap tuple each, until a drain merges them into buckets
//! (maintenance::compact). A tail has three segments, plain heap tables
//! (WAL-logged, no indexes, no autovacuum): the time, the meta values and the
//! other columns encoded as one row (tsbucket_format::row, keyed by column
//! number, so ADD and DROP COLUMN need no change to them).
//!
//! New rows go to the current segment, the value of a sequence (read and set
//! outside transactions). A writer locks the segment RowExclusive and reads
//! the value again (or trusts its last read, briefly, while no relcache
//! invalidation came in: `open_current`): if a drain moved it meanwhile, the
//! writer goes to the new one. A drain moves "current" to an empty segment (never one it emptied
//! itself: the sequence would outlive a rollback of the emptying), then tries
//! ExclusiveLock on the old one for up to a second, until its writers (and DML on its
//! rows, which locks the segment RowExclusive and, holding it, checks for a
//! mark: `drained_now`): a snapshot taken then sees every row it will ever
//! hold. The drain writes those rows into buckets and marks
//! the segment drained (a row of tsbucket.tail_drained), in one transaction.
//! Scans whose snapshot sees the mark read the buckets and skip the segment;
//! older ones read the segment. Once no snapshot can miss the mark, the
//! segment is truncated, the mark deleted, and the segment is empty for reuse.

use crate::catalog::config::{Config, TailConfig};
use crate::catalog::shape::{Role, TableShape};
use crate::pg::datum;
use crate::pg::error::{DATA_CORRUPTED, SERIALIZATION_FAILURE, ts_error};
use super::bucket::{COL_FIRST_META, LoadedBucket, StoredBucket, TailRowIds};
use super::slot::Version;
use pgrx::pg_sys;
use rustc_hash::FxHashMap as HashMap;
use std::rc::Rc;
use tsbucket_format::Column;
use tsbucket_format::row::{RowReader, encode_columns_row, push_value};
use tsbucket_format::window::pg_window_start;

pub const SEGMENTS: usize = 3;

/// The tail of `config`'s table; tables made before tails have none.
pub fn of(config: &Config) -> Option<&TailConfig> {
    config.tail.as_ref()
}

// ---- the current segment ----

/// The segment new rows go to: the current sequence's value, read now (not
/// as of any snapshot), as the extension owner (the sequence has no grants).
pub fn current_segment(config: &Config, tail: &TailConfig) -> usize {
    let value = crate::pg::role::as_user(config.id_owner, false, || {
        // SAFETY: pg_sequence_last_value takes one non-NULL regclass, the tail's sequence, and returns its value (NULL
        // before the first setval, read as 0); as_user runs it as the owner, whom its privilege check admits.
        unsafe { pgrx::direct_function_call::<i64>(pg_sys::pg_sequence_last_value, &[pgrx::IntoDatum::into_datum(tail.current)]) }
    });
    value.unwrap_or(0).clamp(0, SEGMENTS as i64 - 1) as usize
}

/// Makes `segment` the one new rows go to (a drain's first step).
pub fn set_current_segment(config: &Config, tail: &TailConfig, segment: usize) {
    crate::pg::role::as_user(config.id_owner, false, || {
        // SAFETY: setval_oid takes the tail sequence's oid and a non-NULL int8 within its bounds (0..2), run as the owner.
        unsafe {
            pgrx::direct_function_call::<i64>(
                pg_sys::setval_oid,
                &[pgrx::IntoDatum::into_datum(tail.current), pgrx::IntoDatum::into_datum(segment as i64)],
            )
        }
    });
}

/// Opens the current segment locked RowExclusive, re-reading "current" once
/// the lock is held: a drain that moved it meanwhile waits for this
/// transaction if the value still names the segment locked, and the writer
/// follows it otherwise.
///
/// # Safety
/// In a transaction.
unsafe fn open_current(config: &Config, tail: &TailConfig) -> (usize, pg_sys::Relation) {
    // Only a read made with the lock held counts; the one before it can be a guess: this backend's last answer
    // for the table. A guess is only tried without waiting. Once its lock is held, the guess stands without a
    // second read of the sequence if no relcache invalidation came in since it was read, and it was read less
    // than GUESS_TRUSTED_US ago. Safety rests on the invalidation: a drain that marks a segment invalidates it
    // in the same transaction, so a drain of the guessed segment that committed before this lock was first
    // taken shows (taking a lock takes in every invalidation committed before it; one held since earlier in
    // this transaction excludes the drain). A drain that has not committed waits for this lock and reads these
    // rows. Progress rests on the age: a drain that moved "current" tries the old segment's lock for a second
    // without queueing for it, and writers that trusted their guess forever would keep it busy.
    if let Some((guess, generation, read_at)) = LAST_CURRENT.with(|l| l.borrow().get(&config.relid).copied()) {
        let oid = tail.segments[guess];
        // SAFETY: a lock on one of the tail's segments, kept to the transaction's end if the guess is right.
        if unsafe { pg_sys::ConditionalLockRelationOid(oid, pg_sys::RowExclusiveLock as i32) } {
            let now_generation = crate::catalog::config::relcache_generation();
            // SAFETY: GetCurrentTimestamp reads the clock; it has no preconditions.
            let now = unsafe { pg_sys::GetCurrentTimestamp() };
            if now_generation == generation && now.saturating_sub(read_at) < GUESS_TRUSTED_US {
                // SAFETY: the segment is locked RowExclusive just above.
                return (guess, unsafe { pg_sys::table_open(oid, pg_sys::NoLock as i32) });
            }
            if current_segment(config, tail) == guess {
                LAST_CURRENT.with(|l| l.borrow_mut().insert(config.relid, (guess, now_generation, now)));
                // SAFETY: the segment is locked RowExclusive just above.
                return (guess, unsafe { pg_sys::table_open(oid, pg_sys::NoLock as i32) });
            }
            // SAFETY: undoes only the acquisition just made (an earlier one of this transaction stays held).
            unsafe { pg_sys::UnlockRelationOid(oid, pg_sys::RowExclusiveLock as i32) };
        }
    }
    let mut segment = current_segment(config, tail);
    loop {
        // SAFETY: the segment is a heap table of the tail (config's catalog row); the lock is kept to the
        // transaction's end unless the value moved, when this call's acquisition is given back.
        let rel = unsafe { pg_sys::table_open(tail.segments[segment], pg_sys::RowExclusiveLock as i32) };
        let generation = crate::catalog::config::relcache_generation();
        // SAFETY: GetCurrentTimestamp reads the clock; it has no preconditions.
        let now = unsafe { pg_sys::GetCurrentTimestamp() };
        let current = current_segment(config, tail);
        LAST_CURRENT.with(|l| l.borrow_mut().insert(config.relid, (current, generation, now)));
        if current == segment {
            return (segment, rel);
        }
        // SAFETY: `rel` was opened just above; releasing RowExclusiveLock undoes only that acquisition (an
        // earlier one of this transaction, if any, stays held).
        unsafe { pg_sys::table_close(rel, pg_sys::RowExclusiveLock as i32) };
        segment = current;
    }
}

/// How long a writer trusts its last read of "current" (µs): a drain that
/// moved it finds the old segment free within this and a commit.
const GUESS_TRUSTED_US: i64 = 100_000;

thread_local! {
    /// Per table, the current segment as this backend last read it (a guess for the next append), the
    /// relcache generation and the time when it was read.
    static LAST_CURRENT: std::cell::RefCell<HashMap<pg_sys::Oid, (usize, u64, i64)>> = std::cell::RefCell::new(HashMap::default());
    static ROWS_WRITTEN: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// How many rows this transaction wrote to tails (read, and reset, at its end).
pub fn take_rows_written() -> u64 {
    ROWS_WRITTEN.with(|r| r.replace(0))
}

/// Rows of one buffered bucket bound for the tail: its series' meta values,
/// its payload columns (time and measurements), its row count, the command
/// that wrote them.
pub struct TailRows<'a> {
    pub meta: &'a [Option<Vec<u8>>],
    pub columns: &'a [Column],
    pub rows: usize,
    pub cid: pg_sys::CommandId,
}

/// Appends buffered buckets' rows to the tail: one segment tuple per row, in
/// the current segment (looked up and locked once for them all). The rows of
/// one command go in together, as COPY's do (heap_multi_insert: one WAL
/// record per page filled instead of one per row).
///
/// # Safety
/// In a transaction; every part's columns built for `shape`'s payload attributes.
pub unsafe fn append(config: &Config, shape: &TableShape, parts: &[TailRows]) {
    let Some(tail) = of(config) else { return };
    if parts.is_empty() {
        return;
    }
    // SAFETY: in a transaction (append's contract).
    let (_, rel) = unsafe { open_current(config, tail) };
    let mut tuples: Vec<pg_sys::HeapTuple> = Vec::new();
    for command in parts.chunk_by(|a, b| a.cid == b.cid) {
        tuples.clear();
        for part in command {
            // SAFETY: `rel` is the current segment, open and locked RowExclusive; the part's columns are `shape`'s.
            unsafe { form_part(config, shape, rel, part, &mut tuples) };
        }
        for batch in tuples.chunks(MULTI_INSERT_ROWS) {
            // SAFETY: `rel` is open and locked RowExclusive; the batch's tuples were formed for its descriptor
            // just above, and insert_tuples frees them.
            unsafe { insert_tuples(rel, batch, command[0].cid) };
        }
    }
    // SAFETY: `rel` was opened by open_current; its RowExclusiveLock stays until the transaction ends.
    unsafe { pg_sys::table_close(rel, pg_sys::NoLock as i32) };
}

/// Rows a multi-insert takes at once (COPY's batch).
const MULTI_INSERT_ROWS: usize = 1000;

/// Forms the segment tuples of one buffered bucket's rows, appending them to `out`.
///
/// # Safety
/// `rel` is a segment of `config`'s tail, open; the part's columns built for `shape`'s payload attributes.
unsafe fn form_part(config: &Config, shape: &TableShape, rel: pg_sys::Relation, part: &TailRows, out: &mut Vec<pg_sys::HeapTuple>) {
    let columns = part.columns;
    let time_pos = columns.iter().position(|c| c.attnum as i16 == config.time_attnum).expect("the time column is buffered");
    let others: Vec<&Column> = columns.iter().filter(|c| c.attnum as i16 != config.time_attnum).collect();
    let times = match &columns[time_pos].values {
        tsbucket_format::Values::Int(t) => t,
        _ => unreachable!("time is a timestamp column"),
    };
    let meta_attrs = shape.meta_attrs();
    let natts = 2 + meta_attrs.len();
    let mut values = vec![pg_sys::Datum::from(0); natts];
    let mut nulls = vec![false; natts];
    for (i, (attr, m)) in meta_attrs.iter().zip(part.meta).enumerate() {
        match m {
            // SAFETY: `bytes` are datum_bytes of meta attribute `attr`'s type (the buffer made them); the datum is
            // palloc'd in the current memory context, alive until the tuples are formed.
            Some(bytes) => values[1 + i] = unsafe { datum::bytes_datum(bytes, attr.layout()) },
            None => nulls[1 + i] = true,
        }
    }
    let mut row = Vec::with_capacity(64);
    for r in 0..part.rows {
        values[0] = pg_sys::Datum::from(times[r]);
        row.clear();
        encode_columns_row(&others, r, &mut row);
        let bytes = datum::bytea(&row);
        values[natts - 1] = bytes;
        // SAFETY: `rel`'s descriptor has `natts` attributes (time, metas, row) that `values`/`nulls` fill;
        // heap_form_tuple copies them, so the row's bytea is freed at once.
        unsafe {
            out.push(pg_sys::heap_form_tuple((*rel).rd_att, values.as_mut_ptr(), nulls.as_mut_ptr()));
            pg_sys::pfree(bytes.cast_mut_ptr());
        }
    }
    ROWS_WRITTEN.with(|w| w.set(w.get() + part.rows as u64));
}

/// Inserts (and frees) `tuples` as command `cid`: heap_insert for one,
/// heap_multi_insert for more.
///
/// # Safety
/// `rel` is a segment, open and locked RowExclusive; `tuples` were formed for its descriptor and are not used after.
unsafe fn insert_tuples(rel: pg_sys::Relation, tuples: &[pg_sys::HeapTuple], cid: pg_sys::CommandId) {
    if let [tuple] = tuples {
        // SAFETY: `tuple` was formed for `rel` (the contract); heap_insert WAL-logs a copy as command `cid`.
        unsafe {
            pg_sys::heap_insert(rel, *tuple, cid, 0, std::ptr::null_mut());
            pg_sys::heap_freetuple(*tuple);
        }
        return;
    }
    // SAFETY: each slot is made for `rel`'s descriptor and takes its tuple with shouldFree, so dropping the slot
    // frees the tuple; heap_multi_insert reads the slots' tuples, sets their TIDs and WAL-logs them as command `cid`.
    unsafe {
        let slots: Vec<*mut pg_sys::TupleTableSlot> = tuples
            .iter()
            .map(|&tuple| {
                let slot = pg_sys::MakeSingleTupleTableSlot((*rel).rd_att, &pg_sys::TTSOpsHeapTuple);
                pg_sys::ExecStoreHeapTuple(tuple, slot, true);
                slot
            })
            .collect();
        pg_sys::heap_multi_insert(rel, slots.as_ptr().cast_mut(), slots.len() as i32, cid, 0, std::ptr::null_mut());
        for slot in slots {
            pg_sys::ExecDropSingleTupleTableSlot(slot);
        }
    }
}

// ---- drained marks ----

/// Which segments a drain marked as drained, as `snapshot` sees the marks.
///
/// # Safety
/// In a transaction; `snapshot` registered or active.
pub unsafe fn drained(config: &Config, tail: &TailConfig, snapshot: pg_sys::Snapshot) -> [bool; SEGMENTS] {
    let mut out = [false; SEGMENTS];
    let mut key = pg_sys::ScanKeyData::default();
    // SAFETY: tail.drained is tsbucket.tail_drained and drained_index its primary key (relid, segment); `key` is a
    // local oideq key on its first column, copied by the scan; the table is opened AccessShare until table_close.
    let (rel, scan) = unsafe {
        let rel = pg_sys::table_open(tail.drained, pg_sys::AccessShareLock as i32);
        pg_sys::ScanKeyInit(&mut key, 1, pg_sys::BTEqualStrategyNumber as u16, pg_sys::Oid::from(pg_sys::F_OIDEQ), pg_sys::Datum::from(config.relid));
        (rel, pg_sys::systable_beginscan(rel, tail.drained_index, true, snapshot, 1, &mut key))
    };
    loop {
        // SAFETY: `scan` was begun above and is ended after this loop.
        let tuple = unsafe { pg_sys::systable_getnext(scan) };
        if tuple.is_null() {
            break;
        }
        let mut isnull = false;
        // SAFETY: `tuple` is a tail_drained row just returned, valid until the next call; attribute 2 is its int2 segment.
        let segment = unsafe { pg_sys::heap_getattr(tuple, 2, (*rel).rd_att, &mut isnull) }.value() as i16;
        if !isnull && (0..SEGMENTS as i16).contains(&segment) {
            out[segment as usize] = true;
        }
    }
    // SAFETY: ends the scan begun above and closes the table it read, keeping the lock to the transaction's end.
    unsafe {
        pg_sys::systable_endscan(scan);
        pg_sys::table_close(rel, pg_sys::NoLock as i32);
    }
    out
}

thread_local! {
    /// Segments this transaction holds RowExclusive and found not drained: a
    /// drain needs ExclusiveLock, so they stay so while the lock is held (to
    /// the transaction's end, or the abort of the subtransaction that took
    /// it: forgotten then, and when this transaction drains a segment itself).
    static NOT_DRAINED: std::cell::RefCell<Vec<(pg_sys::Oid, usize)>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Whether a committed drain has moved segment `segment`'s rows into buckets
/// (its mark, as the latest snapshot sees it). The caller holds the segment
/// RowExclusive, which no drain can take while we hold it.
///
/// # Safety
/// In a transaction.
pub(super) unsafe fn drained_now(config: &Config, tail: &TailConfig, segment: usize) -> bool {
    if NOT_DRAINED.with(|n| n.borrow().contains(&(config.relid, segment))) {
        return false;
    }
    // SAFETY: in a transaction (the contract); the latest snapshot is registered for the lookup and unregistered after.
    let marks = unsafe {
        let latest = pg_sys::RegisterSnapshot(pg_sys::GetLatestSnapshot());
        let marks = drained(config, tail, latest);
        pg_sys::UnregisterSnapshot(latest);
        marks
    };
    if !marks[segment] {
        NOT_DRAINED.with(|n| n.borrow_mut().push((config.relid, segment)));
    }
    marks[segment]
}

/// Transaction end (or a subtransaction's abort, or a drain of our own):
/// the segments' locks may be gone, or their marks changed.
pub fn forget_checked_segments() {
    NOT_DRAINED.with(|n| n.borrow_mut().clear());
}

// ---- reading ----

/// Tail rows of one series, window and set of stored columns (rows written
/// before an ADD COLUMN lack it): read like one bucket.
pub struct TailGroup {
    pub meta: Vec<Option<Vec<u8>>>,
    pub window_start: i64,
    pub min_time: i64,
    pub max_time: i64,
    /// One per stored payload attribute, ascending attnum, time included.
    pub columns: Vec<Column>,
    pub ids: Rc<TailRowIds>,
}

impl TailGroup {
    pub fn rows(&self) -> usize {
        self.ids.tids.len()
    }

    /// The group as a decoded bucket (columns the query does not need left out).
    pub fn loaded(&self, shape: &TableShape, needed: Option<&[bool]>) -> LoadedBucket {
        let mut columns: Vec<Option<Column>> = vec![None; shape.attrs.len()];
        for col in &self.columns {
            let i = col.attnum as usize - 1;
            if needed.is_none_or(|n| n[i]) || matches!(shape.attrs[i].role, Role::Time) {
                columns[i] = Some(col.clone());
            }
        }
        LoadedBucket {
            bucket_id: 0,
            store_tid: pg_sys::ItemPointerData::default(),
            rows: self.rows(),
            columns,
            meta: self.meta.clone(),
            skipped: needed.map(|n| n.iter().map(|x| !x).collect()),
            version: Version { xmin: pg_sys::InvalidTransactionId, xmax: pg_sys::InvalidTransactionId, cid: 0 },
            tail: Some(self.ids.clone()),
            fields: Vec::new(),
        }
    }

    /// A bucket header for the group (no statistics: pruning reads time and
    /// meta only), its datums in the current memory context.
    ///
    /// # Safety
    /// `shape` must be the table's.
    pub unsafe fn header(&self, shape: &TableShape) -> StoredBucket {
        let meta_attrs = shape.meta_attrs();
        let natts = COL_FIRST_META + meta_attrs.len();
        let mut values = vec![pg_sys::Datum::from(0); natts];
        let mut nulls = vec![false; natts];
        for (i, (attr, m)) in meta_attrs.iter().zip(&self.meta).enumerate() {
            match m {
                // SAFETY: the group's meta bytes came from datum_bytes of meta attribute `attr`'s type (read_groups).
                Some(bytes) => values[COL_FIRST_META + i] = unsafe { datum::bytes_datum(bytes, attr.layout()) },
                None => nulls[COL_FIRST_META + i] = true,
            }
        }
        StoredBucket::of_tail(Rc::new(self.loaded(shape, None)), (self.window_start, self.min_time, self.max_time), values, nulls)
    }
}

/// The tail rows `snapshot` sees, in groups; segments a visible mark says
/// are drained are skipped (their rows are in buckets).
///
/// # Safety
/// In a transaction; `rel` the open table `config` and `shape` describe;
/// `snapshot` an MVCC snapshot, registered or active.
pub unsafe fn read_groups(config: &Config, shape: &TableShape, snapshot: pg_sys::Snapshot) -> Vec<Rc<TailGroup>> {
    let Some(tail) = of(config) else { return Vec::new() };
    // SAFETY: in a transaction, with the caller's snapshot (read_groups's contract).
    let marks = unsafe { drained(config, tail, snapshot) };
    let mut reader = GroupReader::new(config, shape);
    for (segment, &relid) in tail.segments.iter().enumerate() {
        if marks[segment] {
            continue;
        }
        // SAFETY: the segment is one of the tail's heap tables, read under AccessShareLock (kept to the transaction's
        // end) with the caller's snapshot.
        unsafe { reader.read_segment(segment, relid, snapshot) };
    }
    reader.finish()
}

/// The rows of `segments` that `snapshot` sees, in groups (a drain's read:
/// its segments are locked and unmarked).
///
/// # Safety
/// As `read_groups`.
pub unsafe fn read_segments(config: &Config, shape: &TableShape, snapshot: pg_sys::Snapshot, segments: &[usize]) -> Vec<Rc<TailGroup>> {
    let Some(tail) = of(config) else { return Vec::new() };
    let mut reader = GroupReader::new(config, shape);
    for &segment in segments {
        // SAFETY: as in read_groups: one of the tail's segments, read with the caller's snapshot.
        unsafe { reader.read_segment(segment, tail.segments[segment], snapshot) };
    }
    reader.finish()
}

/// The latest rows of each series in the tail as `snapshot` sees it (every
/// row at the series' latest time), in groups: all a last point without
/// conditions on rows needs. Only time and meta are read from the other
/// rows; the winners are fetched again, whole. Also returns how many rows
/// were read.
///
/// # Safety
/// As `read_groups`.
pub unsafe fn read_latest_groups(config: &Config, shape: &TableShape, snapshot: pg_sys::Snapshot) -> (Vec<Rc<TailGroup>>, usize) {
    let Some(tail) = of(config) else { return (Vec::new(), 0) };
    let mut scanned = 0;
    let mut malformed: Vec<(usize, pg_sys::ItemPointerData)> = Vec::new();
    // SAFETY: in a transaction, with the caller's snapshot (the contract).
    let marks = unsafe { drained(config, tail, snapshot) };
    let meta_attrs = shape.meta_attrs();
    let mut latest: HashMap<Vec<Option<Vec<u8>>>, (i64, Vec<(usize, pg_sys::ItemPointerData)>)> = HashMap::default();
    let mut probe: Vec<Option<Vec<u8>>> = vec![None; meta_attrs.len()];
    let natts = 2 + meta_attrs.len();
    let (mut values, mut nulls) = (vec![pg_sys::Datum::from(0); natts], vec![false; natts]);
    for (segment, &relid) in tail.segments.iter().enumerate() {
        if marks[segment] {
            continue;
        }
        // SAFETY: one of the tail's segments, read with the caller's snapshot; each tuple is read while valid.
        unsafe {
            for_each_tuple(relid, snapshot, |tupdesc, tuple| {
                scanned += 1;
                let tid = (segment, (*tuple).t_self);
                // A malformed row is read whole below, which reports it as read_groups does.
                if (*tupdesc).natts as usize != natts {
                    malformed.push(tid);
                    return;
                }
                pg_sys::heap_deform_tuple(tuple, tupdesc, values.as_mut_ptr(), nulls.as_mut_ptr());
                if nulls[0] {
                    malformed.push(tid);
                    return;
                }
                let time = values[0].value() as i64;
                // The probe's buffers are reused: most rows are not a series' first, and need no key of their own.
                for (i, (attr, m)) in meta_attrs.iter().zip(probe.iter_mut()).enumerate() {
                    if nulls[1 + i] {
                        *m = None;
                    } else {
                        let bytes = datum::datum_bytes(&values[1 + i], attr.layout());
                        let buf = m.get_or_insert_with(Vec::new);
                        buf.clear();
                        buf.extend_from_slice(bytes);
                    }
                }
                match latest.get_mut(&probe) {
                    Some((t, tids)) if *t == time => tids.push(tid),
                    Some((t, tids)) if *t < time => {
                        *t = time;
                        tids.clear();
                        tids.push(tid);
                    }
                    Some(_) => {}
                    None => {
                        latest.insert(probe.clone(), (time, vec![tid]));
                    }
                }
            })
        };
    }
    let mut winners: Vec<(usize, pg_sys::ItemPointerData)> = latest.into_values().flat_map(|(_, tids)| tids).chain(malformed).collect();
    winners.sort_by_key(|(segment, tid)| (*segment, tid.ip_blkid.bi_hi, tid.ip_blkid.bi_lo, tid.ip_posid));
    let mut reader = GroupReader::new(config, shape);
    for segment in 0..SEGMENTS {
        let mut rows = winners.iter().filter(|(s, _)| *s == segment).peekable();
        if rows.peek().is_none() {
            continue;
        }
        // SAFETY: the segment was opened AccessShare above (the lock is still held); heap's fetch with the same snapshot
        // finds each tuple the scan saw (none can be pruned or truncated while the snapshot and lock are held); the
        // slot is dropped before the segment closes.
        unsafe {
            let seg = pg_sys::table_open(tail.segments[segment], pg_sys::AccessShareLock as i32);
            let slot = heap_slot(seg);
            let fetch = heap_am().tuple_fetch_row_version.expect("heap fetches");
            for (_, tid) in rows {
                let mut tid = *tid;
                if !fetch(seg, &mut tid, snapshot, slot) {
                    ts_error(
                        DATA_CORRUPTED,
                        &format!(
                            "a row of the tail of table \"{}\" vanished while a scan read it",
                            crate::pg::relation::relation_name(config.relid)
                        ),
                        "Run SELECT * FROM tsbucket.verify(...) on the table.",
                    );
                }
                reader.add_slot(segment, seg, slot);
            }
            pg_sys::ExecDropSingleTupleTableSlot(slot);
            pg_sys::table_close(seg, pg_sys::NoLock as i32);
        }
    }
    (reader.finish(), scanned)
}

/// How many rows the tail holds as `snapshot` sees it (for sizes and stats).
///
/// # Safety
/// In a transaction; `snapshot` an MVCC snapshot, registered or active.
pub unsafe fn row_count(config: &Config, snapshot: pg_sys::Snapshot) -> usize {
    let Some(tail) = of(config) else { return 0 };
    // SAFETY: in a transaction, with the caller's snapshot (the contract).
    let marks = unsafe { drained(config, tail, snapshot) };
    let mut rows = 0;
    for (segment, &relid) in tail.segments.iter().enumerate() {
        if !marks[segment] {
            // SAFETY: one of the tail's segments, read with the caller's snapshot.
            unsafe { for_each_tuple(relid, snapshot, |_, _| rows += 1) };
        }
    }
    rows
}

type GroupKey = (Vec<Option<Vec<u8>>>, i64, Vec<u16>);

pub(super) struct GroupReader<'a> {
    config: &'a Config,
    shape: &'a TableShape,
    groups: Vec<(TailGroup, Vec<pg_sys::ItemPointerData>, Vec<Version>)>,
    index: HashMap<GroupKey, usize>,
    /// The key of the row being added, its buffers reused from row to row
    /// (a scan reads every tail row: no allocation per row for its lookup).
    probe: GroupKey,
    /// The row being added, deformed (values, nulls): reused likewise.
    deformed: (Vec<pg_sys::Datum>, Vec<bool>),
}

impl<'a> GroupReader<'a> {
    pub(super) fn new(config: &'a Config, shape: &'a TableShape) -> Self {
        GroupReader { config, shape, groups: Vec::new(), index: HashMap::default(), probe: Default::default(), deformed: Default::default() }
    }

    /// # Safety
    /// `relid` is segment `segment` of the tail; `snapshot` an MVCC snapshot.
    unsafe fn read_segment(&mut self, segment: usize, relid: pg_sys::Oid, snapshot: pg_sys::Snapshot) {
        // SAFETY: the contract is for_each_tuple's; each tuple is added while valid, described by `tupdesc`.
        unsafe { for_each_tuple(relid, snapshot, |tupdesc, tuple| self.add_tuple(segment, relid, tupdesc, tuple)) };
    }

    /// Adds the segment tuple `slot` holds.
    ///
    /// # Safety
    /// `slot` holds a tuple of the open segment `seg`, number `segment` of the tail.
    pub(super) unsafe fn add_slot(&mut self, segment: usize, seg: pg_sys::Relation, slot: *mut pg_sys::TupleTableSlot) {
        // SAFETY: `seg` is open and `slot` holds one of its tuples (the contract); the tuple fetched from it stays valid
        // while the slot holds it, described by the segment's descriptor.
        unsafe {
            let tuple = pg_sys::ExecFetchSlotHeapTuple(slot, false, std::ptr::null_mut());
            self.add_tuple(segment, (*seg).rd_id, (*seg).rd_att, tuple);
        }
    }

    /// Adds one segment tuple.
    ///
    /// # Safety
    /// `tuple` is a valid tuple of segment `relid`, which `tupdesc` describes.
    unsafe fn add_tuple(&mut self, segment: usize, relid: pg_sys::Oid, tupdesc: pg_sys::TupleDesc, tuple: pg_sys::HeapTuple) {
        let (mut values, mut nulls) = std::mem::take(&mut self.deformed);
        // SAFETY: `tupdesc` describes the valid `tuple` (the contract).
        let natts = unsafe { (*tupdesc).natts } as usize;
        values.resize(natts, pg_sys::Datum::from(0));
        nulls.resize(natts, false);
        // SAFETY: `tuple` is valid and `tupdesc` its descriptor, with as many attributes as `values`/`nulls` have
        // entries (resized above); its header is read for the row's identity.
        let (tid, version) = unsafe {
            pg_sys::heap_deform_tuple(tuple, tupdesc, values.as_mut_ptr(), nulls.as_mut_ptr());
            let data = (*tuple).t_data;
            let version = Version {
                xmin: (*data).t_choice.t_heap.t_xmin,
                xmax: (*data).t_choice.t_heap.t_xmax,
                cid: (*data).t_choice.t_heap.t_field3.t_cid,
            };
            ((*tuple).t_self, version)
        };
        // SAFETY: `values`/`nulls` hold the deformed tuple, still valid (the caller's tuple is).
        unsafe { self.add_row(segment, relid, &tid, version, &values, &nulls) };
        self.deformed = (values, nulls);
    }

    /// # Safety
    /// `values`/`nulls` are a deformed tuple of segment `relid`, still valid.
    unsafe fn add_row(
        &mut self,
        segment: usize,
        relid: pg_sys::Oid,
        heap_tid: &pg_sys::ItemPointerData,
        version: Version,
        values: &[pg_sys::Datum],
        nulls: &[bool],
    ) {
        let n = values.len();
        let corrupt = |what: &dyn std::fmt::Display| -> ! {
            ts_error(
                DATA_CORRUPTED,
                &format!(
                    "a row of the tail of table \"{}\" ({}) is corrupt: {what}",
                    crate::pg::relation::relation_name(self.config.relid),
                    crate::pg::relation::relation_name(relid)
                ),
                "Run SELECT * FROM tsbucket.verify(...) on the table.",
            )
        };
        if n < 2 || nulls[0] || nulls[n - 1] {
            corrupt(&"a NULL time or row");
        }
        let time = values[0].value() as i64;
        let mut key = std::mem::take(&mut self.probe);
        let meta_attrs = self.shape.meta_attrs();
        key.0.resize_with(meta_attrs.len(), || None);
        for (i, (attr, m)) in meta_attrs.iter().zip(key.0.iter_mut()).enumerate() {
            if nulls[1 + i] {
                *m = None;
                continue;
            }
            // SAFETY: segment column 1 + i has meta attribute `attr`'s type (_create_tail made it so); its bytes are
            // copied while the tuple is valid (the contract).
            let bytes = unsafe { datum::datum_bytes(&values[1 + i], attr.layout()) };
            match m {
                Some(v) => {
                    v.clear();
                    v.extend_from_slice(bytes);
                }
                None => *m = Some(bytes.to_vec()),
            }
        }
        // SAFETY: the last column is the row bytea, non-NULL (checked); a compressed or TOASTed one is detoasted
        // into the current memory context.
        let row: &[u8] = unsafe {
            let v = pg_sys::pg_detoast_datum_packed(values[n - 1].cast_mut_ptr());
            std::slice::from_raw_parts(pgrx::varlena::vardata_any(v) as *const u8, pgrx::varlena::varsize_any_exhdr(v))
        };
        let mut decoded = Vec::new();
        let mut reader = RowReader::parse(row).unwrap_or_else(|e| corrupt(&e));
        while let Some((attnum, kind, value)) = reader.next_value().unwrap_or_else(|e| corrupt(&e)) {
            // Columns dropped since the row was written are skipped.
            if self.shape.attrs.get(attnum as usize - 1).is_some_and(|a| a.role == Role::Measurement) {
                decoded.push((attnum, kind, value));
            }
        }
        decoded.sort_by_key(|d| d.0);
        let window_start = pg_window_start(time, self.config.span_micros);
        key.1 = window_start;
        key.2.clear();
        key.2.extend(decoded.iter().map(|d| d.0));
        key.2.push(self.config.time_attnum as u16);
        key.2.sort_unstable();
        let slot = match self.index.get(&key) {
            Some(&i) => i,
            None => {
                let columns = key
                    .2
                    .iter()
                    .map(|&a| Column::new(a, self.shape.attrs[a as usize - 1].kind))
                    .collect();
                let group = TailGroup {
                    meta: key.0.clone(),
                    window_start,
                    min_time: time,
                    max_time: time,
                    columns,
                    ids: Rc::new(TailRowIds { tids: Vec::new(), versions: Vec::new() }),
                };
                self.groups.push((group, Vec::new(), Vec::new()));
                self.index.insert(key.clone(), self.groups.len() - 1);
                self.groups.len() - 1
            }
        };
        self.probe = key;
        let (group, tids, versions) = &mut self.groups[slot];
        group.min_time = group.min_time.min(time);
        group.max_time = group.max_time.max(time);
        let mut values = decoded.into_iter().peekable();
        for col in group.columns.iter_mut() {
            if col.attnum as i16 == self.config.time_attnum {
                col.push_int(time);
            } else {
                let (_, kind, value) = values.next().expect("one value per stored attnum");
                push_value(col, kind, value).unwrap_or_else(|e| corrupt(&e));
            }
        }
        let mut tid = pg_sys::ItemPointerData::default();
        super::tid::set_tail(&mut tid, segment, heap_tid);
        tids.push(tid);
        versions.push(version);
    }

    pub(super) fn finish(self) -> Vec<Rc<TailGroup>> {
        self.groups
            .into_iter()
            .map(|(mut g, tids, versions)| {
                g.ids = Rc::new(TailRowIds { tids, versions });
                Rc::new(g)
            })
            .collect()
    }
}

/// Heap's table access method, whose routines act on the segments.
pub(super) fn heap_am() -> &'static pg_sys::TableAmRoutine {
    // SAFETY: GetHeapamTableAmRoutine returns a pointer to heap's static routine, valid for the life of the process.
    unsafe { &*pg_sys::GetHeapamTableAmRoutine() }
}

/// A slot for segment tuples, dropped with ExecDropSingleTupleTableSlot.
///
/// # Safety
/// `seg` must be an open segment.
pub(super) unsafe fn heap_slot(seg: pg_sys::Relation) -> *mut pg_sys::TupleTableSlot {
    // SAFETY: `seg` is open (the contract), so its descriptor outlives the slot, which is dropped before it closes.
    unsafe { pg_sys::MakeSingleTupleTableSlot((*seg).rd_att, &pg_sys::TTSOpsBufferHeapTuple) }
}

/// Calls `f` with each tuple of segment `relid` that `snapshot` sees (valid
/// only during the call) and the segment's descriptor.
///
/// # Safety
/// `relid` is a segment of a tail; `snapshot` an MVCC snapshot.
unsafe fn for_each_tuple(relid: pg_sys::Oid, snapshot: pg_sys::Snapshot, mut f: impl FnMut(pg_sys::TupleDesc, pg_sys::HeapTuple)) {
    // SAFETY: `relid` is a tail segment (the contract), opened AccessShare; an empty one (never written, or
    // truncated for reuse) is closed again unread.
    let rel = unsafe { pg_sys::table_open(relid, pg_sys::AccessShareLock as i32) };
    // SAFETY: `rel` is open; smgr reports the main fork's length.
    let blocks = unsafe { pg_sys::RelationGetNumberOfBlocksInFork(rel, pg_sys::ForkNumber::MAIN_FORKNUM) };
    // Before the length counts: on a standby, a segment emptied after `snapshot` was taken is empty but had rows
    // that snapshot must see (their drain's mark is invisible to it).
    // SAFETY: `rel` is open; a snapshot `snapshot` cannot use for this segment is refused on a standby.
    unsafe { check_segment_usable(rel, relid, snapshot) };
    if blocks == 0 {
        // SAFETY: `rel` was opened above; its lock is kept.
        unsafe { pg_sys::table_close(rel, pg_sys::NoLock as i32) };
        return;
    }
    // SAFETY: a heap scan of the open segment with the caller's MVCC snapshot, ended below.
    let scan = unsafe { pg_sys::systable_beginscan(rel, pg_sys::InvalidOid, false, snapshot, 0, std::ptr::null_mut()) };
    // SAFETY: `rel` is open, so its descriptor is valid until table_close.
    let tupdesc = unsafe { (*rel).rd_att };
    loop {
        // SAFETY: `scan` is open until systable_endscan below.
        let tuple = unsafe { pg_sys::systable_getnext(scan) };
        if tuple.is_null() {
            break;
        }
        f(tupdesc, tuple);
    }
    // SAFETY: ends the scan begun above, then closes the segment keeping its lock.
    unsafe {
        pg_sys::systable_endscan(scan);
        pg_sys::table_close(rel, pg_sys::NoLock as i32);
    }
}

/// On a standby, a drain's truncation replayed after `snapshot` was taken
/// has emptied a segment whose mark `snapshot` does not see: its rows are in
/// buckets this snapshot does not see either, so the answer would miss them.
/// (On the primary a segment is truncated only once no snapshot can miss its
/// mark.) Refused as a replication conflict is.
///
/// # Safety
/// `rel` is the open segment `relid`; `snapshot` an MVCC snapshot.
unsafe fn check_segment_usable(rel: pg_sys::Relation, relid: pg_sys::Oid, snapshot: pg_sys::Snapshot) {
    let _ = rel;
    // SAFETY: RecoveryInProgress reads shared recovery state.
    if !unsafe { pg_sys::RecoveryInProgress() } {
        return;
    }
    // SAFETY: the syscache lookup of the segment's pg_class row (released below); its xmin is the transaction that
    // last gave the segment a new file (TRUNCATE) or made it.
    let replaced_after = unsafe {
        let tuple = pg_sys::SearchSysCache1(pg_sys::SysCacheIdentifier::RELOID as i32, pg_sys::Datum::from(relid));
        if tuple.is_null() {
            return;
        }
        let xmin = (*(*tuple).t_data).t_choice.t_heap.t_xmin;
        pg_sys::ReleaseSysCache(tuple);
        pg_sys::XidInMVCCSnapshot(xmin, snapshot)
    };
    if replaced_after {
        ts_error(
            SERIALIZATION_FAILURE,
            "canceling statement due to conflict with recovery",
            "The primary's worker emptied part of the table's tail after this query's snapshot was taken; retry the query.",
        );
    }
}
