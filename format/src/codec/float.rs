//! Float codec. Most time-series floats are decimals in disguise (a percentage
//! stored as 37.0, a temperature rounded to 0.1): when every value is exactly
//! `n / 10^k` for a small k, we store the integers n with the integer codec,
//! which turns a random walk of whole numbers into a few bits per value.
//! Everything else (and NaN, infinities, -0.0) uses Gorilla XOR encoding.
//! Whatever is chosen is verified bit-exact before it is used.

use super::int;
use crate::bits::{put_varint, BitReader, BitWriter, Cursor};
use crate::error::{DecodeError, Result};

const DECIMAL: u8 = 0;
const XOR: u8 = 1;
const MAX_DECIMAL_DIGITS: u32 = 9;
/// Integers above this are not exact in f64, so scaling would lose values.
const MAX_EXACT: f64 = 9_007_199_254_740_992.0;

/// `bits_equal` tells whether a reconstructed f64 reproduces the original value
/// exactly in the column's own width (f32 columns compare after narrowing).
pub fn encode(values: &[f64], is_f32: bool, out: &mut Vec<u8>) {
    if let Some((digits, ints)) = as_decimals(values, is_f32) {
        let mut dec = vec![DECIMAL, digits as u8];
        int::encode(&ints, &mut dec);
        // Few digits: scaled integers beat XOR on every series we measured, so
        // skip the second encoding; many digits: keep whichever is smaller.
        if digits <= 3 {
            out.extend_from_slice(&dec);
            return;
        }
        let xor = encode_xor(values);
        out.extend_from_slice(if dec.len() <= xor.len() { &dec } else { &xor });
        return;
    }
    out.extend_from_slice(&encode_xor(values));
}

fn same_bits(a: f64, b: f64, is_f32: bool) -> bool {
    if is_f32 { (a as f32).to_bits() == (b as f32).to_bits() } else { a.to_bits() == b.to_bits() }
}

fn as_decimals(values: &[f64], is_f32: bool) -> Option<(u32, Vec<i64>)> {
    'digits: for digits in 0..=MAX_DECIMAL_DIGITS {
        let scale = 10f64.powi(digits as i32);
        let mut ints = Vec::with_capacity(values.len());
        for &v in values {
            let scaled = (v * scale).round();
            if !scaled.is_finite() || scaled.abs() >= MAX_EXACT {
                return None;
            }
            // Check exactly what the decoder will compute.
            let n = scaled as i64;
            if !same_bits(n as f64 / scale, v, is_f32) {
                continue 'digits;
            }
            ints.push(n);
        }
        return Some((digits, ints));
    }
    None
}

fn encode_xor(values: &[f64]) -> Vec<u8> {
    let mut out = vec![XOR];
    put_varint(&mut out, values.len() as u64);
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
        if prev_lead != u32::MAX && lead >= prev_lead && trail >= prev_trail {
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

pub fn decode(c: &mut Cursor, limit: usize) -> Result<Vec<f64>> {
    match c.u8("float codec")? {
        DECIMAL => {
            let digits = u32::from(c.u8("decimal digits")?);
            if digits > MAX_DECIMAL_DIGITS {
                return Err(DecodeError::Invalid("decimal digits out of range"));
            }
            let scale = 10f64.powi(digits as i32);
            Ok(int::decode(c, limit)?.into_iter().map(|n| n as f64 / scale).collect())
        }
        XOR => {
            let n = c.len("float count", limit)?;
            let rest = c.take(c.remaining(), "xor stream")?;
            decode_xor(rest, n)
        }
        tag => Err(DecodeError::UnknownTag { what: "float codec", tag }),
    }
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
    fn specials_round_trip() {
        round_trip(&[f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -0.0, 0.0, f64::MIN_POSITIVE, f64::MAX, f64::MIN, 5e-324], false);
        round_trip(&[1.5, -0.0], true);
        round_trip(&[], false);
        round_trip(&[0.1f32 as f64, 3.3f32 as f64], true);
    }
}
