//! The last row of each series (`SELECT DISTINCT ON (meta...) ... ORDER BY
//! meta..., time DESC`), without reading every bucket: a skip scan of the
//! store's (meta..., window_start) index finds each series in turn, and the
//! series' buckets are read newest window first until no remaining bucket can
//! hold a later row than the one found.
//!
//! Why stopping is exact: a bucket's rows lie before `window_start + span`
//! (the table's span only grows, so the current span bounds every bucket's),
//! and buckets come in descending window_start. Once `window_start + span` is
//! at or below the best time found, no later bucket of the series can beat
//! it. Within reach, a bucket whose max_time is not above the best is skipped
//! unread. The candidate row must pass the plan's quals, evaluated here; the
//! series yields nothing when no row passes.

use crate::catalog::config::{self, Config};
use crate::catalog::shape::TableShape;
use crate::scan::plain::ScanCounters;
use crate::scan::prune::Prune;
use crate::pg::nodes::qual_passes;
use crate::store::bucket;
use crate::store::bucket::LoadedBucket;
use crate::store::rows;
use crate::store::tuple;
use pgrx::pg_sys;
use rustc_hash::FxHashMap as HashMap;
use std::rc::Rc;

pub(super) struct LastPointScan {
    config: Rc<Config>,
    shape: TableShape,
    rel: pg_sys::Relation,
    store: pg_sys::Relation,
    index: pg_sys::Relation,
    snapshot: pg_sys::Snapshot,
    needed: Option<Vec<bool>>,
    /// Documents the query reads only some top-level keys of (`rows::DocKeys`).
    pub(super) doc_keys: Rc<rows::DocKeys>,
    prune: Vec<Prune>,
    meta_fns: Vec<Option<pg_sys::FmgrInfo>>,
    row_filters: Vec<crate::scan::prune::RowFilter>,
    /// Document attributes the query reads: a bucket builds the documents of
    /// the rows it tries alone (usually its latest), not all of them.
    late: Vec<usize>,
    /// Per meta column: the index's `>` support, and how to copy its values.
    greater: Vec<(pg_sys::RegProcedure, pg_sys::Oid)>,
    equal: Vec<(pg_sys::RegProcedure, pg_sys::Oid)>,
    meta_types: Vec<(bool, i16)>,
    /// The series last returned (its meta values, NULL = None), in `series_cxt`.
    series: Option<Vec<Option<pg_sys::Datum>>>,
    done: bool,
    series_cxt: pg_sys::MemoryContext,
    bucket_cxt: pg_sys::MemoryContext,
    /// Holds the best row so far while later buckets of the series are read.
    best_slot: *mut pg_sys::TupleTableSlot,
    /// The tail's groups by series (meta values in `tail_cxt`), in index order,
    /// not yet returned.
    tail: std::collections::VecDeque<(Vec<Option<pg_sys::Datum>>, Vec<Rc<crate::store::tail::TailGroup>>)>,
    tail_cxt: pg_sys::MemoryContext,
    /// The store's next series, found ahead to merge the tail's series in order
    /// (Some(None): the store has no more).
    lookahead: Option<Option<Vec<Option<pg_sys::Datum>>>>,
    pub counters: ScanCounters,
    /// How many payload bytes to fetch first (`StoredBucket::load_payload_for`).
    pub prefix_hint: usize,
}

