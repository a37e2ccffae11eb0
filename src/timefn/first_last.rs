//! `tsbucket.first(value, time)` and `tsbucket.last(value, time)`: the value
//! at the least / greatest time (MongoDB's `$first` / `$last` over a sort by
//! time, TimescaleDB's `first` / `last`). On a tie the earliest row read wins:
//! the transition replaces the state only on a strictly better time. A NULL
//! time is skipped; a NULL value is a value (the result is NULL if it won).
//!
//! The state is `internal` (any value type), with combine, serial and
//! deserial functions, so Postgres runs them in parallel and TsBucketScan
//! computes their partial states per bucket (`am::aggscan`, which builds the
//! serialized form of `tsbucket_kernels::first_last`).
//!
//! A state exists once a row with a time was seen (until then it is NULL).
//! Serialized: flags (bit 0: the value is not NULL), the time (i64), the
//! value's typlen (i16) and typbyval (u8), then the value's bytes as
//! `datum::datum_bytes` gives them.

use crate::pg::datum::{self, Layout};
use crate::pg::error::{SqlState, ts_error};
use crate::pg::fmgr::{aggregate_context, arg, finfo, return_null};
use pgrx::pg_sys;
use pgrx::prelude::*;
use tsbucket_kernels::first_last;

finfo!(
    pg_finfo_tsbucket_first_transition,
    pg_finfo_tsbucket_last_transition,
    pg_finfo_tsbucket_first_combine,
    pg_finfo_tsbucket_last_combine,
    pg_finfo_tsbucket_first_last_serialize,
    pg_finfo_tsbucket_first_last_deserialize,
    pg_finfo_tsbucket_first_last_final,
);

/// The state, in the aggregate's memory context (no Rust-owned memory: a
/// context reset frees it whole).
#[repr(C)]
struct Chosen {
    time: i64,
    /// NULL when absent; by-reference values are palloc'd in the aggregate context.
    value: Option<pg_sys::Datum>,
    typlen: i16,
    typbyval: bool,
}

fn value_attr(typlen: i16, typbyval: bool) -> Layout {
    Layout::bytes(typlen, typbyval)
}

/// The serialized state of a chosen row (`kernels::first_last`), as the
/// serial function writes it (the in-scan aggregation emits the same).
///
/// # Safety
/// `value` must be a datum of a type `typlen` long, by value or not as `typbyval` says.
unsafe fn serialized(time: i64, value: Option<pg_sys::Datum>, typlen: i16, typbyval: bool) -> Vec<u8> {
    // SAFETY: `value` is of a type `typlen` long, as the caller promises.
    let bytes = value.as_ref().map(|v| unsafe { datum::datum_bytes(v, value_attr(typlen, typbyval)) });
    first_last::encode(&first_last::Chosen { time, value: bytes, typlen, typbyval })
}

/// A new state in `cxt`: `value` (already in `cxt`, or by value) at `time`.
///
/// # Safety
/// `cxt` must be a live memory context.
unsafe fn new_state(cxt: pg_sys::MemoryContext, time: i64, value: Option<pg_sys::Datum>, typlen: i16, typbyval: bool) -> *mut Chosen {
    // SAFETY: the allocation is of the struct's size and written before use.
    unsafe {
        let p = pg_sys::MemoryContextAlloc(cxt, std::mem::size_of::<Chosen>()) as *mut Chosen;
        p.write(Chosen { time, value, typlen, typbyval });
        p
    }
}

/// `value` copied into `cxt` (detoasted), when by reference.
///
/// # Safety
/// `value` must be a datum of a type `typlen` long, by value or not as `typbyval` says.
unsafe fn copied(cxt: pg_sys::MemoryContext, value: pg_sys::Datum, typlen: i16, typbyval: bool) -> pg_sys::Datum {
    if typbyval {
        return value;
    }
    let attr = value_attr(typlen, typbyval);
    // SAFETY: as the caller promises. Detoasted in the caller's (per-call)
    // context, copied into `cxt`: the row's memory is gone by the next call.
    unsafe {
        let bytes = datum::datum_bytes(&value, attr);
        let old = pg_sys::MemoryContextSwitchTo(cxt);
        let copy = datum::bytes_datum(bytes, attr);
        pg_sys::MemoryContextSwitchTo(old);
        copy
    }
}

/// Makes `state` hold `value` at `time`, the value copied into `cxt`.
///
/// # Safety
/// `value` must be a datum of the state's type; `cxt` the aggregate's context.
unsafe fn choose(state: &mut Chosen, cxt: pg_sys::MemoryContext, time: i64, value: Option<pg_sys::Datum>) {
    // SAFETY: the old value was palloc'd by this function (by reference only);
    // `value` is of the state's type, as the caller promises.
    unsafe {
        if let Some(old) = state.value.take()
            && !state.typbyval
        {
            pg_sys::pfree(old.cast_mut_ptr());
        }
        state.value = value.map(|v| copied(cxt, v, state.typlen, state.typbyval));
        state.time = time;
    }
}

fn better(last: bool, candidate: i64, current: i64) -> bool {
    if last { candidate > current } else { candidate < current }
}

