//! A measurement document as one line of `COPY ... FROM STDIN` text format.
//! Values keep what they hold: a field whose type differs from its column's
//! is an error naming the field (with a `--schema` hint), never coerced.

use rustc_hash::FxHashMap as HashMap;
use std::fmt::Write as _;

use bson::{Bson, Document};
use chrono::{Datelike, Timelike};

use super::schema::{ColType, From, Schema};
use crate::source::decimal;
use crate::source::measurement::Measurement;

#[derive(Debug, Clone, PartialEq)]
pub struct RowError {
    pub field: String,
    pub message: String,
    /// A value the column's type cannot hold: the mapping is wrong, not the
    /// row (an import stops on it even with --skip-invalid).
    pub conflict: bool,
}

impl std::fmt::Display for RowError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "field \"{}\": {}", self.field, self.message)
    }
}

fn invalid(field: &str, message: impl Into<String>) -> RowError {
    RowError { field: field.to_string(), message: message.into(), conflict: false }
}

fn conflict(field: &str, v: &Bson, col: &str, ty: ColType) -> RowError {
    RowError {
        field: field.to_string(),
        message: format!(
            "a {} value in column \"{col}\" of type {} (its type was inferred from the first documents); \
             HINT: give the column a type that holds both with --schema {field}=<type> (e.g. jsonb), and start again",
            type_name(v),
            ty.sql()
        ),
        conflict: true,
    }
}

pub fn type_name(v: &Bson) -> &'static str {
    match v {
        Bson::Double(_) => "double",
        Bson::String(_) => "string",
        Bson::Document(_) => "object",
        Bson::Array(_) => "array",
        Bson::Binary(_) => "binData",
        Bson::Undefined => "undefined",
        Bson::ObjectId(_) => "objectId",
        Bson::Boolean(_) => "bool",
        Bson::DateTime(_) => "date",
        Bson::Null => "null",
        Bson::RegularExpression(_) => "regex",
        Bson::DbPointer(_) => "dbPointer",
        Bson::JavaScriptCode(_) => "javascript",
        Bson::Symbol(_) => "symbol",
        Bson::JavaScriptCodeWithScope(_) => "javascriptWithScope",
        Bson::Int32(_) => "int",
        Bson::Timestamp(_) => "timestamp",
        Bson::Int64(_) => "long",
        Bson::Decimal128(_) => "decimal",
        Bson::MaxKey => "maxKey",
        Bson::MinKey => "minKey",
    }
}

/// Encodes documents of one schema.
#[derive(Clone)]
pub struct Encoder {
    schema: Schema,
    by_field: HashMap<String, usize>,
    by_meta_sub: HashMap<String, usize>,
    meta: Option<usize>,
    rest: Option<usize>,
    /// Reused between rows: a JSON text buffer.
    text: String,
    /// `meta.sub` of each meta subfield column (for messages).
    meta_paths: Vec<String>,
}

impl Encoder {
    pub fn new(schema: Schema) -> Encoder {
        let mut by_field = HashMap::default();
        let mut by_meta_sub = HashMap::default();
        let (mut meta, mut rest) = (None, None);
        for (i, c) in schema.columns.iter().enumerate() {
            match &c.from {
                From::Field(f) => {
                    by_field.insert(f.clone(), i);
                }
                From::MetaSub(s) => {
                    by_meta_sub.insert(s.clone(), i);
                }
                From::Meta => meta = Some(i),
                From::Rest => rest = Some(i),
                From::Time => {}
            }
        }
        let meta_paths = schema
            .columns
            .iter()
            .map(|c| match &c.from {
                From::MetaSub(s) => format!("{}.{s}", schema.meta_field.as_deref().unwrap_or("")),
                _ => String::new(),
            })
            .collect();
        Encoder { schema, by_field, by_meta_sub, meta, rest, text: String::new(), meta_paths }
    }

    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    /// Appends the row's line to `out`; on error `out` is as it was.
    pub fn encode(&mut self, doc: &Measurement, out: &mut Vec<u8>) -> Result<(), RowError> {
        let start = out.len();
        let r = self.encode_inner(doc, out);
        if r.is_err() {
            out.truncate(start);
        }
        r
    }

