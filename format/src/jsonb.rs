//! Postgres's jsonb binary format (a datum's bytes after its varlena header),
//! read into a tree and written back byte for byte, without Postgres.
//!
//! The layout is the on-disk one, which pg_upgrade keeps stable: a container
//! is `u32 header (count | flags) | JEntry per child | children's data`; an
//! object's JEntries are its keys' then its values'; every 32nd JEntry holds
//! its end offset (flag 0x80000000), the others their length; numerics and
//! containers start 4-aligned (relative to the datum, whose varlena header is
//! 4 bytes, so relative to these bytes too), the padding counted in their
//! entry. A scalar at the root is an array of one with the scalar flag.
//!
//! `parse` accepts more than Postgres writes (padding that is not zero,
//! trailing bytes, keys out of order); a caller that needs the same bytes
//! back writes the tree again and compares (`codec::document`).

use crate::error::{DecodeError, Result};
use std::cmp::Ordering;

const JB_CMASK: u32 = 0x0FFF_FFFF;
const JB_FSCALAR: u32 = 0x1000_0000;
const JB_FOBJECT: u32 = 0x2000_0000;
const JB_FARRAY: u32 = 0x4000_0000;
const JENTRY_OFFLENMASK: u32 = 0x0FFF_FFFF;
const JENTRY_TYPEMASK: u32 = 0x7000_0000;
const JENTRY_HAS_OFF: u32 = 0x8000_0000;
const T_STRING: u32 = 0x0000_0000;
const T_NUMERIC: u32 = 0x1000_0000;
const T_FALSE: u32 = 0x2000_0000;
const T_TRUE: u32 = 0x3000_0000;
const T_NULL: u32 = 0x4000_0000;
const T_CONTAINER: u32 = 0x5000_0000;
const OFFSET_STRIDE: usize = 32;
/// Deeper documents are refused (the caller keeps them as bytes): bounds the
/// recursion a corrupt or hostile value can cause.
pub const MAX_DEPTH: usize = 200;

/// One jsonb value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    Null,
    Bool(bool),
    /// A numeric datum as jsonb holds it, its varlena header included.
    Number(Vec<u8>),
    String(Vec<u8>),
    Array(Vec<Value>),
    /// Pairs in jsonb's key order (`key_order`), keys unique.
    Object(Vec<(Vec<u8>, Value)>),
}

impl Value {
    pub fn is_scalar(&self) -> bool {
        !matches!(self, Value::Array(_) | Value::Object(_))
    }
}

/// jsonb's order of object keys: shorter first, then bytewise.
pub fn key_order(a: &[u8], b: &[u8]) -> Ordering {
    a.len().cmp(&b.len()).then_with(|| a.cmp(b))
}

