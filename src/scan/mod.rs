//! TsBucketScan, the custom scan that reads every time-series table.
//!
//! Planning: `path` makes its paths (plain, time-ordered, series-ordered,
//! parameterized, parallel, last point) and their plan nodes, whose data
//! `plan` defines. Executing: `exec` (the method tables, begin, rows out,
//! rescan, end) over `state`, with `quals` (pruning conditions from the plan),
//! `parallel` (shared memory) and `explain`. The readers: `plain` (buckets in
//! store or index order, also the table AM's sequential scan), `ordered`
//! (rows merged in time or series order), `last_point` (a skip scan of the
//! series index), `aggregating` (partial aggregates per bucket and group,
//! what to compute from `agg_plan`), over `access` (which index ranges),
//! `prune` (bucket and row bounds), `vector_filter` (conditions on decoded
//! arrays) and `time_bucket` (expressions monotone in time).

pub mod access;
pub mod agg_plan;
pub mod aggregating;
pub mod doc_keys;
pub mod exec;
pub mod explain;
pub mod last_point;
pub mod ordered;
pub mod parallel;
pub mod path;
pub mod plain;
pub mod plan;
pub mod project;
pub mod prune;
pub mod quals;
pub mod series;
pub mod state;
pub mod time_bucket;
pub mod vector_filter;
