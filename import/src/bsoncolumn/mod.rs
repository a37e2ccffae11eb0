//! MongoDB's BSONColumn (BSON binary subtype 7): the compressed column of a
//! version-2 or -3 time-series bucket. A column is a sequence of items ended
//! by a 0x00 byte: literals (a BSON element with an empty name), Simple-8b
//! runs of deltas under a control byte, and interleaved sections that split
//! objects and arrays into one stream per leaf of a reference object.
//! Pure Rust; a corrupt column is an error naming the offset and control
//! byte, never a panic.

pub mod column;
mod simple8b;
mod stream;
#[cfg(test)]
pub(crate) mod testenc;
#[cfg(test)]
mod vectors;

pub use column::{decode, describe, ColumnError};
