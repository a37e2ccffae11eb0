//! A bucket as the store holds it: one heap row per bucket, whose column
//! layout only this folder knows, and why a bucket stopped taking rows.

use pgrx::pg_sys;
use pgrx::varlena::{vardata_any, varsize_any_exhdr};
use tsbucket_format::Column;


/// Store columns, 0-based. Keep in step with the CREATE TABLE in sql/bootstrap.sql.
pub(super) const COL_BUCKET_ID: usize = 0;

pub const COL_WINDOW_START: usize = 1;

pub(super) const COL_MIN_TIME: usize = 2;

pub(super) const COL_MAX_TIME: usize = 3;

pub(super) const COL_ROW_COUNT: usize = 4;

pub const COL_UNCOMPRESSED_BYTES: usize = 5;

pub(super) const COL_CLOSE_REASON: usize = 6;

pub const COL_STATS: usize = 7;

pub const COL_PAYLOAD: usize = 8;

pub const COL_FIRST_META: usize = 9;

/// The name of the store's last column, after the meta columns: the part of a
/// large payload past its whole TOAST chunks (NULL when the payload is whole).
const REST_COLUMN: &[u8] = b"payload_rest";

pub(super) const fn maxalign(x: usize) -> usize {
    let a = pg_sys::MAXIMUM_ALIGNOF as usize;
    (x + a - 1) & !(a - 1)
}

/// htup_details.h's SizeofHeapTupleHeader: a heap row's header before its null bitmap.
pub(super) const HEAP_TUPLE_HEADER: usize = 23;

/// varatt.h's TOAST_POINTER_SIZE: what a TOASTed value leaves in its row (unaligned).
pub(super) const TOAST_POINTER: usize = 2 + std::mem::size_of::<pg_sys::varatt_external>();

/// heaptoast.h's TOAST_TUPLE_THRESHOLD: a heap row longer than this is TOASTed.
pub(super) const TOAST_TUPLE_THRESHOLD: usize =
    ((pg_sys::BLCKSZ as usize - maxalign(24 + 4 * 4)) / 4) & !(pg_sys::MAXIMUM_ALIGNOF as usize - 1);

/// heaptoast.h's TOAST_MAX_CHUNK_SIZE: the bytes a TOAST chunk holds. Four
/// full chunks fill a TOAST page; a short last chunk leaves its slot mostly
/// empty (no following value's full chunk fits there).
pub(super) const TOAST_CHUNK: usize = TOAST_TUPLE_THRESHOLD - maxalign(HEAP_TUPLE_HEADER) - 4 - 4 - 4;

/// The length of a bytea stored out of line in a TOAST table without
/// compression; None for any other form (inline, compressed, in memory).
///
/// # Safety
/// `p` must point to a varlena datum.
unsafe fn external_uncompressed_len(p: *const pg_sys::varlena) -> Option<usize> {
    // SAFETY: `p` is a varlena (the contract): its first byte says whether it is an external pointer, whose tag
    // byte and (unaligned) varatt_external follow it.
    unsafe {
        if !pgrx::varlena::varatt_is_1b_e(p) || pgrx::varlena::vartag_1b_e(p) != pg_sys::vartag_external::VARTAG_ONDISK as u8 {
            return None;
        }
        let ext = std::ptr::read_unaligned(pgrx::varlena::vardata_1b_e(p) as *const pg_sys::varatt_external);
        let raw = (ext.va_rawsize as usize).checked_sub(pg_sys::VARHDRSZ)?;
        // varatt.h's VARATT_EXTERNAL_GET_EXTSIZE: the stored size, below the compression method's bits.
        let stored = (ext.va_extinfo & ((1u32 << pg_sys::VARLENA_EXTSIZE_BITS) - 1)) as usize;
        (stored == raw).then_some(raw)
    }
}