    fn encode_inner(&mut self, doc: &Measurement, out: &mut Vec<u8>) -> Result<(), RowError> {
        let mut values: Vec<Option<&Bson>> = vec![None; self.schema.columns.len()];
        let mut rest: Vec<(&str, &Bson)> = Vec::new();
        let time_field = self.schema.time_field.as_str();
        let mut time = None;
        for (k, v) in doc.iter() {
            if k == time_field {
                time = Some(v);
                continue;
            }
            if k == "_id" && !self.schema.keep_id {
                continue;
            }
            if Some(k) == self.schema.meta_field.as_deref() {
                if let Some(i) = self.meta {
                    values[i] = Some(v);
                    continue;
                }
                match v {
                    Bson::Document(m) => {
                        for (sk, sv) in m {
                            match self.by_meta_sub.get(sk) {
                                Some(&i) => values[i] = Some(sv),
                                None => {
                                    return Err(RowError {
                                        field: format!("{k}.{sk}"),
                                        message: "a meta subfield the first documents did not have (the meta field is the series' identity, so it cannot go to the rest column); \
                                                  HINT: import the meta field as one jsonb column with --meta-as jsonb, or name the subfield with --schema"
                                            .into(),
                                        conflict: true,
                                    });
                                }
                            }
                        }
                    }
                    Bson::Null => {}
                    other => {
                        return Err(RowError {
                            field: k.to_string(),
                            message: format!("a {} meta value where the first documents had an object; HINT: import it as one jsonb column with --meta-as jsonb", type_name(other)),
                            conflict: true,
                        });
                    }
                }
                continue;
            }
            match self.by_field.get(k) {
                Some(&i) => values[i] = Some(v),
                None => match self.rest {
                    Some(_) => {
                        rest.push((k, v));
                    }
                    None => {
                        return Err(RowError {
                            field: k.to_string(),
                            message: "a field the first documents did not have, and there is no rest column; HINT: name it with --schema".into(),
                            conflict: true,
                        });
                    }
                },
            }
        }
        let time = match time {
            Some(Bson::DateTime(d)) => *d,
            Some(other) => return Err(invalid(time_field, format!("the time field holds a {}, not a date", type_name(other)))),
            None => return Err(invalid(time_field, "a measurement without its time field")),
        };
        for (i, c) in self.schema.columns.iter().enumerate() {
            if i > 0 {
                out.push(b'\t');
            }
            let field_name = match &c.from {
                From::Field(f) => f.as_str(),
                From::MetaSub(_) => self.meta_paths[i].as_str(),
                From::Meta => self.schema.meta_field.as_deref().unwrap_or(""),
                From::Time => time_field,
                From::Rest => "",
            };
            match &c.from {
                From::Time => write_timestamp(time.timestamp_millis(), time_field, out)?,
                From::Rest => {
                    if rest.is_empty() {
                        out.extend_from_slice(b"\\N");
                    } else {
                        self.text.clear();
                        json_fields(rest.iter().copied(), "", &mut self.text)?;
                        copy_escape(&self.text, out);
                    }
                }
                _ => match values[i] {
                    None | Some(Bson::Null) | Some(Bson::Undefined) => out.extend_from_slice(b"\\N"),
                    Some(v) => write_value(v, c.ty, field_name, &c.name, out)?,
                },
            }
        }
        out.push(b'\n');
        Ok(())
    }
}

/// Appends text escaped for COPY's text format.
fn copy_escape(s: &str, out: &mut Vec<u8>) {
    for &b in s.as_bytes() {
        match b {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            _ => out.push(b),
        }
    }
}

fn no_nul(s: &str, field: &str) -> Result<(), RowError> {
    if s.contains('\0') {
        Err(invalid(field, "a string holding a NUL character, which PostgreSQL text cannot hold"))
    } else {
        Ok(())
    }
}