fn u32_at(bytes: &[u8], at: usize, what: &'static str) -> Result<u32> {
    let b = bytes.get(at..at.checked_add(4).ok_or(DecodeError::Truncated(what))?).ok_or(DecodeError::Truncated(what))?;
    Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

fn padding(at: usize) -> usize {
    (4 - at % 4) % 4
}

/// The value a jsonb datum's bytes hold.
pub fn parse(bytes: &[u8]) -> Result<Value> {
    let (value, scalar) = parse_container(bytes, 0, bytes.len(), 0)?;
    if !scalar {
        return Ok(value);
    }
    match value {
        Value::Array(mut elems) if elems.len() == 1 && elems[0].is_scalar() => Ok(elems.pop().expect("one")),
        _ => Err(DecodeError::Invalid("jsonb scalar root is not one scalar")),
    }
}

/// The container at `bytes[start..end]`, and whether it carries the scalar flag.
fn parse_container(bytes: &[u8], start: usize, end: usize, depth: usize) -> Result<(Value, bool)> {
    if depth > MAX_DEPTH {
        return Err(DecodeError::TooLarge("jsonb nesting"));
    }
    let header = u32_at(bytes, start, "jsonb container header")?;
    let count = (header & JB_CMASK) as usize;
    let (object, scalar) = match header & !JB_CMASK {
        JB_FOBJECT => (true, false),
        JB_FARRAY => (false, false),
        f if f == JB_FARRAY | JB_FSCALAR && depth == 0 => (false, true),
        _ => return Err(DecodeError::Invalid("jsonb container flags")),
    };
    let entries = if object { count * 2 } else { count };
    let data = start + 4 + entries.checked_mul(4).ok_or(DecodeError::TooLarge("jsonb entries"))?;
    if data > end {
        return Err(DecodeError::Truncated("jsonb entries"));
    }
    let mut children = Vec::with_capacity(entries);
    let mut offset = 0usize;
    for i in 0..entries {
        let je = u32_at(bytes, start + 4 + 4 * i, "jsonb entry")?;
        let field = (je & JENTRY_OFFLENMASK) as usize;
        let child_end = if je & JENTRY_HAS_OFF != 0 { field } else { offset + field };
        if child_end < offset || data + child_end > end {
            return Err(DecodeError::Invalid("jsonb entry out of its container"));
        }
        let (from, to) = (data + offset, data + child_end);
        let value = match je & JENTRY_TYPEMASK {
            T_STRING => Value::String(bytes[from..to].to_vec()),
            T_NUMERIC => {
                let from = from + padding(from);
                if from > to {
                    return Err(DecodeError::Invalid("jsonb numeric shorter than its padding"));
                }
                Value::Number(bytes[from..to].to_vec())
            }
            T_FALSE => Value::Bool(false),
            T_TRUE => Value::Bool(true),
            T_NULL => Value::Null,
            T_CONTAINER => parse_container(bytes, from + padding(from), to, depth + 1)?.0,
            _ => return Err(DecodeError::Invalid("jsonb entry type")),
        };
        children.push(value);
        offset = child_end;
    }
    if !object {
        return Ok((Value::Array(children), scalar));
    }
    let values = children.split_off(count);
    let mut pairs = Vec::with_capacity(count);
    for (key, value) in children.into_iter().zip(values) {
        match key {
            Value::String(k) => pairs.push((k, value)),
            _ => return Err(DecodeError::Invalid("jsonb object key is not a string")),
        }
    }
    Ok((Value::Object(pairs), false))
}

/// Appends the datum bytes (no varlena header) of `value` to `out`, which
/// must be empty or hold whole datums padded to 4; as Postgres writes them.
/// Fails only where Postgres would: a container over 256 MiB.
pub fn write(value: &Value, out: &mut Vec<u8>) -> Result<()> {
    write_root(out, value.is_scalar(), |out, base| write_value(out, base, value))
}

/// Appends a datum whose root `value` writes (returning its JEntry): a
/// scalar root is wrapped in the one-element array Postgres makes of it.
pub(crate) fn write_root(out: &mut Vec<u8>, scalar: bool, value: impl FnOnce(&mut Vec<u8>, usize) -> Result<u32>) -> Result<()> {
    debug_assert!(out.len().is_multiple_of(4), "a datum starts 4-aligned");
    let base = out.len();
    if scalar {
        let mut value = Some(value);
        write_container(out, base, Container::ScalarRoot, 1, &mut |out, _| (value.take().expect("one element"))(out, base))?;
    } else {
        value(out, base)?;
    }
    Ok(())
}

/// The JEntry of `value`, written at the end of `out` (`base` is where its datum starts).
fn write_value(out: &mut Vec<u8>, base: usize, value: &Value) -> Result<u32> {
    Ok(match value {
        Value::Null => T_NULL,
        Value::Bool(b) => bool_entry(*b),
        Value::String(s) => write_string(out, s)?,
        Value::Number(n) => write_number(out, base, |out| out.extend_from_slice(n))?,
        Value::Array(elems) => write_container(out, base, Container::Array, elems.len(), &mut |out, i| write_value(out, base, &elems[i]))?,
        Value::Object(pairs) => write_container(out, base, Container::Object, pairs.len(), &mut |out, i| {
            if i < pairs.len() { write_string(out, &pairs[i].0) } else { write_value(out, base, &pairs[i - pairs.len()].1) }
        })?,
    })
}

pub(crate) const NULL_ENTRY: u32 = T_NULL;

pub(crate) fn bool_entry(b: bool) -> u32 {
    if b { T_TRUE } else { T_FALSE }
}

pub(crate) fn write_string(out: &mut Vec<u8>, s: &[u8]) -> Result<u32> {
    out.extend_from_slice(s);
    Ok(T_STRING | length_field(s.len())?)
}

/// A numeric: padded to 4 (from `base`), then the datum `numeric` appends.
pub(crate) fn write_number(out: &mut Vec<u8>, base: usize, numeric: impl FnOnce(&mut Vec<u8>)) -> Result<u32> {
    let start = out.len();
    out.resize(start + padding(start - base), 0);
    numeric(out);
    Ok(T_NUMERIC | length_field(out.len() - start)?)
}

fn length_field(len: usize) -> Result<u32> {
    u32::try_from(len).ok().filter(|&l| l <= JENTRY_OFFLENMASK).ok_or(DecodeError::TooLarge("jsonb value"))
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Container {
    Array,
    Object,
    ScalarRoot,
}

/// A container of `count` elements (or pairs) written at the end of `out`:
/// `child(out, i)` appends child i's data and returns its JEntry (an
/// object's keys are children 0..count, its values count..2 count).
pub(crate) fn write_container(
    out: &mut Vec<u8>,
    base: usize,
    kind: Container,
    count: usize,
    child: &mut dyn FnMut(&mut Vec<u8>, usize) -> Result<u32>,
) -> Result<u32> {
    let start = out.len();
    out.resize(start + padding(start - base), 0);
    if count > JB_CMASK as usize {
        return Err(DecodeError::TooLarge("jsonb container"));
    }
    let (flags, entries) = match kind {
        Container::Array => (JB_FARRAY, count),
        Container::ScalarRoot => (JB_FARRAY | JB_FSCALAR, count),
        Container::Object => (JB_FOBJECT, 2 * count),
    };
    out.extend_from_slice(&(count as u32 | flags).to_le_bytes());
    let jentries = out.len();
    out.resize(jentries + 4 * entries, 0);
    let mut total = 0usize;
    for i in 0..entries {
        let je = child(out, i)?;
        total += (je & JENTRY_OFFLENMASK) as usize;
        let je = if i.is_multiple_of(OFFSET_STRIDE) { (je & JENTRY_TYPEMASK) | length_field(total)? | JENTRY_HAS_OFF } else { je };
        out[jentries + 4 * i..jentries + 4 * i + 4].copy_from_slice(&je.to_le_bytes());
    }
    Ok(T_CONTAINER | length_field(out.len() - start)?)
}

/// The bytes of a jsonb datum that only frame its top-level object: the
/// header, the JEntries and the key names. A bucket stores them once per
/// key, not per row, when it stores the documents by path. 0 for a root
/// that is no object, or bytes that are no jsonb.
pub fn root_framing(bytes: &[u8]) -> usize {
    let Ok(header) = u32_at(bytes, 0, "") else { return 0 };
    if header & !JB_CMASK != JB_FOBJECT {
        return 0;
    }
    let count = (header & JB_CMASK) as usize;
    let Some(framing) = count.checked_mul(8).map(|j| j + 4).filter(|&f| f <= bytes.len()) else { return 0 };
    // The keys' data comes first, ending where the last key's entry says.
    let mut end = 0usize;
    for i in 0..count {
        let Ok(je) = u32_at(bytes, 4 + 4 * i, "") else { return 0 };
        let field = (je & JENTRY_OFFLENMASK) as usize;
        end = if je & JENTRY_HAS_OFF != 0 { field } else { end + field };
    }
    (framing + end).min(bytes.len())
}

/// What a jsonb datum counts toward a bucket's size limit: its bytes less
/// most of its top-level framing (`root_framing`), which a bucket that stores
/// its documents by path keeps once per key. (A bucket whose documents stay
/// bytes is then larger than the limit says, by at most 8 times.)
pub fn bucket_size(bytes: &[u8]) -> usize {
    bytes.len() - root_framing(bytes) * 7 / 8
}

// ---- numerics ----

const NUMERIC_SHORT: u16 = 0x8000;
const NUMERIC_SPECIAL: u16 = 0xC000;
const NUMERIC_NEG: u16 = 0x4000;
const SHORT_SIGN: u16 = 0x2000;
const SHORT_DSCALE_SHIFT: u16 = 7;
const SHORT_DSCALE_MASK: u16 = 0x1F80;
const SHORT_WEIGHT_SIGN: u16 = 0x0040;
const SHORT_WEIGHT_MASK: u16 = 0x003F;
const DSCALE_MASK: u16 = 0x3FFF;
const NBASE: u128 = 10_000;

/// Powers of ten a double holds exactly: with a mantissa below 2^53
/// (`EXACT_MANTISSA`), one division is the correctly rounded quotient.
pub(crate) const EXACT: [f64; 23] = [1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22];
pub(crate) const EXACT_MANTISSA: u64 = 1 << 53;

/// mantissa x 10^-scale as float8in reads the numeric's text (`(doc->>'k')::float8`):
/// the nearest double. None where float8in refuses it: a nonzero value that
/// rounds to zero.
#[inline]
pub fn decimal_as_float8(mantissa: i64, scale: u16) -> Option<f64> {
    if mantissa == 0 {
        return Some(0.0);
    }
    if mantissa.unsigned_abs() <= EXACT_MANTISSA && (scale as usize) < EXACT.len() {
        // Whole numbers (counters, TSBS's metrics) need no division.
        return Some(if scale == 0 { mantissa as f64 } else { mantissa as f64 / EXACT[scale as usize] });
    }
    let v: f64 = format!("{mantissa}e-{scale}").parse().ok()?;
    (v != 0.0).then_some(v)
}

/// A numeric datum (4-byte varlena header included) as `mantissa`
/// x 10^-`dscale`, when it is exactly that with the mantissa in an i64 and
/// `decimal_to_numeric` gives back the same bytes.
pub fn numeric_to_decimal(bytes: &[u8]) -> Option<(i64, u16)> {
    if bytes.len() < 6 || bytes[0] & 3 != 0 || u32_at(bytes, 0, "").ok()? as usize >> 2 != bytes.len() {
        return None;
    }
    let header = u16::from_le_bytes([bytes[4], bytes[5]]);
    let (negative, dscale, weight, digits) = if header & NUMERIC_SPECIAL == NUMERIC_SHORT {
        let w = (header & SHORT_WEIGHT_MASK) as i32;
        let weight = if header & SHORT_WEIGHT_SIGN != 0 { w - 64 } else { w };
        (header & SHORT_SIGN != 0, (header & SHORT_DSCALE_MASK) >> SHORT_DSCALE_SHIFT, weight, &bytes[6..])
    } else if header & NUMERIC_SPECIAL == NUMERIC_SPECIAL || bytes.len() < 8 {
        return None;
    } else {
        (header & NUMERIC_NEG != 0, header & DSCALE_MASK, i16::from_le_bytes([bytes[6], bytes[7]]) as i32, &bytes[8..])
    };
    if digits.len() % 2 != 0 {
        return None;
    }
    let mut magnitude: u128 = 0;
    for (i, d) in digits.chunks_exact(2).enumerate() {
        let d = i16::from_le_bytes([d[0], d[1]]);
        if !(0..10_000).contains(&d) {
            return None;
        }
        let exp = 4 * (weight - i as i32) + dscale as i32;
        let term = if exp >= 0 {
            (d as u128).checked_mul(10u128.checked_pow(exp as u32)?)?
        } else {
            let div = 10u128.checked_pow((-exp) as u32)?;
            if !(d as u128).is_multiple_of(div) {
                return None;
            }
            d as u128 / div
        };
        magnitude = magnitude.checked_add(term)?;
    }
    let mantissa = if negative { 0i128 - magnitude as i128 } else { magnitude as i128 };
    let mantissa = i64::try_from(mantissa).ok()?;
    let mut back = Vec::with_capacity(bytes.len());
    decimal_to_numeric(mantissa, dscale, &mut back);
    (back == bytes).then_some((mantissa, dscale))
}

/// Appends the numeric datum Postgres makes of `mantissa` x 10^-`dscale`
/// (`dscale` at most 0x3FFF): digits in base 10000 around the decimal point,
/// zero digits at either end dropped, the short header where it fits.
pub fn decimal_to_numeric(mantissa: i64, dscale: u16, out: &mut Vec<u8>) {
    debug_assert!(dscale <= DSCALE_MASK);
    let groups = (dscale as u32).div_ceil(4);
    // Up to three zeros more, so the fraction is whole base-10000 digits: < 9.3e21, in a u128.
    let a = mantissa.unsigned_abs() as u128 * 10u128.pow(4 * groups - dscale as u32);
    // Base-10000 digits, least significant first: at most 6 (a < 10000^6); u64 arithmetic while it fits.
    let mut reversed = [0u16; 6];
    let mut n = 0;
    let (mut wide, mut narrow) = if a > u64::MAX as u128 { (a, 0u64) } else { (0, a as u64) };
    while wide > 0 {
        reversed[n] = (wide % NBASE) as u16;
        wide /= NBASE;
        n += 1;
        if wide <= u64::MAX as u128 {
            narrow = wide as u64;
            wide = 0;
        }
    }
    while narrow > 0 {
        reversed[n] = (narrow % 10_000) as u16;
        narrow /= 10_000;
        n += 1;
    }
    let negative = mantissa < 0;
    let weight = n as i32 - 1 - groups as i32;
    // Trailing zero digits (the least significant) are dropped.
    let low = reversed[..n].iter().take_while(|&&d| d == 0).count();
    let digits = &reversed[low..n];
    let (negative, weight) = if digits.is_empty() { (false, 0) } else { (negative, weight) };
    let start = out.len();
    out.extend_from_slice(&[0; 4]);
    if dscale <= 63 && (-64..=63).contains(&weight) {
        let header = NUMERIC_SHORT
            | if negative { SHORT_SIGN } else { 0 }
            | dscale << SHORT_DSCALE_SHIFT
            | if weight < 0 { SHORT_WEIGHT_SIGN } else { 0 }
            | (weight as u16 & SHORT_WEIGHT_MASK);
        out.extend_from_slice(&header.to_le_bytes());
    } else {
        out.extend_from_slice(&((if negative { NUMERIC_NEG } else { 0 }) | (dscale & DSCALE_MASK)).to_le_bytes());
        out.extend_from_slice(&(weight as i16).to_le_bytes());
    }
    for d in digits.iter().rev() {
        out.extend_from_slice(&d.to_le_bytes());
    }
    let len = (out.len() - start) as u32;
    out[start..start + 4].copy_from_slice(&(len << 2).to_le_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_read_as_float8in_reads_their_text() {
        let text = |m: i64, s: u16| -> String {
            let digits = m.unsigned_abs().to_string();
            let digits = format!("{digits:0>width$}", width = s as usize + 1);
            let (int, frac) = digits.split_at(digits.len() - s as usize);
            format!("{}{int}{}{frac}", if m < 0 { "-" } else { "" }, if s > 0 { "." } else { "" })
        };
        let cases = [(0, 0), (0, 3), (15, 1), (-2125, 2), (1, 22), (1, 23), (123456789, 5), (i64::MAX, 0), (i64::MIN, 4), (9007199254740993, 0), (9007199254740993, 3), (7, 320), (1, 400)];
        for (m, s) in cases {
            let want: f64 = text(m, s).parse().unwrap();
            let got = decimal_as_float8(m, s);
            if want == 0.0 && m != 0 {
                assert_eq!(got, None, "{m}e-{s}");
            } else {
                assert_eq!(got.map(f64::to_bits), Some(want.to_bits()), "{m}e-{s}");
            }
        }
    }

    fn numeric(m: i64, s: u16) -> Vec<u8> {
        let mut v = Vec::new();
        decimal_to_numeric(m, s, &mut v);
        v
    }

    #[test]
    fn numerics_as_postgres_makes_them() {
        // SELECT '1.50'::numeric: short header, dscale 2, weight 0, digits 1, 5000.
        assert_eq!(numeric(150, 2), vec![10 << 2, 0, 0, 0, 0x00, 0x81, 1, 0, 0x88, 0x13]);
        // 0 and 0.00: no digits.
        assert_eq!(numeric(0, 0), vec![6 << 2, 0, 0, 0, 0x00, 0x80]);
        assert_eq!(numeric(0, 2), vec![6 << 2, 0, 0, 0, 0x00, 0x81]);
        // -12345678: weight 1, digits 1234, 5678, negative.
        assert_eq!(numeric(-12345678, 0), vec![10 << 2, 0, 0, 0, 0x01, 0xA0, 0xD2, 0x04, 0x2E, 0x16]);
        // 0.0001: weight -1, one digit 1.
        assert_eq!(numeric(1, 4), vec![8 << 2, 0, 0, 0, 0x7F, 0x82, 1, 0]);
        for (m, s) in [(150, 2), (0, 0), (0, 9), (-1, 0), (i64::MAX, 0), (i64::MIN, 3), (1, 70), (123456789, 100), (5, 63), (7, 64)] {
            assert_eq!(numeric_to_decimal(&numeric(m, s)), Some((m, s)), "{m}e-{s}");
        }
        // Special values and 1-byte headers are not decimals.
        assert_eq!(numeric_to_decimal(&[6 << 2, 0, 0, 0, 0x00, 0xC0]), None);
        assert_eq!(numeric_to_decimal(&[6 << 1 | 1, 0x00, 0x80]), None);
    }

    #[test]
    fn documents_as_postgres_writes_them() {
        // SELECT '{"a": 1, "bb": [true, null, "x"]}'::jsonb, its datum bytes after the varlena header.
        let doc = Value::Object(vec![
            (b"a".to_vec(), Value::Number(numeric(1, 0))),
            (b"bb".to_vec(), Value::Array(vec![Value::Bool(true), Value::Null, Value::String(b"x".to_vec())])),
        ]);
        let mut out = Vec::new();
        write(&doc, &mut out).unwrap();
        let mut expect = vec![];
        expect.extend_from_slice(&(2u32 | JB_FOBJECT).to_le_bytes());
        expect.extend_from_slice(&(JENTRY_HAS_OFF | 1).to_le_bytes()); // "a", an offset
        expect.extend_from_slice(&2u32.to_le_bytes()); // "bb"
        expect.extend_from_slice(&(T_NUMERIC | 9).to_le_bytes()); // 1, padded by 1
        expect.extend_from_slice(&(T_CONTAINER | 17).to_le_bytes());
        expect.extend_from_slice(b"abb");
        expect.push(0);
        expect.extend_from_slice(&numeric(1, 0));
        expect.extend_from_slice(&(3u32 | JB_FARRAY).to_le_bytes());
        expect.extend_from_slice(&(JENTRY_HAS_OFF | T_TRUE).to_le_bytes());
        expect.extend_from_slice(&T_NULL.to_le_bytes());
        expect.extend_from_slice(&(T_STRING | 1).to_le_bytes());
        expect.push(b'x');
        assert_eq!(out, expect);
        assert_eq!(parse(&out).unwrap(), doc);
        // A scalar root: an array of one, flagged.
        let mut s = Vec::new();
        write(&Value::String(b"hi".to_vec()), &mut s).unwrap();
        assert_eq!(&s[..4], &(1 | JB_FARRAY | JB_FSCALAR).to_le_bytes());
        assert_eq!(parse(&s).unwrap(), Value::String(b"hi".to_vec()));
    }

    #[test]
    fn corrupt_documents_are_errors() {
        assert!(parse(&[]).is_err());
        assert!(parse(&[1, 0, 0, 0x20]).is_err());
        assert!(parse(&[1, 0, 0, 0x40, 0xff, 0xff, 0xff, 0x0f]).is_err());
        assert!(parse(&[0, 0, 0, 0x10]).is_err());
    }
}
