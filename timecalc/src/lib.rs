//! Calendar arithmetic with MongoDB's `$dateTrunc`, `$dateAdd` and `$dateDiff`
//! semantics, in microseconds since the Unix epoch, on the proleptic Gregorian
//! calendar. Time zones come in through the [`Zone`] trait: the Postgres layer
//! implements it with Postgres's own time-zone code; [`FixedOffset`] is here.
//!
//! The rules are MongoDB's (src/mongo/db/query/datetime/date_time_support.cpp
//! and the timelib it calls), documented in the README:
//! - day and larger units work on the local calendar; hours and smaller units
//!   work on elapsed time, except that `diff` in hours and minutes counts the
//!   local clock's marks corrected by the change of UTC offset (see [`diff`]);
//! - hour and smaller bins of [`trunc`] are counted in elapsed time from
//!   2000-01-01T00:00 local; larger bins start at local midnights;
//! - a local time that a DST change skips or repeats resolves as timelib does
//!   ([`resolve_local`]): skipped times move forward by the gap, repeated times
//!   take the offset whose DST flag matches the instant the computation
//!   started from;
//! - `startOfWeek` is read only when the unit is week ([`week_start`]).

pub const US_PER_MS: i64 = 1_000;
pub const US_PER_SECOND: i64 = 1_000_000;
pub const US_PER_MINUTE: i64 = 60 * US_PER_SECOND;
pub const US_PER_HOUR: i64 = 60 * US_PER_MINUTE;
pub const US_PER_DAY: i64 = 24 * US_PER_HOUR;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    Year,
    Quarter,
    Month,
    Week,
    Day,
    Hour,
    Minute,
    Second,
    Millisecond,
}

impl Unit {
    /// Case-insensitive; called once per row, so it does not allocate.
    pub fn parse(s: &str) -> Option<Unit> {
        const UNITS: [(&str, Unit); 9] = [
            ("hour", Unit::Hour),
            ("day", Unit::Day),
            ("minute", Unit::Minute),
            ("second", Unit::Second),
            ("month", Unit::Month),
            ("week", Unit::Week),
            ("year", Unit::Year),
            ("quarter", Unit::Quarter),
            ("millisecond", Unit::Millisecond),
        ];
        UNITS.iter().find(|(name, _)| s.eq_ignore_ascii_case(name)).map(|(_, u)| *u)
    }

    /// Fixed length for units that have one (week and smaller).
    pub fn fixed_micros(self) -> Option<i64> {
        Some(match self {
            Unit::Week => 7 * US_PER_DAY,
            Unit::Day => US_PER_DAY,
            Unit::Hour => US_PER_HOUR,
            Unit::Minute => US_PER_MINUTE,
            Unit::Second => US_PER_SECOND,
            Unit::Millisecond => US_PER_MS,
            _ => return None,
        })
    }

    fn months(self) -> Option<i64> {
        match self {
            Unit::Year => Some(12),
            Unit::Quarter => Some(3),
            Unit::Month => Some(1),
            _ => None,
        }
    }
}

/// Day of week, 0 = Sunday .. 6 = Saturday.
pub fn parse_weekday(s: &str) -> Option<i64> {
    let days = ["sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday"];
    days.iter().position(|d| s.eq_ignore_ascii_case(d) || s.eq_ignore_ascii_case(&d[..3])).map(|i| i as i64)
}

/// The UTC offset (seconds east of UTC) and DST flag in force at an instant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Offset {
    pub secs: i64,
    pub dst: bool,
}

/// A time zone, queried in whole seconds since the Unix epoch (as timelib
/// does; the sub-second part of an instant never changes its offset).
pub trait Zone {
    /// The offset in force at `utc_s`.
    fn at(&self, utc_s: i64) -> Offset;
    /// The first transition strictly after `utc_s` (from that instant on a new
    /// offset or DST flag is in force), if the zone has one.
    fn next_transition(&self, utc_s: i64) -> Option<i64>;
}

#[derive(Clone, Copy, Debug)]
pub struct FixedOffset(pub i64);

impl Zone for FixedOffset {
    fn at(&self, _utc_s: i64) -> Offset {
        Offset { secs: self.0, dst: false }
    }
    fn next_transition(&self, _utc_s: i64) -> Option<i64> {
        None
    }
}

