//! Turning stored buckets back into rows: decode a bucket's payload once, then
//! fill slots row by row. Shared by scans and fetch-by-TID.

use crate::catalog::config::Config;
use crate::catalog::shape::{Role, TableShape};
use crate::pg::datum;
use crate::pg::error::{DATA_CORRUPTED, ts_error};
use super::bucket::{LoadedBucket, StoredBucket};
use super::tuple::{find_bucket_tuple, read_bucket};
use pgrx::pg_sys;
use std::cell::RefCell;
use std::rc::Rc;
use tsbucket_format::codec::document::{Fields, NumberCast};
use tsbucket_format::{BucketReader, Column};

pub(super) fn corrupt(relid: pg_sys::Oid, bucket_id: i64, what: &dyn std::fmt::Display) -> ! {
    ts_error(
        DATA_CORRUPTED,
        &format!("bucket {bucket_id} of table \"{}\" is corrupt: {what}", crate::pg::relation::relation_name(relid)),
        "Run SELECT * FROM tsbucket.verify(...) on the table to list damaged buckets.",
    )
}

pub fn load(config: &Config, shape: &TableShape, stored: &StoredBucket) -> LoadedBucket {
    load_columns(config, shape, stored, None, &[], &[])
}

/// The top-level keys of jsonb attributes a query reads only through key
/// accessors (`->`, `->>`, `?`, `@>` ...), by attnum - 1: their documents may
/// come back holding only those fields. An attribute not listed reads whole.
pub type DocKeys = [(usize, Vec<Vec<u8>>)];

/// Top-level fields of jsonb attributes a query reads as numbers
/// (`(doc->>'k')::float8`), by attnum - 1, key and cast: each bucket decodes
/// their sub-columns alone, into `LoadedBucket::fields` (in this order).
pub type DocFields = [(usize, Vec<u8>, NumberCast)];

/// Like `load`, decoding only the attributes `needed` marks (by attnum - 1),
/// of the documents in `doc_keys` only the fields named there, and the fields
/// of `doc_fields`. Where a field holds values its cast leaves to Postgres
/// (or its documents are kept whole), its attribute is decoded too, as if
/// needed: those rows are cast on their documents.
pub fn load_columns(config: &Config, shape: &TableShape, stored: &StoredBucket, needed: Option<&[bool]>, doc_keys: &DocKeys, doc_fields: &DocFields) -> LoadedBucket {
    load_deferring(config, shape, stored, needed, doc_keys, doc_fields, &[])
}

