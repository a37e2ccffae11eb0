//! The bucket store: an ordinary heap table beside each time-series table, one
//! row per bucket. Postgres gives it WAL, MVCC, TOAST and VACUUM; this module
//! is the only code that knows its column layout.

use crate::catalog::Config;
use crate::error::{ts_error, DATA_CORRUPTED, SERIALIZATION_FAILURE};
use crate::shape::{Attr, TableShape};
use crate::tid;
use pgrx::pg_sys;
use pgrx::varlena::{set_varsize_4b, vardata_any, varsize_any_exhdr};
use tsbucket_format::stats::{column_stats, encode_stats};
use tsbucket_format::{encode_bucket, Column, Values};

/// Store columns, 0-based. Keep in step with the CREATE TABLE in sql/bootstrap.sql.
pub const COL_BUCKET_ID: usize = 0;
pub const COL_WINDOW_START: usize = 1;
pub const COL_MIN_TIME: usize = 2;
pub const COL_MAX_TIME: usize = 3;
pub const COL_ROW_COUNT: usize = 4;
pub const COL_UNCOMPRESSED_BYTES: usize = 5;
pub const COL_CLOSE_REASON: usize = 6;
pub const COL_STATS: usize = 7;
pub const COL_PAYLOAD: usize = 8;
pub const COL_FIRST_META: usize = 9;

/// Why a bucket stopped taking rows. Stored per bucket, counted by tsbucket.stats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i16)]
pub enum CloseReason {
    Count = 1,
    Size = 2,
    TimeWindow = 3,
    MemoryLimit = 4,
    EndOfStatement = 5,
    /// Written by a DELETE or UPDATE that rewrote part of a bucket.
    Rewrite = 6,
    /// Written by tsbucket.compact(), merging under-filled buckets.
    Compaction = 7,
}

/// The rows of a bucket to be written, column by column (each knows its
/// attnum; a column missing here reads back as its default).
pub struct BucketContent<'a> {
    pub columns: &'a [Column],
    pub rows: usize,
    /// One entry per meta column: its identifying bytes, None for NULL.
    pub meta: &'a [Option<Vec<u8>>],
    pub window_start: i64,
    /// What the values take uncompressed (tsbucket.stats).
    pub uncompressed_bytes: i64,
}

/// A bucket as read from the store; payload and stats are detoasted and valid
/// while the memory context that read them lives.
pub struct StoredBucket {
    pub tid: pg_sys::ItemPointerData,
    pub bucket_id: i64,
    pub window_start: i64,
    pub min_time: i64,
    pub max_time: i64,
    pub rows: i32,
    /// Its store tuple's transaction and command ids (the rows' system columns).
    pub version: crate::am::slot::Version,
    pub values: Vec<pg_sys::Datum>,
    pub nulls: Vec<bool>,
    payload: *const u8,
    payload_len: usize,
    stats: *const u8,
    stats_len: usize,
}

impl StoredBucket {
    /// Detoasts the payload (in the current memory context).
    pub fn load_payload(&mut self) {
        if !self.payload.is_null() {
            return;
        }
        unsafe {
            let payload = pg_sys::pg_detoast_datum_packed(self.values[COL_PAYLOAD].cast_mut_ptr());
            self.values[COL_PAYLOAD] = pg_sys::Datum::from(payload);
            self.payload = vardata_any(payload) as *const u8;
            self.payload_len = varsize_any_exhdr(payload);
        }
    }

    pub fn payload(&self) -> &[u8] {
        assert!(!self.payload.is_null(), "payload read before load_payload");
        unsafe { std::slice::from_raw_parts(self.payload, self.payload_len) }
    }

    pub fn stats(&self) -> &[u8] {
        unsafe { std::slice::from_raw_parts(self.stats, self.stats_len) }
    }

    pub fn close_reason(&self) -> i16 {
        self.values[COL_CLOSE_REASON].value() as i16
    }

    /// The same bucket no longer pointing into the tuple it was read from (so
    /// the scan may move on): by-reference values copied, in the current
    /// memory context, as they are (a TOAST pointer stays a pointer).
    ///
    /// # Safety
    /// `store` must be the store the bucket was read from, and its tuple still valid.
    pub unsafe fn detached(mut self, store: pg_sys::Relation) -> StoredBucket {
        unsafe {
            let tupdesc = (*store).rd_att;
            for i in 0..self.values.len() {
                let att = &*crate::shape::tuple_desc_attr(tupdesc, i);
                if self.nulls[i] || att.attbyval {
                    continue;
                }
                let src = self.values[i].cast_mut_ptr::<u8>();
                let len = match att.attlen {
                    -1 => pgrx::varlena::varsize_any(src as *const pg_sys::varlena),
                    -2 => std::ffi::CStr::from_ptr(src as *const std::ffi::c_char).to_bytes_with_nul().len(),
                    n => n as usize,
                };
                let dst = pg_sys::palloc(len) as *mut u8;
                std::ptr::copy_nonoverlapping(src, dst, len);
                self.values[i] = pg_sys::Datum::from(dst);
            }
            if !self.stats.is_null() {
                let copy = pg_sys::palloc(self.stats_len.max(1)) as *mut u8;
                std::ptr::copy_nonoverlapping(self.stats, copy, self.stats_len);
                self.stats = copy;
            }
            // A payload already detoasted is in memory of its own.
            self
        }
    }

