//! The write path: a per-backend catalog of open buckets (one per table x
//! series x window x subtransaction) that rows are appended to, and the rules
//! that close a bucket and write it to the store.
//!
//! Buckets are written at the end of each statement, so a later statement (or
//! another session after commit) finds every row in the store, and a scan
//! never has to look at memory. A bucket only ever holds rows of one
//! subtransaction, so ROLLBACK TO SAVEPOINT discards exactly its own rows.
//!
//! Calls into Postgres that can run statements (SPI, nextval, writes, whose
//! ExecutorFinish flushes buffers) are made only while BUFFER is not borrowed.

use crate::catalog::{self, Config};
use crate::datum;
use crate::error::{ts_error, DATETIME_FIELD_OVERFLOW, NOT_NULL_VIOLATION};
use crate::gucs;
use crate::shape::{Attr, TableShape};
use crate::store::{self, BucketContent, CloseReason};
use pgrx::pg_sys;
use rustc_hash::FxHashMap as HashMap;
use std::cell::RefCell;
use std::rc::Rc;
use tsbucket_format::window::pg_window_start;
use tsbucket_format::Column;

/// Meta values of a series: identifying bytes per meta column, None for NULL.
type Meta = Vec<Option<Vec<u8>>>;

/// Who wrote a bucket's rows: a bucket only ever holds rows of one
/// subtransaction (so ROLLBACK TO SAVEPOINT discards exactly its rows) and of
/// one command (so a statement nested in a trigger or function flushes only
/// its own rows at its end, never the outer statement's).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Owner {
    subxid: u32,
    cid: u32,
}

struct OpenBucket {
    bucket_id: i64,
    window_start: i64,
    owner: Owner,
    meta: Rc<Meta>,
    /// One per payload attribute, in shape order.
    columns: Vec<Column>,
    rows: usize,
    bytes: usize,
    meta_bytes: usize,
}

/// The open buckets of one series (usually one: the current window).
struct Series {
    meta: Rc<Meta>,
    meta_bytes_per_row: usize,
    open: Vec<OpenBucket>,
    /// Newest window per owner: an older window's bucket closes when a
    /// newer one opens, as MongoDB closes buckets on time.
    newest: Vec<(Owner, i64)>,
}

struct TableBuffer {
    config: Rc<Config>,
    shape: Rc<TableShape>,
    series: HashMap<Vec<u8>, Series>,
    /// Closed but not yet written (see `reassign_subxact`).
    closed: Vec<OpenBucket>,
}

#[derive(Default)]
struct WriteBuffer {
    tables: HashMap<pg_sys::Oid, TableBuffer>,
    bytes: usize,
}

