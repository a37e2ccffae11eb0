//! Simple-8b blocks as BSONColumn writes them: 64-bit little-endian words, a
//! 4-bit selector in the low bits, slots of equal width above it, an all-ones
//! slot meaning "missing", selectors 7 and 8 with an extension nibble that
//! stores trailing zeros, and selector 15 repeating the previous slot.

/// A slot: its unsigned value (zig-zag still applied), or missing.
pub type Slot = Option<u128>;

/// Base selectors 1..=14: (slot width, slot count, first data bit).
const BASE: [(u32, u32, u32); 15] = [
    (0, 0, 0),
    (1, 60, 4),
    (2, 30, 4),
    (3, 20, 4),
    (4, 15, 4),
    (5, 12, 4),
    (6, 10, 4),
    (7, 8, 8),
    (8, 7, 8),
    (10, 6, 4),
    (12, 5, 4),
    (15, 4, 4),
    (20, 3, 4),
    (30, 2, 4),
    (60, 1, 4),
];

/// Selector 7 extensions 1..=9: value bits (4 count bits, zeros counted one by one).
const SEVEN: [u32; 9] = [2, 3, 4, 5, 7, 10, 14, 24, 52];
/// Selector 8 extensions 1..=7: value bits (4 count bits, zeros counted by four).
const EIGHT_SMALL: [u32; 7] = [4, 5, 7, 10, 14, 24, 52];
/// Selector 8 extensions 8..=13: value bits (5 count bits, zeros counted by four).
const EIGHT_LARGE: [u32; 6] = [4, 6, 9, 13, 23, 51];

/// Appends the slots of one block to `out`. `prev` is the previous slot of
/// the stream (what an RLE block repeats); it is updated. `wide`: a 128-bit
/// stream, whose trailing-zero shifts are not taken modulo 64.
pub fn decode_block(word: u64, wide: bool, prev: &mut Slot, out: &mut Vec<Slot>) -> Result<(), String> {
    let sel = (word & 0xF) as usize;
    let ext = ((word >> 4) & 0xF) as u32;
    let (vbits, cbits, mult, first) = match sel {
        0 => return Err("Simple-8b selector 0 is invalid".into()),
        15 => {
            let n = (ext as usize + 1) * 120;
            out.extend(std::iter::repeat_n(*prev, n));
            return Ok(());
        }
        7 if ext > 0 => match SEVEN.get(ext as usize - 1) {
            Some(&v) => (v, 4, 1, 8),
            None => return Err(format!("Simple-8b selector 7 has no extension {ext}")),
        },
        8 if ext > 0 => {
            if let Some(&v) = EIGHT_SMALL.get(ext as usize - 1) {
                (v, 4, 4, 8)
            } else if let Some(&v) = EIGHT_LARGE.get(ext as usize - 8) {
                (v, 5, 4, 8)
            } else {
                return Err(format!("Simple-8b selector 8 has no extension {ext}"));
            }
        }
        s => {
            let (w, _, first) = BASE[s];
            (w, 0, 0, first)
        }
    };
    let slot_bits = vbits + cbits;
    let count = if cbits == 0 { BASE[sel].1 } else { 56 / slot_bits };
    let mask: u64 = if slot_bits >= 64 { u64::MAX } else { (1u64 << slot_bits) - 1 };
    for i in 0..count {
        let slot = (word >> (first + i * slot_bits)) & mask;
        let v = if slot == mask {
            None
        } else if cbits == 0 {
            Some(slot as u128)
        } else {
            let zeros = (slot & ((1 << cbits) - 1)) as u32 * mult;
            let value = slot >> cbits;
            Some(if wide {
                (value as u128) << zeros
            } else {
                // MongoDB shifts 64-bit values modulo 64 (a count past 63 wraps).
                (value.wrapping_shl(zeros % 64)) as u128
            })
        };
        out.push(v);
        *prev = v;
    }
    Ok(())
}

/// Zig-zag decoding at 64 bits.
pub fn unzigzag64(u: u128) -> i64 {
    let u = u as u64;
    ((u >> 1) as i64) ^ -((u & 1) as i64)
}

/// Zig-zag decoding at 128 bits.
pub fn unzigzag128(u: u128) -> i128 {
    ((u >> 1) as i128) ^ -((u & 1) as i128)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slots(word: u64) -> Vec<Slot> {
        let mut out = Vec::new();
        let mut prev = Some(0);
        decode_block(word, false, &mut prev, &mut out).unwrap();
        out
    }

    #[test]
    fn blocks_decode_as_mongodb_writes_them() {
        assert_eq!(slots(0xFFFF_FFFF_FFFF_FFFE), vec![None]);
        assert_eq!(slots(0x1E), vec![Some(1)]);
        // Sel 8, ext 13, count 17: 68 zeros wrap to 4 in a 64-bit stream.
        assert_eq!(slots(0x55E6_E5D4_E9F2_B1D8), vec![Some(12089623907203408)]);
        assert_eq!(slots(0x0F).len(), 120);
        assert_eq!(slots(0xFF).len(), 1920);
        assert!(decode_block(0, false, &mut Some(0), &mut Vec::new()).is_err());
        assert!(decode_block(0xA7, false, &mut Some(0), &mut Vec::new()).is_err());
        assert!(decode_block(0xE8, false, &mut Some(0), &mut Vec::new()).is_err());
    }

    #[test]
    fn zigzag_round_trips_the_extremes() {
        assert_eq!(unzigzag64(0), 0);
        assert_eq!(unzigzag64(1), -1);
        assert_eq!(unzigzag64(2), 1);
        assert_eq!(unzigzag64(u64::MAX as u128 - 1), i64::MAX);
        assert_eq!(unzigzag64(u64::MAX as u128), i64::MIN);
        assert_eq!(unzigzag128(u128::MAX), i128::MIN);
    }
}