    pub fn meta_datum(&self, i: usize) -> Option<pg_sys::Datum> {
        let col = COL_FIRST_META + i;
        if self.nulls[col] { None } else { Some(self.values[col]) }
    }
}

pub fn bytea_datum(bytes: &[u8]) -> pg_sys::Datum {
    unsafe {
        let total = bytes.len() + pg_sys::VARHDRSZ;
        let p = pg_sys::palloc(total) as *mut pg_sys::varlena;
        set_varsize_4b(p, total as i32);
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), (p as *mut u8).add(pg_sys::VARHDRSZ), bytes.len());
        pg_sys::Datum::from(p)
    }
}

/// THE writer of the store: encodes the columns, computes their statistics
/// and time range, gives the bucket an id (or uses the one its buffered rows'
/// TIDs already carry) and inserts it with its index entries. Returns the id.
///
/// # Safety
/// `store` must be `config`'s bucket store, open and locked RowExclusive;
/// `shape` the user table's shape.
pub unsafe fn write_bucket(
    store: pg_sys::Relation,
    config: &Config,
    shape: &TableShape,
    id: Option<i64>,
    content: &BucketContent,
    reason: CloseReason,
    cid: pg_sys::CommandId,
) -> i64 {
    let payload = encode_bucket(content.rows, content.columns);
    let stats = encode_stats(&content.columns.iter().filter_map(column_stats).collect::<Vec<_>>());
    let times = content.columns.iter().find(|c| c.attnum as i16 == config.time_attnum).map(|c| &c.values);
    let (min_time, max_time) = match times {
        Some(Values::Int(t)) if !t.is_empty() => (*t.iter().min().expect("non-empty"), *t.iter().max().expect("non-empty")),
        _ => ts_error(DATA_CORRUPTED, "a bucket to be written has no times", "This is a bug in tsbucket; please report it."),
    };
    unsafe {
        let id = id.unwrap_or_else(|| allocate_id(store, config));
        let tupdesc = (*store).rd_att;
        let natts = (*tupdesc).natts as usize;
        let mut values = vec![pg_sys::Datum::from(0); natts];
        let mut nulls = vec![false; natts];
        values[COL_BUCKET_ID] = pg_sys::Datum::from(id);
        values[COL_WINDOW_START] = pg_sys::Datum::from(content.window_start);
        values[COL_MIN_TIME] = pg_sys::Datum::from(min_time);
        values[COL_MAX_TIME] = pg_sys::Datum::from(max_time);
        values[COL_ROW_COUNT] = pg_sys::Datum::from(content.rows as i32);
        values[COL_UNCOMPRESSED_BYTES] = pg_sys::Datum::from(content.uncompressed_bytes);
        values[COL_CLOSE_REASON] = pg_sys::Datum::from(reason as i16);
        values[COL_STATS] = bytea_datum(&stats);
        values[COL_PAYLOAD] = bytea_datum(&payload);
        set_meta(&mut values, &mut nulls, content.meta, &shape.meta_attrs());
        insert_tuple(store, &mut values, &mut nulls, cid);
        if reason != CloseReason::Compaction {
            crate::worker::note_bucket_written();
        }
        id
    }
}

unsafe fn set_meta(values: &mut [pg_sys::Datum], nulls: &mut [bool], meta: &[Option<Vec<u8>>], meta_attrs: &[&Attr]) {
    for (i, attr) in meta_attrs.iter().enumerate() {
        match &meta[i] {
            Some(bytes) => {
                values[COL_FIRST_META + i] = unsafe { crate::datum::bytes_datum(bytes, attr) };
                nulls[COL_FIRST_META + i] = false;
            }
            None => nulls[COL_FIRST_META + i] = true,
        }
    }
}

/// Inserts a store tuple and its index entries as command `cid`. Buffered
/// rows are written as the command that inserted them, not as the one that
/// happens to flush them (a scan that flushes at its start must see them).
unsafe fn insert_tuple(store: pg_sys::Relation, values: &mut [pg_sys::Datum], nulls: &mut [bool], cid: pg_sys::CommandId) {
    unsafe {
        let tuple = pg_sys::heap_form_tuple((*store).rd_att, values.as_mut_ptr(), nulls.as_mut_ptr());
        pg_sys::heap_insert(store, tuple, cid, 0, std::ptr::null_mut());
        // The store's indexes are on plain columns (bucket_id; meta..., window_start).
        for index_oid in crate::pgutil::list_oids(pg_sys::RelationGetIndexList(store)) {
            let index = pg_sys::index_open(index_oid, pg_sys::RowExclusiveLock as i32);
            let info = pg_sys::BuildIndexInfo(index);
            let nkeys = (*info).ii_NumIndexAttrs as usize;
            let mut ivalues = vec![pg_sys::Datum::from(0); nkeys];
            let mut inulls = vec![false; nkeys];
            for k in 0..nkeys {
                let attnum = (*info).ii_IndexAttrNumbers[k] as usize;
                ivalues[k] = values[attnum - 1];
                inulls[k] = nulls[attnum - 1];
            }
            pg_sys::index_insert(
                index,
                ivalues.as_mut_ptr(),
                inulls.as_mut_ptr(),
                &mut (*tuple).t_self,
                store,
                pg_sys::IndexUniqueCheck::UNIQUE_CHECK_NO,
                false,
                info,
            );
            pg_sys::index_close(index, pg_sys::NoLock as i32);
        }
        pg_sys::heap_freetuple(tuple);
    }
}

