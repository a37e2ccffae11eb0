//! One row's measurement values, for rows kept outside buckets until they are
//! drained into them (the tail of rows written a few at a time). Values are
//! keyed by attribute number, as in a bucket payload, so a row written before
//! an `ADD COLUMN` or `DROP COLUMN` still reads back (a column missing here
//! reads as its default, one dropped since is skipped).
//!
//! Layout: a version byte, the number of values (varint), then per value its
//! attnum (varint), a tag (the column kind times two, plus one for NULL) and,
//! unless NULL: integers and timestamps zigzag varints, float64 eight bytes,
//! float32 four (its values were widened from f32, so narrowing is exact),
//! booleans one byte, bytes a varint length and the bytes.

use crate::bits::{put_varint, unzigzag, zigzag, Cursor};
use crate::column::{Column, ColumnKind, Values};
use crate::error::{DecodeError, Result};

pub const ROW_VERSION: u8 = 1;

/// A value of a row, as appended to a column.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value<'a> {
    Null,
    Int(i64),
    Float(f64),
    Bool(bool),
    Bytes(&'a [u8]),
}

/// Encodes a row's values: (attnum, kind, value), in attnum order.
pub fn encode_row(values: &[(u16, ColumnKind, Value)], out: &mut Vec<u8>) {
    out.push(ROW_VERSION);
    put_varint(out, values.len() as u64);
    for &(attnum, kind, value) in values {
        put_varint(out, u64::from(attnum));
        out.push((kind as u8) * 2 + matches!(value, Value::Null) as u8);
        match (kind, value) {
            (_, Value::Null) => {}
            (ColumnKind::Timestamp | ColumnKind::Int, Value::Int(v)) => put_varint(out, zigzag(v)),
            (ColumnKind::Float64, Value::Float(v)) => out.extend_from_slice(&v.to_bits().to_le_bytes()),
            (ColumnKind::Float32, Value::Float(v)) => out.extend_from_slice(&(v as f32).to_bits().to_le_bytes()),
            (ColumnKind::Bool, Value::Bool(v)) => out.push(v as u8),
            (ColumnKind::Bytes | ColumnKind::Document, Value::Bytes(v)) => {
                put_varint(out, v.len() as u64);
                out.extend_from_slice(v);
            }
            (kind, value) => panic!("a {value:?} is no value of a {kind:?} column"),
        }
    }
}

/// The values of an encoded row, in their stored order.
pub struct RowReader<'a> {
    cursor: Cursor<'a>,
    left: usize,
}

impl<'a> RowReader<'a> {
    pub fn parse(bytes: &'a [u8]) -> Result<RowReader<'a>> {
        let mut cursor = Cursor::new(bytes);
        let version = cursor.u8("row version")?;
        if version != ROW_VERSION {
            return Err(DecodeError::UnsupportedVersion(version));
        }
        // Each value takes at least two bytes: the count is bounded by the input.
        let left = cursor.len("row value count", bytes.len() / 2)?;
        Ok(RowReader { cursor, left })
    }

    /// The next (attnum, kind, value), None after the last; an error on corrupt input.
    pub fn next_value(&mut self) -> Result<Option<(u16, ColumnKind, Value<'a>)>> {
        if self.left == 0 {
            return if self.cursor.is_empty() { Ok(None) } else { Err(DecodeError::Invalid("bytes after the row's last value")) };
        }
        self.left -= 1;
        let attnum = self.cursor.varint("row attnum")?;
        let attnum = u16::try_from(attnum).map_err(|_| DecodeError::Invalid("row attnum out of range"))?;
        let tag = self.cursor.u8("row value tag")?;
        let kind = ColumnKind::from_tag(tag / 2).ok_or(DecodeError::UnknownTag { what: "row value", tag })?;
        if tag % 2 == 1 {
            return Ok(Some((attnum, kind, Value::Null)));
        }
        let value = match kind {
            ColumnKind::Timestamp | ColumnKind::Int => Value::Int(unzigzag(self.cursor.varint("row integer")?)),
            ColumnKind::Float64 => Value::Float(f64::from_bits(self.cursor.u64_le("row float64")?)),
            ColumnKind::Float32 => {
                let b = self.cursor.take(4, "row float32")?;
                Value::Float(f32::from_bits(u32::from_le_bytes(b.try_into().expect("4 bytes"))) as f64)
            }
            ColumnKind::Bool => match self.cursor.u8("row bool")? {
                0 => Value::Bool(false),
                1 => Value::Bool(true),
                _ => return Err(DecodeError::Invalid("row bool is neither 0 nor 1")),
            },
            ColumnKind::Bytes | ColumnKind::Document => Value::Bytes(self.cursor.chunk("row bytes")?),
        };
        Ok(Some((attnum, kind, value)))
    }
}

/// Appends `value` to `col` (whose kind must be the value's: a corrupt row
/// with another kind for the column is an error, never a panic).
pub fn push_value(col: &mut Column, kind: ColumnKind, value: Value) -> Result<()> {
    if !col.kind.reads(kind) {
        return Err(DecodeError::Invalid("row value of another kind than its column"));
    }
    match value {
        Value::Null => col.push_null(),
        Value::Int(v) => col.push_int(v),
        Value::Float(v) => col.push_float(v),
        Value::Bool(v) => col.push_bool(v),
        Value::Bytes(v) => col.push_bytes(v),
    }
    Ok(())
}

/// The value of `col` at `row`, as a row holds it (the inverse of `push_value`).
pub fn value_at(col: &Column, row: usize) -> Value<'_> {
    if col.is_null(row) {
        return Value::Null;
    }
    match &col.values {
        Values::Int(v) => Value::Int(v[row]),
        Values::Float(v) => Value::Float(v[row]),
        Values::Bool(v) => Value::Bool(v[row]),
        Values::Bytes(v) => Value::Bytes(v.get(row).unwrap_or(&[])),
    }
}

