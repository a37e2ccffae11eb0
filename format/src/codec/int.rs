//! Integer codec. Tries, per column, the transforms that suit time-series data
//! (constant, linear, frame of reference, delta, delta-of-delta) and keeps the
//! smallest.
//! Residuals are zigzagged and packed in blocks of 128 values, each block with
//! its own width, so that one outlier costs one block, not the column.
//! Arithmetic wraps, so i64::MIN..=i64::MAX round-trip.
//!
//! A block is bit-packed (header byte = the width, 0..=64), or, when its
//! residuals take few values that are not a power of two (a random walk of
//! whole numbers stepping by -2..=2 has 5), packed in mixed radix (header
//! byte 65, then the base B as a varint): g residuals, the digits of one
//! number below B^g, in w bits, where (g, w) is the best grouping for B
//! (`radix_group`). A walk of 5 steps then costs log2(125) / 3 = 2.33 bits a
//! value, not 3. Bucket format version 2 writes these blocks.
//!
//! Version 4 adds the linear transform (a first value and a step, no blocks:
//! regular timestamps) and, through `encode_body` / `decode_body`, columns
//! whose count the bucket already holds leave it out.

use crate::bits::{bit_width, put_varint, unzigzag, zigzag, BitReader, BitWriter, Cursor};
use crate::error::{DecodeError, Result};

const BLOCK: usize = 128;
/// The header byte of a mixed-radix block.
const RADIX: u8 = 65;
/// Bases from 3 to this (excluded) may pack in mixed radix; a group's number
/// stays below 2^32, so every base packs at least two residuals a group.
const MAX_RADIX: u64 = 1 << 16;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
enum Transform {
    Constant = 0,
    FrameOfReference = 1,
    Delta = 2,
    DeltaOfDelta = 3,
    /// values[i] = first + i * step (wrapping): no residuals at all.
    Linear = 4,
}

/// The count, then the values (`encode_body`).
pub fn encode(values: &[i64], out: &mut Vec<u8>) {
    put_varint(out, values.len() as u64);
    encode_body(values, out);
}

/// The values without their count, for a reader that knows it
/// (`decode_body`); nothing at all for none.
pub fn encode_body(values: &[i64], out: &mut Vec<u8>) {
    if values.is_empty() {
        return;
    }
    if values.iter().all(|&v| v == values[0]) {
        out.push(Transform::Constant as u8);
        put_varint(out, zigzag(values[0]));
        return;
    }
    if values.len() >= 3 {
        let step = values[1].wrapping_sub(values[0]);
        if values.windows(2).all(|w| w[1].wrapping_sub(w[0]) == step) {
            out.push(Transform::Linear as u8);
            put_varint(out, zigzag(values[0]));
            put_varint(out, zigzag(step));
            return;
        }
    }
    // Size each transform from its blocks, then write the smallest's residuals.
    let (best, residuals) = [Transform::FrameOfReference, Transform::Delta, Transform::DeltaOfDelta]
        .into_iter()
        .map(|t| {
            let r = residuals(values, t);
            (t, packed_size(&r), r)
        })
        .min_by_key(|(_, size, _)| *size)
        .map(|(t, _, r)| (t, r))
        .expect("three candidates");
    write_header(values, best, out);
    pack_blocks(&residuals, out);
}

fn residuals(values: &[i64], t: Transform) -> Vec<u64> {
    match t {
        Transform::Constant | Transform::Linear => Vec::new(),
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
    residuals.chunks(BLOCK).map(|b| block_plan(b).size()).sum()
}

/// How one block is packed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BlockPlan {
    Bits { len: usize, width: u32 },
    Radix { len: usize, base: u64, group: u32, width: u32 },
}

impl BlockPlan {
    /// Encoded bytes, header included.
    fn size(self) -> usize {
        match self {
            BlockPlan::Bits { len, width } => 1 + (len * width as usize).div_ceil(8),
            BlockPlan::Radix { len, base, group, width } => {
                1 + varint_len(base) + (len.div_ceil(group as usize) * width as usize).div_ceil(8)
            }
        }
    }
}

fn varint_len(v: u64) -> usize {
    (bit_width(v).max(1) as usize).div_ceil(7)
}