/// Re-writes an existing bucket row with other meta values (UPDATE of the
/// series identity): the payload is carried over as it is, never decoded.
/// The new version gets an id of its own, so that a fetch by TID under any
/// snapshot (SnapshotAny included) finds exactly the version the TID came from.
///
/// # Safety
/// As `write_bucket`; `old` must come from `store`.
pub unsafe fn relabel_bucket(store: pg_sys::Relation, config: &Config, shape: &TableShape, old: &StoredBucket, meta: &[Option<Vec<u8>>]) -> i64 {
    unsafe {
        let mut values = old.values.clone();
        let mut nulls = old.nulls.clone();
        let id = allocate_id(store, config);
        values[COL_BUCKET_ID] = pg_sys::Datum::from(id);
        set_meta(&mut values, &mut nulls, meta, &shape.meta_attrs());
        insert_tuple(store, &mut values, &mut nulls, pg_sys::GetCurrentCommandId(true));
        id
    }
}

/// Decodes a store tuple, payload included. Allocates in the current memory context.
///
/// # Safety
/// `tuple` must be a valid tuple of `store`.
pub unsafe fn read_bucket(store: pg_sys::Relation, tuple: pg_sys::HeapTuple) -> StoredBucket {
    unsafe {
        let mut b = read_header(store, tuple);
        b.load_payload();
        b
    }
}

/// Decodes a store tuple's small columns only; the (possibly TOASTed)
/// payload is fetched by `load_payload`, so skipped buckets cost no I/O.
///
/// # Safety
/// `tuple` must be a valid tuple of `store`.
pub unsafe fn read_header(store: pg_sys::Relation, tuple: pg_sys::HeapTuple) -> StoredBucket {
    unsafe {
        let tupdesc = (*store).rd_att;
        let natts = (*tupdesc).natts as usize;
        let mut values = vec![pg_sys::Datum::from(0); natts];
        let mut nulls = vec![false; natts];
        pg_sys::heap_deform_tuple(tuple, tupdesc, values.as_mut_ptr(), nulls.as_mut_ptr());
        if nulls[COL_PAYLOAD] || nulls[COL_BUCKET_ID] || nulls[COL_ROW_COUNT] {
            ts_error(DATA_CORRUPTED, "bucket store row has NULL in a required column", "Run tsbucket.verify() on the table.");
        }
        let (stats, stats_len) = if nulls[COL_STATS] {
            (std::ptr::null(), 0)
        } else {
            let s = pg_sys::pg_detoast_datum_packed(values[COL_STATS].cast_mut_ptr());
            (vardata_any(s) as *const u8, varsize_any_exhdr(s))
        };
        StoredBucket {
            tid: (*tuple).t_self,
            bucket_id: values[COL_BUCKET_ID].value() as i64,
            window_start: values[COL_WINDOW_START].value() as i64,
            min_time: values[COL_MIN_TIME].value() as i64,
            max_time: values[COL_MAX_TIME].value() as i64,
            rows: values[COL_ROW_COUNT].value() as i32,
            version: crate::am::slot::Version {
                xmin: (*(*tuple).t_data).t_choice.t_heap.t_xmin,
                xmax: (*(*tuple).t_data).t_choice.t_heap.t_xmax,
                cid: (*(*tuple).t_data).t_choice.t_heap.t_field3.t_cid,
            },
            payload: std::ptr::null(),
            payload_len: 0,
            stats,
            stats_len,
            values,
            nulls,
        }
    }
}

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
    unsafe fn open_current(&mut self) {
        // systable_beginscan_ordered rewrites the keys' column numbers in place:
        // give it a fresh copy each time.
        let mut keys = self.key_sets[self.current].clone();
        // SAFETY: store and index are open; the keys are valid btree keys on the store's columns.
        self.scan = unsafe { pg_sys::systable_beginscan_ordered(self.store, self.index, self.snapshot, keys.len() as i32, keys.as_mut_ptr()) };
    }

    unsafe fn close_current(&mut self) {
        if !self.scan.is_null() {
            // SAFETY: the scan is open.
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
            // SAFETY: the walk's relations are open; the scan is ours.
            unsafe {
                if self.scan.is_null() {
                    self.open_current();
                }
                let tuple = pg_sys::systable_getnext_ordered(self.scan, dir);
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
                self.close_current();
                self.current = next;
            }
        }
    }
}

