//! Byte and bit level primitives shared by the codecs: varints, zigzag, a bit
//! writer/reader, and a bounds-checked cursor over untrusted bytes.

use crate::error::{DecodeError, Result};

#[inline]
pub fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

#[inline]
pub fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Reads untrusted bytes; every read is checked.
pub struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Cursor { bytes, pos: 0 }
    }

    pub fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    pub fn u8(&mut self, what: &'static str) -> Result<u8> {
        let b = *self.bytes.get(self.pos).ok_or(DecodeError::Truncated(what))?;
        self.pos += 1;
        Ok(b)
    }

    pub fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(DecodeError::Truncated(what));
        }
        let s = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    pub fn u64_le(&mut self, what: &'static str) -> Result<u64> {
        let b = self.take(8, what)?;
        Ok(u64::from_le_bytes(b.try_into().expect("8 bytes")))
    }

    pub fn varint(&mut self, what: &'static str) -> Result<u64> {
        let mut v: u64 = 0;
        for shift in (0..64).step_by(7) {
            let b = self.u8(what)?;
            if shift == 63 && b > 1 {
                return Err(DecodeError::Invalid("varint overflows 64 bits"));
            }
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(DecodeError::Invalid("varint longer than 10 bytes"))
    }

    /// A length that must not exceed `limit` (protects allocations from corrupt input).
    pub fn len(&mut self, what: &'static str, limit: usize) -> Result<usize> {
        let v = self.varint(what)?;
        if v > limit as u64 {
            return Err(DecodeError::TooLarge(what));
        }
        Ok(v as usize)
    }

    /// A length-prefixed slice.
    pub fn chunk(&mut self, what: &'static str) -> Result<&'a [u8]> {
        let n = self.len(what, self.remaining())?;
        self.take(n, what)
    }
}

pub fn put_chunk(out: &mut Vec<u8>, chunk: &[u8]) {
    put_varint(out, chunk.len() as u64);
    out.extend_from_slice(chunk);
}

pub struct BitWriter {
    bytes: Vec<u8>,
    acc: u128,
    nbits: u32,
}

impl BitWriter {
    pub fn new() -> Self {
        BitWriter { bytes: Vec::new(), acc: 0, nbits: 0 }
    }

    /// Appends the low `width` bits of `v` (width <= 64).
    #[inline]
    pub fn put(&mut self, v: u64, width: u32) {
        debug_assert!(width <= 64);
        if width == 0 {
            return;
        }
        let v = if width == 64 { v } else { v & ((1u64 << width) - 1) };
        self.acc |= u128::from(v) << self.nbits;
        self.nbits += width;
        while self.nbits >= 8 {
            self.bytes.push(self.acc as u8);
            self.acc >>= 8;
            self.nbits -= 8;
        }
    }

    pub fn finish(mut self) -> Vec<u8> {
        if self.nbits > 0 {
            self.bytes.push(self.acc as u8);
        }
        self.bytes
    }
}

impl Default for BitWriter {
    fn default() -> Self {
        Self::new()
    }
}

pub struct BitReader<'a> {
    bytes: &'a [u8],
    pos: usize,
    acc: u128,
    nbits: u32,
}

impl<'a> BitReader<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        BitReader { bytes, pos: 0, acc: 0, nbits: 0 }
    }

    #[inline]
    pub fn get(&mut self, width: u32) -> Result<u64> {
        if width == 0 {
            return Ok(0);
        }
        if width > 64 {
            return Err(DecodeError::Invalid("bit width over 64"));
        }
        while self.nbits < width {
            let b = *self.bytes.get(self.pos).ok_or(DecodeError::Truncated("bit stream"))?;
            self.pos += 1;
            self.acc |= u128::from(b) << self.nbits;
            self.nbits += 8;
        }
        let v = if width == 64 { self.acc as u64 } else { (self.acc as u64) & ((1u64 << width) - 1) };
        self.acc >>= width;
        self.nbits -= width;
        Ok(v)
    }
}

/// Bits needed to represent `v` (0 for 0).
#[inline]
pub fn bit_width(v: u64) -> u32 {
    64 - v.leading_zeros()
}

pub fn pack_bools(bits: impl Iterator<Item = bool>) -> Vec<u8> {
    let mut w = BitWriter::new();
    for b in bits {
        w.put(u64::from(b), 1);
    }
    w.finish()
}

pub fn unpack_bools(bytes: &[u8], n: usize) -> Result<Vec<bool>> {
    if bytes.len() < n.div_ceil(8) {
        return Err(DecodeError::Truncated("bitmap"));
    }
    Ok((0..n).map(|i| bytes[i / 8] & (1 << (i % 8)) != 0).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zigzag_round_trips_extremes() {
        for v in [0, 1, -1, i64::MIN, i64::MAX, 12345, -98765] {
            assert_eq!(unzigzag(zigzag(v)), v);
        }
    }

    #[test]
    fn varint_round_trips() {
        let mut out = Vec::new();
        for v in [0u64, 1, 127, 128, u64::MAX] {
            put_varint(&mut out, v);
        }
        let mut c = Cursor::new(&out);
        for v in [0u64, 1, 127, 128, u64::MAX] {
            assert_eq!(c.varint("v").unwrap(), v);
        }
        assert!(c.is_empty());
    }

    #[test]
    fn bits_round_trip_all_widths() {
        let mut w = BitWriter::new();
        for width in 0..=64u32 {
            w.put(u64::MAX, width);
        }
        let bytes = w.finish();
        let mut r = BitReader::new(&bytes);
        for width in 0..=64u32 {
            let expect = if width == 64 { u64::MAX } else { (1u64 << width) - 1 };
            assert_eq!(r.get(width).unwrap(), expect);
        }
    }
}
