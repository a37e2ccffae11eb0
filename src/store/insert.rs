//! THE writer of the store: encodes a bucket's columns, computes their
//! statistics and time range, gives it an id and inserts it with its index
//! entries; re-labels a bucket with new meta values, its payload untouched.
//! It notes that buckets were written, for whoever asks at transaction end.

use crate::catalog::config::Config;
use crate::catalog::shape::{Attr, TableShape};
use crate::pg::error::{DATA_CORRUPTED, ts_error};
use crate::store::bucket::{BucketContent, HEAP_TUPLE_HEADER, TOAST_CHUNK, TOAST_POINTER, TOAST_TUPLE_THRESHOLD, maxalign, rest_column, split_at, COL_BUCKET_ID, COL_CLOSE_REASON, COL_FIRST_META, COL_MAX_TIME, COL_MIN_TIME, COL_PAYLOAD, COL_ROW_COUNT, COL_STATS, COL_UNCOMPRESSED_BYTES, COL_WINDOW_START, CloseReason, StoredBucket};
use super::ids::allocate_id;
use pgrx::pg_sys;
use std::cell::Cell;
use tsbucket_format::{Values, encode_bucket};
use tsbucket_format::stats::{FieldStats, column_stats, encode_stats_with_fields, field_stats};

thread_local! {
    /// A bucket other than a compaction's was written in this transaction.
    static WRITTEN: Cell<bool> = const { Cell::new(false) };
}

/// Whether buckets other than compaction's were written since the last call:
/// the transaction's end asks (compaction may have work once it commits).
pub fn take_buckets_written() -> bool {
    WRITTEN.with(|w| w.replace(false))
}

/// The statistics of the numeric top-level fields of the bucket's document
/// columns, read from the payload just encoded (the paths as stored).
fn document_field_stats(payload: &[u8]) -> Vec<FieldStats> {
    let Ok(reader) = tsbucket_format::BucketReader::parse(payload) else { return Vec::new() };
    reader
        .columns()
        .iter()
        .filter(|c| c.kind == tsbucket_format::ColumnKind::Document)
        .flat_map(|c| field_stats(c).unwrap_or_default())
        .collect()
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
    // Not the time column's: min_time and max_time hold its bounds, and no reader asks its statistics
    // (a column without them may match any condition; buckets written before 0.6.0 have them).
    let stats = encode_stats_with_fields(
        &content.columns.iter().filter(|c| c.attnum as i16 != config.time_attnum).filter_map(column_stats).collect::<Vec<_>>(),
        &document_field_stats(&payload),
    );
    let times = content.columns.iter().find(|c| c.attnum as i16 == config.time_attnum).map(|c| &c.values);
    let (min_time, max_time) = match times {
        Some(Values::Int(t)) if !t.is_empty() => (*t.iter().min().expect("non-empty"), *t.iter().max().expect("non-empty")),
        _ => ts_error(DATA_CORRUPTED, "a bucket to be written has no times", "This is a bug in tsbucket; please report it."),
    };
    // SAFETY: `store` is `config`'s bucket store, open and locked RowExclusive (write_bucket's contract),
    // which is what allocate_id needs.
    let id = id.unwrap_or_else(|| unsafe { allocate_id(store, config) });
    // SAFETY: `store` is open, so its relcache entry's descriptor is readable.
    let natts = unsafe { (*(*store).rd_att).natts as usize };
    let mut values = vec![pg_sys::Datum::from(0); natts];
    // Columns set below are not NULL; any other (a dropped one) is.
    let mut nulls: Vec<bool> = (0..natts).map(|c| c >= COL_FIRST_META).collect();
    values[COL_BUCKET_ID] = pg_sys::Datum::from(id);
    values[COL_WINDOW_START] = pg_sys::Datum::from(content.window_start);
    values[COL_MIN_TIME] = pg_sys::Datum::from(min_time);
    values[COL_MAX_TIME] = pg_sys::Datum::from(max_time);
    values[COL_ROW_COUNT] = pg_sys::Datum::from(content.rows as i32);
    values[COL_UNCOMPRESSED_BYTES] = pg_sys::Datum::from(content.uncompressed_bytes);
    values[COL_CLOSE_REASON] = pg_sys::Datum::from(reason as i16);
    values[COL_STATS] = crate::pg::datum::bytea(&stats);
    // SAFETY: content.meta holds one entry per meta column of `shape`, identifying bytes of that column's
    // type (from datum_bytes when the rows were buffered), as set_meta requires.
    unsafe { set_meta(&mut values, &mut nulls, content.meta, shape.meta_attrs()) };
    // SAFETY: `store` is open; `values`/`nulls` hold one entry per store attribute, all set but the payload's.
    unsafe { set_payload(store, &mut values, &mut nulls, &payload) };
    // SAFETY: `store` is open and locked RowExclusive; `values`/`nulls` have one entry per store attribute.
    unsafe { insert_tuple(store, &mut values, &mut nulls, cid) };
    if reason != CloseReason::Compaction {
        WRITTEN.with(|w| w.set(true));
    }
    id
}

