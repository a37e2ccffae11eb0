//! Rows in time order (ascending or descending) across all buckets, for
//! `ORDER BY time [DESC] LIMIT n` and for grouping by a time bucket with a
//! limit: buckets come from the window_start index in window order and their
//! rows are merged, so the first rows arrive after reading only the newest
//! (or oldest) windows.
//!
//! Or rows in (meta..., time) order, both ascending or both descending, for
//! merge joins and `ORDER BY meta, time`: one walk of the series index
//! (meta..., window_start), forward or backward, whose entries come series
//! by series, each in window order; the merge key is then (series rank, time).
//!
//! When a row may be returned: buckets come in window_start order, and a
//! bucket's rows lie in `[window_start, window_start + span)` (the table's
//! span only grows, so the current span bounds every bucket's). Descending,
//! no bucket not yet loaded holds a row at or after `next_window_start +
//! span`; ascending, none holds a row before `next_window_start`. The best
//! loaded row is returned once no unloaded bucket can beat it.

use crate::catalog::config::{self, Config};
use crate::catalog::shape::TableShape;
use crate::scan::plain::ScanCounters;
use crate::scan::prune::Prune;
use crate::scan::series::{SeriesRanks, SeriesTracker};
use crate::store::bucket::{self, StoredBucket};
use crate::store::reader::{self, IndexRanges};
use crate::store::bucket::LoadedBucket;
use crate::store::rows;
use crate::store::tuple;
use pgrx::pg_sys;
use std::cell::Cell;
use std::collections::BinaryHeap;
use std::rc::Rc;

/// A merge key; larger comes out first: the series' rank (in (meta, time)
/// order), the time, then, for rows of equal time, their series' meta order
/// (in time order with meta tie-breaks).
#[derive(Clone, Debug)]
struct Key {
    series: i64,
    time: i64,
    tie: Tie,
}

#[derive(Clone, Debug)]
enum Tie {
    /// No tie-break: equal times are equal.
    None,
    /// Above every series (a frontier: an unread bucket may hold any series).
    Max,
    /// The series' position in meta order (shared, so that it follows when
    /// series found later are inserted before it), and whether descending.
    Rank(Rc<Cell<u32>>, bool),
}

impl Key {
    fn new(series: i64, time: i64) -> Key {
        Key { series, time, tie: Tie::None }
    }
}

impl Ord for Key {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        use std::cmp::Ordering::{Equal, Greater, Less};
        // The tie-break only for equal times: the merge compares keys at every step.
        self.series.cmp(&other.series).then(self.time.cmp(&other.time)).then_with(|| match (&self.tie, &other.tie) {
            (Tie::Max, Tie::Max) | (Tie::None, Tie::None) => Equal,
            (Tie::Max, _) => Greater,
            (_, Tie::Max) => Less,
            // Ascending meta: the lower rank comes out first (is larger).
            (Tie::Rank(a, false), Tie::Rank(b, _)) => b.get().cmp(&a.get()),
            (Tie::Rank(a, true), Tie::Rank(b, _)) => a.get().cmp(&b.get()),
            (Tie::None, _) | (_, Tie::None) => Equal,
        })
    }
}

impl PartialOrd for Key {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Key {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == std::cmp::Ordering::Equal
    }
}

impl Eq for Key {}

/// Ranks in series order leave room between two series of the walk for the
/// tail's series that fall between them.
const RANK_SHIFT: u32 = 24;

/// Runs (OrderedScan::run) are looked for while at most this many buckets are loaded.
const RUN_HEADS: usize = 16;

/// One index walk and how far it got.
struct Walk {
    scan: reader::StoreScan,
    /// window_start of the last header it returned.
    last_window: Option<i64>,
    done: bool,
}

/// A loaded bucket: its rows that pass the row filters, in output order.
struct Loaded {
    bucket: LoadedBucket,
    /// By-reference values laid out once per bucket (rows come out one by one,
    /// interleaved with other buckets' rows).
    prepared: rows::Prepared,
    order: Vec<usize>,
    next: usize,
    cxt: pg_sys::MemoryContext,
    /// The series rank of the bucket (0 in time order), and its tie-break.
    rank: i64,
    tie: Tie,
}

