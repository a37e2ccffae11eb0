//! Row identifiers. A row's TID is (bucket id, row index + 1): unique among
//! live rows, known at insert time while the row is still buffered, and stable
//! while its bucket lives (a rewrite creates a new bucket with a new id).
//! Offsets stay below 2047 (bucket_max_count is capped at 2000).

use pgrx::pg_sys;

pub fn set(tid: &mut pg_sys::ItemPointerData, bucket_id: i64, row: usize) {
    let block = bucket_id as u32;
    tid.ip_blkid.bi_hi = (block >> 16) as u16;
    tid.ip_blkid.bi_lo = (block & 0xffff) as u16;
    tid.ip_posid = (row + 1) as u16;
}

/// (bucket id, row index) of a TID made by `set`.
pub fn get(tid: &pg_sys::ItemPointerData) -> (i64, usize) {
    let block = (u32::from(tid.ip_blkid.bi_hi) << 16) | u32::from(tid.ip_blkid.bi_lo);
    (i64::from(block), (tid.ip_posid as usize).saturating_sub(1))
}
