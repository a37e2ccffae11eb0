//! Bucket windows: aligned, half-open spans of time. A timestamp belongs to
//! exactly one window, `[floor(t / span) * span, + span)`, whatever its sign.

pub const MICROS_PER_SECOND: i64 = 1_000_000;
pub const MICROS_PER_HOUR: i64 = 3600 * MICROS_PER_SECOND;
pub const MICROS_PER_DAY: i64 = 24 * MICROS_PER_HOUR;
/// MongoDB's ceiling for bucketMaxSpanSeconds: one year.
pub const MAX_SPAN_MICROS: i64 = 365 * MICROS_PER_DAY;

/// MongoDB's granularity presets and the windows they imply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Granularity {
    Seconds,
    Minutes,
    Hours,
}

impl Granularity {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "seconds" => Some(Granularity::Seconds),
            "minutes" => Some(Granularity::Minutes),
            "hours" => Some(Granularity::Hours),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Granularity::Seconds => "seconds",
            Granularity::Minutes => "minutes",
            Granularity::Hours => "hours",
        }
    }

    pub fn span_micros(self) -> i64 {
        match self {
            Granularity::Seconds => MICROS_PER_HOUR,
            Granularity::Minutes => MICROS_PER_DAY,
            Granularity::Hours => 30 * MICROS_PER_DAY,
        }
    }
}

/// Start of the window holding `t` (both in microseconds since any fixed epoch;
/// Postgres counts from 2000-01-01, so callers shift to Unix time first).
pub fn window_start(t: i64, span: i64) -> i64 {
    assert!(span > 0, "window span must be positive");
    t.div_euclid(span) * span
}

/// Microseconds from the Unix epoch to Postgres's epoch (2000-01-01).
pub const PG_EPOCH_OFFSET_MICROS: i64 = 946_684_800 * MICROS_PER_SECOND;

/// Window start in Postgres time for a Postgres timestamp, aligned on Unix epoch multiples.
pub fn pg_window_start(pg_micros: i64, span: i64) -> i64 {
    let unix = pg_micros.saturating_add(PG_EPOCH_OFFSET_MICROS);
    window_start(unix, span) - PG_EPOCH_OFFSET_MICROS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_granularity_example() {
        // 2024-08-01T18:23:21Z -> [18:00, 19:00)
        let t = 1_722_536_601 * MICROS_PER_SECOND;
        assert_eq!(window_start(t, Granularity::Seconds.span_micros()), 1_722_535_200 * MICROS_PER_SECOND);
    }

    #[test]
    fn four_hour_span_example() {
        // 2023-03-27T16:24:35Z -> [16:00, 20:00)
        let t = 1_679_934_275 * MICROS_PER_SECOND;
        assert_eq!(window_start(t, 4 * MICROS_PER_HOUR), 1_679_932_800 * MICROS_PER_SECOND);
    }

    #[test]
    fn boundaries_and_pre_epoch() {
        let span = MICROS_PER_HOUR;
        assert_eq!(window_start(span, span), span);
        assert_eq!(window_start(span - 1, span), 0);
        assert_eq!(window_start(-1, span), -span);
        assert_eq!(window_start(-span, span), -span);
    }
}
