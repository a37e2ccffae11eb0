//! Small readers of Postgres node structures, shared by the hooks and the planner.

use pgrx::pg_sys;

/// The pointers of a List of nodes (empty for NIL).
///
/// # Safety
/// `list` must be NIL or a valid pointer List.
pub unsafe fn list_ptrs(list: *mut pg_sys::List) -> Vec<*mut std::ffi::c_void> {
    if list.is_null() {
        return Vec::new();
    }
    unsafe { (0..(*list).length as usize).map(|i| (*(*list).elements.add(i)).ptr_value).collect() }
}

/// Attribute numbers of range-table entry `rtindex` that `nodes` refer to
/// (0 = the whole row, negative = system columns).
///
/// # Safety
/// `nodes` must be valid expression trees (or NULL).
pub unsafe fn referenced_attnums(nodes: &[*mut pg_sys::Node], rtindex: u32) -> Vec<i32> {
    unsafe {
        let mut bms: *mut pg_sys::Bitmapset = std::ptr::null_mut();
        for &node in nodes {
            pg_sys::pull_varattnos(node, rtindex, &mut bms);
        }
        let mut out = Vec::new();
        let mut x = -1;
        loop {
            x = pg_sys::bms_next_member(bms, x);
            if x < 0 {
                break;
            }
            out.push(x + pg_sys::FirstLowInvalidHeapAttributeNumber);
        }
        out
    }
}

/// The OIDs of an OID list (`T_OidList`).
///
/// # Safety
/// `list` must be NIL or a valid OID list.
pub unsafe fn list_oids(list: *mut pg_sys::List) -> Vec<pg_sys::Oid> {
    if list.is_null() {
        return Vec::new();
    }
    unsafe {
        let n = (*list).length as usize;
        (0..n).map(|i| (*(*list).elements.add(i)).oid_value).collect()
    }
}

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
    unsafe {
        let holder = pg_sys::MemoryContextAlloc(cxt, std::mem::size_of::<Owned<T>>()) as *mut Owned<T>;
        std::ptr::write(
            holder,
            Owned {
                callback: pg_sys::MemoryContextCallback { func: Some(drop_owned::<T>), arg: holder.cast(), next: std::ptr::null_mut() },
                value: Some(Box::new(value)),
            },
        );
        pg_sys::MemoryContextRegisterResetCallback(cxt, &mut (*holder).callback);
        holder
    }
}

/// # Safety
/// `holder` must come from `own_in_context`, its context still alive and its value not taken.
pub unsafe fn owned_mut<'a, T>(holder: *mut Owned<T>) -> &'a mut T {
    unsafe { (*holder).value.as_deref_mut().expect("owned value used after it was taken") }
}

/// # Safety
/// `holder` must come from `own_in_context` and its context still be alive.
pub unsafe fn take_owned<T>(holder: *mut Owned<T>) -> Option<Box<T>> {
    unsafe { (*holder).value.take() }
}

/// Runs `f` as `user` (as SECURITY DEFINER switches users), and with
/// `restricted` in a security-restricted context (as VACUUM runs a table
/// owner's code: no session state may change). An ERROR restores the user
/// with the (sub)transaction abort.
pub fn as_user<R>(user: pg_sys::Oid, restricted: bool, f: impl FnOnce() -> R) -> R {
    let (mut saved_user, mut saved_context) = (pg_sys::InvalidOid, 0i32);
    let mut context = pg_sys::SECURITY_LOCAL_USERID_CHANGE as i32;
    if restricted {
        context |= pg_sys::SECURITY_RESTRICTED_OPERATION as i32;
    }
    // SAFETY: saving and switching the backend's user id and security context.
    unsafe {
        pg_sys::GetUserIdAndSecContext(&mut saved_user, &mut saved_context);
        pg_sys::SetUserIdAndSecContext(user, saved_context | context);
    }
    let result = f();
    // SAFETY: as above.
    unsafe { pg_sys::SetUserIdAndSecContext(saved_user, saved_context) };
    result
}

/// A copy of `value` in the current memory context (utils/datum.h is not bound).
///
/// # Safety
/// `value` must be a valid datum of a type with this `byval` and `len`.
/// The elements of `array` (None for NULL elements), in the current memory
/// context (by-reference elements point into the array).
///
/// # Safety
/// `array` must be a valid, detoasted array.
pub unsafe fn array_elements(array: *mut pg_sys::ArrayType) -> Vec<Option<pg_sys::Datum>> {
    unsafe {
        let elem = (*array).elemtype;
        let (mut len, mut byval, mut align) = (0i16, false, 0 as std::ffi::c_char);
        pg_sys::get_typlenbyvalalign(elem, &mut len, &mut byval, &mut align);
        let mut elems: *mut pg_sys::Datum = std::ptr::null_mut();
        let mut nulls: *mut bool = std::ptr::null_mut();
        let mut n = 0i32;
        pg_sys::deconstruct_array(array, elem, len as i32, byval, align, &mut elems, &mut nulls, &mut n);
        (0..n as usize).map(|i| (!*nulls.add(i)).then(|| *elems.add(i))).collect()
    }
}

pub unsafe fn copy_datum(value: pg_sys::Datum, byval: bool, len: i16) -> pg_sys::Datum {
    unsafe {
        match len {
            _ if byval => value,
            -1 => pg_sys::Datum::from(pg_sys::pg_detoast_datum_copy(value.cast_mut_ptr())),
            -2 => pg_sys::Datum::from(pg_sys::pstrdup(value.cast_mut_ptr())),
            n => {
                let p = pg_sys::palloc(n as usize);
                std::ptr::copy_nonoverlapping(value.cast_mut_ptr::<u8>(), p as *mut u8, n as usize);
                pg_sys::Datum::from(p)
            }
        }
    }
}
