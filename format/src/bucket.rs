//! A bucket payload: every measurement column of one bucket, each compressed
//! with the codec for its kind.
//!
//! Layout (version 5, written by 0.6.0: a directory, then the columns'
//! bytes in its order, so that a reader needing the first columns reads a
//! prefix of the payload, `prefix_len`):
//! ```text
//! u8 version | varint rows | varint columns |
//! per column: varint attnum | u8 kind + 16 * flags | [varint validity length] | varint body length |
//! per column: [validity] | body
//! ```
//! Versions 2-4 interleave them instead:
//! ```text
//! u8 version | varint rows | varint columns |
//! per column: varint attnum | u8 kind + 16 * flags | [chunk validity] | chunk body
//! ```
//! Version 3 adds the Document kind; version 4 drops the count an integer or
//! float body started with, since the column's row count and validity give
//! it, adds the integer codec's linear transform, and stores ordered floats'
//! keys from that of 1.0 (bodies are the same in version 5).
//! Version 1 (0.5.0 and earlier, still read) has a byte for the kind and one
//! for the flags, validity only as a bitmap, and booleans only as raw bits.
//! Flags: bit 0, NULLs: the column has a validity chunk; bit 1 (version 2), it
//! holds the NULL rows' positions (integer codec, ascending) rather than a
//! bitmap of the rows present, whichever is smaller. A version-2 boolean body
//! is `varint n | u8 form | ...`: form 0 raw bits, form 1 runs (`u8 first
//! value | integer codec of the run lengths`). Integer blocks of version 2 may
//! be packed in mixed radix, floats held as ordered integers
//! (`codec::int`, `codec::float`).
//! Columns are keyed by attribute number, which Postgres never reuses, so a
//! bucket written before `ADD COLUMN` / `DROP COLUMN` still reads correctly:
//! a column it lacks is NULL (or the column's default), a dropped one is skipped.
//! The directory lets a reader decode only the columns a query needs.

use crate::bits::{pack_bools, put_varint, unpack_bools, Cursor};
use crate::codec::{bytes, document, float, int};
use crate::column::{ByteValues, Column, ColumnKind, Values};
use crate::error::{DecodeError, Result};

pub const FORMAT_VERSION: u8 = 5;
/// No bucket may hold more rows than this, whatever the settings say; bounds
/// what a corrupt payload can make the decoder allocate.
pub const MAX_BUCKET_ROWS: usize = 1 << 16;
const MAX_COLUMNS: usize = 1600;
const FLAG_HAS_NULLS: u8 = 1;
const FLAG_NULL_POSITIONS: u8 = 2;
const BOOL_BITS: u8 = 0;
const BOOL_RUNS: u8 = 1;

pub fn encode_bucket(rows: usize, columns: &[Column]) -> Vec<u8> {
    assert!(rows <= MAX_BUCKET_ROWS, "bucket of {rows} rows exceeds the format limit");
    let mut out = vec![FORMAT_VERSION];
    put_varint(&mut out, rows as u64);
    put_varint(&mut out, columns.len() as u64);
    // The directory first, the columns' bytes after it: a reader that needs
    // the first columns reads a prefix of the payload.
    let mut data = Vec::new();
    for col in columns {
        assert_eq!(col.len(), rows, "column {} has {} rows, bucket {rows}", col.attnum, col.len());
        put_varint(&mut out, u64::from(col.attnum));
        let has_nulls = col.validity.as_ref().is_some_and(|v| v.iter().any(|x| !x));
        let present: Option<&[bool]> = if has_nulls { col.validity.as_deref() } else { None };
        let validity = present.map(encode_validity);
        let flags = match &validity {
            None => 0,
            Some((positions, _)) => FLAG_HAS_NULLS | if *positions { FLAG_NULL_POSITIONS } else { 0 },
        };
        out.push(col.kind as u8 | flags << 4);
        if let Some((_, chunk)) = validity {
            put_varint(&mut out, chunk.len() as u64);
            data.extend_from_slice(&chunk);
        }
        let keep = |i: usize| present.is_none_or(|v| v[i]);
        let mut body = Vec::new();
        match (&col.values, col.kind) {
            (Values::Int(v), _) => {
                let vals: Vec<i64> = v.iter().enumerate().filter(|(i, _)| keep(*i)).map(|(_, x)| *x).collect();
                int::encode_body(&vals, &mut body);
            }
            (Values::Float(v), kind) => {
                let vals: Vec<f64> = v.iter().enumerate().filter(|(i, _)| keep(*i)).map(|(_, x)| *x).collect();
                float::encode(&vals, kind == ColumnKind::Float32, &mut body);
            }
            (Values::Bool(v), _) => {
                let vals: Vec<bool> = v.iter().enumerate().filter(|(i, _)| keep(*i)).map(|(_, x)| *x).collect();
                encode_bools(&vals, &mut body);
            }
            (Values::Bytes(v), kind) => {
                let mut vals = ByteValues::default();
                v.iter().enumerate().filter(|(i, _)| keep(*i)).for_each(|(_, x)| vals.push(x));
                if kind == ColumnKind::Document {
                    document::encode(&vals, &mut body);
                } else {
                    bytes::encode(&vals, &mut body);
                }
            }
        }
        put_varint(&mut out, body.len() as u64);
        data.extend_from_slice(&body);
    }
    out.extend_from_slice(&data);
    out
}

