//! Float codec. Most time-series floats are decimals in disguise (a percentage
//! stored as 37.0, a temperature rounded to 0.1): when every value is exactly
//! `n / 10^k` for a small k, we store the integers n with the integer codec,
//! which turns a random walk of whole numbers into a few bits per value.
//! A few values that are not (a NaN, an infinity, -0.0, one reading of full
//! precision) stay exceptions, stored as they are, so that they do not cost
//! the rest of the column its decimals (format version 2). Other floats are
//! stored with Gorilla XOR encoding or, for slowly moving full-precision
//! values, as their bits mapped to integers in the floats' order, delta-coded
//! by the integer codec (version 2), whichever is smaller. Whatever is chosen
//! is verified bit-exact before it is used.
//!
//! Version 4 leaves out the value count every form held (XOR's first, the
//! others' in their integer body: the bucket holds it), and stores ordered
//! floats' keys from 1.0's key (a first value near 100 then takes an 8-byte
//! varint, not 10; keys of floats at or below -4.0 wrap, exactly, which only
//! keeps the frame-of-reference transform from a column that crosses -4.0):
//! `encode` writes
//! versions 4 and 5, `decode` reads it, and `decode_counted` reads what versions 1-3
//! wrote.

use super::int;
use crate::bits::{put_varint, BitReader, BitWriter, Cursor};
use crate::error::{DecodeError, Result};

const DECIMAL: u8 = 0;
const XOR: u8 = 1;
const DECIMAL_EXCEPTIONS: u8 = 2;
const ORDERED: u8 = 3;
/// A column takes the decimal form with exceptions while at most one value in
/// this many is one.
const EXCEPTION_SHARE: usize = 16;
/// Gorilla: a new window is written once reusing the previous one would
/// waste more bits than this (TimescaleDB's rule; a window costs 12 bits).
const WINDOW_WASTE: u32 = 12;
const MAX_DECIMAL_DIGITS: u32 = 9;
/// Integers above this are not exact in f64, so scaling would lose values.
const MAX_EXACT: f64 = 9_007_199_254_740_992.0;

/// `bits_equal` tells whether a reconstructed f64 reproduces the original value
/// exactly in the column's own width (f32 columns compare after narrowing).
pub fn encode(values: &[f64], is_f32: bool, out: &mut Vec<u8>) {
    let mut candidates = Vec::new();
    if let Some((digits, ints, exceptions)) = as_decimals(values, is_f32) {
        let mut dec = if exceptions.is_empty() { vec![DECIMAL, digits as u8] } else { vec![DECIMAL_EXCEPTIONS, digits as u8] };
        if !exceptions.is_empty() {
            put_varint(&mut dec, exceptions.len() as u64);
            let mut last = 0;
            for &i in &exceptions {
                put_varint(&mut dec, (i - last) as u64);
                dec.extend_from_slice(&values[i].to_bits().to_le_bytes());
                last = i;
            }
        }
        int::encode_body(&ints, &mut dec);
        // Few digits: scaled integers beat the other forms on every series we
        // measured, so skip encoding them; many digits: keep whichever is smaller.
        if digits <= 3 {
            out.extend_from_slice(&dec);
            return;
        }
        candidates.push(dec);
    }
    candidates.push(encode_xor(values));
    candidates.push(encode_ordered(values));
    out.extend_from_slice(candidates.iter().min_by_key(|c| c.len()).expect("candidates"));
}

/// A float's bits as an integer in the floats' order (-0.0 just below +0.0,
/// NaNs at the ends), so that nearby values have nearby integers; an involution.
#[inline]
fn ordered(bits: u64) -> i64 {
    let i = bits as i64;
    if i < 0 { i ^ i64::MAX } else { i }
}

/// Version 4's origin of ordered keys: that of 1.0, so that the first key of
/// a column of everyday magnitudes is a short varint.
const ORDERED_ORIGIN: i64 = 0x3FF0_0000_0000_0000;

fn encode_ordered(values: &[f64]) -> Vec<u8> {
    let mut out = vec![ORDERED];
    let keys: Vec<i64> = values.iter().map(|v| ordered(v.to_bits()).wrapping_sub(ORDERED_ORIGIN)).collect();
    int::encode_body(&keys, &mut out);
    out
}

fn same_bits(a: f64, b: f64, is_f32: bool) -> bool {
    if is_f32 { (a as f32).to_bits() == (b as f32).to_bits() } else { a.to_bits() == b.to_bits() }
}