/// The smaller packing of a block of residuals.
fn block_plan(block: &[u64]) -> BlockPlan {
    let max = block.iter().copied().max().unwrap_or(0);
    let bits = BlockPlan::Bits { len: block.len(), width: bit_width(max) };
    if max < 2 || max >= MAX_RADIX - 1 || (max + 1).is_power_of_two() {
        return bits;
    }
    let base = max + 1;
    let (group, width) = radix_group(base);
    let radix = BlockPlan::Radix { len: block.len(), base, group, width };
    if radix.size() < bits.size() { radix } else { bits }
}

/// The grouping of digits in base `base` (3 <= base < 2^16) that takes the
/// fewest bits a digit: g digits in w = ceil(log2(base^g)) <= 32 bits; on a
/// tie, the smaller group. Encoder and decoder both derive it from the base.
fn radix_group(base: u64) -> (u32, u32) {
    // Every block of every column asks (for each transform the encoder
    // weighs): small bases come from a table made once.
    const TABLED: usize = 4096;
    static TABLE: std::sync::OnceLock<Vec<(u8, u8)>> = std::sync::OnceLock::new();
    if (base as usize) < TABLED {
        let table = TABLE.get_or_init(|| {
            (0..TABLED as u64).map(|b| if b < 3 { (1, 1) } else { let (g, w) = compute_radix_group(b); (g as u8, w as u8) }).collect()
        });
        let (g, w) = table[base as usize];
        return (u32::from(g), u32::from(w));
    }
    compute_radix_group(base)
}

fn compute_radix_group(base: u64) -> (u32, u32) {
    let mut best = (1u32, bit_width(base - 1));
    let mut power = base as u128;
    for g in 2..=32u32 {
        power *= base as u128;
        if power > 1u128 << 32 {
            break;
        }
        let w = 128 - (power - 1).leading_zeros();
        // w / g < best.1 / best.0
        if (w as u64) * (best.0 as u64) < (best.1 as u64) * (g as u64) {
            best = (g, w);
        }
    }
    best
}

/// Division of values below 2^32 by `d` (2 <= d < 2^32) with a multiply
/// (Lemire, Kaser and Kurz, "Faster remainder by direct computation", 2019):
/// `q = (m * x) >> 64` with `m = floor((2^64 - 1) / d) + 1` is exact there.
#[derive(Clone, Copy)]
struct Divisor {
    d: u64,
    m: u64,
}

impl Divisor {
    fn new(d: u64) -> Self {
        Divisor { d, m: (u64::MAX / d).wrapping_add(1) }
    }

    #[inline]
    fn div_rem(self, x: u64) -> (u64, u64) {
        let q = ((self.m as u128 * x as u128) >> 64) as u64;
        (q, x - q * self.d)
    }
}

fn write_header(values: &[i64], t: Transform, out: &mut Vec<u8>) {
    out.push(t as u8);
    match t {
        Transform::Constant | Transform::Linear => unreachable!("handled by caller"),
        Transform::FrameOfReference => put_varint(out, zigzag(*values.iter().min().expect("non-empty"))),
        Transform::Delta => put_varint(out, zigzag(values[0])),
        Transform::DeltaOfDelta => {
            put_varint(out, zigzag(values[0]));
            if values.len() >= 2 {
                put_varint(out, zigzag(values[1].wrapping_sub(values[0])));
            }
        }
    }
}

fn pack_blocks(residuals: &[u64], out: &mut Vec<u8>) {
    for block in residuals.chunks(BLOCK) {
        let mut w = BitWriter::new();
        match block_plan(block) {
            BlockPlan::Bits { width, .. } => {
                out.push(width as u8);
                for &v in block {
                    w.put(v, width);
                }
            }
            BlockPlan::Radix { base, group, width, .. } => {
                out.push(RADIX);
                put_varint(out, base);
                for digits in block.chunks(group as usize) {
                    // Most significant digit first: the decoder takes the last digit off first.
                    let number = digits.iter().rev().fold(0u64, |acc, &d| acc * base + d);
                    w.put(number, width);
                }
            }
        }
        out.extend_from_slice(&w.finish());
    }
}