/// The validity of a column with NULLs: (as positions?, chunk). The NULL
/// rows' positions when they are few (an int column of ascending numbers,
/// delta-coded), else the bitmap of the present rows.
fn encode_validity(valid: &[bool]) -> (bool, Vec<u8>) {
    let bitmap = pack_bools(valid.iter().copied());
    let nulls: Vec<i64> = valid.iter().enumerate().filter(|(_, p)| !**p).map(|(i, _)| i as i64).collect();
    if nulls.len() * 8 >= bitmap.len() * 8 {
        return (false, bitmap);
    }
    let mut positions = Vec::new();
    int::encode(&nulls, &mut positions);
    if positions.len() < bitmap.len() { (true, positions) } else { (false, bitmap) }
}

fn decode_validity(bytes: &[u8], rows: usize, positions: bool) -> Result<Vec<bool>> {
    if !positions {
        return unpack_bools(bytes, rows);
    }
    let mut c = Cursor::new(bytes);
    let nulls = int::decode(&mut c, rows)?;
    if !c.is_empty() {
        return Err(DecodeError::Invalid("trailing bytes after NULL positions"));
    }
    let mut valid = vec![true; rows];
    let mut last = -1i64;
    for p in nulls {
        if p <= last || p >= rows as i64 {
            return Err(DecodeError::Invalid("NULL positions out of order or range"));
        }
        valid[p as usize] = false;
        last = p;
    }
    Ok(valid)
}

/// `varint n | u8 form | ...`: raw bits, or runs when fewer bytes.
fn encode_bools(vals: &[bool], out: &mut Vec<u8>) {
    put_varint(out, vals.len() as u64);
    let bits = pack_bools(vals.iter().copied());
    let mut runs = Vec::new();
    if let Some(&first) = vals.first() {
        let mut lengths = Vec::new();
        let mut len = 0i64;
        let mut current = first;
        for &v in vals {
            if v == current {
                len += 1;
            } else {
                lengths.push(len);
                current = v;
                len = 1;
            }
        }
        lengths.push(len);
        runs.push(u8::from(first));
        int::encode(&lengths, &mut runs);
    }
    if !vals.is_empty() && runs.len() < bits.len() {
        out.push(BOOL_RUNS);
        out.extend_from_slice(&runs);
    } else {
        out.push(BOOL_BITS);
        out.extend_from_slice(&bits);
    }
}

fn decode_bools(c: &mut Cursor, limit: usize, version: u8) -> Result<Vec<bool>> {
    let n = c.len("bool count", limit)?;
    let form = if version >= 2 { c.u8("bool form")? } else { BOOL_BITS };
    match form {
        BOOL_BITS => unpack_bools(c.take(n.div_ceil(8), "bools")?, n),
        BOOL_RUNS => {
            let mut v = match c.u8("first bool")? {
                0 => false,
                1 => true,
                _ => return Err(DecodeError::Invalid("bool run value")),
            };
            let lengths = int::decode(c, n)?;
            let mut out = Vec::with_capacity(n);
            for len in lengths {
                if len <= 0 || len as u64 > (n - out.len()) as u64 {
                    return Err(DecodeError::Invalid("bool run length"));
                }
                out.resize(out.len() + len as usize, v);
                v = !v;
            }
            if out.len() != n {
                return Err(DecodeError::Invalid("bool runs short of their count"));
            }
            Ok(out)
        }
        tag => Err(DecodeError::UnknownTag { what: "bool form", tag }),
    }
}

