//! Time buckets: expressions of the time column alone that never decrease as
//! time grows (date_trunc, date_bin, tsbucket.date_trunc, epoch arithmetic),
//! so rows in time order are in their order too.

use crate::pg::nodes::{list_ptrs, strip};
use pgrx::pg_sys;

pub(crate) unsafe fn is_time_var(e: *mut pg_sys::Node, relid: u32, time_attnum: i16) -> bool {
    unsafe {
        (*e).type_ == pg_sys::NodeTag::T_Var && {
            let v = e as *mut pg_sys::Var;
            (*v).varno as u32 == relid && (*v).varlevelsup == 0 && (*v).varattno == time_attnum
        }
    }
}

/// A constant whose value is a positive number (float8 or numeric).
unsafe fn positive_constant(n: *mut pg_sys::Node) -> bool {
    unsafe {
        let n = strip(n);
        if (*n).type_ != pg_sys::NodeTag::T_Const {
            return false;
        }
        let c = n as *mut pg_sys::Const;
        if (*c).constisnull {
            return false;
        }
        let value = match (*c).consttype {
            pg_sys::FLOAT8OID => f64::from_bits((*c).constvalue.value() as u64),
            pg_sys::INT4OID => (*c).constvalue.value() as i32 as f64,
            pg_sys::INT8OID => (*c).constvalue.value() as i64 as f64,
            pg_sys::NUMERICOID => {
                let d = pg_sys::OidFunctionCall1Coll(pg_sys::Oid::from(pg_sys::F_NUMERIC_FLOAT8), pg_sys::InvalidOid, (*c).constvalue);
                f64::from_bits(d.value() as u64)
            }
            _ => return false,
        };
        value > 0.0
    }
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
    unsafe {
        let e = strip(e);
        if e.is_null() {
            return false;
        }
        if is_time_var(e, relid, time_attnum) {
            return true;
        }
        let (funcid, args) = match (*e).type_ {
            pg_sys::NodeTag::T_FuncExpr => {
                let f = e as *mut pg_sys::FuncExpr;
                ((*f).funcid, list_ptrs((*f).args))
            }
            pg_sys::NodeTag::T_OpExpr => {
                let o = e as *mut pg_sys::OpExpr;
                ((*o).opfuncid, list_ptrs((*o).args))
            }
            _ => return false,
        };
        let args: Vec<*mut pg_sys::Node> = args.into_iter().map(|a| a as *mut pg_sys::Node).collect();
        let time_arg = match u32::from(funcid) {
            pg_sys::F_DATE_TRUNC_TEXT_TIMESTAMPTZ | pg_sys::F_DATE_TRUNC_TEXT_TIMESTAMP | pg_sys::F_DATE_TRUNC_TEXT_TIMESTAMPTZ_TEXT => 1,
            pg_sys::F_DATE_BIN_INTERVAL_TIMESTAMPTZ_TIMESTAMPTZ | pg_sys::F_DATE_BIN_INTERVAL_TIMESTAMP_TIMESTAMP => 1,
            pg_sys::F_EXTRACT_TEXT_TIMESTAMPTZ | pg_sys::F_EXTRACT_TEXT_TIMESTAMP | pg_sys::F_DATE_PART_TEXT_TIMESTAMPTZ | pg_sys::F_DATE_PART_TEXT_TIMESTAMP => {
                if !is_epoch(args[0]) {
                    return false;
                }
                1
            }
            pg_sys::F_FLOOR_FLOAT8 | pg_sys::F_FLOOR_NUMERIC | pg_sys::F_FLOAT8_NUMERIC | pg_sys::F_NUMERIC_FLOAT8 | pg_sys::F_TO_TIMESTAMP_FLOAT8 => 0,
            pg_sys::F_NUMERIC_DIV | pg_sys::F_FLOAT8DIV | pg_sys::F_NUMERIC_MUL | pg_sys::F_FLOAT8MUL => {
                if !positive_constant(args[1]) {
                    return false;
                }
                0
            }
            // MongoDB's rules resolve local times around DST changes in ways that
            // are not proven monotone; in UTC there are none.
            _ if is_tsbucket_date_trunc(funcid) && args.get(3).is_some_and(|z| is_text_constant(*z, "utc")) => 1,
            _ => return false,
        };
        args.iter().enumerate().all(|(i, &a)| if i == time_arg { monotone_in_time(a, relid, time_attnum) } else { crate::pg::nodes::is_pseudo_constant(a) })
    }
}

unsafe fn is_epoch(n: *mut pg_sys::Node) -> bool {
    unsafe { is_text_constant(n, "epoch") }
}

/// A text constant equal to `word`, ignoring case.
unsafe fn is_text_constant(n: *mut pg_sys::Node, word: &str) -> bool {
    unsafe {
        let n = strip(n);
        if (*n).type_ != pg_sys::NodeTag::T_Const || (*(n as *mut pg_sys::Const)).constisnull || (*(n as *mut pg_sys::Const)).consttype != pg_sys::TEXTOID {
            return false;
        }
        let text = pgrx::text_to_rust_str_unchecked((*(n as *mut pg_sys::Const)).constvalue.cast_mut_ptr());
        text.eq_ignore_ascii_case(word)
    }
}

/// tsbucket.date_trunc(unit, time, ...): MongoDB's $dateTrunc, monotone in
/// time. A SQL function, so the planner has usually inlined it into the
/// C function it calls (tsbucket._date_trunc_tz / _date_trunc_ts, same arguments).
unsafe fn is_tsbucket_date_trunc(funcid: pg_sys::Oid) -> bool {
    unsafe {
        let name = pg_sys::get_func_name(funcid);
        if name.is_null() || !matches!(std::ffi::CStr::from_ptr(name).to_bytes(), b"date_trunc" | b"_date_trunc_tz" | b"_date_trunc_ts") {
            return false;
        }
        let namespace = pg_sys::get_func_namespace(funcid);
        let ns = pg_sys::get_namespace_name(namespace);
        !ns.is_null() && std::ffi::CStr::from_ptr(ns).to_bytes() == b"tsbucket"
    }
}
