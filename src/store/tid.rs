//! Row identifiers. A row's TID is (bucket id, row index): unique among live
//! rows and stable while its bucket version lives (every new store tuple
//! version, a relabel included, gets a new id). A buffered row has a
//! provisional TID (`buffered_id`): its bucket draws a real id only when it is
//! written as a bucket, not when it goes to the tail or starts buffering.
//!
//! The 48 bits of an ItemPointer hold a 37-bit bucket id and an 11-bit row
//! index: the id's low 32 bits are the block number, its high 5 bits the top
//! of the offset, and the low 11 bits of the offset are row + 1 (rows stay
//! below 2047: bucket_max_count is capped at 2000, and the offset is never 0).
//! Buckets written by 0.1.0 have ids below 2^32 and so the same TIDs as then.
//! Ids whose block would be InvalidBlockNumber are never handed out
//! (`is_usable_id`).
//!
//! Bucket ids stay below 2^36 (they cycle there); ids from 2^36 on name rows
//! of the table's tail (src/store/tail.rs): 2^36 + segment * 2^32 + the heap
//! block of the row's segment tuple, with row = its line pointer offset - 1.

use pgrx::pg_sys;

const ROW_BITS: u32 = 11;
const ROW_MASK: u16 = (1 << ROW_BITS) - 1;
/// Largest bucket id: 36 of the 37 bits (32 block bits + 5 offset bits);
/// the ids above it are tail rows'.
pub(super) const MAX_BUCKET_ID: i64 = (1 << 36) - 1;
const TAIL_BASE: i64 = 1 << 36;
/// The segment number of provisional TIDs (no tail has a segment 15).
const BUFFERED: i64 = 15;

/// The provisional id `n` of a bucket that is being buffered (unique among
/// this backend's buffered buckets; no store tuple or tail row has it).
pub fn buffered_id(n: u32) -> i64 {
    TAIL_BASE | (BUFFERED << 32) | i64::from(n)
}

fn is_buffered_id(id: i64) -> bool {
    id >> 32 == (TAIL_BASE >> 32) | BUFFERED && (id & 0xffff_ffff) != 0xffff_ffff
}

/// Whether an id can name a bucket: in range, and not mapping to the invalid block.
pub(super) fn is_usable_id(id: i64) -> bool {
    (1..=MAX_BUCKET_ID).contains(&id) && (id & 0xffff_ffff) != 0xffff_ffff
}

#[inline]
pub fn set(tid: &mut pg_sys::ItemPointerData, bucket_id: i64, row: usize) {
    debug_assert!((is_usable_id(bucket_id) || is_buffered_id(bucket_id)) && row < ROW_MASK as usize);
    let block = bucket_id as u32;
    let high = (bucket_id >> 32) as u16;
    tid.ip_blkid.bi_hi = (block >> 16) as u16;
    tid.ip_blkid.bi_lo = (block & 0xffff) as u16;
    tid.ip_posid = (high << ROW_BITS) | (row as u16 + 1);
}

/// Whether a bucket id from `get` names a tail row's segment block.
pub fn is_tail_id(id: i64) -> bool {
    id >= TAIL_BASE
}

/// The TID of the tail row whose segment tuple is `heap` in segment `segment`.
pub fn set_tail(tid: &mut pg_sys::ItemPointerData, segment: usize, heap: &pg_sys::ItemPointerData) {
    let block = (u32::from(heap.ip_blkid.bi_hi) << 16) | u32::from(heap.ip_blkid.bi_lo);
    let id = TAIL_BASE | ((segment as i64) << 32) | i64::from(block);
    debug_assert!(segment < 3 && heap.ip_posid >= 1 && heap.ip_posid < ROW_MASK);
    let high = (id >> 32) as u16;
    tid.ip_blkid = heap.ip_blkid;
    tid.ip_posid = (high << ROW_BITS) | heap.ip_posid;
}

/// The ids (as `get` reads them) of segment `segment`'s rows: its moves entries' range.
pub fn tail_id_range(segment: usize) -> (i64, i64) {
    let base = TAIL_BASE | ((segment as i64) << 32);
    (base, base | 0xffff_ffff)
}

/// (segment, segment tuple TID) of a tail row's TID; None for a bucket row's
/// (or for a TID that names no tail row).
pub fn tail_of(tid: &pg_sys::ItemPointerData) -> Option<(usize, pg_sys::ItemPointerData)> {
    let (id, row) = get(tid);
    if !is_tail_id(id) || row == usize::MAX {
        return None;
    }
    let segment = ((id >> 32) & 0xf) as usize;
    if segment >= 3 {
        return None;
    }
    let mut heap = pg_sys::ItemPointerData::default();
    heap.ip_blkid = tid.ip_blkid;
    heap.ip_posid = (row + 1) as u16;
    Some((segment, heap))
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
        for id in [1i64, 42, u32::MAX as i64 - 1, u32::MAX as i64 + 1, 1 << 35, MAX_BUCKET_ID - 1] {
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

    #[test]
    fn tail_rows_have_tids_of_their_own() {
        for segment in 0..3 {
            for (block, offset) in [(0u32, 1u16), (1, 291), (u32::MAX - 1, 7)] {
                let mut heap = pg_sys::ItemPointerData::default();
                heap.ip_blkid.bi_hi = (block >> 16) as u16;
                heap.ip_blkid.bi_lo = (block & 0xffff) as u16;
                heap.ip_posid = offset;
                let mut tid = pg_sys::ItemPointerData::default();
                set_tail(&mut tid, segment, &heap);
                let (seg, back) = tail_of(&tid).expect("a tail row");
                assert_eq!(seg, segment);
                assert_eq!((back.ip_blkid.bi_hi, back.ip_blkid.bi_lo, back.ip_posid), (heap.ip_blkid.bi_hi, heap.ip_blkid.bi_lo, offset));
                assert!(is_tail_id(get(&tid).0));
            }
        }
        let mut tid = pg_sys::ItemPointerData::default();
        set(&mut tid, MAX_BUCKET_ID - 1, 5);
        assert!(tail_of(&tid).is_none());
    }

    #[test]
    fn buffered_rows_name_neither_a_bucket_nor_a_tail_row() {
        for n in [0u32, 1, 7, u32::MAX - 1] {
            let id = buffered_id(n);
            assert!(is_buffered_id(id) && !is_usable_id(id));
            let mut tid = pg_sys::ItemPointerData::default();
            set(&mut tid, id, 999);
            assert_eq!(get(&tid), (id, 999));
            assert!(tail_of(&tid).is_none());
        }
    }
}
