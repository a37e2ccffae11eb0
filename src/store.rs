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
        insert_tuple(store, &mut values, &mut nulls);
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

unsafe fn insert_tuple(store: pg_sys::Relation, values: &mut [pg_sys::Datum], nulls: &mut [bool]) {
    unsafe {
        let tuple = pg_sys::heap_form_tuple((*store).rd_att, values.as_mut_ptr(), nulls.as_mut_ptr());
        pg_sys::CatalogTupleInsert(store, tuple);
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
        insert_tuple(store, &mut values, &mut nulls);
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
/// estimates) goes through it.
pub struct StoreScan {
    scan: pg_sys::TableScanDesc,
}

impl StoreScan {
    /// # Safety
    /// `store` must be open and stay open until `end`.
    pub unsafe fn begin(store: pg_sys::Relation, snapshot: pg_sys::Snapshot) -> StoreScan {
        let flags = pg_sys::ScanOptions::SO_TYPE_SEQSCAN | pg_sys::ScanOptions::SO_ALLOW_STRAT | pg_sys::ScanOptions::SO_ALLOW_PAGEMODE;
        StoreScan { scan: unsafe { pg_sys::heap_beginscan(store, snapshot, 0, std::ptr::null_mut(), std::ptr::null_mut(), flags) } }
    }

    /// The next tuple; valid until the next call.
    pub fn next(&mut self, forward: bool) -> Option<pg_sys::HeapTuple> {
        let dir = if forward { pg_sys::ScanDirection::ForwardScanDirection } else { pg_sys::ScanDirection::BackwardScanDirection };
        // SAFETY: the scan is open (begun and not ended).
        let tuple = unsafe { pg_sys::heap_getnext(self.scan, dir) };
        (!tuple.is_null()).then_some(tuple)
    }

    pub fn rescan(&mut self) {
        // SAFETY: the scan is open.
        unsafe { pg_sys::heap_rescan(self.scan, std::ptr::null_mut(), false, false, false, false) }
    }

    pub fn end(self) {
        // SAFETY: the scan is open, and `self` is consumed.
        unsafe { pg_sys::heap_endscan(self.scan) }
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
    let mut skipped = 0u64;
    loop {
        let id = as_user(config.id_owner, || unsafe {
            pgrx::direct_function_call::<i64>(pg_sys::nextval_oid, &[pgrx::IntoDatum::into_datum(config.id_sequence)])
                .expect("nextval returns a value")
        });
        if tid::is_usable_id(id) && unsafe { !id_in_use(store, config.id_index, id) } {
            return id;
        }
        skipped += 1;
        if skipped > 1_000_000 {
            ts_error(
                crate::error::NOT_IN_PREREQUISITE_STATE,
                "no free bucket id found for this table",
                "Run VACUUM on the table: ids of deleted buckets become free once VACUUM has removed them.",
            );
        }
    }
}

/// Runs `f` as `user`. nextval cannot run user code, so no security-restricted
/// context is needed; an error rolls the user back with the (sub)transaction.
fn as_user<R>(user: pg_sys::Oid, f: impl FnOnce() -> R) -> R {
    let (mut saved_user, mut saved_context) = (pg_sys::InvalidOid, 0i32);
    // SAFETY: saving and restoring the backend's user id, as SECURITY DEFINER does.
    unsafe {
        pg_sys::GetUserIdAndSecContext(&mut saved_user, &mut saved_context);
        pg_sys::SetUserIdAndSecContext(user, saved_context | pg_sys::SECURITY_LOCAL_USERID_CHANGE as i32);
    }
    let result = f();
    // SAFETY: as above.
    unsafe { pg_sys::SetUserIdAndSecContext(saved_user, saved_context) };
    result
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

/// The snapshot a statement runs with; the transaction's when none is active
/// (commit-time callbacks, planning outside a portal).
pub fn current_snapshot() -> pg_sys::Snapshot {
    unsafe { if pg_sys::ActiveSnapshotSet() { pg_sys::GetActiveSnapshot() } else { pg_sys::GetTransactionSnapshot() } }
}
