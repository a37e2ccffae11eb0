//! Time buckets: expressions of the time column alone that never decrease as
//! time grows (date_trunc, date_bin, tsbucket.date_trunc, epoch arithmetic),
//! so rows in time order are in their order too.

use crate::pg::nodes::{list_ptrs, strip};
use pgrx::pg_sys;

pub(crate) unsafe fn is_time_var(e: *mut pg_sys::Node, relid: u32, time_attnum: i16) -> bool {
    // SAFETY: `e` is a non-null expression node (callers pass stripped equivalence members or plan expressions).
    if unsafe { (*e).type_ } != pg_sys::NodeTag::T_Var {
        return false;
    }
    // SAFETY: the expression `e` is tagged T_Var, so it points to a Var.
    let v = unsafe { &*(e as *const pg_sys::Var) };
    v.varno as u32 == relid && v.varlevelsup == 0 && v.varattno == time_attnum
}

/// A constant whose value is a positive number (float8 or numeric).
unsafe fn positive_constant(n: *mut pg_sys::Node) -> bool {
    // SAFETY: `n` is an argument node of the division or multiplication monotone_in_time checks; strip follows RelabelTypes.
    let n = unsafe { strip(n) };
    // SAFETY: `n` is that stripped operand, a node with a readable tag.
    if unsafe { (*n).type_ } != pg_sys::NodeTag::T_Const {
        return false;
    }
    // SAFETY: the operand `n` is tagged T_Const, so it points to a Const.
    let c = unsafe { &*(n as *const pg_sys::Const) };
    if c.constisnull {
        return false;
    }
    let value = match c.consttype {
        pg_sys::FLOAT8OID => f64::from_bits(c.constvalue.value() as u64),
        pg_sys::INT4OID => c.constvalue.value() as i32 as f64,
        pg_sys::INT8OID => c.constvalue.value() as i64 as f64,
        pg_sys::NUMERICOID => {
            // SAFETY: numeric_float8 converts `c.constvalue`, a non-null numeric datum of the plan, to a by-value float8.
            let d = unsafe { pg_sys::OidFunctionCall1Coll(pg_sys::Oid::from(pg_sys::F_NUMERIC_FLOAT8), pg_sys::InvalidOid, c.constvalue) };
            f64::from_bits(d.value() as u64)
        }
        _ => return false,
    };
    value > 0.0
}

