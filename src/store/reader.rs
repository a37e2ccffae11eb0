//! THE reader of the store: its bucket tuples as a snapshot sees them (the
//! whole heap, or ranges of its indexes), one bucket by id, the store's
//! indexes, and the snapshots reads take.

use crate::store::bucket::{COL_MAX_TIME, COL_WINDOW_START};
use super::tuple::read_header;
use pgrx::pg_sys;

/// THE reader of the store: its bucket tuples as a snapshot sees them, in
/// either direction. Every walk over a store (scans, compaction, verify,
/// estimates) goes through it: the whole heap, or the index ranges of an
/// [`IndexRanges`].
pub struct StoreScan {
    inner: Inner,
}

enum Inner {
    Heap(pg_sys::TableScanDesc),
    Index(IndexWalk),
}

/// Ranges of one store index: each key set is one btree scan, run in turn (one
/// per combination of `IN` values). Keys name store (heap) columns; the index's
/// equality and range keys must select a superset of the wanted buckets, and
/// no two key sets may select the same bucket.
pub struct IndexRanges {
    pub index: pg_sys::Oid,
    pub key_sets: Vec<Vec<pg_sys::ScanKeyData>>,
}

struct IndexWalk {
    store: pg_sys::Relation,
    index: pg_sys::Relation,
    snapshot: pg_sys::Snapshot,
    key_sets: Vec<Vec<pg_sys::ScanKeyData>>,
    /// The key set being scanned, and its scan (null before the first fetch,
    /// after a rescan, and between key sets).
    current: usize,
    scan: pg_sys::SysScanDesc,
    started: bool,
    /// The direction (forward = true) in which the walk last ran off its end:
    /// a btree scan asked again would start over, so the walk answers None
    /// itself until it is asked the other way (a cursor turning back).
    exhausted: Option<bool>,
}

impl IndexWalk {
    /// # Safety
    /// The walk's store and index must be open, and no scan open (`scan` null).
    unsafe fn open_current(&mut self) {
        // systable_beginscan_ordered rewrites the keys' column numbers in place:
        // give it a fresh copy each time.
        let mut keys = self.key_sets[self.current].clone();
        // SAFETY: store and index are open (open_current's contract); the current key set holds btree keys on
        // the store's columns, and `keys` is a fresh copy the scan may rewrite.
        self.scan = unsafe { pg_sys::systable_beginscan_ordered(self.store, self.index, self.snapshot, keys.len() as i32, keys.as_mut_ptr()) };
    }

    /// # Safety
    /// `scan` must be null or a scan begun by `open_current` and not yet ended.
    unsafe fn close_current(&mut self) {
        if !self.scan.is_null() {
            // SAFETY: a non-null `scan` is the ordered scan open_current began (close_current's contract).
            unsafe { pg_sys::systable_endscan_ordered(self.scan) };
            self.scan = std::ptr::null_mut();
        }
    }

    fn next(&mut self, forward: bool) -> Option<pg_sys::HeapTuple> {
        if self.key_sets.is_empty() || self.exhausted == Some(forward) {
            return None;
        }
        self.exhausted = None;
        if !self.started {
            // A backward fetch from the start walks from the last key set's end.
            self.current = if forward { 0 } else { self.key_sets.len() - 1 };
            self.started = true;
        }
        let dir = if forward { pg_sys::ScanDirection::ForwardScanDirection } else { pg_sys::ScanDirection::BackwardScanDirection };
        loop {
            if self.scan.is_null() {
                // SAFETY: the walk's store and index stay open until StoreScan::end (begin_index's contract),
                // and no scan is open.
                unsafe { self.open_current() };
            }
            // SAFETY: `self.scan` was begun by open_current and is ended only by close_current.
            let tuple = unsafe { pg_sys::systable_getnext_ordered(self.scan, dir) };
            if !tuple.is_null() {
                return Some(tuple);
            }
            // This key set is done in this direction; the scan stays open at
            // its end when there is no next one, so a cursor can turn back.
            let next = if forward { Some(self.current + 1) } else { self.current.checked_sub(1) };
            let Some(next) = next.filter(|&n| n < self.key_sets.len()) else {
                self.exhausted = Some(forward);
                return None;
            };
            // SAFETY: ends the finished key set's scan, which open_current began; the next one opens it anew.
            unsafe { self.close_current() };
            self.current = next;
        }
    }
}