/// MongoDB's UTC offset forms: `+hh:mm`, `+hhmm`, `+hh` (and "UTC"/"Z"), with
/// ISO signs. As in MongoDB (`TimeZoneDatabase::parseUtcOffset`) any two digits
/// are accepted, so `+99:99` is 100 h 39 min east.
pub fn parse_offset(s: &str) -> Option<FixedOffset> {
    if s.eq_ignore_ascii_case("utc") || s.eq_ignore_ascii_case("z") {
        return Some(FixedOffset(0));
    }
    let b = s.as_bytes();
    let sign = match b.first()? {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let digit = |i: usize| b.get(i).filter(|c| c.is_ascii_digit()).map(|c| (c - b'0') as i64);
    let two = |i: usize| Some(digit(i)? * 10 + digit(i + 1)?);
    let (h, m) = match b.len() {
        3 => (two(1)?, 0),
        5 => (two(1)?, two(3)?),
        6 if b[3] == b':' => (two(1)?, two(4)?),
        _ => return None,
    };
    Some(FixedOffset(sign * (h * 3600 + m * 60)))
}

/// What to do with the `start_of_week` argument for a unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeekStart {
    /// Count weeks from this day (0 = Sunday); for other units the value is unused.
    Day(i64),
    /// The unit is week and the argument is NULL: the result is NULL.
    Null,
    /// The unit is week and the argument is not a day name: an error.
    Unknown,
}

