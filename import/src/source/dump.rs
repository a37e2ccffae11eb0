//! mongodump's directory output: `<db>/<coll>.metadata.json` (the collection's
//! options, among them `timeseries`) beside the data, either the documents
//! (`<coll>.bson`) or, for a time-series collection, its buckets
//! (`system.buckets.<coll>.bson`); with `--gzip` each file gains `.gz`.

use std::fs;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use bson::{Bson, Document};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};
use sha1::{Digest, Sha1};

use super::bsonstream::{BsonSource, Buckets};
use super::{open_stream, Origin, Source, SourceError, TimeseriesOptions};

/// The first four bytes of a `mongodump --archive` (little-endian).
pub const ARCHIVE_MAGIC: u32 = 0x8199_e26d;

/// A collection found in a dump, with its options and the file of its data.
#[derive(Debug, Clone)]
pub struct DumpedCollection {
    pub db: String,
    pub name: String,
    pub options: Option<TimeseriesOptions>,
    pub data: PathBuf,
    /// The data file holds bucket documents.
    pub buckets: bool,
}

fn strip_gz(name: &str) -> &str {
    name.strip_suffix(".gz").unwrap_or(name)
}

/// Reads a metadata.json (maybe gzipped): the collection's options document.
pub fn read_metadata(path: &Path) -> Result<Document, SourceError> {
    Ok(read_metadata_file(path)?.options)
}

/// What a metadata.json says of its collection.
struct Metadata {
    options: Document,
    /// The collection's name as MongoDB spells it (mongodump 100.x writes
    /// it); the file name is only its escaped, maybe shortened, form.
    name: Option<String>,
}

fn read_metadata_file(path: &Path) -> Result<Metadata, SourceError> {
    let origin = Origin { file: path.display().to_string(), offset: 0 };
    let mut text = Vec::new();
    open_stream(&path.display().to_string())
        .and_then(|mut s| std::io::Read::read_to_end(&mut s, &mut text))
        .map_err(|e| SourceError::fatal(origin.clone(), format!("cannot read: {e}")))?;
    let doc = super::json::parse_document(&text, &origin).map_err(|mut e| {
        e.fatal = true;
        e
    })?;
    Ok(Metadata {
        options: match doc.get("options") {
            Some(Bson::Document(o)) => o.clone(),
            _ => Document::new(),
        },
        name: doc.get_str("collectionName").ok().map(str::to_string),
    })
}

/// The characters Go's `url.PathEscape` leaves as they are, which is what
/// mongodump uses to name a collection's files.
const PATH_SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~')
    .remove(b'$')
    .remove(b'&')
    .remove(b'+')
    .remove(b':')
    .remove(b'=')
    .remove(b'@');

/// The stem of the files mongodump writes for collection `name`: its name
/// percent-escaped, and when that is longer than 238 bytes (so that
/// `.metadata.json.gz` still fits in 255), its first 208 bytes, `%24` and the
/// unpadded URL-safe base64 of the name's SHA-1.
pub fn file_stem(name: &str) -> String {
    let escaped = utf8_percent_encode(name, PATH_SEGMENT).to_string();
    if escaped.len() <= 238 {
        return escaped;
    }
    let hash = Sha1::digest(name.as_bytes());
    // The escaped form is ASCII, so any byte index is a char boundary.
    format!("{}%24{}", &escaped[..208], URL_SAFE_NO_PAD.encode(hash))
}

/// A collection's name from its file stem, when its metadata does not say.
pub fn name_of_stem(stem: &str) -> String {
    percent_decode_str(stem).decode_utf8().map_or_else(|_| stem.to_string(), |n| n.into_owned())
}

/// The collections of a dump directory: the directory of one database, or
/// the dump's root holding one directory per database.
pub fn collections(dir: &Path) -> Result<Vec<DumpedCollection>, SourceError> {
    let mut out = Vec::new();
    scan(dir, &mut out)?;
    if out.is_empty() {
        let mut subdirs: Vec<PathBuf> = read_dir(dir)?.into_iter().filter(|p| p.is_dir()).collect();
        subdirs.sort();
        for d in subdirs {
            scan(&d, &mut out)?;
        }
    }
    Ok(out)
}

fn read_dir(dir: &Path) -> Result<Vec<PathBuf>, SourceError> {
    let origin = Origin { file: dir.display().to_string(), offset: 0 };
    let entries = fs::read_dir(dir).map_err(|e| SourceError::fatal(origin.clone(), format!("cannot list the directory: {e}")))?;
    entries
        .map(|e| e.map(|e| e.path()).map_err(|e| SourceError::fatal(origin.clone(), format!("cannot list the directory: {e}"))))
        .collect()
}

