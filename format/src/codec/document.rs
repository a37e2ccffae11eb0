//! Document codec: a column of jsonb values shredded by path, each path's
//! values compressed with the codec of their kind, as MongoDB compresses each
//! nested field of its documents.
//!
//! Body: `u8 form | ...`. Form 0 is the values as bytes (`codec::bytes`), for
//! columns that do not shred or shred larger. Form 1 is `varint n | slot`,
//! the slot of the n documents. A slot holds one entry per occurrence of its
//! path (a document; an object's field, absent or not; an array's element):
//!
//! ```text
//! slot    := chunk(tags) [chunk(numbers)] [chunk(strings)] [chunk(lengths) chunk(slot)] [objects]
//! objects := varint keys | chunk(key) per key | chunk(slot) per key
//! ```
//! A tag per entry (integer codec; a path that always holds one type costs
//! a few bytes): absent, null, false, true, number, string, array, object.
//! Each section is there when some tag needs it: the numbers, strings, array
//! lengths and elements (one slot for all elements of the slot's arrays), and
//! per key of the slot's objects (in jsonb's key order) a slot with one entry
//! per object. A path whose type changes in some rows spreads over the
//! sections of those types; the others stay as compressible as before.
//!
//! Numbers: `chunk(scales) | u8 common | [varint s] | chunk(mantissas) | chunk(raw)`.
//! A numeric that is a decimal with an i64 mantissa (`jsonb::numeric_to_decimal`)
//! is its display scale plus its mantissa, scaled to the slot's largest scale
//! when all fit (so 21.5 and 21.25 are 2150 and 2125); any other keeps its
//! datum bytes (scale -1).
//!
//! Every value reads back as the same bytes: a document whose bytes are not
//! what `jsonb::write` makes of them keeps the whole column in form 0.

use super::{bytes, int};
use crate::bits::{put_chunk, put_varint, Cursor};
use crate::column::ByteValues;
use crate::error::{DecodeError, Result};
use crate::jsonb::{self, Value, key_order};

const FORM_BYTES: u8 = 0;
const FORM_SHREDDED: u8 = 1;
const ABSENT: i64 = 0;
const NULL: i64 = 1;
const FALSE: i64 = 2;
const TRUE: i64 = 3;
const NUMBER: i64 = 4;
const STRING: i64 = 5;
const ARRAY: i64 = 6;
const OBJECT: i64 = 7;
/// Entries over all slots of one column, at most: a corrupt count cannot make
/// the decoder allocate more, and documents whose paths barely repeat (keys
/// that are ids) stay bytes.
const MAX_ENTRIES: usize = 1 << 22;
const RAW_SCALE: i64 = -1;
const MAX_SCALE: i64 = 0x3FFF;

pub fn encode(values: &ByteValues, out: &mut Vec<u8>) {
    let mut plain = Vec::new();
    bytes::encode(values, &mut plain);
    match shred(values) {
        Some(shredded) if shredded.len() < plain.len() => {
            out.push(FORM_SHREDDED);
            out.extend_from_slice(&shredded);
        }
        _ => {
            out.push(FORM_BYTES);
            out.extend_from_slice(&plain);
        }
    }
}

/// Form 1's body, when every value is a jsonb datum as Postgres writes it and
/// the paths repeat enough.
fn shred(values: &ByteValues) -> Option<Vec<u8>> {
    let mut docs = Vec::with_capacity(values.len());
    let mut nodes = 0usize;
    let mut scratch = Vec::new();
    for v in values.iter() {
        let doc = jsonb::parse(v).ok()?;
        scratch.clear();
        jsonb::write(&doc, &mut scratch).ok()?;
        if scratch != v {
            return None;
        }
        nodes += count_nodes(&doc);
        docs.push(doc);
    }
    let entries: Vec<Option<&Value>> = docs.iter().map(Some).collect();
    // Absent entries cost little each, but a column whose keys rarely repeat has rows x keys of them.
    let mut budget = Budget { left: MAX_ENTRIES.min(4 * nodes + 4096) };
    let mut out = Vec::new();
    put_varint(&mut out, docs.len() as u64);
    encode_slot(&entries, 0, &mut budget, &mut out)?;
    Some(out)
}

