//! Window aggregates with MongoDB `$setWindowFields` semantics. They are C
//! functions with Postgres's aggregate calling convention, so that the state
//! lives in the aggregate's memory context and moving frames cost O(1) per row
//! (`moving_avg` has an inverse transition function).

use crate::pg::error::ts_error;
use crate::pg::fmgr::{aggregate_context, arg, finfo, return_null};
use super::dates::{INVALID, output_unit_micros};
use pgrx::pg_sys;
use pgrx::prelude::*;

finfo!(
    pg_finfo_tsbucket_mavg_accum,
    pg_finfo_tsbucket_mavg_inverse,
    pg_finfo_tsbucket_mavg_final,
    pg_finfo_tsbucket_ema_accum_n,
    pg_finfo_tsbucket_ema_accum_alpha,
    pg_finfo_tsbucket_ema_final,
    pg_finfo_tsbucket_series_accum,
    pg_finfo_tsbucket_series_accum_unit,
    pg_finfo_tsbucket_derivative_final,
    pg_finfo_tsbucket_integral_final,
    pg_finfo_tsbucket_twa_final,
    pg_finfo_tsbucket_linear_fill,
);

fn float8(d: pg_sys::Datum) -> f64 {
    f64::from_bits(d.value() as u64)
}

fn float8_datum(v: f64) -> pg_sys::Datum {
    pg_sys::Datum::from(v.to_bits() as usize)
}

/// The state in argument 0, created in the aggregate context on first use.
///
/// # Safety
/// `fcinfo` must be a call of an aggregate support function whose argument 0
/// is NULL or a state this function made, of the same `S`.
unsafe fn state<'a, S: Default>(fcinfo: pg_sys::FunctionCallInfo, what: &str) -> &'a mut S {
    // SAFETY: `fcinfo` is an aggregate support call with an argument 0, as this function's contract requires.
    if let Some(d) = unsafe { arg(fcinfo, 0) } {
        // SAFETY: a non-NULL argument 0 is the S this function allocated in the aggregate context on an earlier call
        // for the same group (the contract); that context outlives the group's calls.
        return unsafe { &mut *(d.cast_mut_ptr::<S>()) };
    }
    // SAFETY: `fcinfo` is this call's; aggregate_context raises an ERROR naming `what` unless it is an aggregate call.
    let aggcxt = unsafe { aggregate_context(fcinfo, what) };
    // SAFETY: MemoryContextAllocZero returns size_of::<S>() MAXALIGNed bytes in `aggcxt`, which lives as long as the
    // aggregate's group; they are written with S::default() before the reference is made.
    unsafe {
        let p = pg_sys::MemoryContextAllocZero(aggcxt, std::mem::size_of::<S>()) as *mut S;
        std::ptr::write(p, S::default());
        &mut *p
    }
}

unsafe fn state_ptr<S>(s: &mut S) -> pg_sys::Datum {
    pg_sys::Datum::from(s as *mut S)
}

/// Running sum for a sliding frame: finite values in a Neumaier-compensated
/// sum, non-finite ones counted, so that removing a value undoes adding it
/// exactly for infinities and NaN and to within rounding otherwise.
#[derive(Default)]
struct MovingAvg {
    n: i64,
    sum: f64,
    compensation: f64,
    nan: i64,
    pos_inf: i64,
    neg_inf: i64,
}

impl MovingAvg {
    fn add(&mut self, v: f64, sign: i64) {
        self.n += sign;
        if v.is_nan() {
            self.nan += sign;
        } else if v == f64::INFINITY {
            self.pos_inf += sign;
        } else if v == f64::NEG_INFINITY {
            self.neg_inf += sign;
        } else {
            let v = if sign > 0 { v } else { -v };
            let t = self.sum + v;
            if self.sum.abs() >= v.abs() {
                self.compensation += (self.sum - t) + v;
            } else {
                self.compensation += (v - t) + self.sum;
            }
            self.sum = t;
        }
        if self.n == 0 {
            // An empty frame forgets all rounding error.
            *self = MovingAvg::default();
        }
    }