/// Whether an int64 is exactly a float8 (|x| <= 2^53, or representable).
fn exact_f64(i: i64) -> bool {
    (i as f64) as i128 == i as i128 && (i as f64) != 9.223_372_036_854_776e18
}

fn write_f64(x: f64, out: &mut Vec<u8>) {
    if x.is_nan() {
        out.extend_from_slice(b"NaN");
    } else if x.is_infinite() {
        out.extend_from_slice(if x > 0.0 { b"Infinity" } else { b"-Infinity" });
    } else {
        // The shortest text that reads back to the same double.
        out.extend_from_slice(ryu::Buffer::new().format_finite(x).as_bytes());
    }
}

fn write_value(v: &Bson, ty: ColType, field: &str, col: &str, out: &mut Vec<u8>) -> Result<(), RowError> {
    match (ty, v) {
        (ColType::Float8, Bson::Double(x)) => write_f64(*x, out),
        (ColType::Float8, Bson::Int32(i)) => out.extend_from_slice(itoa::Buffer::new().format(*i).as_bytes()),
        (ColType::Float8, Bson::Int64(i)) if exact_f64(*i) => out.extend_from_slice(itoa::Buffer::new().format(*i).as_bytes()),
        (ColType::Int4, Bson::Int32(i)) => out.extend_from_slice(itoa::Buffer::new().format(*i).as_bytes()),
        (ColType::Int4, Bson::Int64(i)) if i32::try_from(*i).is_ok() => out.extend_from_slice(itoa::Buffer::new().format(*i).as_bytes()),
        (ColType::Int8, Bson::Int32(i)) => out.extend_from_slice(itoa::Buffer::new().format(*i).as_bytes()),
        (ColType::Int8, Bson::Int64(i)) => out.extend_from_slice(itoa::Buffer::new().format(*i).as_bytes()),
        (ColType::Numeric, Bson::Int32(i)) => out.extend_from_slice(itoa::Buffer::new().format(*i).as_bytes()),
        (ColType::Numeric, Bson::Int64(i)) => out.extend_from_slice(itoa::Buffer::new().format(*i).as_bytes()),
        (ColType::Numeric, Bson::Double(x)) => write_f64(*x, out),
        (ColType::Numeric, Bson::Decimal128(d)) => out.extend_from_slice(decimal_text(d).as_bytes()),
        (ColType::Text, Bson::String(s)) | (ColType::Text, Bson::Symbol(s)) => {
            no_nul(s, field)?;
            copy_escape(s, out);
        }
        (ColType::Text, Bson::ObjectId(o)) => out.extend_from_slice(o.to_hex().as_bytes()),
        (ColType::Bool, Bson::Boolean(b)) => out.push(if *b { b't' } else { b'f' }),
        (ColType::Timestamptz, Bson::DateTime(d)) => write_timestamp(d.timestamp_millis(), field, out)?,
        (ColType::Jsonb, v) => {
            let mut s = String::new();
            json_value(v, field, &mut s)?;
            copy_escape(&s, out);
        }
        (ty, v) => return Err(conflict(field, v, col, ty)),
    }
    Ok(())
}

/// Decimal128 as PostgreSQL numeric reads it (NaN and infinities by name).
fn decimal_text(d: &bson::Decimal128) -> String {
    if let Some(t) = decimal::text(d) {
        return t;
    }
    let s = d.to_string();
    match s.as_str() {
        "NaN" | "-NaN" => "NaN".into(),
        "Infinity" => "Infinity".into(),
        "-Infinity" => "-Infinity".into(),
        _ => s,
    }
}

