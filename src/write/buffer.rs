//! The per-backend catalog of open buckets: one per table x series x window
//! x (subtransaction, command), with the bytes they hold; taking buckets out
//! of it, and what a subtransaction's end or a TRUNCATE does to it.

use crate::catalog::config::Config;
use crate::catalog::shape::TableShape;
use pgrx::pg_sys;
use rustc_hash::FxHashMap as HashMap;
use std::cell::RefCell;
use std::rc::Rc;
use tsbucket_format::Column;

/// Meta values of a series: identifying bytes per meta column, None for NULL.
pub(super) type Meta = Vec<Option<Vec<u8>>>;

/// Who wrote a bucket's rows: a bucket only ever holds rows of one
/// subtransaction (so ROLLBACK TO SAVEPOINT discards exactly its rows) and of
/// one command (so a statement nested in a trigger or function flushes only
/// its own rows at its end, never the outer statement's).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) struct Owner {
    pub(super) subxid: u32,
    pub(super) cid: u32,
}

#[derive(Clone)]
pub(super) struct OpenBucket {
    pub(super) bucket_id: i64,
    pub(super) window_start: i64,
    pub(super) owner: Owner,
    pub(super) meta: Rc<Meta>,
    /// One per payload attribute, in shape order.
    pub(super) columns: Vec<Column>,
    pub(super) rows: usize,
    /// The rows' values in memory.
    pub(super) bytes: usize,
    /// What they count toward the bucket size limit (documents less their framing).
    pub(super) size: usize,
    pub(super) meta_bytes: usize,
    /// Its statement has ended and left it open: a later command of the same
    /// subtransaction may add rows (then owns it), so a transaction of many
    /// small INSERTs fills its buckets as one COPY would. `seal` ends that.
    pub(super) open_across: bool,
}

/// The open buckets of one series (usually one: the current window).
pub(super) struct Series {
    pub(super) meta: Rc<Meta>,
    pub(super) meta_bytes_per_row: usize,
    pub(super) open: Vec<OpenBucket>,
    /// Newest window per owner: an older window's bucket closes when a
    /// newer one opens, as MongoDB closes buckets on time.
    pub(super) newest: Vec<(Owner, i64)>,
    /// Listed in its table's `touched`.
    pub(super) touched: bool,
}

pub(super) struct TableBuffer {
    pub(super) config: Rc<Config>,
    pub(super) shape: Rc<TableShape>,
    pub(super) series: HashMap<Vec<u8>, Series>,
    /// Closed but not yet written (see `reassign_subxact`).
    pub(super) closed: Vec<OpenBucket>,
    /// The series a statement may still own buckets of (a bucket not open
    /// across statements, or a `newest` entry): all a statement's end has to
    /// visit, however many series the buffer holds.
    pub(super) touched: Vec<Vec<u8>>,
}

#[derive(Default)]
pub struct WriteBuffer {
    pub(super) tables: HashMap<pg_sys::Oid, TableBuffer>,
    pub(super) bytes: usize,
}

/// A bucket of an enclosing subtransaction that a subtransaction below it
/// wrote (a read there must see its rows, and nothing can write as an
/// ancestor): kept until the writer's fate is the owner's, and buffered again
/// if the writer aborts.
pub(super) struct Rescued {
    pub(super) written_in: u32,
    pub(super) relid: pg_sys::Oid,
    pub(super) config: Rc<Config>,
    pub(super) shape: Rc<TableShape>,
    pub(super) bucket: OpenBucket,
}