fn count_nodes(v: &Value) -> usize {
    1 + match v {
        Value::Array(e) => e.iter().map(count_nodes).sum(),
        Value::Object(p) => p.iter().map(|(_, v)| count_nodes(v)).sum(),
        _ => 0,
    }
}

struct Budget {
    left: usize,
}

impl Budget {
    fn take(&mut self, n: usize) -> bool {
        match self.left.checked_sub(n) {
            Some(left) => {
                self.left = left;
                true
            }
            None => false,
        }
    }
}

fn tag_of(v: Option<&Value>) -> i64 {
    match v {
        None => ABSENT,
        Some(Value::Null) => NULL,
        Some(Value::Bool(false)) => FALSE,
        Some(Value::Bool(true)) => TRUE,
        Some(Value::Number(_)) => NUMBER,
        Some(Value::String(_)) => STRING,
        Some(Value::Array(_)) => ARRAY,
        Some(Value::Object(_)) => OBJECT,
    }
}

fn encode_slot(entries: &[Option<&Value>], depth: usize, budget: &mut Budget, out: &mut Vec<u8>) -> Option<()> {
    if depth > jsonb::MAX_DEPTH || !budget.take(entries.len()) {
        return None;
    }
    let tags: Vec<i64> = entries.iter().map(|e| tag_of(*e)).collect();
    let mut chunk = Vec::new();
    int::encode(&tags, &mut chunk);
    put_chunk(out, &chunk);

    let numbers: Vec<&[u8]> = entries.iter().filter_map(|e| if let Some(Value::Number(n)) = e { Some(&n[..]) } else { None }).collect();
    if !numbers.is_empty() {
        chunk.clear();
        encode_numbers(&numbers, &mut chunk);
        put_chunk(out, &chunk);
    }
    let mut strings = ByteValues::default();
    entries.iter().for_each(|e| if let Some(Value::String(s)) = e { strings.push(s) });
    if !strings.is_empty() {
        chunk.clear();
        bytes::encode(&strings, &mut chunk);
        put_chunk(out, &chunk);
    }
    let arrays: Vec<&Vec<Value>> = entries.iter().filter_map(|e| if let Some(Value::Array(a)) = e { Some(a) } else { None }).collect();
    if !arrays.is_empty() {
        let lengths: Vec<i64> = arrays.iter().map(|a| a.len() as i64).collect();
        chunk.clear();
        int::encode(&lengths, &mut chunk);
        put_chunk(out, &chunk);
        let elems: Vec<Option<&Value>> = arrays.iter().flat_map(|a| a.iter().map(Some)).collect();
        chunk.clear();
        encode_slot(&elems, depth + 1, budget, &mut chunk)?;
        put_chunk(out, &chunk);
    }
    let objects: Vec<&Vec<(Vec<u8>, Value)>> =
        entries.iter().filter_map(|e| if let Some(Value::Object(o)) = e { Some(o) } else { None }).collect();
    if !objects.is_empty() {
        let mut keys: Vec<&[u8]> = objects.iter().flat_map(|o| o.iter().map(|(k, _)| &k[..])).collect();
        keys.sort_unstable_by(|a, b| key_order(a, b));
        keys.dedup();
        put_varint(out, keys.len() as u64);
        keys.iter().for_each(|k| put_chunk(out, k));
        // Each object's pairs are in key order, so one cursor per object walks them beside the key list.
        let mut cursors = vec![0usize; objects.len()];
        for key in keys {
            let fields: Vec<Option<&Value>> = objects
                .iter()
                .zip(cursors.iter_mut())
                .map(|(o, at)| match o.get(*at) {
                    Some((k, v)) if k[..] == *key => {
                        *at += 1;
                        Some(v)
                    }
                    _ => None,
                })
                .collect();
            chunk.clear();
            encode_slot(&fields, depth + 1, budget, &mut chunk)?;
            put_chunk(out, &chunk);
        }
        // Pairs out of key order (never written by Postgres) would be left behind: not this form.
        if objects.iter().zip(&cursors).any(|(o, &at)| at != o.len()) {
            return None;
        }
    }
    Some(())
}