/// Milliseconds since the epoch as timestamptz text in UTC (years before 1
/// as BC, as PostgreSQL writes them).
fn write_timestamp(ms: i64, field: &str, out: &mut Vec<u8>) -> Result<(), RowError> {
    let dt = chrono::DateTime::from_timestamp_millis(ms).ok_or_else(|| invalid(field, format!("the date {ms} ms from 1970 is out of PostgreSQL's range")))?;
    let year = dt.year();
    // PostgreSQL's timestamptz ends in 294276 AD and begins in 4713 BC.
    if year < -4712 {
        return Err(invalid(field, format!("the date {ms} ms from 1970 is out of PostgreSQL's range")));
    }
    let (y, bc) = if year <= 0 { (1 - year, true) } else { (year, false) };
    // Written by hand: this runs once a row, and fmt's machinery is slow.
    let two = |out: &mut Vec<u8>, v: u32| out.extend_from_slice(&[b'0' + (v / 10) as u8, b'0' + (v % 10) as u8]);
    if y < 10000 {
        let y = y as u32;
        out.extend_from_slice(&[b'0' + (y / 1000) as u8, b'0' + (y / 100 % 10) as u8, b'0' + (y / 10 % 10) as u8, b'0' + (y % 10) as u8]);
    } else {
        out.extend_from_slice(itoa::Buffer::new().format(y).as_bytes());
    }
    out.push(b'-');
    two(out, dt.month());
    out.push(b'-');
    two(out, dt.day());
    out.push(b' ');
    two(out, dt.hour());
    out.push(b':');
    two(out, dt.minute());
    out.push(b':');
    two(out, dt.second());
    let milli = dt.timestamp_subsec_millis();
    out.extend_from_slice(&[b'.', b'0' + (milli / 100) as u8, b'0' + (milli / 10 % 10) as u8, b'0' + (milli % 10) as u8]);
    out.extend_from_slice(if bc { b"+00 BC" } else { b"+00" });
    Ok(())
}

/// A document as JSON text for a jsonb column. Numbers stay numbers (exact:
/// jsonb's numbers are numeric), strings strings, dates ISO-8601 strings in
/// UTC, ObjectIds their hex; what JSON has no form for (NaN, binary data,
/// regular expressions, timestamps) as relaxed Extended JSON.
pub fn json_document(d: &Document, path: &str, s: &mut String) -> Result<(), RowError> {
    json_fields(d.iter().map(|(k, v)| (k.as_str(), v)), path, s)
}

fn json_fields<'a>(fields: impl Iterator<Item = (&'a str, &'a Bson)>, path: &str, s: &mut String) -> Result<(), RowError> {
    s.push('{');
    for (i, (k, v)) in fields.enumerate() {
        if i > 0 {
            s.push_str(", ");
        }
        let sub = if path.is_empty() { k.to_string() } else { format!("{path}.{k}") };
        json_string(k, &sub, s)?;
        s.push_str(": ");
        json_value(v, &sub, s)?;
    }
    s.push('}');
    Ok(())
}

fn json_string(v: &str, field: &str, s: &mut String) -> Result<(), RowError> {
    no_nul(v, field)?;
    s.push_str(&serde_json::to_string(v).unwrap_or_default());
    Ok(())
}

