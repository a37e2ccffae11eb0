//! A parallel TsBucketScan: its dynamic shared memory (counters, the store's
//! parallel heap scan) made, re-made and attached, and the leader's collection
//! of every participant's counters.

use crate::scan::state::{SharedScan, exec_state, finish_scan, with_store};
use pgrx::pg_sys;
use pgrx::prelude::*;

#[pg_guard]
pub(super) unsafe extern "C-unwind" fn estimate_dsm(node: *mut pg_sys::CustomScanState, _pcxt: *mut pg_sys::ParallelContext) -> pg_sys::Size {
    // SAFETY: ExecParallelEstimate passes this begun `node`; `ss.ps.state` is the leader's EState, es_snapshot its snapshot.
    let snapshot = unsafe { (*(*node).ss.ps.state).es_snapshot };
    let estimate = |store: pg_sys::Relation| {
        // SAFETY: `store` is the store with_store holds open; `snapshot` is the query's registered snapshot.
        unsafe { pg_sys::table_parallelscan_estimate(store, snapshot) }
    };
    // SAFETY: `node`'s scan relation is open (the node is begun), so with_store can find and open its store.
    SharedScan::HEADER + unsafe { with_store(node, estimate) }
}

#[pg_guard]
pub(super) unsafe extern "C-unwind" fn initialize_dsm(node: *mut pg_sys::CustomScanState, _pcxt: *mut pg_sys::ParallelContext, coordinate: *mut std::ffi::c_void) {
    let shared = coordinate as *mut SharedScan;
    // SAFETY: `coordinate` is the DSM chunk of estimate_dsm's size that ExecParallelInitializeDSM allocated for this node;
    // its first HEADER bytes hold the counters.
    unsafe { std::ptr::write_bytes(shared as *mut u8, 0, SharedScan::HEADER) };
    // SAFETY: `node.ss.ps.state` is the leader's EState while the DSM is initialized; es_snapshot is the query's snapshot.
    let snapshot = unsafe { (*(*node).ss.ps.state).es_snapshot };
    let initialize = |store: pg_sys::Relation| {
        // SAFETY: `store` is open in with_store; store_scan(shared) is the space after the counters that estimate_dsm
        // reserved for the store's ParallelTableScanDesc.
        unsafe { pg_sys::table_parallelscan_initialize(store, SharedScan::store_scan(shared), snapshot) }
    };
    // SAFETY: `node` is begun with its scan relation open, so with_store can open the store for `initialize`.
    unsafe { with_store(node, initialize) };
    // SAFETY: `node`'s ExecState lives in the query context until EndCustomScan; it now reads through `shared`.
    unsafe { exec_state(node).shared = Some(shared) };
}

#[pg_guard]
pub(super) unsafe extern "C-unwind" fn reinitialize_dsm(node: *mut pg_sys::CustomScanState, _pcxt: *mut pg_sys::ParallelContext, coordinate: *mut std::ffi::c_void) {
    let shared = coordinate as *mut SharedScan;
    let reinitialize = |store: pg_sys::Relation| {
        // SAFETY: `store` is open in with_store; store_scan(shared) is the ParallelTableScanDesc initialize_dsm set up in
        // the same DSM chunk, which a rescan of the Gather reuses.
        unsafe { pg_sys::table_parallelscan_reinitialize(store, SharedScan::store_scan(shared)) }
    };
    // SAFETY: ExecParallelReInitializeDSM passes this begun `node`, whose scan relation is open for with_store.
    unsafe { with_store(node, reinitialize) };
    // A rescan reads the tail again: unclaimed.
    // SAFETY: `shared` is the chunk initialize_dsm set up, mapped while the Gather is rescanned.
    unsafe { (*shared).tail_claim.store(0, std::sync::atomic::Ordering::Release) };
    // SAFETY: `node` is still begun, its ExecState in the query context; the reinitialized chunk stays its shared state.
    unsafe { exec_state(node).shared = Some(shared) };
}

#[pg_guard]
pub(super) unsafe extern "C-unwind" fn initialize_worker(node: *mut pg_sys::CustomScanState, _toc: *mut pg_sys::shm_toc, coordinate: *mut std::ffi::c_void) {
    // SAFETY: in a worker, ExecParallelInitializeWorker calls this after `begin`, so `node` has its ExecState; `coordinate`
    // is the leader's chunk, mapped for the worker's whole run.
    unsafe { exec_state(node).shared = Some(coordinate as *mut SharedScan) }
}

/// Before the parallel query's shared memory goes: the leader collects every
/// participant's counters. A worker adds its own when its share runs out; when
/// a LIMIT shuts the plan down early, workers still scanning are not counted.
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn shutdown(node: *mut pg_sys::CustomScanState) {
    // SAFETY: ParallelWorkerNumber is a backend-local global, set once when a parallel worker starts; it is read by value.
    if unsafe { pg_sys::ParallelWorkerNumber } >= 0 {
        // A worker's counters reach the shared ones when its scan ends.
        return;
    }
    // SAFETY: ExecShutdownNode runs before EndCustomScan, so the begun `node` still has its ExecState.
    if let Some(shared) = unsafe { exec_state(node) }.shared {
        // The leader's own scan, if still open, counts into them too.
        // SAFETY: finish_scan ends the leader's running scan of `node`, if any; its ExecState is then borrowed again.
        let st = unsafe {
            finish_scan(node);
            exec_state(node)
        };
        st.shared = None;
        // SAFETY: `shared` points into the DSM segment, still mapped: the custom scan shuts down before the parallel
        // context is destroyed.
        let (scan, agg) = unsafe { (*shared).take() };
        st.add_counters(scan, agg);
    }
}