impl StoreScan {
    /// # Safety
    /// `store` must be open and stay open until `end`.
    pub unsafe fn begin(store: pg_sys::Relation, snapshot: pg_sys::Snapshot) -> StoreScan {
        let flags = pg_sys::ScanOptions::SO_TYPE_SEQSCAN | pg_sys::ScanOptions::SO_ALLOW_STRAT | pg_sys::ScanOptions::SO_ALLOW_PAGEMODE;
        // SAFETY: `store` is open until `end` (begin's contract), which ends this keyless heap scan.
        let scan = unsafe { pg_sys::heap_beginscan(store, snapshot, 0, std::ptr::null_mut(), std::ptr::null_mut(), flags) };
        StoreScan { inner: Inner::Heap(scan) }
    }

    /// This participant's share of a parallel scan of the store's heap: the
    /// heap hands out its blocks to the leader and the workers.
    ///
    /// # Safety
    /// `store` must be open and stay open until `end`; `pscan` initialized for it
    /// (table_parallelscan_initialize) in the parallel query's shared memory.
    pub unsafe fn begin_parallel(store: pg_sys::Relation, pscan: pg_sys::ParallelTableScanDesc) -> StoreScan {
        // SAFETY: `store` is open until `end` and `pscan` initialized for it in the parallel query's shared memory
        // (begin_parallel's contract).
        let scan = unsafe { pg_sys::table_beginscan_parallel(store, pscan) };
        StoreScan { inner: Inner::Heap(scan) }
    }

    /// The buckets within `ranges` of one of the store's indexes, in index order.
    ///
    /// # Safety
    /// `store` must be open and stay open until `end`; `ranges.index` one of its indexes.
    pub unsafe fn begin_index(store: pg_sys::Relation, snapshot: pg_sys::Snapshot, ranges: IndexRanges) -> StoreScan {
        // SAFETY: ranges.index is one of the open store's indexes (begin_index's contract); its AccessShareLock
        // is released by the index_close in `end`.
        let index = unsafe { pg_sys::index_open(ranges.index, pg_sys::AccessShareLock as i32) };
        StoreScan {
            inner: Inner::Index(IndexWalk {
                store,
                index,
                snapshot,
                key_sets: ranges.key_sets,
                current: 0,
                scan: std::ptr::null_mut(),
                started: false,
                exhausted: None,
            }),
        }
    }

    /// The next tuple; valid until the next call.
    pub fn next(&mut self, forward: bool) -> Option<pg_sys::HeapTuple> {
        match &mut self.inner {
            Inner::Heap(scan) => {
                let dir = if forward { pg_sys::ScanDirection::ForwardScanDirection } else { pg_sys::ScanDirection::BackwardScanDirection };
                // SAFETY: `scan` was begun by begin or begin_parallel and is ended only by `end`, which consumes self.
                let tuple = unsafe { pg_sys::heap_getnext(*scan, dir) };
                (!tuple.is_null()).then_some(tuple)
            }
            Inner::Index(walk) => walk.next(forward),
        }
    }

    pub fn rescan(&mut self) {
        match &mut self.inner {
            // SAFETY: the heap scan is open until `end`; a keyless rescan keeps its flags.
            Inner::Heap(scan) => unsafe { pg_sys::heap_rescan(*scan, std::ptr::null_mut(), false, false, false, false) },
            Inner::Index(walk) => {
                // SAFETY: the walk's `scan` is null or one its open_current began; next() opens a fresh one.
                unsafe { walk.close_current() };
                walk.started = false;
                walk.exhausted = None;
            }
        }
    }

    pub fn end(self) {
        match self.inner {
            // SAFETY: the heap scan is open, and `self` is consumed, so it is ended exactly once.
            Inner::Heap(scan) => unsafe { pg_sys::heap_endscan(scan) },
            Inner::Index(mut walk) => {
                // SAFETY: closes the walk's current scan, if any, then the index begin_index opened with AccessShareLock.
                unsafe {
                    walk.close_current();
                    pg_sys::index_close(walk.index, pg_sys::AccessShareLock as i32);
                }
            }
        }
    }
}

