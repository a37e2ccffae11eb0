//! mongoexport's output: Extended JSON v2 (relaxed or canonical), one document
//! per line or one `--jsonArray`. Values are split off the stream by a small
//! scanner that tracks strings and nesting (so each keeps its offset for
//! messages), then parsed by serde_json and read as Extended JSON by `bson`.

use std::io::BufRead;

use bson::{Bson, Document};

use super::{Origin, Source, SourceError, Unit};

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
            for (i, &b) in chunk.iter().enumerate() {
                if in_str {
                    if esc {
                        esc = false;
                    } else if b == b'\\' {
                        esc = true;
                    } else if b == b'"' {
                        in_str = false;
                    }
                    continue;
                }
                match b {
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

/// Reads one Extended JSON value as a document.
pub fn parse_document(text: &[u8], origin: &Origin) -> Result<Document, SourceError> {
    let value: serde_json::Value = serde_json::from_slice(text)
        .map_err(|e| SourceError::new(origin.clone(), format!("not valid JSON: {e}")))?;
    if !value.is_object() {
        return Err(SourceError::new(origin.clone(), "not a JSON object (a document is expected)"));
    }
    match Bson::try_from(value) {
        Ok(Bson::Document(d)) => Ok(d),
        Ok(_) => Err(SourceError::new(origin.clone(), "an Extended JSON value that is not a document")),
        Err(e) => Err(SourceError::new(origin.clone(), format!("not valid Extended JSON: {e}"))),
    }
}

impl Source for JsonSource {
    fn next_unit(&mut self) -> Option<Result<Unit, SourceError>> {
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
                return self.next_unit();
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
        Some(parse_document(&self.buf, &origin).map(|d| Unit { origin, docs: vec![d] }))
    }

    fn bytes_read(&self) -> u64 {
        self.offset
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(text: &str) -> Vec<Result<Unit, SourceError>> {
        let mut s = JsonSource::new(Box::new(std::io::Cursor::new(text.as_bytes().to_vec())), "t.json".into());
        std::iter::from_fn(|| s.next_unit()).collect()
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
