//! Inputs: what `mongoexport` and `mongodump` write, read into units of
//! measurement documents. A unit is what one source record holds (a document,
//! or a bucket's measurements); batches hold whole units, so that a resumed
//! import counts units to find where it stopped.

pub mod archive;
pub mod bucket;
pub mod decimal;
pub mod bsonstream;
pub mod dump;
pub mod json;
pub mod measurement;
pub mod options;

use std::fmt;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;

use bsonstream::Buckets;
use measurement::Keys;
pub use measurement::Measurement;
pub use options::TimeseriesOptions;

/// Where a record starts: the file and the byte offset in its (decompressed) stream.
#[derive(Debug, Clone, PartialEq)]
pub struct Origin {
    pub file: String,
    pub offset: u64,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}, offset {}", self.file, self.offset)
    }
}

/// Bad input. `fatal` when reading cannot go on past it (a truncated file, a
/// length that does not frame a document): `--skip-invalid` skips only the rest.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceError {
    pub origin: Origin,
    pub field: Option<String>,
    pub message: String,
    pub fatal: bool,
}

impl fmt::Display for SourceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.origin)?;
        if let Some(field) = &self.field {
            write!(f, ", field \"{field}\"")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for SourceError {}

impl SourceError {
    pub fn new(origin: Origin, message: impl Into<String>) -> SourceError {
        SourceError { origin, field: None, message: message.into(), fatal: false }
    }
    pub fn fatal(origin: Origin, message: impl Into<String>) -> SourceError {
        SourceError { origin, field: None, message: message.into(), fatal: true }
    }
    pub fn at_field(mut self, field: impl Into<String>) -> SourceError {
        self.field = Some(field.into());
        self
    }
}

/// One source record's measurements.
#[derive(Debug, Clone)]
pub struct Unit {
    pub origin: Origin,
    pub docs: Vec<Measurement>,
}

/// One source record's bytes, as read: a JSON value's text, or a BSON
/// document (parsed by a `Parser`, on whichever thread has time).
#[derive(Debug, Clone)]
pub struct Record {
    pub origin: Origin,
    pub bytes: Vec<u8>,
}

/// How a source's records become units.
#[derive(Debug, Clone)]
pub enum Parser {
    /// Extended JSON text.
    Json,
    /// A BSON document; with bucket options, a bucket's measurements.
    Bson(Option<Buckets>),
}

impl Parser {
    pub fn parse(&self, r: &Record, keys: &mut Keys) -> Result<Unit, SourceError> {
        match self {
            Parser::Json => json::parse_measurement(&r.bytes, &r.origin, keys).map(|m| Unit { origin: r.origin.clone(), docs: vec![m] }),
            Parser::Bson(b) => bsonstream::unit_of(&r.bytes, r.origin.clone(), b.as_ref(), keys),
        }
    }
}

/// A reader of records, in a fixed order (a resumed import skips as many as
/// the last committed batch had read).
pub trait Source: Send {
    fn next_record(&mut self) -> Option<Result<Record, SourceError>>;
    /// What turns this source's records into units.
    fn parser(&self) -> Parser;
    /// Passes over the next record (one an earlier run committed).
    fn skip_unit(&mut self) -> Option<Result<(), SourceError>> {
        self.next_record().map(|r| r.map(|_| ()))
    }
}

/// What a path (or `-`) holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// mongoexport: Extended JSON, one document per line or a `--jsonArray`.
    Json,
    /// A stream of BSON documents (`<coll>.bson`, or `system.buckets.<coll>.bson`).
    Bson,
    /// A mongodump directory (of a database, or holding databases).
    Dump,
    /// `mongodump --archive`.
    Archive,
}


/// A byte stream, gunzipped when its first bytes are gzip's magic number.
pub fn open_stream(path: &str) -> io::Result<Box<dyn BufRead + Send>> {
    let raw: Box<dyn Read + Send> = if path == "-" { Box::new(io::stdin()) } else { Box::new(File::open(path)?) };
    let mut buf = BufReader::with_capacity(1 << 20, raw);
    let head = buf.fill_buf()?;
    if head.len() >= 2 && head[0] == 0x1f && head[1] == 0x8b {
        Ok(Box::new(BufReader::with_capacity(1 << 20, flate2::bufread::MultiGzDecoder::new(buf))))
    } else {
        Ok(Box::new(buf))
    }
}

/// Guesses the kind of a path: a directory is a dump; a file by its name,
/// else by its first bytes (an archive's magic number, `{`/`[` for JSON).
pub fn detect(path: &str) -> io::Result<Kind> {
    if path != "-" && Path::new(path).is_dir() {
        return Ok(Kind::Dump);
    }
    let name = path.trim_end_matches(".gz");
    if name.ends_with(".bson") {
        return Ok(Kind::Bson);
    }
    if name.ends_with(".json") || name.ends_with(".jsonl") {
        return Ok(Kind::Json);
    }
    if name.ends_with(".archive") {
        return Ok(Kind::Archive);
    }
    if path == "-" {
        // Standard input cannot be peeked and reopened: JSON unless told.
        return Ok(Kind::Json);
    }
    let mut s = open_stream(path)?;
    let head = s.fill_buf()?;
    if head.len() >= 4 && u32::from_le_bytes([head[0], head[1], head[2], head[3]]) == dump::ARCHIVE_MAGIC {
        return Ok(Kind::Archive);
    }
    match head.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'{') | Some(b'[') => Ok(Kind::Json),
        _ => Ok(Kind::Bson),
    }
}

/// The next record, parsed here (for sampling, and tests).
pub fn next_unit(src: &mut dyn Source, keys: &mut Keys) -> Option<Result<Unit, SourceError>> {
    let parser = src.parser();
    src.next_record().map(|r| r.and_then(|r| parser.parse(&r, keys)))
}
