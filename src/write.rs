//! The write path: a per-backend catalog of open buckets (one per table x meta
//! value x window x subtransaction) that rows are appended to, and the rules
//! that close a bucket and write it to the store.
//!
//! Buckets are written at the end of each statement, so a later statement (or
//! another session after commit) finds every row in the store, and a scan
//! never has to look at memory. A bucket only ever holds rows of one
//! subtransaction, so ROLLBACK TO SAVEPOINT discards exactly its own rows.

use crate::catalog::{self, Config};
use crate::datum;
use crate::error::{ts_error, NOT_NULL_VIOLATION};
use crate::gucs;
use crate::shape::{Attr, TableShape};
use crate::store::{self, CloseReason, NewBucket};
use pgrx::pg_sys;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use tsbucket_format::stats::{column_stats, encode_stats};
use tsbucket_format::window::pg_window_start;
use tsbucket_format::{encode_bucket, Column};

#[derive(Clone, PartialEq, Eq, Hash)]
struct BucketKey {
    meta: Vec<u8>,
    window_start: i64,
    subxid: u32,
}

struct OpenBucket {
    bucket_id: i64,
    window_start: i64,
    meta: Vec<Option<Vec<u8>>>,
    subxid: u32,
    /// One per payload attribute, in shape order.
    columns: Vec<Column>,
    rows: usize,
    bytes: usize,
    meta_bytes: usize,
    min_time: i64,
    max_time: i64,
}

struct TableBuffer {
    config: Rc<Config>,
    shape: Rc<TableShape>,
    open: HashMap<BucketKey, OpenBucket>,
    /// Closed but not yet written (see `reassign_subxact`).
    closed: Vec<OpenBucket>,
    /// Window of the newest open bucket per (meta, subxact): an older one closes
    /// when a newer window opens, as MongoDB closes buckets on time.
    newest_window: HashMap<(Vec<u8>, u32), i64>,
}

#[derive(Default)]
struct WriteBuffer {
    tables: HashMap<pg_sys::Oid, TableBuffer>,
    bytes: usize,
}

thread_local! {
    static BUFFER: RefCell<WriteBuffer> = RefCell::new(WriteBuffer::default());
}

fn current_subxid() -> u32 {
    unsafe { pg_sys::GetCurrentSubTransactionId() }
}

/// Identifying bytes of the meta values: the bucket key and the store's meta columns.
unsafe fn meta_of(shape: &TableShape, values: &[pg_sys::Datum], nulls: &[bool]) -> (Vec<u8>, Vec<Option<Vec<u8>>>) {
    let mut key = Vec::new();
    let mut metas = Vec::new();
    for attr in shape.meta_attrs() {
        let i = attr.attnum as usize - 1;
        if nulls[i] {
            key.push(0);
            metas.push(None);
        } else {
            let bytes = unsafe { datum::datum_bytes(values[i], attr) }.to_vec();
            key.push(1);
            key.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
            key.extend_from_slice(&bytes);
            metas.push(Some(bytes));
        }
    }
    (key, metas)
}

unsafe fn value_size(attr: &Attr, value: pg_sys::Datum) -> usize {
    match attr.typlen {
        -1 => unsafe { pg_sys::toast_raw_datum_size(value) },
        -2 => unsafe { std::ffi::CStr::from_ptr(value.cast_mut_ptr::<std::ffi::c_char>()).to_bytes().len() + 1 },
        n => (n as usize).max(1),
    }
}

