//! `mongodump --archive` (gunzipped first when `--gzip` wrapped it): a magic
//! number, a prelude (a header document, one metadata document per
//! collection, a terminator), then blocks of one namespace each: a namespace
//! header, documents, a terminator (0xFFFFFFFF where a length would be).
//! Collections interleave; a collection ends with a header whose `EOF` is
//! true and whose `CRC` is the CRC-64/XZ of all its documents' bytes.

use std::io::{BufRead, Read};

use bson::{Bson, Document};
use crc::{Crc, Digest, Table, CRC_64_XZ};

use super::bsonstream::{self, Buckets};
use super::dump::ARCHIVE_MAGIC;
use super::{open_stream, Origin, Parser, Record, Source, SourceError, TimeseriesOptions};

/// Sliced by 16: the checksum runs on the reader thread (and in the first pass) over every byte.
pub(crate) static CRC64: Crc<u64, Table<16>> = Crc::<u64, Table<16>>::new(&CRC_64_XZ);

const TERMINATOR: u32 = 0xFFFF_FFFF;

enum Item {
    End,
    Terminator,
    Document(Vec<u8>),
}

fn read_item(input: &mut dyn BufRead, origin: &Origin) -> Result<Item, SourceError> {
    let mut len = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        match input.read(&mut len[got..]) {
            Ok(0) if got == 0 => return Ok(Item::End),
            Ok(0) => return Err(SourceError::fatal(origin.clone(), "the archive ends inside a length (truncated?)")),
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(SourceError::fatal(origin.clone(), format!("cannot read: {e}"))),
        }
    }
    if u32::from_le_bytes(len) == TERMINATOR {
        return Ok(Item::Terminator);
    }
    let n = i32::from_le_bytes(len);
    if n < 5 || n as usize > bsonstream::MAX_DOCUMENT {
        return Err(SourceError::fatal(origin.clone(), format!("a document length of {n} bytes in the archive (corrupt?)")));
    }
    let mut bytes = vec![0u8; n as usize];
    bytes[..4].copy_from_slice(&len);
    input.read_exact(&mut bytes[4..]).map_err(|e| {
        let m = if e.kind() == std::io::ErrorKind::UnexpectedEof { "the archive ends inside a document (truncated?)".to_string() } else { format!("cannot read: {e}") };
        SourceError::fatal(origin.clone(), m)
    })?;
    Ok(Item::Document(bytes))
}

fn text(d: &Document, k: &str) -> String {
    match d.get(k) {
        Some(Bson::String(s)) => s.clone(),
        _ => String::new(),
    }
}

/// A collection named in the archive's prelude.
#[derive(Debug, Clone)]
struct Listed {
    db: String,
    name: String,
    options: Option<TimeseriesOptions>,
}

enum State {
    Between,
    Body { ours: bool },
    Done,
}

pub struct ArchiveSource {
    input: Box<dyn BufRead + Send>,
    name: String,
    offset: u64,
    db: String,
    coll: String,
    buckets: Option<Buckets>,
    state: State,
    crc: Digest<'static, u64, Table<16>>,
}

impl ArchiveSource {
    /// Reads the collection's documents as a time-series collection's (buckets unpacked).
    pub fn with_options(mut self, o: &TimeseriesOptions) -> Box<dyn Source> {
        self.buckets = Some(Buckets { time_field: o.time_field.clone(), meta_field: o.meta_field.clone(), strict: false });
        Box::new(self)
    }

    fn origin(&self) -> Origin {
        Origin { file: self.name.clone(), offset: self.offset }
    }

    fn item(&mut self) -> Result<Item, SourceError> {
        let origin = self.origin();
        let item = read_item(&mut *self.input, &origin);
        match &item {
            Ok(Item::Terminator) => self.offset += 4,
            Ok(Item::Document(b)) => self.offset += b.len() as u64,
            _ => {}
        }
        item
    }

    fn fail(&mut self, e: SourceError) -> Option<Result<Record, SourceError>> {
        self.state = State::Done;
        Some(Err(e))
    }

    fn ours(&self, db: &str, coll: &str) -> bool {
        db == self.db && (coll == self.coll || coll.strip_prefix("system.buckets.") == Some(self.coll.as_str()))
    }
}

