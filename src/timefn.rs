//! MongoDB's date operators and `$setWindowFields` window operators as SQL
//! functions. Calendar arithmetic lives in the pure `tsbucket-timecalc` crate;
//! this module adapts it to Postgres: time zones through Postgres's own tz
//! database (`pg_tzset`, `pg_localtime`, `DetermineTimeZoneOffset`), errors as
//! SQLSTATE 22023, and the aggregate / window-function calling conventions.
//! The SQL signatures (defaults, volatility, aggregates) are in sql/time_functions.sql.

use crate::error::ts_error;
use pgrx::pg_sys;
use pgrx::prelude::*;
use tsbucket_timecalc::{self as tc, FixedOffset, Unit, Zone, US_PER_SECOND};

const INVALID: pgrx::PgSqlErrorCode = pgrx::PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE;
const OUT_OF_RANGE: pgrx::PgSqlErrorCode = pgrx::PgSqlErrorCode::ERRCODE_DATETIME_FIELD_OVERFLOW;
/// Postgres timestamps count from 2000-01-01; the calendar code from 1970-01-01.
const PG_EPOCH_US: i64 = 946_684_800 * US_PER_SECOND;
/// Postgres's valid timestamp range (MIN_TIMESTAMP .. END_TIMESTAMP).
const MIN_PG_US: i64 = -211_813_488_000_000_000;
const END_PG_US: i64 = 9_223_371_331_200_000_000;

fn unit(s: &str) -> Unit {
    Unit::parse(s).unwrap_or_else(|| {
        ts_error(
            INVALID,
            &format!("unknown time unit \"{s}\""),
            "Use year, quarter, month, week, day, hour, minute, second or millisecond.",
        )
    })
}

fn weekday(s: &str) -> i64 {
    tc::parse_weekday(s).unwrap_or_else(|| {
        ts_error(INVALID, &format!("unknown start of week \"{s}\""), "Use a day name such as sunday or mon.")
    })
}

/// A zone from Postgres's tz database.
struct PgZone(*mut pg_sys::pg_tz);

impl Zone for PgZone {
    fn offset_at(&self, utc_us: i64) -> i64 {
        let t: pg_sys::pg_time_t = utc_us.div_euclid(US_PER_SECOND);
        let tm = unsafe { pg_sys::pg_localtime(&t, self.0) };
        if tm.is_null() {
            ts_error(OUT_OF_RANGE, "timestamp out of range for time zone conversion", "Use a timestamp between 4713 BC and 294276 AD.");
        }
        unsafe { (*tm).tm_gmtoff as i64 }
    }

    fn local_to_utc(&self, local_us: i64) -> i64 {
        let day = local_us.div_euclid(tc::US_PER_DAY);
        let in_day = local_us.rem_euclid(tc::US_PER_DAY);
        let secs = in_day / US_PER_SECOND;
        let (y, m, d) = tc::civil_from_days(day);
        let mut tm = pg_sys::pg_tm {
            tm_year: y as i32,
            tm_mon: m as i32,
            tm_mday: d as i32,
            tm_hour: (secs / 3600) as i32,
            tm_min: ((secs / 60) % 60) as i32,
            tm_sec: (secs % 60) as i32,
            ..Default::default()
        };
        // Postgres's sign: seconds west of Greenwich.
        let west = unsafe { pg_sys::DetermineTimeZoneOffset(&mut tm, self.0) } as i64;
        local_us + west * US_PER_SECOND
    }
}

enum AnyZone {
    Fixed(FixedOffset),
    Pg(PgZone),
}

impl AnyZone {
    fn zone(&self) -> &dyn Zone {
        match self {
            AnyZone::Fixed(z) => z,
            AnyZone::Pg(z) => z,
        }
    }
}

/// MongoDB's forms: an Olson identifier, or a UTC offset (+hh:mm, +hhmm, +hh,
/// with ISO signs, unlike POSIX zone strings).
fn zone(name: &str) -> AnyZone {
    if let Some(z) = tc::parse_offset(name) {
        return AnyZone::Fixed(z);
    }
    let looks_like_offset = name.starts_with('+') || name.starts_with('-');
    let c = std::ffi::CString::new(name).unwrap_or_default();
    let tz = if looks_like_offset { std::ptr::null_mut() } else { unsafe { pg_sys::pg_tzset(c.as_ptr()) } };
    if tz.is_null() {
        ts_error(
            INVALID,
            &format!("unknown time zone \"{name}\""),
            "Use an Olson name such as America/New_York, or a UTC offset such as +05:30, -0800 or +03.",
        );
    }
    AnyZone::Pg(PgZone(tz))
}

fn out_of_range() -> ! {
    ts_error(OUT_OF_RANGE, "timestamp out of range", "Results must lie between 4713 BC and 294247 AD.")
}

