//! Rust values owned by a Postgres memory context: dropped when the context is
//! reset or deleted, so per-query Rust state is freed on ERROR too.

use pgrx::pg_sys;

/// A Rust value whose lifetime is tied to a Postgres memory context: dropped
/// when the context is reset or deleted (as on ERROR, when no `end` callback
/// runs), unless `take_owned` took it first. Per-query Rust state (decoded
/// buckets, scan state) lives in one of these, so a cancelled or failing query
/// frees it with its memory context instead of leaking it.
#[repr(C)]
pub struct Owned<T> {
    callback: pg_sys::MemoryContextCallback,
    value: Option<Box<T>>,
}

unsafe extern "C-unwind" fn drop_owned<T>(arg: *mut std::ffi::c_void) {
    // SAFETY: registered by `own_in_context` with its own holder as argument;
    // dropping plain Rust data calls no Postgres function, so nothing can raise here.
    unsafe { drop((*(arg as *mut Owned<T>)).value.take()) }
}

/// # Safety
/// `cxt` must be a valid memory context that outlives every use of the result.
pub unsafe fn own_in_context<T>(cxt: pg_sys::MemoryContext, value: T) -> *mut Owned<T> {
    // SAFETY: `cxt` is a valid memory context (own_in_context's contract); MemoryContextAlloc returns
    // size_of::<Owned<T>>() MAXALIGNed bytes in it, or raises ERROR.
    let holder = unsafe { pg_sys::MemoryContextAlloc(cxt, std::mem::size_of::<Owned<T>>()) as *mut Owned<T> };
    let owned = Owned {
        callback: pg_sys::MemoryContextCallback { func: Some(drop_owned::<T>), arg: holder.cast(), next: std::ptr::null_mut() },
        value: Some(Box::new(value)),
    };
    // SAFETY: `holder` is the fresh, uninitialized allocation just made in `cxt`: written whole before any read.
    unsafe { std::ptr::write(holder, owned) };
    // SAFETY: the callback struct lies inside `holder`, in `cxt` itself, so it stays valid until `cxt` is
    // reset or deleted, which is when Postgres runs it.
    unsafe { pg_sys::MemoryContextRegisterResetCallback(cxt, &mut (*holder).callback) };
    holder
}

/// # Safety
/// `holder` must come from `own_in_context`, its context still alive and its value not taken.
pub unsafe fn owned_mut<'a, T>(holder: *mut Owned<T>) -> &'a mut T {
    // SAFETY: `holder` came from own_in_context and its context is still alive (owned_mut's contract),
    // so the holder is initialized memory for at least 'a.
    let value = unsafe { &mut (*holder).value };
    value.as_deref_mut().expect("owned value used after it was taken")
}

/// Like `owned_mut`, shared and without panicking: None once taken (for
/// frames that must not panic, as an executor callback without #[pg_guard]).
///
/// # Safety
/// `holder` must come from `own_in_context`, its context still alive.
pub unsafe fn owned_ref<'a, T>(holder: *mut Owned<T>) -> Option<&'a T> {
    // SAFETY: `holder` came from own_in_context and its context is still alive (the contract), so the holder is
    // initialized memory for at least 'a.
    unsafe { (*holder).value.as_deref() }
}

/// # Safety
/// `holder` must come from `own_in_context` and its context still be alive.
pub unsafe fn take_owned<T>(holder: *mut Owned<T>) -> Option<Box<T>> {
    // SAFETY: `holder` came from own_in_context and its context is alive (take_owned's contract); after
    // the take, the reset callback finds None and drops nothing.
    unsafe { (*holder).value.take() }
}
