//! Column codecs, one per storage kind.
pub mod bytes;
pub mod float;
pub mod int;
