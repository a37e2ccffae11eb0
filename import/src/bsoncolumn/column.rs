//! Decoding a whole column: items, literals, runs and interleaved sections.

use bson::{Bson, Document};

use super::stream::{self, Stream};

#[derive(Debug, Clone, PartialEq)]
pub struct ColumnError {
    pub offset: usize,
    pub message: String,
}

impl std::fmt::Display for ColumnError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "at byte {} of the column: {}", self.offset, self.message)
    }
}

impl std::error::Error for ColumnError {}

fn err(offset: usize, message: impl Into<String>) -> ColumnError {
    ColumnError { offset, message: message.into() }
}

fn is_literal(c: u8) -> bool {
    (c & 0xE0) == 0 || c == 0x7F || c == 0xFF
}

fn is_interleaved(c: u8) -> bool {
    matches!(c, 0xF0..=0xF2)
}

fn le_i32(buf: &[u8], at: usize) -> Option<usize> {
    let b = buf.get(at..at + 4)?;
    let n = i32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    usize::try_from(n).ok()
}

/// The length of a BSON value of type `t` starting at `at`.
fn value_len(t: u8, buf: &[u8], at: usize) -> Option<usize> {
    Some(match t {
        0x01 | 0x09 | 0x11 | 0x12 => 8,
        0x02 | 0x0D | 0x0E => 4 + le_i32(buf, at)?,
        0x03 | 0x04 | 0x0F => le_i32(buf, at)?,
        0x05 => 5 + le_i32(buf, at)?,
        0x06 | 0x0A | 0x7F | 0xFF => 0,
        0x07 => 12,
        0x08 => 1,
        0x0B => {
            let rest = buf.get(at..)?;
            let a = rest.iter().position(|&b| b == 0)?;
            let b = rest[a + 1..].iter().position(|&b| b == 0)?;
            a + b + 2
        }
        0x0C => 4 + le_i32(buf, at)? + 12,
        0x10 => 4,
        0x13 => 16,
        _ => return None,
    })
}

/// Deeper nesting than MongoDB stores (it allows about 100 levels) is
/// refused before any recursive reader meets it.
pub const MAX_NESTING: usize = 200;

/// Whether a BSON document's objects and arrays nest at most `max` deep,
/// found without recursion (bytes the walk cannot frame are left to the
/// BSON reader to refuse).
pub fn nesting_within(doc: &[u8], max: usize) -> bool {
    let mut stack: Vec<usize> = Vec::new();
    let mut p = 4;
    loop {
        let Some(&t) = doc.get(p) else { return true };
        if t == 0 {
            if stack.pop().is_none() {
                return true;
            }
            p += 1;
            continue;
        }
        let Some(name) = doc.get(p + 1..).and_then(|r| r.iter().position(|&b| b == 0)) else { return true };
        let v = p + 2 + name;
        let Some(n) = value_len(t, doc, v) else { return true };
        if t == 0x03 || t == 0x04 {
            if stack.len() + 1 > max {
                return false;
            }
            stack.push(v + n);
            p = v + 4;
        } else {
            p = v + n;
        }
    }
}

/// Reads the literal at `pos`: its value and its length in bytes.
fn literal(buf: &[u8], pos: usize) -> Result<(Bson, usize), ColumnError> {
    let t = buf[pos];
    if buf.get(pos + 1) != Some(&0) {
        return Err(err(pos, format!("literal of type 0x{t:02x} without the empty field name a column's literals have")));
    }
    let n = value_len(t, buf, pos + 2)
        .filter(|n| pos + 2 + n <= buf.len())
        .ok_or_else(|| err(pos, format!("literal of type 0x{t:02x} is not a BSON value, or runs past the column's end")))?;
    // The element as a one-field document, so that the bson crate validates it.
    let mut doc = Vec::with_capacity(n + 7);
    doc.extend_from_slice(&((n + 7) as i32).to_le_bytes());
    doc.extend_from_slice(&buf[pos..pos + 2 + n]);
    doc.push(0);
    if !nesting_within(&doc, MAX_NESTING) {
        return Err(err(pos, format!("literal nests objects deeper than {MAX_NESTING} levels")));
    }
    let d = Document::from_reader(&doc[..]).map_err(|e| err(pos, format!("literal of type 0x{t:02x} is not valid BSON: {e}")))?;
    let v = d.into_iter().next().map(|(_, v)| v).ok_or_else(|| err(pos, "empty literal"))?;
    Ok((v, 2 + n))
}