pub(super) struct OrderedScan {
    config: Rc<Config>,
    shape: TableShape,
    rel: pg_sys::Relation,
    store: pg_sys::Relation,
    /// Walks of index ranges, each in window order: one per series when the
    /// query names its series, else one over the window_start index.
    walks: Vec<Walk>,
    descending: bool,
    needed: Option<Vec<bool>>,
    /// Documents the query reads only some top-level keys of (`rows::DocKeys`).
    pub(super) doc_keys: Rc<rows::DocKeys>,
    prune: Vec<Prune>,
    meta_fns: Vec<Option<pg_sys::FmgrInfo>>,
    /// The row filters on other columns than time (decided per row).
    row_filters: Vec<crate::scan::prune::RowFilter>,
    /// The time filters' ranges (decided by binary search on a bucket's sorted times).
    time_ranges: Vec<crate::scan::prune::BoundRange>,
    /// Buckets whose headers were read but not their payloads, each in its own
    /// context, and their best possible keys (from max_time, or min_time
    /// ascending): one is loaded when it may hold the next row.
    unloaded: Vec<Option<(StoredBucket, pg_sys::MemoryContext, i64, Tie)>>,
    deferred: BinaryHeap<(Key, usize)>,

    loaded: Vec<Option<Loaded>>,
    /// (sort key of the bucket's next row, index in `loaded`): the max is next out.
    heads: BinaryHeap<(Key, usize)>,
    /// In (meta, time) order: which series the walk is in.
    series: Option<SeriesTracker>,
    /// In time order with rows of equal time in meta order.
    ranks: Option<SeriesRanks>,

    /// A bucket whose last row is in the caller's slot: freed on the next call.
    retiring: Option<usize>,
    /// (i, end): the top of `heads` is loaded bucket `i`, and its rows up to
    /// position `end` of its order beat every other candidate (other heads,
    /// deferred buckets, unread headers), so they come out without the heaps;
    /// its key in `heads` is brought up to date when the run ends.
    run: Option<(usize, usize)>,
    /// The best key an unloaded or unread bucket may hold (None: none), as
    /// last computed; None when `deferred` or a walk has changed since. Rows
    /// of loaded buckets that beat it come out without looking further.
    outside: Option<Option<Key>>,
    scan_cxt: pg_sys::MemoryContext,
    pub counters: ScanCounters,
    /// How many payload bytes to fetch first (`StoredBucket::load_payload_for`).
    pub prefix_hint: usize,
}

impl OrderedScan {
    /// # Safety
    /// `rel` is an open, configured tsbucket table.
    /// `meta_ties`: Some(descending) to order rows of equal time by their meta
    /// values (ascending or descending, NULLs last ascending).
    pub unsafe fn begin(
        rel: pg_sys::Relation,
        snapshot: pg_sys::Snapshot,
        descending: bool,
        meta_ties: Option<bool>,
        needed: Option<Vec<bool>>,
        prune: Vec<Prune>,
    ) -> OrderedScan {
        // SAFETY: `rel` is an open, configured tsbucket table and `snapshot` the scan's, as begin's contract requires.
        let (config, shape, store) = unsafe { open(rel, snapshot) };
        let time = crate::scan::prune::time_range(&prune);
        // The series index when every meta column has an equality: each of
        // its key sets (one per combination of values) is one series, in
        // window order; else the window_start index.
        let (metas, values) = crate::scan::access::meta_conditions(&prune);
        // SAFETY: `store` is `config`'s bucket store, opened by `open` above; `values` are the planner's constants of the
        // meta conditions `metas`, of the types their operators compare.
        let series = unsafe {
            match crate::scan::access::choose(store, &config, &metas, time.is_some()) {
                a if a.pins_every_series(&config) => crate::scan::access::ranges(store, &config, &a, &values, time),
                _ => None,
            }
        };
        // Each key set must pin every meta column (ranges stops adding
        // columns when an IN list would make too many key sets): only then
        // is each walk one series, in window order.
        let nmeta = config.meta_attnums.len();
        let whole_series = |r: &IndexRanges| {
            r.key_sets.iter().all(|set| {
                set.iter()
                    .filter(|k| k.sk_strategy == pg_sys::BTEqualStrategyNumber as u16 && (k.sk_attno as usize) > bucket::COL_FIRST_META)
                    .count()
                    == nmeta
            })
        };
        let ranges: Vec<IndexRanges> = match series.filter(whole_series) {
            Some(r) => r.key_sets.into_iter().map(|keys| IndexRanges { index: r.index, key_sets: vec![keys] }).collect(),
            None => {
                // SAFETY: `store` is still the open bucket store of `config`; window_ranges reads its index list and descriptor.
                let window = unsafe { crate::scan::access::window_ranges(store, &config, time) };
                vec![window.unwrap_or_else(|| {
                    // SAFETY: `rel` is the open table (begin's contract), so its relcache entry's rd_id is readable.
                    let relid = unsafe { (*rel).rd_id };
                    crate::pg::error::ts_error(
                        crate::pg::error::DATA_CORRUPTED,
                        &format!("the bucket store of table \"{}\" has no window_start index", crate::pg::relation::relation_name(relid)),
                        "Run ALTER EXTENSION tsbucket UPDATE, which adds it to tables made by older versions.",
                    )
                })]
            }
        };
        // SAFETY: `rel` is the open table (begin's contract); SeriesRanks::new reads its meta attributes and the type cache.
        let ranks = meta_ties.map(|d| unsafe { SeriesRanks::new(rel, &config, d) });
        // The ranks go in with the rest: the tail's groups, added as the scan is assembled, take their tie-breaks from them.
        // SAFETY: `rel` is open and `store` is its bucket store, opened by `open`; every range of `ranges` is on one of its indexes.
        unsafe { Self::assemble(rel, snapshot, config, shape, store, ranges, descending, needed, prune, None, ranks) }
    }

