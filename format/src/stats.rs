//! Per-column minimum and maximum of a bucket, kept beside the payload so that
//! scans can skip buckets without decompressing them, and (since 0.5.0) each
//! column's NULL count and sum, so that whole buckets answer count, sum and
//! avg from their headers.
//!
//! Each column's entry starts with a kind tag. Tags 0-2 (min/max only) are
//! what 0.4.0 and earlier wrote and stay readable; tags 3-5 add a summary:
//! a flags byte (bit 0: a sum follows; bit 1: a NULL count follows), the NULL
//! count (varint), the sum (zigzag varint for integers, 8 bytes for floats).
//! Tags 6 and 7 (0.6.0; 7 with NaN) hold a float column whose bounds are
//! decimals `n / 10^k`, as most are: a digits byte k, the bounds' n as zigzag
//! varints, the summary, and its sum as n too when it is one (else, flag bit
//! 2, its 8 bytes). Each is read back bit for bit as the float codec reads
//! decimals (`n as f64 / 10^k`): 9 bytes for a column of whole numbers where
//! the plain form takes 27.

use crate::bits::{put_chunk, put_varint, zigzag, unzigzag, Cursor};
use crate::column::{Column, ColumnKind, Values};
use crate::error::{DecodeError, Result};

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Range {
    Int { min: i64, max: i64 },
    /// NaN is ignored (Postgres sorts it above every number; `has_nan` says it is there).
    Float { min: f64, max: f64, has_nan: bool },
}

#[derive(Clone, Debug, PartialEq)]
pub struct ColumnStats {
    pub attnum: u16,
    pub range: Range,
    /// None in entries written before 0.5.0.
    pub summary: Option<Summary>,
}

/// What a column's rows add up to.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Summary {
    pub nulls: u32,
    /// The sum of the non-NULL values in row order, as Postgres's float8pl /
    /// int8 addition computes it from the first value on; None when there are
    /// none, or when it overflowed (an error the rows must raise themselves).
    pub sum: Option<Sum>,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Sum {
    Int(i64),
    Float(f64),
}

impl ColumnStats {
    /// Whether these statistics, as stored, describe what `fresh` (computed
    /// from the rows) does: a summary only if both have one (earlier releases
    /// wrote none).
    pub fn describes(&self, fresh: &ColumnStats) -> bool {
        let stored_part = ColumnStats { summary: self.summary.and(fresh.summary), ..fresh.clone() };
        self.matches(&stored_part)
    }

    /// Equal, counting NaN bounds (an all-NaN column) as equal to each other.
    pub fn matches(&self, other: &ColumnStats) -> bool {
        let same = |a: f64, b: f64| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
        let same_summary = match (self.summary, other.summary) {
            (None, None) => true,
            (Some(a), Some(b)) => {
                a.nulls == b.nulls
                    && match (a.sum, b.sum) {
                        (None, None) => true,
                        (Some(Sum::Int(x)), Some(Sum::Int(y))) => x == y,
                        (Some(Sum::Float(x)), Some(Sum::Float(y))) => same(x, y),
                        _ => false,
                    }
            }
            _ => false,
        };
        same_summary
            && self.attnum == other.attnum
            && match (self.range, other.range) {
                (Range::Int { min: a, max: b }, Range::Int { min: c, max: d }) => a == c && b == d,
                (Range::Float { min: a, max: b, has_nan: x }, Range::Float { min: c, max: d, has_nan: y }) => {
                    same(a, c) && same(b, d) && x == y
                }
                _ => false,
            }
    }
}

/// A top-level field of a document column read as `(doc->>'key')::float8`:
/// its statistics as a float8 column's (`stats.attnum` the document column's).
#[derive(Clone, Debug, PartialEq)]
pub struct FieldStats {
    pub key: Vec<u8>,
    pub stats: ColumnStats,
}

/// At most this many fields of a document column get statistics, those
/// whose keys are at most `MAX_FIELD_KEY` bytes long: a header stays small
/// (about 1.4 kB at most per document column), read beside every bucket.
pub const MAX_FIELD_STATS: usize = 32;
pub const MAX_FIELD_KEY: usize = 32;