/// The blocks of the Simple-8b run at `pos`: (control byte, blocks, length).
fn run(buf: &[u8], pos: usize) -> Result<(u8, &[u8], usize), ColumnError> {
    let c = buf[pos];
    if !(0x80..=0xDF).contains(&c) {
        return Err(err(pos, format!("control byte 0x{c:02x} is neither a literal, a Simple-8b run nor an interleaved start")));
    }
    let n = ((c & 0x0F) as usize + 1) * 8;
    // At least the terminating 0x00 must follow the blocks.
    if pos + 1 + n >= buf.len() {
        return Err(err(pos, format!("control byte 0x{c:02x}: its {} blocks run past the column's end", n / 8)));
    }
    Ok((c, &buf[pos + 1..pos + 1 + n], 1 + n))
}

/// The values of a column, `None` where the measurement lacks the field.
pub fn decode(buf: &[u8]) -> Result<Vec<Option<Bson>>, ColumnError> {
    decode_at_most(buf, usize::MAX)
}

/// As `decode`, refusing a column of more than `limit` values before making
/// them (a few bytes of RLE blocks can ask for billions).
pub fn decode_at_most(buf: &[u8], limit: usize) -> Result<Vec<Option<Bson>>, ColumnError> {
    if buf.is_empty() {
        return Err(err(0, "an empty column (not even its terminating 0x00)"));
    }
    let mut out = Vec::new();
    let mut st = Stream::default();
    let mut pos = 0;
    loop {
        if st.has_pending() {
            out.push(st.take().map_err(|m| err(pos, m))?);
            continue;
        }
        let Some(&c) = buf.get(pos) else {
            return Err(err(pos, "the column ends without its terminating 0x00"));
        };
        if c == 0 {
            if pos + 1 != buf.len() {
                return Err(err(pos, format!("the terminating 0x00 comes {} bytes before the column's end", buf.len() - pos - 1)));
            }
            return Ok(out);
        }
        if is_interleaved(c) {
            let (rows, next) = interleaved(buf, pos, limit.saturating_sub(out.len()))?;
            let last = rows.last().cloned().flatten();
            out.extend(rows);
            st = Stream::default();
            st.load(last);
            pos = next;
        } else if is_literal(c) {
            let (v, n) = literal(buf, pos)?;
            st.load(Some(v.clone()));
            out.push(Some(v));
            pos += n;
        } else {
            let (c, blocks, n) = run(buf, pos)?;
            st.load_control(c, blocks).map_err(|m| err(pos, m))?;
            if out.len().saturating_add(st.pending()) > limit {
                return Err(err(pos, format!("the column holds more than the {limit} values of its bucket")));
            }
            pos += n;
        }
        if out.len() > limit {
            return Err(err(pos, format!("the column holds more than the {limit} values of its bucket")));
        }
    }
}

/// The shape of an interleaved section's reference object, to rebuild rows.
enum Shape {
    Leaf,
    Object(Vec<(String, Shape)>, bool),
    Array(Vec<Shape>, bool),
}

fn shape_of(v: &Bson, legacy: bool) -> Shape {
    match v {
        Bson::Document(d) => Shape::Object(d.iter().map(|(k, v)| (k.clone(), shape_of(v, legacy))).collect(), d.is_empty()),
        Bson::Array(a) if !legacy => Shape::Array(a.iter().map(|v| shape_of(v, legacy)).collect(), a.is_empty()),
        _ => Shape::Leaf,
    }
}

/// Rebuilds one value from the leaves' values, in the reference's order; a
/// sub-object that gets no field is left out (unless the reference's was
/// empty), and so is the whole row.
fn rebuild(shape: &Shape, vals: &mut std::vec::IntoIter<Option<Bson>>) -> Option<Bson> {
    match shape {
        Shape::Leaf => vals.next().flatten(),
        Shape::Object(fields, empty) => {
            let mut d = Document::new();
            for (k, s) in fields {
                if let Some(v) = rebuild(s, vals) {
                    d.insert(k.clone(), v);
                }
            }
            (!d.is_empty() || *empty).then_some(Bson::Document(d))
        }
        Shape::Array(items, empty) => {
            let a: Vec<Bson> = items.iter().filter_map(|s| rebuild(s, vals)).collect();
            (!a.is_empty() || *empty).then_some(Bson::Array(a))
        }
    }
}

/// A document's bytes with its top-level names replaced by their positions.
fn renumbered(doc: &[u8]) -> Option<Vec<u8>> {
    let mut out = vec![0u8; 4];
    let mut p = 4;
    let mut i = 0usize;
    while *doc.get(p)? != 0 {
        let t = doc[p];
        let name_end = p + 1 + doc[p + 1..].iter().position(|&b| b == 0)?;
        let n = value_len(t, doc, name_end + 1)?;
        out.push(t);
        out.extend_from_slice(i.to_string().as_bytes());
        out.push(0);
        out.extend_from_slice(doc.get(name_end + 1..name_end + 1 + n)?);
        p = name_end + 1 + n;
        i += 1;
    }
    out.push(0);
    let total = i32::try_from(out.len()).ok()?;
    out[..4].copy_from_slice(&total.to_le_bytes());
    Some(out)
}

