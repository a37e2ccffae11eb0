//! Runs of rows in one time bucket (`date_trunc('hour', time)` and the like).
//!
//! The group key is a function of the time alone that never decreases as time
//! grows; PostgreSQL computes it (time zones, calendars), and calling it costs
//! a function call. Over times in ascending order the rows of one key form a
//! run, so a run's end is found by probing a few rows: first where the
//! previous run's length says it ends, then by galloping and bisection.
//! Typically two calls per run, whatever its length.

/// The runs of `times` (ascending) under `key`: (first, last + 1, key).
/// `key` must never decrease as its argument grows.
pub fn runs<K: PartialEq + Copy, E>(times: &[i64], mut key: impl FnMut(i64) -> Result<K, E>) -> Result<Vec<(usize, usize, K)>, E> {
    debug_assert!(times.windows(2).all(|w| w[0] <= w[1]));
    let mut out = Vec::new();
    let n = times.len();
    let mut start = 0;
    let mut guess = 1usize;
    while start < n {
        let k = key(times[start])?;
        let mut same = |i: usize| -> Result<bool, E> { Ok(times[i] == times[start] || key(times[i])? == k) };
        // Invariant: row `lo` has key k; row `hi` (when < n) does not.
        let mut lo = start;
        let mut hi;
        let probe = (start + guess - 1).min(n - 1);
        if probe > start && !same(probe)? {
            hi = probe;
        } else {
            lo = probe;
            hi = lo + 1;
            let mut step = guess.max(1);
            while hi < n && same(hi)? {
                lo = hi;
                hi = (lo + step).min(n);
                step *= 2;
            }
            // Either hi == n or row hi differs; rows up to lo share k.
            if hi == n && lo < n - 1 && same(n - 1)? {
                lo = n - 1;
            }
        }
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if same(mid)? { lo = mid } else { hi = mid }
        }
        out.push((start, lo + 1, k));
        guess = lo + 1 - start;
        start = lo + 1;
    }
    Ok(out)
}