/// # Safety
/// `fcinfo` must be a call of a transition function declared (internal, anyelement, timestamp[tz]).
unsafe fn transition(fcinfo: pg_sys::FunctionCallInfo, last: bool) -> pg_sys::Datum {
    // SAFETY: argument 0 is NULL or a state this module made in the
    // aggregate context; argument 2 a timestamp (an int64 datum).
    unsafe {
        let cxt = aggregate_context(fcinfo, "tsbucket.first / tsbucket.last");
        let state = arg(fcinfo, 0).map(|d| d.cast_mut_ptr::<Chosen>());
        let Some(t) = arg(fcinfo, 2).map(|t| t.value() as i64) else {
            // A NULL time is skipped.
            return state.map_or_else(|| return_null(fcinfo), pg_sys::Datum::from);
        };
        let value = arg(fcinfo, 1);
        let state = match state {
            Some(s) => {
                if better(last, t, (*s).time) {
                    choose(&mut *s, cxt, t, value);
                }
                s
            }
            None => {
                let (mut typlen, mut typbyval) = (0i16, false);
                pg_sys::get_typlenbyval(pg_sys::get_fn_expr_argtype((*fcinfo).flinfo, 1), &mut typlen, &mut typbyval);
                new_state(cxt, t, value.map(|v| copied(cxt, v, typlen, typbyval)), typlen, typbyval)
            }
        };
        pg_sys::Datum::from(state)
    }
}

/// # Safety
/// `fcinfo` must be a call of a combine function declared (internal, internal).
unsafe fn combine(fcinfo: pg_sys::FunctionCallInfo, last: bool) -> pg_sys::Datum {
    // SAFETY: both arguments are NULL or states of this module.
    unsafe {
        let cxt = aggregate_context(fcinfo, "tsbucket.first / tsbucket.last");
        let s1 = arg(fcinfo, 0).map(|d| d.cast_mut_ptr::<Chosen>());
        let Some(s2) = arg(fcinfo, 1).map(|d| &*d.cast_mut_ptr::<Chosen>()) else {
            return s1.map_or_else(|| return_null(fcinfo), pg_sys::Datum::from);
        };
        // The first state is the earlier rows': it keeps ties. The second may
        // live in a per-call context (deserialized): what is kept is copied.
        let s1 = match s1 {
            Some(s1) => {
                if better(last, s2.time, (*s1).time) {
                    choose(&mut *s1, cxt, s2.time, s2.value);
                }
                s1
            }
            None => new_state(cxt, s2.time, s2.value.map(|v| copied(cxt, v, s2.typlen, s2.typbyval)), s2.typlen, s2.typbyval),
        };
        pg_sys::Datum::from(s1)
    }
}

#[unsafe(no_mangle)]
#[pg_guard]
pub unsafe extern "C-unwind" fn tsbucket_first_transition(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: Postgres calls it with the arguments its SQL declaration names.
    unsafe { transition(fcinfo, false) }
}

#[unsafe(no_mangle)]
#[pg_guard]
pub unsafe extern "C-unwind" fn tsbucket_last_transition(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: Postgres calls it with the arguments its SQL declaration names.
    unsafe { transition(fcinfo, true) }
}

#[unsafe(no_mangle)]
#[pg_guard]
pub unsafe extern "C-unwind" fn tsbucket_first_combine(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: Postgres calls it with the arguments its SQL declaration names.
    unsafe { combine(fcinfo, false) }
}

#[unsafe(no_mangle)]
#[pg_guard]
pub unsafe extern "C-unwind" fn tsbucket_last_combine(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: Postgres calls it with the arguments its SQL declaration names.
    unsafe { combine(fcinfo, true) }
}

#[unsafe(no_mangle)]
#[pg_guard]
pub unsafe extern "C-unwind" fn tsbucket_first_last_serialize(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: argument 0 is a state of this module (the function is strict).
    unsafe {
        let s = &*arg(fcinfo, 0).expect("strict").cast_mut_ptr::<Chosen>();
        datum::bytea(&serialized(s.time, s.value, s.typlen, s.typbyval))
    }
}

fn corrupt() -> ! {
    ts_error(
        SqlState::ERRCODE_DATA_CORRUPTED,
        "invalid serialized state of tsbucket.first or tsbucket.last",
        "The partial aggregate state was damaged between workers; report this as a bug.",
    )
}

#[unsafe(no_mangle)]
#[pg_guard]
pub unsafe extern "C-unwind" fn tsbucket_first_last_deserialize(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: argument 0 is a bytea (strict); every length read from it is checked.
    unsafe {
        aggregate_context(fcinfo, "tsbucket.first / tsbucket.last");
        let v = pg_sys::pg_detoast_datum_packed(arg(fcinfo, 0).expect("strict").cast_mut_ptr());
        let attr = value_attr(-1, false);
        let d = pg_sys::Datum::from(v);
        let bytes = datum::datum_bytes(&d, attr);
        let Some(c) = first_last::decode(bytes) else { corrupt() };
        // In the current (per-call) context: combine copies what it keeps.
        let value = c.value.map(|payload| datum::bytes_datum(payload, value_attr(c.typlen, c.typbyval)));
        pg_sys::Datum::from(new_state(pg_sys::CurrentMemoryContext, c.time, value, c.typlen, c.typbyval))
    }
}

#[unsafe(no_mangle)]
#[pg_guard]
pub unsafe extern "C-unwind" fn tsbucket_first_last_final(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: Postgres calls this final function with a state of this module
    // (or NULL) in argument 0, and the value's type as argument 1 (finalfunc_extra).
    unsafe {
        let state = arg(fcinfo, 0).map(|d| &*d.cast_mut_ptr::<Chosen>());
        if let Some(s) = state {
            // A state describing another type than the aggregate's would make
            // a pointer of an integer: only a damaged serialized state can.
            let (mut typlen, mut typbyval) = (0i16, false);
            pg_sys::get_typlenbyval(pg_sys::get_fn_expr_argtype((*fcinfo).flinfo, 1), &mut typlen, &mut typbyval);
            if (s.typlen, s.typbyval) != (typlen, typbyval) {
                corrupt();
            }
        }
        match state.and_then(|s| s.value.map(|v| (v, s))) {
            Some((v, s)) => copied(pg_sys::CurrentMemoryContext, v, s.typlen, s.typbyval),
            None => return_null(fcinfo),
        }
    }
}
