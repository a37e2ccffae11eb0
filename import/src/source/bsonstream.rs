//! A stream of BSON documents as mongodump writes a collection: each one its
//! little-endian int32 length, then its bytes. Documents of a time-series
//! collection's bucket namespace are unpacked into their measurements.

use std::io::BufRead;

use bson::{Document, RawDocument};

use super::bucket;
use crate::bsoncolumn::column::{nesting_within, MAX_NESTING};
use super::measurement::{self, Keys};
use super::{Origin, Parser, Record, Source, SourceError, Unit};

/// MongoDB refuses documents over 16 MiB; buckets get a little headroom.
pub const MAX_DOCUMENT: usize = 16 * 1024 * 1024 + 16 * 1024;

pub struct BsonSource {
    input: Box<dyn BufRead + Send>,
    name: String,
    offset: u64,
    buckets: Option<Buckets>,
    done: bool,
}

impl BsonSource {
    pub fn new(input: Box<dyn BufRead + Send>, name: String, buckets: Option<Buckets>) -> BsonSource {
        BsonSource { input, name, offset: 0, buckets, done: false }
    }
}

/// How to read the documents of a time-series collection's dump: mongodump
/// writes buckets (named `system.buckets.<coll>` before MongoDB 8.3, `<coll>`
/// after), tools before 100.4 wrote measurements.
#[derive(Debug, Clone)]
pub struct Buckets {
    pub time_field: String,
    pub meta_field: Option<String>,
    /// Every document must be a bucket (the bucket namespace); else a document
    /// shaped as a bucket is one and any other a measurement.
    pub strict: bool,
}

/// A framed document's measurements: a bucket's, or the document itself.
pub fn unit_of(bytes: &[u8], origin: Origin, buckets: Option<&Buckets>, keys: &mut Keys) -> Result<Unit, SourceError> {
    if bytes.last() != Some(&0) {
        return Err(SourceError::new(origin, "the document does not end with a NUL byte (corrupt BSON)"));
    }
    if !nesting_within(bytes, MAX_NESTING) {
        return Err(SourceError::new(origin, format!("objects nested deeper than {MAX_NESTING} levels (MongoDB stores at most 100)")));
    }
    let raw = RawDocument::from_bytes(bytes).map_err(|e| SourceError::new(origin.clone(), format!("not valid BSON: {e}")))?;
    match buckets {
        Some(b) if b.strict || bucket::is_bucket(raw, &b.time_field) => bucket::unpack(raw, &b.time_field, b.meta_field.as_deref(), keys)
            .map(|docs| Unit { origin: origin.clone(), docs })
            .map_err(|e| e.at(origin)),
        _ => measurement::from_raw(raw, keys)
            .map(|m| Unit { origin: origin.clone(), docs: vec![m] })
            .map_err(|e| SourceError::new(origin, e)),
    }
}

/// Reads one framed document's bytes; `Ok(None)` at a clean end of stream.
pub fn read_framed(input: &mut dyn BufRead, origin: &Origin) -> Result<Option<Vec<u8>>, SourceError> {
    let mut len = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        match input.read(&mut len[got..]) {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => return Err(SourceError::fatal(origin.clone(), "the file ends inside a document's length (truncated?)")),
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(SourceError::fatal(origin.clone(), format!("cannot read: {e}"))),
        }
    }
    let n = i32::from_le_bytes(len);
    if n < 5 || n as usize > MAX_DOCUMENT {
        return Err(SourceError::fatal(origin.clone(), format!("a document length of {n} bytes is not a BSON document's (wrong file type, or corrupt)")));
    }
    let mut bytes = vec![0u8; n as usize];
    bytes[..4].copy_from_slice(&len);
    if let Err(e) = input.read_exact(&mut bytes[4..]) {
        let what = if e.kind() == std::io::ErrorKind::UnexpectedEof { "the file ends inside a document (truncated?)".to_string() } else { format!("cannot read: {e}") };
        return Err(SourceError::fatal(origin.clone(), what));
    }
    Ok(Some(bytes))
}

/// Parses a framed document; a malformed one is an error of its own (the
/// framing still holds, so reading can go on).
pub fn parse(bytes: &[u8], origin: &Origin) -> Result<Document, SourceError> {
    if bytes.last() != Some(&0) {
        return Err(SourceError::new(origin.clone(), "the document does not end with a NUL byte (corrupt BSON)"));
    }
    Document::from_reader(bytes).map_err(|e| SourceError::new(origin.clone(), format!("not valid BSON: {e}")))
}

impl Source for BsonSource {
    fn next_record(&mut self) -> Option<Result<Record, SourceError>> {
        if self.done {
            return None;
        }
        let origin = Origin { file: self.name.clone(), offset: self.offset };
        let bytes = match read_framed(&mut *self.input, &origin) {
            Ok(Some(b)) => b,
            Ok(None) => {
                self.done = true;
                return None;
            }
            Err(e) => {
                self.done = true;
                return Some(Err(e));
            }
        };
        self.offset += bytes.len() as u64;
        Some(Ok(Record { origin, bytes }))
    }

    fn parser(&self) -> Parser {
        Parser::Bson(self.buckets.clone())
    }

    fn skip_unit(&mut self) -> Option<Result<(), SourceError>> {
        if self.done {
            return None;
        }
        let origin = Origin { file: self.name.clone(), offset: self.offset };
        match read_framed(&mut *self.input, &origin) {
            Ok(Some(b)) => {
                self.offset += b.len() as u64;
                Some(Ok(()))
            }
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }

}
