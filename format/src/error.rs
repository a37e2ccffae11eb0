use std::fmt;

/// Why a payload could not be decoded. Decoding never panics: a corrupt bucket
/// must surface as an error the backend can report, not as a crash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    Truncated(&'static str),
    UnsupportedVersion(u8),
    UnknownTag { what: &'static str, tag: u8 },
    Invalid(&'static str),
    TooLarge(&'static str),
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Truncated(what) => write!(f, "bucket payload truncated while reading {what}"),
            DecodeError::UnsupportedVersion(v) => write!(f, "bucket payload version {v} is not supported"),
            DecodeError::UnknownTag { what, tag } => write!(f, "unknown {what} tag {tag} in bucket payload"),
            DecodeError::Invalid(what) => write!(f, "invalid bucket payload: {what}"),
            DecodeError::TooLarge(what) => write!(f, "bucket payload declares an implausibly large {what}"),
        }
    }
}

impl std::error::Error for DecodeError {}

pub type Result<T> = std::result::Result<T, DecodeError>;