impl StoreScan {
    /// # Safety
    /// `store` must be open and stay open until `end`.
    pub unsafe fn begin(store: pg_sys::Relation, snapshot: pg_sys::Snapshot) -> StoreScan {
        let flags = pg_sys::ScanOptions::SO_TYPE_SEQSCAN | pg_sys::ScanOptions::SO_ALLOW_STRAT | pg_sys::ScanOptions::SO_ALLOW_PAGEMODE;
        StoreScan { inner: Inner::Heap(unsafe { pg_sys::heap_beginscan(store, snapshot, 0, std::ptr::null_mut(), std::ptr::null_mut(), flags) }) }
    }

    /// This participant's share of a parallel scan of the store's heap: the
    /// heap hands out its blocks to the leader and the workers.
    ///
    /// # Safety
    /// `store` must be open and stay open until `end`; `pscan` initialized for it
    /// (table_parallelscan_initialize) in the parallel query's shared memory.
    pub unsafe fn begin_parallel(store: pg_sys::Relation, pscan: pg_sys::ParallelTableScanDesc) -> StoreScan {
        StoreScan { inner: Inner::Heap(unsafe { pg_sys::table_beginscan_parallel(store, pscan) }) }
    }

    /// The buckets within `ranges` of one of the store's indexes, in index order.
    ///
    /// # Safety
    /// `store` must be open and stay open until `end`; `ranges.index` one of its indexes.
    pub unsafe fn begin_index(store: pg_sys::Relation, snapshot: pg_sys::Snapshot, ranges: IndexRanges) -> StoreScan {
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
                // SAFETY: the scan is open (begun and not ended).
                let tuple = unsafe { pg_sys::heap_getnext(*scan, dir) };
                (!tuple.is_null()).then_some(tuple)
            }
            Inner::Index(walk) => walk.next(forward),
        }
    }

    pub fn rescan(&mut self) {
        match &mut self.inner {
            // SAFETY: the scan is open.
            Inner::Heap(scan) => unsafe { pg_sys::heap_rescan(*scan, std::ptr::null_mut(), false, false, false, false) },
            Inner::Index(walk) => {
                // SAFETY: closes only a scan this walk opened.
                unsafe { walk.close_current() };
                walk.started = false;
                walk.exhausted = None;
            }
        }
    }

    pub fn end(self) {
        match self.inner {
            // SAFETY: the scan is open, and `self` is consumed.
            Inner::Heap(scan) => unsafe { pg_sys::heap_endscan(scan) },
            Inner::Index(mut walk) => unsafe {
                // SAFETY: as above; the index was opened by begin_index.
                walk.close_current();
                pg_sys::index_close(walk.index, pg_sys::AccessShareLock as i32);
            },
        }
    }
}

/// A copy of the store tuple of bucket `bucket_id` visible to `snapshot`
/// (not detoasted: callers read it only if they need the payload).
///
/// # Safety
/// `store` must be open; `id_index` its index on bucket_id.
pub unsafe fn find_bucket_tuple(
    store: pg_sys::Relation,
    id_index: pg_sys::Oid,
    bucket_id: i64,
    snapshot: pg_sys::Snapshot,
) -> Option<pg_sys::HeapTuple> {
    unsafe {
        let mut key = pg_sys::ScanKeyData::default();
        pg_sys::ScanKeyInit(
            &mut key,
            1,
            pg_sys::BTEqualStrategyNumber as u16,
            pg_sys::Oid::from(pg_sys::F_INT8EQ),
            pg_sys::Datum::from(bucket_id),
        );
        let scan = pg_sys::systable_beginscan(store, id_index, true, snapshot, 1, &mut key);
        let tuple = pg_sys::systable_getnext(scan);
        let found = if tuple.is_null() { None } else { Some(pg_sys::heap_copytuple(tuple)) };
        pg_sys::systable_endscan(scan);
        found
    }
}

/// The bucket `bucket_id` as `snapshot` sees it, read.
///
/// # Safety
/// As `find_bucket_tuple`.
pub unsafe fn find_bucket(
    store: pg_sys::Relation,
    id_index: pg_sys::Oid,
    bucket_id: i64,
    snapshot: pg_sys::Snapshot,
) -> Option<StoredBucket> {
    unsafe { find_bucket_tuple(store, id_index, bucket_id, snapshot).map(|t| read_bucket(store, t)) }
}

/// Deletes a bucket row, failing with 40001 if a concurrent transaction
/// changed it first (we cannot re-apply row-level changes to its new version).
///
/// # Safety
/// `store` must be open and locked RowExclusive.
pub unsafe fn delete_bucket(store: pg_sys::Relation, tid: pg_sys::ItemPointerData) {
    unsafe {
        let mut tid = tid;
        let mut tmfd = pg_sys::TM_FailureData::default();
        let result = pg_sys::heap_delete(
            store,
            &mut tid,
            pg_sys::GetCurrentCommandId(true),
            std::ptr::null_mut(),
            true,
            &mut tmfd,
            false,
        );
        match result {
            pg_sys::TM_Result::TM_Ok => {}
            pg_sys::TM_Result::TM_SelfModified => ts_error(
                SERIALIZATION_FAILURE,
                "bucket was already modified by this statement",
                "A statement may not change the same rows twice (for example through a trigger or a function it calls).",
            ),
            pg_sys::TM_Result::TM_Updated | pg_sys::TM_Result::TM_Deleted => ts_error(
                SERIALIZATION_FAILURE,
                "could not serialize access due to concurrent change of the same bucket",
                "Another transaction changed rows of this bucket; retry the statement.",
            ),
            other => ts_error(DATA_CORRUPTED, &format!("unexpected result {other} deleting a bucket"), "Retry the statement."),
        }
    }
}