/// Whether `e` is a function of the time column alone that never decreases
/// as time grows. Recognised: the time column; date_trunc(unit, time[,
/// zone]); date_bin(stride, time, origin); tsbucket.date_trunc(unit, time
/// ...); and Grafana's `$__timeGroup` form to_timestamp(floor(extract(epoch
/// from time) / N) * N), built of extract/date_part of 'epoch', division and
/// multiplication by a positive constant, floor, numeric <-> float8 casts and
/// to_timestamp. tsbucket.date_trunc only in time zone 'UTC'. Other
/// arguments must be constants free of volatility.
pub(super) unsafe fn monotone_in_time(e: *mut pg_sys::Node, relid: u32, time_attnum: i16) -> bool {
    // SAFETY: `e` is NULL or an expression node of the plan or planner, as monotone_in_time's callers pass; strip
    // follows only RelabelTypes.
    let e = unsafe { strip(e) };
    if e.is_null() {
        return false;
    }
    // SAFETY: `e` is that non-null stripped expression; is_time_var only reads its tag and Var fields.
    if unsafe { is_time_var(e, relid, time_attnum) } {
        return true;
    }
    // SAFETY: `e` is the non-null expression being classified; its tag is read by value.
    let tag = unsafe { (*e).type_ };
    let (funcid, args) = match tag {
        pg_sys::NodeTag::T_FuncExpr => {
            let f = e as *mut pg_sys::FuncExpr;
            // SAFETY: `e` is tagged T_FuncExpr, so `f` is a FuncExpr; its args List belongs to the same expression tree.
            unsafe { ((*f).funcid, list_ptrs((*f).args)) }
        }
        pg_sys::NodeTag::T_OpExpr => {
            let o = e as *mut pg_sys::OpExpr;
            // SAFETY: `e` is tagged T_OpExpr, so `o` is an OpExpr; its args List belongs to the same expression tree.
            unsafe { ((*o).opfuncid, list_ptrs((*o).args)) }
        }
        _ => return false,
    };
    let args: Vec<*mut pg_sys::Node> = args.into_iter().map(|a| a as *mut pg_sys::Node).collect();
    let time_arg = match u32::from(funcid) {
        pg_sys::F_DATE_TRUNC_TEXT_TIMESTAMPTZ | pg_sys::F_DATE_TRUNC_TEXT_TIMESTAMP | pg_sys::F_DATE_TRUNC_TEXT_TIMESTAMPTZ_TEXT => 1,
        pg_sys::F_DATE_BIN_INTERVAL_TIMESTAMPTZ_TIMESTAMPTZ | pg_sys::F_DATE_BIN_INTERVAL_TIMESTAMP_TIMESTAMP => 1,
        pg_sys::F_EXTRACT_TEXT_TIMESTAMPTZ | pg_sys::F_EXTRACT_TEXT_TIMESTAMP | pg_sys::F_DATE_PART_TEXT_TIMESTAMPTZ | pg_sys::F_DATE_PART_TEXT_TIMESTAMP => {
            // SAFETY: extract/date_part have two arguments; args[0], the unit, is a node of `e`'s argument List.
            if !unsafe { is_epoch(args[0]) } {
                return false;
            }
            1
        }
        pg_sys::F_FLOOR_FLOAT8 | pg_sys::F_FLOOR_NUMERIC | pg_sys::F_FLOAT8_NUMERIC | pg_sys::F_NUMERIC_FLOAT8 | pg_sys::F_TO_TIMESTAMP_FLOAT8 => 0,
        pg_sys::F_NUMERIC_DIV | pg_sys::F_FLOAT8DIV | pg_sys::F_NUMERIC_MUL | pg_sys::F_FLOAT8MUL => {
            // SAFETY: these operators take two arguments; args[1], the divisor or factor, is a node of `e`'s List.
            if !unsafe { positive_constant(args[1]) } {
                return false;
            }
            0
        }
        // MongoDB's rules resolve local times around DST changes in ways that
        // are not proven monotone; in UTC there are none.
        // SAFETY: is_tsbucket_date_trunc looks up `funcid` in the syscache; args[3], when present, is the zone argument node.
        _ if unsafe { is_tsbucket_date_trunc(funcid) && args.get(3).is_some_and(|z| is_text_constant(*z, "utc")) } => 1,
        _ => return false,
    };
    args.iter().enumerate().all(|(i, &a)| {
        // SAFETY: `a` is an argument node of `e`; monotone_in_time and is_pseudo_constant only walk it.
        unsafe { if i == time_arg { monotone_in_time(a, relid, time_attnum) } else { crate::pg::nodes::is_pseudo_constant(a) } }
    })
}

unsafe fn is_epoch(n: *mut pg_sys::Node) -> bool {
    // SAFETY: `n` is the unit argument node of extract/date_part that monotone_in_time passes.
    unsafe { is_text_constant(n, "epoch") }
}

/// A text constant equal to `word`, ignoring case.
unsafe fn is_text_constant(n: *mut pg_sys::Node, word: &str) -> bool {
    // SAFETY: `n` is an argument node of the expression monotone_in_time classifies; strip follows RelabelTypes.
    let n = unsafe { strip(n) };
    // SAFETY: `n` is that stripped argument, read as a Const only when tagged T_Const.
    let c = unsafe { ((*n).type_ == pg_sys::NodeTag::T_Const).then(|| &*(n as *const pg_sys::Const)) };
    let Some(c) = c.filter(|c| !c.constisnull && c.consttype == pg_sys::TEXTOID) else { return false };
    // SAFETY: `c.constvalue` is the non-null in-memory text varlena of this plan Const, alive with the plan tree; the
    // server's text is taken as UTF-8, as everywhere in this crate.
    let text = unsafe { pgrx::text_to_rust_str_unchecked(c.constvalue.cast_mut_ptr()) };
    text.eq_ignore_ascii_case(word)
}

/// tsbucket.date_trunc(unit, time, ...): MongoDB's $dateTrunc, monotone in
/// time. A SQL function, so the planner has usually inlined it into the
/// C function it calls (tsbucket._date_trunc_tz / _date_trunc_ts, same arguments).
unsafe fn is_tsbucket_date_trunc(funcid: pg_sys::Oid) -> bool {
    // SAFETY: get_func_name returns a palloc'd NUL-terminated copy of `funcid`'s name, or NULL (checked before reading).
    let name = unsafe { pg_sys::get_func_name(funcid) };
    // SAFETY: `name` is read as a C string only once known non-null.
    if name.is_null() || !matches!(unsafe { std::ffi::CStr::from_ptr(name) }.to_bytes(), b"date_trunc" | b"_date_trunc_tz" | b"_date_trunc_ts") {
        return false;
    }
    // SAFETY: get_func_namespace and get_namespace_name are syscache lookups by OID; the schema name comes back palloc'd or NULL.
    let ns = unsafe {
        let namespace = pg_sys::get_func_namespace(funcid);
        pg_sys::get_namespace_name(namespace)
    };
    // SAFETY: `ns` is dereferenced as a NUL-terminated C string only after the non-null check.
    !ns.is_null() && unsafe { std::ffi::CStr::from_ptr(ns) }.to_bytes() == b"tsbucket"
}

