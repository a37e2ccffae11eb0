//! Integer codec. Tries, per column, the transforms that suit time-series data
//! (constant, frame of reference, delta, delta-of-delta) and keeps the smallest.
//! Residuals are zigzagged and bit-packed in blocks of 128 values, each block
//! with its own width, so that one outlier costs one block, not the column.
//! Arithmetic wraps, so i64::MIN..=i64::MAX round-trip.

use crate::bits::{bit_width, put_varint, unzigzag, zigzag, BitReader, BitWriter, Cursor};
use crate::error::{DecodeError, Result};

const BLOCK: usize = 128;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
enum Transform {
    Constant = 0,
    FrameOfReference = 1,
    Delta = 2,
    DeltaOfDelta = 3,
}

pub fn encode(values: &[i64], out: &mut Vec<u8>) {
    put_varint(out, values.len() as u64);
    if values.is_empty() {
        return;
    }
    if values.iter().all(|&v| v == values[0]) {
        out.push(Transform::Constant as u8);
        put_varint(out, zigzag(values[0]));
        return;
    }
    // Size each transform from its block widths, then encode only the smallest.
    let best = [Transform::FrameOfReference, Transform::Delta, Transform::DeltaOfDelta]
        .into_iter()
        .min_by_key(|&t| packed_size(&residuals(values, t)))
        .expect("three candidates");
    out.extend_from_slice(&encode_with(values, best));
}

fn residuals(values: &[i64], t: Transform) -> Vec<u64> {
    match t {
        Transform::Constant => Vec::new(),
        Transform::FrameOfReference => {
            let min = *values.iter().min().expect("non-empty");
            values.iter().map(|&v| v.wrapping_sub(min) as u64).collect()
        }
        Transform::Delta => values.windows(2).map(|w| zigzag(w[1].wrapping_sub(w[0]))).collect(),
        Transform::DeltaOfDelta => {
            let mut prev = values.get(1).map_or(0, |v| v.wrapping_sub(values[0]));
            values
                .windows(2)
                .skip(1)
                .map(|w| {
                    let d = w[1].wrapping_sub(w[0]);
                    let dd = d.wrapping_sub(prev);
                    prev = d;
                    zigzag(dd)
                })
                .collect()
        }
    }
}

fn packed_size(residuals: &[u64]) -> usize {
    residuals
        .chunks(BLOCK)
        .map(|b| 1 + (b.len() * b.iter().map(|&v| bit_width(v)).max().unwrap_or(0) as usize).div_ceil(8))
        .sum()
}

fn encode_with(values: &[i64], t: Transform) -> Vec<u8> {
    let mut out = vec![t as u8];
    match t {
        Transform::Constant => unreachable!("handled by caller"),
        Transform::FrameOfReference => put_varint(&mut out, zigzag(*values.iter().min().expect("non-empty"))),
        Transform::Delta => put_varint(&mut out, zigzag(values[0])),
        Transform::DeltaOfDelta => {
            put_varint(&mut out, zigzag(values[0]));
            if values.len() >= 2 {
                put_varint(&mut out, zigzag(values[1].wrapping_sub(values[0])));
            }
        }
    }
    pack_blocks(&residuals(values, t), &mut out);
    out
}

fn pack_blocks(residuals: &[u64], out: &mut Vec<u8>) {
    for block in residuals.chunks(BLOCK) {
        let width = block.iter().map(|&v| bit_width(v)).max().unwrap_or(0);
        out.push(width as u8);
        let mut w = BitWriter::new();
        for &v in block {
            w.put(v, width);
        }
        out.extend_from_slice(&w.finish());
    }
}

fn unpack_blocks(c: &mut Cursor, n: usize) -> Result<Vec<u64>> {
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let count = (n - out.len()).min(BLOCK);
        let width = u32::from(c.u8("block width")?);
        if width > 64 {
            return Err(DecodeError::Invalid("block bit width over 64"));
        }
        let bytes = c.take((count * width as usize).div_ceil(8), "packed block")?;
        unpack_block(bytes, count, width, &mut out)?;
    }
    Ok(out)
}

/// Widest values read with one unaligned 8-byte load: a value starts up to 7
/// bits into its first byte.
const WORD_WIDTH: u32 = 57;