/// The statistics of `(doc->>'key')::float8` for each top-level field of a
/// document column stored by path whose values in this bucket are all
/// decimals float8 reads without refusal, or missing (a missing field or JSON
/// null is NULL); fields holding anything else get none, since the cast may
/// fail on them.
pub fn field_stats(col: &crate::bucket::EncodedColumn) -> Result<Vec<FieldStats>> {
    use crate::codec::document::{CastValue, NumberCast};
    let Some(keys) = col.top_keys()? else { return Ok(Vec::new()) };
    let mut out = Vec::new();
    for key in keys {
        if out.len() == MAX_FIELD_STATS {
            break;
        }
        if key.len() > MAX_FIELD_KEY {
            continue;
        }
        let Some(fields) = col.decode_field(&key)? else { continue };
        let mut values = Column::new(col.attnum, ColumnKind::Float64);
        let all_read = fields.iter().all(|f| match NumberCast::Float8.of(f) {
            CastValue::Float(v) => {
                values.push_float(v);
                true
            }
            CastValue::Null => {
                values.push_null();
                true
            }
            CastValue::Int(_) | CastValue::Evaluate => false,
        });
        if let Some(stats) = all_read.then(|| column_stats(&values)).flatten() {
            out.push(FieldStats { key, stats });
        }
    }
    Ok(out)
}

/// Min/max, NULL count and sum of the non-NULL values of ordered kinds;
/// `None` for all-NULL columns and for kinds whose order lives in Postgres
/// (text collations...).
pub fn column_stats(col: &Column) -> Option<ColumnStats> {
    // One pass per column: this runs for every column of every bucket written.
    let validity = col.validity.as_deref();
    let nulls = || validity.map_or(0, |v| v.iter().filter(|p| !**p).count()) as u32;
    let (range, sum) = match &col.values {
        Values::Int(v) => {
            let mut it = present_values(v, validity);
            let first = it.next()?;
            // No SQL aggregate sums timestamps: their sum would cost bytes for nothing.
            let summed = col.kind != ColumnKind::Timestamp;
            let (mut min, mut max, mut sum) = (first, first, if summed { Some(first) } else { None });
            for x in it {
                min = min.min(x);
                max = max.max(x);
                sum = sum.and_then(|s| s.checked_add(x));
            }
            (Range::Int { min, max }, sum.map(Sum::Int))
        }
        Values::Float(v) => {
            let mut has_nan = false;
            let mut bounds: Option<(f64, f64)> = None;
            for x in present_values(v, validity) {
                if x.is_nan() {
                    has_nan = true;
                } else {
                    bounds = Some(bounds.map_or((x, x), |(lo, hi)| (lo.min(x), hi.max(x))));
                }
            }
            let (min, max) = bounds.unwrap_or((f64::NAN, f64::NAN));
            if bounds.is_none() && !has_nan {
                return None;
            }
            (Range::Float { min, max, has_nan }, float_sum(present_values(v, validity)).map(Sum::Float))
        }
        Values::Bool(_) | Values::Bytes(_) => return None,
    };
    Some(ColumnStats { attnum: col.attnum, range, summary: Some(Summary { nulls: nulls(), sum }) })
}

/// The values of the rows `validity` marks present (all when None).
fn present_values<'a, T: Copy>(values: &'a [T], validity: Option<&'a [bool]>) -> impl Iterator<Item = T> + 'a {
    values.iter().enumerate().filter(move |(i, _)| validity.is_none_or(|v| v[*i])).map(|(_, x)| *x)
}

/// float8pl: `acc + x`, or None where Postgres raises "value out of range:
/// overflow" (an infinite sum of finite operands).
pub fn float8pl(acc: f64, x: f64) -> Option<f64> {
    let sum = acc + x;
    (!(sum.is_infinite() && !acc.is_infinite() && !x.is_infinite())).then_some(sum)
}

/// float8pl over `values` in order: the first value, then `sum + x`; None for
/// no values, or when a finite sum of finite values became infinite (Postgres
/// raises "value out of range: overflow" there).
pub fn float_sum(mut values: impl Iterator<Item = f64>) -> Option<f64> {
    let first = values.next()?;
    values.try_fold(first, float8pl)
}

