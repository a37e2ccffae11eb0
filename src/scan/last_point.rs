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
use crate::scan::quals::qual_passes;
use crate::store::bucket;
use crate::store::rows::{self as read, LoadedBucket};
use crate::store::tuple;
use pgrx::pg_sys;
use std::rc::Rc;

pub(super) struct LastPointScan {
    config: Rc<Config>,
    shape: TableShape,
    rel: pg_sys::Relation,
    store: pg_sys::Relation,
    index: pg_sys::Relation,
    snapshot: pg_sys::Snapshot,
    needed: Option<Vec<bool>>,
    prune: Vec<Prune>,
    meta_fns: Vec<Option<pg_sys::FmgrInfo>>,
    row_filters: Vec<crate::scan::prune::RowFilter>,
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
    pub counters: ScanCounters,
}

impl LastPointScan {
    /// # Safety
    /// `rel` is an open, configured tsbucket table; `index` its store's series index.
    pub unsafe fn begin(
        rel: pg_sys::Relation,
        snapshot: pg_sys::Snapshot,
        index: pg_sys::Oid,
        needed: Option<Vec<bool>>,
        prune: Vec<Prune>,
    ) -> LastPointScan {
        unsafe {
            crate::scan::plain::write_buffered_rows(rel, snapshot);
            let config = config::require((*rel).rd_id);
            let shape = TableShape::new((*rel).rd_att, &config);
            let store = pg_sys::table_open(config.store_relid, pg_sys::AccessShareLock as i32);
            let index = pg_sys::index_open(index, pg_sys::AccessShareLock as i32);
            let nmeta = config.meta_attnums.len();
            let support = |strategy: u32| -> Vec<(pg_sys::RegProcedure, pg_sys::Oid)> {
                (0..nmeta)
                    .map(|i| {
                        let family = *(*index).rd_opfamily.add(i);
                        let opcintype = *(*index).rd_opcintype.add(i);
                        let op = pg_sys::get_opfamily_member(family, opcintype, opcintype, strategy as i16);
                        (pg_sys::get_opcode(op), *(*index).rd_indcollation.add(i))
                    })
                    .collect()
            };
            let greater = support(pg_sys::BTGreaterStrategyNumber);
            let equal = support(pg_sys::BTEqualStrategyNumber);
            let meta_types = (0..nmeta)
                .map(|i| {
                    let att = &*crate::pg::relation::tuple_desc_attr((*store).rd_att, bucket::COL_FIRST_META + i);
                    (att.attbyval, att.attlen)
                })
                .collect();
            let meta_fns = crate::scan::prune::meta_functions(&prune);
            let row_filters = crate::scan::prune::row_filters(&config, &prune, (*rel).rd_att);
            let mut needed = needed;
            crate::scan::prune::decode_filtered_columns(&mut needed, &row_filters);
            let cxt = pg_sys::CurrentMemoryContext;
            let series_cxt = pg_sys::AllocSetContextCreateInternal(cxt, c"tsbucket last point series".as_ptr(), 0, 1024, 8 * 1024);
            let bucket_cxt = pg_sys::AllocSetContextCreateInternal(cxt, c"tsbucket last point bucket".as_ptr(), 0, 8 * 1024, 8 * 1024 * 1024);
            let best_slot = pg_sys::MakeSingleTupleTableSlot((*rel).rd_att, crate::store::slot::ops());
            LastPointScan {
                config,
                shape,
                rel,
                store,
                index,
                snapshot,
                needed,
                prune,
                meta_fns,
                row_filters,
                greater,
                equal,
                meta_types,
                series: None,
                done: false,
                series_cxt,
                bucket_cxt,
                best_slot,
                counters: ScanCounters::default(),
            }
        }
    }

    /// # Safety
    /// Once, after `begin`.
    pub unsafe fn end(self) {
        unsafe {
            pg_sys::ExecDropSingleTupleTableSlot(self.best_slot);
            pg_sys::index_close(self.index, pg_sys::AccessShareLock as i32);
            pg_sys::table_close(self.store, pg_sys::NoLock as i32);
            pg_sys::MemoryContextDelete(self.series_cxt);
            pg_sys::MemoryContextDelete(self.bucket_cxt);
        }
    }