fn unpack_blocks(c: &mut Cursor, n: usize) -> Result<Vec<u64>> {
    let mut out = Vec::with_capacity(n);
    unpack_blocks_into(c, n, &mut out)?;
    Ok(out)
}

/// Appends `n` values unpacked from blocks to `out`.
fn unpack_blocks_into(c: &mut Cursor, n: usize, out: &mut Vec<u64>) -> Result<()> {
    let end = out.len() + n;
    while out.len() < end {
        let count = (end - out.len()).min(BLOCK);
        let header = c.u8("block width")?;
        if header == RADIX {
            let base = c.varint("radix base")?;
            if !(3..MAX_RADIX).contains(&base) {
                return Err(DecodeError::Invalid("radix base out of range"));
            }
            let (group, width) = radix_group(base);
            let groups = count.div_ceil(group as usize);
            let bytes = c.take((groups * width as usize).div_ceil(8), "radix block")?;
            unpack_radix(bytes, count, base, group, width, out)?;
            continue;
        }
        let width = u32::from(header);
        if width > 64 {
            return Err(DecodeError::Invalid("block bit width over 64"));
        }
        let bytes = c.take((count * width as usize).div_ceil(8), "packed block")?;
        unpack_block(bytes, count, width, out)?;
    }
    Ok(())
}

/// Appends `count` digits in base `base`, `group` to each `width`-bit number.
/// A number at or above base^group (only a corrupt block holds one) is an
/// error, as a digit above the base would be.
fn unpack_radix(bytes: &[u8], count: usize, base: u64, group: u32, width: u32, out: &mut Vec<u64>) -> Result<()> {
    let divisor = Divisor::new(base);
    // base^group <= 2^width <= 2^32.
    let limit = base.pow(group);
    let mut padded = [0u8; BLOCK * 32 / 8 + 16];
    padded[..bytes.len()].copy_from_slice(bytes);
    let mask = (1u64 << width) - 1;
    let group = group as usize;
    let start = out.len();
    out.resize(start + count, 0);
    for (i, digits) in out[start..].chunks_mut(group).enumerate() {
        let bit = i * width as usize;
        let word = u64::from_le_bytes(padded[bit / 8..bit / 8 + 8].try_into().expect("8 bytes"));
        let mut number = (word >> (bit % 8)) & mask;
        if number >= limit {
            return Err(DecodeError::Invalid("radix group out of range"));
        }
        for d in digits {
            let (q, r) = divisor.div_rem(number);
            *d = r;
            number = q;
        }
    }
    Ok(())
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
    decode_body(c, n)
}

