//! MongoDB's date operators and `$setWindowFields` window operators as SQL
//! functions. Calendar arithmetic lives in the pure `tsbucket-timecalc` crate;
//! this module adapts it to Postgres: time zones through Postgres's own tz
//! database (`pg_tzset`, `pg_localtime`, `pg_next_dst_boundary`), errors as
//! SQLSTATE 22023, and the aggregate / window-function calling conventions.
//! The SQL signatures (defaults, volatility, aggregates) are in sql/time_functions.sql.

use crate::pg::error::ts_error;
use pgrx::pg_sys;
use pgrx::prelude::*;
use tsbucket_timecalc::{self as tc, FixedOffset, Offset, US_PER_SECOND, Unit, WeekStart, Zone};

pub(super) const INVALID: pgrx::PgSqlErrorCode = pgrx::PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE;

const OUT_OF_RANGE: pgrx::PgSqlErrorCode = pgrx::PgSqlErrorCode::ERRCODE_DATETIME_FIELD_OVERFLOW;

/// Postgres timestamps count from 2000-01-01; the calendar code from 1970-01-01.
const PG_EPOCH_US: i64 = 946_684_800 * US_PER_SECOND;

/// Postgres's valid timestamp range (MIN_TIMESTAMP .. END_TIMESTAMP).
const MIN_PG_US: i64 = -211_813_488_000_000_000;

const END_PG_US: i64 = 9_223_371_331_200_000_000;

fn parse_unit(s: &str) -> Unit {
    Unit::parse(s).unwrap_or_else(|| {
        ts_error(
            INVALID,
            &format!("unknown time unit \"{s}\""),
            "Use year, quarter, month, week, day, hour, minute, second or millisecond.",
        )
    })
}

/// The week start for `u`, or None when the result is NULL (a NULL start of
/// week for unit week). MongoDB reads the argument only for weeks.
fn week_start(u: Unit, start_of_week: Option<&str>) -> Option<i64> {
    match tc::week_start(u, start_of_week) {
        WeekStart::Day(d) => Some(d),
        WeekStart::Null => None,
        WeekStart::Unknown => ts_error(
            INVALID,
            &format!("unknown start of week \"{}\"", start_of_week.unwrap_or_default()),
            "Use a day name such as sunday or mon.",
        ),
    }
}

/// A zone from Postgres's tz database.
struct PgZone(*mut pg_sys::pg_tz);

impl Zone for PgZone {
    fn at(&self, utc_s: i64) -> Offset {
        let t: pg_sys::pg_time_t = utc_s;
        // SAFETY: self.0 is a zone pg_tzset returned, cached by Postgres for the life of the backend; `t` is a local
        // pg_time_t; pg_localtime returns NULL or its static struct tm, overwritten only by its next call.
        let tm = unsafe { pg_sys::pg_localtime(&t, self.0) };
        if tm.is_null() {
            ts_error(OUT_OF_RANGE, "timestamp out of range for time zone conversion", "Use a timestamp between 4713 BC and 294276 AD.");
        }
        // SAFETY: `tm` is the non-NULL static struct tm pg_localtime just filled; both fields are read before any
        // other call could overwrite it.
        let tm = unsafe { &*tm };
        Offset { secs: tm.tm_gmtoff as i64, dst: tm.tm_isdst > 0 }
    }