    /// Rows in (meta..., time) order: ascending, or (`descending`) both descending,
    /// NULL meta values last ascending and first descending, as the series index has them.
    ///
    /// # Safety
    /// `rel` is an open tsbucket table with meta columns.
    pub unsafe fn begin_series_order(
        rel: pg_sys::Relation,
        snapshot: pg_sys::Snapshot,
        descending: bool,
        needed: Option<Vec<bool>>,
        prune: Vec<Prune>,
    ) -> OrderedScan {
        // SAFETY: `rel` is an open tsbucket table with meta columns and `snapshot` the scan's (begin_series_order's contract).
        let (config, shape, store) = unsafe { open(rel, snapshot) };
        // SAFETY: `store` is `config`'s bucket store, opened by `open` just above.
        let index = unsafe { crate::scan::access::require_series_index(store, &config) };
        // SAFETY: `rel` is open for the whole scan, so its descriptor stays valid.
        let tupdesc = unsafe { (*rel).rd_att };
        let mut eq = Vec::new();
        let mut byval_len = Vec::new();
        for &attnum in &config.meta_attnums {
            // SAFETY: `attnum` is one of the table's meta columns, so `attnum - 1` is below the natts of `tupdesc`.
            let att = unsafe { &*crate::pg::relation::tuple_desc_attr(tupdesc, attnum as usize - 1) };
            // SAFETY: in the scan's transaction; CurrentMemoryContext is the context the scan begins in, which outlives it.
            let finfo = unsafe { crate::pg::fmgr::type_support(att.atttypid, crate::pg::fmgr::Support::Equal, pg_sys::CurrentMemoryContext) };
            eq.push((finfo, att.attcollation));
            byval_len.push((att.attbyval, att.attlen));
        }
        // SAFETY: `rel` is the open table; SeriesRanks::new copies each meta column's btree comparison.
        let cmp = unsafe { SeriesRanks::new(rel, &config, descending) }.cmp;
        // SAFETY: `values_cxt` is a child of CurrentMemoryContext, the context the scan begins in; OrderedScan::end deletes it.
        let values_cxt =
            unsafe { pg_sys::AllocSetContextCreateInternal(pg_sys::CurrentMemoryContext, c"tsbucket series values".as_ptr(), 0, 1024, 8 * 1024) };
        let series = SeriesTracker { eq, cmp, current: None, byval_len, rank: 0, values_cxt, tail: Default::default(), placed_between: 0 };
        let time = crate::scan::prune::time_range(&prune);
        // SAFETY: `store` is `config`'s bucket store, opened by `open` above, and `index` its series index.
        let ranges = vec![unsafe { crate::scan::access::series_ranges(store, &config, index, time) }];
        // SAFETY: `rel` is open and `store` its bucket store, opened by `open`; `index` is the store's series index.
        unsafe { Self::assemble(rel, snapshot, config, shape, store, ranges, descending, needed, prune, Some(series), None) }
    }