/// Sets the payload columns. A payload longer than a TOAST chunk is split
/// after its whole chunks when the remainder fits in the store row without
/// making the row TOAST anything else: TOAST pages then hold four full chunks
/// each, where a short last chunk would take a page slot and leave most of
/// it empty (a fifth of a float bucket's bytes).
///
/// # Safety
/// `store` must be open; `values`/`nulls` hold one entry per store attribute, all set but the payload's.
unsafe fn set_payload(store: pg_sys::Relation, values: &mut [pg_sys::Datum], nulls: &mut [bool], payload: &[u8]) {
    // SAFETY: `store` is open (the contract), so its relcache entry's descriptor is valid.
    let tupdesc = unsafe { (*store).rd_att };
    // SAFETY: `tupdesc` is the store's descriptor.
    let Some(col) = (unsafe { rest_column(tupdesc) }) else {
        values[COL_PAYLOAD] = crate::pg::datum::bytea(payload);
        return;
    };
    nulls[col] = true;
    let mut split = None;
    if payload.len() > TOAST_CHUNK {
        // The row's size without the payload and the remainder; the payload then adds its TOAST pointer.
        nulls[COL_PAYLOAD] = true;
        // SAFETY: `values`/`nulls` hold one entry per attribute of `tupdesc`, every non-NULL by-reference one a valid datum.
        let data = unsafe { pg_sys::heap_compute_data_size(tupdesc, values.as_mut_ptr(), nulls.as_mut_ptr()) };
        nulls[COL_PAYLOAD] = false;
        let header = maxalign(HEAP_TUPLE_HEADER + values.len().div_ceil(8));
        // The remainder's 4-byte header, its alignment and a margin.
        let room = TOAST_TUPLE_THRESHOLD.saturating_sub(header + data + TOAST_POINTER + 4 + 3 + 8);
        split = split_at(payload.len(), room);
    }
    match split {
        Some(at) => {
            values[COL_PAYLOAD] = crate::pg::datum::bytea(&payload[..at]);
            values[col] = crate::pg::datum::bytea(&payload[at..]);
            nulls[col] = false;
        }
        None => values[COL_PAYLOAD] = crate::pg::datum::bytea(payload),
    }
}

/// # Safety
/// `meta` must hold, per entry of `meta_attrs`, NULL or identifying bytes of that attribute's type.
unsafe fn set_meta(values: &mut [pg_sys::Datum], nulls: &mut [bool], meta: &[Option<Vec<u8>>], meta_attrs: &[Attr]) {
    for (i, attr) in meta_attrs.iter().enumerate() {
        match &meta[i] {
            Some(bytes) => {
                // SAFETY: `bytes` are identifying bytes of `attr`'s type (set_meta's contract); the datum is
                // palloc'd in the current memory context, alive until the tuple is formed.
                values[COL_FIRST_META + i] = unsafe { crate::pg::datum::bytes_datum(bytes, attr.layout()) };
                nulls[COL_FIRST_META + i] = false;
            }
            None => nulls[COL_FIRST_META + i] = true,
        }
    }
}

