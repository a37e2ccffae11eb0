//! mongoexport's output: Extended JSON v2 (relaxed or canonical), one document
//! per line or one `--jsonArray`. Values are split off the stream by a small
//! scanner that tracks strings and nesting (so each keeps its offset for
//! messages), then parsed by serde_json and read as Extended JSON by `bson`.

use std::borrow::Cow;
use std::io::BufRead;

use bson::Bson;

use bson::Document;

use super::measurement::Keys;
use super::{Measurement, Origin, Parser, Record, Source, SourceError};

pub struct JsonSource {
    input: Box<dyn BufRead + Send>,
    name: String,
    /// Offset of the next unread byte.
    offset: u64,
    /// Inside a `--jsonArray`: after `[`, before the closing `]`.
    in_array: Option<bool>,
    done: bool,
    buf: Vec<u8>,
}

impl JsonSource {
    pub fn new(input: Box<dyn BufRead + Send>, name: String) -> JsonSource {
        JsonSource { input, name, offset: 0, in_array: None, done: false, buf: Vec::new() }
    }

    fn origin(&self, offset: u64) -> Origin {
        Origin { file: self.name.clone(), offset }
    }

    fn io_error(&mut self, e: std::io::Error) -> SourceError {
        self.done = true;
        SourceError::fatal(self.origin(self.offset), format!("cannot read: {e}"))
    }

    /// The next byte that is not whitespace (nor, inside an array, a comma
    /// between elements), without consuming it.
    fn peek_significant(&mut self) -> Result<Option<u8>, SourceError> {
        loop {
            let chunk = match self.input.fill_buf() {
                Ok(c) => c,
                Err(e) => return Err(self.io_error(e)),
            };
            if chunk.is_empty() {
                return Ok(None);
            }
            let skip = chunk.iter().take_while(|b| b.is_ascii_whitespace() || (**b == b',' && self.in_array == Some(true))).count();
            if skip < chunk.len() {
                let b = chunk[skip];
                self.input.consume(skip);
                self.offset += skip as u64;
                return Ok(Some(b));
            }
            let n = chunk.len();
            self.input.consume(n);
            self.offset += n as u64;
        }
    }

    /// Reads one whole JSON value (starting at the current byte) into `buf`.
    fn read_value(&mut self) -> Result<(), SourceError> {
        self.buf.clear();
        let start = self.offset;
        let (mut depth, mut in_str, mut esc) = (0usize, false, false);
        loop {
            let chunk = match self.input.fill_buf() {
                Ok(c) => c,
                Err(e) => return Err(self.io_error(e)),
            };
            if chunk.is_empty() {
                self.done = true;
                return Err(SourceError::fatal(self.origin(start), "the file ends inside a document (truncated?)"));
            }
            let mut end = None;
            let mut i = 0;
            while i < chunk.len() {
                if in_str {
                    if esc {
                        esc = false;
                        i += 1;
                        continue;
                    }
                    // Strings are most of a document: jump to their next quote or escape.
                    match memchr::memchr2(b'"', b'\\', &chunk[i..]) {
                        None => i = chunk.len(),
                        Some(j) => {
                            if chunk[i + j] == b'\\' {
                                esc = true;
                            } else {
                                in_str = false;
                            }
                            i += j + 1;
                        }
                    }
                    continue;
                }
                match chunk[i] {
                    b'"' => in_str = true,
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth = depth.saturating_sub(1);
                        if depth == 0 {
                            end = Some(i + 1);
                            break;
                        }
                    }
                    b'\n' if depth == 0 => {
                        end = Some(i);
                        break;
                    }
                    _ => {}
                }
                i += 1;
            }
            let take = end.unwrap_or(chunk.len());
            self.buf.extend_from_slice(&chunk[..take]);
            self.input.consume(take);
            self.offset += take as u64;
            if end.is_some() {
                return Ok(());
            }
        }
    }
}