    /// Fills `slot` with the last row of the next series that has one passing
    /// `qual`; false when every series is done.
    ///
    /// # Safety
    /// `slot` is a virtual slot of the table; `econtext` the node's expression context.
    pub unsafe fn next(&mut self, slot: *mut pg_sys::TupleTableSlot, qual: *mut pg_sys::ExprState, econtext: *mut pg_sys::ExprContext) -> bool {
        unsafe {
            (*econtext).ecxt_scantuple = slot;
            while !self.done {
                let Some(series) = self.next_series() else {
                    self.done = true;
                    break;
                };
                if self.last_row(&series, qual, econtext) {
                    pg_sys::ExecCopySlot(slot, self.best_slot);
                    return true;
                }
            }
            pg_sys::ExecClearTuple(slot);
            false
        }
    }

    /// An index key on meta column `i`: `op` its value, or IS NULL.
    unsafe fn key(&self, i: usize, value: Option<pg_sys::Datum>, strategy: u32) -> pg_sys::ScanKeyData {
        unsafe {
            let mut k = pg_sys::ScanKeyData::default();
            let attno = (bucket::COL_FIRST_META + 1 + i) as i16;
            match value {
                None => pg_sys::ScanKeyEntryInitialize(
                    &mut k,
                    (pg_sys::SK_ISNULL | pg_sys::SK_SEARCHNULL) as i32,
                    attno,
                    0 /* InvalidStrategy */,
                    pg_sys::InvalidOid,
                    pg_sys::InvalidOid,
                    pg_sys::InvalidOid,
                    pg_sys::Datum::from(0),
                ),
                Some(v) => {
                    let (proc, collation) = if strategy == pg_sys::BTEqualStrategyNumber { self.equal[i] } else { self.greater[i] };
                    pg_sys::ScanKeyEntryInitialize(&mut k, 0, attno, strategy as u16, pg_sys::InvalidOid, collation, proc, v)
                }
            }
            k
        }
    }

    /// The first bucket in index order matching `keys`, as its series' meta
    /// values copied into `series_cxt`.
    unsafe fn probe(&mut self, mut keys: Vec<pg_sys::ScanKeyData>) -> Option<Vec<Option<pg_sys::Datum>>> {
        unsafe {
            let scan = pg_sys::systable_beginscan_ordered(self.store, self.index, self.snapshot, keys.len() as i32, keys.as_mut_ptr());
            let tuple = pg_sys::systable_getnext_ordered(scan, pg_sys::ScanDirection::ForwardScanDirection);
            let found = (!tuple.is_null()).then(|| {
                let tupdesc = (*self.store).rd_att;
                let old = pg_sys::MemoryContextSwitchTo(self.series_cxt);
                let values = (0..self.meta_types.len())
                    .map(|i| {
                        let mut isnull = false;
                        let d = pg_sys::heap_getattr(tuple, (bucket::COL_FIRST_META + 1 + i) as i32, tupdesc, &mut isnull);
                        let (byval, len) = self.meta_types[i];
                        (!isnull).then(|| crate::pg::datum::copy_datum(d, byval, len))
                    })
                    .collect();
                pg_sys::MemoryContextSwitchTo(old);
                values
            });
            pg_sys::systable_endscan_ordered(scan);
            found
        }
    }

    /// The series after the last one returned, in index order (NULLs last):
    /// the smallest with the same first k values and a greater (or NULL)
    /// (k+1)-th, trying the longest shared prefix first.
    unsafe fn next_series(&mut self) -> Option<Vec<Option<pg_sys::Datum>>> {
        unsafe {
            let Some(prev) = self.series.take() else {
                pg_sys::MemoryContextReset(self.series_cxt);
                let first = self.probe(Vec::new());
                self.series = first.clone();
                return first;
            };
            let mut found = None;
            for level in (0..prev.len()).rev() {
                let prefix: Vec<_> = (0..level).map(|i| self.key(i, prev[i], pg_sys::BTEqualStrategyNumber)).collect();
                // Nothing sorts after NULL at this level.
                let Some(v) = prev[level] else { continue };
                let mut keys = prefix.clone();
                keys.push(self.key(level, Some(v), pg_sys::BTGreaterStrategyNumber));
                found = self.probe(keys);
                if found.is_none() {
                    let mut keys = prefix;
                    keys.push(self.key(level, None, 0));
                    found = self.probe(keys);
                }
                if found.is_some() {
                    break;
                }
            }
            self.series = found.clone();
            found
        }
    }

