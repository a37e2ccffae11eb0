//! A time-series collection's bucket document (`system.buckets.<coll>`) back
//! into its measurements: `control` (version, min, max), `meta`, and per field
//! `data.<field>`, which is an object keyed by row index in version 1 (a key
//! absent: the field absent from that measurement) and a BSONColumn binary
//! (subtype 7) in versions 2 and 3.

use bson::{Bson, Document};

use super::{Origin, SourceError};
use crate::bsoncolumn::column::decode as decode_column;

#[derive(Debug, Clone, PartialEq)]
pub struct BucketError {
    pub field: Option<String>,
    pub message: String,
}

impl BucketError {
    fn field(field: &str, message: impl Into<String>) -> BucketError {
        BucketError { field: Some(field.to_string()), message: message.into() }
    }
    pub fn at(self, origin: Origin) -> SourceError {
        let e = SourceError::new(origin, self.message);
        match self.field {
            Some(f) => e.at_field(f),
            None => e,
        }
    }
}

/// Whether a document looks like a bucket (so that a dump of the bucket
/// namespace under another name is still read right).
pub fn is_bucket(doc: &Document) -> bool {
    matches!(doc.get("control"), Some(Bson::Document(_))) && matches!(doc.get("data"), Some(Bson::Document(_)))
}

/// The measurements of one bucket, in row order.
pub fn unpack(bucket: &Document, time_field: &str, meta_field: Option<&str>) -> Result<Vec<Document>, BucketError> {
    let control = match bucket.get("control") {
        Some(Bson::Document(c)) => c,
        _ => return Err(BucketError::field("control", "a bucket document without its control object")),
    };
    let version = match control.get("version") {
        Some(Bson::Int32(v)) => *v,
        Some(Bson::Int64(v)) => *v as i32,
        Some(Bson::Double(v)) => *v as i32,
        _ => return Err(BucketError::field("control.version", "a bucket without a control.version")),
    };
    let data = match bucket.get("data") {
        Some(Bson::Document(d)) => d,
        _ => return Err(BucketError::field("data", "a bucket document without its data object")),
    };
    let columns: Vec<(String, Vec<Option<Bson>>)> = match version {
        1 => data.iter().map(|(k, v)| Ok((k.clone(), v1_column(k, v)?))).collect::<Result<_, BucketError>>()?,
        2 | 3 => data.iter().map(|(k, v)| Ok((k.clone(), compressed_column(k, v)?))).collect::<Result<_, BucketError>>()?,
        v => return Err(BucketError::field("control.version", format!("bucket version {v} is unknown (MongoDB writes 1, 2 and 3)"))),
    };
    let count = match columns.iter().find(|(k, _)| k == time_field) {
        Some((_, t)) => t.len(),
        None => return Err(BucketError::field(&format!("data.{time_field}"), "a bucket without its time field's data")),
    };
    let meta = meta_field.and_then(|m| bucket.get("meta").map(|v| (m, v)));
    let mut rows = Vec::with_capacity(count);
    for _ in 0..count {
        let mut d = Document::new();
        if let Some((name, value)) = meta {
            d.insert(name, value.clone());
        }
        rows.push(d);
    }
    for (name, values) in columns {
        if values.len() > count {
            return Err(BucketError::field(
                &format!("data.{name}"),
                format!("{} values, more than the {count} measurements of the time field", values.len()),
            ));
        }
        for (row, v) in rows.iter_mut().zip(values) {
            if let Some(v) = v {
                row.insert(name.clone(), v);
            }
        }
    }
    Ok(rows)
}

/// Version 1: an object keyed "0", "1", ... (keys may be absent).
fn v1_column(name: &str, v: &Bson) -> Result<Vec<Option<Bson>>, BucketError> {
    let Bson::Document(d) = v else {
        return Err(BucketError::field(&format!("data.{name}"), "a version-1 bucket's field is not an object keyed by row"));
    };
    let mut out: Vec<Option<Bson>> = Vec::with_capacity(d.len());
    for (k, v) in d {
        let i: usize = k
            .parse()
            .ok()
            .filter(|i: &usize| k == &i.to_string() && *i < 1_000_000)
            .ok_or_else(|| BucketError::field(&format!("data.{name}.{k}"), "a row key that is not a row index"))?;
        if out.len() <= i {
            out.resize(i + 1, None);
        }
        if out[i].is_some() {
            return Err(BucketError::field(&format!("data.{name}.{k}"), "a row index given twice"));
        }
        out[i] = Some(v.clone());
    }
    Ok(out)
}

/// Versions 2 and 3: a BSONColumn binary.
fn compressed_column(name: &str, v: &Bson) -> Result<Vec<Option<Bson>>, BucketError> {
    match v {
        Bson::Binary(b) if u8::from(b.subtype) == 7 => decode_column(&b.bytes)
            .map_err(|e| BucketError::field(&format!("data.{name}"), format!("BSONColumn: {e}"))),
        Bson::Document(_) => v1_column(name, v),
        _ => Err(BucketError::field(&format!("data.{name}"), "a compressed bucket's field is not a BSONColumn binary (subtype 7)")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn version_one_buckets_unpack_with_missing_fields_and_meta() {
        let t0 = bson::DateTime::from_millis(1_700_000_000_000);
        let t1 = bson::DateTime::from_millis(1_700_000_001_000);
        let b = doc! {
            "_id": bson::oid::ObjectId::new(),
            "control": { "version": 1, "min": { "t": t0 }, "max": { "t": t1 } },
            "meta": { "sensor": "a" },
            "data": { "t": { "0": t0, "1": t1 }, "temp": { "1": 20.5 } },
        };
        let rows = unpack(&b, "t", Some("m")).unwrap();
        assert_eq!(rows, vec![doc! { "m": { "sensor": "a" }, "t": t0 }, doc! { "m": { "sensor": "a" }, "t": t1, "temp": 20.5 }]);
    }

    #[test]
    fn unknown_versions_and_missing_time_are_refused() {
        let b = doc! { "control": { "version": 9 }, "data": {} };
        assert!(unpack(&b, "t", None).unwrap_err().message.contains("version 9"));
        let b = doc! { "control": { "version": 1 }, "data": { "x": { "0": 1 } } };
        assert_eq!(unpack(&b, "t", None).unwrap_err().field.as_deref(), Some("data.t"));
    }
}