/// Bytes `offset..offset + len` of an out-of-line value (fewer past its end),
/// fetched into the current memory context.
///
/// # Safety
/// `p` must be an out-of-line uncompressed varlena; the bytes live as long
/// as the current memory context.
unsafe fn slice<'a>(p: *mut pg_sys::varlena, offset: usize, len: usize) -> &'a [u8] {
    // SAFETY: `p` is an out-of-line uncompressed value (the contract), whose slice detoast_attr_slice fetches from
    // the chunks it covers into a fresh varlena in the current context.
    unsafe {
        let part = pg_sys::detoast_attr_slice(p, offset as i32, len as i32);
        std::slice::from_raw_parts(vardata_any(part) as *const u8, varsize_any_exhdr(part))
    }
}

/// `parts` one after another in one palloc'd block of the current memory context.
fn palloc_concat(parts: &[&[u8]]) -> *const u8 {
    let len: usize = parts.iter().map(|p| p.len()).sum();
    // SAFETY: palloc returns `len` (at least 1) writable bytes in the current memory context (or raises ERROR); each
    // part is copied to its own place inside them.
    unsafe {
        let whole = pg_sys::palloc(len.max(1)) as *mut u8;
        let mut at = 0;
        for p in parts {
            std::ptr::copy_nonoverlapping(p.as_ptr(), whole.add(at), p.len());
            at += p.len();
        }
        whole
    }
}

/// Where a payload of `len` bytes is split: after its whole TOAST chunks,
/// when it has some and the remainder fits in `room` bytes of the store row.
pub(super) fn split_at(len: usize, room: usize) -> Option<usize> {
    let whole = len / TOAST_CHUNK * TOAST_CHUNK;
    let rest = len - whole;
    (whole > 0 && rest > 0 && rest <= room).then_some(whole)
}

/// The store's `payload_rest` column, if it has one (stores made or updated by
/// tsbucket 0.6.0 do).
///
/// # Safety
/// `tupdesc` must be a store's descriptor.
pub(super) unsafe fn rest_column(tupdesc: pg_sys::TupleDesc) -> Option<usize> {
    // SAFETY: `tupdesc` is a valid descriptor (the contract); natts is a plain field.
    let natts = unsafe { (*tupdesc).natts as usize };
    if natts <= COL_FIRST_META {
        return None;
    }
    // SAFETY: natts - 1 is an attribute of `tupdesc`; its name is a NUL-terminated NameData inside it.
    let name = unsafe { std::ffi::CStr::from_ptr((*crate::pg::relation::tuple_desc_attr(tupdesc, natts - 1)).attname.data.as_ptr()) };
    (name.to_bytes() == REST_COLUMN).then_some(natts - 1)
}

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
#[derive(Clone)]
pub struct StoredBucket {
    pub tid: pg_sys::ItemPointerData,
    pub bucket_id: i64,
    pub window_start: i64,
    pub min_time: i64,
    pub max_time: i64,
    pub rows: i32,
    /// Its store tuple's transaction and command ids (the rows' system columns).
    pub version: super::slot::Version,
    pub values: Vec<pg_sys::Datum>,
    pub nulls: Vec<bool>,
    pub(super) payload: *const u8,
    pub(super) payload_len: usize,
    /// The whole payload's length (`payload_len` is less when only a prefix was read).
    pub(super) payload_total: usize,
    pub(super) stats: *const u8,
    pub(super) stats_len: usize,
    /// The store's `payload_rest` column (None: the store has none).
    pub(super) rest_col: Option<usize>,
    /// Tail rows posing as a bucket (no payload: they are decoded already).
    pub tail: Option<std::rc::Rc<LoadedBucket>>,
}

