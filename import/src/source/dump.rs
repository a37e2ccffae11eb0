//! mongodump's directory output: `<db>/<coll>.metadata.json` (the collection's
//! options, among them `timeseries`) beside the data, either the documents
//! (`<coll>.bson`) or, for a time-series collection, its buckets
//! (`system.buckets.<coll>.bson`); with `--gzip` each file gains `.gz`.

use std::fs;
use std::path::{Path, PathBuf};

use bson::{Bson, Document};

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
    let origin = Origin { file: path.display().to_string(), offset: 0 };
    let mut text = Vec::new();
    open_stream(&path.display().to_string())
        .and_then(|mut s| std::io::Read::read_to_end(&mut s, &mut text))
        .map_err(|e| SourceError::fatal(origin.clone(), format!("cannot read: {e}")))?;
    let doc = super::json::parse_document(&text, &origin).map_err(|mut e| {
        e.fatal = true;
        e
    })?;
    Ok(match doc.get("options") {
        Some(Bson::Document(o)) => o.clone(),
        _ => Document::new(),
    })
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
    let db = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let mut files = read_dir(dir)?;
    files.sort();
    for meta in &files {
        let fname = meta.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let Some(coll) = strip_gz(&fname).strip_suffix(".metadata.json") else { continue };
        if coll.starts_with("system.buckets.") {
            continue;
        }
        let options = TimeseriesOptions::from_collection_options(&read_metadata(meta)?);
        let gz = fname.ends_with(".gz");
        let ext = if gz { ".bson.gz" } else { ".bson" };
        let buckets_file = dir.join(format!("system.buckets.{coll}{ext}"));
        let docs_file = dir.join(format!("{coll}{ext}"));
        let (data, buckets) = if options.is_some() && buckets_file.exists() { (buckets_file, true) } else { (docs_file, false) };
        out.push(DumpedCollection { db: db.clone(), name: coll.to_string(), options, data, buckets });
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
