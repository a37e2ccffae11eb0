//! A time-series collection's bucket document (`system.buckets.<coll>`) back
//! into its measurements: `control` (version, min, max), `meta`, and per field
//! `data.<field>`, which is an object keyed by row index in version 1 (a key
//! absent: the field absent from that measurement) and a BSONColumn binary
//! (subtype 7) in versions 2 and 3.

use std::sync::Arc;

use bson::{Bson, RawBsonRef, RawDocument};

use super::measurement::{Key, Keys, Measurement};
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
pub fn is_bucket(doc: &RawDocument) -> bool {
    matches!(doc.get("control"), Ok(Some(RawBsonRef::Document(_)))) && matches!(doc.get("data"), Ok(Some(RawBsonRef::Document(_))))
}

fn value(v: RawBsonRef<'_>, field: &str) -> Result<Bson, BucketError> {
    Bson::try_from(v).map_err(|e| BucketError::field(field, format!("not valid BSON: {e}")))
}

/// The measurements of one bucket, in row order.
pub fn unpack(bucket: &RawDocument, time_field: &str, meta_field: Option<&str>, keys: &mut Keys) -> Result<Vec<Measurement>, BucketError> {
    let control = match bucket.get("control") {
        Ok(Some(RawBsonRef::Document(c))) => c,
        _ => return Err(BucketError::field("control", "a bucket document without its control object")),
    };
    let version = match control.get("version") {
        Ok(Some(RawBsonRef::Int32(v))) => v as i64,
        Ok(Some(RawBsonRef::Int64(v))) => v,
        Ok(Some(RawBsonRef::Double(v))) if v.fract() == 0.0 => v as i64,
        _ => return Err(BucketError::field("control.version", "a bucket without a numeric control.version")),
    };
    let data = match bucket.get("data") {
        Ok(Some(RawBsonRef::Document(d))) => d,
        _ => return Err(BucketError::field("data", "a bucket document without its data object")),
    };
    if !(1..=3).contains(&version) {
        return Err(BucketError::field("control.version", format!("bucket version {version} is unknown (MongoDB writes 1, 2 and 3)")));
    }
    let mut columns: Vec<(Key, Vec<Option<Bson>>)> = Vec::new();
    for e in data.iter() {
        let (name, v) = e.map_err(|e| BucketError::field("data", format!("not valid BSON: {e}")))?;
        let name = name.as_str();
        let values = match v {
            RawBsonRef::Document(d) => v1_column(name, d)?,
            RawBsonRef::Binary(b) if version >= 2 && u8::from(b.subtype) == 7 => decode_column(b.bytes)
                .map_err(|e| BucketError::field(&format!("data.{name}"), format!("BSONColumn: {e}")))?,
            _ if version == 1 => {
                return Err(BucketError::field(&format!("data.{name}"), "a version-1 bucket's field is not an object keyed by row"));
            }
            _ => return Err(BucketError::field(&format!("data.{name}"), "a compressed bucket's field is not a BSONColumn binary (subtype 7)")),
        };
        columns.push((keys.key(name), values));
    }
    let count = match columns.iter().find(|(k, _)| &**k == time_field) {
        Some((_, t)) => t.len(),
        None if columns.is_empty() => 0,
        None => return Err(BucketError::field(&format!("data.{time_field}"), "a bucket without its time field's data")),
    };
    let meta = match (meta_field, bucket.get("meta")) {
        (Some(m), Ok(Some(v))) => Some((keys.key(m), Arc::new(value(v, "meta")?))),
        _ => None,
    };
    let mut rows: Vec<Measurement> = (0..count).map(|_| Measurement { meta: meta.clone(), fields: Vec::with_capacity(columns.len()) }).collect();
    for (name, values) in columns {
        if values.len() > count {
            return Err(BucketError::field(
                &format!("data.{name}"),
                format!("{} values, more than the {count} measurements of the time field", values.len()),
            ));
        }
        for (row, v) in rows.iter_mut().zip(values) {
            if let Some(v) = v {
                row.fields.push((name.clone(), v));
            }
        }
    }
    Ok(rows)
}

/// Version 1: an object keyed "0", "1", ... (keys may be absent).
fn v1_column(name: &str, d: &RawDocument) -> Result<Vec<Option<Bson>>, BucketError> {
    let mut out: Vec<Option<Bson>> = Vec::new();
    for e in d.iter() {
        let (k, v) = e.map_err(|e| BucketError::field(&format!("data.{name}"), format!("not valid BSON: {e}")))?;
        let k = k.as_str();
        let i: usize = k
            .parse()
            .ok()
            .filter(|i: &usize| k == i.to_string() && *i < 1_000_000)
            .ok_or_else(|| BucketError::field(&format!("data.{name}.{k}"), "a row key that is not a row index"))?;
        if out.len() <= i {
            out.resize(i + 1, None);
        }
        if out[i].is_some() {
            return Err(BucketError::field(&format!("data.{name}.{k}"), "a row index given twice"));
        }
        out[i] = Some(value(v, &format!("data.{name}.{k}"))?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, Document, RawDocumentBuf};

    fn raw(d: &Document) -> RawDocumentBuf {
        RawDocumentBuf::try_from(d).unwrap()
    }

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
        let rows = unpack(&raw(&b), "t", Some("m"), &mut Keys::default()).unwrap();
        let docs: Vec<Document> = rows.iter().map(|r| r.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()).collect();
        assert_eq!(docs, vec![doc! { "m": { "sensor": "a" }, "t": t0 }, doc! { "m": { "sensor": "a" }, "t": t1, "temp": 20.5 }]);
    }

    #[test]
    fn unknown_versions_and_missing_time_are_refused() {
        let b = doc! { "control": { "version": 9 }, "data": {} };
        assert!(unpack(&raw(&b), "t", None, &mut Keys::default()).unwrap_err().message.contains("version 9"));
        let b = doc! { "control": { "version": 1 }, "data": { "x": { "0": 1 } } };
        assert_eq!(unpack(&raw(&b), "t", None, &mut Keys::default()).unwrap_err().field.as_deref(), Some("data.t"));
    }
}
