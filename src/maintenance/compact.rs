//! Compaction: merges the under-filled buckets of each series and window into
//! full ones, rows in time order, so that a table fed one row per statement
//! ends up like one loaded by COPY; and drains the table's tail, its rows
//! merged with the buckets of their series and window (`drain` prepares it). Runs in the caller's transaction; holds
//! ShareUpdateExclusiveLock on the table (one compaction at a time; INSERT,
//! SELECT, UPDATE and DELETE go on). Buckets that user DML holds are skipped;
//! every merged bucket records where its rows went, so DML that waited for
//! the merge follows them (moves::record_moves).

use crate::catalog::config;
use crate::catalog::gucs;
use crate::catalog::shape::{Role, TableShape};
use crate::pg::datum;
use crate::store::bucket::{self, BucketContent, CloseReason};
use crate::store::insert;
use crate::store::locks;
use crate::store::moves;
use crate::store::reader;
use crate::store::rows;
use crate::store::tuple;
use pgrx::pg_sys;
use std::collections::BTreeMap;
use tsbucket_format::merge_plan::{self, Piece};
use tsbucket_format::{Column, ColumnKind, Values};

#[derive(Clone, Copy)]
pub(super) struct Candidate {
    bucket_id: i64,
    rows: i32,
}

/// A group's tail rows (of the segments being drained).
type TailRows = Vec<std::rc::Rc<crate::store::tail::TailGroup>>;

type GroupKey = (Vec<Option<Vec<u8>>>, i64);

/// What one compaction did.
pub struct Compaction {
    /// Buckets merged away, and written.
    pub before: i64,
    pub after: i64,
    pub rows_moved: i64,
    /// Series-windows whose under-filled buckets a lazy round left to grow:
    /// later rounds must look at them again (once their window ends).
    pub deferred: i64,
}