impl LastPointScan {
    /// `rows_unfiltered`: the plan checks no condition on rows (no qual), so
    /// only the tail's latest rows of each series can be a last point.
    ///
    /// # Safety
    /// `rel` is an open, configured tsbucket table; `index` its store's series index.
    pub unsafe fn begin(
        rel: pg_sys::Relation,
        snapshot: pg_sys::Snapshot,
        index: pg_sys::Oid,
        needed: Option<Vec<bool>>,
        prune: Vec<Prune>,
        rows_unfiltered: bool,
    ) -> LastPointScan {
        // SAFETY: `rel` is an open, configured tsbucket table and `snapshot` the last-point scan's (begin's contract).
        unsafe { crate::scan::plain::write_buffered_rows(rel, snapshot) };
        // SAFETY: `rel` is open (begin's contract), so its relcache entry's rd_id is readable.
        let config = config::require(unsafe { (*rel).rd_id });
        // SAFETY: `(*rel).rd_att` is the descriptor of the open table `config` configures, as TableShape::new needs.
        let shape = unsafe { TableShape::new((*rel).rd_att, &config) };
        // SAFETY: opens `config`'s bucket store and `index`, its series index (begin's contract), with AccessShareLock;
        // `end` closes both.
        let (store, index) = unsafe {
            let store = pg_sys::table_open(config.store_relid, pg_sys::AccessShareLock as i32);
            let index = pg_sys::index_open(index, pg_sys::AccessShareLock as i32);
            (store, index)
        };
        let nmeta = config.meta_attnums.len();
        let support = |strategy: u32| -> Vec<(pg_sys::RegProcedure, pg_sys::Oid)> {
            (0..nmeta)
                .map(|i| {
                    // SAFETY: `index` is the series index opened above, open until `end`; `i` < nmeta is one of its key
                    // columns, so its per-column arrays have entry `i`; the lookups read its operator family's catalogs.
                    unsafe {
                        let family = *(*index).rd_opfamily.add(i);
                        let opcintype = *(*index).rd_opcintype.add(i);
                        let op = pg_sys::get_opfamily_member(family, opcintype, opcintype, strategy as i16);
                        (pg_sys::get_opcode(op), *(*index).rd_indcollation.add(i))
                    }
                })
                .collect()
        };
        let greater = support(pg_sys::BTGreaterStrategyNumber);
        let equal = support(pg_sys::BTEqualStrategyNumber);
        let meta_types = (0..nmeta)
            .map(|i| {
                // SAFETY: `store` is the bucket store opened above; its meta columns from COL_FIRST_META are below its natts.
                let att = unsafe { &*crate::pg::relation::tuple_desc_attr((*store).rd_att, bucket::COL_FIRST_META + i) };
                (att.attbyval, att.attlen)
            })
            .collect();
        // SAFETY: meta_functions looks up the operators of the last-point scan's meta conditions in `prune`, from its quals.
        let meta_fns = unsafe { crate::scan::prune::meta_functions(&prune) };
        // SAFETY: row_filters reads attributes of `(*rel).rd_att`, the open table's descriptor (begin's contract).
        let row_filters = unsafe { crate::scan::prune::row_filters(&config, &prune, (*rel).rd_att) };
        let mut needed = needed;
        crate::scan::prune::decode_filtered_columns(&mut needed, &row_filters);
        let late = shape
            .payload_attrs()
            .map(|a| a.attnum as usize - 1)
            .filter(|&a| shape.attrs[a].kind == tsbucket_format::ColumnKind::Document && needed.as_ref().is_none_or(|n| n[a]))
            .collect();
        // SAFETY: both contexts are children of CurrentMemoryContext, the context the scan begins in, deleted by `end`; the
        // best-row slot is made for `(*rel).rd_att`, the open table's descriptor, and dropped by `end`.
        let (series_cxt, bucket_cxt, best_slot) = unsafe {
            let cxt = pg_sys::CurrentMemoryContext;
            let series_cxt = pg_sys::AllocSetContextCreateInternal(cxt, c"tsbucket last point series".as_ptr(), 0, 1024, 8 * 1024);
            let bucket_cxt = pg_sys::AllocSetContextCreateInternal(cxt, c"tsbucket last point bucket".as_ptr(), 0, 8 * 1024, 8 * 1024 * 1024);
            let best_slot = pg_sys::MakeSingleTupleTableSlot((*rel).rd_att, crate::store::slot::ops());
            (series_cxt, bucket_cxt, best_slot)
        };
        // SAFETY: a child of CurrentMemoryContext, the context the scan begins in, deleted by `end`.
        let tail_cxt = unsafe { pg_sys::AllocSetContextCreateInternal(pg_sys::CurrentMemoryContext, c"tsbucket last point tail".as_ptr(), 0, 1024, 8 * 1024) };
        let mut scan = LastPointScan {
            config,
            shape,
            rel,
            store,
            index,
            snapshot,
            needed,
            doc_keys: Rc::from([]),
            prune,
            meta_fns,
            row_filters,
            late,
            greater,
            equal,
            meta_types,
            series: None,
            done: false,
            series_cxt,
            bucket_cxt,
            best_slot,
            tail: Default::default(),
            tail_cxt,
            lookahead: None,
            counters: ScanCounters::default(),
            prefix_hint: 0,
        };
        // Conditions on meta hold for all of a series' rows or none; others may reject its latest rows.
        let latest_only = rows_unfiltered && scan.prune.iter().all(|p| matches!(p, Prune::Meta { .. }));
        // SAFETY: the scan's MVCC snapshot and open table; the groups' meta values go to `tail_cxt`.
        unsafe { scan.read_tail(latest_only) };
        scan
    }