    fn result(&self) -> Option<f64> {
        if self.n == 0 {
            return None;
        }
        Some(if self.nan > 0 || (self.pos_inf > 0 && self.neg_inf > 0) {
            f64::NAN
        } else if self.pos_inf > 0 {
            f64::INFINITY
        } else if self.neg_inf > 0 {
            f64::NEG_INFINITY
        } else {
            (self.sum + self.compensation) / self.n as f64
        })
    }
}

#[unsafe(no_mangle)]
#[pg_guard]
pub unsafe extern "C-unwind" fn tsbucket_mavg_accum(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: Postgres calls moving_avg's transition function with (internal, float8): argument 0 is NULL or the
    // MovingAvg `state` made, argument 1 the value to add.
    let (s, value): (&mut MovingAvg, _) = unsafe { (state(fcinfo, "moving_avg"), arg(fcinfo, 1)) };
    if let Some(v) = value {
        s.add(float8(v), 1);
    }
    // SAFETY: `s` lives in moving_avg's aggregate context, which outlives this call; its address is the internal
    // datum Postgres hands back to the next transition call.
    unsafe { state_ptr(s) }
}

#[unsafe(no_mangle)]
#[pg_guard]
pub unsafe extern "C-unwind" fn tsbucket_mavg_inverse(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: moving_avg's inverse transition function is declared (internal, float8), like the forward one: argument 0
    // is NULL or the MovingAvg state, argument 1 the value leaving the frame.
    let (s, value): (&mut MovingAvg, _) = unsafe { (state(fcinfo, "moving_avg"), arg(fcinfo, 1)) };
    if let Some(v) = value {
        s.add(float8(v), -1);
    }
    // SAFETY: after removing the value, `s` is still the state in the aggregate context; Postgres keeps its address as
    // the moving frame's state.
    unsafe { state_ptr(s) }
}

#[unsafe(no_mangle)]
#[pg_guard]
pub unsafe extern "C-unwind" fn tsbucket_mavg_final(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: argument 0 of moving_avg's final function is NULL or the MovingAvg its transition functions made in the
    // aggregate context, alive during this call.
    let avg = unsafe { arg(fcinfo, 0).map(|d| &*d.cast_mut_ptr::<MovingAvg>()) };
    match avg.and_then(MovingAvg::result) {
        Some(v) => float8_datum(v),
        // SAFETY: `fcinfo` is this final call's; return_null sets its isnull flag for an empty frame.
        None => unsafe { return_null(fcinfo) },
    }
}

#[derive(Default)]
struct Ema {
    alpha: f64,
    value: Option<f64>,
}

/// # Safety
/// `fcinfo` must be a call of an exp_moving_avg transition function
/// (internal, float8, ...).
unsafe fn ema_step(fcinfo: pg_sys::FunctionCallInfo, alpha: f64) -> pg_sys::Datum {
    // SAFETY: this function's contract: `fcinfo` is an exp_moving_avg transition call, argument 0 NULL or its Ema
    // state, argument 1 the float8 value.
    let (s, value): (&mut Ema, _) = unsafe { (state(fcinfo, "exp_moving_avg"), arg(fcinfo, 1)) };
    s.alpha = alpha;
    if let Some(v) = value {
        let v = float8(v);
        s.value = Some(match s.value {
            None => v,
            // Same value as v * alpha + prev * (1 - alpha); this order
            // rounds as MongoDB does (its documented outputs match to the last digit).
            Some(prev) => prev + alpha * (v - prev),
        });
    }
    // SAFETY: `s` is the Ema in exp_moving_avg's aggregate context, alive after this call; its address becomes the
    // internal state datum.
    unsafe { state_ptr(s) }
}

#[unsafe(no_mangle)]
#[pg_guard]
pub unsafe extern "C-unwind" fn tsbucket_ema_accum_n(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: the n form of exp_moving_avg's transition is declared (internal, float8, int4): argument 2 is n.
    let n = unsafe { arg(fcinfo, 2) }.map(|d| d.value() as i32);
    let Some(n) = n else {
        // SAFETY: ema_step's contract holds: `fcinfo` is this exp_moving_avg (n) transition call; a NULL n gives NaN.
        return unsafe { ema_step(fcinfo, f64::NAN) };
    };
    if n <= 0 {
        ts_error(INVALID, &format!("exp_moving_avg: n must be positive, not {n}"), "n is the number of recent rows that weigh most; alpha = 2 / (n + 1).");
    }
    // SAFETY: as for the NULL n above, `fcinfo` is the exp_moving_avg (n) transition call ema_step expects.
    unsafe { ema_step(fcinfo, 2.0 / (n as f64 + 1.0)) }
}