fn encode_numbers(numbers: &[&[u8]], out: &mut Vec<u8>) {
    let mut scales = Vec::with_capacity(numbers.len());
    let mut mantissas = Vec::new();
    let mut raw = ByteValues::default();
    for n in numbers {
        match jsonb::numeric_to_decimal(n) {
            Some((m, s)) => {
                scales.push(s as i64);
                mantissas.push(m);
            }
            None => {
                scales.push(RAW_SCALE);
                raw.push(n);
            }
        }
    }
    let common = scales.iter().copied().max().unwrap_or(0).max(0);
    let scaled: Option<Vec<i64>> = scales
        .iter()
        .filter(|&&s| s != RAW_SCALE)
        .zip(&mantissas)
        .map(|(&s, &m)| 10i64.checked_pow((common - s) as u32).and_then(|f| m.checked_mul(f)))
        .collect();
    let mut chunk = Vec::new();
    int::encode(&scales, &mut chunk);
    put_chunk(out, &chunk);
    chunk.clear();
    match scaled {
        Some(scaled) => {
            out.push(1);
            put_varint(out, common as u64);
            int::encode(&scaled, &mut chunk);
        }
        None => {
            out.push(0);
            int::encode(&mantissas, &mut chunk);
        }
    }
    put_chunk(out, &chunk);
    chunk.clear();
    bytes::encode(&raw, &mut chunk);
    put_chunk(out, &chunk);
}

pub fn decode(c: &mut Cursor, limit: usize) -> Result<ByteValues> {
    decode_keys(c, limit, None)
}

/// Like `decode`, but the objects at the top of each document keep only the
/// fields `keys` names (when given): what a query that reads only those
/// top-level keys needs; their other fields' sub-columns are skipped, not
/// decoded. Documents stored as bytes (form 0), and documents that are no
/// object, come back whole.
pub fn decode_keys(c: &mut Cursor, limit: usize, keys: Option<&[Vec<u8>]>) -> Result<ByteValues> {
    match c.u8("document form")? {
        FORM_BYTES => bytes::decode(c, limit),
        FORM_SHREDDED => {
            let n = c.len("document count", limit)?;
            let mut budget = Budget { left: MAX_ENTRIES };
            let docs = decode_slot(c, n, 0, &mut budget, keys)?;
            let mut out = ByteValues::default();
            let mut scratch = Vec::new();
            for doc in docs {
                let doc = doc.ok_or(DecodeError::Invalid("a document is absent"))?;
                scratch.clear();
                jsonb::write(&doc, &mut scratch)?;
                if out.byte_len() + scratch.len() > u32::MAX as usize / 2 {
                    return Err(DecodeError::TooLarge("documents"));
                }
                out.push(&scratch);
            }
            Ok(out)
        }
        tag => Err(DecodeError::UnknownTag { what: "document form", tag }),
    }
}

