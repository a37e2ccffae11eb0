//! A bucket payload: every measurement column of one bucket, each compressed
//! with the codec for its kind.
//!
//! Layout (version 1):
//! ```text
//! u8 version | varint rows | varint columns |
//! per column: varint attnum | u8 kind | u8 flags | [chunk validity] | chunk body
//! ```
//! Columns are keyed by attribute number, which Postgres never reuses, so a
//! bucket written before `ADD COLUMN` / `DROP COLUMN` still reads correctly:
//! a column it lacks is NULL (or the column's default), a dropped one is skipped.
//! The directory lets a reader decode only the columns a query needs.

use crate::bits::{pack_bools, put_chunk, put_varint, unpack_bools, Cursor};
use crate::codec::{bytes, float, int};
use crate::column::{ByteValues, Column, ColumnKind, Values};
use crate::error::{DecodeError, Result};

pub const FORMAT_VERSION: u8 = 1;
/// No bucket may hold more rows than this, whatever the settings say; bounds
/// what a corrupt payload can make the decoder allocate.
pub const MAX_BUCKET_ROWS: usize = 1 << 16;
const MAX_COLUMNS: usize = 1600;
const FLAG_HAS_NULLS: u8 = 1;

pub fn encode_bucket(rows: usize, columns: &[Column]) -> Vec<u8> {
    assert!(rows <= MAX_BUCKET_ROWS, "bucket of {rows} rows exceeds the format limit");
    let mut out = vec![FORMAT_VERSION];
    put_varint(&mut out, rows as u64);
    put_varint(&mut out, columns.len() as u64);
    for col in columns {
        assert_eq!(col.len(), rows, "column {} has {} rows, bucket {rows}", col.attnum, col.len());
        put_varint(&mut out, u64::from(col.attnum));
        out.push(col.kind as u8);
        let has_nulls = col.validity.as_ref().is_some_and(|v| v.iter().any(|x| !x));
        out.push(if has_nulls { FLAG_HAS_NULLS } else { 0 });
        let present: Option<&[bool]> = if has_nulls { col.validity.as_deref() } else { None };
        if let Some(valid) = present {
            put_chunk(&mut out, &pack_bools(valid.iter().copied()));
        }
        let keep = |i: usize| present.is_none_or(|v| v[i]);
        let mut body = Vec::new();
        match (&col.values, col.kind) {
            (Values::Int(v), _) => {
                let vals: Vec<i64> = v.iter().enumerate().filter(|(i, _)| keep(*i)).map(|(_, x)| *x).collect();
                int::encode(&vals, &mut body);
            }
            (Values::Float(v), kind) => {
                let vals: Vec<f64> = v.iter().enumerate().filter(|(i, _)| keep(*i)).map(|(_, x)| *x).collect();
                float::encode(&vals, kind == ColumnKind::Float32, &mut body);
            }
            (Values::Bool(v), _) => {
                let vals: Vec<bool> = v.iter().enumerate().filter(|(i, _)| keep(*i)).map(|(_, x)| *x).collect();
                put_varint(&mut body, vals.len() as u64);
                body.extend_from_slice(&pack_bools(vals.into_iter()));
            }
            (Values::Bytes(v), _) => {
                let mut vals = ByteValues::default();
                v.iter().enumerate().filter(|(i, _)| keep(*i)).for_each(|(_, x)| vals.push(x));
                bytes::encode(&vals, &mut body);
            }
        }
        put_chunk(&mut out, &body);
    }
    out
}

/// A parsed directory over an encoded bucket; columns decode on demand.
pub struct BucketReader<'a> {
    rows: usize,
    columns: Vec<EncodedColumn<'a>>,
}

pub struct EncodedColumn<'a> {
    pub attnum: u16,
    pub kind: ColumnKind,
    rows: usize,
    validity: Option<&'a [u8]>,
    body: &'a [u8],
}

impl<'a> BucketReader<'a> {
    pub fn parse(bytes: &'a [u8]) -> Result<Self> {
        let mut c = Cursor::new(bytes);
        let version = c.u8("version")?;
        if version != FORMAT_VERSION {
            return Err(DecodeError::UnsupportedVersion(version));
        }
        let rows = c.len("row count", MAX_BUCKET_ROWS)?;
        let ncols = c.len("column count", MAX_COLUMNS)?;
        let mut columns = Vec::with_capacity(ncols);
        for _ in 0..ncols {
            let attnum = u16::try_from(c.varint("attnum")?).map_err(|_| DecodeError::Invalid("attnum out of range"))?;
            let tag = c.u8("column kind")?;
            let kind = ColumnKind::from_tag(tag).ok_or(DecodeError::UnknownTag { what: "column kind", tag })?;
            let flags = c.u8("column flags")?;
            if flags & !FLAG_HAS_NULLS != 0 {
                return Err(DecodeError::Invalid("unknown column flags"));
            }
            let validity = if flags & FLAG_HAS_NULLS != 0 { Some(c.chunk("validity")?) } else { None };
            let body = c.chunk("column body")?;
            columns.push(EncodedColumn { attnum, kind, rows, validity, body });
        }
        if !c.is_empty() {
            return Err(DecodeError::Invalid("trailing bytes after last column"));
        }
        Ok(BucketReader { rows, columns })
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn columns(&self) -> &[EncodedColumn<'a>] {
        &self.columns
    }

    pub fn column(&self, attnum: u16) -> Option<&EncodedColumn<'a>> {
        self.columns.iter().find(|c| c.attnum == attnum)
    }

    pub fn decode_all(&self) -> Result<Vec<Column>> {
        self.columns.iter().map(EncodedColumn::decode).collect()
    }
}

impl EncodedColumn<'_> {
    pub fn compressed_bytes(&self) -> usize {
        self.body.len() + self.validity.map_or(0, <[u8]>::len)
    }

    pub fn decode(&self) -> Result<Column> {
        let validity = match self.validity {
            Some(bits) => Some(unpack_bools(bits, self.rows)?),
            None => None,
        };
        let present = validity.as_ref().map_or(self.rows, |v| v.iter().filter(|x| **x).count());
        let mut c = Cursor::new(self.body);
        let values = match self.kind {
            ColumnKind::Timestamp | ColumnKind::Int => Values::Int(int::decode(&mut c, present)?),
            ColumnKind::Float64 => Values::Float(float::decode(&mut c, present)?),
            // A float4 is stored widened; the decimal codec may return a nearby
            // f64 that narrows to the same f32. Canonicalise, so that decoded
            // values compare equal to freshly widened ones.
            ColumnKind::Float32 => Values::Float(float::decode(&mut c, present)?.into_iter().map(|v| v as f32 as f64).collect()),
            ColumnKind::Bool => {
                let n = c.len("bool count", present)?;
                let bits = c.take(n.div_ceil(8), "bools")?;
                Values::Bool(unpack_bools(bits, n)?)
            }
            ColumnKind::Bytes => Values::Bytes(bytes::decode(&mut c, present)?),
        };
        if values.len() != present {
            return Err(DecodeError::Invalid("column value count differs from its row count"));
        }
        if !c.is_empty() {
            return Err(DecodeError::Invalid("trailing bytes in column body"));
        }
        Ok(Column { attnum: self.attnum, kind: self.kind, values: expand(values, validity.as_deref()), validity })
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
