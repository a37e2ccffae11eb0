//! Calendar arithmetic with MongoDB's `$dateTrunc`, `$dateAdd` and `$dateDiff`
//! semantics, in microseconds since the Unix epoch, on the proleptic Gregorian
//! calendar. Time zones come in through the [`Zone`] trait: the Postgres layer
//! implements it with Postgres's own time-zone code; [`FixedOffset`] is here.
//!
//! Conventions (documented in the README):
//! - every unit is binned and counted on the zone's local wall clock, with bins
//!   counted from 2000-01-01T00:00 local (for weeks: the first `start_of_week`
//!   day on or after it);
//! - results of day and larger units are local midnights (or month starts)
//!   converted back with the zone's rules, so they follow DST;
//! - adding calendar units (year, quarter, month) clamps to the month's last
//!   day; adding days or weeks keeps the local wall-clock time; adding hours or
//!   smaller units adds elapsed time.

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

/// A time zone: the offset (seconds east of UTC) in force at an instant, and
/// the instant a local wall-clock time denotes.
pub trait Zone {
    fn offset_at(&self, utc_us: i64) -> i64;
    /// For local times that occur twice or never (DST), any consistent choice.
    fn local_to_utc(&self, local_us: i64) -> i64;
}

#[derive(Clone, Copy, Debug)]
pub struct FixedOffset(pub i64);

impl Zone for FixedOffset {
    fn offset_at(&self, _utc_us: i64) -> i64 {
        self.0
    }
    fn local_to_utc(&self, local_us: i64) -> i64 {
        local_us - self.0 * US_PER_SECOND
    }
}

/// MongoDB's UTC offset forms: +hh:mm, +hhmm, +hh (and "UTC"/"Z").
pub fn parse_offset(s: &str) -> Option<FixedOffset> {
    if s.eq_ignore_ascii_case("utc") || s.eq_ignore_ascii_case("z") {
        return Some(FixedOffset(0));
    }
    let (sign, rest) = match s.as_bytes().first()? {
        b'+' => (1, &s[1..]),
        b'-' => (-1, &s[1..]),
        _ => return None,
    };
    let digits: String = rest.chars().filter(|c| *c != ':').collect();
    if !digits.chars().all(|c| c.is_ascii_digit()) || !(digits.len() == 2 || digits.len() == 4) {
        return None;
    }
    if rest.contains(':') && rest.len() != 5 {
        return None;
    }
    let h: i64 = digits[..2].parse().ok()?;
    let m: i64 = if digits.len() == 4 { digits[2..].parse().ok()? } else { 0 };
    if h > 23 || m > 59 {
        return None;
    }
    Some(FixedOffset(sign * (h * 3600 + m * 60)))
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

fn local(zone: &dyn Zone, utc: i64) -> i64 {
    utc + zone.offset_at(utc) * US_PER_SECOND
}

/// First `start_of_week` day on or after 2000-01-01, in days since the epoch.
fn week_reference(start_of_week: i64) -> i64 {
    // 2000-01-01 is a Saturday (6).
    REF_DAYS + (start_of_week - 6).rem_euclid(7)
}

/// Start of the `bin_size`-unit bin holding `ts` (all in UTC microseconds).
pub fn trunc(ts: i64, unit: Unit, bin_size: i64, zone: &dyn Zone, start_of_week: i64) -> i64 {
    assert!(bin_size > 0, "bin_size must be positive");
    let local_ts = local(zone, ts);
    let day = local_ts.div_euclid(US_PER_DAY);
    let local_start = if let Some(months) = unit.months() {
        let (y, m, _) = civil_from_days(day);
        let since = (y - 2000) * 12 + (m - 1);
        let span = months * bin_size;
        let start = since.div_euclid(span) * span;
        let (sy, sm) = (2000 + start.div_euclid(12), start.rem_euclid(12) + 1);
        days_from_civil(sy, sm, 1) * US_PER_DAY
    } else if unit == Unit::Week {
        let reference = week_reference(start_of_week);
        let span = 7 * bin_size;
        (reference + (day - reference).div_euclid(span) * span) * US_PER_DAY
    } else {
        let len = unit.fixed_micros().expect("fixed unit");
        let reference = REF_DAYS * US_PER_DAY;
        let span = len.saturating_mul(bin_size);
        reference + (local_ts - reference).div_euclid(span) * span
    };
    let result = zone.local_to_utc(local_start);
    // A local start that is ambiguous or skipped (DST) may map past `ts`; the
    // offset in force at `ts` then gives the bin start as the clock showed it.
    if result > ts { local_start - zone.offset_at(ts) * US_PER_SECOND } else { result }
}

/// `ts` plus `amount` units (negative subtracts).
pub fn add(ts: i64, unit: Unit, amount: i64, zone: &dyn Zone) -> Option<i64> {
    if let Some(months) = unit.months() {
        let local_ts = local(zone, ts);
        let day = local_ts.div_euclid(US_PER_DAY);
        let time_of_day = local_ts.rem_euclid(US_PER_DAY);
        let (y, m, d) = civil_from_days(day);
        let total = (y * 12 + (m - 1)).checked_add(amount.checked_mul(months)?)?;
        let (ny, nm) = (total.div_euclid(12), total.rem_euclid(12) + 1);
        let nd = d.min(days_in_month(ny, nm));
        let new_local = days_from_civil(ny, nm, nd).checked_mul(US_PER_DAY)?.checked_add(time_of_day)?;
        return Some(zone.local_to_utc(new_local));
    }
    match unit {
        Unit::Week | Unit::Day => {
            let days = amount.checked_mul(if unit == Unit::Week { 7 } else { 1 })?;
            let new_local = local(zone, ts).checked_add(days.checked_mul(US_PER_DAY)?)?;
            Some(zone.local_to_utc(new_local))
        }
        _ => ts.checked_add(amount.checked_mul(unit.fixed_micros().expect("fixed unit"))?),
    }
}

/// Unit boundaries crossed going from `start` to `end` (negative if end < start).
pub fn diff(start: i64, end: i64, unit: Unit, zone: &dyn Zone, start_of_week: i64) -> i64 {
    let (ls, le) = (local(zone, start), local(zone, end));
    if let Some(months) = unit.months() {
        let index = |l: i64| {
            let (y, m, _) = civil_from_days(l.div_euclid(US_PER_DAY));
            (y * 12 + (m - 1)).div_euclid(months)
        };
        return index(le) - index(ls);
    }
    if unit == Unit::Week {
        let reference = week_reference(start_of_week);
        let index = |l: i64| (l.div_euclid(US_PER_DAY) - reference).div_euclid(7);
        return index(le) - index(ls);
    }
    let len = unit.fixed_micros().expect("fixed unit");
    le.div_euclid(len) - ls.div_euclid(len)
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

    #[test]
    fn offsets_parse() {
        assert_eq!(parse_offset("+04:45").map(|z| z.0), Some(4 * 3600 + 45 * 60));
        assert_eq!(parse_offset("-0530").map(|z| z.0), Some(-(5 * 3600 + 30 * 60)));
        assert_eq!(parse_offset("+03").map(|z| z.0), Some(3 * 3600));
        assert!(parse_offset("+3").is_none());
        assert!(parse_offset("America/New_York").is_none());
        assert_eq!(parse_weekday("MON"), Some(1));
        assert_eq!(parse_weekday("saturday"), Some(6));
        assert_eq!(parse_weekday("mo"), None);
    }
}