/// Merges the under-filled buckets of up to `max_groups` series-windows of
/// table `relid`, and drains its tail. `lazy` (the background worker) leaves
/// the pieces of windows that have not ended to grow (merge_plan); otherwise
/// every series-window ends up as a COPY of its rows would leave it.
///
/// # Safety
/// In a transaction; the caller has checked that the user may.
pub unsafe fn compact(relid: pg_sys::Oid, max_groups: usize, lazy: bool) -> Compaction {
    let config = config::require(relid);
    // SAFETY: `relid` is a configured time-series table (config::require above) and this runs in a transaction, as this
    // function's contract requires; ShareUpdateExclusiveLock keeps `rel` and its rd_att valid until the final table_close.
    let (rel, shape) = unsafe {
        let rel = pg_sys::table_open(relid, pg_sys::ShareUpdateExclusiveLock as i32);
        (rel, TableShape::new((*rel).rd_att, &config))
    };
    let meta_attrs = shape.meta_attrs();
    // SAFETY: `config.store_relid` is the store of the table locked just above; RowExclusiveLock on it is held until the
    // transaction ends, and `store_rel` is closed at the end of this function.
    let store_rel = unsafe { pg_sys::table_open(config.store_relid, pg_sys::RowExclusiveLock as i32) };
    let max_count = gucs::bucket_max_count();
    // SAFETY: in a transaction under the table's ShareUpdateExclusiveLock, before the snapshot below.
    let draining = unsafe { super::drain::prepare(&config) };
    // What committed before our lock, not before our statement began (a
    // compaction we waited for has rewritten buckets and moves since; the
    // segments to drain have no writer left).
    // SAFETY: called after the table's lock above, as snapshot_after_lock requires; prune_moves gets `config`'s open
    // store `store_rel` and the snapshot just registered, which stays registered until UnregisterSnapshot below.
    let snapshot = unsafe {
        let snapshot = reader::snapshot_after_lock();
        moves::prune_moves(store_rel, &config, snapshot);
        snapshot
    };
    // SAFETY: the segments are locked Exclusive and `snapshot` was taken after that, so it sees every row they hold.
    let tail_groups = unsafe { crate::store::tail::read_segments(&config, &shape, snapshot, &draining) };

    // 1. Find the under-filled buckets, grouped by series and window.
    let mut groups: BTreeMap<GroupKey, Vec<Candidate>> = BTreeMap::new();
    let mut tails: BTreeMap<GroupKey, TailRows> = BTreeMap::new();
    for g in tail_groups {
        tails.entry((g.meta.clone(), g.window_start)).or_default().push(g);
    }
    // SAFETY: `store_rel` is open RowExclusive since table_open above, and `snapshot` registered until after scan.end().
    let mut scan = unsafe { reader::StoreScan::begin(store_rel, snapshot) };
    while let Some(tuple) = scan.next(true) {
        // SAFETY: `tuple` is the store row `scan` just returned, valid until its next call; read_header copies what it keeps.
        let b = unsafe { tuple::read_header(store_rel, tuple) };
        // Full buckets stay as they are: by count, or closed by the size limit.
        if b.rows as usize >= max_count || b.close_reason() == CloseReason::Size as i16 {
            continue;
        }
        let meta = meta_attrs
            .iter()
            .enumerate()
            .map(|(i, attr)| {
                b.meta_datum(i).map(|d| {
                    // SAFETY: `d` is meta column i of bucket `b`, a datum of the type of meta attribute `attr` (meta_attrs
                    // list the store's meta columns in order); the bytes are copied before `d` goes out of scope.
                    let bytes = unsafe { datum::datum_bytes(&d, attr.layout()) };
                    bytes.to_vec()
                })
            })
            .collect();
        groups.entry((meta, b.window_start)).or_default().push(Candidate { bucket_id: b.bucket_id, rows: b.rows });
    }
    scan.end();
    // SAFETY: `snapshot` was registered by snapshot_after_lock above, and the scan that used it has just ended.
    unsafe { pg_sys::UnregisterSnapshot(snapshot) };

    // 2. What to merge. Every group with tail rows is written (the drain is
    // one transaction); then each group that merging makes smaller,
    // longest-waiting first (lowest bucket id), so no group starves behind
    // the per-round cap. A background round (`lazy`) leaves a window that has
    // not ended to grow size-tiered (tsbucket_format::merge_plan says why).
    // SAFETY: GetCurrentTimestamp reads the clock; it has no preconditions.
    let now = unsafe { pg_sys::GetCurrentTimestamp() };
    let settle = |window_start: i64| !lazy || window_start.saturating_add(config.span_micros) <= now;
    let mut deferred = 0i64;
    let mut with_tail: Vec<(GroupKey, Vec<Candidate>, TailRows)> = Vec::new();
    let mut others: Vec<(GroupKey, Vec<Candidate>)> = Vec::new();
    let keys: std::collections::BTreeSet<GroupKey> = groups.keys().chain(tails.keys()).cloned().collect();
    for key in keys {
        let members = groups.remove(&key).unwrap_or_default();
        let tail_rows = tails.remove(&key).unwrap_or_default();
        let mut pieces: Vec<Piece> = members.iter().map(|m| Piece { rows: m.rows as usize, new: false }).collect();
        if !tail_rows.is_empty() {
            pieces.push(Piece { rows: tail_rows.iter().map(|g| g.rows()).sum(), new: true });
        }
        let sets = merge_plan::plan(&pieces, max_count, settle(key.1));
        if !settle(key.1) && pieces_after(pieces.len(), &sets) > 1 {
            deferred += 1;
        }
        for set in sets {
            let chosen: Vec<Candidate> = set.iter().filter(|&&i| i < members.len()).map(|&i| members[i]).collect();
            if set.contains(&members.len()) {
                with_tail.push((key.clone(), chosen, tail_rows.clone()));
            } else {
                others.push((key.clone(), chosen));
            }
        }
    }
    others.sort_by_key(|(_, m)| m.iter().map(|c| c.bucket_id).min());
    let capped = others.into_iter().take(max_groups).map(|(k, m)| (k, m, Vec::new()));
    with_tail.extend(capped);
    // Where the tail's rows went, by segment block (their moves entries).
    let mut tail_moves: BTreeMap<i64, (Vec<i64>, moves::RowMoves)> = BTreeMap::new();
    // SAFETY: CurrentMemoryContext is the calling function's context, alive for this call; "tsbucket compaction" is its
    // child, deleted after the merge loop. GetCurrentCommandId(true) runs in this function's required transaction.
    let (cxt, cid) = unsafe {
        (
            pg_sys::AllocSetContextCreateInternal(pg_sys::CurrentMemoryContext, c"tsbucket compaction".as_ptr(), 0, 8 * 1024, 8 * 1024 * 1024),
            pg_sys::GetCurrentCommandId(true),
        )
    };
    let (mut before, mut after, mut moved) = (0i64, 0i64, 0i64);
    for ((meta, window_start), mut members, tail_rows) in with_tail {
        // User DML holds some buckets: leave those to it, merge the rest.
        members.sort_by_key(|m| m.bucket_id);
        members.retain(|m| {
            // SAFETY: `store_rel` is `config`'s store, open RowExclusive; `cid` is this transaction's current command id,
            // and wait = false makes lock_bucket skip a bucket that user DML holds instead of waiting.
            let lock = unsafe { locks::lock_bucket(store_rel, &config, m.bucket_id, cid, false) };
            lock == locks::Lock::Held
        });
        if members.len() < 2 && tail_rows.is_empty() {
            continue;
        }
        // SAFETY: `cxt` is the compaction context created before the loop, alive until its MemoryContextDelete after it.
        let old = unsafe { pg_sys::MemoryContextSwitchTo(cxt) };
        let mut merged: Vec<Column> = shape.payload_attrs().map(|a| Column::new(a.attnum, a.kind)).collect();
        let mut uncompressed = 0i64;
        // Where each member's rows start in `merged`.
        let mut starts = Vec::with_capacity(members.len());
        for m in &members {
            // Locked by us and live: the version with this id is the one to merge.
            // SAFETY: `store_rel` is open with `config.id_index` its bucket-id index; SnapshotSelfData is Postgres's static
            // self snapshot, which sees the version we locked; the bucket is read into `cxt`, current now.
            let stored = unsafe { tuple::find_bucket(store_rel, config.id_index, m.bucket_id, &raw mut pg_sys::SnapshotSelfData) }
                .expect("a locked bucket exists");
            uncompressed += stored.values[bucket::COL_UNCOMPRESSED_BYTES].value() as i64;
            let loaded = rows::load(&config, &shape, &stored);
            starts.push(merged.first().map_or(0, Column::len));
            for (col, attr) in merged.iter_mut().zip(shape.payload_attrs()) {
                // SAFETY: `rel` is the user table, open since table_open above, and `shape` was built from its rd_att;
                // `attr` is one of that descriptor's payload attributes, as column_or_default requires.
                let src = unsafe { rows::column_or_default((*rel).rd_att, attr, &loaded) };
                (0..loaded.rows).for_each(|r| col.push_row_of(&src, r));
            }
            // SAFETY: `store_rel` is open and locked RowExclusive, as delete_bucket requires; `stored.tid` is the version
            // of bucket m.bucket_id that this transaction locked through lock_bucket above.
            unsafe { locks::delete_bucket(store_rel, stored.tid) };
        }
        let tail_start = merged.first().map_or(0, Column::len);
        for group in &tail_rows {
            let loaded = group.loaded(&shape, None);
            for (col, attr) in merged.iter_mut().zip(shape.payload_attrs()) {
                // SAFETY: as for the buckets above: `rel`'s descriptor and one of its payload attributes.
                let src = unsafe { rows::column_or_default((*rel).rd_att, attr, &loaded) };
                (0..loaded.rows).for_each(|r| col.push_row_of(&src, r));
            }
            uncompressed += loaded.columns.iter().flatten().map(|c| c.approx_bytes() as i64).sum::<i64>();
        }
        let rows = merged.first().map_or(0, Column::len);
        let time_col = shape.payload_attrs().position(|a| a.role == Role::Time).expect("the time column is stored");
        let times = match &merged[time_col].values {
            Values::Int(t) => t.clone(),
            _ => unreachable!("time is a timestamp column"),
        };
        let mut order: Vec<usize> = (0..rows).collect();
        order.sort_by_key(|&r| times[r]);
        let pieces = chunks(&merged, &order, max_count, gucs::bucket_max_size());
        // Merged row -> (new bucket index, row there), for DML that follows its rows.
        let mut placed = vec![(0u16, 0u16); rows];
        let mut new_ids = Vec::with_capacity(pieces.len());
        for (i, (chunk, reason)) in pieces.iter().enumerate() {
            for (new_row, &r) in chunk.iter().enumerate() {
                placed[r] = (i as u16, new_row as u16);
            }
            let columns: Vec<Column> = merged.iter().map(|c| c.gather(chunk)).collect();
            let content = BucketContent {
                columns: &columns,
                rows: chunk.len(),
                meta: &meta,
                window_start,
                uncompressed_bytes: uncompressed * chunk.len() as i64 / rows.max(1) as i64,
            };
            // SAFETY: `store_rel` is `config`'s bucket store, open and locked RowExclusive, and `shape` the user table's
            // shape, which is what write_bucket's contract asks; `cid` is this transaction's command id.
            new_ids.push(unsafe { insert::write_bucket(store_rel, &config, &shape, None, &content, *reason, cid) });
            after += 1;
        }
        for (m, start) in members.iter().zip(&starts) {
            let moves: moves::RowMoves = (0..m.rows as usize).map(|r| Some(placed[start + r])).collect();
            // SAFETY: `config`'s relations exist (its store is open here), and this transaction rewrote bucket m.bucket_id
            // (delete_bucket above), as record_moves requires.
            unsafe { moves::record_moves(&config, m.bucket_id, &new_ids, &moves) };
        }
        let mut r = tail_start;
        for group in &tail_rows {
            for tid in &group.ids.tids {
                let (block_id, row) = crate::store::tid::get(tid);
                let (ids, map) = tail_moves.entry(block_id).or_default();
                let base = match ids.iter().position(|id| *id == new_ids[0]) {
                    Some(i) => i,
                    None => {
                        ids.extend_from_slice(&new_ids);
                        ids.len() - new_ids.len()
                    }
                };
                if map.len() <= row {
                    map.resize(row + 1, None);
                }
                let (bucket, new_row) = placed[r];
                map[row] = Some((base as u16 + bucket, new_row));
                r += 1;
            }
            moved += group.rows() as i64;
        }
        before += members.len() as i64;
        moved += members.iter().map(|m| m.rows as i64).sum::<i64>();
        // SAFETY: `old` was current before this group switched to `cxt`; resetting `cxt` frees only this group's
        // palloc'd bucket data, which nothing read after this point refers to.
        unsafe {
            pg_sys::MemoryContextSwitchTo(old);
            pg_sys::MemoryContextReset(cxt);
        }
    }
    for (block_id, (ids, map)) in &tail_moves {
        // SAFETY: `config`'s relations exist; this transaction drains the segment whose block `block_id` names.
        unsafe { moves::record_moves(&config, *block_id, ids, map) };
    }
    if !draining.is_empty() {
        super::drain::mark_drained(&config, &draining);
    }
    // SAFETY: `cxt` is deleted once, after its last use; `store_rel` and `rel` were opened at the top of this function
    // and are closed once each; NoLock keeps their locks until the transaction ends.
    unsafe {
        pg_sys::MemoryContextDelete(cxt);
        pg_sys::table_close(store_rel, pg_sys::NoLock as i32);
        pg_sys::table_close(rel, pg_sys::NoLock as i32);
    }
    Compaction { before, after, rows_moved: moved, deferred }
}