pub fn encode_stats(stats: &[ColumnStats]) -> Vec<u8> {
    encode_stats_with_fields(stats, &[])
}

/// The column entries, then (when there are any) the document fields' in a
/// section (`SECTION_FIELDS_BY_COLUMN`, a chunk): the number of document
/// columns, and per column its attnum, its number of fields, and per field
/// its key (the length of the prefix it shares with the previous field's,
/// then a chunk of the rest) and an entry without the attnum the column
/// already gave. Readers of the column entries alone stop before the
/// sections, and readers of sections skip those of unknown tags.
pub fn encode_stats_with_fields(stats: &[ColumnStats], fields: &[FieldStats]) -> Vec<u8> {
    let mut out = Vec::new();
    put_varint(&mut out, stats.len() as u64);
    for s in stats {
        encode_entry(&mut out, s);
    }
    if !fields.is_empty() {
        let mut groups: Vec<(u16, Vec<&FieldStats>)> = Vec::new();
        for f in fields {
            match groups.iter_mut().find(|(a, _)| *a == f.stats.attnum) {
                Some((_, g)) => g.push(f),
                None => groups.push((f.stats.attnum, vec![f])),
            }
        }
        let mut section = Vec::new();
        put_varint(&mut section, groups.len() as u64);
        for (attnum, group) in &groups {
            put_varint(&mut section, u64::from(*attnum));
            put_varint(&mut section, group.len() as u64);
            let mut previous: &[u8] = &[];
            for f in group {
                // Keys come in jsonb's order and share prefixes (usage_idle, usage_irq): each is the length it
                // shares with the one before, then the rest.
                let shared = previous.iter().zip(&f.key).take_while(|(a, b)| a == b).count();
                put_varint(&mut section, shared as u64);
                put_chunk(&mut section, &f.key[shared..]);
                encode_body(&mut section, &f.stats);
                previous = &f.key;
            }
        }
        out.push(SECTION_FIELDS_BY_COLUMN);
        put_chunk(&mut out, &section);
    }
    out
}

fn encode_entry(out: &mut Vec<u8>, s: &ColumnStats) {
    put_varint(out, u64::from(s.attnum));
    encode_body(out, s);
}

/// An entry after its attnum.
fn encode_body(out: &mut Vec<u8>, s: &ColumnStats) {
    let summarised = if s.summary.is_some() { SUMMARISED } else { 0 };
    match s.range {
        Range::Int { min, max } => {
            out.push(summarised);
            put_varint(out, zigzag(min));
            put_varint(out, zigzag(max));
        }
        Range::Float { min, max, has_nan } => {
            if let (Some(summary), Some((digits, lo, hi))) = (s.summary, scaled_bounds(min, max)) {
                out.push(if has_nan { SCALED_NAN } else { SCALED });
                out.push(digits as u8);
                put_varint(out, zigzag(lo));
                put_varint(out, zigzag(hi));
                let sum = match summary.sum {
                    Some(Sum::Float(v)) => Some((v, scaled(v, digits))),
                    _ => None,
                };
                let flags = u8::from(sum.is_some()) * HAS_SUM
                    + u8::from(summary.nulls > 0) * HAS_NULLS
                    + u8::from(sum.is_some_and(|(_, n)| n.is_none())) * SUM_RAW;
                out.push(flags);
                if summary.nulls > 0 {
                    put_varint(out, u64::from(summary.nulls));
                }
                match sum {
                    Some((_, Some(n))) => put_varint(out, zigzag(n)),
                    Some((v, None)) => out.extend_from_slice(&v.to_bits().to_le_bytes()),
                    None => {}
                }
                return;
            }
            out.push(summarised + if has_nan { 2 } else { 1 });
            out.extend_from_slice(&min.to_bits().to_le_bytes());
            out.extend_from_slice(&max.to_bits().to_le_bytes());
        }
    }
    if let Some(summary) = s.summary {
        let flags = u8::from(summary.sum.is_some()) * HAS_SUM + u8::from(summary.nulls > 0) * HAS_NULLS;
        out.push(flags);
        if summary.nulls > 0 {
            put_varint(out, u64::from(summary.nulls));
        }
        match summary.sum {
            Some(Sum::Int(v)) => put_varint(out, zigzag(v)),
            Some(Sum::Float(v)) => out.extend_from_slice(&v.to_bits().to_le_bytes()),
            None => {}
        }
    }
}