/// A parsed directory over an encoded bucket; columns decode on demand.
pub struct BucketReader<'a> {
    rows: usize,
    columns: Vec<EncodedColumn<'a>>,
    /// Columns whose bytes lie past the prefix read (`parse_prefix`).
    absent: Vec<u16>,
}

/// One column's entry in a directory: attnum, kind, its validity's length and whether it holds NULL positions
/// (if it has NULLs), its body's length.
struct Entry {
    attnum: u16,
    kind: ColumnKind,
    validity: Option<(usize, bool)>,
    body: usize,
}

/// The header and directory of a payload: version, rows, and (version 5)
/// the entries with where the columns' bytes start, else None (the columns
/// are interleaved with it and are read by `parse_interleaved`).
fn read_directory(c: &mut Cursor, total: usize) -> Result<(u8, usize, Option<Vec<Entry>>)> {
    let version = c.u8("version")?;
    if version == 0 || version > FORMAT_VERSION {
        return Err(DecodeError::UnsupportedVersion(version));
    }
    let rows = c.len("row count", MAX_BUCKET_ROWS)?;
    if version < 5 {
        return Ok((version, rows, None));
    }
    let ncols = c.len("column count", MAX_COLUMNS)?;
    let mut entries = Vec::with_capacity(ncols);
    for _ in 0..ncols {
        let (attnum, kind, flags) = column_head(c, version)?;
        let validity = if flags & FLAG_HAS_NULLS != 0 { Some((c.len("validity length", total)?, flags & FLAG_NULL_POSITIONS != 0)) } else { None };
        let body = c.len("column body length", total)?;
        entries.push(Entry { attnum, kind, validity, body });
    }
    Ok((version, rows, Some(entries)))
}

/// A column's attnum, kind and flags, as every version writes them before its bytes.
fn column_head(c: &mut Cursor, version: u8) -> Result<(u16, ColumnKind, u8)> {
    let attnum = u16::try_from(c.varint("attnum")?).map_err(|_| DecodeError::Invalid("attnum out of range"))?;
    let (tag, flags, known) = if version == 1 {
        (c.u8("column kind")?, c.u8("column flags")?, FLAG_HAS_NULLS)
    } else {
        let b = c.u8("column kind")?;
        (b & 15, b >> 4, FLAG_HAS_NULLS | FLAG_NULL_POSITIONS)
    };
    let kind = ColumnKind::from_tag(tag)
        .filter(|k| *k != ColumnKind::Document || version >= 3)
        .ok_or(DecodeError::UnknownTag { what: "column kind", tag })?;
    if flags & !known != 0 || flags == FLAG_NULL_POSITIONS {
        return Err(DecodeError::Invalid("unknown column flags"));
    }
    Ok((attnum, kind, flags))
}

/// How many leading bytes of a payload hold every column `wanted` names
/// (by attnum), judged from its first bytes `head`: None when `head` is too
/// short to hold the directory, or the payload is of a version whose
/// columns are not laid out after it (read it whole then; its parse reports
/// any corruption).
pub fn prefix_len(head: &[u8], wanted: impl Fn(u16) -> bool) -> Option<usize> {
    let mut c = Cursor::new(head);
    let (_, _, entries) = read_directory(&mut c, usize::MAX >> 1).ok()?;
    let mut end = head.len() - c.remaining();
    let mut needed = end;
    for e in entries? {
        end = end.checked_add(e.validity.map_or(0, |(n, _)| n))?.checked_add(e.body)?;
        if wanted(e.attnum) {
            needed = end;
        }
    }
    Some(needed)
}

pub struct EncodedColumn<'a> {
    pub attnum: u16,
    pub kind: ColumnKind,
    rows: usize,
    version: u8,
    /// The validity chunk, and whether it holds NULL positions (else a bitmap).
    validity: Option<(&'a [u8], bool)>,
    body: &'a [u8],
}

