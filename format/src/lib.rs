//! tsbucket's storage format, free of Postgres: window arithmetic, column
//! codecs, bucket payloads and per-column statistics. Everything here is plain
//! Rust so it can be unit-, property- and fuzz-tested without a server.

pub mod bits;
pub mod bucket;
pub mod codec;
pub mod column;
pub mod error;
pub mod jsonb;
pub mod merge_plan;
pub mod row;
pub mod stats;
pub mod window;

pub use bucket::{encode_bucket, prefix_len, BucketReader, FORMAT_VERSION, MAX_BUCKET_ROWS};
pub use column::{ByteValues, Column, ColumnKind, Values};
pub use error::DecodeError;