/// A call of date_trunc or date_bin on the time column with constant
/// arguments, as the planner's group estimate (rewrite::grouping) and the
/// scan's arithmetic (`fixed_bucket`) both read it.
pub(crate) enum BucketCall {
    /// date_trunc(unit, time), or with `zone` (date_trunc(unit, timestamptz, zone));
    /// `session_zone`: of a timestamptz in the session's zone.
    Trunc { unit: String, session_zone: bool, zone: bool },
    /// date_bin(stride, time, origin); `origin` when a constant.
    Bin { stride: pg_sys::Interval, origin: Option<i64> },
}

/// `e` as a BucketCall, if it is one.
///
/// # Safety
/// `e` is an expression node of the plan or planner; `relid` the time column's range-table index.
pub(crate) unsafe fn bucket_call(e: *mut pg_sys::Node, relid: u32, time_attnum: i16) -> Option<BucketCall> {
    // SAFETY: `e` is an expression (this function's contract); strip follows RelabelTypes only.
    let e = unsafe { strip(e) };
    // SAFETY: `e` is non-null when tagged; a FuncExpr's args List belongs to the same tree.
    let (funcid, args) = unsafe {
        if e.is_null() || (*e).type_ != pg_sys::NodeTag::T_FuncExpr {
            return None;
        }
        let f = e as *mut pg_sys::FuncExpr;
        ((*f).funcid, list_ptrs((*f).args).into_iter().map(|a| strip(a as *mut pg_sys::Node)).collect::<Vec<_>>())
    };
    // SAFETY: args[1] is the time argument of date_trunc and date_bin (both have at least two), a node of `e`.
    if args.len() < 2 || !unsafe { is_time_var(args[1], relid, time_attnum) } {
        return None;
    }
    let f = u32::from(funcid);
    match f {
        pg_sys::F_DATE_TRUNC_TEXT_TIMESTAMPTZ | pg_sys::F_DATE_TRUNC_TEXT_TIMESTAMP | pg_sys::F_DATE_TRUNC_TEXT_TIMESTAMPTZ_TEXT => {
            // SAFETY: args[0] is date_trunc's unit argument, a node of `e`; a non-NULL text Const holds a text varlena.
            let unit = unsafe { <String as pgrx::FromDatum>::from_datum(constant(args[0], &[pg_sys::TEXTOID])?, false) }?;
            Some(BucketCall::Trunc {
                unit,
                session_zone: f == pg_sys::F_DATE_TRUNC_TEXT_TIMESTAMPTZ,
                zone: f == pg_sys::F_DATE_TRUNC_TEXT_TIMESTAMPTZ_TEXT,
            })
        }
        pg_sys::F_DATE_BIN_INTERVAL_TIMESTAMPTZ_TIMESTAMPTZ | pg_sys::F_DATE_BIN_INTERVAL_TIMESTAMP_TIMESTAMP => {
            // SAFETY: date_bin(stride, source, origin): args[0] and args[2] are nodes of `e`; a non-NULL interval Const
            // points to its Interval, a timestamp(tz) Const holds its microseconds by value.
            unsafe {
                let stride = *constant(args[0], &[pg_sys::INTERVALOID])?.cast_mut_ptr::<pg_sys::Interval>();
                let origin = args.get(2).and_then(|&o| constant(o, &[pg_sys::TIMESTAMPTZOID, pg_sys::TIMESTAMPOID])).map(|d| d.value() as i64);
                Some(BucketCall::Bin { stride, origin })
            }
        }
        _ => None,
    }
}

/// The value of `n` if it is a non-NULL constant of one of `types`.
///
/// # Safety
/// `n` is NULL or an expression node.
unsafe fn constant(n: *mut pg_sys::Node, types: &[pg_sys::Oid]) -> Option<pg_sys::Datum> {
    // SAFETY: `n` is tagged before it is read as a Const.
    let c = unsafe { (!n.is_null() && (*n).type_ == pg_sys::NodeTag::T_Const).then(|| &*(n as *const pg_sys::Const)) }?;
    (!c.constisnull && types.contains(&c.consttype)).then_some(c.constvalue)
}

