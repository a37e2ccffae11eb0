//! Per-column minimum and maximum of a bucket, kept beside the payload so that
//! scans can skip buckets without decompressing them.

use crate::bits::{put_varint, zigzag, unzigzag, Cursor};
use crate::column::{Column, Values};
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
}

impl ColumnStats {
    /// Equal, counting NaN bounds (an all-NaN column) as equal to each other.
    pub fn matches(&self, other: &ColumnStats) -> bool {
        let same = |a: f64, b: f64| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
        self.attnum == other.attnum
            && match (self.range, other.range) {
                (Range::Int { min: a, max: b }, Range::Int { min: c, max: d }) => a == c && b == d,
                (Range::Float { min: a, max: b, has_nan: x }, Range::Float { min: c, max: d, has_nan: y }) => {
                    same(a, c) && same(b, d) && x == y
                }
                _ => false,
            }
    }
}

/// Min/max of the non-NULL values of ordered kinds; `None` for all-NULL
/// columns and for kinds whose order lives in Postgres (text collations...).
pub fn column_stats(col: &Column) -> Option<ColumnStats> {
    let present = |i: usize| !col.is_null(i);
    let range = match &col.values {
        Values::Int(v) => {
            let mut it = v.iter().enumerate().filter(|(i, _)| present(*i)).map(|(_, x)| *x);
            let first = it.next()?;
            let (min, max) = it.fold((first, first), |(lo, hi), x| (lo.min(x), hi.max(x)));
            Range::Int { min, max }
        }
        Values::Float(v) => {
            let mut has_nan = false;
            let mut bounds: Option<(f64, f64)> = None;
            for (_, &x) in v.iter().enumerate().filter(|(i, _)| present(*i)) {
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
            Range::Float { min, max, has_nan }
        }
        Values::Bool(_) | Values::Bytes(_) => return None,
    };
    Some(ColumnStats { attnum: col.attnum, range })
}

pub fn encode_stats(stats: &[ColumnStats]) -> Vec<u8> {
    let mut out = Vec::new();
    put_varint(&mut out, stats.len() as u64);
    for s in stats {
        put_varint(&mut out, u64::from(s.attnum));
        match s.range {
            Range::Int { min, max } => {
                out.push(0);
                put_varint(&mut out, zigzag(min));
                put_varint(&mut out, zigzag(max));
            }
            Range::Float { min, max, has_nan } => {
                out.push(if has_nan { 2 } else { 1 });
                out.extend_from_slice(&min.to_bits().to_le_bytes());
                out.extend_from_slice(&max.to_bits().to_le_bytes());
            }
        }
    }
    out
}

pub fn decode_stats(bytes: &[u8]) -> Result<Vec<ColumnStats>> {
    let mut c = Cursor::new(bytes);
    let n = c.len("stats count", bytes.len())?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let attnum = u16::try_from(c.varint("attnum")?).map_err(|_| DecodeError::Invalid("attnum out of range"))?;
        let range = match c.u8("stats kind")? {
            0 => Range::Int { min: unzigzag(c.varint("min")?), max: unzigzag(c.varint("max")?) },
            tag @ (1 | 2) => Range::Float {
                min: f64::from_bits(c.u64_le("min")?),
                max: f64::from_bits(c.u64_le("max")?),
                has_nan: tag == 2,
            },
            tag => return Err(DecodeError::UnknownTag { what: "stats kind", tag }),
        };
        out.push(ColumnStats { attnum, range });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_round_trip_and_match_with_nan() {
        let stats = vec![
            ColumnStats { attnum: 1, range: Range::Int { min: i64::MIN, max: i64::MAX } },
            ColumnStats { attnum: 2, range: Range::Float { min: f64::NAN, max: f64::NAN, has_nan: true } },
            ColumnStats { attnum: 3, range: Range::Float { min: -0.5, max: 7.25, has_nan: false } },
        ];
        let back = decode_stats(&encode_stats(&stats)).unwrap();
        assert!(stats.iter().zip(&back).all(|(a, b)| a.matches(b)));
        assert!(!stats[0].matches(&stats[2]));
    }
}