/// Like `load_columns`, leaving the document attributes `defer` (by attnum
/// - 1) undecoded in a stored bucket (their columns None until `decode_late`
/// builds the rows a filter selects). Tail rows come decoded whole.
pub fn load_deferring(
    config: &Config,
    shape: &TableShape,
    stored: &StoredBucket,
    needed: Option<&[bool]>,
    doc_keys: &DocKeys,
    doc_fields: &DocFields,
    defer: &[usize],
) -> LoadedBucket {
    if let Some(tail) = &stored.tail {
        let needed = needed.map(|n| {
            let mut n = n.to_vec();
            doc_fields.iter().for_each(|(a, ..)| n[*a] = true);
            n
        });
        return needed_of(tail, shape, needed.as_deref());
    }
    let reader = BucketReader::parse_prefix(stored.payload(), stored.payload_total()).unwrap_or_else(|e| corrupt(config.relid, stored.bucket_id, &e));
    if reader.rows() != stored.rows as usize {
        corrupt(config.relid, stored.bucket_id, &"row count differs from the payload");
    }
    let mut needed = needed.map(<[bool]>::to_vec);
    let fields: Vec<Option<Fields>> = doc_fields
        .iter()
        .map(|(a, key, cast)| {
            let column = reader.column(*a as u16 + 1).unwrap_or_else(|e| corrupt(config.relid, stored.bucket_id, &e));
            let found = column.map(|e| e.decode_field(key).unwrap_or_else(|e| corrupt(config.relid, stored.bucket_id, &e)));
            // One per row (EncodedColumn::decode_field spreads them over NULL rows).
            let fields = found.flatten();
            let to_postgres = fields.as_ref().is_none_or(|f| !f.all_cast(*cast));
            if let Some(n) = needed.as_mut().filter(|_| to_postgres) {
                n[*a] = true;
            }
            fields
        })
        .collect();
    let mut columns: Vec<Option<Column>> = vec![None; shape.attrs.len()];
    for attr in shape.payload_attrs() {
        if needed.as_ref().is_some_and(|n| !n[attr.attnum as usize - 1]) || defer.contains(&(attr.attnum as usize - 1)) {
            continue;
        }
        if let Some(encoded) = reader.column(attr.attnum).unwrap_or_else(|e| corrupt(config.relid, stored.bucket_id, &e)) {
            if !attr.kind.reads(encoded.kind) {
                corrupt(config.relid, stored.bucket_id, &format!("column {} has storage kind {:?}, expected {:?}", attr.attnum, encoded.kind, attr.kind));
            }
            let keys = doc_keys.iter().find(|(i, _)| *i == attr.attnum as usize - 1).map(|(_, k)| &k[..]);
            let mut col = encoded.decode_keys(keys).unwrap_or_else(|e| corrupt(config.relid, stored.bucket_id, &e));
            // jsonb a bucket kept as Bytes (format 2) reads as documents: the same values.
            col.kind = attr.kind;
            columns[attr.attnum as usize - 1] = Some(col);
        }
    }
    let meta = shape
        .meta_attrs()
        .iter()
        .enumerate()
        // SAFETY: store meta column `i` has the type of the table's meta attribute `attr`, and its datum lives
        // while `stored` does; to_vec copies the bytes while `d` is alive.
        .map(|(i, attr)| stored.meta_datum(i).map(|d| unsafe { datum::datum_bytes(&d, attr.layout()) }.to_vec()))
        .collect();
    let skipped = needed.map(|n| n.iter().map(|x| !x).collect());
    LoadedBucket { bucket_id: stored.bucket_id, store_tid: stored.tid, rows: reader.rows(), columns, meta, skipped, version: stored.version, tail: None, fields }
}

/// Reads `stored`'s payload as far as decoding the columns `needed` marks
/// takes, with the document columns whose fields `doc_fields` reads and
/// those `late` decodes afterwards (`StoredBucket::load_payload_for`, whose
/// `hint` the scan keeps from bucket to bucket); all of it when `needed` is
/// None.
pub fn load_payload(stored: &mut StoredBucket, needed: Option<&[bool]>, doc_fields: &DocFields, late: &[usize], hint: &mut usize) {
    // Every column wanted: no prefix to choose, one fetch of the whole.
    let Some(needed) = needed.filter(|n| !n.iter().all(|&b| b)) else { return stored.load_payload() };
    let wanted = |attnum: u16| {
        let Some(a) = (attnum as usize).checked_sub(1) else { return false };
        needed.get(a).copied().unwrap_or(false) || doc_fields.iter().any(|(c, ..)| *c == a) || late.contains(&a)
    };
    stored.load_payload_for(wanted, hint);
}

/// Whether every field of `doc_fields` in `bucket` was read from its
/// sub-column and holds only what its cast reads without Postgres.
pub fn fields_all_cast(bucket: &LoadedBucket, doc_fields: &DocFields) -> bool {
    bucket.tail.is_none()
        && bucket.fields.len() == doc_fields.len()
        && bucket.fields.iter().zip(doc_fields).all(|(f, (_, _, cast))| {
            f.as_ref().is_some_and(|f| f.len() == bucket.rows && f.all_cast(*cast))
        })
}