fn json_value(v: &Bson, field: &str, s: &mut String) -> Result<(), RowError> {
    match v {
        Bson::Null | Bson::Undefined => s.push_str("null"),
        Bson::Boolean(b) => s.push_str(if *b { "true" } else { "false" }),
        Bson::Int32(i) => s.push_str(itoa::Buffer::new().format(*i)),
        Bson::Int64(i) => s.push_str(itoa::Buffer::new().format(*i)),
        Bson::Double(x) if x.is_finite() => {
            if x.fract() == 0.0 && x.abs() < 1e16 {
                s.push_str(itoa::Buffer::new().format(*x as i64));
            } else {
                s.push_str(ryu::Buffer::new().format_finite(*x));
            }
        }
        Bson::Decimal128(d) => {
            let t = decimal::text(d).unwrap_or_else(|| d.to_string());
            if t.bytes().all(|b| b.is_ascii_digit() || matches!(b, b'-' | b'+' | b'.' | b'E' | b'e')) {
                s.push_str(&t);
            } else {
                let _ = write!(s, "{{\"$numberDecimal\": \"{t}\"}}");
            }
        }
        Bson::String(t) | Bson::Symbol(t) => json_string(t, field, s)?,
        Bson::ObjectId(o) => {
            let _ = write!(s, "\"{}\"", o.to_hex());
        }
        Bson::DateTime(d) => match chrono::DateTime::from_timestamp_millis(d.timestamp_millis()).filter(|t| (1..=9999).contains(&t.year())) {
            // ISO-8601 as mongoexport writes dates; others as it does too.
            Some(t) => json_string(&t.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string(), field, s)?,
            None => {
                let _ = write!(s, "{{\"$date\": {{\"$numberLong\": \"{}\"}}}}", d.timestamp_millis());
            }
        },
        Bson::Document(d) => json_document(d, field, s)?,
        Bson::Array(a) => {
            s.push('[');
            for (i, e) in a.iter().enumerate() {
                if i > 0 {
                    s.push_str(", ");
                }
                json_value(e, &format!("{field}.{i}"), s)?;
            }
            s.push(']');
        }
        other => {
            let j = other.clone().into_relaxed_extjson();
            let t = serde_json::to_string(&j).unwrap_or_default();
            if t.contains("\\u0000") {
                return Err(invalid(field, "a value holding a NUL character, which jsonb cannot hold"));
            }
            s.push_str(&t);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::schema::{Column, Schema};
    use super::*;
    use bson::doc;

    fn schema() -> Schema {
        Schema {
            time_field: "t".into(),
            meta_field: Some("m".into()),
            keep_id: false,
            columns: vec![
                Column { name: "t".into(), ty: ColType::Timestamptz, from: From::Time },
                Column { name: "site".into(), ty: ColType::Text, from: From::MetaSub("site".into()) },
                Column { name: "x".into(), ty: ColType::Float8, from: From::Field("x".into()) },
                Column { name: "n".into(), ty: ColType::Int4, from: From::Field("n".into()) },
                Column { name: "doc".into(), ty: ColType::Jsonb, from: From::Rest },
            ],
        }
    }

    fn line(d: &Document) -> Result<String, RowError> {
        let mut e = Encoder::new(schema());
        let mut out = Vec::new();
        e.encode(&Measurement::from(d.clone()), &mut out).map(|_| String::from_utf8(out).unwrap())
    }

    #[test]
    fn rows_encode_as_copy_text() {
        let t = bson::DateTime::from_millis(1_700_000_000_123);
        let d = doc! { "_id": 7, "t": t, "m": { "site": "a\tb" }, "x": 1.5, "n": 3, "o": { "k": [1, "x\n"] }, "z": null };
        assert_eq!(line(&d).unwrap(), "2023-11-14 22:13:20.123+00\ta\\tb\t1.5\t3\t{\"o\": {\"k\": [1, \"x\\\\n\"]}, \"z\": null}\n");
    }

    #[test]
    fn old_dates_are_bc_and_far_ones_refused() {
        let mut out = Vec::new();
        write_timestamp(-62_135_596_800_000 - 86_400_000, "t", &mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "0001-12-31 00:00:00.000+00 BC");
        assert!(write_timestamp(i64::MAX, "t", &mut Vec::new()).is_err());
    }

    #[test]
    fn conflicts_and_invalid_rows_are_told_apart() {
        let t = bson::DateTime::from_millis(0);
        let e = line(&doc! { "t": t, "x": "str" }).unwrap_err();
        assert!(e.conflict && e.field == "x" && e.message.contains("--schema"), "{e:?}");
        let e = line(&doc! { "x": 1.0 }).unwrap_err();
        assert!(!e.conflict && e.field == "t");
        let e = line(&doc! { "t": t, "n": 1i64 << 40 }).unwrap_err();
        assert!(e.conflict);
        let e = line(&doc! { "t": t, "m": { "other": 1 } }).unwrap_err();
        assert!(e.conflict && e.field == "m.other");
        assert!(line(&doc! { "t": t, "x": 9007199254740993i64 }).unwrap_err().conflict);
    }
}