/// Unix microseconds of a Postgres timestamp (the last ~30 years of Postgres's
/// range do not fit i64 counted from 1970, and are refused).
fn to_unix(pg_us: i64) -> i64 {
    pg_us.checked_add(PG_EPOCH_US).unwrap_or_else(|| out_of_range())
}

fn check_range(unix_us: i64) -> i64 {
    let pg_us = unix_us - PG_EPOCH_US;
    if !(MIN_PG_US..END_PG_US).contains(&pg_us) {
        out_of_range();
    }
    pg_us
}

fn is_infinite(pg_us: i64) -> bool {
    pg_us == i64::MIN || pg_us == i64::MAX
}

fn trunc_pg(pg_us: i64, unit_name: &str, bin_size: i32, timezone: &str, start_of_week: &str) -> i64 {
    let u = unit(unit_name);
    if bin_size <= 0 {
        ts_error(INVALID, &format!("bin_size must be positive, not {bin_size}"), "Give a bin_size of 1 or more.");
    }
    let sow = weekday(start_of_week);
    if is_infinite(pg_us) {
        return pg_us;
    }
    let z = zone(timezone);
    check_range(tc::trunc(to_unix(pg_us), u, bin_size as i64, z.zone(), sow))
}

#[pg_extern(immutable, parallel_safe, strict)]
fn _date_trunc_tz(unit: &str, ts: TimestampWithTimeZone, bin_size: i32, timezone: &str, start_of_week: &str) -> TimestampWithTimeZone {
    let pg_us: i64 = ts.into();
    let out = trunc_pg(pg_us, unit, bin_size, timezone, start_of_week);
    TimestampWithTimeZone::try_from(out).unwrap_or_else(|_| ts_error(OUT_OF_RANGE, "timestamp out of range", ""))
}

#[pg_extern(immutable, parallel_safe, strict)]
fn _date_trunc_ts(unit: &str, ts: Timestamp, bin_size: i32, timezone: &str, start_of_week: &str) -> Timestamp {
    let pg_us: i64 = ts.into();
    let out = trunc_pg(pg_us, unit, bin_size, timezone, start_of_week);
    Timestamp::try_from(out).unwrap_or_else(|_| ts_error(OUT_OF_RANGE, "timestamp out of range", ""))
}

#[pg_extern(immutable, parallel_safe, strict)]
fn _date_trunc_date(unit: &str, d: pgrx::datum::Date, bin_size: i32, timezone: &str, start_of_week: &str) -> pgrx::datum::Date {
    if d.is_infinity() || d.is_neg_infinity() {
        return d;
    }
    let pg_us = d.to_pg_epoch_days() as i64 * tc::US_PER_DAY;
    let out = trunc_pg(pg_us, unit, bin_size, timezone, start_of_week);
    let days = out.div_euclid(tc::US_PER_DAY) as i32;
    pgrx::datum::Date::try_from(days).unwrap_or_else(|_| ts_error(OUT_OF_RANGE, "date out of range", ""))
}

#[pg_extern(immutable, parallel_safe, strict)]
fn _date_add(ts: TimestampWithTimeZone, unit: &str, amount: i64, timezone: &str) -> TimestampWithTimeZone {
    let u = self::unit(unit);
    let pg_us: i64 = ts.into();
    if is_infinite(pg_us) {
        return ts;
    }
    let z = zone(timezone);
    let out = tc::add(to_unix(pg_us), u, amount, z.zone())
        .unwrap_or_else(|| ts_error(OUT_OF_RANGE, "timestamp out of range", "The amount is too large for this unit."));
    TimestampWithTimeZone::try_from(check_range(out)).unwrap_or_else(|_| ts_error(OUT_OF_RANGE, "timestamp out of range", ""))
}

#[pg_extern(immutable, parallel_safe, strict)]
fn _date_diff(start: TimestampWithTimeZone, end_: TimestampWithTimeZone, unit: &str, timezone: &str, start_of_week: &str) -> i64 {
    let u = self::unit(unit);
    let sow = weekday(start_of_week);
    let (a, b): (i64, i64) = (start.into(), end_.into());
    if is_infinite(a) || is_infinite(b) {
        ts_error(OUT_OF_RANGE, "cannot count units to or from an infinite timestamp", "");
    }
    let z = zone(timezone);
    tc::diff(to_unix(a), to_unix(b), u, z.zone(), sow)
}

/// Length of an output unit for derivative and integral (fixed-length units only).
pub fn output_unit_micros(s: &str) -> f64 {
    let u = unit(s);
    u.fixed_micros().unwrap_or_else(|| {
        ts_error(INVALID, &format!("unit \"{s}\" has no fixed length"), "Use week, day, hour, minute, second or millisecond.")
    }) as f64
}

pub mod aggregates;