impl StoredBucket {
    /// The header of a group of tail rows: `values`/`nulls` hold the store
    /// columns' layout with only the meta values set.
    pub(super) fn of_tail(
        rows: std::rc::Rc<LoadedBucket>,
        (window_start, min_time, max_time): (i64, i64, i64),
        mut values: Vec<pg_sys::Datum>,
        mut nulls: Vec<bool>,
    ) -> StoredBucket {
        values[COL_WINDOW_START] = pg_sys::Datum::from(window_start);
        values[COL_MIN_TIME] = pg_sys::Datum::from(min_time);
        values[COL_MAX_TIME] = pg_sys::Datum::from(max_time);
        values[COL_ROW_COUNT] = pg_sys::Datum::from(rows.rows as i32);
        values[COL_CLOSE_REASON] = pg_sys::Datum::from(0i16);
        nulls[COL_STATS] = true;
        nulls[COL_PAYLOAD] = true;
        StoredBucket {
            tid: pg_sys::ItemPointerData::default(),
            bucket_id: 0,
            window_start,
            min_time,
            max_time,
            rows: rows.rows as i32,
            version: super::slot::Version { xmin: pg_sys::InvalidTransactionId, xmax: pg_sys::InvalidTransactionId, cid: 0 },
            values,
            nulls,
            payload: std::ptr::null(),
            payload_len: 0,
            payload_total: 0,
            stats: std::ptr::null(),
            stats_len: 0,
            rest_col: None,
            tail: Some(rows),
        }
    }

    /// Detoasts the payload (in the current memory context).
    pub fn load_payload(&mut self) {
        if !self.payload.is_null() || self.tail.is_some() {
            return;
        }
        // SAFETY: values[COL_PAYLOAD] is the store tuple's payload bytea, never NULL (read_header refuses
        // that); detoasted, it is palloc'd in the current memory context (the bucket's), or read in place if inline.
        let payload = unsafe { pg_sys::pg_detoast_datum_packed(self.values[COL_PAYLOAD].cast_mut_ptr()) };
        // The detoasted first part stays in `values`, so that a relabel writes the parts as they were.
        self.values[COL_PAYLOAD] = pg_sys::Datum::from(payload);
        // SAFETY: `payload` is the plain (detoasted) varlena just returned, so its header is readable.
        let (data, len) = unsafe { (vardata_any(payload) as *const u8, varsize_any_exhdr(payload)) };
        (self.payload, self.payload_len, self.payload_total) = (data, len, len);
        let rest = self.rest();
        if !rest.is_empty() {
            // SAFETY: `data` holds the `len` bytes of the first part just detoasted.
            self.payload = palloc_concat(&[unsafe { std::slice::from_raw_parts(data, len) }, rest]);
            self.payload_len = len + rest.len();
            self.payload_total = self.payload_len;
        }
    }

    /// The part of a split payload kept inline (`payload_rest`), or nothing.
    fn rest<'a>(&self) -> &'a [u8] {
        match self.rest_col.filter(|&c| !self.nulls[c]) {
            // SAFETY: values[col] is the tuple's non-NULL payload_rest bytea: inline (its bytes read in place, in the
            // tuple or detached's copy, alive while the bucket is) or, if TOAST moved it out, detoasted into the
            // current context, which lives as long as the bucket's.
            Some(col) => unsafe {
                let rest = pg_sys::pg_detoast_datum_packed(self.values[col].cast_mut_ptr());
                std::slice::from_raw_parts(vardata_any(rest) as *const u8, varsize_any_exhdr(rest))
            },
            None => &[],
        }
    }