/// Decodes the document attributes `attrs` that `load_deferring` left out
/// of `bucket`, building only the documents of the rows `rows` marks (the
/// others read as NULL: the caller never shows them).
pub fn decode_late(config: &Config, shape: &TableShape, stored: &StoredBucket, bucket: &mut LoadedBucket, attrs: &[usize], doc_keys: &DocKeys, rows: &[bool]) {
    if stored.tail.is_some() {
        return;
    }
    let reader = BucketReader::parse_prefix(stored.payload(), stored.payload_total()).unwrap_or_else(|e| corrupt(config.relid, stored.bucket_id, &e));
    for &a in attrs {
        let Some(encoded) = reader.column(a as u16 + 1).unwrap_or_else(|e| corrupt(config.relid, stored.bucket_id, &e)) else { continue };
        let attr = &shape.attrs[a];
        if !attr.kind.reads(encoded.kind) {
            corrupt(config.relid, stored.bucket_id, &format!("column {} has storage kind {:?}, expected {:?}", a + 1, encoded.kind, attr.kind));
        }
        let keys = doc_keys.iter().find(|(i, _)| *i == a).map(|(_, k)| &k[..]);
        let mut col = encoded.decode_rows(keys, Some(rows)).unwrap_or_else(|e| corrupt(config.relid, stored.bucket_id, &e));
        col.kind = attr.kind;
        bucket.columns[a] = Some(col);
    }
}

/// Tail rows (decoded already) as a query that reads only `needed` gets them.
fn needed_of(tail: &LoadedBucket, shape: &TableShape, needed: Option<&[bool]>) -> LoadedBucket {
    let columns = tail
        .columns
        .iter()
        .enumerate()
        .map(|(i, c)| c.as_ref().filter(|_| needed.is_none_or(|n| n[i]) || matches!(shape.attrs[i].role, Role::Time)).cloned())
        .collect();
    LoadedBucket {
        bucket_id: tail.bucket_id,
        store_tid: tail.store_tid,
        rows: tail.rows,
        columns,
        meta: tail.meta.clone(),
        skipped: needed.map(|n| n.iter().map(|x| !x).collect()),
        version: tail.version,
        tail: tail.tail.clone(),
        fields: Vec::new(),
    }
}

/// The size of `bucket`'s decoded columns in memory (EXPLAIN's Bytes Decompressed).
pub fn decoded_bytes(bucket: &LoadedBucket) -> u64 {
    let fields: usize = bucket.fields.iter().flatten().map(|f| f.heap_bytes()).sum();
    bucket.columns.iter().flatten().map(|c| c.approx_bytes() as u64).sum::<u64>() + fields as u64
}

/// The decoded time column of `bucket` (decoding always includes it for
/// time-ordered and last-point scans); a bucket without it is corrupt.
pub fn time_values<'a>(config: &Config, bucket: &'a LoadedBucket) -> &'a [i64] {
    match bucket.columns[config.time_attnum as usize - 1].as_ref().map(|c| &c.values) {
        Some(tsbucket_format::Values::Int(v)) => v,
        _ => corrupt(config.relid, bucket.bucket_id, &"the time column is missing"),
    }
}

/// The values of `attr` in `bucket`: decoded, or, for a column added after
/// the bucket was written, the column's default once per row. The one place
/// that reads an added column's default for whole buckets (DML, compaction).
///
/// # Safety
/// `tupdesc` must be the user table's descriptor; `attr` one of its payload attributes.
pub unsafe fn column_or_default<'a>(tupdesc: pg_sys::TupleDesc, attr: &crate::catalog::shape::Attr, bucket: &'a LoadedBucket) -> std::borrow::Cow<'a, Column> {
    if let Some(col) = &bucket.columns[attr.attnum as usize - 1] {
        return std::borrow::Cow::Borrowed(col);
    }
    let mut col = Column::new(attr.attnum, attr.kind);
    let mut isnull = false;
    // SAFETY: `tupdesc` is the user table's descriptor and attr.attnum one of its attributes (column_or_default's
    // contract); getmissingattr returns the column's default for rows written before it, or sets isnull.
    let missing = unsafe { pg_sys::getmissingattr(tupdesc, attr.attnum as i32, &mut isnull) };
    for _ in 0..bucket.rows {
        if isnull {
            col.push_null();
        } else {
            // SAFETY: `missing` is a non-NULL datum of `attr`'s type from the descriptor's missing-value array.
            unsafe { datum::push_datum(&mut col, attr.layout(), missing) };
        }
    }
    std::borrow::Cow::Owned(col)
}

