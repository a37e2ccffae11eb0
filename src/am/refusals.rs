//! What the table access method refuses, and the hints it gives.

use crate::pg::error::{FEATURE_NOT_SUPPORTED, ts_error};

pub(super) fn unsupported(what: &str, hint: &str) -> ! {
    ts_error(FEATURE_NOT_SUPPORTED, &format!("{what} is not supported on time-series tables"), hint)
}

/// tsbucket's planner replaces every partial path over a time-series table
/// with a parallel TsBucketScan: only another extension's paths get here.
pub(super) const PARALLEL_HINT: &str = "Parallel plans read tsbucket tables through TsBucketScan; SET max_parallel_workers_per_gather = 0 to plan without parallel workers.";

pub(super) const INDEX_HINT: &str = "Queries that filter on the meta and time columns read only the buckets they need; no index is required.";
