//! `tsbucket.first(value, time)` and `tsbucket.last(value, time)`: the value
//! at the least / greatest time (MongoDB's `$first` / `$last` over a sort by
//! time, TimescaleDB's `first` / `last`). On a tie the earliest row read wins:
//! the transition replaces the state only on a strictly better time. A NULL
//! time is skipped; a NULL value is a value (the result is NULL if it won).
//!
//! The state is `internal` (any value type), with combine, serial and
//! deserial functions, so Postgres runs them in parallel and TsBucketScan
//! computes their partial states per bucket (`scan::aggregating`, which builds the
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
    // SAFETY: `value` is a datum of the type `typlen` / `typbyval` describe, which this function's contract requires.
    let bytes = value.as_ref().map(|v| unsafe { datum::datum_bytes(v, value_attr(typlen, typbyval)) });
    first_last::encode(&first_last::Chosen { time, value: bytes, typlen, typbyval })
}

/// A new state in `cxt`: `value` (already in `cxt`, or by value) at `time`.
///
/// # Safety
/// `cxt` must be a live memory context.
unsafe fn new_state(cxt: pg_sys::MemoryContext, time: i64, value: Option<pg_sys::Datum>, typlen: i16, typbyval: bool) -> *mut Chosen {
    // SAFETY: `cxt` is a live memory context (this function's contract); MemoryContextAlloc returns
    // size_of::<Chosen>() MAXALIGNed bytes there, written with the new state before `p` is returned.
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
    // Detoasted in the caller's (per-call) context, copied into `cxt`: the row's
    // memory is gone by the next call.
    // SAFETY: `value` is a by-reference datum of the type `attr` describes (this function's contract), so datum_bytes
    // may read it and bytes_datum rebuild it from those bytes in `cxt`; the previous context is restored after.
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
    if let Some(old) = state.value.take()
        && !state.typbyval
    {
        // SAFETY: a by-reference value of the state was palloc'd by `copied` for this state alone, so nothing else
        // points to it once it is taken out.
        unsafe { pg_sys::pfree(old.cast_mut_ptr()) };
    }
    // SAFETY: `value` is of the state's type and `cxt` the aggregate's context (this function's contract), which is
    // what copied needs.
    state.value = value.map(|v| unsafe { copied(cxt, v, state.typlen, state.typbyval) });
    state.time = time;
}

fn better(last: bool, candidate: i64, current: i64) -> bool {
    if last { candidate > current } else { candidate < current }
}

/// # Safety
/// `fcinfo` must be a call of a transition function declared (internal, anyelement, timestamp[tz]).
unsafe fn transition(fcinfo: pg_sys::FunctionCallInfo, last: bool) -> pg_sys::Datum {
    // SAFETY: this function's contract: `fcinfo` is a transition call with arguments (internal, anyelement, timestamp),
    // so arguments 0 and 2 exist; aggregate_context raises an ERROR outside an aggregate.
    let (cxt, state, time) = unsafe {
        let cxt = aggregate_context(fcinfo, "tsbucket.first / tsbucket.last");
        (cxt, arg(fcinfo, 0).map(|d| d.cast_mut_ptr::<Chosen>()), arg(fcinfo, 2))
    };
    let Some(t) = time.map(|t| t.value() as i64) else {
        // A NULL time is skipped.
        // SAFETY: `fcinfo` is this transition call's; without a state yet, return_null makes its result NULL.
        return state.map_or_else(|| unsafe { return_null(fcinfo) }, pg_sys::Datum::from);
    };
    // SAFETY: argument 1 (the anyelement value) of the transition call this function's contract describes.
    let value = unsafe { arg(fcinfo, 1) };
    let state = match state {
        Some(s) => {
            // SAFETY: a non-NULL argument 0 is a Chosen this module made in the aggregate context, alive for the group.
            let current = unsafe { (*s).time };
            if better(last, t, current) {
                // SAFETY: `s` is that state, referenced by nothing else during this call; `value` is of the aggregate's
                // type (it is argument 1) and `cxt` the aggregate's context, as choose requires.
                unsafe { choose(&mut *s, cxt, t, value) };
            }
            s
        }
        None => {
            let (mut typlen, mut typbyval) = (0i16, false);
            // SAFETY: (*fcinfo).flinfo is the call's FmgrInfo, whose expression gives argument 1's type; get_typlenbyval
            // writes the two locals; `value` is of that type and `cxt` alive, as copied and new_state require.
            unsafe {
                pg_sys::get_typlenbyval(pg_sys::get_fn_expr_argtype((*fcinfo).flinfo, 1), &mut typlen, &mut typbyval);
                new_state(cxt, t, value.map(|v| copied(cxt, v, typlen, typbyval)), typlen, typbyval)
            }
        }
    };
    pg_sys::Datum::from(state)
}