/// A new bucket id. Ids come from the table's sequence, which cycles through
/// the 37-bit id space (see tid.rs) and which only this code may advance (it
/// has no grants: nextval runs as the sequence's owner). After a
/// wrap-around an id is taken only when no store tuple version carries it
/// any more, dead ones included: VACUUM of the store frees ids for reuse.
///
/// # Safety
/// `store` must be `config`'s open bucket store.
pub unsafe fn allocate_id(store: pg_sys::Relation, config: &Config) -> i64 {
    let mut jumps = 0;
    loop {
        let id = crate::pgutil::as_user(config.id_owner, false, || unsafe {
            pgrx::direct_function_call::<i64>(pg_sys::nextval_oid, &[pgrx::IntoDatum::into_datum(config.id_sequence)])
                .expect("nextval returns a value")
        });
        if !tid::is_usable_id(id) {
            continue;
        }
        if unsafe { !id_in_use(store, config.id_index, id) } {
            // A reused id must not lead DML that still follows its old self astray.
            unsafe { forget_moves(config, id) };
            return id;
        }
        // After a wrap-around: skip the whole run of ids still in use at once.
        jumps += 1;
        if jumps > 64 {
            ts_error(
                crate::error::NOT_IN_PREREQUISITE_STATE,
                "no free bucket id found for this table",
                "A table holds at most 2^37 bucket versions; VACUUM frees the ids of deleted ones.",
            );
        }
        let free = unsafe { first_free_id_from(store, config.id_index, id) };
        crate::pgutil::as_user(config.id_owner, false, || unsafe {
            pgrx::direct_function_call::<i64>(
                pg_sys::setval_oid,
                &[pgrx::IntoDatum::into_datum(config.id_sequence), pgrx::IntoDatum::into_datum((free - 1).max(1))],
            )
        });
    }
}

/// The first id at or after `id` that no store tuple version carries (the
/// index is walked in order, so a run of live ids costs one scan).
unsafe fn first_free_id_from(store: pg_sys::Relation, id_index: pg_sys::Oid, id: i64) -> i64 {
    unsafe {
        let index = pg_sys::index_open(id_index, pg_sys::AccessShareLock as i32);
        let mut key = pg_sys::ScanKeyData::default();
        pg_sys::ScanKeyInit(&mut key, 1, pg_sys::BTGreaterEqualStrategyNumber as u16, pg_sys::Oid::from(pg_sys::F_INT8GE), pg_sys::Datum::from(id));
        let scan = pg_sys::systable_beginscan_ordered(store, index, &raw mut pg_sys::SnapshotAnyData, 1, &mut key);
        let mut next = id;
        loop {
            let tuple = pg_sys::systable_getnext_ordered(scan, pg_sys::ScanDirection::ForwardScanDirection);
            if tuple.is_null() {
                break;
            }
            let mut isnull = false;
            let found = pg_sys::heap_getattr(tuple, (COL_BUCKET_ID + 1) as i32, (*store).rd_att, &mut isnull).value() as i64;
            if found > next {
                break;
            }
            next = next.max(found + 1);
        }
        pg_sys::systable_endscan_ordered(scan);
        pg_sys::index_close(index, pg_sys::AccessShareLock as i32);
        if next > tid::MAX_BUCKET_ID { 1 } else { next }
    }
}


/// Whether any version of the store (live, dead or in progress) carries `id`.
unsafe fn id_in_use(store: pg_sys::Relation, id_index: pg_sys::Oid, id: i64) -> bool {
    unsafe {
        let found = find_bucket_tuple(store, id_index, id, &raw mut pg_sys::SnapshotAnyData);
        if let Some(t) = found {
            pg_sys::heap_freetuple(t);
        }
        found.is_some()
    }
}

/// Where the rows of a rewritten bucket went: for each old row, the index of
/// its new bucket in `new_ids` and its row there, or None if it was deleted.
pub type RowMoves = Vec<Option<(u16, u16)>>;

/// What became of row `row` of a bucket that is gone.
#[derive(Debug, PartialEq, Eq)]
pub enum Successor {
    /// The bucket went whole (expiry, a DELETE of all its rows, TRUNCATE).
    Gone,
    /// The row was deleted.
    Deleted,
    /// The row lives on as this row of this bucket.
    Moved(i64, usize),
}