/// Datums built once per bucket for a scan: the meta values, every row of
/// by-reference columns laid out in one allocation (saves a palloc per
/// value), and, for a scan returning rows (`prepare`'s `by_value`), every
/// row of by-value columns (NULL rows hold 0).
#[derive(Default)]
pub struct Prepared {
    pub meta: Vec<Option<pg_sys::Datum>>,
    pub columns: Vec<Option<Vec<pg_sys::Datum>>>,
}

/// # Safety
/// Allocates in the current memory context, which must outlive the datums' use.
pub unsafe fn prepare(shape: &TableShape, bucket: &LoadedBucket, by_value: bool) -> Prepared {
    let meta = shape
        .meta_attrs()
        .iter()
        .enumerate()
        // SAFETY: bucket.meta[i] holds identifying bytes of meta attribute i's type (load took them with
        // datum_bytes); the datum is palloc'd in the current memory context, which prepare's contract keeps alive.
        .map(|(i, attr)| bucket.meta[i].as_ref().map(|b| unsafe { datum::bytes_datum(b, attr.layout()) }))
        .collect();
    let columns = shape
        .attrs
        .iter()
        .map(|attr| {
            let col = bucket.columns[attr.attnum as usize - 1].as_ref()?;
            match &col.values {
                // SAFETY: the decoded column holds bytes of `attr`'s by-reference type; its datums share one
                // allocation in the current memory context.
                tsbucket_format::Values::Bytes(values) if !attr.typbyval => Some(unsafe { datum::bytes_datums(values, attr.layout()) }),
                // By-value columns too, a column at a time, for a scan returning rows: it then copies one datum per
                // column and row instead of converting it there. (Aggregation reads the decoded arrays.)
                _ if by_value => datum::column_datums(col, attr.layout()),
                _ => None,
            }
        })
        .collect();
    Prepared { meta, columns }
}

