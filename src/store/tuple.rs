//! One store tuple: its columns decoded (header only, or with the payload),
//! and the tuple of a bucket id as a snapshot sees it.

use crate::pg::error::{DATA_CORRUPTED, ts_error};
use crate::store::bucket::{COL_BUCKET_ID, COL_MAX_TIME, COL_MIN_TIME, COL_PAYLOAD, COL_ROW_COUNT, COL_STATS, COL_WINDOW_START, StoredBucket};
use pgrx::pg_sys;
use pgrx::varlena::{vardata_any, varsize_any_exhdr};

/// Decodes a store tuple, payload included. Allocates in the current memory context.
///
/// # Safety
/// `tuple` must be a valid tuple of `store`.
pub unsafe fn read_bucket(store: pg_sys::Relation, tuple: pg_sys::HeapTuple) -> StoredBucket {
    // SAFETY: `tuple` is a valid tuple of `store` (read_bucket's contract), just what read_header asks for.
    let mut b = unsafe { read_header(store, tuple) };
    b.load_payload();
    b
}

/// Decodes a store tuple's small columns only; the (possibly TOASTed)
/// payload is fetched by `load_payload`, so skipped buckets cost no I/O.
///
/// # Safety
/// `tuple` must be a valid tuple of `store`.
pub unsafe fn read_header(store: pg_sys::Relation, tuple: pg_sys::HeapTuple) -> StoredBucket {
    // SAFETY: `store` is the open relation `tuple` belongs to (read_header's contract); rd_att describes it.
    let (tupdesc, natts) = unsafe {
        let tupdesc = (*store).rd_att;
        (tupdesc, (*tupdesc).natts as usize)
    };
    let mut values = vec![pg_sys::Datum::from(0); natts];
    let mut nulls = vec![false; natts];
    // SAFETY: `tuple` is a valid tuple of `store` and `values`/`nulls` have one entry per attribute of `tupdesc`.
    unsafe { pg_sys::heap_deform_tuple(tuple, tupdesc, values.as_mut_ptr(), nulls.as_mut_ptr()) };
    if nulls[COL_PAYLOAD] || nulls[COL_BUCKET_ID] || nulls[COL_ROW_COUNT] {
        ts_error(DATA_CORRUPTED, "bucket store row has NULL in a required column", "Run tsbucket.verify() on the table.");
    }
    let (stats, stats_len) = if nulls[COL_STATS] {
        (std::ptr::null(), 0)
    } else {
        // SAFETY: values[COL_STATS] is the tuple's non-NULL stats bytea; a detoasted copy, if one is needed,
        // is palloc'd in the current memory context.
        unsafe {
            let s = pg_sys::pg_detoast_datum_packed(values[COL_STATS].cast_mut_ptr());
            (vardata_any(s) as *const u8, varsize_any_exhdr(s))
        }
    };
    // SAFETY: `tuple` is valid (the contract): its TID and its header's xmin, xmax and command id are plain reads.
    let (tid, version) = unsafe {
        let version = super::slot::Version {
            xmin: (*(*tuple).t_data).t_choice.t_heap.t_xmin,
            xmax: (*(*tuple).t_data).t_choice.t_heap.t_xmax,
            cid: (*(*tuple).t_data).t_choice.t_heap.t_field3.t_cid,
        };
        ((*tuple).t_self, version)
    };
    StoredBucket {
        tid,
        bucket_id: values[COL_BUCKET_ID].value() as i64,
        window_start: values[COL_WINDOW_START].value() as i64,
        min_time: values[COL_MIN_TIME].value() as i64,
        max_time: values[COL_MAX_TIME].value() as i64,
        rows: values[COL_ROW_COUNT].value() as i32,
        version,
        payload: std::ptr::null(),
        payload_len: 0,
        payload_total: 0,
        stats,
        stats_len,
        // SAFETY: `tupdesc` is the store's descriptor.
        rest_col: unsafe { super::bucket::rest_column(tupdesc) },
        values,
        nulls,
        tail: None,
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
    let mut key = pg_sys::ScanKeyData::default();
    // SAFETY: `store` is open and `id_index` its index on bucket_id (find_bucket_tuple's contract); `key` is a
    // local int8eq key on that index's column, copied by the scan.
    let scan = unsafe {
        pg_sys::ScanKeyInit(
            &mut key,
            1,
            pg_sys::BTEqualStrategyNumber as u16,
            pg_sys::Oid::from(pg_sys::F_INT8EQ),
            pg_sys::Datum::from(bucket_id),
        );
        pg_sys::systable_beginscan(store, id_index, true, snapshot, 1, &mut key)
    };
    // SAFETY: `scan` was begun above and stays open until systable_endscan below.
    let tuple = unsafe { pg_sys::systable_getnext(scan) };
    // SAFETY: a non-NULL `tuple` is the scan's current one, still valid: heap_copytuple palloc's a copy in the
    // current memory context that outlives the scan.
    let found = (!tuple.is_null()).then(|| unsafe { pg_sys::heap_copytuple(tuple) });
    // SAFETY: ends the bucket_id scan begun above; nothing points into it any more.
    unsafe { pg_sys::systable_endscan(scan) };
    found
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
    // SAFETY: `store` is open and `id_index` its bucket_id index (find_bucket's contract); a tuple found is a
    // valid copy of a tuple of `store`, as read_bucket requires.
    unsafe { find_bucket_tuple(store, id_index, bucket_id, snapshot).map(|t| read_bucket(store, t)) }
}

/// Whether any version of the store (live, dead or in progress) carries `id`.
///
/// # Safety
/// `store` must be open and `id_index` its index on bucket_id.
pub(super) unsafe fn id_in_use(store: pg_sys::Relation, id_index: pg_sys::Oid, id: i64) -> bool {
    // SAFETY: `store` is open and `id_index` its bucket_id index (id_in_use's contract); SnapshotAny also sees
    // dead and in-progress versions.
    let found = unsafe { find_bucket_tuple(store, id_index, id, &raw mut pg_sys::SnapshotAnyData) };
    if let Some(t) = found {
        // SAFETY: `t` is the copy find_bucket_tuple palloc'd for us; only its presence matters, so it is freed.
        unsafe { pg_sys::heap_freetuple(t) };
    }
    found.is_some()
}