/// Records where the rows of bucket `old_id` went; written in the same
/// transaction as the rewrite, so it becomes visible exactly when the rewrite
/// commits. A DML statement that waited on the rewrite follows it
/// (`successor`), as heap's EvalPlanQual follows an update chain.
///
/// # Safety
/// `config`'s relations must exist; the caller rewrites `old_id` in this transaction.
pub unsafe fn record_moves(config: &Config, old_id: i64, new_ids: &[i64], moves: &RowMoves) {
    let Some((moves_relid, _)) = config.moves else { return };
    if new_ids.is_empty() {
        return;
    }
    let mut map = Vec::with_capacity(moves.len() * 4);
    for m in moves {
        let (bucket, row) = m.unwrap_or((u16::MAX, 0));
        map.extend_from_slice(&bucket.to_le_bytes());
        map.extend_from_slice(&row.to_le_bytes());
    }
    unsafe {
        let rel = pg_sys::table_open(moves_relid, pg_sys::RowExclusiveLock as i32);
        let ids: Vec<pg_sys::Datum> = new_ids.iter().map(|&i| pg_sys::Datum::from(i)).collect();
        let array = pg_sys::construct_array(
            ids.as_ptr() as *mut pg_sys::Datum,
            ids.len() as i32,
            pg_sys::INT8OID,
            8,
            true,
            pg_sys::TYPALIGN_DOUBLE as std::ffi::c_char,
        );
        let mut values = [pg_sys::Datum::from(old_id), pg_sys::Datum::from(array), bytea_datum(&map)];
        let mut nulls = [false; 3];
        let tuple = pg_sys::heap_form_tuple((*rel).rd_att, values.as_mut_ptr(), nulls.as_mut_ptr());
        pg_sys::CatalogTupleInsert(rel, tuple);
        pg_sys::heap_freetuple(tuple);
        pg_sys::table_close(rel, pg_sys::NoLock as i32);
    }
}

/// Where row `row` of the gone bucket `old_id` lives now, as the latest
/// committed state says (the caller has waited for the rewriter to end).
///
/// # Safety
/// `config`'s relations must exist.
pub unsafe fn successor(config: &Config, old_id: i64, row: usize) -> Successor {
    let Some((moves_relid, moves_index)) = config.moves else { return Successor::Gone };
    unsafe {
        let rel = pg_sys::table_open(moves_relid, pg_sys::AccessShareLock as i32);
        let snapshot = pg_sys::RegisterSnapshot(pg_sys::GetLatestSnapshot());
        let mut key = pg_sys::ScanKeyData::default();
        pg_sys::ScanKeyInit(&mut key, 1, pg_sys::BTEqualStrategyNumber as u16, pg_sys::Oid::from(pg_sys::F_INT8EQ), pg_sys::Datum::from(old_id));
        let scan = pg_sys::systable_beginscan(rel, moves_index, true, snapshot, 1, &mut key);
        let tuple = pg_sys::systable_getnext(scan);
        let result = if tuple.is_null() {
            Successor::Gone
        } else {
            let mut values = [pg_sys::Datum::from(0); 3];
            let mut nulls = [false; 3];
            pg_sys::heap_deform_tuple(tuple, (*rel).rd_att, values.as_mut_ptr(), nulls.as_mut_ptr());
            let map = pg_sys::pg_detoast_datum_packed(values[2].cast_mut_ptr());
            let map = std::slice::from_raw_parts(vardata_any(map) as *const u8, varsize_any_exhdr(map));
            let ids: Vec<i64> = pgrx::FromDatum::from_datum(values[1], nulls[1]).unwrap_or_default();
            match map.get(row * 4..row * 4 + 4) {
                Some(entry) => {
                    let bucket = u16::from_le_bytes([entry[0], entry[1]]);
                    let new_row = u16::from_le_bytes([entry[2], entry[3]]) as usize;
                    match ids.get(bucket as usize) {
                        Some(&id) => Successor::Moved(id, new_row),
                        None => Successor::Deleted,
                    }
                }
                None => Successor::Deleted,
            }
        };
        pg_sys::systable_endscan(scan);
        pg_sys::UnregisterSnapshot(snapshot);
        pg_sys::table_close(rel, pg_sys::NoLock as i32);
        result
    }
}

/// Forgets where the rows of `old_id` went: its id is free for reuse, so no
/// store version carries it and no transaction can still be following it.
unsafe fn forget_moves(config: &Config, old_id: i64) {
    let Some((moves_relid, moves_index)) = config.moves else { return };
    unsafe {
        let rel = pg_sys::table_open(moves_relid, pg_sys::RowExclusiveLock as i32);
        let mut key = pg_sys::ScanKeyData::default();
        pg_sys::ScanKeyInit(&mut key, 1, pg_sys::BTEqualStrategyNumber as u16, pg_sys::Oid::from(pg_sys::F_INT8EQ), pg_sys::Datum::from(old_id));
        let scan = pg_sys::systable_beginscan(rel, moves_index, true, std::ptr::null_mut(), 1, &mut key);
        loop {
            let tuple = pg_sys::systable_getnext(scan);
            if tuple.is_null() {
                break;
            }
            retire_moves_entry(rel, (*tuple).t_self);
        }
        pg_sys::systable_endscan(scan);
        pg_sys::table_close(rel, pg_sys::NoLock as i32);
    }
}