    #[allow(clippy::too_many_arguments)]
    unsafe fn assemble(
        rel: pg_sys::Relation,
        snapshot: pg_sys::Snapshot,
        config: Rc<Config>,
        shape: TableShape,
        store: pg_sys::Relation,
        ranges: Vec<IndexRanges>,
        descending: bool,
        needed: Option<Vec<bool>>,
        prune: Vec<Prune>,
        series: Option<SeriesTracker>,
        ranks: Option<SeriesRanks>,
    ) -> OrderedScan {
        let walks = ranges
            .into_iter()
            // SAFETY: `store` stays open until `end`, which ends every walk first; each range is on one of its indexes.
            .map(|r| Walk { scan: unsafe { reader::StoreScan::begin_index(store, snapshot, r) }, last_window: None, done: false })
            .collect();
        // SAFETY: meta_functions looks up the operators of `prune`'s meta conditions, which the planner found in the quals.
        let meta_fns = unsafe { crate::scan::prune::meta_functions(&prune) };
        // SAFETY: row_filters reads attributes of `(*rel).rd_att`, the descriptor of the open table `config` configures.
        let row_filters = unsafe { crate::scan::prune::row_filters(&config, &prune, (*rel).rd_att) };
        let mut needed = needed;
        crate::scan::prune::decode_filtered_columns(&mut needed, &row_filters);
        let time_attr = config.time_attnum as usize - 1;
        let (time_filters, row_filters): (Vec<_>, Vec<_>) = row_filters.into_iter().partition(|f| f.attr == time_attr);
        let time_ranges = time_filters.iter().map(|f| f.range).collect();
        // SAFETY: `scan_cxt` is a child of CurrentMemoryContext, the context the ordered scan begins in; `end` deletes it.
        let scan_cxt =
            unsafe { pg_sys::AllocSetContextCreateInternal(pg_sys::CurrentMemoryContext, c"tsbucket ordered scan".as_ptr(), 0, 1024, 8 * 1024) };
        let mut scan = OrderedScan {
            config,
            shape,
            rel,
            store,
            walks,
            descending,
            needed,
            doc_keys: Rc::from([]),
            prune,
            meta_fns,
            row_filters,
            time_ranges,
            unloaded: Vec::new(),
            deferred: BinaryHeap::new(),
            loaded: Vec::new(),
            heads: BinaryHeap::new(),
            retiring: None,
            run: None,
            outside: None,
            series,
            ranks,
            scan_cxt,
            counters: ScanCounters::default(),
            prefix_hint: 0,
        };
        // SAFETY: `snapshot` is the scan's MVCC snapshot; the tail's groups go to contexts under scan_cxt.
        unsafe { scan.add_tail(snapshot) };
        scan
    }

    /// The tail's groups, as buckets whose headers are read: in time order
    /// all at once; in series order placed among the walk's series as it
    /// meets them (`place_tail`).
    unsafe fn add_tail(&mut self, snapshot: pg_sys::Snapshot) {
        // SAFETY: in a transaction with the scan's snapshot (read_groups' contract); `self.rel` is open.
        let groups = unsafe { crate::store::tail::read_groups(&self.config, &self.shape, snapshot) };
        let mut headers = Vec::new();
        for group in groups {
            // SAFETY: each group's header goes to a new child of scan_cxt (alive until `end`), deleted with the bucket.
            let (cxt, stored) = unsafe {
                let cxt = pg_sys::AllocSetContextCreateInternal(self.scan_cxt, c"tsbucket ordered bucket".as_ptr(), 0, 8 * 1024, 8 * 1024 * 1024);
                let old = pg_sys::MemoryContextSwitchTo(cxt);
                let stored = group.header(&self.shape);
                pg_sys::MemoryContextSwitchTo(old);
                (cxt, stored)
            };
            // SAFETY: `self.meta_fns` were built by meta_functions from `self.prune` (assemble), one per condition.
            if !unsafe { crate::scan::prune::bucket_may_match(&self.prune, &mut self.meta_fns, &stored) } {
                self.counters.buckets_skipped += 1;
                // SAFETY: the group's own context, created above; `stored` is dropped unused.
                unsafe { pg_sys::MemoryContextDelete(cxt) };
                continue;
            }
            headers.push((stored, cxt));
        }
        let descending = self.descending;
        match self.series.as_mut() {
            Some(tracker) => {
                let n = tracker.cmp.len();
                let cmp = &mut tracker.cmp;
                headers.sort_by(|(a, _), (b, _)| {
                    let ma: Vec<_> = (0..n).map(|i| a.meta_datum(i)).collect();
                    let mb: Vec<_> = (0..n).map(|i| b.meta_datum(i)).collect();
                    // SAFETY: `cmp` holds each meta column's btree comparison; the values are the groups' meta values.
                    let o = unsafe { SeriesRanks::compare(cmp, &ma, &mb) };
                    if descending { o.reverse() } else { o }
                });
                tracker.tail = headers.into();
            }
            None => {
                for (stored, cxt) in headers {
                    // SAFETY: `cxt` holds the group's header and the scan's contexts are alive.
                    unsafe { self.push_unloaded(stored, cxt, 0) };
                }
            }
        }
    }

