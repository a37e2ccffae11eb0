//! Column codecs, one per storage kind.
pub mod bytes;
pub mod document;
pub mod float;
pub mod int;