/// Deletes a moves entry unless another transaction (a compaction that held
/// the table's maintenance lock before us, or a writer reusing the id) or an
/// earlier command of ours already did: either way the entry is gone, which
/// is all that is asked.
///
/// # Safety
/// `rel` must be the open moves table, locked RowExclusive; `tid` one of its tuples.
unsafe fn retire_moves_entry(rel: pg_sys::Relation, tid: pg_sys::ItemPointerData) {
    let mut tid = tid;
    let mut tmfd = pg_sys::TM_FailureData::default();
    // SAFETY: as the caller promises; waits for a concurrent deleter like simple_heap_delete.
    let result = unsafe { pg_sys::heap_delete(rel, &mut tid, pg_sys::GetCurrentCommandId(true), std::ptr::null_mut(), true, &mut tmfd, false) };
    match result {
        pg_sys::TM_Result::TM_Ok | pg_sys::TM_Result::TM_Deleted | pg_sys::TM_Result::TM_Updated | pg_sys::TM_Result::TM_SelfModified => {}
        other => ts_error(DATA_CORRUPTED, &format!("unexpected result {other} removing a moves entry"), "This is a bug in tsbucket; please report it."),
    }
}

/// Removes the moves entries whose old bucket no store version carries any
/// more (VACUUM removed it): no transaction can still be following them.
/// Run by compaction rounds, so the moves table stays as small as the set of
/// recently rewritten buckets.
///
/// # Safety
/// `store` must be `config`'s open bucket store; `snapshot` registered (`snapshot_after_lock`).
pub unsafe fn prune_moves(store: pg_sys::Relation, config: &Config, snapshot: pg_sys::Snapshot) {
    let Some((moves_relid, _)) = config.moves else { return };
    unsafe {
        let rel = pg_sys::table_open(moves_relid, pg_sys::RowExclusiveLock as i32);
        let mut scan = StoreScan::begin(rel, snapshot);
        while let Some(tuple) = scan.next(true) {
            let mut isnull = false;
            let old_id = pg_sys::heap_getattr(tuple, 1, (*rel).rd_att, &mut isnull).value() as i64;
            if !id_in_use(store, config.id_index, old_id) {
                retire_moves_entry(rel, (*tuple).t_self);
            }
        }
        scan.end();
        pg_sys::table_close(rel, pg_sys::NoLock as i32);
    }
}

/// The store's usable indexes: which index, over which store columns (1-based).
///
/// # Safety
/// `store` must be an open bucket store.
pub unsafe fn indexes(store: pg_sys::Relation) -> Vec<(pg_sys::Oid, Vec<i16>)> {
    unsafe {
        crate::pgutil::list_oids(pg_sys::RelationGetIndexList(store))
            .into_iter()
            .filter_map(|oid| {
                let index = pg_sys::index_open(oid, pg_sys::AccessShareLock as i32);
                let form = (*index).rd_index;
                let columns = (*form).indkey.values.as_slice((*form).indnatts as usize).to_vec();
                // Only whole-column btree indexes over every row (a superuser may add others).
                let usable = (*form).indisvalid
                    && (*(*index).rd_rel).relam == pg_sys::BTREE_AM_OID
                    && !columns.contains(&0)
                    && pg_sys::RelationGetIndexPredicate(index).is_null();
                pg_sys::index_close(index, pg_sys::AccessShareLock as i32);
                usable.then_some((oid, columns))
            })
            .collect()
    }
}

/// The store's index over exactly `columns` (1-based store column numbers).
///
/// # Safety
/// As `indexes`.
pub unsafe fn index_on(store: pg_sys::Relation, columns: &[i16]) -> Option<pg_sys::Oid> {
    unsafe { indexes(store).into_iter().find(|(_, cols)| cols == columns).map(|(oid, _)| oid) }
}

/// Whether any bucket's newest row is older than `cutoff`, by the index on
/// max_time (None: the store has no such index, made before 0.2.0).
///
/// # Safety
/// `store` must be an open bucket store.
pub unsafe fn any_bucket_older_than(store: pg_sys::Relation, cutoff: i64) -> Option<bool> {
    unsafe {
        let time_type = (*crate::shape::tuple_desc_attr((*store).rd_att, COL_MAX_TIME)).atttypid;
        let index_oid = index_on(store, &[(COL_MAX_TIME + 1) as i16])?;
        let proc = if time_type == pg_sys::TIMESTAMPTZOID { pg_sys::F_TIMESTAMPTZ_LT } else { pg_sys::F_TIMESTAMP_LT };
        let mut key = pg_sys::ScanKeyData::default();
        pg_sys::ScanKeyInit(&mut key, (COL_MAX_TIME + 1) as i16, pg_sys::BTLessStrategyNumber as u16, pg_sys::Oid::from(proc), pg_sys::Datum::from(cutoff));
        let scan = pg_sys::systable_beginscan(store, index_oid, true, current_snapshot(), 1, &mut key);
        let found = !pg_sys::systable_getnext(scan).is_null();
        pg_sys::systable_endscan(scan);
        Some(found)
    }
}