/// The fewest digits k for which the values are `n / 10^k`, all but at most
/// one in EXCEPTION_SHARE of them: (k, the n, the exceptions' positions). An
/// exception's n repeats the previous value's, which costs the integer codec
/// least.
fn as_decimals(values: &[f64], is_f32: bool) -> Option<(u32, Vec<i64>, Vec<usize>)> {
    let allowed = values.len() / EXCEPTION_SHARE;
    'digits: for digits in 0..=MAX_DECIMAL_DIGITS {
        let scale = 10f64.powi(digits as i32);
        let mut ints = Vec::with_capacity(values.len());
        let mut exceptions = Vec::new();
        let mut last = 0i64;
        for (i, &v) in values.iter().enumerate() {
            let scaled = (v * scale).round();
            // Check exactly what the decoder will compute.
            let n = scaled as i64;
            if scaled.is_finite() && scaled.abs() < MAX_EXACT && same_bits(n as f64 / scale, v, is_f32) {
                ints.push(n);
                last = n;
                continue;
            }
            if exceptions.len() == allowed {
                continue 'digits;
            }
            exceptions.push(i);
            ints.push(last);
        }
        return Some((digits, ints, exceptions));
    }
    None
}

fn encode_xor(values: &[f64]) -> Vec<u8> {
    let mut out = vec![XOR];
    let Some(first) = values.first() else { return out };
    let mut w = BitWriter::new();
    let mut prev = first.to_bits();
    w.put(prev, 64);
    let (mut prev_lead, mut prev_trail) = (u32::MAX, 0u32);
    for v in &values[1..] {
        let bits = v.to_bits();
        let x = bits ^ prev;
        prev = bits;
        if x == 0 {
            w.put(0, 1);
            continue;
        }
        w.put(1, 1);
        let lead = x.leading_zeros().min(63);
        let trail = x.trailing_zeros();
        let fits = prev_lead != u32::MAX && lead >= prev_lead && trail >= prev_trail;
        if fits && (lead - prev_lead) + (trail - prev_trail) <= WINDOW_WASTE {
            w.put(0, 1);
            w.put(x >> prev_trail, 64 - prev_lead - prev_trail);
        } else {
            let len = 64 - lead - trail;
            w.put(1, 1);
            w.put(u64::from(lead), 6);
            w.put(u64::from(len - 1), 6);
            w.put(x >> trail, len);
            prev_lead = lead;
            prev_trail = trail;
        }
    }
    out.extend_from_slice(&w.finish());
    out
}

/// Decodes the `n` values `encode` wrote (format versions 4 and 5).
pub fn decode(c: &mut Cursor, n: usize) -> Result<Vec<f64>> {
    decode_form(c, n, false)
}

/// Decodes at most `limit` values of a column written with its count
/// (format versions 1-3).
pub fn decode_counted(c: &mut Cursor, limit: usize) -> Result<Vec<f64>> {
    decode_form(c, limit, true)
}

/// `n`: the count when not `counted`, else the most the stored count may say.
fn decode_form(c: &mut Cursor, n: usize, counted: bool) -> Result<Vec<f64>> {
    let ints = |c: &mut Cursor| if counted { int::decode(c, n) } else { int::decode_body(c, n) };
    match c.u8("float codec")? {
        tag @ (DECIMAL | DECIMAL_EXCEPTIONS) => {
            let digits = u32::from(c.u8("decimal digits")?);
            if digits > MAX_DECIMAL_DIGITS {
                return Err(DecodeError::Invalid("decimal digits out of range"));
            }
            let mut exceptions = Vec::new();
            if tag == DECIMAL_EXCEPTIONS {
                let count = c.len("exception count", n)?;
                let mut at = 0usize;
                for k in 0..count {
                    let step = c.len("exception position", n)?;
                    if k > 0 && step == 0 {
                        return Err(DecodeError::Invalid("exception positions out of order"));
                    }
                    at += step;
                    exceptions.push((at, f64::from_bits(c.u64_le("exception")?)));
                }
            }
            let scale = 10f64.powi(digits as i32);
            let mut values: Vec<f64> = ints(c)?.into_iter().map(|n| n as f64 / scale).collect();
            for (at, v) in exceptions {
                *values.get_mut(at).ok_or(DecodeError::Invalid("exception position out of range"))? = v;
            }
            Ok(values)
        }
        ORDERED => {
            let origin = if counted { 0 } else { ORDERED_ORIGIN };
            Ok(ints(c)?.into_iter().map(|k| f64::from_bits(ordered_inverse(k.wrapping_add(origin)))).collect())
        }
        XOR => {
            let n = if counted { c.len("float count", n)? } else { n };
            let rest = c.take(c.remaining(), "xor stream")?;
            decode_xor(rest, n)
        }
        tag => Err(DecodeError::UnknownTag { what: "float codec", tag }),
    }
}

#[inline]
fn ordered_inverse(key: i64) -> u64 {
    ordered(key as u64) as u64
}

