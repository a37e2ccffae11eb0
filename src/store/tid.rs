//! Row identifiers. A row's TID is (bucket id, row index): unique among live
//! rows, known at insert time while the row is still buffered, and stable
//! while its bucket version lives (every new store tuple version, a relabel
//! included, gets a new id).
//!
//! The 48 bits of an ItemPointer hold a 37-bit bucket id and an 11-bit row
//! index: the id's low 32 bits are the block number, its high 5 bits the top
//! of the offset, and the low 11 bits of the offset are row + 1 (rows stay
//! below 2047: bucket_max_count is capped at 2000, and the offset is never 0).
//! Buckets written by 0.1.0 have ids below 2^32 and so the same TIDs as then.
//! Ids whose block would be InvalidBlockNumber are never handed out
//! (`is_usable_id`).

use pgrx::pg_sys;

const ROW_BITS: u32 = 11;
const ROW_MASK: u16 = (1 << ROW_BITS) - 1;
/// Largest bucket id: 32 block bits + 5 offset bits.
pub(super) const MAX_BUCKET_ID: i64 = (1 << 37) - 1;

/// Whether an id can name a bucket: in range, and not mapping to the invalid block.
pub(super) fn is_usable_id(id: i64) -> bool {
    (1..=MAX_BUCKET_ID).contains(&id) && (id & 0xffff_ffff) != 0xffff_ffff
}

pub fn set(tid: &mut pg_sys::ItemPointerData, bucket_id: i64, row: usize) {
    debug_assert!(is_usable_id(bucket_id) && row < ROW_MASK as usize);
    let block = bucket_id as u32;
    let high = (bucket_id >> 32) as u16;
    tid.ip_blkid.bi_hi = (block >> 16) as u16;
    tid.ip_blkid.bi_lo = (block & 0xffff) as u16;
    tid.ip_posid = (high << ROW_BITS) | (row as u16 + 1);
}

/// (bucket id, row index) of a TID made by `set`. A TID that `set` cannot
/// make (row offset 0) reads as a row past every bucket's end.
pub fn get(tid: &pg_sys::ItemPointerData) -> (i64, usize) {
    let block = (u32::from(tid.ip_blkid.bi_hi) << 16) | u32::from(tid.ip_blkid.bi_lo);
    let high = i64::from(tid.ip_posid >> ROW_BITS);
    let row = match tid.ip_posid & ROW_MASK {
        0 => usize::MAX,
        r => r as usize - 1,
    };
    ((high << 32) | i64::from(block), row)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_across_the_old_32_bit_limit() {
        for id in [1i64, 42, u32::MAX as i64 - 1, u32::MAX as i64 + 1, 1 << 36, MAX_BUCKET_ID - 1] {
            for row in [0usize, 1, 999, 1999] {
                let mut tid = pg_sys::ItemPointerData::default();
                set(&mut tid, id, row);
                assert_eq!(get(&tid), (id, row));
                assert_ne!(tid.ip_posid, 0);
            }
        }
        assert!(!is_usable_id(u32::MAX as i64));
        assert!(!is_usable_id((3i64 << 32) | 0xffff_ffff));
        assert!(!is_usable_id(0));
        assert!(!is_usable_id(MAX_BUCKET_ID));
        assert!(!is_usable_id(MAX_BUCKET_ID + 1));
    }
}