    fn next_transition(&self, utc_s: i64) -> Option<i64> {
        let t: pg_sys::pg_time_t = utc_s;
        let (mut before_off, mut before_dst, mut boundary, mut after_off, mut after_dst) = (0, 0, 0, 0, 0);
        // SAFETY: self.0 is a backend-lifetime zone from pg_tzset; pg_next_dst_boundary reads the local `t` and writes
        // only the five locals it is given.
        let found = unsafe {
            pg_sys::pg_next_dst_boundary(&t, &mut before_off, &mut before_dst, &mut boundary, &mut after_off, &mut after_dst, self.0)
        };
        // 0: no later transition; -1: Postgres could not extrapolate that far.
        (found == 1).then_some(boundary)
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
    // Olson names start with a letter; anything else ("", " ", "+1:23", "0") is not
    // a zone for MongoDB, and must not reach pg_tzset's POSIX-string parser.
    let plausible = name.starts_with(|c: char| c.is_ascii_alphabetic())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || "_/+-".contains(c));
    let tz = match std::ffi::CString::new(name) {
        // SAFETY: `c` is a NUL-terminated copy of `name`, alive through the call; pg_tzset returns NULL or a zone it
        // keeps in its cache for the rest of the backend's life.
        Ok(c) if plausible => unsafe { pg_sys::pg_tzset(c.as_ptr()) },
        _ => std::ptr::null_mut(),
    };
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

/// The start of week is not strict: MongoDB ignores it unless the unit is week,
/// so a NULL there gives NULL only for weeks. Every other NULL gives NULL
/// before any argument is checked, as in MongoDB.
fn trunc_pg(pg_us: i64, unit_name: &str, bin_size: i32, timezone: &str, start_of_week: Option<&str>) -> Option<i64> {
    let u = parse_unit(unit_name);
    let sow = week_start(u, start_of_week)?;
    if bin_size <= 0 {
        ts_error(INVALID, &format!("bin_size must be positive, not {bin_size}"), "Give a bin_size of 1 or more.");
    }
    if is_infinite(pg_us) {
        return Some(pg_us);
    }
    let z = zone(timezone);
    Some(check_range(tc::trunc(to_unix(pg_us), u, bin_size as i64, z.zone(), sow)))
}

#[pg_extern(immutable, parallel_safe)]
fn _date_trunc_tz(
    unit: Option<&str>,
    ts: Option<TimestampWithTimeZone>,
    bin_size: Option<i32>,
    timezone: Option<&str>,
    start_of_week: Option<&str>,
) -> Option<TimestampWithTimeZone> {
    let pg_us: i64 = ts?.into();
    let out = trunc_pg(pg_us, unit?, bin_size?, timezone?, start_of_week)?;
    Some(TimestampWithTimeZone::try_from(out).unwrap_or_else(|_| ts_error(OUT_OF_RANGE, "timestamp out of range", "")))
}

#[pg_extern(immutable, parallel_safe)]
fn _date_trunc_ts(
    unit: Option<&str>,
    ts: Option<Timestamp>,
    bin_size: Option<i32>,
    timezone: Option<&str>,
    start_of_week: Option<&str>,
) -> Option<Timestamp> {
    let pg_us: i64 = ts?.into();
    let out = trunc_pg(pg_us, unit?, bin_size?, timezone?, start_of_week)?;
    Some(Timestamp::try_from(out).unwrap_or_else(|_| ts_error(OUT_OF_RANGE, "timestamp out of range", "")))
}

#[pg_extern(immutable, parallel_safe)]
fn _date_trunc_date(
    unit: Option<&str>,
    d: Option<pgrx::datum::Date>,
    bin_size: Option<i32>,
    timezone: Option<&str>,
    start_of_week: Option<&str>,
) -> Option<pgrx::datum::Date> {
    let (unit, d, bin_size, timezone) = (unit?, d?, bin_size?, timezone?);
    if d.is_infinity() || d.is_neg_infinity() {
        return Some(d);
    }
    let pg_us = d.to_pg_epoch_days() as i64 * tc::US_PER_DAY;
    let out = trunc_pg(pg_us, unit, bin_size, timezone, start_of_week)?;
    let days = out.div_euclid(tc::US_PER_DAY) as i32;
    Some(pgrx::datum::Date::try_from(days).unwrap_or_else(|_| ts_error(OUT_OF_RANGE, "date out of range", "")))
}

#[pg_extern(immutable, parallel_safe, strict)]
fn _date_add(ts: TimestampWithTimeZone, unit: &str, amount: i64, timezone: &str) -> TimestampWithTimeZone {
    let u = parse_unit(unit);
    let pg_us: i64 = ts.into();
    if is_infinite(pg_us) {
        return ts;
    }
    let z = zone(timezone);
    let out = tc::add(to_unix(pg_us), u, amount, z.zone())
        .unwrap_or_else(|| ts_error(OUT_OF_RANGE, "timestamp out of range", "The amount is too large for this unit."));
    TimestampWithTimeZone::try_from(check_range(out)).unwrap_or_else(|_| ts_error(OUT_OF_RANGE, "timestamp out of range", ""))
}

#[pg_extern(immutable, parallel_safe)]
fn _date_diff(
    start: Option<TimestampWithTimeZone>,
    end_: Option<TimestampWithTimeZone>,
    unit: Option<&str>,
    timezone: Option<&str>,
    start_of_week: Option<&str>,
) -> Option<i64> {
    let (start, end_, unit, timezone) = (start?, end_?, unit?, timezone?);
    let u = parse_unit(unit);
    let sow = week_start(u, start_of_week)?;
    let (a, b): (i64, i64) = (start.into(), end_.into());
    if is_infinite(a) || is_infinite(b) {
        ts_error(OUT_OF_RANGE, "cannot count units to or from an infinite timestamp", "");
    }
    let z = zone(timezone);
    Some(tc::diff(to_unix(a), to_unix(b), u, z.zone(), sow))
}

/// Length of an output unit for derivative and integral (fixed-length units only).
pub(super) fn output_unit_micros(s: &str) -> f64 {
    let u = parse_unit(s);
    u.fixed_micros().unwrap_or_else(|| {
        ts_error(INVALID, &format!("unit \"{s}\" has no fixed length"), "Use week, day, hour, minute, second or millisecond.")
    }) as f64
}
