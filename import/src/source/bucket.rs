//! A time-series collection's bucket document (`system.buckets.<coll>`) back
//! into its measurements: `control` (version, min, max), `meta`, and per field
//! `data.<field>`, which is an object keyed by row index in version 1 (a key
//! absent: the field absent from that measurement) and a BSONColumn binary
//! (subtype 7) in versions 2 and 3.

use std::sync::Arc;

use bson::{Bson, RawBsonRef, RawDocument};

use super::measurement::{Key, Keys, Measurement};
use super::{Origin, SourceError};
use crate::bsoncolumn::column::decode_at_most as decode_column;

/// More measurements than any bucket holds (MongoDB's default is 1000).
const MAX_COUNT: usize = 1 << 20;

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
pub fn is_bucket(doc: &RawDocument, time_field: &str) -> bool {
    // A measurement carries its time field at the top; a bucket never does
    // (its times are under `data`), so a measurement with objects named
    // `control` and `data` is not mistaken for one.
    matches!(doc.get("control"), Ok(Some(RawBsonRef::Document(_))))
        && matches!(doc.get("data"), Ok(Some(RawBsonRef::Document(_))))
        && !matches!(doc.get(time_field), Ok(Some(_)))
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
    // The time column first: it says how many measurements the bucket has,
    // which bounds what every other column may decode to.
    let declared = match control.get("count") {
        Ok(Some(RawBsonRef::Int32(n))) if n >= 0 => Some(n as usize),
        Ok(Some(RawBsonRef::Int64(n))) if n >= 0 => usize::try_from(n).ok(),
        _ => None,
    };
    let column = |name: &str, v: RawBsonRef<'_>, limit: usize| -> Result<Vec<Option<Bson>>, BucketError> {
        match v {
            RawBsonRef::Document(d) => v1_column(name, d, limit),
            RawBsonRef::Binary(b) if version >= 2 && u8::from(b.subtype) == 7 => decode_column(b.bytes, limit)
                .map_err(|e| BucketError::field(&format!("data.{name}"), format!("BSONColumn: {e}"))),
            _ if version == 1 => Err(BucketError::field(&format!("data.{name}"), "a version-1 bucket's field is not an object keyed by row")),
            _ => Err(BucketError::field(&format!("data.{name}"), "a compressed bucket's field is not a BSONColumn binary (subtype 7)")),
        }
    };
    let mut time = match data.get(time_field) {
        Ok(Some(v)) => column(time_field, v, declared.unwrap_or(MAX_COUNT).min(MAX_COUNT))?,
        _ if data.iter().next().is_none() => Vec::new(),
        _ => return Err(BucketError::field(&format!("data.{time_field}"), "a bucket without its time field's data")),
    };
    let count = time.len();
    if version >= 2
        && let Some(n) = declared
        && n != count
    {
        return Err(BucketError::field("control.count", format!("control.count says {n} measurements, the time column holds {count}")));
    }
    let mut columns: Vec<(Key, Vec<Option<Bson>>)> = Vec::new();
    for e in data.iter() {
        let (name, v) = e.map_err(|e| BucketError::field("data", format!("not valid BSON: {e}")))?;
        let name = name.as_str();
        let values = if name == time_field { std::mem::take(&mut time) } else { column(name, v, count)? };
        columns.push((keys.key(name), values));
    }
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
fn v1_column(name: &str, d: &RawDocument, limit: usize) -> Result<Vec<Option<Bson>>, BucketError> {
    let mut out: Vec<Option<Bson>> = Vec::new();
    for e in d.iter() {
        let (k, v) = e.map_err(|e| BucketError::field(&format!("data.{name}"), format!("not valid BSON: {e}")))?;
        let k = k.as_str();
        let i: usize = k
            .parse()
            .ok()
            .filter(|i: &usize| k == i.to_string())
            .ok_or_else(|| BucketError::field(&format!("data.{name}.{k}"), "a row key that is not a row index"))?;
        if i >= limit {
            return Err(BucketError::field(&format!("data.{name}.{k}"), format!("row {i} of a bucket of {limit} measurements")));
        }
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
    fn compressed_buckets_unpack_as_their_uncompressed_form() {
        use crate::bsoncolumn::testenc::{encode, encode_interleaved};
        let col = |v: Vec<Option<Bson>>| Bson::Binary(bson::Binary { subtype: bson::spec::BinarySubtype::Column, bytes: encode(&v) });
        let n = 300;
        let t: Vec<Option<Bson>> = (0..n).map(|i| Some(Bson::DateTime(bson::DateTime::from_millis(1_700_000_000_000 + i * 1000)))).collect();
        let temp: Vec<Option<Bson>> = (0..n).map(|i| (i % 7 != 3).then(|| Bson::Double(20.0 + (i % 13) as f64 * 0.25))).collect();
        let note: Vec<Option<Bson>> = (0..n).map(|i| (i % 50 == 0).then(|| Bson::String(format!("n{i}")))).collect();
        let gps: Vec<Option<Document>> = (0..n).map(|i| (i % 4 != 0).then(|| doc! { "lat": 1.5 + i as f64, "lon": -2.0 })).collect();
        let mut v1 = doc! {};
        for (name, values) in [("t", &t), ("temp", &temp), ("note", &note)] {
            let mut d = Document::new();
            for (i, v) in values.iter().enumerate() {
                if let Some(v) = v {
                    d.insert(i.to_string(), v.clone());
                }
            }
            v1.insert(name, d);
        }
        let mut g = Document::new();
        for (i, v) in gps.iter().enumerate() {
            if let Some(v) = v {
                g.insert(i.to_string(), v.clone());
            }
        }
        v1.insert("gps", g);
        let gps_col = Bson::Binary(bson::Binary { subtype: bson::spec::BinarySubtype::Column, bytes: encode_interleaved(&gps) });
        for version in [2, 3] {
            let compressed = doc! {
                "control": { "version": version, "count": n as i32 },
                "meta": { "sensor": "a" },
                "data": { "t": col(t.clone()), "temp": col(temp.clone()), "note": col(note.clone()), "gps": gps_col.clone() },
            };
            let plain = doc! { "control": { "version": 1 }, "meta": { "sensor": "a" }, "data": v1.clone() };
            let a = unpack(&raw(&compressed), "t", Some("m"), &mut Keys::default()).unwrap();
            let b = unpack(&raw(&plain), "t", Some("m"), &mut Keys::default()).unwrap();
            assert_eq!(a.len(), n as usize);
            assert_eq!(a, b, "version {version}");
        }
    }

    /// Not a check: rewrites a file of version-1 buckets (written by pymongo in
    /// tests/integration/test_import.py) as compressed buckets of version
    /// `TSBUCKET_COMPRESS_VERSION` through our test encoder, so that the
    /// importer is run end to end on them. Without its variables it does nothing.
    #[test]
    #[ignore]
    fn compress_bucket_file() {
        use crate::bsoncolumn::testenc::{encode, encode_interleaved};
        let (Ok(input), Ok(output)) = (std::env::var("TSBUCKET_COMPRESS_IN"), std::env::var("TSBUCKET_COMPRESS_OUT")) else { return };
        let version: i32 = std::env::var("TSBUCKET_COMPRESS_VERSION").map_or(2, |v| v.parse().unwrap());
        let bytes = std::fs::read(input).unwrap();
        let mut out = Vec::new();
        let mut at = 0;
        while at < bytes.len() {
            let n = i32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
            let mut b = Document::from_reader(&bytes[at..at + n]).unwrap();
            at += n;
            let data = b.get_document("data").unwrap().clone();
            let count = data
                .values()
                .flat_map(|f| f.as_document().unwrap().keys().map(|k| k.parse::<usize>().unwrap() + 1))
                .max()
                .unwrap_or(0);
            let mut packed = Document::new();
            for (name, field) in &data {
                let field = field.as_document().unwrap();
                let values: Vec<Option<Bson>> = (0..count).map(|i| field.get(i.to_string()).cloned()).collect();
                let bytes = if values.iter().flatten().all(|v| matches!(v, Bson::Document(_))) && values.iter().any(Option::is_some) {
                    let rows: Vec<Option<Document>> = values.into_iter().map(|v| v.map(|v| v.as_document().unwrap().clone())).collect();
                    encode_interleaved(&rows)
                } else {
                    encode(&values)
                };
                packed.insert(name, Bson::Binary(bson::Binary { subtype: bson::spec::BinarySubtype::Column, bytes }));
            }
            let control = b.get_document_mut("control").unwrap();
            control.insert("version", version);
            control.insert("count", count as i32);
            b.insert("data", packed);
            b.to_writer(&mut out).unwrap();
        }
        std::fs::write(output, out).unwrap();
    }

    #[test]
    fn unknown_versions_and_missing_time_are_refused() {
        let b = doc! { "control": { "version": 9 }, "data": {} };
        assert!(unpack(&raw(&b), "t", None, &mut Keys::default()).unwrap_err().message.contains("version 9"));
        let b = doc! { "control": { "version": 1 }, "data": { "x": { "0": 1 } } };
        assert_eq!(unpack(&raw(&b), "t", None, &mut Keys::default()).unwrap_err().field.as_deref(), Some("data.t"));
    }
}