/// Encodes row `row` of `columns` (each knows its attnum and kind).
pub fn encode_columns_row(columns: &[&Column], row: usize, out: &mut Vec<u8>) {
    let values: Vec<(u16, ColumnKind, Value)> = columns.iter().map(|c| (c.attnum, c.kind, value_at(c, row))).collect();
    encode_row(&values, out);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(bytes: &[u8]) -> Result<Vec<(u16, ColumnKind, Value<'_>)>> {
        let mut r = RowReader::parse(bytes)?;
        let mut out = Vec::new();
        while let Some(v) = r.next_value()? {
            out.push(v);
        }
        Ok(out)
    }

    #[test]
    fn round_trips_every_kind_and_edge() {
        let values = [
            (1, ColumnKind::Timestamp, Value::Int(i64::MIN + 1)),
            (3, ColumnKind::Int, Value::Int(-1)),
            (4, ColumnKind::Int, Value::Int(i64::MAX)),
            (5, ColumnKind::Float64, Value::Float(-0.0)),
            (6, ColumnKind::Float64, Value::Float(f64::NAN)),
            (7, ColumnKind::Float32, Value::Float(f32::MIN_POSITIVE as f64)),
            (8, ColumnKind::Bool, Value::Bool(true)),
            (9, ColumnKind::Bytes, Value::Bytes(b"")),
            (10, ColumnKind::Bytes, Value::Bytes(&[0xff; 300])),
            (11, ColumnKind::Float32, Value::Null),
            (2000, ColumnKind::Bytes, Value::Null),
        ];
        let mut out = Vec::new();
        encode_row(&values, &mut out);
        let back = decode(&out).unwrap();
        assert_eq!(back.len(), values.len());
        for (a, b) in values.iter().zip(&back) {
            assert_eq!((a.0, a.1), (b.0, b.1));
            match (a.2, b.2) {
                (Value::Float(x), Value::Float(y)) => assert_eq!(x.to_bits(), y.to_bits()),
                (x, y) => assert_eq!(x, y),
            }
        }
    }

    #[test]
    fn columns_round_trip_row_by_row() {
        let mut a = Column::new(2, ColumnKind::Float64);
        let mut b = Column::new(5, ColumnKind::Bytes);
        for i in 0..4 {
            if i == 2 { a.push_null() } else { a.push_float(i as f64 * 0.5) }
            if i == 1 { b.push_null() } else { b.push_bytes(format!("v{i}").as_bytes()) }
        }
        let mut back = [Column::new(2, ColumnKind::Float64), Column::new(5, ColumnKind::Bytes)];
        for row in 0..4 {
            let mut out = Vec::new();
            encode_columns_row(&[&a, &b], row, &mut out);
            let mut r = RowReader::parse(&out).unwrap();
            while let Some((attnum, kind, value)) = r.next_value().unwrap() {
                let col = back.iter_mut().find(|c| c.attnum == attnum).unwrap();
                push_value(col, kind, value).unwrap();
            }
        }
        assert_eq!(back[0], a);
        assert_eq!(back[1], b);
    }

    #[test]
    fn corrupt_rows_are_errors() {
        let mut out = Vec::new();
        encode_row(&[(1, ColumnKind::Bytes, Value::Bytes(b"abc")), (2, ColumnKind::Bool, Value::Bool(false))], &mut out);
        for cut in 0..out.len() {
            assert!(decode(&out[..cut]).is_err(), "a row cut at {cut} bytes decoded");
        }
        let mut extra = out.clone();
        extra.push(0);
        assert!(decode(&extra).is_err());
        let mut bad_bool = out.clone();
        *bad_bool.last_mut().unwrap() = 7;
        assert!(decode(&bad_bool).is_err());
        let mut bad_tag = out.clone();
        bad_tag[3] = 40;
        assert!(decode(&bad_tag).is_err());
        let mut col = Column::new(1, ColumnKind::Int);
        assert!(push_value(&mut col, ColumnKind::Bytes, Value::Bytes(b"x")).is_err());
    }
}
