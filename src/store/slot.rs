//! The tuple slot of a time-series table: a virtual slot (rows are built
//! from decoded columns, never stored as tuples) that also remembers which
//! bucket version its row came from, so that the system columns `xmin`,
//! `cmin`, `xmax` and `cmax` read as heap reports them for a row: from the
//! store tuple of that version. `ctid` and `tableoid` Postgres reads from the
//! slot itself.
//!
//! A bucket version is rewritten whole (compaction, a DELETE or a meta UPDATE
//! of any of its rows), so `xmin` changes for every row of a rewritten bucket:
//! a row-version token may report a change that did not touch the row, but
//! never misses one.

use crate::pg::error::{FEATURE_NOT_SUPPORTED, ts_error};
use pgrx::pg_sys;
use std::sync::OnceLock;

/// The store tuple version a row came from (heap's raw header fields).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Version {
    pub xmin: pg_sys::TransactionId,
    pub xmax: pg_sys::TransactionId,
    /// The raw command id field: cmin, cmax or a combo id, as heap reports it for both.
    pub cid: pg_sys::CommandId,
}

impl Version {
    /// A row this transaction writes now, as command `cid` (INSERT and UPDATE's new rows).
    pub fn written_now(cid: pg_sys::CommandId) -> Version {
        // SAFETY: the transaction's id, assigned if it had none (its buckets need one anyway).
        Version { xmin: unsafe { pg_sys::GetCurrentTransactionId() }, xmax: pg_sys::InvalidTransactionId, cid }
    }
}

/// Postgres sees `base`; `version` is ours.
#[repr(C)]
struct BucketSlot {
    base: pg_sys::VirtualTupleTableSlot,
    has_version: bool,
    version: Version,
}

struct Ops(pg_sys::TupleTableSlotOps);
// SAFETY: backends are single-threaded and the table is immutable once built.
unsafe impl Sync for Ops {}
// SAFETY: backends are single-threaded; the ops table is only read once built.
unsafe impl Send for Ops {}

static OPS: OnceLock<Ops> = OnceLock::new();

/// The slot callbacks of time-series tables (the table AM's slot_callbacks,
/// TsBucketScan's scan slot).
pub fn ops() -> *const pg_sys::TupleTableSlotOps {
    &OPS.get_or_init(|| {
        // SAFETY: TTSOpsVirtual is a constant table of the server.
        let mut ops = unsafe { pg_sys::TTSOpsVirtual };
        ops.base_slot_size = std::mem::size_of::<BucketSlot>();
        ops.clear = Some(clear);
        ops.getsysattr = Some(getsysattr);
        ops.copyslot = Some(copyslot);
        #[cfg(not(feature = "pg15"))]
        {
            ops.is_current_xact_tuple = Some(is_current_xact_tuple);
        }
        Ops(ops)
    })
    .0
}

/// The slot as ours, if it is one of ours.
///
/// # Safety
/// `slot` must be a valid slot.
unsafe fn ours<'a>(slot: *mut pg_sys::TupleTableSlot) -> Option<&'a mut BucketSlot> {
    // SAFETY: `slot` is a valid slot (ours's contract), so its tts_ops pointer is readable.
    let is_ours = std::ptr::eq(unsafe { (*slot).tts_ops }, ops());
    // SAFETY: a slot made with `ops()` was allocated base_slot_size bytes, a BucketSlot whose first field is
    // the virtual slot `slot` points to.
    is_ours.then(|| unsafe { &mut *(slot as *mut BucketSlot) })
}

/// Records which bucket version the slot's row came from (a slot of another
/// kind, such as a sample's, has nowhere to keep it and is left alone).
///
/// # Safety
/// `slot` must be a valid slot holding the row.
#[inline]
pub unsafe fn set_version(slot: *mut pg_sys::TupleTableSlot, version: Version) {
    // SAFETY: `slot` is a valid slot holding the row (set_version's contract), which is all ours() needs.
    if let Some(s) = unsafe { ours(slot) } {
        s.has_version = true;
        s.version = version;
    }
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn clear(slot: *mut pg_sys::TupleTableSlot) {
    // SAFETY: Postgres calls the clear callback with a valid slot made with `ops()`.
    if let Some(s) = unsafe { ours(slot) } {
        s.has_version = false;
    }
    // SAFETY: TTSOpsVirtual is the server's constant table; its clear handles the VirtualTupleTableSlot at
    // the start of this BucketSlot.
    unsafe { (pg_sys::TTSOpsVirtual.clear.expect("virtual slots clear"))(slot) }
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn copyslot(dst: *mut pg_sys::TupleTableSlot, src: *mut pg_sys::TupleTableSlot) {
    // SAFETY: Postgres calls copyslot with a destination made with `ops()` and a valid source; the virtual
    // copy fills `dst`'s VirtualTupleTableSlot part from `src`.
    unsafe { (pg_sys::TTSOpsVirtual.copyslot.expect("virtual slots copy"))(dst, src) };
    // SAFETY: `src` is a valid slot of any kind; ours() reads its version only when it is a BucketSlot.
    let version = unsafe { ours(src) }.and_then(|s| s.has_version.then_some(s.version));
    // SAFETY: `dst` is the valid destination slot Postgres passed, made with `ops()`.
    if let Some(d) = unsafe { ours(dst) } {
        d.has_version = version.is_some();
        d.version = version.unwrap_or_default();
    }
}

fn no_version() -> ! {
    ts_error(
        FEATURE_NOT_SUPPORTED,
        "cannot retrieve a system column in this context",
        "Rows of a time-series table report xmin, cmin, xmax and cmax when read from the table.",
    )
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn getsysattr(slot: *mut pg_sys::TupleTableSlot, attnum: i32, isnull: *mut bool) -> pg_sys::Datum {
    // SAFETY: Postgres calls getsysattr with a valid slot made with `ops()`, so ours() may view it as a BucketSlot.
    let Some(v) = unsafe { ours(slot) }.and_then(|s| s.has_version.then_some(s.version)) else { no_version() };
    // SAFETY: `isnull` is the caller's out-parameter for this call, a valid bool.
    unsafe { *isnull = false };
    match attnum {
        pg_sys::MinTransactionIdAttributeNumber => pg_sys::Datum::from(v.xmin),
        pg_sys::MaxTransactionIdAttributeNumber => pg_sys::Datum::from(v.xmax),
        pg_sys::MinCommandIdAttributeNumber | pg_sys::MaxCommandIdAttributeNumber => pg_sys::Datum::from(v.cid),
        _ => no_version(),
    }
}

#[cfg(not(feature = "pg15"))]
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn is_current_xact_tuple(slot: *mut pg_sys::TupleTableSlot) -> bool {
    // SAFETY: Postgres calls is_current_xact_tuple with a valid slot made with `ops()`, which ours() views as a BucketSlot.
    let Some(v) = unsafe { ours(slot) }.and_then(|s| s.has_version.then_some(s.version)) else { no_version() };
    // SAFETY: looks `v.xmin` up among this backend's transaction and subtransaction ids; no pointer involved.
    unsafe { pg_sys::TransactionIdIsCurrentTransactionId(v.xmin) }
}
