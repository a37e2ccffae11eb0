//! Appending a row to its open bucket, and the rules that close a bucket:
//! full by count or size, a newer window of the series opening, the memory
//! limit.

use crate::catalog::config::{self, Config};
use crate::catalog::gucs;
use crate::catalog::shape::{Attr, TableShape};
use crate::pg::datum;
use crate::pg::error::{DATETIME_FIELD_OVERFLOW, NOT_NULL_VIOLATION, ts_error};
use crate::store::bucket::CloseReason;
use crate::write::buffer::{BUFFER, KEY, Meta, OpenBucket, Owner, Series, TableBuffer, current_subxid, take_buckets};
use super::flush::{flush_bucket, new_bucket_id, write_all};
use pgrx::pg_sys;
use std::rc::Rc;
use tsbucket_format::Column;
use tsbucket_format::window::pg_window_start;

/// The series key of a row: its meta values' identifying bytes, length-prefixed.
///
/// # Safety
/// `values`/`nulls` must be a row of the table `shape` describes.
unsafe fn series_key(shape: &TableShape, values: &[pg_sys::Datum], nulls: &[bool], key: &mut Vec<u8>) {
    key.clear();
    for attr in shape.meta_attrs() {
        let i = attr.attnum as usize - 1;
        if nulls[i] {
            key.push(0);
        } else {
            // SAFETY: values[i] is the row's non-NULL datum of meta attribute `attr`'s type (series_key's
            // contract); its bytes are copied into `key` before the row changes.
            let bytes = unsafe { datum::datum_bytes(&values[i], attr.layout()) };
            key.push(1);
            key.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
            key.extend_from_slice(bytes);
        }
    }
}

/// # Safety
/// As `series_key`.
unsafe fn meta_values(shape: &TableShape, values: &[pg_sys::Datum], nulls: &[bool]) -> Meta {
    shape
        .meta_attrs()
        .iter()
        .map(|attr| {
            let i = attr.attnum as usize - 1;
            // SAFETY: a non-NULL values[i] of the inserted row is a datum of meta attribute `attr`'s type
            // (meta_values's contract); to_vec copies its bytes into the series' own memory.
            (!nulls[i]).then(|| unsafe { datum::datum_bytes(&values[i], attr.layout()) }.to_vec())
        })
        .collect()
}

/// # Safety
/// `value` must be a non-NULL datum of `attr`'s type.
unsafe fn value_size(attr: &Attr, value: pg_sys::Datum) -> usize {
    match attr.typlen {
        // SAFETY: with typlen -1 `value` is a varlena datum of `attr`'s type (value_size's contract).
        -1 => unsafe { datum::varlena_size(value) },
        // SAFETY: with typlen -2 `value` points to a NUL-terminated C string of `attr`'s type.
        -2 => unsafe { std::ffi::CStr::from_ptr(value.cast_mut_ptr::<std::ffi::c_char>()).to_bytes().len() + 1 },
        n => (n as usize).max(1),
    }
}

/// What appending a row came to: the row went in, or buckets must be written first.
enum Step {
    /// Bucket id, row index, and whether the buffer is now over its memory limit.
    Appended(i64, usize, bool),
    /// Buckets to write before the row can go in.
    Close(Vec<(OpenBucket, CloseReason)>),
}

