//! A parallel TsBucketScan: its dynamic shared memory (counters, the store's
//! parallel heap scan) made, re-made and attached, and the leader's collection
//! of every participant's counters.

use crate::scan::state::{SharedScan, exec_state, finish_scan, with_store};
use pgrx::pg_sys;
use pgrx::prelude::*;

#[pg_guard]
pub(super) unsafe extern "C-unwind" fn estimate_dsm(node: *mut pg_sys::CustomScanState, _pcxt: *mut pg_sys::ParallelContext) -> pg_sys::Size {
    unsafe {
        let snapshot = (*(*node).ss.ps.state).es_snapshot;
        SharedScan::HEADER + with_store(node, |store| pg_sys::table_parallelscan_estimate(store, snapshot))
    }
}

#[pg_guard]
pub(super) unsafe extern "C-unwind" fn initialize_dsm(node: *mut pg_sys::CustomScanState, _pcxt: *mut pg_sys::ParallelContext, coordinate: *mut std::ffi::c_void) {
    unsafe {
        let shared = coordinate as *mut SharedScan;
        std::ptr::write_bytes(shared as *mut u8, 0, SharedScan::HEADER);
        let snapshot = (*(*node).ss.ps.state).es_snapshot;
        with_store(node, |store| pg_sys::table_parallelscan_initialize(store, SharedScan::store_scan(shared), snapshot));
        exec_state(node).shared = Some(shared);
    }
}

#[pg_guard]
pub(super) unsafe extern "C-unwind" fn reinitialize_dsm(node: *mut pg_sys::CustomScanState, _pcxt: *mut pg_sys::ParallelContext, coordinate: *mut std::ffi::c_void) {
    unsafe {
        let shared = coordinate as *mut SharedScan;
        with_store(node, |store| pg_sys::table_parallelscan_reinitialize(store, SharedScan::store_scan(shared)));
        exec_state(node).shared = Some(shared);
    }
}

#[pg_guard]
pub(super) unsafe extern "C-unwind" fn initialize_worker(node: *mut pg_sys::CustomScanState, _toc: *mut pg_sys::shm_toc, coordinate: *mut std::ffi::c_void) {
    unsafe { exec_state(node).shared = Some(coordinate as *mut SharedScan) }
}

/// Before the parallel query's shared memory goes: the leader collects every
/// participant's counters. A worker adds its own when its share runs out; when
/// a LIMIT shuts the plan down early, workers still scanning are not counted.
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn shutdown(node: *mut pg_sys::CustomScanState) {
    unsafe {
        if pg_sys::ParallelWorkerNumber >= 0 {
            // A worker's counters reach the shared ones when its scan ends.
            return;
        }
        if let Some(shared) = exec_state(node).shared {
            // The leader's own scan, if still open, counts into them too.
            finish_scan(node);
            let st = exec_state(node);
            st.shared = None;
            let (scan, agg) = (*shared).take();
            st.add_counters(scan, agg);
        }
    }
}