/// Reads one Extended JSON value as a document's measurement, straight from
/// serde_json's tokens into values (no JSON tree, no map for the top level,
/// field names shared through `keys`), reading the common Extended JSON
/// wrappers itself and leaving the rest to `bson`.
pub fn parse_measurement(text: &[u8], origin: &Origin, keys: &mut Keys) -> Result<Measurement, SourceError> {
    let first = text.iter().find(|b| !b.is_ascii_whitespace());
    if first != Some(&b'{') {
        return Err(SourceError::new(origin.clone(), "not a JSON object (a document is expected)"));
    }
    // One check of the whole text, not serde_json's of each string (a
    // document of short keys and wrapped numbers is mostly strings).
    let text = std::str::from_utf8(text)
        .map_err(|e| SourceError::new(origin.clone(), format!("not valid JSON: invalid UTF-8 at byte {} of the document", e.valid_up_to())))?;
    let mut de = serde_json::Deserializer::from_str(text);
    match serde::de::DeserializeSeed::deserialize(TopLevel(keys), &mut de).and_then(|m| de.end().map(|_| m)) {
        Ok(Some(m)) => Ok(m),
        // A top level that is itself an Extended JSON wrapper.
        Ok(None) => parse_document(text.as_bytes(), origin).map(Measurement::from),
        Err(e) if e.is_syntax() || e.is_eof() => Err(SourceError::new(origin.clone(), format!("not valid JSON: {e}"))),
        Err(e) => Err(SourceError::new(origin.clone(), format!("not valid Extended JSON: {e}"))),
    }
}

struct TopLevel<'k>(&'k mut Keys);

impl<'de> serde::de::DeserializeSeed<'de> for TopLevel<'_> {
    type Value = Option<Measurement>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> serde::de::Visitor<'de> for TopLevel<'_> {
    type Value = Option<Measurement>;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut fields = Vec::new();
        while let Some(k) = map.next_key_seed(Borrowed)? {
            if fields.is_empty() && k.starts_with('$') {
                // Let the whole text be read as Extended JSON instead.
                map.next_value::<serde::de::IgnoredAny>()?;
                while map.next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?.is_some() {}
                return Ok(None);
            }
            let v: Bson = map.next_value_seed(ValueSeed)?;
            fields.push((self.0.key(&k), v));
        }
        Ok(Some(Measurement { meta: None, fields }))
    }
}

/// Reads one Extended JSON value as a document (the slower, general road).
pub fn parse_document(text: &[u8], origin: &Origin) -> Result<Document, SourceError> {
    let value: serde_json::Value =
        serde_json::from_slice(text).map_err(|e| SourceError::new(origin.clone(), format!("not valid JSON: {e}")))?;
    if !value.is_object() {
        return Err(SourceError::new(origin.clone(), "not a JSON object (a document is expected)"));
    }
    match Bson::try_from(value) {
        Ok(Bson::Document(d)) => Ok(d),
        Ok(_) => Err(SourceError::new(origin.clone(), "an Extended JSON value that is not a document")),
        Err(e) => Err(SourceError::new(origin.clone(), format!("not valid Extended JSON: {e}"))),
    }
}

/// One Extended JSON value as BSON: plain JSON numbers take the smallest
/// type that holds them (relaxed mode), and `$date`, `$numberDecimal`,
/// `$numberLong`, `$numberInt`, `$numberDouble` and `$oid` are read here; any
/// other `$` wrapper (binary, regex, timestamp, ...) is read by `bson`.
struct ValueSeed;

impl<'de> serde::de::DeserializeSeed<'de> for ValueSeed {
    type Value = Bson;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Bson, D::Error> {
        d.deserialize_any(ValueSeed)
    }
}

/// A key or string of the text as a `Cow`, borrowed from the text unless it
/// holds escapes (serde's own `Cow<str>` always copies: one allocation per
/// key and per wrapped number, most of canonical Extended JSON's cost).
struct Borrowed;