/// MongoDB reads `startOfWeek` only when the unit is week: for any other unit
/// the argument is ignored, whatever it holds, NULL included
/// (jstests/aggregation/expressions/date_trunc.js and date_diff.js: "Ignored
/// when unit is not week").
pub fn week_start(unit: Unit, arg: Option<&str>) -> WeekStart {
    if unit != Unit::Week {
        return WeekStart::Day(0);
    }
    match arg {
        None => WeekStart::Null,
        Some(s) => parse_weekday(s).map_or(WeekStart::Unknown, WeekStart::Day),
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (any year).
pub fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146097 + doe - 719468
}

/// (year, month 1-12, day 1-31) of a day count since 1970-01-01.
pub fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719468;
    let era = z.div_euclid(146097);
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

pub fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

pub fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// 2000-01-01 in days since the Unix epoch (a Saturday).
pub const REF_DAYS: i64 = 10957;

fn floor_secs(utc_us: i64) -> i64 {
    utc_us.div_euclid(US_PER_SECOND)
}

/// The zone's wall clock at `utc_us`, as microseconds since 1970-01-01T00:00 local.
pub fn local(zone: &dyn Zone, utc_us: i64) -> i64 {
    utc_us + zone.at(floor_secs(utc_us)).secs * US_PER_SECOND
}

/// Whether a transition lies in (x, p], i.e. the period holding instant `p`
/// started after `x`.
fn period_starts_after(zone: &dyn Zone, x: i64, p: i64) -> bool {
    zone.next_transition(x).is_some_and(|t| t <= p)
}

/// The last transition in (x, p], if any.
fn last_transition_in(zone: &dyn Zone, x: i64, p: i64) -> Option<i64> {
    let mut t = zone.next_transition(x).filter(|&t| t <= p)?;
    // Transitions are hours apart and (x, p] spans about a day at most.
    for _ in 0..64 {
        match zone.next_transition(t) {
            Some(n) if n <= p => t = n,
            _ => break,
        }
    }
    Some(t)
}

/// The instant (UTC seconds) of the local wall-clock time `local_s`, resolved as
/// MongoDB resolves it: this is timelib's `do_adjust_timezone` (timelib
/// 2022.10, which MongoDB vendors), with its tests of transition times
/// expressed through [`Zone::next_transition`]. `dst` is the DST flag of the
/// instant the computation started from (MongoDB's `$dateAdd` keeps it from
/// the start date; `$dateTrunc` from its 2000-01-01 reference point).
///
/// What comes out for times that a transition skips or repeats:
/// - skipped (spring forward): read with the offset before the transition, so
///   the result lies after the gap by the time the input lay inside it
///   (02:20 on a New York spring-forward day is 03:20 EDT);
/// - repeated (the end of DST): the DST offset if `dst` is set, else the
///   standard offset. For other backward shifts (an offset change without DST)
///   timelib's probes, two hours around the local time read as UTC, decide:
///   east of UTC the later reading (the earlier if `dst` is set), west of it
///   the earlier.
pub fn resolve_local(zone: &dyn Zone, local_s: i64, dst: bool) -> i64 {
    let cur = zone.at(local_s);
    let after_probe = local_s - cur.secs;
    let after = zone.at(after_probe);
    let (mut actual, mut actual_probe) = (after.secs, after_probe);
    if cur.secs == after.secs {
        if cur.secs >= 0 && dst && !cur.dst {
            // East of UTC the local time read as UTC lies after the instant, so
            // DST may have ended in between: look two hours back.
            let probe = local_s - cur.secs - 7200;
            let earlier = zone.at(probe);
            if earlier.secs != after.secs && period_starts_after(zone, local_s - earlier.secs, after_probe) {
                (actual, actual_probe) = (earlier.secs, probe);
            }
        } else if cur.secs <= 0 && cur.dst && !dst {
            // West of UTC it lies before the instant: look two hours ahead.
            let probe = local_s - cur.secs + 7200;
            let later = zone.at(probe);
            if later.secs != after.secs && !period_starts_after(zone, local_s - later.secs, probe) {
                (actual, actual_probe) = (later.secs, probe);
            }
        }
    }
    let x = local_s - actual;
    let in_transition = last_transition_in(zone, x, actual_probe).is_some_and(|t| x >= t + (cur.secs - actual));
    if cur.secs != actual && !in_transition { local_s - actual } else { local_s - cur.secs }
}

/// [`resolve_local`] for microseconds: the sub-second part rides along.
fn resolve_local_us(zone: &dyn Zone, local_us: i64, dst: bool) -> i64 {
    resolve_local(zone, local_us.div_euclid(US_PER_SECOND), dst) * US_PER_SECOND + local_us.rem_euclid(US_PER_SECOND)
}

/// First `start_of_week` day on or after 2000-01-01, in days since the epoch.
fn week_reference(start_of_week: i64) -> i64 {
    // 2000-01-01 is a Saturday (6).
    REF_DAYS + (start_of_week - 6).rem_euclid(7)
}

/// MongoDB's reference point, 2000-01-01T00:00 local, in UTC seconds. As in
/// MongoDB the offset is the one in force at 2000-01-01T00:00Z.
fn reference_s(zone: &dyn Zone) -> i64 {
    let ref_utc = REF_DAYS * 86_400;
    ref_utc - zone.at(ref_utc).secs
}

/// Start of the `bin_size`-unit bin holding `ts` (all in UTC microseconds).
///
/// Hours and smaller: bins of elapsed time counted from 2000-01-01T00:00 local
/// (so in New York hour bins stay on whole UTC hours through DST, and in
/// Lord Howe, whose reference is in DST at +11:00, they fall on local :30 in
/// winter). Days and larger: counted on the local calendar from 2000-01-01 (weeks
/// from the first `start_of_week` on or after it); the bin starts at local
/// midnight, resolved by [`resolve_local`] with the reference point's DST
/// flag. As in MongoDB, a midnight that a DST change repeats may thus resolve
/// to its second occurrence, after `ts`.
pub fn trunc(ts: i64, unit: Unit, bin_size: i64, zone: &dyn Zone, start_of_week: i64) -> i64 {
    assert!(bin_size > 0, "bin_size must be positive");
    let reference = reference_s(zone);
    if matches!(unit, Unit::Hour | Unit::Minute | Unit::Second | Unit::Millisecond) {
        let len = unit.fixed_micros().expect("fixed unit");
        let span = len.saturating_mul(bin_size);
        let reference = reference * US_PER_SECOND;
        return reference + (ts - reference).div_euclid(span) * span;
    }
    let day = local(zone, ts).div_euclid(US_PER_DAY);
    let (start_day, reference) = if let Some(months) = unit.months() {
        let (y, m, _) = civil_from_days(day);
        let since = (y - 2000) * 12 + (m - 1);
        let span = months * bin_size;
        let start = since.div_euclid(span) * span;
        (days_from_civil(2000 + start.div_euclid(12), start.rem_euclid(12) + 1, 1), reference)
    } else {
        let (first, step) = if unit == Unit::Week { (week_reference(start_of_week), 7) } else { (REF_DAYS, 1) };
        let span = step * bin_size;
        // MongoDB moves its week reference by whole days of elapsed time.
        (first + (day - first).div_euclid(span) * span, reference + (first - REF_DAYS) * 86_400)
    };
    resolve_local_us(zone, start_day * US_PER_DAY, zone.at(reference).dst)
}

/// `ts` plus `amount` units (negative subtracts). Hours and smaller add elapsed
/// time; days and weeks keep the local wall-clock time; years, quarters and
/// months keep it too and clamp the day to the month's end. A local result that
/// DST skips or repeats is resolved by [`resolve_local`] with the DST flag of `ts`.
pub fn add(ts: i64, unit: Unit, amount: i64, zone: &dyn Zone) -> Option<i64> {
    let new_local = if let Some(months) = unit.months() {
        let local_ts = local(zone, ts);
        let day = local_ts.div_euclid(US_PER_DAY);
        let time_of_day = local_ts.rem_euclid(US_PER_DAY);
        let (y, m, d) = civil_from_days(day);
        let total = (y * 12 + (m - 1)).checked_add(amount.checked_mul(months)?)?;
        let (ny, nm) = (total.div_euclid(12), total.rem_euclid(12) + 1);
        let nd = d.min(days_in_month(ny, nm));
        days_from_civil(ny, nm, nd).checked_mul(US_PER_DAY)?.checked_add(time_of_day)?
    } else if matches!(unit, Unit::Week | Unit::Day) {
        let days = amount.checked_mul(if unit == Unit::Week { 7 } else { 1 })?;
        local(zone, ts).checked_add(days.checked_mul(US_PER_DAY)?)?
    } else {
        return ts.checked_add(amount.checked_mul(unit.fixed_micros().expect("fixed unit"))?);
    };
    // Local times near the i64 limits cannot be resolved (the zone is probed
    // hours around them); the caller's range check refuses them anyway.
    if !(i64::MIN / 2..i64::MAX / 2).contains(&new_local) {
        return None;
    }
    Some(resolve_local_us(zone, new_local, zone.at(floor_secs(ts)).dst))
}

/// Unit boundaries crossed going from `start` to `end` (negative if end < start).
///
/// - day and larger: boundaries of the local calendar (weeks start on
///   `start_of_week`; it is not used for other units);
/// - hour, minute: MongoDB's count, the local clock's hour (minute) marks
///   crossed plus the change of UTC offset in whole hours (minutes), truncated
///   toward zero, `floor(local(end) / u) - floor(local(start) / u) +
///   trunc((offset(start) - offset(end)) / u)`. When the offsets differ by a
///   whole number of units this is the number of elapsed unit boundaries (in
///   New York, 05:00Z to 06:00Z on 2020-11-01 is 1 hour though both read
///   01:00); a smaller shift (Lord Howe's 30 minutes, for hours) is ignored;
///   in a zone whose offset is not a whole number of hours (Kathmandu, +05:45)
///   the hour marks are the local clock's, at :15 UTC;
/// - second, millisecond: elapsed boundaries (offsets are whole seconds).
pub fn diff(start: i64, end: i64, unit: Unit, zone: &dyn Zone, start_of_week: i64) -> i64 {
    match unit {
        Unit::Second | Unit::Millisecond => {
            let len = unit.fixed_micros().expect("fixed unit");
            return end.div_euclid(len) - start.div_euclid(len);
        }
        Unit::Hour | Unit::Minute => {
            let len_s = unit.fixed_micros().expect("fixed unit") / US_PER_SECOND;
            let (os, oe) = (zone.at(floor_secs(start)).secs, zone.at(floor_secs(end)).secs);
            let (ls, le) = (floor_secs(start) + os, floor_secs(end) + oe);
            // Rust's `/` truncates toward zero, like the C++ MongoDB uses.
            return le.div_euclid(len_s) - ls.div_euclid(len_s) + (os - oe) / len_s;
        }
        _ => {}
    }
    let (ls, le) = (local(zone, start), local(zone, end));
    if let Some(months) = unit.months() {
        let index = |l: i64| {
            let (y, m, _) = civil_from_days(l.div_euclid(US_PER_DAY));
            (y * 12 + (m - 1)).div_euclid(months)
        };
        return index(le) - index(ls);
    }
    let (first, step) = if unit == Unit::Week { (week_reference(start_of_week), 7) } else { (REF_DAYS, 1) };
    let index = |l: i64| (l.div_euclid(US_PER_DAY) - first).div_euclid(step);
    index(le) - index(ls)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(y: i64, mo: i64, d: i64, h: i64, mi: i64, s: i64) -> i64 {
        days_from_civil(y, mo, d) * US_PER_DAY + h * US_PER_HOUR + mi * US_PER_MINUTE + s * US_PER_SECOND
    }

    const UTC: FixedOffset = FixedOffset(0);

    #[test]
    fn civil_round_trips_including_bc_and_far_future() {
        for days in [-1_000_000, -719468, -1, 0, 1, 10957, 2_932_896, 100_000_000] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
        assert_eq!(days_from_civil(2000, 1, 1), REF_DAYS);
    }

    #[test]
    fn mongodb_binsize_examples() {
        let t = at(2021, 3, 20, 11, 30, 5);
        assert_eq!(trunc(t, Unit::Hour, 1, &UTC, 0), at(2021, 3, 20, 11, 0, 0));
        assert_eq!(trunc(t, Unit::Hour, 2, &UTC, 0), at(2021, 3, 20, 10, 0, 0));
        assert_eq!(trunc(at(2025, 6, 1, 0, 0, 0), Unit::Year, 10, &UTC, 0), at(2020, 1, 1, 0, 0, 0));
        assert_eq!(trunc(at(2020, 5, 18, 14, 10, 30), Unit::Month, 6, &UTC, 0), at(2020, 1, 1, 0, 0, 0));
        assert_eq!(trunc(at(1999, 12, 31, 0, 0, 0), Unit::Year, 10, &UTC, 0), at(1990, 1, 1, 0, 0, 0));
    }

    #[test]
    fn weeks_start_on_the_given_day() {
        // 2021-01-01 is a Friday.
        let t = at(2021, 1, 1, 12, 0, 0);
        assert_eq!(trunc(t, Unit::Week, 1, &UTC, 0), at(2020, 12, 27, 0, 0, 0));
        assert_eq!(trunc(t, Unit::Week, 1, &UTC, 1), at(2020, 12, 28, 0, 0, 0));
        assert_eq!(trunc(t, Unit::Week, 1, &UTC, 5), at(2021, 1, 1, 0, 0, 0));
    }

    #[test]
    fn diff_counts_boundaries() {
        let u = &UTC;
        assert_eq!(diff(at(2010, 1, 1, 0, 0, 0), at(2011, 7, 1, 0, 0, 0), Unit::Year, u, 0), 1);
        assert_eq!(diff(at(2010, 1, 1, 0, 0, 0), at(2011, 7, 1, 0, 0, 0), Unit::Month, u, 0), 18);
        assert_eq!(diff(at(2010, 1, 1, 0, 0, 0), at(2011, 7, 1, 0, 0, 0), Unit::Day, u, 0), 546);
        assert_eq!(diff(at(2021, 1, 1, 0, 0, 0), at(2021, 1, 31, 0, 0, 0), Unit::Week, u, 0), 5);
        assert_eq!(diff(at(2021, 2, 1, 0, 0, 0), at(2021, 2, 28, 0, 0, 0), Unit::Week, u, 1), 3);
        assert_eq!(diff(at(2021, 1, 31, 0, 0, 0), at(2021, 1, 1, 0, 0, 0), Unit::Week, u, 0), -5);
    }

    #[test]
    fn add_clamps_to_month_end() {
        assert_eq!(add(at(2020, 10, 31, 12, 10, 5), Unit::Month, 1, &UTC), Some(at(2020, 11, 30, 12, 10, 5)));
        assert_eq!(add(at(2020, 2, 29, 0, 0, 0), Unit::Year, 1, &UTC), Some(at(2021, 2, 28, 0, 0, 0)));
        assert_eq!(add(at(2021, 3, 31, 0, 0, 0), Unit::Quarter, -1, &UTC), Some(at(2020, 12, 31, 0, 0, 0)));
    }

    /// A zone given by its transitions (UTC seconds, offset in force from then on).
    struct Table {
        first: Offset,
        changes: Vec<(i64, Offset)>,
    }

    impl Zone for Table {
        fn at(&self, utc_s: i64) -> Offset {
            self.changes.iter().rev().find(|(t, _)| *t <= utc_s).map_or(self.first, |c| c.1)
        }
        fn next_transition(&self, utc_s: i64) -> Option<i64> {
            self.changes.iter().find(|(t, _)| *t > utc_s).map(|c| c.0)
        }
    }

    fn secs(y: i64, mo: i64, d: i64, h: i64, mi: i64) -> i64 {
        at(y, mo, d, h, mi, 0) / US_PER_SECOND
    }

    fn off(h: i64, m: i64, dst: bool) -> Offset {
        Offset { secs: h.signum() * (h.abs() * 3600 + m * 60), dst }
    }

    /// America/New_York, exact for 2000 and 2019-2021.
    fn new_york() -> Table {
        let (est, edt) = (off(-5, 0, false), off(-4, 0, true));
        Table {
            first: est,
            changes: vec![
                (secs(2019, 3, 10, 7, 0), edt),
                (secs(2019, 11, 3, 6, 0), est),
                (secs(2020, 3, 8, 7, 0), edt),
                (secs(2020, 11, 1, 6, 0), est),
                (secs(2021, 3, 14, 7, 0), edt),
                (secs(2021, 11, 7, 6, 0), est),
            ],
        }
    }

    /// Europe/Amsterdam, exact for 2000 and 2020-2021.
    fn amsterdam() -> Table {
        let (cet, cest) = (off(1, 0, false), off(2, 0, true));
        Table {
            first: cet,
            changes: vec![
                (secs(2020, 3, 29, 1, 0), cest),
                (secs(2020, 10, 25, 1, 0), cet),
                (secs(2021, 3, 28, 1, 0), cest),
                (secs(2021, 10, 31, 1, 0), cet),
            ],
        }
    }

    /// Australia/Lord_Howe (+10:30, +11:00 in summer), exact for 2000 and 2020-2022.
    fn lord_howe() -> Table {
        let (std, dst) = (off(10, 30, false), off(11, 0, true));
        Table {
            first: dst,
            changes: vec![
                (secs(2000, 3, 25, 15, 0), std),
                (secs(2020, 10, 3, 15, 30), dst),
                (secs(2021, 4, 3, 15, 0), std),
                (secs(2021, 10, 2, 15, 30), dst),
                (secs(2022, 4, 2, 15, 0), std),
            ],
        }
    }

    /// Asia/Kathmandu: +05:30 until 1986, then +05:45.
    fn kathmandu() -> Table {
        Table { first: off(5, 30, false), changes: vec![(secs(1985, 12, 31, 18, 30), off(5, 45, false))] }
    }

    /// An instant given as local wall-clock time and its UTC offset.
    fn lt(y: i64, mo: i64, d: i64, h: i64, mi: i64, s: i64, offset: Offset) -> i64 {
        at(y, mo, d, h, mi, s) - offset.secs * US_PER_SECOND
    }

    #[test]
    fn skipped_local_times_move_forward_by_the_gap() {
        let (ny, ams, lh) = (new_york(), amsterdam(), lord_howe());
        let (edt, cest, lh_dst, lh_std) = (off(-4, 0, true), off(2, 0, true), off(11, 0, true), off(10, 30, false));
        // MongoDB's date_time_support_test.cpp, DateAdd.DateAddWithTimezoneDST and DateAdd_LordHoweTimezoneDST.
        assert_eq!(add(lt(2021, 3, 13, 2, 20, 0, off(-5, 0, false)), Unit::Day, 1, &ny), Some(lt(2021, 3, 14, 3, 20, 0, edt)));
        assert_eq!(add(lt(2021, 3, 15, 2, 20, 0, edt), Unit::Day, -1, &ny), Some(lt(2021, 3, 14, 3, 20, 0, edt)));
        assert_eq!(add(lt(2021, 1, 14, 2, 20, 0, off(-5, 0, false)), Unit::Month, 2, &ny), Some(lt(2021, 3, 14, 3, 20, 0, edt)));
        assert_eq!(add(lt(2021, 3, 27, 2, 20, 0, off(1, 0, false)), Unit::Day, 1, &ams), Some(lt(2021, 3, 28, 3, 20, 0, cest)));
        assert_eq!(add(lt(2020, 11, 28, 2, 20, 0, off(1, 0, false)), Unit::Month, 4, &ams), Some(lt(2021, 3, 28, 3, 20, 0, cest)));
        assert_eq!(add(lt(2020, 10, 3, 2, 15, 0, lh_std), Unit::Day, 1, &lh), Some(lt(2020, 10, 4, 2, 45, 0, lh_dst)));
    }

    #[test]
    fn repeated_local_times_keep_the_dst_flag_of_the_start() {
        let (ny, ams, lh) = (new_york(), amsterdam(), lord_howe());
        let (est, edt, cet, cest) = (off(-5, 0, false), off(-4, 0, true), off(1, 0, false), off(2, 0, true));
        let (lh_dst, lh_std) = (off(11, 0, true), off(10, 30, false));
        // From summer time: the DST reading, the earlier instant (MongoDB's vectors).
        assert_eq!(add(lt(2020, 10, 24, 2, 0, 1, cest), Unit::Day, 1, &ams), Some(lt(2020, 10, 25, 2, 0, 1, cest)));
        assert_eq!(add(lt(2020, 10, 31, 1, 0, 1, edt), Unit::Day, 1, &ny), Some(lt(2020, 11, 1, 1, 0, 1, edt)));
        assert_eq!(add(lt(2021, 4, 3, 1, 30, 1, lh_dst), Unit::Day, 1, &lh), Some(lt(2021, 4, 4, 1, 30, 1, lh_dst)));
        // ... for every calendar unit.
        let start = lt(2020, 10, 25, 1, 30, 0, edt);
        assert_eq!(add(start, Unit::Week, 1, &ny), Some(lt(2020, 11, 1, 1, 30, 0, edt)));
        assert_eq!(add(lt(2020, 10, 1, 1, 30, 0, edt), Unit::Month, 1, &ny), Some(lt(2020, 11, 1, 1, 30, 0, edt)));
        assert_eq!(add(lt(2020, 8, 1, 1, 30, 0, edt), Unit::Quarter, 1, &ny), Some(lt(2020, 11, 1, 1, 30, 0, edt)));
        assert_eq!(add(lt(2019, 11, 1, 1, 30, 0, edt), Unit::Year, 1, &ny), Some(lt(2020, 11, 1, 1, 30, 0, edt)));
        // From winter time: the standard reading, the later instant. MongoDB's vector
        // (2020-11-02 01:30 New York minus a day equals createFromDateParts(2020-11-01 01:30),
        // which is EST) shows this is not "always the earlier offset".
        assert_eq!(add(lt(2020, 11, 2, 1, 30, 0, est), Unit::Day, -1, &ny), Some(lt(2020, 11, 1, 1, 30, 0, est)));
        assert_eq!(add(lt(2020, 10, 26, 2, 30, 0, cet), Unit::Day, -1, &ams), Some(lt(2020, 10, 25, 2, 30, 0, cet)));
        assert_eq!(add(lt(2020, 12, 1, 1, 30, 0, est), Unit::Month, -1, &ny), Some(lt(2020, 11, 1, 1, 30, 0, est)));
        assert_eq!(add(lt(2021, 4, 5, 1, 45, 0, lh_std), Unit::Day, -1, &lh), Some(lt(2021, 4, 4, 1, 45, 0, lh_std)));
        // Hours and smaller add elapsed time whatever the clock shows.
        assert_eq!(add(lt(2020, 10, 25, 2, 50, 5, cest), Unit::Minute, 10, &ams), Some(lt(2020, 10, 25, 2, 0, 5, cet)));
        assert_eq!(add(lt(2021, 4, 4, 1, 50, 5, lh_dst), Unit::Minute, 20, &lh), Some(lt(2021, 4, 4, 1, 40, 5, lh_std)));
    }

    #[test]
    fn hours_and_minutes_count_clock_marks_corrected_by_the_offset_change() {
        let (ny, lh, ktm) = (new_york(), lord_howe(), kathmandu());
        let utc = |y, mo, d, h, mi| at(y, mo, d, h, mi, 0);
        // New York: whole-hour shifts, so elapsed hour boundaries (MongoDB's DateDiff.Hour).
        assert_eq!(diff(utc(2020, 11, 1, 5, 0), utc(2020, 11, 1, 6, 0), Unit::Hour, &ny, 0), 1);
        assert_eq!(diff(utc(2020, 11, 1, 6, 0), utc(2020, 11, 1, 5, 0), Unit::Hour, &ny, 0), -1);
        assert_eq!(diff(utc(2020, 3, 8, 6, 45), utc(2020, 3, 8, 7, 0), Unit::Hour, &ny, 0), 1);
        assert_eq!(diff(utc(2020, 3, 8, 7, 0), utc(2020, 3, 8, 6, 45), Unit::Hour, &ny, 0), -1);
        // Lord Howe: the 30-minute shift is below an hour, so hours follow the clock
        // (1 hour for 90 elapsed minutes) while minutes are elapsed (MongoDB's DateDiff.Hour/Minute).
        let (lh_dst, lh_std) = (off(11, 0, true), off(10, 30, false));
        let (a, b) = (lt(2021, 4, 4, 1, 0, 0, lh_dst), lt(2021, 4, 4, 2, 0, 0, lh_std));
        assert_eq!((diff(a, b, Unit::Hour, &lh, 0), diff(a, b, Unit::Minute, &lh, 0)), (1, 90));
        let (a, b) = (lt(2021, 10, 3, 1, 0, 0, lh_std), lt(2021, 10, 3, 2, 30, 0, lh_dst));
        assert_eq!((diff(a, b, Unit::Hour, &lh, 0), diff(a, b, Unit::Minute, &lh, 0)), (1, 60));
        // Inside the repeated half hour: the clock reads 01:45 twice, 30 minutes apart.
        let (a, b) = (lt(2021, 4, 4, 1, 45, 0, lh_dst), lt(2021, 4, 4, 1, 45, 0, lh_std));
        assert_eq!((diff(a, b, Unit::Hour, &lh, 0), diff(a, b, Unit::Minute, &lh, 0)), (0, 30));
        assert_eq!((diff(b, a, Unit::Hour, &lh, 0), diff(b, a, Unit::Minute, &lh, 0)), (0, -30));
        // Kathmandu (+05:45): hour marks are the clock's, at :15 UTC.
        let k = off(5, 45, false);
        assert_eq!(diff(lt(2021, 6, 1, 10, 50, 0, k), lt(2021, 6, 1, 11, 10, 0, k), Unit::Hour, &ktm, 0), 1);
        assert_eq!(diff(lt(2021, 6, 1, 10, 20, 0, k), lt(2021, 6, 1, 10, 55, 0, k), Unit::Hour, &ktm, 0), 0);
        // Its 1986 shift of 15 minutes: hours by the clock, minutes elapsed.
        let (a, b) = (lt(1985, 12, 31, 23, 50, 0, off(5, 30, false)), lt(1986, 1, 1, 0, 20, 0, k));
        assert_eq!((diff(a, b, Unit::Hour, &ktm, 0), diff(a, b, Unit::Minute, &ktm, 0)), (1, 15));
        // Seconds and milliseconds are always elapsed.
        assert_eq!(diff(a, b, Unit::Second, &ktm, 0), 900);
    }

    #[test]
    fn hour_bins_are_elapsed_time_from_the_reference_point() {
        let (ny, lh, ktm) = (new_york(), lord_howe(), kathmandu());
        // New York, 4-hour bins from 2000-01-01T05:00Z, in winter and summer (date_trunc.js).
        assert_eq!(trunc(at(2021, 12, 1, 18, 23, 36), Unit::Hour, 4, &ny, 0), at(2021, 12, 1, 17, 0, 0));
        assert_eq!(trunc(at(2021, 7, 1, 18, 23, 36), Unit::Hour, 4, &ny, 0), at(2021, 7, 1, 17, 0, 0));
        // Lord Howe's reference is in summer time (+11:00): in winter bins start at local :30.
        let lh_std = off(10, 30, false);
        assert_eq!(trunc(lt(2021, 6, 1, 10, 45, 0, lh_std), Unit::Hour, 1, &lh, 0), lt(2021, 6, 1, 10, 30, 0, lh_std));
        let k = off(5, 45, false);
        assert_eq!(trunc(lt(2021, 6, 1, 10, 50, 0, k), Unit::Hour, 1, &ktm, 0), lt(2021, 6, 1, 10, 0, 0, k));
        // Day bins start at local midnight on both sides of a DST change.
        assert_eq!(trunc(at(2021, 3, 14, 12, 0, 0), Unit::Day, 1, &ny, 0), at(2021, 3, 14, 5, 0, 0));
        assert_eq!(trunc(at(2021, 3, 15, 12, 0, 0), Unit::Day, 1, &ny, 0), at(2021, 3, 15, 4, 0, 0));
    }

    #[test]
    fn start_of_week_is_read_only_for_weeks() {
        for unit in [Unit::Year, Unit::Quarter, Unit::Month, Unit::Day, Unit::Hour, Unit::Minute, Unit::Second, Unit::Millisecond] {
            assert_eq!(week_start(unit, Some("IGNORED")), WeekStart::Day(0));
            assert_eq!(week_start(unit, Some("1")), WeekStart::Day(0));
            assert_eq!(week_start(unit, None), WeekStart::Day(0));
        }
        assert_eq!(week_start(Unit::Week, Some("MONDAY")), WeekStart::Day(1));
        assert_eq!(week_start(Unit::Week, Some("sat")), WeekStart::Day(6));
        assert_eq!(week_start(Unit::Week, None), WeekStart::Null);
        assert_eq!(week_start(Unit::Week, Some("FRIDIE")), WeekStart::Unknown);
        assert_eq!(week_start(Unit::Week, Some("")), WeekStart::Unknown);
        assert_eq!(week_start(Unit::Week, Some("SND")), WeekStart::Unknown);
    }

    #[test]
    fn offsets_parse() {
        assert_eq!(parse_offset("+04:45").map(|z| z.0), Some(4 * 3600 + 45 * 60));
        assert_eq!(parse_offset("-0530").map(|z| z.0), Some(-(5 * 3600 + 30 * 60)));
        assert_eq!(parse_offset("+03").map(|z| z.0), Some(3 * 3600));
        assert!(parse_offset("+3").is_none());
        assert!(parse_offset("America/New_York").is_none());
        // MongoDB's ParseUtcOffset tests: any two digits, and exactly these shapes.
        assert_eq!(parse_offset("-77:99").map(|z| z.0), Some(-(77 * 3600 + 99 * 60)));
        assert_eq!(parse_offset("+0199").map(|z| z.0), Some(3600 + 99 * 60));
        for bad in ["+", "-", "++", "+0:", "+0a", "+0:0", "+00:0", "+01:000", "+00:00a", "-12:34x", "+00:-00", "+:1234", "+12*34", "+0x4"] {
            assert!(parse_offset(bad).is_none(), "{bad}");
        }
        assert_eq!(parse_weekday("MON"), Some(1));
        assert_eq!(parse_weekday("saturday"), Some(6));
        assert_eq!(parse_weekday("mo"), None);
    }
}