    /// Like `load_payload`, but of a payload TOAST keeps out of line (and
    /// uncompressed, as the store's EXTERNAL storage leaves it), only the
    /// leading part that holds the columns `wanted` names by attnum (format
    /// version 5 lays columns out after a directory). A query reading the
    /// time and one value of a wide bucket fetches a fraction of its chunks.
    ///
    /// Each fetch of a TOAST slice costs an index scan, more than a chunk,
    /// so one fetch should bring all the bucket needs: `hint` is how many
    /// bytes to fetch first (at least a chunk, which holds the directory),
    /// learnt from the scan's previous buckets, which are alike; when the
    /// directory asks for more, a second fetch brings the rest.
    ///
    /// The store row's values are left as they were (a TOAST pointer), so a
    /// bucket so read must not be written back whole; scans only read.
    pub fn load_payload_for(&mut self, wanted: impl Fn(u16) -> bool, hint: &mut usize) {
        if !self.payload.is_null() || self.tail.is_some() {
            return;
        }
        let first = self.values[COL_PAYLOAD].cast_mut_ptr::<pg_sys::varlena>();
        // SAFETY: values[COL_PAYLOAD] is the store tuple's non-NULL payload bytea (read_header refuses NULL), valid
        // while the bucket is.
        let Some(first_len) = (unsafe { external_uncompressed_len(first) }).filter(|&n| n > TOAST_CHUNK) else {
            return self.load_payload();
        };
        // SAFETY: `first` is an out-of-line uncompressed value of `first_len` bytes (checked above): a slice of it
        // fetches only the TOAST chunks it covers, into the current memory context.
        let head = unsafe { slice(first, 0, (*hint).clamp(TOAST_CHUNK, first_len)) };
        let rest = self.rest();
        let total = first_len + rest.len();
        let want = tsbucket_format::prefix_len(head, wanted).unwrap_or(total).min(total);
        // Columns' sizes vary from bucket to bucket: some room, rather than a second fetch.
        *hint = want + want / 8;
        if want <= head.len() {
            (self.payload, self.payload_len, self.payload_total) = (head.as_ptr(), head.len(), total);
            return;
        }
        let more = match want.min(first_len).checked_sub(head.len()) {
            // SAFETY: as for `head`: the chunks after it, up to the wanted end within the first part.
            Some(n) if n > 0 => unsafe { slice(first, head.len(), n) },
            _ => &[],
        };
        let tail = if want > first_len { rest } else { &[] };
        self.payload = palloc_concat(&[head, more, tail]);
        (self.payload_len, self.payload_total) = (head.len() + more.len() + tail.len(), total);
    }

    /// The payload's whole length: more than `payload().len()` when
    /// `load_payload_for` read a prefix of it.
    pub fn payload_total(&self) -> usize {
        self.payload_total
    }

    /// The bytes the payload takes as stored (both parts of a split one), without detoasting it.
    pub fn stored_payload_bytes(&self) -> i64 {
        if self.tail.is_some() {
            return 0;
        }
        let parts = [Some(COL_PAYLOAD), self.rest_col.filter(|&c| !self.nulls[c])];
        // SAFETY: each part is a non-NULL bytea datum of the store tuple the header was read from (the payload is
        // never NULL; the rest is checked), valid while the bucket is; toast_datum_size reads only its header.
        parts.into_iter().flatten().map(|c| unsafe { pg_sys::toast_datum_size(self.values[c]) } as i64).sum()
    }

    /// The payload as read: whole, or the prefix `load_payload_for` read.
    pub fn payload(&self) -> &[u8] {
        if self.tail.is_some() {
            return &[];
        }
        assert!(!self.payload.is_null(), "payload read before load_payload");
        // SAFETY: load_payload set `payload`/`payload_len` (non-null, asserted above) to the detoasted payload,
        // which stays in the memory context that read the bucket while `self` is used.
        unsafe { std::slice::from_raw_parts(self.payload, self.payload_len) }
    }