    /// In series order, the walk met a new series (`next`, None when done):
    /// the tail's series before it come first, between the previous series'
    /// rank and its own, and the tail's groups of the same series take its rank.
    unsafe fn place_tail(&mut self, next: Option<&StoredBucket>) {
        let descending = self.descending;
        let Some(tracker) = self.series.as_mut() else { return };
        let n = tracker.cmp.len();
        let next_meta: Option<Vec<Option<pg_sys::Datum>>> = next.map(|b| (0..n).map(|i| b.meta_datum(i)).collect());
        // The new series' rank, already counted by rank_of (or the last, when done).
        let rank = tracker.rank << RANK_SHIFT;
        let before = if next.is_some() { (tracker.rank - 1) << RANK_SHIFT } else { rank };
        let mut placed = Vec::new();
        let mut to_push = Vec::new();
        while let Some((front, _)) = tracker.tail.front() {
            let order = match &next_meta {
                None => std::cmp::Ordering::Less,
                Some(m) => {
                    let f: Vec<_> = (0..n).map(|i| front.meta_datum(i)).collect();
                    // SAFETY: the meta columns' btree comparisons, on the groups' and the walk's meta values.
                    let o = unsafe { SeriesRanks::compare(&mut tracker.cmp, &f, m) };
                    if descending { o.reverse() } else { o }
                }
            };
            let (stored, cxt) = match order {
                std::cmp::Ordering::Greater => break,
                _ => tracker.tail.pop_front().expect("peeked"),
            };
            let r = if order == std::cmp::Ordering::Equal {
                rank
            } else {
                // A tail-only series: after the ones placed in this gap before it (equal metas share a rank).
                let same_as_last = placed.last().is_some_and(|(_, last): &(i64, Vec<Option<pg_sys::Datum>>)| {
                    let f: Vec<_> = (0..n).map(|i| stored.meta_datum(i)).collect();
                    // SAFETY: as above.
                    (unsafe { SeriesRanks::compare(&mut tracker.cmp, &f, last) }) == std::cmp::Ordering::Equal
                });
                if !same_as_last {
                    tracker.placed_between += 1;
                }
                before + tracker.placed_between
            };
            placed.push((r, (0..n).map(|i| stored.meta_datum(i)).collect()));
            to_push.push((stored, cxt, r));
        }
        if next.is_some() {
            tracker.placed_between = 0;
        }
        for (stored, cxt, r) in to_push {
            // SAFETY: `cxt` holds the group's header, created by add_tail under scan_cxt.
            unsafe { self.push_unloaded(stored, cxt, r) };
        }
    }

    /// Adds a bucket whose header is read (in its context `cxt`) to the merge,
    /// keyed by the best row it may hold.
    ///
    /// # Safety
    /// `cxt` is a live child of scan_cxt holding `stored`'s values.
    unsafe fn push_unloaded(&mut self, stored: StoredBucket, cxt: pg_sys::MemoryContext, rank: i64) {
        let scan_cxt = self.scan_cxt;
        let tie = match self.ranks.as_mut() {
            Some(r) => {
                // SAFETY: `scan_cxt` is the scan's context, alive until `end`, as long as the ranks that keep copies in it.
                let (cell, desc) = unsafe { r.tie_of(&stored, scan_cxt) };
                Tie::Rank(cell, desc)
            }
            None => Tie::None,
        };
        let mut key = if self.descending { self.key(rank, stored.max_time) } else { self.key(rank, stored.min_time) };
        key.tie = tie.clone();
        let i = free_slot(&mut self.unloaded);
        self.unloaded[i] = Some((stored, cxt, rank, tie));
        self.deferred.push((key, i));
        self.outside = None;
    }

    /// # Safety
    /// Once, after `begin`.
    pub unsafe fn end(mut self) {
        for walk in self.walks.drain(..) {
            walk.scan.end();
        }
        // SAFETY: `self.store` was opened by `open` and every walk on it has just ended; NoLock keeps the AccessShareLock
        // until the transaction ends.
        unsafe { pg_sys::table_close(self.store, pg_sys::NoLock as i32) };
        if let Some(series) = &self.series {
            // SAFETY: `values_cxt` was created by begin_series_order and is deleted only here, `end` running once.
            unsafe { pg_sys::MemoryContextDelete(series.values_cxt) };
        }
        // Deletes every bucket's context with it.
        // SAFETY: `self.scan_cxt` was created by assemble and is deleted only here (once, as end's contract says).
        unsafe { pg_sys::MemoryContextDelete(self.scan_cxt) };
    }

    /// The sort key of time `t` in series `rank`: larger comes out first.
    fn key(&self, rank: i64, t: i64) -> Key {
        Key::new(-rank, if self.descending { t } else { !t })
    }

    fn current_rank(&self) -> i64 {
        self.series.as_ref().map_or(0, |s| s.rank << RANK_SHIFT)
    }

    /// The best key an unread bucket of walk `w` may hold: its rows lie in
    /// [window_start, window_start + span), and the walk goes in window order,
    /// so the last header it returned bounds the rest. None when it is done;
    /// i64::MAX before its first header.
    /// In series order, later headers belong to this series or later ones.
    fn frontier(&self, w: &Walk) -> Option<Key> {
        if w.done {
            return None;
        }
        let rank = self.current_rank();
        let mut key = match w.last_window {
            None => Key::new(i64::MAX, i64::MAX),
            Some(ws) if self.descending => self.key(rank, ws.saturating_add(self.config.span_micros - 1)),
            Some(ws) => self.key(rank, ws),
        };
        key.tie = Tie::Max;
        Some(key)
    }