/// Appends `count` values of `width` bits packed in `bytes` (least significant
/// bit first). Decoding is most of a wide scan's cost: whole words, no
/// per-value bounds checks, where the width allows.
fn unpack_block(bytes: &[u8], count: usize, width: u32, out: &mut Vec<u64>) -> Result<()> {
    if width == 0 {
        out.resize(out.len() + count, 0);
        return Ok(());
    }
    if width > WORD_WIDTH {
        let mut r = BitReader::new(bytes);
        for _ in 0..count {
            out.push(r.get(width)?);
        }
        return Ok(());
    }
    // The block, padded so that every value's 8-byte load stays inside.
    let mut padded = [0u8; BLOCK * WORD_WIDTH as usize / 8 + 16];
    padded[..bytes.len()].copy_from_slice(bytes);
    let mask = (1u64 << width) - 1;
    out.extend((0..count).map(|i| {
        let bit = i * width as usize;
        let word = u64::from_le_bytes(padded[bit / 8..bit / 8 + 8].try_into().expect("8 bytes"));
        (word >> (bit % 8)) & mask
    }));
    Ok(())
}

/// Decodes at most `limit` values (the caller knows how many to expect).
pub fn decode(c: &mut Cursor, limit: usize) -> Result<Vec<i64>> {
    let n = c.len("integer count", limit)?;
    if n == 0 {
        return Ok(Vec::new());
    }
    let tag = c.u8("integer transform")?;
    Ok(match tag {
        0 => vec![unzigzag(c.varint("constant")?); n],
        1 => {
            let min = unzigzag(c.varint("frame of reference")?);
            unpack_blocks(c, n)?.into_iter().map(|r| min.wrapping_add(r as i64)).collect()
        }
        2 => {
            let mut v = unzigzag(c.varint("first value")?);
            let mut out = Vec::with_capacity(n);
            out.push(v);
            for r in unpack_blocks(c, n - 1)? {
                v = v.wrapping_add(unzigzag(r));
                out.push(v);
            }
            out
        }
        3 => {
            let mut v = unzigzag(c.varint("first value")?);
            let mut out = Vec::with_capacity(n);
            out.push(v);
            if n >= 2 {
                let mut d = unzigzag(c.varint("first delta")?);
                v = v.wrapping_add(d);
                out.push(v);
                for r in unpack_blocks(c, n - 2)? {
                    d = d.wrapping_add(unzigzag(r));
                    v = v.wrapping_add(d);
                    out.push(v);
                }
            }
            out
        }
        tag => return Err(DecodeError::UnknownTag { what: "integer transform", tag }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn word_unpacking_matches_the_bit_reader_at_every_width() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for width in 0..=64u32 {
            for count in [1usize, 7, 127, BLOCK] {
                let values: Vec<u64> = (0..count)
                    .map(|_| {
                        seed ^= seed << 13;
                        seed ^= seed >> 7;
                        seed ^= seed << 17;
                        if width == 64 { seed } else { seed & ((1u64 << width) - 1) }
                    })
                    .collect();
                let mut w = BitWriter::new();
                values.iter().for_each(|&v| w.put(v, width));
                let bytes = w.finish();
                let mut out = vec![42];
                unpack_block(&bytes, count, width, &mut out).unwrap();
                assert_eq!(&out[1..], &values[..], "width {width}, count {count}");
            }
        }
    }

    fn round_trip(values: &[i64]) -> usize {
        let mut out = Vec::new();
        encode(values, &mut out);
        let mut c = Cursor::new(&out);
        assert_eq!(decode(&mut c, values.len()).unwrap(), values);
        assert!(c.is_empty());
        out.len()
    }

    #[test]
    fn regular_timestamps_cost_about_a_byte_per_block() {
        let ts: Vec<i64> = (0..1000).map(|i| 1_700_000_000_000_000 + i * 10_000_000).collect();
        assert!(round_trip(&ts) < 40);
    }

    #[test]
    fn extremes_round_trip() {
        round_trip(&[i64::MIN, i64::MAX, 0, -1, i64::MIN, i64::MAX]);
        round_trip(&[]);
        round_trip(&[42]);
        round_trip(&[7, 7, 7]);
    }

    #[test]
    fn small_random_walk_packs_to_few_bits() {
        let mut v = 50i64;
        let walk: Vec<i64> = (0..1000)
            .map(|i| {
                v = (v + [(1), (-1), (2), (0), (-2)][i % 5]).clamp(0, 100);
                v
            })
            .collect();
        assert!(round_trip(&walk) < 1000 * 3 / 8 + 64);
    }
}