/// # Safety
/// `fcinfo` must be a call of a combine function declared (internal, internal).
unsafe fn combine(fcinfo: pg_sys::FunctionCallInfo, last: bool) -> pg_sys::Datum {
    // SAFETY: this function's contract: both arguments of the combine call are NULL or Chosen states of this module,
    // the second one alive at least during this call; aggregate_context raises an ERROR outside an aggregate.
    let (cxt, s1, s2) = unsafe {
        let cxt = aggregate_context(fcinfo, "tsbucket.first / tsbucket.last");
        let s1 = arg(fcinfo, 0).map(|d| d.cast_mut_ptr::<Chosen>());
        (cxt, s1, arg(fcinfo, 1).map(|d| &*d.cast_mut_ptr::<Chosen>()))
    };
    let Some(s2) = s2 else {
        // SAFETY: `fcinfo` is this combine call's; with neither state, return_null makes its result NULL.
        return s1.map_or_else(|| unsafe { return_null(fcinfo) }, pg_sys::Datum::from);
    };
    // The first state is the earlier rows': it keeps ties. The second may
    // live in a per-call context (deserialized): what is kept is copied.
    let s1 = match s1 {
        Some(s1) => {
            // SAFETY: a non-NULL argument 0 of the combine call is the group's Chosen in the aggregate context.
            let current = unsafe { (*s1).time };
            if better(last, s2.time, current) {
                // SAFETY: `s1` is the group's own state, distinct from `s2`, which Postgres passes as the other argument;
                // s2.value is of the states' common type and `cxt` the aggregate's context, as choose requires.
                unsafe { choose(&mut *s1, cxt, s2.time, s2.value) };
            }
            s1
        }
        None => {
            // SAFETY: s2.value is a datum of s2.typlen / s2.typbyval's type, as its maker stored it; `cxt` is the
            // aggregate's live context, where copied and new_state allocate.
            unsafe { new_state(cxt, s2.time, s2.value.map(|v| copied(cxt, v, s2.typlen, s2.typbyval)), s2.typlen, s2.typbyval) }
        }
    };
    pg_sys::Datum::from(s1)
}

#[unsafe(no_mangle)]
#[pg_guard]
pub unsafe extern "C-unwind" fn tsbucket_first_transition(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: Postgres calls this as tsbucket.first's transition function, declared (internal, anyelement,
    // timestamp[tz]) in sql/time_functions.sql, which is transition's contract.
    unsafe { transition(fcinfo, false) }
}

#[unsafe(no_mangle)]
#[pg_guard]
pub unsafe extern "C-unwind" fn tsbucket_last_transition(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: the SQL declaration of tsbucket.last's transition (internal, anyelement, timestamp[tz]) gives this call
    // the arguments transition expects.
    unsafe { transition(fcinfo, true) }
}

#[unsafe(no_mangle)]
#[pg_guard]
pub unsafe extern "C-unwind" fn tsbucket_first_combine(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: Postgres calls this as tsbucket.first's combine function, declared (internal, internal), with two
    // states of this module or NULLs, as combine requires.
    unsafe { combine(fcinfo, false) }
}