#[unsafe(no_mangle)]
#[pg_guard]
pub unsafe extern "C-unwind" fn tsbucket_ema_accum_alpha(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: the alpha form of exp_moving_avg's transition is declared (internal, float8, float8): argument 2 is alpha.
    let alpha = unsafe { arg(fcinfo, 2) }.map(float8);
    let Some(alpha) = alpha else {
        // SAFETY: ema_step's contract holds: `fcinfo` is this exp_moving_avg (alpha) transition call; NULL alpha gives NaN.
        return unsafe { ema_step(fcinfo, f64::NAN) };
    };
    if !(alpha > 0.0 && alpha <= 1.0) {
        ts_error(INVALID, &format!("exp_moving_avg: alpha must be in (0, 1], not {alpha}"), "A higher alpha gives recent rows more weight.");
    }
    // SAFETY: `fcinfo` is the exp_moving_avg (alpha) transition call ema_step expects, with a checked alpha in (0, 1].
    unsafe { ema_step(fcinfo, alpha) }
}

#[unsafe(no_mangle)]
#[pg_guard]
pub unsafe extern "C-unwind" fn tsbucket_ema_final(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: argument 0 of exp_moving_avg's final function is NULL or the Ema that ema_step keeps in the aggregate
    // context, alive during this call.
    let ema = unsafe { arg(fcinfo, 0).map(|d| &*d.cast_mut_ptr::<Ema>()) };
    // A NULL n or alpha makes the result NULL, as in MongoDB.
    match ema {
        Some(Ema { alpha, value: Some(v) }) if !alpha.is_nan() => float8_datum(*v),
        // SAFETY: `fcinfo` is exp_moving_avg's final call; return_null marks its result NULL.
        _ => unsafe { return_null(fcinfo) },
    }
}

/// The points of a frame, as needed by derivative, integral and the
/// time-weighted average; rows arrive in the window's ORDER BY order.
#[derive(Default)]
struct Series {
    n: i64,
    first: (i64, f64),
    last: (i64, f64),
    /// Trapezoids: sum of (v_i + v_{i-1}) / 2 * (t_i - t_{i-1}), in value x microseconds.
    trapezoids: f64,
    /// Steps: sum of v_{i-1} * (t_i - t_{i-1}) (each value holds until the next).
    steps: f64,
    unit_micros: f64,
}

/// # Safety
/// `fcinfo` must be a call of a series transition function (internal,
/// float8, timestamp[tz], ...).
unsafe fn series_step(fcinfo: pg_sys::FunctionCallInfo, unit_micros: f64) -> pg_sys::Datum {
    // SAFETY: this function's contract: argument 0 is NULL or the Series state, argument 1 the float8 value and
    // argument 2 the timestamp (an int64 datum).
    let (s, value, time): (&mut Series, _, _) =
        unsafe { (state(fcinfo, "derivative, integral or time_weighted_avg"), arg(fcinfo, 1), arg(fcinfo, 2)) };
    s.unit_micros = unit_micros;
    if let (Some(v), Some(t)) = (value, time) {
        let (v, t) = (float8(v), t.value() as i64);
        if s.n == 0 {
            s.first = (t, v);
        } else {
            let (pt, pv) = s.last;
            let dt = (t - pt) as f64;
            s.trapezoids += (v + pv) / 2.0 * dt;
            s.steps += pv * dt;
        }
        s.last = (t, v);
        s.n += 1;
    }
    // SAFETY: `s` is the Series in the aggregate context of derivative, integral or time_weighted_avg, which outlives
    // this call; Postgres passes its address back as argument 0.
    unsafe { state_ptr(s) }
}

#[unsafe(no_mangle)]
#[pg_guard]
pub unsafe extern "C-unwind" fn tsbucket_series_accum(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: Postgres calls this transition as declared (internal, float8, timestamp[tz]), series_step's contract.
    unsafe { series_step(fcinfo, 1.0) }
}

