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
unsafe fn state<'a, S: Default>(fcinfo: pg_sys::FunctionCallInfo, what: &str) -> &'a mut S {
    unsafe {
        if let Some(d) = arg(fcinfo, 0) {
            return &mut *(d.cast_mut_ptr::<S>());
        }
        let aggcxt = aggregate_context(fcinfo, what);
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
    unsafe {
        let s: &mut MovingAvg = state(fcinfo, "moving_avg");
        if let Some(v) = arg(fcinfo, 1) {
            s.add(float8(v), 1);
        }
        state_ptr(s)
    }
}

#[unsafe(no_mangle)]
#[pg_guard]
pub unsafe extern "C-unwind" fn tsbucket_mavg_inverse(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    unsafe {
        let s: &mut MovingAvg = state(fcinfo, "moving_avg");
        if let Some(v) = arg(fcinfo, 1) {
            s.add(float8(v), -1);
        }
        state_ptr(s)
    }
}

#[unsafe(no_mangle)]
#[pg_guard]
pub unsafe extern "C-unwind" fn tsbucket_mavg_final(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    unsafe {
        match arg(fcinfo, 0).and_then(|d| (*d.cast_mut_ptr::<MovingAvg>()).result()) {
            Some(v) => float8_datum(v),
            None => return_null(fcinfo),
        }
    }
}

#[derive(Default)]
struct Ema {
    alpha: f64,
    value: Option<f64>,
}

unsafe fn ema_step(fcinfo: pg_sys::FunctionCallInfo, alpha: f64) -> pg_sys::Datum {
    unsafe {
        let s: &mut Ema = state(fcinfo, "exp_moving_avg");
        s.alpha = alpha;
        if let Some(v) = arg(fcinfo, 1) {
            let v = float8(v);
            s.value = Some(match s.value {
                None => v,
                // Same value as v * alpha + prev * (1 - alpha); this order
                // rounds as MongoDB does (its documented outputs match to the last digit).
                Some(prev) => prev + alpha * (v - prev),
            });
        }
        state_ptr(s)
    }
}

#[unsafe(no_mangle)]
#[pg_guard]
pub unsafe extern "C-unwind" fn tsbucket_ema_accum_n(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    unsafe {
        let n = arg(fcinfo, 2).map(|d| d.value() as i32);
        let Some(n) = n else { return ema_step(fcinfo, f64::NAN) };
        if n <= 0 {
            ts_error(INVALID, &format!("exp_moving_avg: n must be positive, not {n}"), "n is the number of recent rows that weigh most; alpha = 2 / (n + 1).");
        }
        ema_step(fcinfo, 2.0 / (n as f64 + 1.0))
    }
}

#[unsafe(no_mangle)]
#[pg_guard]
pub unsafe extern "C-unwind" fn tsbucket_ema_accum_alpha(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    unsafe {
        let alpha = arg(fcinfo, 2).map(float8);
        let Some(alpha) = alpha else { return ema_step(fcinfo, f64::NAN) };
        if !(alpha > 0.0 && alpha <= 1.0) {
            ts_error(INVALID, &format!("exp_moving_avg: alpha must be in (0, 1], not {alpha}"), "A higher alpha gives recent rows more weight.");
        }
        ema_step(fcinfo, alpha)
    }
}

#[unsafe(no_mangle)]
#[pg_guard]
pub unsafe extern "C-unwind" fn tsbucket_ema_final(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    unsafe {
        // A NULL n or alpha makes the result NULL, as in MongoDB.
        match arg(fcinfo, 0).map(|d| &*d.cast_mut_ptr::<Ema>()) {
            Some(Ema { alpha, value: Some(v) }) if !alpha.is_nan() => float8_datum(*v),
            _ => return_null(fcinfo),
        }
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

unsafe fn series_step(fcinfo: pg_sys::FunctionCallInfo, unit_micros: f64) -> pg_sys::Datum {
    unsafe {
        let s: &mut Series = state(fcinfo, "derivative, integral or time_weighted_avg");
        s.unit_micros = unit_micros;
        if let (Some(v), Some(t)) = (arg(fcinfo, 1), arg(fcinfo, 2)) {
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
        state_ptr(s)
    }
}

#[unsafe(no_mangle)]
#[pg_guard]
pub unsafe extern "C-unwind" fn tsbucket_series_accum(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    unsafe { series_step(fcinfo, 1.0) }
}

#[unsafe(no_mangle)]
#[pg_guard]
pub unsafe extern "C-unwind" fn tsbucket_series_accum_unit(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    unsafe {
        let unit = match arg(fcinfo, 3) {
            Some(d) => {
                let text = pgrx::varlena::text_to_rust_str(d.cast_mut_ptr()).unwrap_or_default();
                output_unit_micros(text)
            }
            None => f64::NAN,
        };
        series_step(fcinfo, unit)
    }
}

unsafe fn series<'a>(fcinfo: pg_sys::FunctionCallInfo) -> Option<&'a Series> {
    unsafe { arg(fcinfo, 0).map(|d| &*d.cast_mut_ptr::<Series>()).filter(|s| s.n > 0 && !s.unit_micros.is_nan()) }
}

#[unsafe(no_mangle)]
#[pg_guard]
pub unsafe extern "C-unwind" fn tsbucket_derivative_final(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    unsafe {
        match series(fcinfo) {
            Some(s) if s.n >= 2 && s.last.0 != s.first.0 => {
                let dt = (s.last.0 - s.first.0) as f64 / s.unit_micros;
                float8_datum((s.last.1 - s.first.1) / dt)
            }
            _ => return_null(fcinfo),
        }
    }
}

#[unsafe(no_mangle)]
#[pg_guard]
pub unsafe extern "C-unwind" fn tsbucket_integral_final(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    unsafe {
        match series(fcinfo) {
            Some(s) => float8_datum(s.trapezoids / s.unit_micros),
            None => return_null(fcinfo),
        }
    }
}

#[unsafe(no_mangle)]
#[pg_guard]
pub unsafe extern "C-unwind" fn tsbucket_twa_final(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    unsafe {
        match series(fcinfo) {
            Some(s) if s.last.0 == s.first.0 => float8_datum(s.last.1),
            Some(s) => float8_datum(s.steps / (s.last.0 - s.first.0) as f64),
            None => return_null(fcinfo),
        }
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

unsafe fn window_arg(winobj: WindowObject, argno: i32, pos: i64) -> Option<pg_sys::Datum> {
    unsafe {
        let (mut isnull, mut isout) = (false, false);
        let d = pg_sys::ffi::pg_guard_ffi_boundary(|| {
            WinGetFuncArgInPartition(winobj, argno, pos as i32, WINDOW_SEEK_HEAD, false, &mut isnull, &mut isout)
        });
        if isnull || isout { None } else { Some(d) }
    }
}

/// `linear_fill(value, ts)`: the value, or where it is NULL, the linear
/// interpolation by time between the nearest non-NULL values before and after.
#[unsafe(no_mangle)]
#[pg_guard]
pub unsafe extern "C-unwind" fn tsbucket_linear_fill(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    unsafe {
        let winobj = (*fcinfo).context as WindowObject;
        let pos = pg_sys::ffi::pg_guard_ffi_boundary(|| WinGetCurrentPosition(winobj));
        if let Some(v) = window_arg(winobj, 0, pos) {
            return v;
        }
        let Some(t) = window_arg(winobj, 1, pos) else { return return_null(fcinfo) };
        let rows = pg_sys::ffi::pg_guard_ffi_boundary(|| WinGetPartitionRowCount(winobj));
        let cache = pg_sys::ffi::pg_guard_ffi_boundary(|| WinGetPartitionLocalMemory(winobj, std::mem::size_of::<FillCache>()))
            as *mut FillCache;
        // Previous non-NULL (value and time both known).
        let mut prev = None;
        let mut p = pos - 1;
        while p >= 0 {
            if let (Some(v), Some(tp)) = (window_arg(winobj, 0, p), window_arg(winobj, 1, p)) {
                prev = Some((tp.value() as i64, float8(v)));
                break;
            }
            p -= 1;
        }
        let Some(prev) = prev else { return return_null(fcinfo) };
        let mut q = if (*cache).valid && (*cache).next_pos > pos { (*cache).next_pos } else { pos + 1 };
        let mut next = None;
        while q < rows {
            if let (Some(v), Some(tq)) = (window_arg(winobj, 0, q), window_arg(winobj, 1, q)) {
                next = Some((tq.value() as i64, float8(v)));
                break;
            }
            q += 1;
        }
        *cache = FillCache { next_pos: q, valid: true };
        let Some(next) = next else { return return_null(fcinfo) };
        let t = t.value() as i64;
        if next.0 == prev.0 {
            return float8_datum(prev.1);
        }
        let frac = (t - prev.0) as f64 / (next.0 - prev.0) as f64;
        float8_datum(prev.1 + (next.1 - prev.1) * frac)
    }
}