#[unsafe(no_mangle)]
#[pg_guard]
pub unsafe extern "C-unwind" fn tsbucket_last_combine(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: tsbucket.last's combine function is declared (internal, internal): Postgres passes the two partial
    // states (or NULL) combine expects.
    unsafe { combine(fcinfo, true) }
}

#[unsafe(no_mangle)]
#[pg_guard]
pub unsafe extern "C-unwind" fn tsbucket_first_last_serialize(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: argument 0 of the serial function is a Chosen state of this module, never NULL as the function is
    // strict; it stays alive during this call.
    let s = unsafe { &*arg(fcinfo, 0).expect("strict").cast_mut_ptr::<Chosen>() };
    // SAFETY: s.value, when present, is a datum of the type s.typlen / s.typbyval describe (transition or combine
    // stored it so), as serialized requires.
    let bytes = unsafe { serialized(s.time, s.value, s.typlen, s.typbyval) };
    datum::bytea(&bytes)
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
    // SAFETY: `fcinfo` is the deserial call (aggregate_context raises an ERROR otherwise); its argument 0 is a non-NULL
    // bytea (the function is strict), detoasted in the current per-call context.
    let v = unsafe {
        aggregate_context(fcinfo, "tsbucket.first / tsbucket.last");
        pg_sys::pg_detoast_datum_packed(arg(fcinfo, 0).expect("strict").cast_mut_ptr())
    };
    let attr = value_attr(-1, false);
    let d = pg_sys::Datum::from(v);
    // SAFETY: `d` is the detoasted bytea varlena just made, of the typlen -1 layout `attr` gives; every length read
    // from its bytes is checked by first_last::decode.
    let bytes = unsafe { datum::datum_bytes(&d, attr) };
    let Some(c) = first_last::decode(bytes) else { corrupt() };
    // In the current (per-call) context: combine copies what it keeps.
    // SAFETY: each payload is a value's bytes as datum_bytes gave them to the serial function, for the type c.typlen
    // / c.typbyval describe, which bytes_datum requires.
    let value = c.value.map(|payload| unsafe { datum::bytes_datum(payload, value_attr(c.typlen, c.typbyval)) });
    // SAFETY: CurrentMemoryContext is the deserial call's live context, where the state is allocated for combine.
    pg_sys::Datum::from(unsafe { new_state(pg_sys::CurrentMemoryContext, c.time, value, c.typlen, c.typbyval) })
}

#[unsafe(no_mangle)]
#[pg_guard]
pub unsafe extern "C-unwind" fn tsbucket_first_last_final(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: Postgres calls this final function with a state of this module (or NULL) in argument 0, alive in the
    // aggregate context during this call.
    let state = unsafe { arg(fcinfo, 0).map(|d| &*d.cast_mut_ptr::<Chosen>()) };
    if let Some(s) = state {
        // A state describing another type than the aggregate's would make
        // a pointer of an integer: only a damaged serialized state can.
        let (mut typlen, mut typbyval) = (0i16, false);
        // SAFETY: (*fcinfo).flinfo is this call's FmgrInfo; with finalfunc_extra its expression has the value's type as
        // argument 1, which get_typlenbyval describes into the two locals.
        unsafe { pg_sys::get_typlenbyval(pg_sys::get_fn_expr_argtype((*fcinfo).flinfo, 1), &mut typlen, &mut typbyval) };
        if (s.typlen, s.typbyval) != (typlen, typbyval) {
            corrupt();
        }
    }
    match state.and_then(|s| s.value.map(|v| (v, s))) {
        // SAFETY: `v` is of the type s.typlen / s.typbyval describe, checked against the aggregate's above; the copy goes
        // to CurrentMemoryContext, where the final function's result belongs.
        Some((v, s)) => unsafe { copied(pg_sys::CurrentMemoryContext, v, s.typlen, s.typbyval) },
        // SAFETY: `fcinfo` is the final call's; no row with a time (or a NULL winning value) makes the result NULL.
        None => unsafe { return_null(fcinfo) },
    }
}