#[unsafe(no_mangle)]
#[pg_guard]
pub unsafe extern "C-unwind" fn tsbucket_series_accum_unit(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: this transition is declared (internal, float8, timestamp[tz], text): argument 3 is the output unit.
    let unit_arg = unsafe { arg(fcinfo, 3) };
    let unit = match unit_arg {
        Some(d) => {
            // SAFETY: `d` is the non-NULL text datum of argument 3, alive during this call; text_to_rust_str reads it in
            // place and `text` is used only before this call returns.
            let text = unsafe { pgrx::varlena::text_to_rust_str(d.cast_mut_ptr()) }.unwrap_or_default();
            output_unit_micros(text)
        }
        None => f64::NAN,
    };
    // SAFETY: arguments 0 to 2 of this call are the state, value and time that series_step's contract names.
    unsafe { series_step(fcinfo, unit) }
}

/// # Safety
/// `fcinfo` must be a call of a final function whose argument 0 is NULL or a
/// state of `series_step`.
unsafe fn series<'a>(fcinfo: pg_sys::FunctionCallInfo) -> Option<&'a Series> {
    // SAFETY: this function's contract: argument 0 is NULL or the Series that series_step keeps in the aggregate
    // context, alive while the final function runs.
    let state = unsafe { arg(fcinfo, 0).map(|d| &*d.cast_mut_ptr::<Series>()) };
    state.filter(|s| s.n > 0 && !s.unit_micros.is_nan())
}

#[unsafe(no_mangle)]
#[pg_guard]
pub unsafe extern "C-unwind" fn tsbucket_derivative_final(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: derivative's final function gets the series_step state (or NULL) in argument 0, as series requires.
    let frame = unsafe { series(fcinfo) };
    match frame {
        Some(s) if s.n >= 2 && s.last.0 != s.first.0 => {
            let dt = (s.last.0 - s.first.0) as f64 / s.unit_micros;
            float8_datum((s.last.1 - s.first.1) / dt)
        }
        // SAFETY: `fcinfo` is derivative's final call; fewer than two distinct times give NULL through its isnull.
        _ => unsafe { return_null(fcinfo) },
    }
}

#[unsafe(no_mangle)]
#[pg_guard]
pub unsafe extern "C-unwind" fn tsbucket_integral_final(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: integral's final function gets the series_step state (or NULL) in argument 0, as series requires.
    let frame = unsafe { series(fcinfo) };
    match frame {
        Some(s) => float8_datum(s.trapezoids / s.unit_micros),
        // SAFETY: `fcinfo` is integral's final call; an empty frame (or a NULL unit) returns NULL through its isnull.
        None => unsafe { return_null(fcinfo) },
    }
}

#[unsafe(no_mangle)]
#[pg_guard]
pub unsafe extern "C-unwind" fn tsbucket_twa_final(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: time_weighted_avg's final function gets the series_step state (or NULL) in argument 0, as series requires.
    let frame = unsafe { series(fcinfo) };
    match frame {
        Some(s) if s.last.0 == s.first.0 => float8_datum(s.last.1),
        Some(s) => float8_datum(s.steps / (s.last.0 - s.first.0) as f64),
        // SAFETY: `fcinfo` is time_weighted_avg's final call; an empty frame returns NULL through its isnull.
        None => unsafe { return_null(fcinfo) },
    }
}

// windowapi.h is not in pgrx's bindings; these are exported by the server.
// Every call goes through pg_guard_ffi_boundary, as pgrx's own bindings do.
type WindowObject = *mut std::ffi::c_void;
const WINDOW_SEEK_HEAD: i32 = 1;
unsafe extern "C-unwind" {
    fn WinGetCurrentPosition(winobj: WindowObject) -> i64;
    fn WinGetPartitionRowCount(winobj: WindowObject) -> i64;
    fn WinGetPartitionLocalMemory(winobj: WindowObject, sz: usize) -> *mut std::ffi::c_void;
    fn WinGetFuncArgInPartition(
        winobj: WindowObject,
        argno: i32,
        relpos: i32,
        seektype: i32,
        set_mark: bool,
        isnull: *mut bool,
        isout: *mut bool,
    ) -> pg_sys::Datum;
}