/// Appends the slot's row to its open bucket and gives the slot its TID.
///
/// Calls into Postgres (SPI, nextval, writes) happen only while BUFFER is not
/// borrowed: they can run statements whose ExecutorFinish flushes buffers.
///
/// # Safety
/// `rel` must be an open tsbucket table and `slot` hold a row of it.
pub unsafe fn insert_row(rel: pg_sys::Relation, slot: *mut pg_sys::TupleTableSlot) {
    unsafe {
        let relid = (*rel).rd_id;
        let natts = (*(*rel).rd_att).natts as usize;
        pg_sys::slot_getallattrs(slot);
        let values = std::slice::from_raw_parts((*slot).tts_values, natts);
        let nulls = std::slice::from_raw_parts((*slot).tts_isnull, natts);

        let known = BUFFER.with(|b| b.borrow().tables.get(&relid).map(|t| (t.config.clone(), t.shape.clone())));
        let (config, shape) = match known {
            Some(pair) => pair,
            None => {
                let config = catalog::require(relid);
                let shape = Rc::new(TableShape::new((*rel).rd_att, &config));
                BUFFER.with(|b| {
                    b.borrow_mut().tables.insert(
                        relid,
                        TableBuffer {
                            config: config.clone(),
                            shape: shape.clone(),
                            open: HashMap::new(),
                            closed: Vec::new(),
                            newest_window: HashMap::new(),
                        },
                    )
                });
                (config, shape)
            }
        };

        let time_idx = config.time_attnum as usize - 1;
        if nulls[time_idx] {
            let name = crate::shape::attr_name(rel, config.time_attnum);
            ts_error(
                NOT_NULL_VIOLATION,
                &format!("null value in time column \"{name}\" of time-series table \"{}\"", catalog::relation_name(relid)),
                "Every row of a time-series table needs a time.",
            );
        }
        let time = values[time_idx].value() as i64;
        let window_start = pg_window_start(time, config.span_micros);
        let (meta_key, metas) = meta_of(&shape, values, nulls);
        let subxid = current_subxid();
        let key = BucketKey { meta: meta_key.clone(), window_start, subxid };

        let mut row_bytes = 0usize;
        for attr in shape.payload_attrs() {
            let i = attr.attnum as usize - 1;
            row_bytes += if nulls[i] { 1 } else { value_size(attr, values[i]) };
        }
        let meta_bytes: usize = metas.iter().map(|m| m.as_ref().map_or(1, |b| b.len())).sum();

        // Close what this row would overflow, and older windows of the series.
        let (closing, needs_bucket) = BUFFER.with(|b| {
            let mut buffer = b.borrow_mut();
            let table = buffer.tables.get_mut(&relid).expect("registered above");
            let mut to_close: Vec<(BucketKey, CloseReason)> = Vec::new();
            if let Some(open) = table.open.get(&key) {
                if open.rows >= gucs::bucket_max_count() {
                    to_close.push((key.clone(), CloseReason::Count));
                } else if open.rows > 0 && open.bytes + row_bytes > gucs::bucket_max_size() {
                    to_close.push((key.clone(), CloseReason::Size));
                }
            } else if let Some(&newest) = table.newest_window.get(&(meta_key.clone(), subxid))
                && newest < window_start
            {
                to_close.push((BucketKey { meta: meta_key.clone(), window_start: newest, subxid }, CloseReason::TimeWindow));
            }
            let newest = table.newest_window.entry((meta_key, subxid)).or_insert(window_start);
            *newest = (*newest).max(window_start);
            let closing: Vec<(OpenBucket, CloseReason)> =
                to_close.into_iter().filter_map(|(k, reason)| table.open.remove(&k).map(|b| (b, reason))).collect();
            let needs_bucket = !table.open.contains_key(&key);
            buffer.bytes -= closing.iter().map(|(b, _)| b.bytes).sum::<usize>();
            (closing, needs_bucket)
        });
        for (bucket, reason) in closing {
            flush_bucket(&config, &shape, bucket, reason);
        }
        let new_id = needs_bucket.then(|| store::next_bucket_id(config.id_sequence));

        let (bucket_id, row) = BUFFER.with(|b| {
            let mut buffer = b.borrow_mut();
            let table = buffer.tables.get_mut(&relid).expect("registered above");
            let bucket = table.open.entry(key).or_insert_with(|| OpenBucket {
                bucket_id: new_id.expect("allocated when the bucket was missing"),
                window_start,
                meta: metas,
                subxid,
                columns: shape.payload_attrs().map(|a| Column::new(a.attnum, a.kind)).collect(),
                rows: 0,
                bytes: 0,
                meta_bytes: 0,
                min_time: time,
                max_time: time,
            });
            for (col, attr) in bucket.columns.iter_mut().zip(shape.payload_attrs()) {
                let i = attr.attnum as usize - 1;
                if nulls[i] {
                    col.push_null();
                } else {
                    datum::push_datum(col, attr, values[i]);
                }
            }
            let row = bucket.rows;
            bucket.rows += 1;
            bucket.bytes += row_bytes;
            bucket.meta_bytes += meta_bytes;
            bucket.min_time = bucket.min_time.min(time);
            bucket.max_time = bucket.max_time.max(time);
            let id = bucket.bucket_id;
            buffer.bytes += row_bytes;
            (id, row)
        });

        crate::tid::set(&mut (*slot).tts_tid, bucket_id, row);
        (*slot).tts_tableOid = relid;
        enforce_memory_limit();
    }
}