    /// The tail's groups that may match, by series in the series index's order.
    unsafe fn read_tail(&mut self, latest_only: bool) {
        // SAFETY: in a transaction with the scan's snapshot, as read_groups and read_latest_groups require.
        let groups = unsafe {
            if latest_only {
                let (groups, scanned) = crate::store::tail::read_latest_groups(&self.config, &self.shape, self.snapshot);
                self.counters.tail_rows += scanned as u64;
                groups
            } else {
                let groups = crate::store::tail::read_groups(&self.config, &self.shape, self.snapshot);
                self.counters.tail_rows += groups.iter().map(|g| g.rows() as u64).sum::<u64>();
                groups
            }
        };
        let n = self.meta_types.len();
        // Groups of one series share their meta bytes; grouped by bytes first (one hash lookup a group), then
        // ordered with the index's operators, which also join byte-distinct values they call equal.
        let mut by_bytes: HashMap<Vec<Option<Vec<u8>>>, usize> = HashMap::default();
        let mut series: Vec<(Vec<Option<pg_sys::Datum>>, Vec<Rc<crate::store::tail::TailGroup>>)> = Vec::new();
        for group in groups {
            // SAFETY: the header's meta datums go to `tail_cxt`, alive until `end`.
            let stored = unsafe {
                let old = pg_sys::MemoryContextSwitchTo(self.tail_cxt);
                let stored = group.header(&self.shape);
                pg_sys::MemoryContextSwitchTo(old);
                stored
            };
            // SAFETY: `self.meta_fns` were built by meta_functions from `self.prune` in `begin`, one per condition.
            if !unsafe { crate::scan::prune::bucket_may_match(&self.prune, &mut self.meta_fns, &stored) } {
                continue;
            }
            if let Some(&i) = by_bytes.get(&group.meta) {
                series[i].1.push(group);
                continue;
            }
            let meta: Vec<Option<pg_sys::Datum>> = (0..n).map(|i| stored.meta_datum(i)).collect();
            by_bytes.insert(group.meta.clone(), series.len());
            series.push((meta, vec![group]));
        }
        // SAFETY: as above: meta values compared with the index's operators.
        series.sort_by(|a, b| unsafe { self.compare(&a.0, &b.0) });
        let mut joined: Vec<(Vec<Option<pg_sys::Datum>>, Vec<Rc<crate::store::tail::TailGroup>>)> = Vec::with_capacity(series.len());
        for (meta, groups) in series {
            match joined.last_mut() {
                // SAFETY: as above.
                Some((m, gs)) if unsafe { self.compare(m, &meta) } == std::cmp::Ordering::Equal => gs.extend(groups),
                _ => joined.push((meta, groups)),
            }
        }
        let series = joined;
        self.tail = series.into();
    }