/// The entries of a slot; `keys`, when given, the only fields its objects keep.
fn decode_slot(c: &mut Cursor, n: usize, depth: usize, budget: &mut Budget, keys: Option<&[Vec<u8>]>) -> Result<Vec<Option<Value>>> {
    if depth > jsonb::MAX_DEPTH + 1 {
        return Err(DecodeError::TooLarge("document nesting"));
    }
    if !budget.take(n) {
        return Err(DecodeError::TooLarge("document entries"));
    }
    let tags = int::decode(&mut Cursor::new(c.chunk("document tags")?), n)?;
    if tags.len() != n {
        return Err(DecodeError::Invalid("document tag count"));
    }
    let count = |t: i64| tags.iter().filter(|&&x| x == t).count();
    if let Some(&bad) = tags.iter().find(|&&t| !(ABSENT..=OBJECT).contains(&t)) {
        return Err(DecodeError::UnknownTag { what: "document entry", tag: bad as u8 });
    }
    let mut numbers = if count(NUMBER) > 0 { decode_numbers(c.chunk("document numbers")?, count(NUMBER))? } else { Vec::new() }.into_iter();
    let strings = if count(STRING) > 0 {
        let mut sc = Cursor::new(c.chunk("document strings")?);
        let s = bytes::decode(&mut sc, count(STRING))?;
        if s.len() != count(STRING) || !sc.is_empty() {
            return Err(DecodeError::Invalid("document string count"));
        }
        s
    } else {
        ByteValues::default()
    };
    let mut strings_at = 0usize;
    let mut arrays = Vec::new().into_iter();
    if count(ARRAY) > 0 {
        let lengths = int::decode(&mut Cursor::new(c.chunk("document array lengths")?), count(ARRAY))?;
        if lengths.len() != count(ARRAY) {
            return Err(DecodeError::Invalid("document array count"));
        }
        let mut total = 0usize;
        for &l in &lengths {
            if l < 0 || l as usize > MAX_ENTRIES {
                return Err(DecodeError::Invalid("document array length"));
            }
            total += l as usize;
        }
        let mut ec = Cursor::new(c.chunk("document array elements")?);
        let mut elems = decode_slot(&mut ec, total, depth + 1, budget, None)?.into_iter();
        if !ec.is_empty() {
            return Err(DecodeError::Invalid("trailing bytes after document elements"));
        }
        let mut built = Vec::with_capacity(lengths.len());
        for l in lengths {
            let items: Option<Vec<Value>> = elems.by_ref().take(l as usize).collect();
            built.push(items.ok_or(DecodeError::Invalid("an array element is absent"))?);
        }
        arrays = built.into_iter();
    }
    let mut objects = Vec::new().into_iter();
    let nobjects = count(OBJECT);
    if nobjects > 0 {
        let nkeys = c.len("document key count", c.remaining())?;
        let mut names: Vec<&[u8]> = Vec::with_capacity(nkeys);
        for _ in 0..nkeys {
            let key = c.chunk("document key")?;
            if names.last().is_some_and(|last| key_order(last, key).is_ge()) {
                return Err(DecodeError::Invalid("document keys out of order"));
            }
            names.push(key);
        }
        let wanted = keys;
        let mut built: Vec<Vec<(Vec<u8>, Value)>> = vec![Vec::new(); nobjects];
        for key in names {
            let chunk = c.chunk("document fields")?;
            if wanted.is_some_and(|w| !w.iter().any(|k| k[..] == *key)) {
                continue;
            }
            let mut fc = Cursor::new(chunk);
            let fields = decode_slot(&mut fc, nobjects, depth + 1, budget, None)?;
            if !fc.is_empty() {
                return Err(DecodeError::Invalid("trailing bytes after document fields"));
            }
            for (object, field) in built.iter_mut().zip(fields) {
                if let Some(v) = field {
                    object.push((key.to_vec(), v));
                }
            }
        }
        objects = built.into_iter();
    }
    if !c.is_empty() {
        return Err(DecodeError::Invalid("trailing bytes in document slot"));
    }
    let mut out = Vec::with_capacity(n);
    for t in tags {
        out.push(match t {
            ABSENT => None,
            NULL => Some(Value::Null),
            FALSE => Some(Value::Bool(false)),
            TRUE => Some(Value::Bool(true)),
            NUMBER => Some(Value::Number(numbers.next().expect("counted"))),
            STRING => {
                strings_at += 1;
                Some(Value::String(strings.get(strings_at - 1).expect("counted").to_vec()))
            }
            ARRAY => Some(Value::Array(arrays.next().expect("counted"))),
            _ => Some(Value::Object(objects.next().expect("counted"))),
        });
    }
    Ok(out)
}