    /// The walk whose unread buckets may hold the best row, and that key.
    fn best_walk(&self) -> Option<(usize, Key)> {
        self.walks.iter().enumerate().filter_map(|(i, w)| self.frontier(w).map(|f| (i, f))).max_by(|a, b| a.1.cmp(&b.1))
    }

    /// Reads walk `w`'s next header that passes the bucket checks into `deferred`.
    unsafe fn read_header(&mut self, w: usize) {
        self.outside = None;
        let forward = !self.descending;
        loop {
            let Some(tuple) = self.walks[w].scan.next(forward) else {
                self.walks[w].done = true;
                // SAFETY: the walk is done: the tail's series still waiting come after every series it met.
                unsafe { self.place_tail(None) };
                return;
            };
            // SAFETY: `cxt` is a new child of `self.scan_cxt` (alive until `end`), current only while `tuple` is decoded;
            // walk `w` of `self.store` just returned `tuple`, valid until the walk's next call.
            let (cxt, stored) = unsafe {
                let cxt = pg_sys::AllocSetContextCreateInternal(self.scan_cxt, c"tsbucket ordered bucket".as_ptr(), 0, 8 * 1024, 8 * 1024 * 1024);
                let old = pg_sys::MemoryContextSwitchTo(cxt);
                let stored = tuple::read_header(self.store, tuple);
                pg_sys::MemoryContextSwitchTo(old);
                (cxt, stored)
            };
            self.walks[w].last_window = Some(stored.window_start);
            let (rank, new_series) = match self.series.as_mut() {
                Some(s) => {
                    let cxt = s.values_cxt;
                    let before = s.rank;
                    // SAFETY: `cxt` is the tracker's `values_cxt`, created by begin_series_order and deleted only by `end`.
                    let r = unsafe { s.rank_of(&stored, cxt) };
                    (r << RANK_SHIFT, r != before)
                }
                None => (0, false),
            };
            if new_series {
                // SAFETY: `stored` is the walk's first header of its series, its meta values valid in `cxt`.
                unsafe { self.place_tail(Some(&stored)) };
            }
            // SAFETY: `self.meta_fns` were built by meta_functions from `self.prune` (assemble), one per condition, by position.
            if !unsafe { crate::scan::prune::bucket_may_match(&self.prune, &mut self.meta_fns, &stored) } {
                self.counters.buckets_skipped += 1;
                // SAFETY: `cxt` is the skipped bucket's own context, created above; `stored` is not read after this.
                unsafe { pg_sys::MemoryContextDelete(cxt) };
                continue;
            }
            // SAFETY: `stored` was read from `tuple` of `self.store`, still valid (walk `w` has not moved on); its copies go to
            // the bucket's own `cxt`, current while detached runs.
            let stored = unsafe {
                let old = pg_sys::MemoryContextSwitchTo(cxt);
                let stored = stored.detached(self.store);
                pg_sys::MemoryContextSwitchTo(old);
                stored
            };
            // SAFETY: `cxt` is the bucket's own context, holding its detached values.
            unsafe { self.push_unloaded(stored, cxt, rank) };
            return;
        }
    }

    /// Decodes unloaded bucket `i` and adds its rows to the merge.
    unsafe fn load(&mut self, i: usize) {
        self.outside = None;
        let (mut stored, cxt, rank, tie) = self.unloaded[i].take().expect("an unloaded bucket");
        // SAFETY: `cxt` is the bucket's own context (a child of scan_cxt made by read_header); its payload and decoded
        // columns go there and live until the bucket is retired.
        let old = unsafe { pg_sys::MemoryContextSwitchTo(cxt) };
        rows::load_payload(&mut stored, self.needed.as_deref(), &[], &[], &mut self.prefix_hint);
        self.counters.payload_bytes += stored.payload().len() as u64;
        let bucket = rows::load_columns(&self.config, &self.shape, &stored, self.needed.as_deref(), &self.doc_keys, &[]);
        self.counters.decoded_bytes += rows::decoded_bytes(&bucket);
        // SAFETY: back to `old`, the context load was called in, once the bucket is decoded into `cxt`.
        unsafe { pg_sys::MemoryContextSwitchTo(old) };
        if stored.tail.is_some() {
            self.counters.tail_rows += bucket.rows as u64;
        } else {
            self.counters.buckets_read += 1;
        }
        let time = rows::time_values(&self.config, &bucket);
        let order = crate::scan::prune::rows_in_time_order(time, &self.time_ranges, self.descending, |r| {
            crate::scan::prune::row_passes(&bucket, &self.row_filters, r)
        });
        self.counters.rows_filtered += (bucket.rows - order.len()) as u64;
        if order.is_empty() {
            // SAFETY: `cxt` holds only this bucket, none of whose rows passed; neither `bucket` nor `stored` is read after this.
            unsafe { pg_sys::MemoryContextDelete(cxt) };
            return;
        }
        let mut first = self.key(rank, time[order[0]]);
        first.tie = tie.clone();
        // SAFETY: the prepared by-reference datums go to the bucket's `cxt`, which lives as long as the Loaded that keeps it.
        let prepared = unsafe {
            let old = pg_sys::MemoryContextSwitchTo(cxt);
            let prepared = rows::prepare(&self.shape, &bucket, true);
            pg_sys::MemoryContextSwitchTo(old);
            prepared
        };
        let slot = free_slot(&mut self.loaded);
        self.loaded[slot] = Some(Loaded { bucket, prepared, order, next: 0, cxt, rank, tie });
        self.heads.push((first, slot));
    }
}