/// Inserts a store tuple and its index entries as command `cid`. Buffered
/// rows are written as the command that inserted them, not as the one that
/// happens to flush them (a scan that flushes at its start must see them).
///
/// # Safety
/// `store` must be open and locked RowExclusive; `values`/`nulls` hold one entry per store attribute.
unsafe fn insert_tuple(store: pg_sys::Relation, values: &mut [pg_sys::Datum], nulls: &mut [bool], cid: pg_sys::CommandId) {
    // SAFETY: `store` is open and locked RowExclusive and `values`/`nulls` match its descriptor (insert_tuple's
    // contract); the tuple is palloc'd in the current memory context and inserted as command `cid`.
    let tuple = unsafe {
        let tuple = pg_sys::heap_form_tuple((*store).rd_att, values.as_mut_ptr(), nulls.as_mut_ptr());
        pg_sys::heap_insert(store, tuple, cid, 0, std::ptr::null_mut());
        tuple
    };
    // The store's indexes are on plain columns (bucket_id; meta..., window_start).
    // SAFETY: RelationGetIndexList returns a fresh OID list of the open `store`'s indexes.
    let index_oids = unsafe { crate::pg::nodes::list_oids(pg_sys::RelationGetIndexList(store)) };
    for index_oid in index_oids {
        // SAFETY: `index_oid` is one of the store's indexes, opened RowExclusive as its table is;
        // BuildIndexInfo palloc's its key description in the current memory context.
        let (index, info) = unsafe {
            let index = pg_sys::index_open(index_oid, pg_sys::RowExclusiveLock as i32);
            (index, pg_sys::BuildIndexInfo(index))
        };
        // SAFETY: `info` was just built by BuildIndexInfo for `index`; its key count and attnums are plain fields.
        let (nkeys, key_attnums) = unsafe { ((*info).ii_NumIndexAttrs as usize, (*info).ii_IndexAttrNumbers) };
        let mut ivalues = vec![pg_sys::Datum::from(0); nkeys];
        let mut inulls = vec![false; nkeys];
        for k in 0..nkeys {
            let attnum = key_attnums[k] as usize;
            ivalues[k] = values[attnum - 1];
            inulls[k] = nulls[attnum - 1];
        }
        // SAFETY: `tuple` was inserted above, so t_self is its new TID; the key arrays hold `nkeys` entries for
        // `index`, which is closed here with its RowExclusive lock kept to the transaction's end.
        unsafe {
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
    }
    // SAFETY: `tuple` is the palloc'd tuple heap_form_tuple made above; heap and indexes hold copies, nothing refers to it.
    unsafe { pg_sys::heap_freetuple(tuple) };
}

/// Re-writes an existing bucket row with other meta values (UPDATE of the
/// series identity): the payload is carried over as it is, never decoded.
/// The new version gets an id of its own, so that a fetch by TID under any
/// snapshot (SnapshotAny included) finds exactly the version the TID came from.
///
/// # Safety
/// As `write_bucket`; `old` must come from `store`.
pub unsafe fn relabel_bucket(store: pg_sys::Relation, config: &Config, shape: &TableShape, old: &StoredBucket, meta: &[Option<Vec<u8>>]) -> i64 {
    let mut values = old.values.clone();
    let mut nulls = old.nulls.clone();
    // SAFETY: as write_bucket's contract, which relabel_bucket shares: `store` is `config`'s open store, locked RowExclusive.
    let id = unsafe { allocate_id(store, config) };
    values[COL_BUCKET_ID] = pg_sys::Datum::from(id);
    // SAFETY: `meta` holds the new meta values' identifying bytes, one per meta column of `shape`.
    unsafe { set_meta(&mut values, &mut nulls, meta, shape.meta_attrs()) };
    // SAFETY: `values`/`nulls` are `old`'s full store row (one entry per attribute) with a new id and meta; its
    // by-reference values still point into memory `old` keeps alive for this call.
    unsafe { insert_tuple(store, &mut values, &mut nulls, pg_sys::GetCurrentCommandId(true)) };
    id
}