fn decode_numbers(bytes: &[u8], n: usize) -> Result<Vec<Vec<u8>>> {
    let mut c = Cursor::new(bytes);
    let scales = int::decode(&mut Cursor::new(c.chunk("number scales")?), n)?;
    if scales.len() != n || scales.iter().any(|&s| !(RAW_SCALE..=MAX_SCALE).contains(&s)) {
        return Err(DecodeError::Invalid("number scales"));
    }
    let decimals = scales.iter().filter(|&&s| s != RAW_SCALE).count();
    let common = match c.u8("number form")? {
        0 => None,
        1 => Some(c.len("common scale", MAX_SCALE as usize)? as i64),
        tag => return Err(DecodeError::UnknownTag { what: "number form", tag }),
    };
    let mantissas = int::decode(&mut Cursor::new(c.chunk("number mantissas")?), decimals)?;
    let mut rc = Cursor::new(c.chunk("raw numbers")?);
    let raw = bytes::decode(&mut rc, n - decimals)?;
    if mantissas.len() != decimals || raw.len() != n - decimals || !rc.is_empty() || !c.is_empty() {
        return Err(DecodeError::Invalid("number counts"));
    }
    let (mut m, mut r) = (mantissas.into_iter(), raw.iter());
    let mut out = Vec::with_capacity(n);
    for s in scales {
        if s == RAW_SCALE {
            out.push(r.next().expect("counted").to_vec());
            continue;
        }
        let mut mantissa = m.next().expect("counted");
        if let Some(common) = common {
            let factor = common.checked_sub(s).and_then(|d| u32::try_from(d).ok()).and_then(|d| 10i64.checked_pow(d));
            match factor {
                Some(f) if mantissa % f == 0 => mantissa /= f,
                _ => return Err(DecodeError::Invalid("number off its common scale")),
            }
        }
        let mut num = Vec::with_capacity(16);
        jsonb::decimal_to_numeric(mantissa, s as u16, &mut num);
        out.push(num);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn numeric(m: i64, s: u16) -> Value {
        let mut v = Vec::new();
        jsonb::decimal_to_numeric(m, s, &mut v);
        Value::Number(v)
    }

    fn object(mut pairs: Vec<(Vec<u8>, Value)>) -> Value {
        pairs.sort_by(|a, b| key_order(&a.0, &b.0));
        pairs.dedup_by(|a, b| a.0 == b.0);
        Value::Object(pairs)
    }

    fn datums(docs: &[Value]) -> ByteValues {
        let mut out = ByteValues::default();
        for d in docs {
            let mut b = Vec::new();
            jsonb::write(d, &mut b).unwrap();
            out.push(&b);
        }
        out
    }

    fn round_trip(values: &ByteValues) -> Vec<u8> {
        let mut body = Vec::new();
        encode(values, &mut body);
        let mut c = Cursor::new(&body);
        let back = decode(&mut c, values.len()).unwrap();
        assert!(c.is_empty());
        assert_eq!(&back, values);
        body
    }

    fn value() -> impl Strategy<Value = Value> {
        let key = prop_oneof![Just(b"t".to_vec()), Just(b"hum".to_vec()), Just(b"gps".to_vec()), proptest::collection::vec(any::<u8>(), 0..6)];
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            (any::<i64>(), 0u16..20).prop_map(|(m, s)| numeric(m, s)),
            (-1000i64..1000, 0u16..3).prop_map(|(m, s)| numeric(m, s)),
            proptest::collection::vec(any::<u8>(), 0..12).prop_map(Value::Number),
            proptest::collection::vec(any::<u8>(), 0..40).prop_map(Value::String),
        ];
        leaf.prop_recursive(5, 64, 8, move |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                proptest::collection::vec((key.clone(), inner), 0..6).prop_map(object),
            ]
        })
    }

    proptest! {
        #[test]
        fn documents_round_trip(docs in proptest::collection::vec(value(), 0..40)) {
            round_trip(&datums(&docs));
        }

        #[test]
        fn any_bytes_round_trip(values in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..64), 0..20)) {
            let mut v = ByteValues::default();
            values.iter().for_each(|x| v.push(x));
            round_trip(&v);
        }

        #[test]
        fn corrupt_bodies_are_errors(body in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = decode(&mut Cursor::new(&body), 1000);
        }
    }

    #[test]
    fn sensor_documents_shred_small() {
        // 1000 readings: two decimals, a counter, a status, a flag, gps in one row in ten.
        let docs: Vec<Value> = (0..1000i64)
            .map(|i| {
                let mut p = vec![
                    (b"temp".to_vec(), numeric(2150 + (i * 7) % 40 - 20, 2)),
                    (b"hum".to_vec(), numeric(450 + (i * 3) % 11, 1)),
                    (b"count".to_vec(), numeric(1000 + i, 0)),
                    (b"status".to_vec(), Value::String(if i % 100 < 90 { b"ok".to_vec() } else { b"warn".to_vec() })),
                    (b"on".to_vec(), Value::Bool(i % 500 != 0)),
                ];
                if i % 10 == 0 {
                    p.push((b"gps".to_vec(), object(vec![(b"lat".to_vec(), numeric(4812345 + i, 5)), (b"lon".to_vec(), numeric(1154321, 5))])));
                }
                object(p)
            })
            .collect();
        let values = datums(&docs);
        let body = round_trip(&values);
        let mut plain = Vec::new();
        bytes::encode(&values, &mut plain);
        assert_eq!(body[0], FORM_SHREDDED);
        assert!(body.len() * 5 < plain.len(), "shredded {} bytes, plain {}", body.len(), plain.len());
        assert!(body.len() < 4000, "{} bytes for 1000 documents", body.len());
    }

    #[test]
    fn scale_and_type_changes_read_back() {
        let docs = vec![
            object(vec![(b"v".to_vec(), numeric(150, 2))]),
            object(vec![(b"v".to_vec(), numeric(15, 1))]),
            object(vec![(b"v".to_vec(), Value::String(b"n/a".to_vec()))]),
            object(vec![]),
            Value::Array(vec![]),
            object(vec![(b"v".to_vec(), Value::Null)]),
            numeric(i64::MIN, 0),
            numeric(i64::MAX, 30),
            Value::Number(vec![6 << 2, 0, 0, 0, 0x00, 0xC0]),
        ];
        let values = datums(&docs);
        let mut body = Vec::new();
        encode(&values, &mut body);
        assert_eq!(body[0], FORM_SHREDDED);
        round_trip(&values);
    }

    proptest! {
        #[test]
        fn documents_decode_with_only_the_keys_asked(docs in proptest::collection::vec(value(), 0..30), ask in proptest::collection::vec(prop_oneof![Just(b"t".to_vec()), Just(b"gps".to_vec()), Just(b"zz".to_vec())], 0..3)) {
            let values = datums(&docs);
            let mut body = Vec::new();
            encode(&values, &mut body);
            let got = decode_keys(&mut Cursor::new(&body), values.len(), Some(&ask)).unwrap();
            let expected: Vec<Value> = if body[0] == FORM_BYTES {
                docs.clone()
            } else {
                docs.iter().map(|d| match d {
                    Value::Object(p) => Value::Object(p.iter().filter(|(k, _)| ask.contains(k)).cloned().collect()),
                    other => other.clone(),
                }).collect()
            };
            prop_assert_eq!(got, datums(&expected));
        }
    }

    #[test]
    fn keys_that_never_repeat_stay_bytes() {
        let docs: Vec<Value> = (0..500).map(|i: i32| object(vec![(format!("id{i}").into_bytes(), Value::Bool(true))])).collect();
        let values = datums(&docs);
        let body = round_trip(&values);
        assert_eq!(body[0], FORM_BYTES);
    }
}