/// The section of document fields' statistics after the column entries, as
/// written before the fields were grouped by column (each entry with its
/// attnum): still read.
const SECTION_FIELDS: u8 = 1;
/// The same, grouped by document column (one attnum per column).
const SECTION_FIELDS_BY_COLUMN: u8 = 2;

/// Added to a min/max tag (0-2) when a summary follows.
const SUMMARISED: u8 = 3;
/// A summarised float column with decimal bounds (and NaN).
const SCALED: u8 = 6;
const SCALED_NAN: u8 = 7;
const HAS_SUM: u8 = 1;
const HAS_NULLS: u8 = 2;
/// Of a scaled entry: its sum is no decimal of its digits, its 8 bytes follow.
const SUM_RAW: u8 = 4;
const MAX_DIGITS: u32 = 9;
/// Integers above this are not exact in f64.
const MAX_EXACT: f64 = 9_007_199_254_740_992.0;

/// `v` as `n / 10^digits`, bit for bit, if it is one.
fn scaled(v: f64, digits: u32) -> Option<i64> {
    let scale = 10f64.powi(digits as i32);
    let n = (v * scale).round();
    (n.is_finite() && n.abs() < MAX_EXACT && ((n as i64) as f64 / scale).to_bits() == v.to_bits()).then_some(n as i64)
}

/// The fewest digits in which both bounds are decimals.
fn scaled_bounds(min: f64, max: f64) -> Option<(u32, i64, i64)> {
    (0..=MAX_DIGITS).find_map(|k| Some((k, scaled(min, k)?, scaled(max, k)?)))
}

fn unscaled(n: i64, digits: u32) -> f64 {
    n as f64 / 10f64.powi(digits as i32)
}

pub fn decode_stats(bytes: &[u8]) -> Result<Vec<ColumnStats>> {
    let mut c = Cursor::new(bytes);
    decode_entries(&mut c, bytes.len())
}

/// The document fields' entries (none in buckets written before 0.6.0, or without numeric fields).
pub fn decode_field_stats(bytes: &[u8]) -> Result<Vec<FieldStats>> {
    let mut c = Cursor::new(bytes);
    decode_entries(&mut c, bytes.len())?;
    let mut out: Vec<FieldStats> = Vec::new();
    // Sections after the column entries, each a tag and a chunk; a reader skips those it does not know.
    while !c.is_empty() {
        let tag = c.u8("stats section")?;
        let body = c.chunk("stats section body")?;
        let mut c = Cursor::new(body);
        match tag {
            SECTION_FIELDS => {
                let n = c.len("field stats count", body.len())?;
                decode_fields(&mut c, n, None, &mut out)?;
            }
            SECTION_FIELDS_BY_COLUMN => {
                let groups = c.len("field stats columns", body.len())?;
                for _ in 0..groups {
                    let attnum = decode_attnum(&mut c)?;
                    let n = c.len("field stats count", body.len())?;
                    decode_fields(&mut c, n, Some(attnum), &mut out)?;
                }
            }
            _ => continue,
        }
        if !c.is_empty() {
            return Err(DecodeError::Invalid("trailing bytes in field statistics"));
        }
    }
    Ok(out)
}

/// `n` fields, each key sharing a prefix with the one before: with their
/// column's attnum given once (`column`), or each entry its own.
fn decode_fields(c: &mut Cursor, n: usize, column: Option<u16>, out: &mut Vec<FieldStats>) -> Result<()> {
    let start = out.len();
    for _ in 0..n {
        let previous = out[start..].last().map_or(&[][..], |f| &f.key[..]);
        let shared = c.len("field key prefix", previous.len())?;
        let key = [&previous[..shared], c.chunk("field key")?].concat();
        let attnum = match column {
            Some(a) => a,
            None => decode_attnum(c)?,
        };
        out.push(FieldStats { key, stats: decode_body(c, attnum)? });
    }
    Ok(())
}