thread_local! {
    static BUFFER: RefCell<WriteBuffer> = RefCell::new(WriteBuffer::default());
    static KEY: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

fn current_subxid() -> u32 {
    unsafe { pg_sys::GetCurrentSubTransactionId() }
}

/// The series key of a row: its meta values' identifying bytes, length-prefixed.
unsafe fn series_key(shape: &TableShape, values: &[pg_sys::Datum], nulls: &[bool], key: &mut Vec<u8>) {
    key.clear();
    for attr in shape.meta_attrs() {
        let i = attr.attnum as usize - 1;
        if nulls[i] {
            key.push(0);
        } else {
            let bytes = unsafe { datum::datum_bytes(&values[i], attr) };
            key.push(1);
            key.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
            key.extend_from_slice(bytes);
        }
    }
}

unsafe fn meta_values(shape: &TableShape, values: &[pg_sys::Datum], nulls: &[bool]) -> Meta {
    shape
        .meta_attrs()
        .iter()
        .map(|attr| {
            let i = attr.attnum as usize - 1;
            (!nulls[i]).then(|| unsafe { datum::datum_bytes(&values[i], attr) }.to_vec())
        })
        .collect()
}

unsafe fn value_size(attr: &Attr, value: pg_sys::Datum) -> usize {
    match attr.typlen {
        -1 => unsafe { datum::varlena_size(value) },
        -2 => unsafe { std::ffi::CStr::from_ptr(value.cast_mut_ptr::<std::ffi::c_char>()).to_bytes().len() + 1 },
        n => (n as usize).max(1),
    }
}

/// What appending a row needs first: buckets to write, a new bucket id.
enum Step {
    /// Bucket id, row index, and whether the buffer is now over its memory limit.
    Appended(i64, usize, bool),
    Prepare { close: Vec<(OpenBucket, CloseReason)>, new_bucket: bool },
}

/// Appends the slot's row to its open bucket and gives the slot its TID.
///
/// # Safety
/// `rel` must be an open tsbucket table and `slot` hold a row of it.
pub unsafe fn insert_row(rel: pg_sys::Relation, slot: *mut pg_sys::TupleTableSlot, cid: pg_sys::CommandId) {
    unsafe {
        let relid = (*rel).rd_id;
        let natts = (*(*rel).rd_att).natts as usize;
        pg_sys::slot_getallattrs(slot);
        let values = std::slice::from_raw_parts((*slot).tts_values, natts);
        let nulls = std::slice::from_raw_parts((*slot).tts_isnull, natts);

        let (config, shape) = table_of(rel);
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
        if time == i64::MIN || time == i64::MAX {
            let name = crate::shape::attr_name(rel, config.time_attnum);
            ts_error(
                DATETIME_FIELD_OVERFLOW,
                &format!("time column \"{name}\" of time-series table \"{}\" cannot be infinity", catalog::relation_name(relid)),
                "A row belongs to the window of its time; infinity has none. Use a finite time.",
            );
        }
        let window_start = pg_window_start(time, config.span_micros);
        let owner = Owner { subxid: current_subxid(), cid };
        let mut row_bytes = 0usize;
        for attr in shape.payload_attrs() {
            let i = attr.attnum as usize - 1;
            row_bytes += if nulls[i] { 1 } else { value_size(attr, values[i]) };
        }
        let mut key = KEY.with(|k| std::mem::take(&mut *k.borrow_mut()));
        series_key(&shape, values, nulls, &mut key);

        let mut new_id = None;
        let memory_limit = gucs::catalog_memory_limit_bytes();
        let (bucket_id, row, over_limit) = loop {
            let step = BUFFER.with(|b| {
                let mut buffer = b.borrow_mut();
                let buffer = &mut *buffer;
                let table = buffer.tables.get_mut(&relid).expect("registered by table_of");
                let series = match table.series.get_mut(key.as_slice()) {
                    Some(s) => s,
                    None => {
                        let meta = Rc::new(meta_values(&shape, values, nulls));
                        let meta_bytes_per_row = meta.iter().map(|m| m.as_ref().map_or(1, Vec::len)).sum();
                        table.series.entry(key.clone()).or_insert(Series { meta, meta_bytes_per_row, open: Vec::new(), newest: Vec::new() })
                    }
                };
                let found = series.open.iter().position(|o| o.window_start == window_start && o.owner == owner);
                let mut close = Vec::new();
                match found {
                    Some(i) if series.open[i].rows >= gucs::bucket_max_count() => {
                        close.push((series.open.swap_remove(i), CloseReason::Count));
                    }
                    Some(i) if series.open[i].rows > 0 && series.open[i].bytes + row_bytes > gucs::bucket_max_size() => {
                        close.push((series.open.swap_remove(i), CloseReason::Size));
                    }
                    Some(i) => {
                        let bucket = &mut series.open[i];
                        append(bucket, &shape, values, nulls, row_bytes, series.meta_bytes_per_row);
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
                    }
                }
                match series.newest.iter_mut().find(|(o, _)| *o == owner) {
                    Some(entry) => entry.1 = entry.1.max(window_start),
                    None => series.newest.push((owner, window_start)),
                }
                if close.is_empty()
                    && let Some(bucket_id) = new_id
                {
                    let mut bucket = OpenBucket {
                        bucket_id,
                        window_start,
                        owner,
                        meta: series.meta.clone(),
                        columns: shape.payload_attrs().map(|a| Column::new(a.attnum, a.kind)).collect(),
                        rows: 0,
                        bytes: 0,
                        meta_bytes: 0,
                    };
                    append(&mut bucket, &shape, values, nulls, row_bytes, series.meta_bytes_per_row);
                    series.open.push(bucket);
                    buffer.bytes += row_bytes;
                    return Step::Appended(bucket_id, 0, buffer.bytes > memory_limit);
                }
                buffer.bytes -= close.iter().map(|(b, _)| b.bytes).sum::<usize>();
                Step::Prepare { close, new_bucket: true }
            });
            match step {
                Step::Appended(id, row, over) => break (id, row, over),
                Step::Prepare { close, new_bucket } => {
                    for (bucket, reason) in close {
                        flush_bucket(&config, &shape, bucket, reason);
                    }
                    if new_bucket && new_id.is_none() {
                        new_id = Some(new_bucket_id(&config));
                    }
                }
            }
        };
        KEY.with(|k| *k.borrow_mut() = key);

        crate::tid::set(&mut (*slot).tts_tid, bucket_id, row);
        (*slot).tts_tableOid = relid;
        if over_limit {
            enforce_memory_limit();
        }
    }
}

unsafe fn append(
    bucket: &mut OpenBucket,
    shape: &TableShape,
    values: &[pg_sys::Datum],
    nulls: &[bool],
    row_bytes: usize,
    meta_bytes: usize,
) {
    for (col, attr) in bucket.columns.iter_mut().zip(shape.payload_attrs()) {
        let i = attr.attnum as usize - 1;
        if nulls[i] {
            col.push_null();
        } else {
            unsafe { datum::push_datum(col, attr, values[i]) };
        }
    }
    bucket.rows += 1;
    bucket.bytes += row_bytes;
    bucket.meta_bytes += meta_bytes;
}

/// The table's configuration and shape, registering the table in the buffer.
unsafe fn table_of(rel: pg_sys::Relation) -> (Rc<Config>, Rc<TableShape>) {
    let relid = unsafe { (*rel).rd_id };
    if let Some(pair) = BUFFER.with(|b| b.borrow().tables.get(&relid).map(|t| (t.config.clone(), t.shape.clone()))) {
        return pair;
    }
    let config = catalog::require(relid);
    let shape = Rc::new(unsafe { TableShape::new((*rel).rd_att, &config) });
    BUFFER.with(|b| {
        b.borrow_mut().tables.insert(
            relid,
            TableBuffer { config: config.clone(), shape: shape.clone(), series: HashMap::default(), closed: Vec::new() },
        )
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

type Work = Vec<(Rc<Config>, Rc<TableShape>, OpenBucket)>;

/// Removes the open (and, if asked, set-aside) buckets `pick` selects, of one
/// table or of all.
fn take_buckets(buffer: &mut WriteBuffer, only: Option<pg_sys::Oid>, pick: impl Fn(&OpenBucket) -> bool, with_closed: bool) -> Work {
    let mut out = Vec::new();
    for (relid, table) in buffer.tables.iter_mut() {
        if only.is_some_and(|r| r != *relid) {
            continue;
        }
        for series in table.series.values_mut() {
            let mut i = 0;
            while i < series.open.len() {
                if pick(&series.open[i]) {
                    out.push((table.config.clone(), table.shape.clone(), series.open.swap_remove(i)));
                } else {
                    i += 1;
                }
            }
        }
        if with_closed {
            let (taken, kept): (Vec<_>, Vec<_>) = table.closed.drain(..).partition(|b| pick(b));
            table.closed = kept;
            out.extend(taken.into_iter().map(|b| (table.config.clone(), table.shape.clone(), b)));
        }
    }
    buffer.bytes -= out.iter().map(|(_, _, b)| b.bytes).sum::<usize>();
    // Allocation order: deterministic, and keeps the store in time order per load.
    out.sort_by_key(|(_, _, b)| b.bucket_id);
    out
}

fn write_all(work: Work, reason: CloseReason) {
    for (config, shape, bucket) in work {
        flush_bucket(&config, &shape, bucket, reason);
    }
}

fn flush_bucket(config: &Config, shape: &TableShape, bucket: OpenBucket, reason: CloseReason) {
    // SAFETY: the store is opened and locked here, and closed (lock kept) after the write.
    unsafe {
        let store = pg_sys::table_open(config.store_relid, pg_sys::RowExclusiveLock as i32);
        store::write_bucket(
            store,
            config,
            shape,
            Some(bucket.bucket_id),
            &BucketContent {
                columns: &bucket.columns,
                rows: bucket.rows,
                meta: &bucket.meta,
                window_start: bucket.window_start,
                uncompressed_bytes: (bucket.bytes + bucket.meta_bytes) as i64,
            },
            reason,
            bucket.owner.cid,
        );
        pg_sys::table_close(store, pg_sys::NoLock as i32);
    }
}

/// The id of a bucket that starts buffering: its rows' TIDs carry it already.
fn new_bucket_id(config: &Config) -> i64 {
    // SAFETY: the store is opened and closed here; the lock is kept to the transaction's end.
    unsafe {
        let store = pg_sys::table_open(config.store_relid, pg_sys::RowExclusiveLock as i32);
        let id = store::allocate_id(store, config);
        pg_sys::table_close(store, pg_sys::NoLock as i32);
        id
    }
}

/// Forgets tables and series that hold nothing any more.
fn prune(buffer: &mut WriteBuffer) {
    for table in buffer.tables.values_mut() {
        table.series.retain(|_, s| !s.open.is_empty());
    }
    buffer.tables.retain(|_, t| !t.series.is_empty() || !t.closed.is_empty());
}

/// Writes the open buckets of the current subtransaction (of one table, or
/// all) that commands from `from_cid` on wrote (None: every command's).
pub fn flush(relid: Option<pg_sys::Oid>, reason: CloseReason, from_cid: Option<pg_sys::CommandId>) {
    let subxid = current_subxid();
    let mine = |o: &Owner| o.subxid == subxid && from_cid.is_none_or(|c| o.cid >= c);
    let work = BUFFER.with(|b| {
        let mut buffer = b.borrow_mut();
        let work = take_buckets(&mut buffer, relid, |o| mine(&o.owner), true);
        for (id, table) in buffer.tables.iter_mut() {
            if relid.is_some_and(|r| r != *id) {
                continue;
            }
            for series in table.series.values_mut() {
                series.newest.retain(|(o, _)| !mine(o));
            }
        }
        prune(&mut buffer);
        work
    });
    write_all(work, reason);
}

/// Whether rows of `relid` wait in the buffer (cheap: scans ask before flushing).
pub fn has_buffered(relid: pg_sys::Oid) -> bool {
    BUFFER.with(|b| b.borrow().tables.contains_key(&relid))
}

/// A scan of `relid` with a snapshot of command `curcid` is starting: write
/// the rows of earlier commands of this subtransaction (an outer statement
/// whose trigger reads the table), which that snapshot sees. Rows of the
/// current command stay buffered: its own snapshot cannot see them anyway, and
/// writing them would split its buckets (a rescanned subquery would make one
/// bucket per row).
pub fn flush_for_scan(relid: pg_sys::Oid, curcid: pg_sys::CommandId) {
    let subxid = current_subxid();
    let visible = |o: &Owner| o.subxid == subxid && o.cid < curcid;
    let work = BUFFER.with(|b| {
        let mut buffer = b.borrow_mut();
        let work = take_buckets(&mut buffer, Some(relid), |o| visible(&o.owner), true);
        if let Some(table) = buffer.tables.get_mut(&relid) {
            for series in table.series.values_mut() {
                series.newest.retain(|(o, _)| !visible(o));
            }
        }
        prune(&mut buffer);
        work
    });
    write_all(work, CloseReason::EndOfStatement);
}

/// ROLLBACK (TO SAVEPOINT): forget the rows of the aborted subtransaction.
pub fn discard_subxact(subxid: u32) {
    BUFFER.with(|b| {
        let mut buffer = b.borrow_mut();
        drop(take_buckets(&mut buffer, None, |o| o.owner.subxid == subxid, true));
        for table in buffer.tables.values_mut() {
            for series in table.series.values_mut() {
                series.newest.retain(|(o, _)| o.subxid != subxid);
            }
        }
        prune(&mut buffer);
    });
}

/// RELEASE SAVEPOINT: the child's open buckets now belong to the parent.
/// Nothing may be written here (the subtransaction is half gone), so a parent
/// bucket of the same window is set aside and written at the parent's next flush.
pub fn reassign_subxact(child: u32, parent: u32) {
    BUFFER.with(|b| {
        let mut buffer = b.borrow_mut();
        for table in buffer.tables.values_mut() {
            for series in table.series.values_mut() {
                let windows: Vec<(i64, u32)> =
                    series.open.iter().filter(|o| o.owner.subxid == child).map(|o| (o.window_start, o.owner.cid)).collect();
                let mut i = 0;
                while i < series.open.len() {
                    let o = &series.open[i];
                    if o.owner.subxid == parent && windows.contains(&(o.window_start, o.owner.cid)) {
                        table.closed.push(series.open.swap_remove(i));
                    } else {
                        i += 1;
                    }
                }
                series.open.iter_mut().filter(|o| o.owner.subxid == child).for_each(|o| o.owner.subxid = parent);
                let child_newest: Vec<(Owner, i64)> = series.newest.iter().filter(|(o, _)| o.subxid == child).copied().collect();
                series.newest.retain(|(o, _)| o.subxid != child);
                for (o, w) in child_newest {
                    let as_parent = Owner { subxid: parent, cid: o.cid };
                    match series.newest.iter_mut().find(|(p, _)| *p == as_parent) {
                        Some(e) => e.1 = e.1.max(w),
                        None => series.newest.push((as_parent, w)),
                    }
                }
            }
            table.closed.iter_mut().filter(|o| o.owner.subxid == child).for_each(|o| o.owner.subxid = parent);
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
            let freed: usize =
                t.series.values().flat_map(|s| s.open.iter()).chain(t.closed.iter()).map(|o| o.bytes).sum();
            buffer.bytes -= freed;
        }
    });
}