/// Appends the slot's row to its open bucket and gives the slot its TID.
///
/// # Safety
/// `rel` must be an open tsbucket table and `slot` hold a row of it.
pub unsafe fn insert_row(rel: pg_sys::Relation, slot: *mut pg_sys::TupleTableSlot, cid: pg_sys::CommandId) {
    // SAFETY: `rel` is an open tsbucket table and `slot` holds a row of it (insert_row's contract):
    // slot_getallattrs fills the slot's own tts_values/tts_isnull arrays of natts entries, which nothing
    // changes while this function reads them.
    let (relid, values, nulls) = unsafe {
        let relid = (*rel).rd_id;
        let natts = (*(*rel).rd_att).natts as usize;
        pg_sys::slot_getallattrs(slot);
        (relid, std::slice::from_raw_parts((*slot).tts_values, natts), std::slice::from_raw_parts((*slot).tts_isnull, natts))
    };

    // SAFETY: `rel` is the open table the row goes into, whose descriptor table_of reads.
    let (config, shape) = unsafe { table_of(rel) };
    let time_idx = config.time_attnum as usize - 1;
    if nulls[time_idx] {
        // SAFETY: `rel` is the open table the row goes into; its configured time column is one of its columns.
        let name = unsafe { crate::pg::relation::attr_name(rel, config.time_attnum) };
        ts_error(
            NOT_NULL_VIOLATION,
            &format!("null value in time column \"{name}\" of time-series table \"{}\"", crate::pg::relation::relation_name(relid)),
            "Every row of a time-series table needs a time.",
        );
    }
    let time = values[time_idx].value() as i64;
    if time == i64::MIN || time == i64::MAX {
        // SAFETY: as for the NULL check above: `rel`'s time column, named for the infinity error.
        let name = unsafe { crate::pg::relation::attr_name(rel, config.time_attnum) };
        ts_error(
            DATETIME_FIELD_OVERFLOW,
            &format!("time column \"{name}\" of time-series table \"{}\" cannot be infinity", crate::pg::relation::relation_name(relid)),
            "A row belongs to the window of its time; infinity has none. Use a finite time.",
        );
    }
    let window_start = pg_window_start(time, config.span_micros);
    let owner = Owner { subxid: current_subxid(), cid };
    // What the row takes in memory, and what it counts toward its bucket's size limit: less for a document
    // held inline, whose keys and entries a bucket stores once per key (jsonb::bucket_size).
    let (mut row_bytes, mut row_size) = (0usize, 0usize);
    for attr in shape.payload_attrs() {
        let i = attr.attnum as usize - 1;
        if nulls[i] {
            row_bytes += 1;
            row_size += 1;
            continue;
        }
        // SAFETY: values[i] is the slot's non-NULL datum (nulls[i] checked) of payload attribute `attr`'s type.
        let bytes = unsafe { value_size(attr, values[i]) };
        row_bytes += bytes;
        row_size += if attr.kind == tsbucket_format::ColumnKind::Document {
            // SAFETY: as above: a jsonb datum, read in place when it is inline and uncompressed.
            unsafe { datum::inline_bytes(values[i]) }.map_or(bytes, |b| tsbucket_format::jsonb::bucket_size(b) + 4)
        } else {
            bytes
        };
    }
    let mut key = KEY.with(|k| std::mem::take(&mut *k.borrow_mut()));
    // SAFETY: `values`/`nulls` are the inserted row of the table `shape` was built for (table_of above).
    unsafe { series_key(&shape, values, nulls, &mut key) };

    let memory_limit = gucs::catalog_memory_limit_bytes();
    let (bucket_id, row, over_limit) = loop {
        let step = BUFFER.with(|b| {
            let mut buffer = b.borrow_mut();
            let buffer = &mut *buffer;
            // (A write of closed buckets below runs SQL, whose statement end may prune
            // the buffer's empty registrations, this table's among them: it comes back.)
            let table = buffer.tables.entry(relid).or_insert_with(|| TableBuffer::new(config.clone(), shape.clone()));
            let series = match table.series.get_mut(key.as_slice()) {
                Some(s) => s,
                None => {
                    // SAFETY: the inserted row of `shape`'s table, as for series_key above; only Rust memory is touched.
                    let meta = Rc::new(unsafe { meta_values(&shape, values, nulls) });
                    let meta_bytes_per_row = meta.iter().map(|m| m.as_ref().map_or(1, Vec::len)).sum();
                    table.series.entry(key.clone()).or_insert(Series { meta, meta_bytes_per_row, open: Vec::new(), newest: Vec::new(), touched: false })
                }
            };
            if !series.touched {
                series.touched = true;
                table.touched.push(key.clone());
            }
            let mut found = series.open.iter().position(|o| o.window_start == window_start && o.owner == owner);
            if found.is_none() {
                // A bucket an earlier statement of this subtransaction left open takes the row and is ours now.
                found = series.open.iter().position(|o| {
                    o.window_start == window_start && o.open_across && o.owner.subxid == owner.subxid && o.owner.cid <= owner.cid
                });
                if let Some(i) = found {
                    series.open[i].owner = owner;
                    series.open[i].open_across = false;
                    match series.newest.iter_mut().find(|(o, _)| *o == owner) {
                        Some(entry) => entry.1 = entry.1.max(window_start),
                        None => series.newest.push((owner, window_start)),
                    }
                }
            }
            let mut close = Vec::new();
            match found {
                Some(i) if series.open[i].rows >= gucs::bucket_max_count() => {
                    close.push((series.open.swap_remove(i), CloseReason::Count));
                }
                Some(i) if series.open[i].rows > 0 && series.open[i].size + row_size > gucs::bucket_max_size() => {
                    close.push((series.open.swap_remove(i), CloseReason::Size));
                }
                Some(i) => {
                    let bucket = &mut series.open[i];
                    // SAFETY: the inserted row of `shape`'s table goes into its series' open bucket of this window.
                    unsafe { append(bucket, &shape, values, nulls, (row_bytes, row_size), series.meta_bytes_per_row) };
                    buffer.bytes += row_bytes;
                    return Step::Appended(bucket.bucket_id, bucket.rows - 1, buffer.bytes > memory_limit);
                }
                None => {
                    let newest = series.newest.iter().find(|(o, _)| *o == owner).map(|(_, w)| *w);
                    if let Some(w) = newest.filter(|w| *w < window_start)
                        && let Some(i) = series.open.iter().position(|o| o.window_start == w && o.owner == owner)
                    {
                        close.push((series.open.swap_remove(i), CloseReason::TimeWindow));
                    }
                    // Buckets earlier statements left open for older windows close as the series moves on.
                    while let Some(i) = series
                        .open
                        .iter()
                        .position(|o| o.open_across && o.owner.subxid == owner.subxid && o.owner.cid <= owner.cid && o.window_start < window_start)
                    {
                        close.push((series.open.swap_remove(i), CloseReason::TimeWindow));
                    }
                }
            }
            match series.newest.iter_mut().find(|(o, _)| *o == owner) {
                Some(entry) => entry.1 = entry.1.max(window_start),
                None => series.newest.push((owner, window_start)),
            }
            if close.is_empty() {
                // (A provisional id, drawn without SQL: the row goes in on this pass.)
                let bucket_id = new_bucket_id();
                let mut bucket = OpenBucket {
                    bucket_id,
                    window_start,
                    owner,
                    meta: series.meta.clone(),
                    columns: shape.payload_attrs().map(|a| Column::new(a.attnum, a.kind)).collect(),
                    rows: 0,
                    bytes: 0,
                    size: 0,
                    meta_bytes: 0,
                    open_across: false,
                };
                // SAFETY: the inserted row of `shape`'s table starts the new bucket with the id drawn for it.
                unsafe { append(&mut bucket, &shape, values, nulls, (row_bytes, row_size), series.meta_bytes_per_row) };
                series.open.push(bucket);
                buffer.bytes += row_bytes;
                return Step::Appended(bucket_id, 0, buffer.bytes > memory_limit);
            }
            buffer.bytes -= close.iter().map(|(b, _)| b.bytes).sum::<usize>();
            Step::Close(close)
        });
        match step {
            Step::Appended(id, row, over) => break (id, row, over),
            Step::Close(close) => {
                for (bucket, reason) in close {
                    flush_bucket(&config, &shape, bucket, reason);
                }
            }
        }
    };
    KEY.with(|k| *k.borrow_mut() = key);

    // SAFETY: `slot` is the caller's slot holding the inserted row (insert_row's contract); its TID and table
    // oid are the slot's own fields.
    unsafe {
        crate::store::tid::set(&mut (*slot).tts_tid, bucket_id, row);
        (*slot).tts_tableOid = relid;
    }
    if over_limit {
        enforce_memory_limit();
    }
}