impl<'a> BucketReader<'a> {
    pub fn parse(bytes: &'a [u8]) -> Result<Self> {
        Self::parse_prefix(bytes, bytes.len())
    }

    /// Parses the first `bytes` of a payload of `total` bytes (version 5;
    /// older payloads only whole): the columns whose bytes lie past them
    /// are absent, and asking for one is an error.
    pub fn parse_prefix(bytes: &'a [u8], total: usize) -> Result<Self> {
        if bytes.len() > total {
            return Err(DecodeError::Invalid("payload prefix longer than the payload"));
        }
        let mut c = Cursor::new(bytes);
        let (version, rows, entries) = read_directory(&mut c, total)?;
        let Some(entries) = entries else {
            if bytes.len() != total {
                return Err(DecodeError::Invalid("a payload of this version is read whole"));
            }
            return Self::parse_interleaved(c, version, rows);
        };
        let mut start = bytes.len() - c.remaining();
        let mut columns = Vec::with_capacity(entries.len());
        let mut absent = Vec::new();
        for e in entries {
            let body_start = start.checked_add(e.validity.map_or(0, |(n, _)| n)).ok_or(DecodeError::Invalid("column lengths overflow"))?;
            let end = body_start.checked_add(e.body).ok_or(DecodeError::Invalid("column lengths overflow"))?;
            if end > total {
                return Err(DecodeError::Truncated("column bytes"));
            }
            if end > bytes.len() {
                absent.push(e.attnum);
            } else {
                let validity = e.validity.map(|(_, positions)| (&bytes[start..body_start], positions));
                columns.push(EncodedColumn { attnum: e.attnum, kind: e.kind, rows, version, validity, body: &bytes[body_start..end] });
            }
            start = end;
        }
        if start != total {
            return Err(DecodeError::Invalid("trailing bytes after last column"));
        }
        Ok(BucketReader { rows, columns, absent })
    }

    /// Versions 1-4: each column's header, validity and body in turn.
    fn parse_interleaved(mut c: Cursor<'a>, version: u8, rows: usize) -> Result<Self> {
        let ncols = c.len("column count", MAX_COLUMNS)?;
        let mut columns = Vec::with_capacity(ncols);
        for _ in 0..ncols {
            let (attnum, kind, flags) = column_head(&mut c, version)?;
            let validity =
                if flags & FLAG_HAS_NULLS != 0 { Some((c.chunk("validity")?, flags & FLAG_NULL_POSITIONS != 0)) } else { None };
            let body = c.chunk("column body")?;
            columns.push(EncodedColumn { attnum, kind, rows, version, validity, body });
        }
        if !c.is_empty() {
            return Err(DecodeError::Invalid("trailing bytes after last column"));
        }
        Ok(BucketReader { rows, columns, absent: Vec::new() })
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    /// The columns read: all of them, but for a prefix (`parse_prefix`),
    /// only those within it (`column` tells an absent one from a missing one).
    pub fn columns(&self) -> &[EncodedColumn<'a>] {
        &self.columns
    }

    /// The column of `attnum`; None if the bucket has none (written before
    /// the column was added). An error if its bytes were not read.
    pub fn column(&self, attnum: u16) -> Result<Option<&EncodedColumn<'a>>> {
        if self.absent.contains(&attnum) {
            return Err(DecodeError::Invalid("column lies past the part of the payload read"));
        }
        Ok(self.columns.iter().find(|c| c.attnum == attnum))
    }

    pub fn decode_all(&self) -> Result<Vec<Column>> {
        if !self.absent.is_empty() {
            return Err(DecodeError::Invalid("columns lie past the part of the payload read"));
        }
        self.columns.iter().map(EncodedColumn::decode).collect()
    }
}