/// How many under-filled pieces a group keeps after merging `sets` of its
/// `pieces` (a merge may leave a partial bucket: counted as one).
fn pieces_after(pieces: usize, sets: &[Vec<usize>]) -> usize {
    pieces - sets.iter().map(Vec::len).sum::<usize>() + sets.len()
}

/// Splits rows (in `order`) into buckets of at most `max_count` rows and
/// `max_size` bytes of values; a single larger row gets a bucket of its own.
/// Each bucket's close reason says whether it is full (count or size) or the
/// remainder (compaction): full ones are not merged again, so compaction
/// converges when the size limit binds before the count.
fn chunks<'a>(columns: &[Column], order: &'a [usize], max_count: usize, max_size: usize) -> Vec<(&'a [usize], CloseReason)> {
    let row_size = |r: usize| -> usize {
        columns
            .iter()
            .map(|c| {
                if c.is_null(r) {
                    return 1;
                }
                match &c.values {
                    // As inserts count them (write::append): a document less most of its framing.
                    Values::Bytes(b) if c.kind == ColumnKind::Document => b.get(r).map_or(0, tsbucket_format::jsonb::bucket_size) + 4,
                    Values::Bytes(b) => b.get(r).map_or(0, <[u8]>::len) + 4,
                    Values::Bool(_) => 1,
                    _ => 8,
                }
            })
            .sum()
    };
    let mut out = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (i, &r) in order.iter().enumerate() {
        let size = row_size(r);
        if i > start && i - start >= max_count {
            out.push((&order[start..i], CloseReason::Count));
            start = i;
            bytes = 0;
        } else if i > start && bytes + size > max_size {
            out.push((&order[start..i], CloseReason::Size));
            start = i;
            bytes = 0;
        }
        bytes += size;
    }
    if start < order.len() {
        let reason = if order.len() - start >= max_count { CloseReason::Count } else { CloseReason::Compaction };
        out.push((&order[start..], reason));
    }
    out
}