fn decode_attnum(c: &mut Cursor) -> Result<u16> {
    u16::try_from(c.varint("attnum")?).map_err(|_| DecodeError::Invalid("attnum out of range"))
}

fn decode_entries(c: &mut Cursor, limit: usize) -> Result<Vec<ColumnStats>> {
    let n = c.len("stats count", limit)?;
    decode_entries_n(c, n)
}

fn decode_entries_n(c: &mut Cursor, n: usize) -> Result<Vec<ColumnStats>> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let attnum = decode_attnum(c)?;
        out.push(decode_body(c, attnum)?);
    }
    Ok(out)
}

/// An entry after its attnum.
fn decode_body(c: &mut Cursor, attnum: u16) -> Result<ColumnStats> {
    {
        let tag = c.u8("stats kind")?;
        if tag == SCALED || tag == SCALED_NAN {
            let digits = u32::from(c.u8("stats digits")?);
            if digits > MAX_DIGITS {
                return Err(DecodeError::Invalid("stats digits out of range"));
            }
            let min = unscaled(unzigzag(c.varint("min")?), digits);
            let max = unscaled(unzigzag(c.varint("max")?), digits);
            let flags = c.u8("summary flags")?;
            if flags & !(HAS_SUM | HAS_NULLS | SUM_RAW) != 0 || flags & (HAS_SUM | SUM_RAW) == SUM_RAW {
                return Err(DecodeError::Invalid("unknown summary flags"));
            }
            let nulls = if flags & HAS_NULLS != 0 {
                u32::try_from(c.varint("null count")?).map_err(|_| DecodeError::Invalid("null count out of range"))?
            } else {
                0
            };
            let sum = match (flags & HAS_SUM != 0, flags & SUM_RAW != 0) {
                (false, _) => None,
                (true, false) => Some(Sum::Float(unscaled(unzigzag(c.varint("sum")?), digits))),
                (true, true) => Some(Sum::Float(f64::from_bits(c.u64_le("sum")?))),
            };
            return Ok(ColumnStats { attnum, range: Range::Float { min, max, has_nan: tag == SCALED_NAN }, summary: Some(Summary { nulls, sum }) });
        }
        let range = match tag % SUMMARISED {
            _ if tag >= 2 * SUMMARISED => return Err(DecodeError::UnknownTag { what: "stats kind", tag }),
            0 => Range::Int { min: unzigzag(c.varint("min")?), max: unzigzag(c.varint("max")?) },
            kind => Range::Float {
                min: f64::from_bits(c.u64_le("min")?),
                max: f64::from_bits(c.u64_le("max")?),
                has_nan: kind == 2,
            },
        };
        let summary = if tag >= SUMMARISED {
            let flags = c.u8("summary flags")?;
            if flags & !(HAS_SUM | HAS_NULLS) != 0 {
                return Err(DecodeError::Invalid("unknown summary flags"));
            }
            let nulls = if flags & HAS_NULLS != 0 {
                u32::try_from(c.varint("null count")?).map_err(|_| DecodeError::Invalid("null count out of range"))?
            } else {
                0
            };
            let sum = match (flags & HAS_SUM != 0, range) {
                (false, _) => None,
                (true, Range::Int { .. }) => Some(Sum::Int(unzigzag(c.varint("sum")?))),
                (true, Range::Float { .. }) => Some(Sum::Float(f64::from_bits(c.u64_le("sum")?))),
            };
            Some(Summary { nulls, sum })
        } else {
            None
        };
        Ok(ColumnStats { attnum, range, summary })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_round_trip_and_match_with_nan() {
        let stats = vec![
            ColumnStats { attnum: 1, range: Range::Int { min: i64::MIN, max: i64::MAX }, summary: None },
            ColumnStats { attnum: 2, range: Range::Float { min: f64::NAN, max: f64::NAN, has_nan: true }, summary: Some(Summary { nulls: 3, sum: Some(Sum::Float(f64::NAN)) }) },
            ColumnStats { attnum: 3, range: Range::Float { min: -0.5, max: 7.25, has_nan: false }, summary: Some(Summary { nulls: 0, sum: None }) },
            ColumnStats { attnum: 4, range: Range::Int { min: -3, max: 9 }, summary: Some(Summary { nulls: 0, sum: Some(Sum::Int(-70_000_000_000)) }) },
        ];
        let back = decode_stats(&encode_stats(&stats)).unwrap();
        assert!(stats.iter().zip(&back).all(|(a, b)| a.matches(b)));
        assert!(!stats[0].matches(&stats[2]));
    }

    #[test]
    fn decimal_bounds_and_sums_take_few_bytes_and_read_back_bit_for_bit() {
        let cases = [
            (0.0, 100.0, Some(Sum::Float(18_234.0)), false, 0),
            (-3.5, 27.25, Some(Sum::Float(0.1 + 0.2)), true, 4),
            (1e-9, 123_456.789, None, false, 0),
            (-0.0, 5.0, Some(Sum::Float(5.0)), false, 0),
            (1.0 / 3.0, 2.0, Some(Sum::Float(7.0)), false, 2),
        ];
        for (min, max, sum, has_nan, nulls) in cases {
            let s = ColumnStats { attnum: 9, range: Range::Float { min, max, has_nan }, summary: Some(Summary { nulls, sum }) };
            let bytes = encode_stats(std::slice::from_ref(&s));
            let back = decode_stats(&bytes).unwrap();
            assert!(back[0].matches(&s), "{s:?} -> {:?}", back[0]);
        }
        let whole = ColumnStats { attnum: 9, range: Range::Float { min: 3.0, max: 97.0, has_nan: false }, summary: Some(Summary { nulls: 0, sum: Some(Sum::Float(18_234.0)) }) };
        assert!(encode_stats(&[whole]).len() <= 1 + 10, "one entry of whole numbers");
        assert!(decode_stats(&[1, 1, SCALED, 10, 0, 0, 0]).is_err(), "digits out of range");
        assert!(decode_stats(&[1, 1, SCALED, 0, 0, 0, SUM_RAW]).is_err(), "a raw sum flag without a sum");
    }

    #[test]
    fn document_fields_get_statistics_where_float8_reads_every_value() {
        use crate::jsonb::{self, Value};
        let doc = |pairs: Vec<(&str, Value)>| {
            let mut b = Vec::new();
            jsonb::write(&Value::Object(pairs.into_iter().map(|(k, v)| (k.as_bytes().to_vec(), v)).collect()), &mut b).unwrap();
            b
        };
        let num = |m: i64, sc: u16| {
            let mut v = Vec::new();
            jsonb::decimal_to_numeric(m, sc, &mut v);
            Value::Number(v)
        };
        let mut col = Column::new(3, ColumnKind::Document);
        for i in 0..200i64 {
            // "a": decimals, absent in every tenth row; "b": a string once; "c": JSON null in every third row.
            let mut pairs = vec![("b", if i == 7 { Value::String(b"x".to_vec()) } else { num(i, 0) }), ("c", if i % 3 == 0 { Value::Null } else { num(i * 25, 2) })];
            if i % 10 != 0 {
                pairs.insert(0, ("a", num(1000 + i, 1)));
            }
            col.push_bytes(&doc(pairs));
        }
        col.push_null();
        let payload = crate::encode_bucket(201, &[col]);
        let reader = crate::BucketReader::parse(&payload).unwrap();
        let fields = field_stats(&reader.columns()[0]).unwrap();
        let keys: Vec<&[u8]> = fields.iter().map(|f| &f.key[..]).collect();
        assert_eq!(keys, vec![&b"a"[..], &b"c"[..]], "b holds a string: no statistics");
        let a = &fields[0].stats;
        assert_eq!(a.range, Range::Float { min: 100.1, max: 119.9, has_nan: false });
        let expected: Vec<f64> = (0..200i64).filter(|i| i % 10 != 0).map(|i| (1000 + i) as f64 / 10.0).collect();
        assert_eq!(a.summary, Some(Summary { nulls: 21, sum: float_sum(expected.into_iter()).map(Sum::Float) }));
        let encoded = encode_stats_with_fields(&[], &fields);
        assert!(decode_stats(&encoded).unwrap().is_empty(), "readers of column entries stop before the fields");
        let back = decode_field_stats(&encoded).unwrap();
        assert!(back.iter().zip(&fields).all(|(x, y)| x.key == y.key && x.stats.matches(&y.stats)));
        assert!(decode_field_stats(&encode_stats(&[])).unwrap().is_empty());
        // Buckets written before the fields were grouped by column still read.
        let mut old = encode_stats(&[]);
        let mut section = Vec::new();
        put_varint(&mut section, fields.len() as u64);
        for f in &fields {
            put_varint(&mut section, 0);
            put_chunk(&mut section, &f.key);
            encode_entry(&mut section, &f.stats);
        }
        old.push(SECTION_FIELDS);
        put_chunk(&mut old, &section);
        // The golden files of both section forms (tests/golden.rs reads them).
        if std::env::var_os("TSBUCKET_WRITE_GOLDEN").is_some() {
            let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden");
            std::fs::write(format!("{dir}/stats-fields-1.bin"), &old).unwrap();
            std::fs::write(format!("{dir}/stats-fields-2.bin"), &encoded).unwrap();
        }
        let back_old = decode_field_stats(&old).unwrap();
        assert!(back_old.iter().zip(&fields).all(|(x, y)| x.key == y.key && x.stats.matches(&y.stats)));
        assert!(encoded.len() <= old.len(), "one attnum per column, not per field");
        let mut corrupt = encoded.clone();
        corrupt.push(SECTION_FIELDS_BY_COLUMN);
        assert!(decode_field_stats(&corrupt).is_err(), "a truncated section");
        let mut later = encoded.clone();
        later.extend_from_slice(&[9, 2, 0, 0]);
        assert_eq!(decode_field_stats(&later).unwrap().len(), fields.len(), "sections of later releases are skipped");
    }

    #[test]
    fn entries_of_earlier_releases_still_decode() {
        // 0.4.0's encoding of one int and one float column (tags 0 and 1).
        let mut old = vec![2, 1, 0];
        put_varint(&mut old, zigzag(-4));
        put_varint(&mut old, zigzag(10));
        old.extend_from_slice(&[5, 1]);
        old.extend_from_slice(&1.5f64.to_bits().to_le_bytes());
        old.extend_from_slice(&2.5f64.to_bits().to_le_bytes());
        let back = decode_stats(&old).unwrap();
        assert_eq!(back[0], ColumnStats { attnum: 1, range: Range::Int { min: -4, max: 10 }, summary: None });
        assert_eq!(back[1], ColumnStats { attnum: 5, range: Range::Float { min: 1.5, max: 2.5, has_nan: false }, summary: None });
        assert!(decode_stats(&[1, 1, 6]).is_err());
        assert!(decode_stats(&[1, 1, 3, 0, 0, 4]).is_err(), "unknown summary flag");
    }

    #[test]
    fn summaries_count_nulls_and_add_in_row_order() {
        let mut col = Column::new(7, crate::column::ColumnKind::Float64);
        for v in [Some(0.1), None, Some(0.2), Some(-0.0), None, Some(1e308), Some(1e308)] {
            match v {
                Some(x) => col.push_float(x),
                None => col.push_null(),
            }
        }
        let s = column_stats(&col).unwrap();
        assert_eq!(s.summary, Some(Summary { nulls: 2, sum: None }), "an overflowing sum is not kept");
        assert_eq!(float_sum([0.1, 0.2, 0.3].into_iter()), Some(0.1 + 0.2 + 0.3));
        assert_eq!(float_sum([-0.0].into_iter()).map(f64::to_bits), Some((-0.0f64).to_bits()));
        assert_eq!(float_sum([f64::INFINITY, 1.0].into_iter()), Some(f64::INFINITY), "infinite inputs are no overflow");
        let mut ints = Column::new(8, crate::column::ColumnKind::Int);
        [i64::MAX, 1].iter().for_each(|&x| ints.push_int(x));
        assert_eq!(column_stats(&ints).unwrap().summary, Some(Summary { nulls: 0, sum: None }));
    }
}