/// Fills `slot` with row `row` of `bucket`; by-reference values not in
/// `prepared` are allocated in the current memory context.
///
/// # Safety
/// `slot` must be a virtual slot of `rel`.
pub unsafe fn fill_slot(
    rel: pg_sys::Relation,
    shape: &TableShape,
    bucket: &LoadedBucket,
    prepared: Option<&Prepared>,
    row: usize,
    slot: *mut pg_sys::TupleTableSlot,
) {
    // SAFETY: `slot` is a virtual slot of `rel` (fill_slot's contract), so once cleared its tts_values and
    // tts_isnull are arrays of the descriptor's natts entries, owned by the slot and untouched by anyone
    // else until ExecStoreVirtualTuple below; `rel` is open, so its descriptor is readable.
    let (tupdesc, natts, values, nulls) = unsafe {
        pg_sys::ExecClearTuple(slot);
        let tupdesc = (*rel).rd_att;
        let natts = (*tupdesc).natts as usize;
        (tupdesc, natts, std::slice::from_raw_parts_mut((*slot).tts_values, natts), std::slice::from_raw_parts_mut((*slot).tts_isnull, natts))
    };
    for (i, attr) in shape.attrs.iter().enumerate().take(natts) {
        match attr.role {
            Role::Dropped => {
                nulls[i] = true;
                values[i] = pg_sys::Datum::from(0);
            }
            Role::Meta(m) => match (&bucket.meta[m], prepared) {
                (None, _) => nulls[i] = true,
                (Some(_), Some(p)) => {
                    values[i] = p.meta[m].expect("prepared with the bucket");
                    nulls[i] = false;
                }
                (Some(bytes), None) => {
                    // SAFETY: `bytes` are the bucket's identifying bytes of meta attribute `attr`'s type; the
                    // datum is palloc'd in the current memory context, as fill_slot documents.
                    values[i] = unsafe { datum::bytes_datum(bytes, attr.layout()) };
                    nulls[i] = false;
                }
            },
            Role::Time | Role::Measurement if bucket.skipped.as_ref().is_some_and(|s| s[i]) => nulls[i] = true,
            Role::Time | Role::Measurement => match &bucket.columns[i] {
                Some(col) if col.is_null(row) => nulls[i] = true,
                Some(col) => {
                    values[i] = match prepared.and_then(|p| p.columns[i].as_ref()) {
                        Some(datums) => datums[row],
                        // SAFETY: load_columns decoded `col` with `attr`'s storage kind (it checks the kind), as
                        // column_datum requires.
                        None => unsafe { datum::column_datum(col, row, attr.layout()) },
                    };
                    nulls[i] = false;
                }
                None => {
                    // Added after this bucket was written: its default, or NULL.
                    let mut isnull = false;
                    // SAFETY: `tupdesc` is the open `rel`'s descriptor and i + 1 one of its attnums (i < natts).
                    values[i] = unsafe { pg_sys::getmissingattr(tupdesc, (i + 1) as i32, &mut isnull) };
                    nulls[i] = isnull;
                }
            },
        }
    }
    // SAFETY: `slot` is the virtual slot of `rel` whose values were set above; storing it and setting its tid,
    // table oid and bucket version touch only the slot's own fields.
    unsafe {
        pg_sys::ExecStoreVirtualTuple(slot);
        (*slot).tts_tableOid = (*rel).rd_id;
        set_identity(bucket, row, slot);
    }
}

/// The slot's TID and version: its bucket's, or a tail row's own.
///
/// # Safety
/// `slot` must be a valid slot holding row `row` of `bucket`.
#[inline]
pub unsafe fn set_identity(bucket: &LoadedBucket, row: usize, slot: *mut pg_sys::TupleTableSlot) {
    // SAFETY: `slot` is valid (the contract); its tid is its own field, and set_version needs only a valid slot.
    unsafe {
        match &bucket.tail {
            Some(ids) => {
                (*slot).tts_tid = ids.tids[row];
                super::slot::set_version(slot, ids.versions[row]);
            }
            None => {
                super::tid::set(&mut (*slot).tts_tid, bucket.bucket_id, row);
                super::slot::set_version(slot, bucket.version);
            }
        }
    }
}

thread_local! {
    /// The last bucket fetched by TID: DELETE ... RETURNING and UPDATE fetch
    /// rows of one bucket in a row, and decoding it each time would cost O(n^2).
    static FETCHED: RefCell<Option<(pg_sys::Oid, Rc<LoadedBucket>)>> = const { RefCell::new(None) };
}

pub fn forget_fetched() {
    FETCHED.with(|f| *f.borrow_mut() = None);
}

fn same_tid(a: &pg_sys::ItemPointerData, b: &pg_sys::ItemPointerData) -> bool {
    a.ip_blkid.bi_hi == b.ip_blkid.bi_hi && a.ip_blkid.bi_lo == b.ip_blkid.bi_lo && a.ip_posid == b.ip_posid
}