    /// Reads `series`' buckets newest window first; leaves its last row
    /// passing `qual` in `best_slot` and returns whether there was one.
    unsafe fn last_row(&mut self, series: &[Option<pg_sys::Datum>], qual: *mut pg_sys::ExprState, econtext: *mut pg_sys::ExprContext) -> bool {
        unsafe {
            let mut keys: Vec<_> = series.iter().enumerate().map(|(i, v)| self.key(i, *v, pg_sys::BTEqualStrategyNumber)).collect();
            let scan = pg_sys::systable_beginscan_ordered(self.store, self.index, self.snapshot, keys.len() as i32, keys.as_mut_ptr());
            let mut best: Option<i64> = None;
            pg_sys::ExecClearTuple(self.best_slot);
            loop {
                let tuple = pg_sys::systable_getnext_ordered(scan, pg_sys::ScanDirection::BackwardScanDirection);
                if tuple.is_null() {
                    break;
                }
                pg_sys::MemoryContextReset(self.bucket_cxt);
                let old = pg_sys::MemoryContextSwitchTo(self.bucket_cxt);
                let mut stored = tuple::read_header(self.store, tuple);
                if best.is_some_and(|b| stored.window_start.saturating_add(self.config.span_micros) <= b) {
                    pg_sys::MemoryContextSwitchTo(old);
                    break;
                }
                if best.is_some_and(|b| stored.max_time <= b) || !crate::scan::prune::bucket_may_match(&self.prune, &mut self.meta_fns, &stored) {
                    self.counters.buckets_skipped += 1;
                    pg_sys::MemoryContextSwitchTo(old);
                    continue;
                }
                self.counters.buckets_read += 1;
                stored.load_payload();
                self.counters.payload_bytes += stored.payload().len() as u64;
                let bucket = read::load_columns(&self.config, &self.shape, &stored, self.needed.as_deref());
                self.counters.decoded_bytes += read::decoded_bytes(&bucket);
                if let Some(t) = self.best_in_bucket(&bucket, best, qual, econtext) {
                    best = Some(t);
                }
                pg_sys::MemoryContextSwitchTo(old);
            }
            pg_sys::systable_endscan_ordered(scan);
            best.is_some()
        }
    }

    /// The latest row of `bucket` later than `beat` that passes the filters and
    /// `qual`, copied into `best_slot`; its time.
    unsafe fn best_in_bucket(
        &mut self,
        bucket: &LoadedBucket,
        beat: Option<i64>,
        qual: *mut pg_sys::ExprState,
        econtext: *mut pg_sys::ExprContext,
    ) -> Option<i64> {
        unsafe {
            let time = read::time_values(&self.config, bucket);
            let mut order: Vec<usize> = (0..bucket.rows).collect();
            order.sort_by(|&a, &b| time[b].cmp(&time[a]));
            let slot = (*econtext).ecxt_scantuple;
            for row in order {
                if beat.is_some_and(|b| time[row] <= b) {
                    break;
                }
                if !crate::scan::prune::row_passes(bucket, &self.row_filters, row) {
                    self.counters.rows_filtered += 1;
                    continue;
                }
                read::fill_slot(self.rel, &self.shape, bucket, None, row, slot);
                pg_sys::MemoryContextReset((*econtext).ecxt_per_tuple_memory);
                if qual_passes(qual, econtext) {
                    pg_sys::ExecCopySlot(self.best_slot, slot);
                    pg_sys::ExecMaterializeSlot(self.best_slot);
                    return Some(time[row]);
                }
            }
            None
        }
    }
}