/// Decodes the interleaved section starting at `start`: its rows and the
/// position after its 0x00.
fn interleaved(buf: &[u8], start: usize, limit: usize) -> Result<(Vec<Option<Bson>>, usize), ColumnError> {
    let c = buf[start];
    let legacy = c == 0xF0;
    let ref_at = start + 1;
    let len = le_i32(buf, ref_at)
        .filter(|&n| n >= 5 && ref_at + n <= buf.len())
        .ok_or_else(|| err(start, format!("interleaved start 0x{c:02x}: its reference object runs past the column's end")))?;
    // An array root's names are only positions (MongoDB never reads them):
    // renamed "0", "1", ..., so that any bytes there read.
    let bytes = if c == 0xF2 { renumbered(&buf[ref_at..ref_at + len]) } else { None };
    if !nesting_within(&buf[ref_at..ref_at + len], MAX_NESTING) {
        return Err(err(start, format!("interleaved start 0x{c:02x}: the reference object nests deeper than {MAX_NESTING} levels")));
    }
    let reference = Document::from_reader(bytes.as_deref().unwrap_or(&buf[ref_at..ref_at + len]))
        .map_err(|e| err(start, format!("interleaved start 0x{c:02x}: the reference object is not valid BSON: {e}")))?;
    let root = if c == 0xF2 { Bson::Array(reference.iter().map(|(_, v)| v.clone()).collect()) } else { Bson::Document(reference.clone()) };
    let shape = shape_of(&root, legacy);
    let mut leaves = Vec::new();
    stream::leaves(&reference, legacy, &mut leaves);
    if leaves.is_empty() {
        return Err(err(start, format!("interleaved start 0x{c:02x}: the reference object has no scalar field")));
    }
    if leaves.iter().any(|v| matches!(v, Bson::JavaScriptCodeWithScope(_))) {
        return Err(err(start, "interleaved reference object holds code with scope, which columns never hold"));
    }
    let mut streams: Vec<Stream> = leaves
        .into_iter()
        .map(|v| {
            let mut s = Stream::default();
            s.load(Some(v));
            s
        })
        .collect();
    let mut pos = ref_at + len;
    if buf.get(pos) == Some(&0) {
        return Err(err(pos, "an interleaved section without a single row"));
    }
    let mut rows = Vec::new();
    loop {
        let mut vals = Vec::with_capacity(streams.len());
        for i in 0..streams.len() {
            if streams[i].has_pending() {
                vals.push(streams[i].take().map_err(|m| err(pos, m))?);
                continue;
            }
            let Some(&b) = buf.get(pos) else {
                return Err(err(pos, "the column ends inside an interleaved section"));
            };
            if b == 0 {
                if i != 0 {
                    return Err(err(pos, format!("the interleaved section ends while its stream {i} still needs a value")));
                }
                if streams.iter().any(Stream::has_pending) {
                    return Err(err(pos, "the interleaved section ends with values left in some of its streams"));
                }
                return Ok((rows, pos + 1));
            }
            if is_interleaved(b) {
                return Err(err(pos, format!("control byte 0x{b:02x}: an interleaved start inside an interleaved section")));
            }
            if is_literal(b) {
                if b == 0x0F {
                    return Err(err(pos, "code with scope inside an interleaved section"));
                }
                let (v, n) = literal(buf, pos)?;
                streams[i].load(Some(v.clone()));
                vals.push(Some(v));
                pos += n;
            } else {
                let (c, blocks, n) = run(buf, pos)?;
                streams[i].load_control(c, blocks).map_err(|m| err(pos, m))?;
                if streams[i].pending() > limit {
                    return Err(err(pos, format!("an interleaved stream holds more than the {limit} values of its bucket")));
                }
                pos += n;
                vals.push(streams[i].take().map_err(|m| err(pos, m))?);
            }
        }
        rows.push(rebuild(&shape, &mut vals.into_iter()));
        if rows.len() > limit {
            return Err(err(pos, format!("the column holds more than the {limit} values of its bucket")));
        }
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn doc_bytes(d: &Document) -> Vec<u8> {
    let mut v = Vec::new();
    let _ = d.to_writer(&mut v);
    v
}

/// A value in an exact notation (doubles by their bits, strings and
/// documents by their bytes), for tests and messages.
pub fn describe(v: &Option<Bson>) -> String {
    let Some(v) = v else { return "Missing".into() };
    match v {
        Bson::Int32(i) => format!("Int32({i})"),
        Bson::Int64(i) => format!("Int64({i})"),
        Bson::DateTime(d) => format!("Date({})", d.timestamp_millis()),
        Bson::Boolean(b) => format!("Bool({b})"),
        Bson::Null => "Null".into(),
        Bson::Undefined => "Undefined".into(),
        Bson::MinKey => "MinKey".into(),
        Bson::MaxKey => "MaxKey".into(),
        Bson::Double(x) => format!("Double(0x{:016x})", x.to_bits()),
        Bson::String(s) => format!("String({})", hex(s.as_bytes())),
        Bson::JavaScriptCode(s) => format!("Code({})", hex(s.as_bytes())),
        Bson::ObjectId(o) => format!("ObjectId({})", o.to_hex()),
        Bson::Timestamp(t) => format!("Timestamp({},{})", t.time, t.increment),
        Bson::Decimal128(d) => format!("Decimal128({})", hex(&d.bytes())),
        Bson::Binary(b) => format!("Binary({:02x},{})", u8::from(b.subtype), hex(&b.bytes)),
        Bson::Document(d) => format!("Object({})", hex(&doc_bytes(d))),
        Bson::Array(a) => {
            let mut d = Document::new();
            for (i, e) in a.iter().enumerate() {
                d.insert(i.to_string(), e.clone());
            }
            format!("Array({})", hex(&doc_bytes(&d)))
        }
        Bson::RegularExpression(r) => format!("Regex({},{})", hex(r.pattern.as_str().as_bytes()), hex(r.options.as_str().as_bytes())),
        other => format!("{other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unhex(s: &str) -> Vec<u8> {
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    fn values(hexs: &str) -> Vec<String> {
        decode(&unhex(hexs)).unwrap().iter().map(describe).collect()
    }

    #[test]
    fn columns_mongodb_wrote_decode() {
        // Dates a minute apart (delta of delta over two blocks).
        let v = values("090020e840ce7d010000810c4c1d00000000000e0000000000000000");
        let want: Vec<String> = (0..5).map(|k| format!("Date({})", 1_639_842_900_000i64 + k * 60_000)).collect();
        assert_eq!(v, want);
        // Doubles scaled by 100.
        let v = values("0100295c8fc2f5c06f40b0fb0418001c02b60000");
        let want: Vec<String> = [254.03f64, 253.63, 253.61, 252.93, 252.47].iter().map(|x| format!("Double(0x{:016x})", x.to_bits())).collect();
        assert_eq!(v, want);
        // Short strings as 128-bit integers.
        let v = values("0200020000006100812c00000200200000ce3f0c000000000000");
        assert_eq!(v, ["61", "62", "63", "64", "6262"].iter().map(|h| format!("String({h})")).collect::<Vec<_>>());
        // ObjectIds whose counter and timestamp move.
        let v = values("070067f6e10b91f966678d89720b804d000700fca7010000");
        assert_eq!(v, vec!["ObjectId(67f6e10b91f966678d89720b)", "ObjectId(67f6e14391f966678d89720d)", "ObjectId(67f6e14691f966678d89720f)"]);
    }

    #[test]
    fn columns_asking_for_more_values_than_their_bucket_are_refused() {
        // An int32 literal, then 40 controls of 16 RLE blocks: 1.2M zeros from 5 kB.
        let mut b = unhex("100001000000");
        for _ in 0..40 {
            b.push(0x8F);
            for _ in 0..16 {
                b.extend_from_slice(&0xFFu64.to_le_bytes());
            }
        }
        b.push(0);
        assert_eq!(decode(&b).unwrap().len(), 1 + 40 * 16 * 1920);
        let e = decode_at_most(&b, 1000).unwrap_err();
        assert!(e.message.contains("more than the 1000 values"), "{e}");
    }

    #[test]
    fn deep_nesting_is_refused_without_recursion() {
        // An object literal nested 100,000 deep: refused, not a stack overflow.
        let depth = 100_000;
        let mut inner: Vec<u8> = vec![5, 0, 0, 0, 0];
        for _ in 0..depth {
            let mut d = Vec::with_capacity(inner.len() + 8);
            d.extend_from_slice(&((inner.len() + 8) as i32).to_le_bytes());
            d.extend_from_slice(&[0x03, b'a', 0]);
            d.extend_from_slice(&inner);
            d.push(0);
            inner = d;
        }
        assert!(!nesting_within(&inner, MAX_NESTING));
        let mut col = vec![0x03, 0];
        col.extend_from_slice(&inner);
        col.push(0);
        assert!(decode(&col).unwrap_err().message.contains("deeper"));
        assert!(nesting_within(&unhex("0500000000"), 1));
    }

    #[test]
    fn corrupt_columns_are_errors() {
        for bad in ["", "10000100000080", "1000010000", "8000", "4000", "f10500000000", "10000100000000ff", "900e0000000000000000"] {
            assert!(decode(&unhex(bad)).is_err(), "{bad}");
        }
    }
}