fn scan(dir: &Path, out: &mut Vec<DumpedCollection>) -> Result<(), SourceError> {
    let db = dir.file_name().map(|n| name_of_stem(&n.to_string_lossy())).unwrap_or_default();
    let mut files = read_dir(dir)?;
    files.sort();
    for meta in &files {
        let fname = meta.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let Some(stem) = strip_gz(&fname).strip_suffix(".metadata.json") else { continue };
        let md = read_metadata_file(meta)?;
        let name = md.name.unwrap_or_else(|| name_of_stem(stem));
        if name.starts_with("system.buckets.") {
            continue;
        }
        let options = TimeseriesOptions::from_collection_options(&md.options);
        let ext = if fname.ends_with(".gz") { ".bson.gz" } else { ".bson" };
        // Bucket files are named from the escaped `system.buckets.<name>`;
        // a dump whose metadata lacks the name only has the stem to go by.
        let buckets_file = [file_stem(&format!("system.buckets.{name}")), format!("system.buckets.{stem}")]
            .into_iter()
            .map(|s| dir.join(format!("{s}{ext}")))
            .find(|p| p.exists());
        let docs_file = dir.join(format!("{stem}{ext}"));
        let (data, buckets) = match buckets_file {
            Some(b) if options.is_some() => (b, true),
            _ => (docs_file, false),
        };
        out.push(DumpedCollection { db: db.clone(), name, options, data, buckets });
    }
    Ok(())
}

/// Picks the collection to import: the named one, else the only time-series one.
pub fn choose(colls: Vec<DumpedCollection>, name: Option<&str>, dir: &Path) -> Result<DumpedCollection, SourceError> {
    let origin = Origin { file: dir.display().to_string(), offset: 0 };
    let names = || colls.iter().map(|c| format!("{}.{}", c.db, c.name)).collect::<Vec<_>>().join(", ");
    if let Some(n) = name {
        let (db, coll) = n.rsplit_once('.').map_or((None, n), |(d, c)| (Some(d), c));
        let found: Vec<&DumpedCollection> = colls.iter().filter(|c| c.name == coll && db.is_none_or(|d| d == c.db)).collect();
        return match found.as_slice() {
            [one] => Ok((*one).clone()),
            [] => Err(SourceError::fatal(origin, format!("no collection \"{n}\" in the dump (it has: {})", names()))),
            _ => Err(SourceError::fatal(origin, format!("collection \"{n}\" is in several databases; name it as db.collection"))),
        };
    }
    let ts: Vec<&DumpedCollection> = colls.iter().filter(|c| c.options.is_some()).collect();
    match ts.as_slice() {
        [one] => Ok((*one).clone()),
        [] => Err(SourceError::fatal(origin, format!("no time-series collection in the dump (it has: {}); name one with --collection", names()))),
        _ => Err(SourceError::fatal(origin, format!("several time-series collections in the dump ({}); name one with --collection", names()))),
    }
}

/// The reader of a dumped collection's data.
pub fn open(coll: &DumpedCollection, options: &TimeseriesOptions) -> Result<Box<dyn Source>, SourceError> {
    let name = coll.data.display().to_string();
    let input = open_stream(&name).map_err(|e| SourceError::fatal(Origin { file: name.clone(), offset: 0 }, format!("cannot open: {e}")))?;
    let buckets = coll.options.is_some().then(|| Buckets {
        time_field: options.time_field.clone(),
        meta_field: options.meta_field.clone(),
        strict: coll.buckets,
    });
    Ok(Box::new(BsonSource::new(input, name, buckets)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_stems_are_mongodumps() {
        // Go's url.PathEscape: `/`, `;`, `,`, `?`, space, `%` and non-ASCII
        // bytes escaped (upper-case hex); `$&+:=@` and `-_.~` kept.
        assert_eq!(file_stem("weather"), "weather");
        assert_eq!(file_stem("a/b c%d;e,f?g"), "a%2Fb%20c%25d%3Be%2Cf%3Fg");
        assert_eq!(file_stem("x$&+:=@-_.~y"), "x$&+:=@-_.~y");
        assert_eq!(file_stem("température"), "temp%C3%A9rature");
        assert_eq!(name_of_stem(&file_stem("a/b c%d é")), "a/b c%d é");
        let long = "é".repeat(60);
        let stem = file_stem(&long);
        assert_eq!(stem.len(), 208 + 3 + 27);
        assert_eq!(&stem[208..211], "%24");
        // sha1("abc") in unpadded URL-safe base64, the known test vector.
        assert_eq!(URL_SAFE_NO_PAD.encode(Sha1::digest(b"abc")), "qZk-NkcGgWq6PiVxeFDCbJzQ2J0");
    }
}