/// The store's usable indexes: which index, over which store columns (1-based).
///
/// # Safety
/// `store` must be an open bucket store.
pub unsafe fn indexes(store: pg_sys::Relation) -> Vec<(pg_sys::Oid, Vec<i16>)> {
    // SAFETY: `store` is an open bucket store (indexes's contract); RelationGetIndexList returns a fresh OID
    // list of its indexes.
    let oids = unsafe { crate::pg::nodes::list_oids(pg_sys::RelationGetIndexList(store)) };
    oids.into_iter()
        .filter_map(|oid| {
            // SAFETY: `oid` is one of the store's indexes, open (AccessShareLock) until the index_close at the
            // end of this block, so rd_index, rd_rel and the indnatts entries of indkey are readable.
            let (columns, usable) = unsafe {
                let index = pg_sys::index_open(oid, pg_sys::AccessShareLock as i32);
                let form = (*index).rd_index;
                let columns = (*form).indkey.values.as_slice((*form).indnatts as usize).to_vec();
                // Only whole-column btree indexes over every row (a superuser may add others).
                let usable = (*form).indisvalid
                    && (*(*index).rd_rel).relam == pg_sys::BTREE_AM_OID
                    && !columns.contains(&0)
                    && pg_sys::RelationGetIndexPredicate(index).is_null();
                pg_sys::index_close(index, pg_sys::AccessShareLock as i32);
                (columns, usable)
            };
            usable.then_some((oid, columns))
        })
        .collect()
}

/// The store's index over exactly `columns` (1-based store column numbers).
///
/// # Safety
/// As `indexes`.
pub unsafe fn index_on(store: pg_sys::Relation, columns: &[i16]) -> Option<pg_sys::Oid> {
    // SAFETY: `store` is an open bucket store, as index_on's contract (that of indexes) says.
    let all = unsafe { indexes(store) };
    all.into_iter().find(|(_, cols)| cols == columns).map(|(oid, _)| oid)
}

/// Whether any bucket's newest row is older than `cutoff`, found through the
/// index on window_start (None: the store has none). A bucket's rows lie in
/// its window, so such a bucket started before `cutoff`: the look-up reads
/// those buckets oldest first and stops at the first one wholly older, and,
/// when none is, it has read only the buckets of the windows that straddle
/// `cutoff`. (Stores no longer keep an index on max_time for this: its
/// entries cost every bucket 20 bytes.)
///
/// # Safety
/// `store` must be an open bucket store.
pub unsafe fn any_bucket_older_than(store: pg_sys::Relation, cutoff: i64, snapshot: pg_sys::Snapshot) -> Option<bool> {
    // SAFETY: `store` is an open bucket store (the contract), so its descriptor has the window_start column.
    let time_type = unsafe { (*crate::pg::relation::tuple_desc_attr((*store).rd_att, COL_WINDOW_START)).atttypid };
    // SAFETY: index_on needs only that same open `store`.
    let index_oid = unsafe { index_on(store, &[(COL_WINDOW_START + 1) as i16]) }?;
    let proc = if time_type == pg_sys::TIMESTAMPTZOID { pg_sys::F_TIMESTAMPTZ_LT } else { pg_sys::F_TIMESTAMP_LT };
    let mut key = pg_sys::ScanKeyData::default();
    // SAFETY: `index_oid` is the store's btree index on window_start and `key` a local "< cutoff" key of its type,
    // copied by the scan; the caller's snapshot outlives the scan, which ends before this block does. Each tuple
    // systable_getnext returns is a valid store tuple until the next call; heap_getattr reads its max_time (never NULL)
    // by value.
    let found = unsafe {
        pg_sys::ScanKeyInit(&mut key, (COL_WINDOW_START + 1) as i16, pg_sys::BTLessStrategyNumber as u16, pg_sys::Oid::from(proc), pg_sys::Datum::from(cutoff));
        let scan = pg_sys::systable_beginscan(store, index_oid, true, snapshot, 1, &mut key);
        let mut found = false;
        loop {
            let tuple = pg_sys::systable_getnext(scan);
            if tuple.is_null() {
                break;
            }
            let mut isnull = false;
            if (pg_sys::heap_getattr(tuple, (COL_MAX_TIME + 1) as i32, (*store).rd_att, &mut isnull).value() as i64) < cutoff {
                found = true;
                break;
            }
        }
        pg_sys::systable_endscan(scan);
        found
    };
    Some(found)
}

