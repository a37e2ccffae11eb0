//! Properties of the calendar arithmetic on random instants, units, bin sizes,
//! fixed offsets and a zone with DST (Olson zones and MongoDB's own vectors are
//! exercised by the pg_regress suite: time_functions, mongo_vectors).

use proptest::prelude::*;
use tsbucket_timecalc::*;

fn unit() -> impl Strategy<Value = Unit> {
    prop::sample::select(vec![
        Unit::Year, Unit::Quarter, Unit::Month, Unit::Week, Unit::Day, Unit::Hour, Unit::Minute, Unit::Second,
        Unit::Millisecond,
    ])
}

/// Instants from year -4000 to 9000.
fn instant() -> impl Strategy<Value = i64> {
    (days_from_civil(-4000, 1, 1) * US_PER_DAY)..(days_from_civil(9000, 1, 1) * US_PER_DAY)
}

fn zone() -> impl Strategy<Value = FixedOffset> {
    (-14 * 4i64..=14 * 4).prop_map(|q| FixedOffset(q * 900))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn trunc_is_idempotent_and_bounds_the_instant(
        ts in instant(), u in unit(), bin in 1i64..20, z in zone(), sow in 0i64..7,
    ) {
        let start = trunc(ts, u, bin, &z, sow);
        prop_assert!(start <= ts);
        prop_assert_eq!(trunc(start, u, bin, &z, sow), start);
        // The next bin starts after ts.
        let next = add(start, u, bin, &z).unwrap();
        prop_assert!(ts < next, "ts {} next {}", ts, next);
        prop_assert_eq!(trunc(next, u, bin, &z, sow), next);
    }

    #[test]
    fn add_then_subtract_returns_the_input_when_nothing_clamps(
        ts in instant(), u in unit(), amount in -5000i64..5000, z in zone(),
    ) {
        let local_day = civil_from_days((ts + z.0 * US_PER_SECOND).div_euclid(US_PER_DAY));
        // Calendar units clamp on days 29-31; skip those (covered by unit tests).
        prop_assume!(!matches!(u, Unit::Year | Unit::Quarter | Unit::Month) || local_day.2 <= 28);
        let there = add(ts, u, amount, &z).unwrap();
        prop_assert_eq!(add(there, u, -amount, &z).unwrap(), ts);
    }

    #[test]
    fn diff_is_antisymmetric_and_matches_trunc(a in instant(), b in instant(), u in unit(), z in zone(), sow in 0i64..7) {
        prop_assert_eq!(diff(a, b, u, &z, sow), -diff(b, a, u, &z, sow));
        if diff(a, b, u, &z, sow) == 0 {
            prop_assert_eq!(trunc(a, u, 1, &z, sow), trunc(b, u, 1, &z, sow));
        }
    }
}

/// A zone with US-style DST in every year: UTC-5, UTC-4 from the second Sunday of
/// March 02:00 to the first Sunday of November 02:00 local. Its offsets change by
/// whole hours and never at midnight.
struct UsRules;

impl UsRules {
    /// Transitions of year `y` (UTC seconds): into DST, out of DST.
    fn transitions(y: i64) -> [i64; 2] {
        // 1970-01-01 was a Thursday (4); Sunday is 0.
        let first_sunday = |m: i64| {
            let d = days_from_civil(y, m, 1);
            d + (7 - (d + 4).rem_euclid(7)) % 7
        };
        [(first_sunday(3) + 7) * 86_400 + 2 * 3600 + 5 * 3600, first_sunday(11) * 86_400 + 2 * 3600 + 4 * 3600]
    }
}

impl Zone for UsRules {
    fn at(&self, utc_s: i64) -> Offset {
        let (y, _, _) = civil_from_days(utc_s.div_euclid(86_400));
        let [on, off] = Self::transitions(y);
        if (on..off).contains(&utc_s) { Offset { secs: -4 * 3600, dst: true } } else { Offset { secs: -5 * 3600, dst: false } }
    }
    fn next_transition(&self, utc_s: i64) -> Option<i64> {
        let (y, _, _) = civil_from_days(utc_s.div_euclid(86_400));
        (y..=y + 1).flat_map(Self::transitions).find(|&t| t > utc_s)
    }
}

/// Instants from 1900 to 2100.
fn modern_instant() -> impl Strategy<Value = i64> {
    (days_from_civil(1900, 1, 1) * US_PER_DAY)..(days_from_civil(2100, 1, 1) * US_PER_DAY)
}

/// Instants within two days of a DST change of UsRules.
fn near_transition() -> impl Strategy<Value = i64> {
    (1900i64..2100, 0usize..2, -2 * US_PER_DAY..2 * US_PER_DAY)
        .prop_map(|(y, which, delta)| UsRules::transitions(y)[which] * US_PER_SECOND + delta)
}

fn dst_instant() -> impl Strategy<Value = i64> {
    prop_oneof![modern_instant(), near_transition()]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(5000))]

    #[test]
    fn dst_zone_trunc_bounds_the_instant(ts in dst_instant(), u in unit(), bin in 1i64..20, sow in 0i64..7) {
        let z = UsRules;
        let start = trunc(ts, u, bin, &z, sow);
        prop_assert!(start <= ts, "start {} ts {}", start, ts);
        prop_assert_eq!(trunc(start, u, bin, &z, sow), start);
        let next = add(start, u, bin, &z).unwrap();
        prop_assert!(ts < next, "ts {} next {}", ts, next);
    }

    #[test]
    fn dst_zone_hours_and_minutes_are_elapsed_boundaries(a in dst_instant(), b in dst_instant()) {
        // Whole-hour offsets: MongoDB's count equals the elapsed UTC boundaries.
        for u in [Unit::Hour, Unit::Minute, Unit::Second, Unit::Millisecond] {
            let len = u.fixed_micros().unwrap();
            prop_assert_eq!(diff(a, b, u, &UsRules, 0), b.div_euclid(len) - a.div_euclid(len));
        }
    }

    #[test]
    fn dst_zone_diff_is_antisymmetric(a in dst_instant(), b in dst_instant(), u in unit(), sow in 0i64..7) {
        prop_assert_eq!(diff(a, b, u, &UsRules, sow), -diff(b, a, u, &UsRules, sow));
    }

    #[test]
    fn dst_zone_days_keep_the_wall_clock(ts in dst_instant(), days in -400i64..400) {
        let z = UsRules;
        let there = add(ts, Unit::Day, days, &z).unwrap();
        // The local time of day is kept unless it does not exist on the target day.
        let (l0, l1) = (local(&z, ts).rem_euclid(US_PER_DAY), local(&z, there).rem_euclid(US_PER_DAY));
        let hour = l0 / US_PER_HOUR;
        prop_assert!(l0 == l1 || (hour == 2 && l1 == l0 + US_PER_HOUR), "{} -> {}", l0, l1);
        prop_assert_eq!(diff(ts, there, Unit::Day, &z, 0), days);
        // Back again, unless a skipped or repeated hour was involved.
        if hour != 1 && hour != 2 {
            prop_assert_eq!(add(there, Unit::Day, -days, &z).unwrap(), ts);
        }
    }
}
