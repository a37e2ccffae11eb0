//! One tail row by its TID: fetched as a snapshot sees it, deleted, given
//! new meta values, or locked for EvalPlanQual, by heap's own table AM
//! callbacks on the row's segment. A row whose segment a drain has emptied
//! into buckets is not at its TID any more: the moves table says where it
//! went (`Drained`), as for a rewritten bucket.

use crate::catalog::config::{Config, TailConfig};
use crate::catalog::shape::TableShape;
use super::bucket::LoadedBucket;
use super::tail::{GroupReader, drained, drained_now, heap_am, heap_slot};
use pgrx::pg_sys;

/// What a change of a tail row came to.
pub enum Change {
    /// Heap's answer; on TM_Ok the row's new TID (an UPDATE's new version).
    Heap(pg_sys::TM_Result::Type, pg_sys::ItemPointerData),
    /// A drain moved the row into a bucket: follow it through the moves table.
    Drained,
}


/// The tail row's segment (index, oid) and segment TID, if `tid` names one.
fn locate<'a>(config: &'a Config, tid: &pg_sys::ItemPointerData) -> Option<(&'a TailConfig, usize, pg_sys::ItemPointerData)> {
    let tail = config.tail.as_ref()?;
    let (segment, heap) = super::tid::tail_of(tid)?;
    Some((tail, segment, heap))
}

/// The last version of the tail row at `tid` in its segment: heap's update
/// chain followed to its end (a meta UPDATE writes a new version there). A
/// drain records where the versions it read went, so a row updated before a
/// drain is found through the version the drain moved. The segment keeps
/// every version until it is emptied, which waits for every snapshot that
/// could still follow the chain.
///
/// # Safety
/// In a transaction; `tid` names a tail row of `config`'s table.
pub unsafe fn latest_version(config: &Config, tid: &pg_sys::ItemPointerData) -> pg_sys::ItemPointerData {
    let Some((tail, segment, mut heap)) = locate(config, tid) else { return *tid };
    // SAFETY: the segment is opened AccessShare (kept to the transaction's end); heap's get_latest_tid follows the chain
    // from `heap` with SnapshotAny (every version counts, as for the chain's end) through a scan begun and ended here.
    unsafe {
        let seg = pg_sys::table_open(tail.segments[segment], pg_sys::AccessShareLock as i32);
        let am = heap_am();
        let scan = (am.scan_begin.expect("heap scans"))(
            seg,
            &raw mut pg_sys::SnapshotAnyData,
            0,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            pg_sys::ScanOptions::SO_TYPE_TIDSCAN,
        );
        (am.tuple_get_latest_tid.expect("heap follows chains"))(scan, &mut heap);
        (am.scan_end.expect("heap ends scans"))(scan);
        pg_sys::table_close(seg, pg_sys::NoLock as i32);
    }
    let mut latest = *tid;
    super::tid::set_tail(&mut latest, segment, &heap);
    latest
}

/// Whether `tid` names a tail row.
pub fn is_tail_row(tid: &pg_sys::ItemPointerData) -> bool {
    super::tid::tail_of(tid).is_some()
}

/// The row in `slot` (a tuple of segment `segment`) as a one-row bucket.
///
/// # Safety
/// `slot` holds a tuple of the open segment `seg`.
unsafe fn row_of_slot(config: &Config, shape: &TableShape, segment: usize, seg: pg_sys::Relation, slot: *mut pg_sys::TupleTableSlot) -> LoadedBucket {
    let mut reader = GroupReader::new(config, shape);
    // SAFETY: `slot` holds a tuple of the open segment `seg` (the contract).
    unsafe { reader.add_slot(segment, seg, slot) };
    let groups = reader.finish();
    groups[0].loaded(shape, None)
}