impl Source for ArchiveSource {
    fn next_record(&mut self) -> Option<Result<Record, SourceError>> {
        loop {
            let origin = self.origin();
            match self.state {
                State::Done => return None,
                State::Between => match self.item() {
                    Err(e) => return self.fail(e),
                    Ok(Item::End) => {
                        let m = format!("the archive ends before the end of collection {}.{} (truncated?)", self.db, self.coll);
                        return self.fail(SourceError::fatal(origin, m));
                    }
                    Ok(Item::Terminator) => return self.fail(SourceError::fatal(origin, "a terminator where a namespace header belongs")),
                    Ok(Item::Document(bytes)) => {
                        let h = match bsonstream::parse(&bytes, &origin) {
                            Ok(h) => h,
                            Err(mut e) => {
                                e.fatal = true;
                                return self.fail(e);
                            }
                        };
                        let ours = self.ours(&text(&h, "db"), &text(&h, "collection"));
                        if h.get_bool("EOF").unwrap_or(false) {
                            if ours {
                                let want = match h.get("CRC") {
                                    Some(Bson::Int64(c)) => Some(*c as u64),
                                    _ => None,
                                };
                                let got = std::mem::replace(&mut self.crc, CRC64.digest()).finalize();
                                self.state = State::Done;
                                if let Some(w) = want
                                    && w != got
                                {
                                    let m = format!("the checksum of collection {}.{} is {got:#018x}, the archive says {w:#018x} (corrupt)", self.db, self.coll);
                                    return Some(Err(SourceError::fatal(origin, m)));
                                }
                                return None;
                            }
                            match self.item() {
                                Ok(Item::Terminator) => {}
                                Ok(_) => return self.fail(SourceError::fatal(origin, "no terminator after a namespace's end")),
                                Err(e) => return self.fail(e),
                            }
                        } else {
                            self.state = State::Body { ours };
                        }
                    }
                },
                State::Body { ours } => match self.item() {
                    Err(e) => return self.fail(e),
                    Ok(Item::End) => return self.fail(SourceError::fatal(origin, "the archive ends inside a block (truncated?)")),
                    Ok(Item::Terminator) => self.state = State::Between,
                    Ok(Item::Document(bytes)) if ours => {
                        self.crc.update(&bytes);
                        return Some(Ok(Record { origin, bytes }));
                    }
                    Ok(Item::Document(_)) => {}
                },
            }
        }
    }

    fn parser(&self) -> Parser {
        Parser::Bson(self.buckets.clone())
    }

}

/// Reads the chosen collection through to its end and checks its CRC, so a
/// corrupt archive file is refused before any of its rows commit. (Standard
/// input cannot be read twice: there the CRC is checked when the collection
/// ends, after the batches before it committed.)
pub fn verify(path: &str, collection: Option<&str>) -> Result<(), SourceError> {
    let (mut source, ..) = open(path, collection)?;
    while let Some(r) = source.next_record() {
        r?;
    }
    Ok(())
}

/// Opens an archive and reads its prelude: the chosen collection (named, or
/// the only time-series one), its options, its database and name.
pub fn open(path: &str, collection: Option<&str>) -> Result<(ArchiveSource, Option<TimeseriesOptions>, String, String), SourceError> {
    let at = |offset| Origin { file: path.to_string(), offset };
    let mut input = open_stream(path).map_err(|e| SourceError::fatal(at(0), format!("cannot open: {e}")))?;
    let mut magic = [0u8; 4];
    input
        .read_exact(&mut magic)
        .map_err(|_| SourceError::fatal(at(0), "too short to be a mongodump archive"))?;
    if u32::from_le_bytes(magic) != ARCHIVE_MAGIC {
        return Err(SourceError::fatal(at(0), "not a mongodump archive (its first bytes are not the archive's magic number)"));
    }
    let mut offset = 4u64;
    let mut listed = Vec::new();
    let mut first = true;
    loop {
        let origin = at(offset);
        match read_item(&mut *input, &origin)? {
            Item::End => return Err(SourceError::fatal(origin, "the archive ends inside its prelude (truncated?)")),
            Item::Terminator => {
                offset += 4;
                break;
            }
            Item::Document(bytes) => {
                offset += bytes.len() as u64;
                let d = bsonstream::parse(&bytes, &origin).map_err(|mut e| {
                    e.fatal = true;
                    e
                })?;
                if first {
                    first = false;
                    continue;
                }
                let meta = text(&d, "metadata");
                let options = if meta.is_empty() {
                    None
                } else {
                    let m = super::json::parse_document(meta.as_bytes(), &origin).map_err(|mut e| {
                        e.fatal = true;
                        e
                    })?;
                    match m.get("options") {
                        Some(Bson::Document(o)) => TimeseriesOptions::from_collection_options(o),
                        _ => None,
                    }
                };
                listed.push(Listed { db: text(&d, "db"), name: text(&d, "collection"), options });
            }
        }
    }
    let names = || listed.iter().map(|c| format!("{}.{}", c.db, c.name)).collect::<Vec<_>>().join(", ");
    let chosen: Vec<&Listed> = match collection {
        Some(n) => {
            let (db, coll) = n.rsplit_once('.').map_or((None, n), |(d, c)| (Some(d), c));
            listed.iter().filter(|c| c.name == coll && db.is_none_or(|d| d == c.db)).collect()
        }
        None => listed.iter().filter(|c| c.options.is_some()).collect(),
    };
    let c = match chosen.as_slice() {
        [one] => (*one).clone(),
        [] => {
            let m = match collection {
                Some(n) => format!("no collection \"{n}\" in the archive (it has: {})", names()),
                None => format!("no time-series collection in the archive (it has: {}); name one with --collection", names()),
            };
            return Err(SourceError::fatal(at(0), m));
        }
        _ => return Err(SourceError::fatal(at(0), format!("several collections match in the archive ({}); name one as db.collection", names()))),
    };
    let source = ArchiveSource {
        input,
        name: path.to_string(),
        offset,
        db: c.db.clone(),
        coll: c.name.clone(),
        buckets: None,
        state: State::Between,
        crc: CRC64.digest(),
    };
    Ok((source, c.options, c.db, c.name))
}