/// Decodes `n` values written by `encode_body`.
pub fn decode_body(c: &mut Cursor, n: usize) -> Result<Vec<i64>> {
    if n == 0 {
        return Ok(Vec::new());
    }
    let tag = c.u8("integer transform")?;
    Ok(match tag {
        0 => vec![unzigzag(c.varint("constant")?); n],
        4 => {
            let first = unzigzag(c.varint("first value")?);
            let step = unzigzag(c.varint("step")?);
            std::iter::successors(Some(first), |v| Some(v.wrapping_add(step))).take(n).collect()
        }
        1 => {
            let min = unzigzag(c.varint("frame of reference")?);
            unpack_blocks(c, n)?.into_iter().map(|r| min.wrapping_add(r as i64)).collect()
        }
        // The deltas are unpacked into the output and summed in place: one
        // allocation and one pass less per column than a separate buffer.
        2 => {
            let mut v = unzigzag(c.varint("first value")?);
            let mut out = Vec::with_capacity(n);
            out.push(v as u64);
            unpack_blocks_into(c, n - 1, &mut out)?;
            for x in &mut out[1..] {
                v = v.wrapping_add(unzigzag(*x));
                *x = v as u64;
            }
            out.into_iter().map(|x| x as i64).collect()
        }
        3 => {
            let mut v = unzigzag(c.varint("first value")?);
            let mut out = Vec::with_capacity(n);
            out.push(v as u64);
            if n >= 2 {
                let mut d = unzigzag(c.varint("first delta")?);
                v = v.wrapping_add(d);
                out.push(v as u64);
                unpack_blocks_into(c, n - 2, &mut out)?;
                for x in &mut out[2..] {
                    d = d.wrapping_add(unzigzag(*x));
                    v = v.wrapping_add(d);
                    *x = v as u64;
                }
            }
            out.into_iter().map(|x| x as i64).collect()
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
        round_trip(&[i64::MAX - 1, i64::MAX, i64::MIN, i64::MIN + 1]);
    }

    #[test]
    fn regular_values_take_the_linear_transform() {
        let ts: Vec<i64> = (0..360).map(|i| 1_700_000_000_000_000 + i * 10_000_000).collect();
        let mut body = Vec::new();
        encode_body(&ts, &mut body);
        assert_eq!(body[0], Transform::Linear as u8);
        // Transform, an 8-byte first value and a 4-byte step.
        assert_eq!(body.len(), 1 + 8 + 4);
        let mut c = Cursor::new(&body);
        assert_eq!(decode_body(&mut c, ts.len()).unwrap(), ts);
        assert!(c.is_empty());
        // Two values are a delta, not a line (a line needs three to say so).
        assert_ne!(round_trip(&[1, 2]), 0);
    }

    #[test]
    fn bodies_round_trip_without_their_count() {
        for values in [vec![], vec![5], vec![3, 3], vec![1, 4, 9, 16, 25], (0..1000).map(|i| i * i % 977).collect::<Vec<i64>>()] {
            let mut body = Vec::new();
            encode_body(&values, &mut body);
            let mut c = Cursor::new(&body);
            assert_eq!(decode_body(&mut c, values.len()).unwrap(), values);
            assert!(c.is_empty());
        }
    }

    #[test]
    fn radix_groups_are_the_tightest_below_32_bits() {
        assert_eq!(radix_group(3), (17, 27));
        assert_eq!(radix_group(5), (3, 7));
        assert_eq!(radix_group(10), (3, 10));
        for base in 3..2000u64 {
            let (g, w) = radix_group(base);
            assert!(w <= 32 && (base as u128).pow(g) <= 1u128 << w && (base as u128).pow(g) > 1u128 << (w - 1));
            assert!(w as f64 / g as f64 <= bit_width(base - 1) as f64);
        }
    }

    #[test]
    fn the_multiply_divides_exactly() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for d in (2..70_000u64).step_by(7).chain([3, 5, 65_535, u32::MAX as u64]) {
            let div = Divisor::new(d);
            for _ in 0..50 {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                let x = seed & u32::MAX as u64;
                assert_eq!(div.div_rem(x), (x / d, x % d), "{x} / {d}");
            }
            assert_eq!(div.div_rem(u32::MAX as u64), (u32::MAX as u64 / d, u32::MAX as u64 % d));
        }
    }

    #[test]
    fn radix_blocks_round_trip_every_base_and_length() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for base in [3u64, 5, 6, 7, 10, 11, 100, 101, 1000, 65_535] {
            for count in [1usize, 2, 3, 4, 127, 128, 300] {
                let values: Vec<u64> = (0..count)
                    .map(|_| {
                        seed ^= seed << 13;
                        seed ^= seed >> 7;
                        seed ^= seed << 17;
                        seed % base
                    })
                    .collect();
                let mut packed = Vec::new();
                pack_blocks(&values, &mut packed);
                let got = unpack_blocks(&mut Cursor::new(&packed), count).unwrap();
                assert_eq!(got, values, "base {base}, count {count}");
                assert_eq!(packed.len(), values.chunks(BLOCK).map(|b| block_plan(b).size()).sum::<usize>());
            }
        }
    }

    #[test]
    fn a_radix_group_over_its_range_is_an_error() {
        // Base 5, 3 digits in 7 bits: 125..=127 are no group of three digits.
        let mut bytes = vec![RADIX];
        put_varint(&mut bytes, 5);
        bytes.push(127);
        assert!(unpack_blocks(&mut Cursor::new(&bytes), 3).is_err());
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
        // Five steps: 2.33 bits a value in mixed radix.
        assert!(round_trip(&walk) < 1000 * 7 / 3 / 8 + 64, "{}", round_trip(&walk));
    }
}