/// The tail row at `tid` as `snapshot` sees it, as a one-row bucket; None if
/// that snapshot does not see it there (a drain's mark it sees says the row
/// is in a bucket).
///
/// # Safety
/// In a transaction; `snapshot` valid for the call.
pub unsafe fn fetch(config: &Config, shape: &TableShape, tid: &pg_sys::ItemPointerData, snapshot: pg_sys::Snapshot) -> Option<LoadedBucket> {
    let (tail, segment, mut heap) = locate(config, tid)?;
    // SAFETY: `snapshot` is an MVCC snapshot (or NULL) from the caller; only MVCC ones know of marks.
    let mvcc = !snapshot.is_null() && unsafe { (*snapshot).snapshot_type } == pg_sys::SnapshotType::SNAPSHOT_MVCC;
    // SAFETY: in a transaction with the caller's snapshot (drained's contract).
    if mvcc && unsafe { drained(config, tail, snapshot) }[segment] {
        return None;
    }
    // SAFETY: the segment is opened AccessShare (kept to the transaction's end) for heap's fetch into a slot of it,
    // which is dropped before the segment is closed.
    unsafe {
        let seg = pg_sys::table_open(tail.segments[segment], pg_sys::AccessShareLock as i32);
        let slot = heap_slot(seg);
        let found = (heap_am().tuple_fetch_row_version.expect("heap fetches"))(seg, &mut heap, snapshot, slot);
        let row = found.then(|| row_of_slot(config, shape, segment, seg, slot));
        pg_sys::ExecDropSingleTupleTableSlot(slot);
        pg_sys::table_close(seg, pg_sys::NoLock as i32);
        row
    }
}

/// Converts heap's failure data on a segment to the table's TIDs (heap fills
/// it only when the change failed).
fn tmfd_to_tail(segment: usize, result: pg_sys::TM_Result::Type, tmfd: &mut pg_sys::TM_FailureData) {
    if result != pg_sys::TM_Result::TM_Ok && tmfd.ctid.ip_posid != 0 {
        let heap = tmfd.ctid;
        super::tid::set_tail(&mut tmfd.ctid, segment, &heap);
    }
}

/// DELETE of the tail row at `tid`, as heap_delete does it.
///
/// # Safety
/// In a transaction; `tmfd` writable; the arguments are table_tuple_delete's.
pub unsafe fn delete(
    config: &Config,
    tid: &pg_sys::ItemPointerData,
    cid: pg_sys::CommandId,
    snapshot: pg_sys::Snapshot,
    crosscheck: pg_sys::Snapshot,
    wait: bool,
    tmfd: &mut pg_sys::TM_FailureData,
) -> Change {
    let Some((tail, segment, mut heap)) = locate(config, tid) else { return Change::Drained };
    // SAFETY: the segment is locked RowExclusive to the transaction's end before its mark is read (so no drain can
    // follow), then heap deletes the tuple with the executor's arguments.
    unsafe {
        let seg = pg_sys::table_open(tail.segments[segment], pg_sys::RowExclusiveLock as i32);
        let result = if drained_now(config, tail, segment) {
            Change::Drained
        } else {
            let r = (heap_am().tuple_delete.expect("heap deletes"))(seg, &mut heap, cid, snapshot, crosscheck, wait, tmfd, false);
            tmfd_to_tail(segment, r, tmfd);
            Change::Heap(r, *tid)
        };
        pg_sys::table_close(seg, pg_sys::NoLock as i32);
        result
    }
}

#[cfg(feature = "pg15")]
type UpdateIndexes = bool;
#[cfg(not(feature = "pg15"))]
type UpdateIndexes = pg_sys::TU_UpdateIndexes::Type;