impl OrderedScan {
    fn row_time(&self, i: usize, row: usize) -> i64 {
        rows::time_values(&self.config, &self.loaded[i].as_ref().expect("loaded").bucket)[row]
    }

    /// Fills `slot` with the next row in time order; false at the end.
    ///
    /// # Safety
    /// `slot` is a virtual slot of the table.
    pub unsafe fn next(&mut self, slot: *mut pg_sys::TupleTableSlot) -> bool {
        if let Some(i) = self.retiring.take() {
            if let Some(l) = self.loaded[i].take() {
                // SAFETY: `l.cxt` holds the retired bucket, whose last row the caller's slot no longer needs on this next call.
                unsafe { pg_sys::MemoryContextDelete(l.cxt) };
            }
        }
        if let Some((i, end)) = self.run {
            let row = self.take_row(i);
            if self.loaded[i].as_ref().expect("a run's bucket is loaded").next == end {
                self.run = None;
                self.settle_top(i);
            }
            // SAFETY: bucket `i` is loaded, its context freed only on the call after its last row; `slot` is a virtual
            // slot of the table (next's contract).
            unsafe { self.emit(i, row, slot) };
            return true;
        }
        loop {
            // The best loaded row comes out when nothing outside can beat it.
            let outside = self.outside();
            let ready = self.heads.peek().filter(|(top, _)| outside.as_ref().is_none_or(|o| top >= o)).map(|h| h.1);
            if let Some(i) = ready {
                // SAFETY: `i` is the top of `heads`, a loaded bucket; `slot` is a virtual slot of the table (next's contract).
                unsafe { self.emit_top(i, [outside, None], slot) };
                return true;
            }
            let head = self.heads.peek().map(|h| h.0.clone());
            let deferred = self.deferred.peek().map(|d| d.0.clone());
            let known = head.clone().max(deferred.clone());
            // Read headers while an unread bucket may hold a better row.
            let frontier = self.best_walk();
            if let Some((w, frontier)) = &frontier {
                if known.is_none() || Some(frontier) > known.as_ref() {
                    // SAFETY: `w` is one of this scan's walks, not done, on `self.store`, which stays open until `end`.
                    unsafe { self.read_header(*w) };
                    continue;
                }
            }
            // Load a read bucket when it may hold a better row than any loaded.
            if deferred > head {
                let (_, i) = self.deferred.pop().expect("peeked");
                // SAFETY: `i` is the slot of `self.unloaded` whose key was just popped from `deferred`, its context alive.
                unsafe { self.load(i) };
                continue;
            }
            let Some(&(_, i)) = self.heads.peek() else {
                // SAFETY: `slot` is a virtual slot of the table (next's contract); cleared, it ends the scan.
                unsafe { pg_sys::ExecClearTuple(slot) };
                return false;
            };
            // SAFETY: `slot` is a virtual slot of the table (next's contract); `i` is the top of `heads`, just peeked.
            unsafe { self.emit_top(i, [deferred, frontier.map(|f| f.1)], slot) };
            return true;
        }
    }

    /// The best key of `deferred` and the walks' frontiers (`outside`, computed when it changed).
    fn outside(&mut self) -> Option<Key> {
        if let Some(o) = &self.outside {
            return o.clone();
        }
        let deferred = self.deferred.peek().map(|d| d.0.clone());
        let o = deferred.max(self.best_walk().map(|f| f.1));
        self.outside = Some(o.clone());
        o
    }

    /// Takes the next row of loaded bucket `i`, the top of `heads`, into
    /// `slot`; `others` bound every row not loaded (for `run_of`).
    ///
    /// # Safety
    /// `i` is the top of `heads`; `slot` is a virtual slot of the table.
    unsafe fn emit_top(&mut self, i: usize, others: [Option<Key>; 2], slot: *mut pg_sys::TupleTableSlot) {
        let row = self.take_row(i);
        self.settle_top(i);
        if self.retiring.is_none() {
            self.run = self.run_of(i, others);
        }
        // SAFETY: bucket `i` is loaded, its context freed only on the call after its last row; `slot` is a virtual
        // slot of the table (the contract).
        unsafe { self.emit(i, row, slot) };
    }