/// Writes the fullest buckets of the current subtransaction until the buffer
/// is back under half its limit.
fn enforce_memory_limit() {
    let limit = gucs::catalog_memory_limit_bytes();
    if BUFFER.with(|b| b.borrow().bytes) <= limit {
        return;
    }
    let subxid = current_subxid();
    let work: Vec<(Rc<Config>, Rc<TableShape>, OpenBucket)> = BUFFER.with(|b| {
        let mut buffer = b.borrow_mut();
        let mut candidates: Vec<(usize, pg_sys::Oid, BucketKey)> = buffer
            .tables
            .iter()
            .flat_map(|(relid, t)| t.open.iter().filter(|(k, _)| k.subxid == subxid).map(|(k, o)| (o.bytes, *relid, k.clone())))
            .collect();
        candidates.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.2.window_start.cmp(&b.2.window_start)));
        let mut out = Vec::new();
        for (_, relid, key) in candidates {
            if buffer.bytes <= limit / 2 {
                break;
            }
            let table = buffer.tables.get_mut(&relid).expect("present");
            let bucket = table.open.remove(&key).expect("present");
            out.push((table.config.clone(), table.shape.clone(), bucket));
            buffer.bytes -= out.last().expect("pushed").2.bytes;
        }
        out
    });
    for (config, shape, bucket) in work {
        flush_bucket(&config, &shape, bucket, CloseReason::MemoryLimit);
    }
}

fn flush_bucket(config: &Config, shape: &TableShape, bucket: OpenBucket, reason: CloseReason) {
    let payload = encode_bucket(bucket.rows, &bucket.columns);
    let stats: Vec<_> = bucket.columns.iter().filter_map(column_stats).collect();
    let stats = encode_stats(&stats);
    let meta_attrs = shape.meta_attrs();
    unsafe {
        let store = pg_sys::table_open(config.store_relid, pg_sys::RowExclusiveLock as i32);
        store::insert_bucket(
            store,
            &NewBucket {
                bucket_id: bucket.bucket_id,
                window_start: bucket.window_start,
                min_time: bucket.min_time,
                max_time: bucket.max_time,
                rows: bucket.rows as i32,
                uncompressed_bytes: (bucket.bytes + bucket.meta_bytes) as i64,
                close_reason: reason,
                stats: &stats,
                payload: &payload,
                meta: &bucket.meta,
            },
            &meta_attrs,
        );
        pg_sys::table_close(store, pg_sys::NoLock as i32);
    }
}