    /// Two series in the series index's order (NULLs last).
    unsafe fn compare(&self, a: &[Option<pg_sys::Datum>], b: &[Option<pg_sys::Datum>]) -> std::cmp::Ordering {
        use std::cmp::Ordering::{Equal, Greater, Less};
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            let o = match (x, y) {
                (None, None) => Equal,
                (None, Some(_)) => Greater,
                (Some(_), None) => Less,
                (Some(x), Some(y)) => {
                    let (eq, collation) = self.equal[i];
                    let (gt, _) = self.greater[i];
                    // SAFETY: the series index's own `=` and `>` support of meta column `i`, on two values of its type.
                    let (equal, greater) = unsafe {
                        (
                            pg_sys::OidFunctionCall2Coll(eq, collation, *x, *y).value() != 0,
                            pg_sys::OidFunctionCall2Coll(gt, collation, *x, *y).value() != 0,
                        )
                    };
                    if equal { Equal } else if greater { Greater } else { Less }
                }
            };
            if o != Equal {
                return o;
            }
        }
        Equal
    }

    /// # Safety
    /// Once, after `begin`.
    pub unsafe fn end(self) {
        // SAFETY: `end` runs once, after `begin` (its contract), which made `best_slot`, opened `index` and `store`, and
        // created both contexts; nothing uses them afterwards.
        unsafe {
            pg_sys::ExecDropSingleTupleTableSlot(self.best_slot);
            pg_sys::index_close(self.index, pg_sys::AccessShareLock as i32);
            pg_sys::table_close(self.store, pg_sys::NoLock as i32);
            pg_sys::MemoryContextDelete(self.series_cxt);
            pg_sys::MemoryContextDelete(self.bucket_cxt);
            pg_sys::MemoryContextDelete(self.tail_cxt);
        }
    }

    /// Fills `slot` with the last row of the next series that has one passing
    /// `qual`; false when every series is done.
    ///
    /// # Safety
    /// `slot` is a virtual slot of the table; `econtext` the node's expression context.
    pub unsafe fn next(&mut self, slot: *mut pg_sys::TupleTableSlot, qual: *mut pg_sys::ExprState, econtext: *mut pg_sys::ExprContext) -> bool {
        // SAFETY: `econtext` is the node's expression context (next's contract); the quals read the candidate row from `slot`.
        unsafe { (*econtext).ecxt_scantuple = slot };
        while !self.done {
            if self.lookahead.is_none() {
                // SAFETY: the scan's store and series index stay open, and `series_cxt` alive, until `end`.
                self.lookahead = Some(unsafe { self.next_series() });
            }
            let store_next = self.lookahead.as_ref().expect("set above");
            let order = match (self.tail.front(), store_next) {
                (None, None) => {
                    self.done = true;
                    break;
                }
                (Some(_), None) => std::cmp::Ordering::Less,
                (None, Some(_)) => std::cmp::Ordering::Greater,
                // SAFETY: both are meta values of the table's series.
                (Some((t, _)), Some(s)) => unsafe { self.compare(t, s) },
            };
            let tail_groups = if order != std::cmp::Ordering::Greater { self.tail.pop_front().map(|(_, g)| g) } else { None };
            let series = if order != std::cmp::Ordering::Less { self.lookahead.take().flatten() } else { None };
            // SAFETY: `qual` and `econtext` are the node's (next's contract), `econtext` scanning `slot`; `series` was just probed.
            if unsafe { self.last_row(series.as_deref(), tail_groups.as_deref().unwrap_or(&[]), qual, econtext) } {
                // SAFETY: `best_slot` holds the series' materialized last row; `slot` is a virtual slot of the same table.
                unsafe { pg_sys::ExecCopySlot(slot, self.best_slot) };
                return true;
            }
        }
        // SAFETY: `slot` is the caller's virtual slot of the table; cleared, it tells that every series is done.
        unsafe { pg_sys::ExecClearTuple(slot) };
        false
    }

    /// An index key on meta column `i`: `op` its value, or IS NULL.
    unsafe fn key(&self, i: usize, value: Option<pg_sys::Datum>, strategy: u32) -> pg_sys::ScanKeyData {
        let mut k = pg_sys::ScanKeyData::default();
        let attno = (bucket::COL_FIRST_META + 1 + i) as i16;
        match value {
            // SAFETY: fills the local `k` as an IS NULL key (SK_SEARCHNULL) on meta column `i`, which needs no procedure.
            None => unsafe {
                pg_sys::ScanKeyEntryInitialize(
                    &mut k,
                    (pg_sys::SK_ISNULL | pg_sys::SK_SEARCHNULL) as i32,
                    attno,
                    0 /* InvalidStrategy */,
                    pg_sys::InvalidOid,
                    pg_sys::InvalidOid,
                    pg_sys::InvalidOid,
                    pg_sys::Datum::from(0),
                )
            },
            Some(v) => {
                let (proc, collation) = if strategy == pg_sys::BTEqualStrategyNumber { self.equal[i] } else { self.greater[i] };
                // SAFETY: fills the local `k` with `proc`, the series index's own `=` or `>` support for column `i` (found by
                // `begin`), and the collation the index uses there.
                unsafe { pg_sys::ScanKeyEntryInitialize(&mut k, 0, attno, strategy as u16, pg_sys::InvalidOid, collation, proc, v) }
            }
        }
        k
    }

    /// The first bucket in index order matching `keys`, as its series' meta
    /// values copied into `series_cxt`.
    unsafe fn probe(&mut self, mut keys: Vec<pg_sys::ScanKeyData>) -> Option<Vec<Option<pg_sys::Datum>>> {
        // SAFETY: `self.store` and its series index `self.index` are open until `end` and `self.snapshot` is the scan's;
        // `keys` are btree keys on the index's leading meta columns, which the scan copies.
        let (scan, tuple) = unsafe {
            let scan = pg_sys::systable_beginscan_ordered(self.store, self.index, self.snapshot, keys.len() as i32, keys.as_mut_ptr());
            let tuple = pg_sys::systable_getnext_ordered(scan, pg_sys::ScanDirection::ForwardScanDirection);
            (scan, tuple)
        };
        let found = (!tuple.is_null()).then(|| {
            // SAFETY: `self.store` is open until `end`, so its descriptor is valid; `series_cxt` lives until `end`, so the
            // copies made in it outlive `tuple`.
            let (tupdesc, old) = unsafe { ((*self.store).rd_att, pg_sys::MemoryContextSwitchTo(self.series_cxt)) };
            let values = (0..self.meta_types.len())
                .map(|i| {
                    let mut isnull = false;
                    let (byval, len) = self.meta_types[i];
                    // SAFETY: `tuple` is the non-NULL index hit just returned, valid until the scan ends below; a non-NULL
                    // value of its meta column `i` has the type `meta_types[i]` describes.
                    unsafe {
                        let d = pg_sys::heap_getattr(tuple, (bucket::COL_FIRST_META + 1 + i) as i32, tupdesc, &mut isnull);
                        (!isnull).then(|| crate::pg::datum::copy_datum(d, byval, len))
                    }
                })
                .collect();
            // SAFETY: back to `old`, the context probe was called in, once the meta values are copied into series_cxt.
            unsafe { pg_sys::MemoryContextSwitchTo(old) };
            values
        });
        // SAFETY: ends the ordered scan begun above; its tuple is not used after this (the values were copied).
        unsafe { pg_sys::systable_endscan_ordered(scan) };
        found
    }

    /// The series after the last one returned, in index order (NULLs last):
    /// the smallest with the same first k values and a greater (or NULL)
    /// (k+1)-th, trying the longest shared prefix first.
    unsafe fn next_series(&mut self) -> Option<Vec<Option<pg_sys::Datum>>> {
        let Some(prev) = self.series.take() else {
            // SAFETY: no series was returned yet (`self.series` is None), so no values in `series_cxt` are in use.
            unsafe { pg_sys::MemoryContextReset(self.series_cxt) };
            // SAFETY: the store and its series index are open until `end`; with no keys, probe finds the first series.
            let first = unsafe { self.probe(Vec::new()) };
            self.series = first.clone();
            return first;
        };
        let mut found = None;
        for level in (0..prev.len()).rev() {
            // SAFETY: key fills local keys with the index's `=` support; `prev` holds the last series' values, in series_cxt.
            let prefix: Vec<_> = (0..level).map(|i| unsafe { self.key(i, prev[i], pg_sys::BTEqualStrategyNumber) }).collect();
            // Nothing sorts after NULL at this level.
            let Some(v) = prev[level] else { continue };
            let mut keys = prefix.clone();
            // SAFETY: `v` is the last series' value at `level`, still in series_cxt (probe only adds to it); the store and
            // the series index are open until `end`.
            found = unsafe {
                keys.push(self.key(level, Some(v), pg_sys::BTGreaterStrategyNumber));
                self.probe(keys)
            };
            if found.is_none() {
                let mut keys = prefix;
                // SAFETY: an IS NULL key at `level` after the shared prefix; the store and series index are still open.
                found = unsafe {
                    keys.push(self.key(level, None, 0));
                    self.probe(keys)
                };
            }
            if found.is_some() {
                break;
            }
        }
        self.series = found.clone();
        found
    }

    /// Reads `series`' buckets newest window first; leaves its last row
    /// passing `qual` in `best_slot` and returns whether there was one.
    unsafe fn last_row(
        &mut self,
        series: Option<&[Option<pg_sys::Datum>]>,
        tail: &[Rc<crate::store::tail::TailGroup>],
        qual: *mut pg_sys::ExprState,
        econtext: *mut pg_sys::ExprContext,
    ) -> bool {
        let mut best: Option<i64> = None;
        // SAFETY: `best_slot` was made by `begin` and is dropped only by `end`.
        unsafe { pg_sys::ExecClearTuple(self.best_slot) };
        // The tail's rows first: usually the newest, they stop the store's walk early.
        for group in tail {
            let bucket = group.loaded(&self.shape, self.needed.as_deref());
            // SAFETY: bucket_cxt holds what the previous bucket's rows needed (best_slot is materialized); `qual` and
            // `econtext` are the node's (next's contract).
            unsafe {
                pg_sys::MemoryContextReset(self.bucket_cxt);
                let old = pg_sys::MemoryContextSwitchTo(self.bucket_cxt);
                if let Some(t) = self.best_in_bucket(bucket, None, best, qual, econtext) {
                    best = Some(t);
                }
                pg_sys::MemoryContextSwitchTo(old);
            }
        }
        let Some(series) = series else { return best.is_some() };
        // SAFETY: key fills local keys with the index's `=` support; `series` holds meta values copied into series_cxt.
        let mut keys: Vec<_> = series.iter().enumerate().map(|(i, v)| unsafe { self.key(i, *v, pg_sys::BTEqualStrategyNumber) }).collect();
        // SAFETY: `self.store` and its series index are open until `end`; `keys` pin every meta column; the scan is ended
        // below before last_row returns.
        let scan = unsafe { pg_sys::systable_beginscan_ordered(self.store, self.index, self.snapshot, keys.len() as i32, keys.as_mut_ptr()) };
        loop {
            // SAFETY: `scan` is the ordered scan begun above and not yet ended.
            let tuple = unsafe { pg_sys::systable_getnext_ordered(scan, pg_sys::ScanDirection::BackwardScanDirection) };
            if tuple.is_null() {
                break;
            }
            // SAFETY: `bucket_cxt` holds only the previous bucket of this loop, no longer used (best_slot is materialized);
            // `tuple` was just returned by `scan` and is a valid tuple of `self.store` until the scan moves.
            let (old, mut stored) = unsafe {
                pg_sys::MemoryContextReset(self.bucket_cxt);
                let old = pg_sys::MemoryContextSwitchTo(self.bucket_cxt);
                (old, tuple::read_header(self.store, tuple))
            };
            if best.is_some_and(|b| stored.window_start.saturating_add(self.config.span_micros) <= b) {
                // SAFETY: back to `old` before leaving the loop: no later bucket of the series can beat the best row.
                unsafe { pg_sys::MemoryContextSwitchTo(old) };
                break;
            }
            if best.is_some_and(|b| stored.max_time <= b)
                // SAFETY: `self.meta_fns` were built by meta_functions from `self.prune` in `begin`, one per condition.
                || !unsafe { crate::scan::prune::bucket_may_match(&self.prune, &mut self.meta_fns, &stored) }
            {
                self.counters.buckets_skipped += 1;
                // SAFETY: `old` is the context last_row runs in, current before the switch to bucket_cxt; nothing read
                // from the skipped bucket is used after this.
                unsafe { pg_sys::MemoryContextSwitchTo(old) };
                continue;
            }
            self.counters.buckets_read += 1;
            rows::load_payload(&mut stored, self.needed.as_deref(), &[], &self.late, &mut self.prefix_hint);
            self.counters.payload_bytes += stored.payload().len() as u64;
            let bucket = rows::load_deferring(&self.config, &self.shape, &stored, self.needed.as_deref(), &self.doc_keys, &[], &self.late);
            // SAFETY: `qual` and `econtext` are the node's (next's contract); `bucket` is decoded in bucket_cxt, still current.
            if let Some(t) = unsafe { self.best_in_bucket(bucket, Some(&stored), best, qual, econtext) } {
                best = Some(t);
            }
            // SAFETY: back to `old`, the context last_row was called in, once the bucket has been searched.
            unsafe { pg_sys::MemoryContextSwitchTo(old) };
        }
        // SAFETY: ends `scan`, begun above; none of its tuples is used after (best_slot holds a materialized copy).
        unsafe { pg_sys::systable_endscan_ordered(scan) };
        best.is_some()
    }

    /// The latest row of `bucket` later than `beat` that passes the filters and
    /// `qual`, copied into `best_slot`; its time. A stored bucket (`stored`)
    /// comes with its late attributes undecoded: the first row tried gets its
    /// documents alone; should it fail `qual`, every row gets them.
    unsafe fn best_in_bucket(
        &mut self,
        mut bucket: LoadedBucket,
        stored: Option<&crate::store::bucket::StoredBucket>,
        beat: Option<i64>,
        qual: *mut pg_sys::ExprState,
        econtext: *mut pg_sys::ExprContext,
    ) -> Option<i64> {
        let time = rows::time_values(&self.config, &bucket).to_vec();
        // 0: no document built yet; 1: one row's; 2: all.
        let mut built = if stored.is_some() && !self.late.is_empty() { 0 } else { 2 };
        let mut order: Vec<usize> = (0..bucket.rows).collect();
        order.sort_by(|&a, &b| time[b].cmp(&time[a]));
        // SAFETY: `econtext` is the node's expression context, whose scan tuple `next` set to the caller's slot.
        let slot = unsafe { (*econtext).ecxt_scantuple };
        for row in order {
            if beat.is_some_and(|b| time[row] <= b) {
                break;
            }
            if !crate::scan::prune::row_passes(&bucket, &self.row_filters, row) {
                self.counters.rows_filtered += 1;
                continue;
            }
            if built < 2 {
                let stored = stored.expect("late attributes only for stored buckets");
                let rows: Vec<bool> = (0..bucket.rows).map(|r| built == 1 || r == row).collect();
                rows::decode_late(&self.config, &self.shape, stored, &mut bucket, &self.late, &self.doc_keys, &rows);
                built += 1;
            }
            // SAFETY: `slot` is a virtual slot of `self.rel` (next's contract), filled in bucket_cxt (current, set by
            // last_row); the per-tuple context is reset before `qual` runs in `econtext`, as ExecScan does.
            let passes = unsafe {
                rows::fill_slot(self.rel, &self.shape, &bucket, None, row, slot);
                pg_sys::MemoryContextReset((*econtext).ecxt_per_tuple_memory);
                qual_passes(qual, econtext)
            };
            if passes {
                // SAFETY: `best_slot` was made by `begin` for the table's descriptor, like `slot`; materializing copies
                // the row out of bucket_cxt, which the next bucket resets.
                unsafe {
                    pg_sys::ExecCopySlot(self.best_slot, slot);
                    pg_sys::ExecMaterializeSlot(self.best_slot);
                }
                if stored.is_some() {
                    self.counters.decoded_bytes += rows::decoded_bytes(&bucket);
                }
                return Some(time[row]);
            }
        }
        if stored.is_some() {
            self.counters.decoded_bytes += rows::decoded_bytes(&bucket);
        }
        None
    }
}