fn decode_xor(bytes: &[u8], n: usize) -> Result<Vec<f64>> {
    let mut out = Vec::with_capacity(n);
    if n == 0 {
        return Ok(out);
    }
    let mut r = BitReader::new(bytes);
    let mut prev = r.get(64)?;
    out.push(f64::from_bits(prev));
    let (mut lead, mut trail) = (0u32, 0u32);
    let mut have_window = false;
    for _ in 1..n {
        if r.get(1)? == 1 {
            if r.get(1)? == 1 {
                lead = r.get(6)? as u32;
                let len = r.get(6)? as u32 + 1;
                if lead + len > 64 {
                    return Err(DecodeError::Invalid("xor window exceeds 64 bits"));
                }
                trail = 64 - lead - len;
                have_window = true;
            } else if !have_window {
                return Err(DecodeError::Invalid("xor reuses a window before defining one"));
            }
            let meaningful = r.get(64 - lead - trail)?;
            prev ^= meaningful << trail;
        }
        out.push(f64::from_bits(prev));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(values: &[f64], is_f32: bool) -> usize {
        let mut out = Vec::new();
        encode(values, is_f32, &mut out);
        let got = decode(&mut Cursor::new(&out), values.len()).unwrap();
        assert_eq!(got.len(), values.len());
        for (a, b) in got.iter().zip(values) {
            assert!(same_bits(*a, *b, is_f32), "{a} != {b}");
        }
        out.len()
    }

    #[test]
    fn whole_numbers_use_few_bits() {
        let v: Vec<f64> = (0..1000).map(|i| ((i * 7) % 5) as f64 + 40.0).collect();
        assert!(round_trip(&v, false) < 500);
    }

    #[test]
    fn tenths_are_decimal() {
        let v: Vec<f64> = (0..1000).map(|i| (200 + (i % 13)) as f64 / 10.0).collect();
        let mut out = Vec::new();
        encode(&v, false, &mut out);
        assert_eq!(out[0], DECIMAL);
        round_trip(&v, false);
    }

    #[test]
    fn the_order_mapping_is_monotone_and_its_own_inverse() {
        let xs = [f64::NEG_INFINITY, -1e300, -2.0, -1.0, -5e-324, -0.0, 0.0, 5e-324, 1.0, 2.0, 1e300, f64::INFINITY];
        let keys: Vec<i64> = xs.iter().map(|x| ordered(x.to_bits())).collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]), "{keys:?}");
        for x in xs.iter().chain(&[f64::NAN, -f64::NAN]) {
            assert_eq!(ordered_inverse(ordered(x.to_bits())), x.to_bits());
        }
        assert_eq!(ordered(1.0f64.to_bits()), ORDERED_ORIGIN);
    }

    #[test]
    fn ordered_keys_round_trip_across_the_origin_and_the_ends() {
        // Keys from 1.0's wrap for floats at or below -4.0 and negative NaNs: still exact.
        let v = [f64::NEG_INFINITY, -f64::MAX, -1e-300, -0.0, 0.0, 1e-300, 0.5, 1.0, 1.0 + f64::EPSILON, 1e300, f64::MAX, f64::INFINITY, f64::NAN];
        let mut out = Vec::new();
        out.extend_from_slice(&encode_ordered(&v));
        let got = decode(&mut Cursor::new(&out), v.len()).unwrap();
        assert!(got.iter().zip(&v).all(|(a, b)| a.to_bits() == b.to_bits()), "{got:?}");
    }

    #[test]
    fn a_few_exceptions_keep_the_decimals() {
        let mut v: Vec<f64> = (0..360).map(|i| (200 + (i * 7) % 13) as f64 / 10.0).collect();
        v[5] = f64::NAN;
        v[100] = -0.0;
        v[359] = 1.0 / 3.0;
        let mut out = Vec::new();
        encode(&v, false, &mut out);
        assert_eq!(out[0], DECIMAL_EXCEPTIONS);
        assert!(round_trip(&v, false) < 260, "{}", round_trip(&v, false));
        // Too many: another form.
        let w: Vec<f64> = (0..360).map(|i| if i % 3 == 0 { f64::NAN } else { i as f64 }).collect();
        let mut out = Vec::new();
        encode(&w, false, &mut out);
        assert_ne!(out[0], DECIMAL_EXCEPTIONS);
        round_trip(&w, false);
    }

    #[test]
    fn a_full_precision_walk_takes_the_ordered_form() {
        let mut x = 100.0f64;
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let walk: Vec<f64> = (0..1000)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                x += (seed >> 11) as f64 / (1u64 << 53) as f64 - 0.5;
                x
            })
            .collect();
        let mut out = Vec::new();
        encode(&walk, false, &mut out);
        assert_eq!(out[0], ORDERED);
        // About 47 bits a value (the step's range over the ulp near 100), well below Gorilla's.
        assert!(round_trip(&walk, false) < 1000 * 50 / 8, "{}", round_trip(&walk, false));
    }

    #[test]
    fn specials_round_trip() {
        round_trip(&[f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -0.0, 0.0, f64::MIN_POSITIVE, f64::MAX, f64::MIN, 5e-324], false);
        round_trip(&[1.5, -0.0], true);
        round_trip(&[], false);
        round_trip(&[0.1f32 as f64, 3.3f32 as f64], true);
    }
}
