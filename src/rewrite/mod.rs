//! Planner-hook plan rewrites and upper paths over TsBucketScan: aggregation
//! computed inside the scan (`partial_agg`), hashed grouping by a time bucket
//! with a real group estimate (`grouping`), last points per series
//! (`last_point`). They build on the scan's path and plan constructors.

pub mod grouping;
pub mod last_point;
pub mod partial_agg;