/// Positions of the nearest non-NULL neighbours, remembered across rows of a
/// partition so that a run of NULLs costs one search, not one per row.
#[derive(Default, Clone, Copy)]
struct FillCache {
    next_pos: i64,
    valid: bool,
}

/// Argument `argno` of the window function at partition row `pos`, or None
/// when NULL or outside the partition.
///
/// # Safety
/// `winobj` must be the window object of the current window function call,
/// with more than `argno` arguments.
unsafe fn window_arg(winobj: WindowObject, argno: i32, pos: i64) -> Option<pg_sys::Datum> {
    let (mut isnull, mut isout) = (false, false);
    // SAFETY: `winobj` is the current call's window object with argument `argno` (this function's contract); the
    // flags are locals the call writes; pg_guard_ffi_boundary turns a Postgres ERROR into a Rust panic.
    let d = unsafe {
        pg_sys::ffi::pg_guard_ffi_boundary(|| {
            WinGetFuncArgInPartition(winobj, argno, pos as i32, WINDOW_SEEK_HEAD, false, &mut isnull, &mut isout)
        })
    };
    if isnull || isout { None } else { Some(d) }
}

/// `linear_fill(value, ts)`: the value, or where it is NULL, the linear
/// interpolation by time between the nearest non-NULL values before and after.
#[unsafe(no_mangle)]
#[pg_guard]
pub unsafe extern "C-unwind" fn tsbucket_linear_fill(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: Postgres calls linear_fill as a window function: `fcinfo` is valid for this call and its context is the
    // WindowObject of the current partition, whose current row WinGetCurrentPosition reports.
    let (winobj, pos) = unsafe {
        let winobj = (*fcinfo).context as WindowObject;
        (winobj, pg_sys::ffi::pg_guard_ffi_boundary(|| WinGetCurrentPosition(winobj)))
    };
    // SAFETY: window_arg's contract: `winobj` is this call's window object, valid until it returns, and linear_fill
    // has two arguments (value, ts), the only `argno`s used below.
    let arg_at = |argno: i32, p: i64| unsafe { window_arg(winobj, argno, p) };
    // SAFETY: `fcinfo` is this window function call's, valid until it returns; return_null sets its isnull.
    let null_result = || unsafe { return_null(fcinfo) };
    if let Some(v) = arg_at(0, pos) {
        return v;
    }
    let Some(t) = arg_at(1, pos) else { return null_result() };
    // SAFETY: `winobj` is the current partition's window object; WinGetPartitionLocalMemory returns memory of
    // FillCache's size, zeroed on the partition's first call and kept for the whole partition.
    let (rows, cache) = unsafe {
        let rows = pg_sys::ffi::pg_guard_ffi_boundary(|| WinGetPartitionRowCount(winobj));
        let cache = pg_sys::ffi::pg_guard_ffi_boundary(|| WinGetPartitionLocalMemory(winobj, std::mem::size_of::<FillCache>()))
            as *mut FillCache;
        (rows, cache)
    };
    // Previous non-NULL (value and time both known).
    let mut prev = None;
    let mut p = pos - 1;
    while p >= 0 {
        if let (Some(v), Some(tp)) = (arg_at(0, p), arg_at(1, p)) {
            prev = Some((tp.value() as i64, float8(v)));
            break;
        }
        p -= 1;
    }
    let Some(prev) = prev else { return null_result() };
    // SAFETY: `cache` is the partition-local FillCache just returned, MAXALIGNed and alive for the whole partition.
    let cached = unsafe { *cache };
    let mut q = if cached.valid && cached.next_pos > pos { cached.next_pos } else { pos + 1 };
    let mut next = None;
    while q < rows {
        if let (Some(v), Some(tq)) = (arg_at(0, q), arg_at(1, q)) {
            next = Some((tq.value() as i64, float8(v)));
            break;
        }
        q += 1;
    }
    // SAFETY: the same partition-local `cache`, written in place for the partition's next rows.
    unsafe { *cache = FillCache { next_pos: q, valid: true } };
    let Some(next) = next else { return null_result() };
    let t = t.value() as i64;
    if next.0 == prev.0 {
        return float8_datum(prev.1);
    }
    let frac = (t - prev.0) as f64 / (next.0 - prev.0) as f64;
    float8_datum(prev.1 + (next.1 - prev.1) * frac)
}