/// The decoded bucket holding `bucket_id` as `snapshot` sees it.
///
/// # Safety
/// `store` must be the open store of `config`'s table.
pub unsafe fn fetch_bucket(
    config: &Config,
    shape: &TableShape,
    store: pg_sys::Relation,
    bucket_id: i64,
    snapshot: pg_sys::Snapshot,
) -> Option<Rc<LoadedBucket>> {
    // SAFETY: `store` is the open store of `config`'s table (fetch_bucket's contract), config.id_index its
    // bucket_id index.
    let found = unsafe { find_bucket_tuple(store, config.id_index, bucket_id, snapshot) }?;
    // SAFETY: `found` is the palloc'd copy find_bucket_tuple returned, owned here; its TID is a plain field.
    let found_tid = unsafe { (*found).t_self };
    let cached = FETCHED.with(|f| {
        f.borrow().as_ref().and_then(|(relid, b)| {
            (*relid == config.relid && b.bucket_id == bucket_id && same_tid(&b.store_tid, &found_tid)).then(|| b.clone())
        })
    });
    if let Some(b) = cached {
        // SAFETY: `found` is our copy and nothing refers to it once the cached bucket is used instead.
        unsafe { pg_sys::heap_freetuple(found) };
        return Some(b);
    }
    // SAFETY: `found` is a valid copy of a tuple of `store`; read_bucket allocates in the current memory context.
    let stored = unsafe { read_bucket(store, found) };
    let loaded = Rc::new(load(config, shape, &stored));
    FETCHED.with(|f| *f.borrow_mut() = Some((config.relid, loaded.clone())));
    Some(loaded)
}

/// Attribute indexes (attnum - 1) whose value changes from row to row within
/// the bucket: the decoded payload columns. Everything else in the slot (meta,
/// defaults of missing columns, NULLs of skipped ones) is the same for every row.
pub fn varying_columns(shape: &TableShape, bucket: &LoadedBucket) -> Vec<usize> {
    shape
        .attrs
        .iter()
        .enumerate()
        .filter(|(i, a)| {
            matches!(a.role, Role::Time | Role::Measurement)
                && bucket.columns[*i].is_some()
                && !bucket.skipped.as_ref().is_some_and(|s| s[*i])
        })
        .map(|(i, _)| i)
        .collect()
}

/// Row `row` of varying column `i` (`col`, decoded): its datum and whether it is NULL.
///
/// # Safety
/// `col` must be column `i` of the bucket `prepared` was made for.
#[inline]
pub unsafe fn varying_datum(shape: &TableShape, col: &Column, prepared: &Prepared, i: usize, row: usize) -> (pg_sys::Datum, bool) {
    if col.is_null(row) {
        return (pg_sys::Datum::from(0), true);
    }
    match prepared.columns[i].as_ref() {
        Some(datums) => (datums[row], false),
        // SAFETY: `col` was decoded with attribute i's storage kind, as column_datum requires.
        None => (unsafe { datum::column_datum(col, row, shape.attrs[i].layout()) }, false),
    }
}

/// Moves a slot filled by `fill_slot` for another row of the same bucket to
/// `row`, touching only the `varying` columns.
///
/// # Safety
/// `slot` must hold a row of `bucket` written by `fill_slot` with the same `prepared`.
pub unsafe fn refill_slot(
    shape: &TableShape,
    bucket: &LoadedBucket,
    prepared: &Prepared,
    varying: &[usize],
    row: usize,
    slot: *mut pg_sys::TupleTableSlot,
) {
    // SAFETY: `slot` holds a row fill_slot wrote (refill_slot's contract): a virtual slot, valid for this call.
    let (values, nulls) = unsafe { ((*slot).tts_values, (*slot).tts_isnull) };
    for &i in varying {
        let col = bucket.columns[i].as_ref().expect("varying columns are decoded");
        // SAFETY: `col` is column i of `bucket`, which `prepared` was made for.
        let (value, is_null) = unsafe { varying_datum(shape, col, prepared, i, row) };
        // SAFETY: `i` comes from varying_columns, an attribute index below the slot's natts, so it lies
        // inside the tts_isnull and tts_values arrays.
        unsafe {
            *nulls.add(i) = is_null;
            if !is_null {
                *values.add(i) = value;
            }
        }
    }
    // SAFETY: `slot` holds a row of `bucket` (refill_slot's contract), now row `row`.
    unsafe { set_identity(bucket, row, slot) };
}