/// Buckets the store holds (heap estimate, or exact when small), and the
/// buckets and rows of a sample, for row estimates.
///
/// # Safety
/// `store` must be open.
pub unsafe fn estimate(store: pg_sys::Relation) -> (f64, usize, f64, pg_sys::BlockNumber) {
    const EXACT_UP_TO_BLOCKS: u32 = 16;
    const SAMPLE_BUCKETS: usize = 200;
    // SAFETY: `store` is open (estimate's contract); the block count comes from its storage manager.
    let nblocks = unsafe { pg_sys::RelationGetNumberOfBlocksInFork(store, pg_sys::ForkNumber::MAIN_FORKNUM) };
    let exact = nblocks <= EXACT_UP_TO_BLOCKS;
    // SAFETY: `store` stays open past scan.end() below; current_snapshot() is the statement's or transaction's.
    let mut scan = unsafe { StoreScan::begin(store, current_snapshot()) };
    let (mut n, mut rows) = (0usize, 0f64);
    while exact || n < SAMPLE_BUCKETS {
        let Some(tuple) = scan.next(true) else { break };
        n += 1;
        // SAFETY: `tuple` is a store tuple scan.next just returned, valid until its next call; only the row count is kept.
        rows += unsafe { read_header(store, tuple) }.rows as f64;
    }
    scan.end();
    let buckets = if exact {
        n as f64
    } else {
        let mut pages = 0;
        let mut tuples = 0.0;
        let mut allvisfrac = 0.0;
        // SAFETY: rd_tableam of the open `store` is the heap AM's routine, static for the server's life.
        match unsafe { (*(*store).rd_tableam).relation_estimate_size } {
            Some(f) => {
                // SAFETY: the heap AM's relation_estimate_size for the open `store`, with no attribute widths
                // (NULL) and locals for its three results.
                unsafe { f(store, std::ptr::null_mut(), &mut pages, &mut tuples, &mut allvisfrac) };
                tuples
            }
            None => n as f64,
        }
    };
    (buckets, n, rows, nblocks)
}

/// The snapshot maintenance (compaction, expiry) reads the store with, taken
/// once the caller holds the table's maintenance lock and registered (the
/// caller unregisters it). Under READ COMMITTED it sees every rewrite that
/// committed before the lock was granted: the statement's snapshot, taken
/// before the lock was waited for, still shows the buckets and moves entries
/// a maintenance run that held the lock first rewrote or removed.
/// REPEATABLE READ and SERIALIZABLE keep the transaction's snapshot, as for
/// any statement: the buckets rewritten since are gone when locked and left
/// alone (`lock_bucket`), so the run merges or expires what is left.
///
/// # Safety
/// In a transaction, after the caller's lock on the table.
pub unsafe fn snapshot_after_lock() -> pg_sys::Snapshot {
    // SAFETY: XactIsoLevel is the backend's isolation level global, copied by value inside a transaction
    // (snapshot_after_lock's contract).
    let uses_xact_snapshot = unsafe { pg_sys::XactIsoLevel } >= pg_sys::XACT_REPEATABLE_READ as i32;
    // SAFETY: in a transaction, after the caller's table lock; the snapshot is registered before any use and
    // the caller unregisters it.
    unsafe {
        let snapshot = if uses_xact_snapshot { pg_sys::GetTransactionSnapshot() } else { pg_sys::GetLatestSnapshot() };
        pg_sys::RegisterSnapshot(snapshot)
    }
}

/// The snapshot a statement runs with; the transaction's when none is active
/// (commit-time callbacks, planning outside a portal).
pub fn current_snapshot() -> pg_sys::Snapshot {
    // SAFETY: ActiveSnapshotSet/GetActiveSnapshot only read the backend's active snapshot stack, and
    // GetTransactionSnapshot is reached only inside a transaction, where every reader of the store runs.
    unsafe { if pg_sys::ActiveSnapshotSet() { pg_sys::GetActiveSnapshot() } else { pg_sys::GetTransactionSnapshot() } }
}