/// The outcome of locking a bucket's store row.
#[derive(Debug, PartialEq, Eq)]
pub enum Lock {
    /// Locked (or already ours) and live: it can be rewritten by this transaction.
    Held,
    /// Deleted or rewritten by a committed transaction (follow `successor`).
    Gone,
    /// Locked by another transaction and we asked not to wait.
    Busy,
    /// Deleted or rewritten by this transaction's own later command.
    ChangedBySelf,
}

/// Locks the store row of bucket `bucket_id` against rewrites by others, as
/// heap locks a row a DELETE or UPDATE is about to change. User DML waits;
/// maintenance (compaction, expiry) passes `wait = false` and skips buckets
/// that user DML holds. Waiting ends when the holder ends: then the row is
/// either ours (Held) or gone (the holder rewrote or deleted it).
///
/// # Safety
/// `store` must be `config`'s open bucket store.
pub unsafe fn lock_bucket(store: pg_sys::Relation, config: &Config, bucket_id: i64, cid: pg_sys::CommandId, wait: bool) -> Lock {
    unsafe {
        // The current version: committed and not deleted, or being deleted by a
        // transaction still running (then we wait for it below).
        let Some(found) = find_bucket_tuple(store, config.id_index, bucket_id, &raw mut pg_sys::SnapshotSelfData) else {
            let deleted_by_us = find_bucket_tuple(store, config.id_index, bucket_id, &raw mut pg_sys::SnapshotAnyData).is_some_and(|t| {
                let xmax = (*(*t).t_data).t_choice.t_heap.t_xmax;
                pg_sys::heap_freetuple(t);
                pg_sys::TransactionIdIsCurrentTransactionId(xmax)
            });
            return if deleted_by_us { Lock::ChangedBySelf } else { Lock::Gone };
        };
        let mut tuple = pg_sys::HeapTupleData { t_self: (*found).t_self, ..Default::default() };
        pg_sys::heap_freetuple(found);
        let mut buffer: pg_sys::Buffer = 0;
        let mut tmfd = pg_sys::TM_FailureData::default();
        let policy = if wait { pg_sys::LockWaitPolicy::LockWaitBlock } else { pg_sys::LockWaitPolicy::LockWaitSkip };
        let result = pg_sys::heap_lock_tuple(store, &mut tuple, cid, pg_sys::LockTupleMode::LockTupleExclusive, policy, false, &mut buffer, &mut tmfd);
        if buffer != 0 {
            pg_sys::ReleaseBuffer(buffer);
        }
        match result {
            pg_sys::TM_Result::TM_Ok => Lock::Held,
            pg_sys::TM_Result::TM_WouldBlock => Lock::Busy,
            pg_sys::TM_Result::TM_Updated | pg_sys::TM_Result::TM_Deleted => Lock::Gone,
            pg_sys::TM_Result::TM_SelfModified => Lock::ChangedBySelf,
            other => ts_error(
                DATA_CORRUPTED,
                &format!("unexpected result {other} locking bucket {bucket_id}"),
                "This is a bug in tsbucket; please report it.",
            ),
        }
    }
}

/// Buckets the store holds (heap estimate, or exact when small), and the
/// buckets and rows of a sample, for row estimates.
///
/// # Safety
/// `store` must be open.
pub unsafe fn estimate(store: pg_sys::Relation) -> (f64, usize, f64, pg_sys::BlockNumber) {
    const EXACT_UP_TO_BLOCKS: u32 = 16;
    const SAMPLE_BUCKETS: usize = 200;
    unsafe {
        let nblocks = pg_sys::RelationGetNumberOfBlocksInFork(store, pg_sys::ForkNumber::MAIN_FORKNUM);
        let exact = nblocks <= EXACT_UP_TO_BLOCKS;
        let mut scan = StoreScan::begin(store, current_snapshot());
        let (mut n, mut rows) = (0usize, 0f64);
        while exact || n < SAMPLE_BUCKETS {
            let Some(tuple) = scan.next(true) else { break };
            n += 1;
            rows += read_header(store, tuple).rows as f64;
        }
        scan.end();
        let buckets = if exact {
            n as f64
        } else {
            let mut pages = 0;
            let mut tuples = 0.0;
            let mut allvisfrac = 0.0;
            match (*(*store).rd_tableam).relation_estimate_size {
                Some(f) => {
                    f(store, std::ptr::null_mut(), &mut pages, &mut tuples, &mut allvisfrac);
                    tuples
                }
                None => n as f64,
            }
        };
        (buckets, n, rows, nblocks)
    }
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
    // SAFETY: plain reads of the transaction's state; the snapshot is registered before use.
    unsafe {
        let uses_xact_snapshot = pg_sys::XactIsoLevel >= pg_sys::XACT_REPEATABLE_READ as i32;
        let snapshot = if uses_xact_snapshot { pg_sys::GetTransactionSnapshot() } else { pg_sys::GetLatestSnapshot() };
        pg_sys::RegisterSnapshot(snapshot)
    }
}

/// The snapshot a statement runs with; the transaction's when none is active
/// (commit-time callbacks, planning outside a portal).
pub fn current_snapshot() -> pg_sys::Snapshot {
    unsafe { if pg_sys::ActiveSnapshotSet() { pg_sys::GetActiveSnapshot() } else { pg_sys::GetTransactionSnapshot() } }
}