impl EncodedColumn<'_> {
    pub fn compressed_bytes(&self) -> usize {
        self.body.len() + self.validity.map_or(0, |(v, _)| v.len())
    }

    pub fn decode(&self) -> Result<Column> {
        self.decode_keys(None)
    }

    /// Like `decode`; a Document column's objects keep only the top-level
    /// fields `keys` names, when given (`codec::document::decode_keys`).
    pub fn decode_keys(&self, keys: Option<&[Vec<u8>]>) -> Result<Column> {
        self.decode_rows(keys, None)
    }

    /// Like `decode_keys`; of a Document column stored by path, only the rows
    /// `rows` marks (one flag per row, when given) are built: the others read
    /// as NULL, for a reader that never looks at them.
    pub fn decode_rows(&self, keys: Option<&[Vec<u8>]>, rows: Option<&[bool]>) -> Result<Column> {
        if rows.is_some_and(|r| r.len() != self.rows) {
            return Err(DecodeError::Invalid("selected rows differ from the row count"));
        }
        let validity = match self.validity {
            Some((bytes, positions)) => Some(decode_validity(bytes, self.rows, positions)?),
            None => None,
        };
        let present = validity.as_ref().map_or(self.rows, |v| v.iter().filter(|x| **x).count());
        // Per present value: whether its row is wanted.
        let wanted: Option<Vec<bool>> = rows.filter(|_| self.kind == ColumnKind::Document).map(|r| match &validity {
            Some(v) => v.iter().zip(r).filter(|(p, _)| **p).map(|(_, w)| *w).collect(),
            None => r.to_vec(),
        });
        let mut c = Cursor::new(self.body);
        let values = match self.kind {
            ColumnKind::Timestamp | ColumnKind::Int => {
                Values::Int(if self.version >= 4 { int::decode_body(&mut c, present)? } else { int::decode(&mut c, present)? })
            }
            // A float4 is stored widened; the decimal codec may return a nearby
            // f64 that narrows to the same f32. Canonicalise, so that decoded
            // values compare equal to freshly widened ones.
            ColumnKind::Float64 | ColumnKind::Float32 => {
                let values = if self.version >= 4 { float::decode(&mut c, present)? } else { float::decode_counted(&mut c, present)? };
                Values::Float(if self.kind == ColumnKind::Float32 { values.into_iter().map(|v| v as f32 as f64).collect() } else { values })
            }
            ColumnKind::Bool => Values::Bool(decode_bools(&mut c, present, self.version)?),
            ColumnKind::Bytes => Values::Bytes(bytes::decode(&mut c, present)?),
            ColumnKind::Document => Values::Bytes(document::decode_selected(&mut c, present, keys, wanted.as_deref())?),
        };
        if values.len() != present {
            return Err(DecodeError::Invalid("column value count differs from its row count"));
        }
        if !c.is_empty() {
            return Err(DecodeError::Invalid("trailing bytes in column body"));
        }
        let values = expand(values, validity.as_deref());
        // Rows not built read as NULL.
        let validity = match (rows.filter(|_| self.kind == ColumnKind::Document), validity) {
            (Some(r), Some(v)) => Some(v.iter().zip(r).map(|(p, w)| *p && *w).collect()),
            (Some(r), None) => Some(r.to_vec()),
            (None, v) => v,
        };
        Ok(Column { attnum: self.attnum, kind: self.kind, values, validity })
    }
}

impl EncodedColumn<'_> {
    /// For a Document column stored by path: the keys of its documents' top-level objects.
    pub fn top_keys(&self) -> Result<Option<Vec<Vec<u8>>>> {
        if self.kind != ColumnKind::Document {
            return Ok(None);
        }
        let present = match self.validity {
            Some((bytes, positions)) => decode_validity(bytes, self.rows, positions)?.iter().filter(|x| **x).count(),
            None => self.rows,
        };
        document::top_keys(&mut Cursor::new(self.body), present)
    }

    /// For a Document column: top-level field `key` of every row (a NULL row
    /// reads as `Field::NoObject`), decoded from that field's sub-column
    /// alone. None when the documents must be read whole (a column kept as
    /// bytes, or of another kind).
    pub fn decode_field(&self, key: &[u8]) -> Result<Option<document::Fields>> {
        if self.kind != ColumnKind::Document {
            return Ok(None);
        }
        let validity = match self.validity {
            Some((bytes, positions)) => Some(decode_validity(bytes, self.rows, positions)?),
            None => None,
        };
        let present = validity.as_ref().map_or(self.rows, |v| v.iter().filter(|x| **x).count());
        let mut c = Cursor::new(self.body);
        let Some(fields) = document::decode_field(&mut c, present, key)? else { return Ok(None) };
        if fields.len() != present {
            return Err(DecodeError::Invalid("column value count differs from its row count"));
        }
        let Some(valid) = validity else { return Ok(Some(fields)) };
        Ok(Some(fields.spread(&valid)))
    }
}