    pub fn stats(&self) -> &[u8] {
        if self.stats.is_null() {
            // A NULL stats column (write_bucket never leaves one): no statistics.
            return &[];
        }
        // SAFETY: read_header (or detached's copy) set `stats`/`stats_len` to the detoasted stats bytea,
        // alive in the memory context that read the bucket.
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
        // SAFETY: `store` is the open store the bucket was read from (detached's contract); rd_att is its
        // relcache entry's descriptor.
        let tupdesc = unsafe { (*store).rd_att };
        for i in 0..self.values.len() {
            // SAFETY: read_header made one value per attribute of this store's descriptor, so `i` < natts.
            let att = unsafe { &*crate::pg::relation::tuple_desc_attr(tupdesc, i) };
            if self.nulls[i] || att.attbyval {
                continue;
            }
            let src = self.values[i].cast_mut_ptr::<u8>();
            let len = match att.attlen {
                // SAFETY: a non-NULL varlena value of the tuple, still valid (detached's contract).
                -1 => unsafe { pgrx::varlena::varsize_any(src as *const pg_sys::varlena) },
                // SAFETY: a non-NULL cstring value of the tuple, NUL-terminated and still valid.
                -2 => unsafe { std::ffi::CStr::from_ptr(src as *const std::ffi::c_char).to_bytes_with_nul().len() },
                n => n as usize,
            };
            // SAFETY: `src` holds `len` readable bytes of the still-valid tuple, and palloc returns `len`
            // writable bytes in the current memory context (or raises ERROR).
            let dst = unsafe {
                let dst = pg_sys::palloc(len) as *mut u8;
                std::ptr::copy_nonoverlapping(src, dst, len);
                dst
            };
            self.values[i] = pg_sys::Datum::from(dst);
        }
        if !self.stats.is_null() {
            // SAFETY: `stats` points to `stats_len` bytes of the tuple's stats (non-null, checked); palloc
            // returns at least that many in the current memory context.
            let copy = unsafe {
                let copy = pg_sys::palloc(self.stats_len.max(1)) as *mut u8;
                std::ptr::copy_nonoverlapping(self.stats, copy, self.stats_len);
                copy
            };
            self.stats = copy;
        }
        // A payload already detoasted is in memory of its own.
        self
    }

    pub fn meta_datum(&self, i: usize) -> Option<pg_sys::Datum> {
        let col = COL_FIRST_META + i;
        if self.nulls[col] { None } else { Some(self.values[col]) }
    }
}

/// A decoded bucket: columns by attribute (None where the bucket predates the
/// column) and the meta values' identifying bytes.
pub struct LoadedBucket {
    pub bucket_id: i64,
    pub store_tid: pg_sys::ItemPointerData,
    pub rows: usize,
    pub columns: Vec<Option<Column>>,
    pub meta: Vec<Option<Vec<u8>>>,
    /// Attributes not decoded because the query does not read them (NULL in slots).
    pub skipped: Option<Vec<bool>>,
    /// The store tuple version the rows come from (their system columns).
    pub version: super::slot::Version,
    /// Tail rows posing as a bucket: each row's own TID and version.
    pub tail: Option<std::rc::Rc<TailRowIds>>,
    /// The fields a query reads as numbers (`rows::DocFields`, in its order):
    /// None where the documents must be read whole (they then are decoded).
    pub fields: Vec<Option<tsbucket_format::codec::document::Fields>>,
}

/// Each tail row's identity: its TID and its segment tuple's version.
pub struct TailRowIds {
    pub tids: Vec<pg_sys::ItemPointerData>,
    pub versions: Vec<super::slot::Version>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toast_sizes_are_those_of_heaptoast_h() {
        // 8 KiB pages: four 2032-byte chunk rows (1996 data bytes each) fill a TOAST page.
        assert_eq!((pg_sys::BLCKSZ, TOAST_TUPLE_THRESHOLD, TOAST_CHUNK, TOAST_POINTER), (8192, 2032, 1996, 18));
    }

    #[test]
    fn payloads_split_after_whole_chunks_when_the_rest_fits() {
        assert_eq!(split_at(TOAST_CHUNK, 2000), None, "nothing past the chunk");
        assert_eq!(split_at(TOAST_CHUNK - 1, 2000), None, "no whole chunk");
        assert_eq!(split_at(3 * TOAST_CHUNK + 300, 300), Some(3 * TOAST_CHUNK));
        assert_eq!(split_at(3 * TOAST_CHUNK + 301, 300), None, "the rest does not fit");
        assert_eq!(split_at(0, 2000), None);
    }
}