/// Writes every open bucket of the current subtransaction (of one table, or all).
pub fn flush(relid: Option<pg_sys::Oid>, reason: CloseReason) {
    let subxid = current_subxid();
    let work: Vec<(Rc<Config>, Rc<TableShape>, OpenBucket)> = BUFFER.with(|b| {
        let mut buffer = b.borrow_mut();
        let mut out = Vec::new();
        let mut freed = 0;
        for (id, table) in buffer.tables.iter_mut() {
            if relid.is_some_and(|r| r != *id) {
                continue;
            }
            let keys: Vec<BucketKey> = table.open.keys().filter(|k| k.subxid == subxid).cloned().collect();
            let mut buckets: Vec<OpenBucket> = keys.iter().map(|k| table.open.remove(k).expect("present")).collect();
            let (mine, others): (Vec<_>, Vec<_>) = table.closed.drain(..).partition(|b| b.subxid == subxid);
            table.closed = others;
            buckets.extend(mine);
            for bucket in buckets {
                freed += bucket.bytes;
                out.push((table.config.clone(), table.shape.clone(), bucket));
            }
            table.newest_window.retain(|(_, s), _| *s != subxid);
        }
        buffer.bytes -= freed;
        buffer.tables.retain(|_, t| !t.open.is_empty() || !t.closed.is_empty());
        // Allocation order: deterministic, and keeps the store in time order per load.
        out.sort_by_key(|(_, _, b)| b.bucket_id);
        out
    });
    for (config, shape, bucket) in work {
        flush_bucket(&config, &shape, bucket, reason);
    }
}

/// ROLLBACK (TO SAVEPOINT): forget the rows of the aborted subtransaction.
pub fn discard_subxact(subxid: u32) {
    BUFFER.with(|b| {
        let mut buffer = b.borrow_mut();
        let mut freed = 0;
        for table in buffer.tables.values_mut() {
            table.open.retain(|k, o| {
                let keep = k.subxid != subxid;
                if !keep {
                    freed += o.bytes;
                }
                keep
            });
            table.closed.retain(|o| {
                let keep = o.subxid != subxid;
                if !keep {
                    freed += o.bytes;
                }
                keep
            });
            table.newest_window.retain(|(_, s), _| *s != subxid);
        }
        buffer.bytes -= freed;
        buffer.tables.retain(|_, t| !t.open.is_empty() || !t.closed.is_empty());
    });
}

/// RELEASE SAVEPOINT: the child's open buckets now belong to the parent.
/// Nothing may be written here (the subtransaction is half gone), so a parent
/// bucket under the same key is set aside and written at the parent's next flush.
pub fn reassign_subxact(child: u32, parent: u32) {
    BUFFER.with(|b| {
        let mut buffer = b.borrow_mut();
        for table in buffer.tables.values_mut() {
            let moved: Vec<BucketKey> = table.open.keys().filter(|k| k.subxid == child).cloned().collect();
            for k in moved {
                let mut bucket = table.open.remove(&k).expect("present");
                bucket.subxid = parent;
                let key = BucketKey { subxid: parent, ..k };
                if let Some(existing) = table.open.remove(&key) {
                    table.closed.push(existing);
                }
                table.open.insert(key, bucket);
            }
            for bucket in table.closed.iter_mut().filter(|b| b.subxid == child) {
                bucket.subxid = parent;
            }
            table.newest_window = table
                .newest_window
                .drain()
                .map(|((m, s), w)| ((m, if s == child { parent } else { s }), w))
                .collect();
        }
    });
}

/// Transaction end: nothing buffered may survive it.
pub fn discard_all() {
    BUFFER.with(|b| *b.borrow_mut() = WriteBuffer::default());
}

/// TRUNCATE: rows buffered for the table are gone with the table's contents.
pub fn discard_table(relid: pg_sys::Oid) {
    BUFFER.with(|b| {
        let mut buffer = b.borrow_mut();
        if let Some(t) = buffer.tables.remove(&relid) {
            let freed: usize = t.open.values().chain(t.closed.iter()).map(|o| o.bytes).sum();
            buffer.bytes -= freed;
        }
    });
}