/// UPDATE of the tail row at `otid` to the meta values `meta` (one datum or
/// NULL per meta column; the other columns cannot change), as heap_update
/// does it: the new version stays in the segment.
///
/// # Safety
/// In a transaction; `meta` datums of the meta columns' types; the rest are table_tuple_update's arguments.
#[allow(clippy::too_many_arguments)]
pub unsafe fn update_meta(
    config: &Config,
    otid: &pg_sys::ItemPointerData,
    meta: &[Option<pg_sys::Datum>],
    cid: pg_sys::CommandId,
    snapshot: pg_sys::Snapshot,
    crosscheck: pg_sys::Snapshot,
    wait: bool,
    tmfd: &mut pg_sys::TM_FailureData,
    lockmode: &mut pg_sys::LockTupleMode::Type,
) -> Change {
    let Some((tail, segment, mut heap)) = locate(config, otid) else { return Change::Drained };
    // SAFETY: as in `delete`, the segment is locked RowExclusive before its mark is read. The old version is read with
    // SnapshotAny into a slot of the segment (heap's update re-checks it), copied with the new meta values into a virtual
    // slot that heap's update stores as the new version; both slots are dropped before the segment is closed.
    unsafe {
        let seg = pg_sys::table_open(tail.segments[segment], pg_sys::RowExclusiveLock as i32);
        if drained_now(config, tail, segment) {
            pg_sys::table_close(seg, pg_sys::NoLock as i32);
            return Change::Drained;
        }
        let old = heap_slot(seg);
        let found = (heap_am().tuple_fetch_row_version.expect("heap fetches"))(seg, &mut heap, &raw mut pg_sys::SnapshotAnyData, old);
        if !found {
            pg_sys::ExecDropSingleTupleTableSlot(old);
            pg_sys::table_close(seg, pg_sys::NoLock as i32);
            return Change::Heap(pg_sys::TM_Result::TM_Deleted, *otid);
        }
        pg_sys::slot_getallattrs(old);
        let natts = (*(*seg).rd_att).natts as usize;
        let new = pg_sys::MakeSingleTupleTableSlot((*seg).rd_att, &pg_sys::TTSOpsVirtual);
        pg_sys::ExecClearTuple(new);
        for i in 0..natts {
            *(*new).tts_values.add(i) = *(*old).tts_values.add(i);
            *(*new).tts_isnull.add(i) = *(*old).tts_isnull.add(i);
        }
        for (i, m) in meta.iter().enumerate() {
            *(*new).tts_values.add(1 + i) = m.unwrap_or(pg_sys::Datum::from(0));
            *(*new).tts_isnull.add(1 + i) = m.is_none();
        }
        pg_sys::ExecStoreVirtualTuple(new);
        let mut update_indexes: UpdateIndexes = Default::default();
        let r = (heap_am().tuple_update.expect("heap updates"))(seg, &mut heap, new, cid, snapshot, crosscheck, wait, tmfd, lockmode, &mut update_indexes);
        tmfd_to_tail(segment, r, tmfd);
        let mut new_tid = *otid;
        if r == pg_sys::TM_Result::TM_Ok {
            super::tid::set_tail(&mut new_tid, segment, &(*new).tts_tid);
        }
        pg_sys::ExecDropSingleTupleTableSlot(new);
        pg_sys::ExecDropSingleTupleTableSlot(old);
        pg_sys::table_close(seg, pg_sys::NoLock as i32);
        Change::Heap(r, new_tid)
    }
}

/// EvalPlanQual's lock of the tail row at `tid` (following its update chain
/// in the segment when `flags` say so), as heap's tuple_lock does it; on
/// TM_Ok the row as a one-row bucket and its latest TID.
///
/// # Safety
/// In a transaction; the arguments are table_tuple_lock's.
#[allow(clippy::too_many_arguments)]
pub unsafe fn lock(
    config: &Config,
    shape: &TableShape,
    tid: &pg_sys::ItemPointerData,
    snapshot: pg_sys::Snapshot,
    cid: pg_sys::CommandId,
    mode: pg_sys::LockTupleMode::Type,
    wait_policy: pg_sys::LockWaitPolicy::Type,
    flags: u8,
    tmfd: &mut pg_sys::TM_FailureData,
) -> (Change, Option<LoadedBucket>) {
    let Some((tail, segment, mut heap)) = locate(config, tid) else { return (Change::Drained, None) };
    // SAFETY: as in `delete`; heap locks the tuple (following its chain if asked) into a slot of the segment, read out
    // before the slot is dropped and the segment closed.
    unsafe {
        let seg = pg_sys::table_open(tail.segments[segment], pg_sys::RowExclusiveLock as i32);
        if drained_now(config, tail, segment) {
            pg_sys::table_close(seg, pg_sys::NoLock as i32);
            return (Change::Drained, None);
        }
        let slot = heap_slot(seg);
        let r = (heap_am().tuple_lock.expect("heap locks"))(seg, &mut heap, snapshot, slot, cid, mode, wait_policy, flags, tmfd);
        tmfd_to_tail(segment, r, tmfd);
        let mut latest = *tid;
        let row = (r == pg_sys::TM_Result::TM_Ok).then(|| {
            super::tid::set_tail(&mut latest, segment, &(*slot).tts_tid);
            row_of_slot(config, shape, segment, seg, slot)
        });
        pg_sys::ExecDropSingleTupleTableSlot(slot);
        pg_sys::table_close(seg, pg_sys::NoLock as i32);
        (Change::Heap(r, latest), row)
    }
}