/// Spreads the present values over all rows, placeholders where NULL.
fn expand(values: Values, validity: Option<&[bool]>) -> Values {
    let Some(valid) = validity else { return values };
    fn spread<T: Clone>(src: Vec<T>, valid: &[bool], fill: T) -> Vec<T> {
        let mut it = src.into_iter();
        valid.iter().map(|&p| if p { it.next().expect("counted") } else { fill.clone() }).collect()
    }
    match values {
        Values::Int(v) => Values::Int(spread(v, valid, 0)),
        Values::Float(v) => Values::Float(spread(v, valid, 0.0)),
        Values::Bool(v) => Values::Bool(spread(v, valid, false)),
        Values::Bytes(v) => Values::Bytes(v.spread(valid)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(rows: usize, col: &Column) -> Vec<u8> {
        let bytes = encode_bucket(rows, std::slice::from_ref(col));
        let back = BucketReader::parse(&bytes).unwrap().decode_all().unwrap();
        assert_eq!(&back[0], col);
        bytes
    }

    #[test]
    fn rare_nulls_are_stored_as_positions() {
        let mut col = Column::new(4, ColumnKind::Int);
        (0..360).for_each(|i| if i % 90 == 7 { col.push_null() } else { col.push_int(i) });
        let bytes = round_trip(360, &col);
        // version, rows (2 bytes), columns, attnum, then kind and flags in one byte.
        assert_eq!(bytes[5] >> 4, FLAG_HAS_NULLS | FLAG_NULL_POSITIONS);
        let mut dense = Column::new(4, ColumnKind::Int);
        (0..360).for_each(|i| if i % 3 == 0 { dense.push_null() } else { dense.push_int(i) });
        assert_eq!(round_trip(360, &dense)[5] >> 4, FLAG_HAS_NULLS);
    }

    #[test]
    fn booleans_that_rarely_flip_are_stored_as_runs() {
        let mut col = Column::new(2, ColumnKind::Bool);
        (0..1000).for_each(|i| col.push_bool((i / 300) % 2 == 1));
        assert!(round_trip(1000, &col).len() < 30);
        let mut noisy = Column::new(2, ColumnKind::Bool);
        (0..1000).for_each(|i| noisy.push_bool((i * 7919) % 3 == 0));
        round_trip(1000, &noisy);
        round_trip(0, &Column::new(2, ColumnKind::Bool));
    }

    #[test]
    fn version_4_bodies_leave_out_their_counts() {
        let mut time = Column::new(1, ColumnKind::Timestamp);
        let mut walk = Column::new(3, ColumnKind::Float64);
        let mut x = 100.0f64;
        for i in 0..360i64 {
            time.push_int(1_700_000_000_000_000 + i * 10_000_000);
            x += ((i * 7919 % 1000) as f64 - 499.5) * 1e-3 / 3.0;
            walk.push_float(x);
        }
        let bytes = encode_bucket(360, &[time.clone(), walk.clone()]);
        let reader = BucketReader::parse(&bytes).unwrap();
        assert_eq!(reader.decode_all().unwrap(), vec![time, walk]);
        // The time: the linear transform (4), an 8-byte first value and the step; no count, no blocks.
        assert_eq!(reader.columns()[0].body.len(), 1 + 8 + 4);
        assert_eq!(reader.columns()[0].body[0], 4);
        // The walk: ordered keys (3), then the integer body's transform at once.
        assert_eq!(reader.columns()[1].body[0], 3);
        assert!(reader.columns()[1].body[1] <= 3, "{}", reader.columns()[1].body[1]);
    }

    #[test]
    fn version_1_flags_and_forms_are_rejected_where_unknown() {
        // Version 2 with the positions flag but no NULLs flag.
        let bytes = [2u8, 1, 1, 1, ColumnKind::Int as u8 | FLAG_NULL_POSITIONS << 4, 0];
        assert!(BucketReader::parse(&bytes).is_err());
        // Version 6 is not written yet.
        assert!(BucketReader::parse(&[6u8, 0, 0]).is_err());
        // Version 2 had no documents.
        assert!(BucketReader::parse(&[2u8, 1, 1, 1, ColumnKind::Document as u8, 0]).is_err());
    }
}