    /// The next row of loaded bucket `i`, the top of `heads` (whose key it leaves as it was).
    fn take_row(&mut self, i: usize) -> usize {
        let l = self.loaded[i].as_mut().expect("loaded");
        l.next += 1;
        l.order[l.next - 1]
    }

    /// Brings the top of `heads`, loaded bucket `i`, up to date after rows
    /// were taken: re-keyed on its next row, or, when it has none left, out of
    /// the heads and freed on the next call (its last row is in the caller's slot).
    fn settle_top(&mut self, i: usize) {
        let l = self.loaded[i].as_ref().expect("loaded");
        if l.next == l.order.len() {
            self.heads.pop();
            self.retiring = Some(i);
            return;
        }
        let key = Key { tie: l.tie.clone(), ..self.key(l.rank, self.row_time(i, l.order[l.next])) };
        // Re-keying the top in place sifts once, where pop and push sift twice.
        *self.heads.peek_mut().expect("bucket `i` is the top") = (key, i);
    }

    /// Where the run of loaded bucket `i` ends, if it is the top of `heads`:
    /// its rows from the next on come out as long as each beats the best other
    /// candidate, strictly, so that equal keys still go through the heaps.
    /// `others`: the best deferred bucket's key and the best unread header's,
    /// as `next` just found them; the other heads are looked at here.
    fn run_of(&self, i: usize, others: [Option<Key>; 2]) -> Option<(usize, usize)> {
        // Many heads (rows of many series interleaved in time order) make runs short: not worth looking.
        if self.heads.peek().map(|h| h.1) != Some(i) || self.heads.len() > RUN_HEADS {
            return None;
        }
        let other = self.heads.iter().filter(|h| h.1 != i).map(|h| &h.0).max().cloned();
        let bound = others.into_iter().chain([other]).flatten().max();
        let l = self.loaded[i].as_ref().expect("loaded");
        let times = rows::time_values(&self.config, &l.bucket);
        let end = match bound {
            None => l.order.len(),
            Some(bound) => {
                let beats = |row: usize| Key { tie: l.tie.clone(), ..self.key(l.rank, times[row]) } > bound;
                l.next + l.order[l.next..].iter().take_while(|&&row| beats(row)).count()
            }
        };
        (end > l.next).then_some((i, end))
    }

    /// Fills `slot` with row `row` of loaded bucket `i`.
    ///
    /// # Safety
    /// Bucket `i` is loaded; `slot` is a virtual slot of the table.
    unsafe fn emit(&self, i: usize, row: usize, slot: *mut pg_sys::TupleTableSlot) {
        let l = self.loaded[i].as_ref().expect("loaded");
        // SAFETY: `l.cxt` is loaded bucket `i`'s context, alive until the call after its last row; `slot` is a virtual
        // slot of `self.rel`, the open table, and `l.prepared` was made for `l.bucket` (the contract).
        unsafe {
            let old = pg_sys::MemoryContextSwitchTo(l.cxt);
            rows::fill_slot(self.rel, &self.shape, &l.bucket, Some(&l.prepared), row, slot);
            pg_sys::MemoryContextSwitchTo(old);
        }
    }
}

/// What every ordered scan starts from: the rows this transaction buffered
/// written, the table's configuration and shape, its store opened.
unsafe fn open(rel: pg_sys::Relation, snapshot: pg_sys::Snapshot) -> (Rc<Config>, TableShape, pg_sys::Relation) {
    // SAFETY: `rel` is the open table an ordered scan begins on, and `snapshot` that scan's snapshot.
    unsafe { crate::scan::plain::write_buffered_rows(rel, snapshot) };
    // SAFETY: `rel` is open (the contracts of begin and begin_series_order), so rd_id is readable.
    let config = config::require(unsafe { (*rel).rd_id });
    // SAFETY: `(*rel).rd_att` is the descriptor of the open table `config` configures.
    let shape = unsafe { TableShape::new((*rel).rd_att, &config) };
    // SAFETY: opens `config`'s bucket store with AccessShareLock; OrderedScan::end closes it with NoLock.
    let store = unsafe { pg_sys::table_open(config.store_relid, pg_sys::AccessShareLock as i32) };
    (config, shape, store)
}

/// A free position in `v` (reusing a taken-out one).
fn free_slot<T>(v: &mut Vec<Option<T>>) -> usize {
    match v.iter().position(Option::is_none) {
        Some(i) => i,
        None => {
            v.push(None);
            v.len() - 1
        }
    }
}