/// # Safety
/// `values`/`nulls` must be a row of the table `shape` describes.
unsafe fn append(
    bucket: &mut OpenBucket,
    shape: &TableShape,
    values: &[pg_sys::Datum],
    nulls: &[bool],
    (row_bytes, row_size): (usize, usize),
    meta_bytes: usize,
) {
    for (col, attr) in bucket.columns.iter_mut().zip(shape.payload_attrs()) {
        let i = attr.attnum as usize - 1;
        if nulls[i] {
            col.push_null();
        } else {
            // SAFETY: values[i] is the row's non-NULL datum of payload attribute `attr`'s type (append's contract).
            unsafe { datum::push_datum(col, attr.layout(), values[i]) };
        }
    }
    bucket.rows += 1;
    bucket.bytes += row_bytes;
    bucket.size += row_size;
    bucket.meta_bytes += meta_bytes;
}

/// The table's configuration and shape, registering the table in the buffer.
///
/// # Safety
/// `rel` must be an open tsbucket table.
unsafe fn table_of(rel: pg_sys::Relation) -> (Rc<Config>, Rc<TableShape>) {
    // SAFETY: `rel` is an open tsbucket table (table_of's contract), so its relcache entry is readable.
    let relid = unsafe { (*rel).rd_id };
    if let Some((config, shape)) = BUFFER.with(|b| b.borrow().tables.get(&relid).map(|t| (t.config.clone(), t.shape.clone()))) {
        // The table stays registered across transactions: its configuration
        // may have changed since (the cache gives a new one after an invalidation).
        let current = config::require(relid);
        // SAFETY: as above: the open table's descriptor, whose attributes 0..natts exist.
        let same = (Rc::ptr_eq(&current, &config) || current == config) && unsafe {
            let tupdesc = (*rel).rd_att;
            let natts = (*tupdesc).natts as usize;
            natts == shape.attrs.len()
                && (0..natts).all(|i| (*crate::pg::relation::tuple_desc_attr(tupdesc, i)).attisdropped == (shape.attrs[i].role == crate::catalog::shape::Role::Dropped))
        };
        if same {
            return (config, shape);
        }
        // Its columns or configuration changed since its rows were buffered (a
        // DDL command in a function the INSERT runs): those rows are written as
        // they are first.
        super::flush::flush_table(relid);
    }
    let config = config::require(relid);
    // SAFETY: rd_att of the open `rel` is the valid descriptor of the table `config` describes, as TableShape::new needs.
    let shape = Rc::new(unsafe { TableShape::new((*rel).rd_att, &config) });
    BUFFER.with(|b| {
        b.borrow_mut().tables.insert(relid, TableBuffer::new(config.clone(), shape.clone()))
    });
    (config, shape)
}

/// Writes the fullest buckets of the current subtransaction until the buffer
/// is back under half its limit.
fn enforce_memory_limit() {
    let limit = gucs::catalog_memory_limit_bytes();
    if BUFFER.with(|b| b.borrow().bytes) <= limit {
        return;
    }
    let subxid = current_subxid();
    let work = BUFFER.with(|b| {
        let mut buffer = b.borrow_mut();
        let buffer = &mut *buffer;
        let mut sizes: Vec<(usize, i64)> = buffer
            .tables
            .values()
            .flat_map(|t| t.series.values().flat_map(|s| s.open.iter()))
            .filter(|o| o.owner.subxid == subxid)
            .map(|o| (o.bytes, o.bucket_id))
            .collect();
        sizes.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut to_free = buffer.bytes.saturating_sub(limit / 2);
        let mut chosen = Vec::new();
        for (bytes, id) in sizes {
            if to_free == 0 {
                break;
            }
            chosen.push(id);
            to_free = to_free.saturating_sub(bytes);
        }
        take_buckets(buffer, None, |o| chosen.contains(&o.bucket_id), false)
    });
    write_all(work, CloseReason::MemoryLimit);
}