impl<'de> serde::de::DeserializeSeed<'de> for Borrowed {
    type Value = Cow<'de, str>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Cow<'de, str>, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Borrowed {
    type Value = Cow<'de, str>;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a string")
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Borrowed(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Owned(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Owned(v))
    }
}

/// A wrapper holding a string: `{"$numberDouble": "1.5"}`, `{"$date": "..."}`...
fn scalar_wrapper(k: &str, t: &str) -> Option<Bson> {
    Some(match k {
        "$date" => Bson::DateTime(bson::DateTime::from_millis(chrono::DateTime::parse_from_rfc3339(t).ok()?.timestamp_millis())),
        "$numberDecimal" => Bson::Decimal128(super::decimal::parse(t)?),
        "$numberLong" => Bson::Int64(t.parse().ok()?),
        "$numberInt" => Bson::Int32(t.parse().ok()?),
        "$numberDouble" => Bson::Double(match t {
            "NaN" => f64::NAN,
            "Infinity" => f64::INFINITY,
            "-Infinity" => f64::NEG_INFINITY,
            n => n.parse().ok()?,
        }),
        "$oid" => Bson::ObjectId(bson::oid::ObjectId::parse_str(t).ok()?),
        _ => return None,
    })
}

/// The value of a `$date` wrapper as it comes: a string (relaxed), or
/// `{"$numberLong": "..."}` (canonical), read without a JSON tree.
struct DateValue;

impl<'de> serde::de::DeserializeSeed<'de> for DateValue {
    type Value = Option<Bson>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Option<Bson>, D::Error> {
        d.deserialize_any(DateValue)
    }
}

impl<'de> serde::de::Visitor<'de> for DateValue {
    type Value = Option<Bson>;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a $date value")
    }
    fn visit_str<E>(self, v: &str) -> Result<Option<Bson>, E> {
        Ok(scalar_wrapper("$date", v))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Option<Bson>, A::Error> {
        let mut out = None;
        let mut n = 0;
        while let Some(k) = map.next_key_seed(Borrowed)? {
            n += 1;
            let v = map.next_value_seed(Borrowed)?;
            if k == "$numberLong" {
                out = v.parse().ok().map(|ms| Bson::DateTime(bson::DateTime::from_millis(ms)));
            }
        }
        Ok(out.filter(|_| n == 1))
    }
}

impl<'de> serde::de::Visitor<'de> for ValueSeed {
    type Value = Bson;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an Extended JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Bson, E> {
        Ok(Bson::Boolean(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Bson, E> {
        Ok(i32::try_from(v).map_or(Bson::Int64(v), Bson::Int32))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Bson, E> {
        Ok(match (i32::try_from(v), i64::try_from(v)) {
            (Ok(i), _) => Bson::Int32(i),
            (_, Ok(l)) => Bson::Int64(l),
            // Beyond int64: relaxed Extended JSON reads it as a double.
            _ => Bson::Double(v as f64),
        })
    }
    fn visit_f64<E>(self, v: f64) -> Result<Bson, E> {
        Ok(Bson::Double(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Bson, E> {
        Ok(Bson::String(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Bson, E> {
        Ok(Bson::String(v))
    }
    fn visit_unit<E>(self) -> Result<Bson, E> {
        Ok(Bson::Null)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Bson, A::Error> {
        let mut out = Vec::new();
        while let Some(v) = seq.next_element_seed(ValueSeed)? {
            out.push(v);
        }
        Ok(Bson::Array(out))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Bson, A::Error> {
        use serde::de::Error;
        let Some(first) = map.next_key_seed(Borrowed)? else { return Ok(Bson::Document(Document::new())) };
        if first.starts_with('$') {
            let mut m = serde_json::Map::new();
            // Canonical Extended JSON wraps every number: read the common
            // wrappers' string straight from the text, no JSON tree.
            if matches!(first.as_ref(), "$numberDouble" | "$numberInt" | "$numberLong" | "$numberDecimal" | "$oid") {
                let text = map.next_value_seed(Borrowed)?;
                match map.next_key::<String>()? {
                    None => {
                        return scalar_wrapper(&first, &text).ok_or_else(|| A::Error::custom(format!("{first} holds \"{text}\", which is not one")));
                    }
                    Some(k) => {
                        // Not a wrapper after all: the general road.
                        m.insert(first.to_string(), serde_json::Value::String(text.into_owned()));
                        m.insert(k, map.next_value::<serde_json::Value>()?);
                    }
                }
            } else if first == "$date" {
                let date = map.next_value_seed(DateValue)?;
                if map.next_key::<serde::de::IgnoredAny>()?.is_some() {
                    return Err(A::Error::custom("a $date wrapper with other keys"));
                }
                return date.ok_or_else(|| A::Error::custom("$date holds no date (an ISO-8601 string or {\"$numberLong\": \"...\"} is expected)"));
            } else {
                m.insert(first.to_string(), map.next_value::<serde_json::Value>()?);
            }
            while let Some((k, v)) = map.next_entry::<String, serde_json::Value>()? {
                m.insert(k, v);
            }
            return Bson::try_from(serde_json::Value::Object(m)).map_err(|e| A::Error::custom(e.to_string()));
        }
        let mut d = Document::new();
        d.insert(first.into_owned(), map.next_value_seed(ValueSeed)?);
        while let Some(k) = map.next_key_seed(Borrowed)? {
            d.insert(k.into_owned(), map.next_value_seed(ValueSeed)?);
        }
        Ok(Bson::Document(d))
    }
}

impl Source for JsonSource {
    fn next_record(&mut self) -> Option<Result<Record, SourceError>> {
        if self.done {
            return None;
        }
        let first = match self.peek_significant() {
            Ok(Some(b)) => b,
            Ok(None) => {
                self.done = true;
                if self.in_array == Some(true) {
                    return Some(Err(SourceError::fatal(self.origin(self.offset), "the file ends inside the JSON array (truncated?)")));
                }
                return None;
            }
            Err(e) => return Some(Err(e)),
        };
        if self.in_array.is_none() {
            self.in_array = Some(false);
            if first == b'[' {
                self.input.consume(1);
                self.offset += 1;
                self.in_array = Some(true);
                return self.next_record();
            }
        }
        if first == b']' && self.in_array == Some(true) {
            self.input.consume(1);
            self.offset += 1;
            self.in_array = Some(false);
            return match self.peek_significant() {
                Ok(None) => {
                    self.done = true;
                    None
                }
                Ok(Some(_)) => {
                    self.done = true;
                    Some(Err(SourceError::fatal(self.origin(self.offset), "text after the end of the JSON array")))
                }
                Err(e) => Some(Err(e)),
            };
        }
        let origin = self.origin(self.offset);
        if first != b'{' {
            // Not a document: skip to the end of the line (or value) so that
            // --skip-invalid can go on with the next one.
            if let Err(e) = self.read_value() {
                return Some(Err(e));
            }
            return Some(Err(SourceError::new(origin, format!("expected a document ('{{'), found '{}'", first as char))));
        }
        if let Err(e) = self.read_value() {
            return Some(Err(e));
        }
        let next = Vec::with_capacity(self.buf.len() * 2);
        Some(Ok(Record { origin, bytes: std::mem::replace(&mut self.buf, next) }))
    }

    fn parser(&self) -> Parser {
        Parser::Json
    }

}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(text: &str) -> Vec<Result<super::super::Unit, SourceError>> {
        let mut s = JsonSource::new(Box::new(std::io::Cursor::new(text.as_bytes().to_vec())), "t.json".into());
        let mut keys = Keys::default();
        std::iter::from_fn(|| super::super::next_unit(&mut s, &mut keys)).collect()
    }

    #[test]
    fn lines_and_arrays_read_the_same_documents() {
        let lines = "{\"a\": 1, \"t\": {\"$date\": \"2024-01-01T00:00:00Z\"}}\n{\"a\": \"x}\"}\n";
        let array = "[ {\"a\": 1, \"t\": {\"$date\": \"2024-01-01T00:00:00Z\"}},\n {\"a\": \"x}\"} ]\n";
        let a: Vec<_> = read_all(lines).into_iter().map(|u| u.unwrap().docs).collect();
        let b: Vec<_> = read_all(array).into_iter().map(|u| u.unwrap().docs).collect();
        assert_eq!(a, b);
        assert_eq!(a.len(), 2);
        assert!(matches!(a[0][0].get("t"), Some(Bson::DateTime(_))));
    }

    #[test]
    fn canonical_numbers_keep_their_types() {
        let u = read_all("{\"i\": {\"$numberInt\": \"5\"}, \"l\": {\"$numberLong\": \"5\"}, \"d\": {\"$numberDouble\": \"NaN\"}, \"m\": {\"$numberDecimal\": \"1.50\"}}");
        let d = &u[0].as_ref().unwrap().docs[0];
        assert_eq!(d.get("i"), Some(&Bson::Int32(5)));
        assert_eq!(d.get("l"), Some(&Bson::Int64(5)));
        assert!(matches!(d.get("d"), Some(Bson::Double(x)) if x.is_nan()));
        assert!(matches!(d.get("m"), Some(Bson::Decimal128(_))));
    }

    #[test]
    fn a_bad_line_is_skippable_and_a_truncated_one_is_not() {
        let r = read_all("{\"a\": 1}\n{\"a\": }\n{\"a\": 2}\n{\"a\": [1,");
        assert!(r[0].is_ok());
        let e = r[1].as_ref().unwrap_err();
        assert!(!e.fatal && e.origin.offset == 9, "{e:?}");
        assert!(r[2].is_ok());
        let e = r[3].as_ref().unwrap_err();
        assert!(e.fatal, "{e:?}");
        assert_eq!(r.len(), 4);
    }
}

#[cfg(test)]
mod relaxed_tests {
    use super::*;

    #[test]
    fn relaxed_numbers_take_the_smallest_bson_type() {
        let o = Origin { file: "t".into(), offset: 0 };
        let d = parse_measurement(br#"{"a": 5, "b": 5000000000, "c": 1.0, "d": -3, "e": {"$date": "1960-01-01T00:00:00.5Z"}, "f": [-4]}"#, &o, &mut Keys::default()).unwrap();
        assert_eq!(d.get("f"), Some(&Bson::Array(vec![Bson::Int32(-4)])));
        let c = parse_measurement(br#"{"l": {"$numberLong": "-3"}, "d": -3}"#, &o, &mut Keys::default()).unwrap();
        assert_eq!((c.get("l"), c.get("d")), (Some(&Bson::Int64(-3)), Some(&Bson::Int32(-3))));
        let w = parse_measurement(br#"{"$oid": "65a6eba7e6d2e848e08c3750"}"#, &o, &mut Keys::default());
        assert!(w.unwrap_err().message.contains("not a document"));
        assert_eq!(d.get("a"), Some(&Bson::Int32(5)));
        assert_eq!(d.get("b"), Some(&Bson::Int64(5_000_000_000)));
        assert_eq!(d.get("c"), Some(&Bson::Double(1.0)));
        assert_eq!(d.get("d"), Some(&Bson::Int32(-3)));
        assert_eq!(d.get("e"), Some(&Bson::DateTime(bson::DateTime::from_millis(-315_619_199_500))));
    }

    #[test]
    fn keys_with_escapes_and_bad_utf8() {
        let o = Origin { file: "t".into(), offset: 0 };
        // An escaped key is copied (not borrowed) and still the same key; an escaped wrapper name still a wrapper.
        let d = parse_measurement(br#"{"a\u0062": {"\u0024numberInt": "7"}, "s": "x\"y"}"#, &o, &mut Keys::default()).unwrap();
        assert_eq!(d.get("ab"), Some(&Bson::Int32(7)));
        assert_eq!(d.get("s"), Some(&Bson::String("x\"y".into())));
        let e = parse_measurement(b"{\"a\": \"\xff\"}", &o, &mut Keys::default()).unwrap_err();
        assert!(e.message.contains("not valid JSON") && e.message.contains("UTF-8 at byte 7"), "{}", e.message);
    }
}
