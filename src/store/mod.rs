//! The bucket store: an ordinary heap table beside each time-series table,
//! one row per bucket, with its id sequence and moves table. Postgres gives
//! it WAL, MVCC, TOAST and VACUUM; this folder is the only code that reads or
//! writes its tuples. It reports buckets written (`insert::take_buckets_written`)
//! to whoever asks at transaction end, and knows nothing of who that is.
//!
//! From the bottom up: `bucket` (the tuple's columns and what a bucket is),
//! `tid` (row identifiers), `slot` (the table's tuple slot), `tuple` (one
//! tuple decoded, or found by id), `reader` (walks over the store), `locks`,
//! `moves` (where rewritten rows went), `ids` (bucket ids), `insert` (the
//! writer), `rows` (decoded buckets into rows), `meta_values`; and the tail,
//! where rows a transaction left in under-filled buckets wait, row by row,
//! for a drain: `tail` (its segments, writing and reading them) and
//! `tail_rows` (one tail row by TID).

pub mod bucket;
pub mod ids;
pub mod insert;
pub mod locks;
pub mod meta_values;
pub mod moves;
pub mod rows;
pub mod reader;
pub mod slot;
pub mod tail;
pub mod tail_rows;
pub mod tid;
pub mod tuple;