thread_local! {
    pub(super) static BUFFER: RefCell<WriteBuffer> = RefCell::new(WriteBuffer::default());
    pub(super) static RESCUED: RefCell<Vec<Rescued>> = const { RefCell::new(Vec::new()) };
    pub(super) static KEY: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

pub(super) fn current_subxid() -> u32 {
    // SAFETY: GetCurrentSubTransactionId returns the running subtransaction's id, which buffered rows are keyed by.
    unsafe { pg_sys::GetCurrentSubTransactionId() }
}

pub(super) type Work = Vec<(Rc<Config>, Rc<TableShape>, OpenBucket)>;

/// Removes the open (and, if asked, set-aside) buckets `pick` selects, of one
/// table or of all.
pub(super) fn take_buckets(buffer: &mut WriteBuffer, only: Option<pg_sys::Oid>, pick: impl Fn(&OpenBucket) -> bool, with_closed: bool) -> Work {
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

/// Tables a backend keeps registered while they hold nothing: a device's
/// backend inserts into a few tables, one row a transaction, and need not
/// register its table again (configuration, shape, maps) every time.
const KEPT_EMPTY_TABLES: usize = 16;
const KEPT_SERIES_CAPACITY: usize = 1024;

impl TableBuffer {
    pub(super) fn new(config: Rc<Config>, shape: Rc<TableShape>) -> TableBuffer {
        TableBuffer { config, shape, series: HashMap::default(), closed: Vec::new(), touched: Vec::new() }
    }

    fn holds_rows(&self) -> bool {
        !self.series.is_empty() || !self.closed.is_empty()
    }
}

/// Forgets series that hold nothing any more (and tables, beyond a few).
pub fn prune(buffer: &mut WriteBuffer) {
    for table in buffer.tables.values_mut() {
        table.series.retain(|_, s| !s.open.is_empty());
        let series = &table.series;
        table.touched.retain(|k| series.contains_key(k));
    }
    if buffer.tables.len() > KEPT_EMPTY_TABLES {
        buffer.tables.retain(|_, t| t.holds_rows());
    }
}

/// Whether rows of `relid` wait in the buffer (cheap: scans ask before flushing).
pub fn has_buffered(relid: pg_sys::Oid) -> bool {
    BUFFER.with(|b| b.borrow().tables.get(&relid).is_some_and(TableBuffer::holds_rows))
}

/// ROLLBACK (TO SAVEPOINT): forget the rows of the aborted subtransaction;
/// an enclosing one's rows that it wrote are buffered again.
pub fn discard_subxact(subxid: u32) {
    let restored: Vec<Rescued> = RESCUED.with(|r| {
        let mut rescued = r.borrow_mut();
        let (back, kept): (Vec<Rescued>, Vec<Rescued>) = rescued.drain(..).partition(|e| e.written_in == subxid);
        *rescued = kept;
        back
    });
    BUFFER.with(|b| {
        let mut buffer = b.borrow_mut();
        drop(take_buckets(&mut buffer, None, |o| o.owner.subxid == subxid, true));
        for table in buffer.tables.values_mut() {
            for series in table.series.values_mut() {
                series.newest.retain(|(o, _)| o.subxid != subxid);
            }
        }
        prune(&mut buffer);
        for e in restored {
            buffer.bytes += e.bucket.bytes;
            let table = buffer.tables.entry(e.relid).or_insert_with(|| TableBuffer::new(e.config.clone(), e.shape.clone()));
            // An entry left empty is that of the aborted subtransaction's
            // inserts: its shape or configuration may be rolled back with it.
            if !table.holds_rows() {
                table.config = e.config.clone();
                table.shape = e.shape.clone();
            }
            table.closed.push(e.bucket);
        }
    });
}

/// RELEASE SAVEPOINT: the child's open buckets now belong to the parent.
/// Nothing may be written here (the subtransaction is half gone), so a parent
/// bucket of the same window is set aside and written at the parent's next flush.
/// What the child wrote for an enclosing subtransaction now shares the
/// parent's fate: kept no longer once that is its owner's.
pub fn reassign_subxact(child: u32, parent: u32) {
    RESCUED.with(|r| {
        let mut rescued = r.borrow_mut();
        rescued.retain(|e| !(e.written_in == child && e.bucket.owner.subxid == parent));
        rescued.iter_mut().filter(|e| e.written_in == child).for_each(|e| e.written_in = parent);
    });
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

/// The end of a statement that inserted: its open buckets (of commands from
/// `from_cid` on, of one table or all) stay buffered, open to later
/// commands, instead of being written now. They are written before anything
/// reads the table, when they fill, or at commit.
pub fn carry(relid: Option<pg_sys::Oid>, from_cid: Option<pg_sys::CommandId>) {
    let subxid = current_subxid();
    let mine = |o: &Owner| o.subxid == subxid && from_cid.is_none_or(|c| o.cid >= c);
    BUFFER.with(|b| {
        let mut buffer = b.borrow_mut();
        for (id, table) in buffer.tables.iter_mut() {
            if relid.is_some_and(|r| r != *id) {
                continue;
            }
            let series = &mut table.series;
            // A series stays listed while an enclosing statement may still own some of it.
            table.touched.retain(|key| {
                let Some(series) = series.get_mut(key) else { return false };
                series.open.iter_mut().filter(|o| mine(&o.owner)).for_each(|o| o.open_across = true);
                series.newest.retain(|(o, _)| !mine(o));
                series.touched = !series.newest.is_empty() || series.open.iter().any(|o| !o.open_across);
                series.touched
            });
        }
    });
}

/// Whether anything is buffered (cheap: statements ask before sealing).
pub fn is_empty() -> bool {
    BUFFER.with(|b| !b.borrow().tables.values().any(TableBuffer::holds_rows))
}

/// Transaction end: nothing buffered may survive it (the tables stay
/// registered, empty: `append::table_of` checks their configuration).
pub fn discard_all() {
    BUFFER.with(|b| {
        let mut buffer = b.borrow_mut();
        buffer.bytes = 0;
        for table in buffer.tables.values_mut() {
            // (A big load's maps are given back, not kept for the next transaction.)
            if table.series.capacity() > KEPT_SERIES_CAPACITY {
                table.series = HashMap::default();
                table.touched = Vec::new();
            }
            table.series.clear();
            table.closed.clear();
            table.touched.clear();
        }
        if buffer.tables.len() > KEPT_EMPTY_TABLES {
            buffer.tables.clear();
        }
    });
    RESCUED.with(|r| r.borrow_mut().clear());
}

/// TRUNCATE: rows buffered for the table are gone with the table's contents.
pub fn discard_table(relid: pg_sys::Oid) {
    BUFFER.with(|b| {
        let mut buffer = b.borrow_mut();
        RESCUED.with(|r| r.borrow_mut().retain(|e| e.relid != relid));
        if let Some(t) = buffer.tables.remove(&relid) {
            let freed: usize =
                t.series.values().flat_map(|s| s.open.iter()).chain(t.closed.iter()).map(|o| o.bytes).sum();
            buffer.bytes -= freed;
        }
    });
}