/// A time bucket that is plain arithmetic on the microseconds: `date_trunc`
/// to a unit of at most a day, of a `timestamp`, or of a `timestamptz` in a
/// session time zone of one fixed UTC offset (UTC itself, say); `date_bin` of
/// a stride without months and a constant origin. Postgres's own function
/// computes the same key (its local time is the time plus that offset); the
/// scan saves the function call, some hundreds of nanoseconds a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct FixedBucket {
    width: i64,
    /// Key = floor((t - origin) / width) * width + origin.
    origin: i64,
}

/// Postgres's timestamp range: [MIN_TIMESTAMP, END_TIMESTAMP) in microseconds.
const MIN_TIMESTAMP: i64 = -211_813_488_000_000_000;
const END_TIMESTAMP: i64 = 9_223_371_331_200_000_000;

impl FixedBucket {
    /// The key of time `t`, or None where Postgres's function would raise
    /// (out of the timestamp range): it is then asked, and raises.
    pub(super) fn key(self, t: i64) -> Option<i64> {
        let d = t.checked_sub(self.origin)?;
        let k = d.div_euclid(self.width).checked_mul(self.width)?.checked_add(self.origin)?;
        (MIN_TIMESTAMP..END_TIMESTAMP).contains(&k).then_some(k)
    }
}

pub(crate) const USECS_PER_DAY: i64 = 86_400_000_000;

/// The fixed bucket `e` (a group key over the time column) computes, if it
/// is one (FixedBucket); otherwise Postgres evaluates it. Called at executor
/// start: the session time zone cannot change while the query runs.
///
/// # Safety
/// `e` is an expression node of the plan; `relid` its scan's range-table index.
pub(super) unsafe fn fixed_bucket(e: *mut pg_sys::Node, relid: u32, time_attnum: i16) -> Option<FixedBucket> {
    // SAFETY: `e` is an expression node of the plan (this function's contract).
    match unsafe { bucket_call(e, relid, time_attnum) }? {
        BucketCall::Trunc { zone: true, .. } => None,
        BucketCall::Trunc { unit, session_zone, .. } => {
            let width = fixed_unit_width(&unit)?;
            let offset = if session_zone {
                let mut gmtoff: std::ffi::c_long = 0;
                // SAFETY: session_timezone is the backend's current zone (set at startup and by SET, never during a
                // query); pg_get_timezone_offset only reads it and writes `gmtoff`.
                if !unsafe { pg_sys::pg_get_timezone_offset(pg_sys::session_timezone, &mut gmtoff) } {
                    return None;
                }
                gmtoff as i64 * 1_000_000
            } else {
                0
            };
            // Local time t + offset truncated, less the offset: origin -offset.
            Some(FixedBucket { width, origin: -offset })
        }
        BucketCall::Bin { stride, origin } => {
            // Months have no fixed width; Postgres refuses them, a stride that is not positive and an infinite origin.
            let origin = origin.filter(|o| (MIN_TIMESTAMP..END_TIMESTAMP).contains(o))?;
            if stride.month != 0 {
                return None;
            }
            let width = (stride.day as i64).checked_mul(USECS_PER_DAY)?.checked_add(stride.time)?;
            (width > 0).then_some(FixedBucket { width, origin })
        }
    }
}

/// Microseconds of a date_trunc unit of fixed width (a day at most), in the
/// spellings date_trunc takes in full (abbreviations go to Postgres).
pub(crate) fn fixed_unit_width(unit: &str) -> Option<i64> {
    Some(match unit.to_ascii_lowercase().as_str() {
        "microsecond" | "microseconds" => 1,
        "millisecond" | "milliseconds" => 1_000,
        "second" | "seconds" => 1_000_000,
        "minute" | "minutes" => 60_000_000,
        "hour" | "hours" => 3_600_000_000,
        "day" | "days" => USECS_PER_DAY,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_buckets_floor_toward_minus_infinity() {
        let minute = FixedBucket { width: 60_000_000, origin: 0 };
        assert_eq!(minute.key(119_999_999), Some(60_000_000));
        assert_eq!(minute.key(-1), Some(-60_000_000));
        assert_eq!(minute.key(0), Some(0));
        // A zone 5:30 east: local midnight is 18:30 UTC the day before.
        let day_east = FixedBucket { width: USECS_PER_DAY, origin: -19_800_000_000 };
        assert_eq!(day_east.key(0), Some(USECS_PER_DAY - 19_800_000_000 - USECS_PER_DAY));
        // Out of Postgres's range: asked of Postgres (which raises).
        assert_eq!(FixedBucket { width: USECS_PER_DAY, origin: 36_000_000_000 }.key(MIN_TIMESTAMP), None);
        assert_eq!(fixed_unit_width("Minute"), Some(60_000_000));
        assert_eq!(fixed_unit_width("week"), None);
    }
}
