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
//! slot    := tags [chunk(numbers)] [chunk(strings)] [chunk(lengths) chunk(slot)] [objects]
//! objects := varint keys | chunk(key) per key | chunk(slot) per key
//! ```
//! A tag per entry: absent, null, false, true, number, string, array, object
//! (`put_tags`: one byte when every entry has the same, the exceptions to the
//! most common one by position when they are few, else all of them through
//! the integer codec). Each section is there when some tag needs it: the
//! numbers, strings, array lengths and elements (one slot for all elements of
//! the slot's arrays), and per key of the slot's objects (in jsonb's key
//! order) a slot with one entry per object. A path whose type changes in some
//! rows spreads over the sections of those types; the others stay as
//! compressible as before.
//!
//! Numbers: `u8 form | scale(s) | [chunk(mantissas)] | [chunk(raw)]`. A
//! numeric that is a decimal with an i64 mantissa (`jsonb::numeric_to_decimal`)
//! is its display scale plus its mantissa; when the scales differ, mantissas
//! are scaled to the slot's largest scale if all fit (so 21.5 and 21.25 are
//! 2150 and 2125) and the scales kept one per number. Any other numeric keeps
//! its datum bytes (scale -1, in `raw`).
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
/// Bytes of documents one column's body may decode to, at most: repeated
/// values (dictionaries) cost little in the body, so its length bounds
/// nothing. Buckets close at `bucket_max_size` (64 MB at most), documents
/// counted at an eighth of their size or more, or hold one larger row.
const MAX_OUTPUT: usize = 1 << 30;
const RAW_SCALE: i64 = -1;
const TAGS_EXCEPTIONS: u8 = 8;
const TAGS_ALL: u8 = 9;
/// Numbers: every one a decimal of one scale (`varint scale`), or a scale per
/// number (chunk), mantissas at their own scale or at the largest (`varint`).
const SCALES_ONE: u8 = 0;
const SCALES_OWN: u8 = 1;
const SCALES_COMMON: u8 = 2;
/// Every number a decimal whose scale is its shortest (no trailing zero after
/// the point, as Postgres writes a float8 or a JSON number typed without
/// them: 25 and 25.3, not 25.0): `varint common | chunk(mantissas)` at the
/// largest scale, each number's own scale read back from its trailing zeros,
/// so no scale is stored per number.
const SCALES_TRIMMED: u8 = 3;
const MAX_SCALE: i64 = 0x3FFF;

pub fn encode(values: &ByteValues, out: &mut Vec<u8>) {
    let mut plain = Vec::new();
    bytes::encode(values, &mut plain);
    match shred(values) {
        Some(shredded) if shredded.len() < plain.len() => {
            // Debug builds (the tests) read every shredded body back.
            debug_assert!(
                decode(&mut Cursor::new(&[&[FORM_SHREDDED][..], &shredded].concat()), values.len()).is_ok_and(|back| back == *values),
                "a shredded document column reads back differently"
            );
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
    put_tags(&tags, out);
    let mut chunk = Vec::new();

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
    let mut chunk = Vec::new();
    if !raw.is_empty() || scales.iter().any(|&x| x != scales[0]) {
        let common = scales.iter().copied().max().unwrap_or(0).max(0);
        let scaled: Option<Vec<i64>> = scales
            .iter()
            .filter(|&&s| s != RAW_SCALE)
            .zip(&mantissas)
            .map(|(&s, &m)| 10i64.checked_pow((common - s) as u32).and_then(|f| m.checked_mul(f)))
            .collect();
        let trimmed = raw.is_empty() && scales.iter().zip(&mantissas).all(|(&s, &m)| s == 0 || m % 10 != 0);
        match scaled {
            Some(scaled) if trimmed => {
                mantissas = scaled;
                out.push(SCALES_TRIMMED);
                put_varint(out, common as u64);
            }
            Some(scaled) => {
                mantissas = scaled;
                out.push(SCALES_COMMON);
                put_varint(out, common as u64);
                int::encode(&scales, &mut chunk);
                put_chunk(out, &chunk);
            }
            None => {
                out.push(SCALES_OWN);
                int::encode(&scales, &mut chunk);
                put_chunk(out, &chunk);
            }
        }
    } else {
        out.push(SCALES_ONE);
        put_varint(out, scales[0] as u64);
    }
    if !mantissas.is_empty() {
        chunk.clear();
        int::encode(&mantissas, &mut chunk);
        put_chunk(out, &chunk);
    }
    if !raw.is_empty() {
        chunk.clear();
        bytes::encode(&raw, &mut chunk);
        put_chunk(out, &chunk);
    }
}

/// A slot's tags: `u8 t` when every entry has tag t (0..=7); `TAGS_EXCEPTIONS |
/// u8 dominant | chunk(positions) | chunk(tags)` listing the entries of
/// another tag (a path absent from a row in a hundred costs a few bytes, not
/// bits per row); else `TAGS_ALL | chunk(tags)`. The smaller form is kept.
fn put_tags(tags: &[i64], out: &mut Vec<u8>) {
    let first = tags.first().copied().unwrap_or(ABSENT);
    if tags.iter().all(|&t| t == first) {
        out.push(first as u8);
        return;
    }
    let mut counts = [0usize; 8];
    tags.iter().for_each(|&t| counts[t as usize] += 1);
    let dominant = (0..8).max_by_key(|&t| counts[t]).expect("eight tags") as i64;
    let (positions, others): (Vec<i64>, Vec<i64>) =
        tags.iter().enumerate().filter(|(_, t)| **t != dominant).map(|(i, t)| (i as i64, *t)).unzip();
    let mut exceptions = vec![TAGS_EXCEPTIONS, dominant as u8];
    let mut chunk = Vec::new();
    int::encode(&positions, &mut chunk);
    put_chunk(&mut exceptions, &chunk);
    chunk.clear();
    int::encode(&others, &mut chunk);
    put_chunk(&mut exceptions, &chunk);
    chunk.clear();
    int::encode(tags, &mut chunk);
    if chunk.len() + 2 < exceptions.len() {
        out.push(TAGS_ALL);
        put_chunk(out, &chunk);
    } else {
        out.extend_from_slice(&exceptions);
    }
}

fn get_tags(c: &mut Cursor, n: usize) -> Result<Vec<i64>> {
    let tag = c.u8("document tags")?;
    let tags = match tag {
        0..=7 => vec![tag as i64; n],
        TAGS_EXCEPTIONS => {
            let dominant = c.u8("dominant tag")? as i64;
            let positions = int::decode(&mut Cursor::new(c.chunk("tag positions")?), n)?;
            let others = int::decode(&mut Cursor::new(c.chunk("other tags")?), positions.len())?;
            if dominant > OBJECT || others.len() != positions.len() {
                return Err(DecodeError::Invalid("document tag exceptions"));
            }
            let mut tags = vec![dominant; n];
            let mut last = -1i64;
            for (p, t) in positions.into_iter().zip(others) {
                if p <= last || p >= n as i64 || t == dominant {
                    return Err(DecodeError::Invalid("document tag exceptions"));
                }
                tags[p as usize] = t;
                last = p;
            }
            tags
        }
        TAGS_ALL => int::decode(&mut Cursor::new(c.chunk("document tags")?), n)?,
        tag => return Err(DecodeError::UnknownTag { what: "document tags", tag }),
    };
    if tags.len() != n {
        return Err(DecodeError::Invalid("document tag count"));
    }
    Ok(tags)
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
    decode_selected(c, limit, keys, None)
}

/// Like `decode_keys`, building only the documents `wanted` marks (one flag
/// per document, when given): the others come back empty, unread. A scan
/// that filters rows on other columns or on fields' sub-columns first builds
/// the documents of the rows that pass alone. A body kept as bytes (form 0)
/// comes back whole.
pub fn decode_selected(c: &mut Cursor, limit: usize, keys: Option<&[Vec<u8>]>, wanted: Option<&[bool]>) -> Result<ByteValues> {
    let Some((n, slot)) = documents_slot(c, limit, keys)? else { return bytes::decode(c, limit) };
    if wanted.is_some_and(|w| w.len() != n) {
        return Err(DecodeError::Invalid("document count differs from the rows selected"));
    }
    // Documents are written straight from the sub-columns, no tree in between.
    let mut out = ByteValues::default();
    let mut scratch = Vec::new();
    for i in 0..n {
        if wanted.is_some_and(|w| !w[i]) {
            out.push(&[]);
            continue;
        }
        scratch.clear();
        let scalar = !matches!(slot.tags[i] as i64, ARRAY | OBJECT);
        jsonb::write_root(&mut scratch, scalar, |out, base| slot.write(out, base, i))?;
        if out.byte_len() + scratch.len() > MAX_OUTPUT {
            return Err(DecodeError::TooLarge("documents"));
        }
        out.push(&scratch);
    }
    Ok(out)
}

/// The slot of the (up to `limit`) documents of a body stored by path, its
/// objects' fields limited to `keys` when given; None for a body kept as
/// bytes (form 0), the cursor then at those bytes.
fn documents_slot<'a>(c: &mut Cursor<'a>, limit: usize, keys: Option<&[Vec<u8>]>) -> Result<Option<(usize, Slot<'a>)>> {
    match c.u8("document form")? {
        FORM_BYTES => Ok(None),
        FORM_SHREDDED => {
            let n = c.len("document count", limit)?;
            let mut budget = Budget { left: MAX_ENTRIES };
            let slot = decode_slot(c, n, 0, &mut budget, keys)?;
            if slot.tags.contains(&(ABSENT as u8)) {
                return Err(DecodeError::Invalid("a document is absent"));
            }
            Ok(Some((n, slot)))
        }
        tag => Err(DecodeError::UnknownTag { what: "document form", tag }),
    }
}

/// A top-level field of one document, as a query that casts `doc->>'key'`
/// to a number reads it without building the document.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    /// The document is an object without the key: `->>` gives NULL, `?` false.
    Missing,
    /// JSON null under the key: `->>` gives NULL, `?` true.
    Null,
    /// The document is no object (an array or a scalar, where `?` looks at
    /// strings), or SQL NULL: `->>` gives NULL, `?` is Postgres's to answer.
    NoObject,
    /// A number that is a decimal: its mantissa and display scale (`jsonb::numeric_to_decimal`).
    Decimal(i64, u16),
    /// Anything else: a string, boolean, array or object, or a numeric that is no such decimal.
    Other,
}

/// One top-level field of each of a bucket's rows, packed: a byte per row
/// says what the row holds (a decimal's display scale included), and each
/// decimal's mantissa sits at its row in `mantissas`. Nine bytes a row where
/// a `Field` takes sixteen: a query that reads one number per row decodes
/// about what a float column holds. A string reads as `Field::Other`, its
/// bytes kept too (`string`): text comparisons read them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Fields {
    tags: Vec<u8>,
    /// A decimal's mantissa, or a string's index in `string_ends`.
    mantissas: Vec<i64>,
    /// Display scales too large for a tag, by row (in row order).
    wide: Vec<(u32, u16)>,
    /// The strings' bytes, one after another, and where each ends.
    strings: Vec<u8>,
    string_ends: Vec<u32>,
}

const F_MISSING: u8 = 0;
const F_NULL: u8 = 1;
const F_NO_OBJECT: u8 = 2;
const F_OTHER: u8 = 3;
const F_STRING: u8 = 4;
/// A decimal of display scale `tag - F_DECIMAL`, up to F_WIDE - 1 - F_DECIMAL.
const F_DECIMAL: u8 = 5;
/// A decimal whose display scale is in `wide`.
const F_WIDE: u8 = u8::MAX;

impl Fields {
    pub fn with_capacity(n: usize) -> Fields {
        Fields { tags: Vec::with_capacity(n), mantissas: Vec::with_capacity(n), ..Fields::default() }
    }

    /// A row whose field is the string `s` (it reads as `Field::Other`).
    pub fn push_string(&mut self, s: &[u8]) {
        self.tags.push(F_STRING);
        self.mantissas.push(self.string_ends.len() as i64);
        self.strings.extend_from_slice(s);
        self.string_ends.push(self.strings.len() as u32);
    }

    /// Row `i`'s string, if its field is one; `i` must be below `len`.
    #[inline]
    pub fn string(&self, i: usize) -> Option<&[u8]> {
        if self.tags[i] != F_STRING {
            return None;
        }
        let k = self.mantissas[i] as usize;
        let start = if k == 0 { 0 } else { self.string_ends[k - 1] as usize };
        Some(&self.strings[start..self.string_ends[k] as usize])
    }

    /// These fields with a `Field::NoObject` row inserted wherever `valid`
    /// is false (a NULL document); `valid` holds one entry per row of the
    /// result and as many true ones as `self` has rows.
    pub fn spread(&self, valid: &[bool]) -> Fields {
        let mut out = Fields::with_capacity(valid.len());
        let mut next = 0;
        for &v in valid {
            if !v {
                out.push(Field::NoObject);
                continue;
            }
            match self.string(next) {
                Some(s) => out.push_string(s),
                None => out.push(self.get(next)),
            }
            next += 1;
        }
        out
    }

    pub fn push(&mut self, f: Field) {
        let (tag, m) = match f {
            Field::Missing => (F_MISSING, 0),
            Field::Null => (F_NULL, 0),
            Field::NoObject => (F_NO_OBJECT, 0),
            Field::Other => (F_OTHER, 0),
            Field::Decimal(m, s) if (s as usize) < (F_WIDE - F_DECIMAL) as usize => (F_DECIMAL + s as u8, m),
            Field::Decimal(m, s) => {
                self.wide.push((self.tags.len() as u32, s));
                (F_WIDE, m)
            }
        };
        self.tags.push(tag);
        self.mantissas.push(m);
    }

    pub fn len(&self) -> usize {
        self.tags.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tags.is_empty()
    }

    /// Row `i`'s field; `i` must be below `len`.
    #[inline]
    pub fn get(&self, i: usize) -> Field {
        match self.tags[i] {
            F_MISSING => Field::Missing,
            F_NULL => Field::Null,
            F_NO_OBJECT => Field::NoObject,
            F_OTHER | F_STRING => Field::Other,
            F_WIDE => {
                let at = self.wide.binary_search_by_key(&(i as u32), |w| w.0).expect("a wide scale is kept for each such row");
                Field::Decimal(self.mantissas[i], self.wide[at].1)
            }
            t => Field::Decimal(self.mantissas[i], (t - F_DECIMAL) as u16),
        }
    }

    /// Whether `cast` reads every row's field without Postgres (`of` never
    /// gives `Evaluate`): one pass over the tags, the common decimals
    /// checked without converting them.
    pub fn all_cast(&self, cast: NumberCast) -> bool {
        self.tags.iter().zip(&self.mantissas).enumerate().all(|(i, (&t, &m))| match (t, cast) {
            (_, NumberCast::AsIs) | (F_MISSING | F_NULL | F_NO_OBJECT, _) => true,
            (F_OTHER | F_STRING, _) => false,
            // decimal_as_float8's exact division: a mantissa below 2^53 and a scale below 23.
            (t, NumberCast::Float8) if t < F_DECIMAL + 23 && m.unsigned_abs() <= jsonb::EXACT_MANTISSA => true,
            (F_DECIMAL, NumberCast::Int8) => true,
            (F_DECIMAL, NumberCast::Int4) => i32::try_from(m).is_ok(),
            _ => cast.of(self.get(i)) != CastValue::Evaluate,
        })
    }

    /// Each row's field cast by `cast` (Float8: into `floats`; Int4 and Int8:
    /// into `ints`), `valid` set where it gives a value; the rows whose field
    /// Postgres must cast are returned (left unset). The slices hold one
    /// entry per row.
    pub fn cast_into(&self, cast: NumberCast, floats: &mut [f64], ints: &mut [i64], valid: &mut [bool]) -> Vec<usize> {
        let mut evaluate = Vec::new();
        for i in 0..self.tags.len() {
            let (t, m) = (self.tags[i], self.mantissas[i]);
            // The common cases inline (as decimal_as_float8 and `of` compute them).
            match (t, cast) {
                (F_MISSING | F_NULL | F_NO_OBJECT, _) => continue,
                (t, NumberCast::Float8) if (F_DECIMAL..F_DECIMAL + 23).contains(&t) && m.unsigned_abs() <= jsonb::EXACT_MANTISSA => {
                    floats[i] = if t == F_DECIMAL { m as f64 } else { m as f64 / jsonb::EXACT[(t - F_DECIMAL) as usize] };
                    valid[i] = true;
                    continue;
                }
                (F_DECIMAL, NumberCast::Int8) => {
                    ints[i] = m;
                    valid[i] = true;
                    continue;
                }
                _ => {}
            }
            match cast.of(self.get(i)) {
                CastValue::Null => {}
                CastValue::Float(v) => {
                    floats[i] = v;
                    valid[i] = true;
                }
                CastValue::Int(v) => {
                    ints[i] = v;
                    valid[i] = true;
                }
                CastValue::Evaluate => evaluate.push(i),
            }
        }
        evaluate
    }

    pub fn iter(&self) -> impl Iterator<Item = Field> + '_ {
        (0..self.len()).map(|i| self.get(i))
    }

    /// Bytes the fields take in memory (EXPLAIN's Bytes Decompressed).
    pub fn heap_bytes(&self) -> usize {
        self.tags.len()
            + std::mem::size_of_val(&self.mantissas[..])
            + std::mem::size_of_val(&self.wide[..])
            + self.strings.len()
            + std::mem::size_of_val(&self.string_ends[..])
    }
}

impl FromIterator<Field> for Fields {
    fn from_iter<I: IntoIterator<Item = Field>>(iter: I) -> Fields {
        let iter = iter.into_iter();
        let mut out = Fields::with_capacity(iter.size_hint().0);
        iter.for_each(|f| out.push(f));
        out
    }
}

/// A cast of a field's text to a number: `(doc->>'k')::float8`, `::int4`, `::int8`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NumberCast {
    Float8,
    Int4,
    Int8,
    /// No cast: the field is read for its presence or its string (`doc ?
    /// 'k'`, `doc->>'k' = 'v'`, `doc @> '{"k": "v"}'`). Nothing in it is
    /// Postgres's to cast (`of` gives Null).
    AsIs,
}

/// What a cast makes of a field, where that needs no Postgres.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum CastValue {
    Null,
    Float(f64),
    Int(i64),
    /// Postgres must cast the field's text: a string, boolean or container,
    /// or a decimal the cast refuses (a fraction or an out-of-range value
    /// for an integer, an underflow for float8), to give its value or error.
    Evaluate,
}

impl NumberCast {
    #[inline]
    pub fn of(self, f: Field) -> CastValue {
        match (f, self) {
            (_, NumberCast::AsIs) | (Field::Missing | Field::Null | Field::NoObject, _) => CastValue::Null,
            (Field::Other, _) => CastValue::Evaluate,
            (Field::Decimal(m, s), NumberCast::Float8) => jsonb::decimal_as_float8(m, s).map_or(CastValue::Evaluate, CastValue::Float),
            // An integer's text has no decimal point: its display scale is 0.
            (Field::Decimal(m, 0), NumberCast::Int4) if i32::try_from(m).is_ok() => CastValue::Int(m),
            (Field::Decimal(m, 0), NumberCast::Int8) => CastValue::Int(m),
            (Field::Decimal(..), _) => CastValue::Evaluate,
        }
    }
}

/// The top-level field `key` of each of the (up to `limit`) documents, its
/// sub-column alone decoded; None for a column kept as bytes (form 0), whose
/// documents must be read whole.
pub fn decode_field(c: &mut Cursor, limit: usize, key: &[u8]) -> Result<Option<Fields>> {
    let Some((n, slot)) = documents_slot(c, limit, Some(&[key.to_vec()]))? else { return Ok(None) };
    let Some(field) = slot.keys.iter().position(|k| *k == key).map(|p| &slot.fields[p]) else {
        return Ok(Some((0..n).map(|i| if slot.tags[i] as i64 == OBJECT { Field::Missing } else { Field::NoObject }).collect()));
    };
    let mut out = Fields::with_capacity(n);
    for i in 0..n {
        if slot.tags[i] as i64 != OBJECT {
            out.push(Field::NoObject);
            continue;
        }
        let r = slot.rank[i] as usize;
        match field.tags[r] as i64 {
            ABSENT => out.push(Field::Missing),
            NULL => out.push(Field::Null),
            NUMBER => out.push(match field.numbers[field.rank[r] as usize] {
                Number::Decimal(m, s) => Field::Decimal(m, s),
                Number::Raw(_) => Field::Other,
            }),
            STRING => out.push_string(field.strings.get(field.rank[r] as usize).ok_or(DecodeError::Invalid("a document string is missing"))?),
            _ => out.push(Field::Other),
        }
    }
    Ok(Some(out))
}

/// The keys of the objects at the top of the (up to `limit`) documents, in
/// jsonb's key order; None for a column kept as bytes (form 0).
pub fn top_keys(c: &mut Cursor, limit: usize) -> Result<Option<Vec<Vec<u8>>>> {
    Ok(documents_slot(c, limit, Some(&[]))?.map(|(_, slot)| slot.all_keys.iter().map(|k| k.to_vec()).collect()))
}

/// A number as decoded: a decimal (mantissa, display scale), or the index of its numeric's bytes.
#[derive(Debug, PartialEq)]
enum Number {
    Decimal(i64, u16),
    Raw(u32),
}

/// One decoded slot, column by column.
struct Slot<'a> {
    tags: Vec<u8>,
    /// Per entry: its index among the slot's entries of its tag.
    rank: Vec<u32>,
    numbers: Vec<Number>,
    raw: ByteValues,
    strings: ByteValues,
    /// Per array (by rank), where its elements start in `elements`; one more at the end.
    starts: Vec<usize>,
    elements: Option<Box<Slot<'a>>>,
    /// The keys decoded (all, or those asked for) and their slots, one entry per object.
    keys: Vec<&'a [u8]>,
    fields: Vec<Slot<'a>>,
    /// Every key of the slot's objects, decoded or not.
    all_keys: Vec<&'a [u8]>,
}

impl Slot<'_> {
    /// Appends entry `i` (not absent) and returns its JEntry.
    fn write(&self, out: &mut Vec<u8>, base: usize, i: usize) -> Result<u32> {
        let r = self.rank[i] as usize;
        match self.tags[i] as i64 {
            NULL => Ok(jsonb::NULL_ENTRY),
            FALSE => Ok(jsonb::bool_entry(false)),
            TRUE => Ok(jsonb::bool_entry(true)),
            NUMBER => jsonb::write_number(out, base, |out| match self.numbers[r] {
                Number::Decimal(m, s) => jsonb::decimal_to_numeric(m, s, out),
                Number::Raw(k) => out.extend_from_slice(self.raw.get(k as usize).expect("counted")),
            }),
            STRING => jsonb::write_string(out, self.strings.get(r).expect("ranked")),
            ARRAY => {
                let elements = self.elements.as_deref().expect("arrays have elements");
                let (from, to) = (self.starts[r], self.starts[r + 1]);
                jsonb::write_container(out, base, jsonb::Container::Array, to - from, &mut |out, e| elements.write(out, base, from + e))
            }
            ABSENT => Err(DecodeError::Invalid("an absent document value")),
            _ => {
                let here = |k: &usize| self.fields[*k].tags[r] != ABSENT as u8;
                let count = (0..self.keys.len()).filter(here).count();
                // Children come in order: the present keys, then their values; one walk over the keys for each.
                let mut keys = (0..self.keys.len()).filter(here);
                let mut values = (0..self.keys.len()).filter(here);
                jsonb::write_container(out, base, jsonb::Container::Object, count, &mut |out, e| {
                    if e < count {
                        jsonb::write_string(out, self.keys[keys.next().expect("counted")])
                    } else {
                        self.fields[values.next().expect("counted")].write(out, base, r)
                    }
                })
            }
        }
    }
}

/// The entries of a slot; `keys`, when given, the only fields its objects keep.
fn decode_slot<'a>(c: &mut Cursor<'a>, n: usize, depth: usize, budget: &mut Budget, keys: Option<&[Vec<u8>]>) -> Result<Slot<'a>> {
    if depth > jsonb::MAX_DEPTH + 1 {
        return Err(DecodeError::TooLarge("document nesting"));
    }
    if !budget.take(n) {
        return Err(DecodeError::TooLarge("document entries"));
    }
    let tags = get_tags(c, n)?;
    let mut counts = [0u32; 8];
    let mut rank = Vec::with_capacity(n);
    let mut small = Vec::with_capacity(n);
    for &t in &tags {
        if !(ABSENT..=OBJECT).contains(&t) {
            return Err(DecodeError::UnknownTag { what: "document entry", tag: t as u8 });
        }
        rank.push(counts[t as usize]);
        counts[t as usize] += 1;
        small.push(t as u8);
    }
    let count = |t: i64| counts[t as usize] as usize;
    let (numbers, raw) = if count(NUMBER) > 0 { decode_numbers(c.chunk("document numbers")?, count(NUMBER))? } else { (Vec::new(), ByteValues::default()) };
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
    let mut starts = vec![0usize];
    let mut elements = None;
    if count(ARRAY) > 0 {
        let lengths = int::decode(&mut Cursor::new(c.chunk("document array lengths")?), count(ARRAY))?;
        if lengths.len() != count(ARRAY) {
            return Err(DecodeError::Invalid("document array count"));
        }
        for &l in &lengths {
            if l < 0 || l as usize > MAX_ENTRIES {
                return Err(DecodeError::Invalid("document array length"));
            }
            starts.push(starts.last().expect("starts at 0") + l as usize);
        }
        let total = *starts.last().expect("starts at 0");
        let mut ec = Cursor::new(c.chunk("document array elements")?);
        let slot = decode_slot(&mut ec, total, depth + 1, budget, None)?;
        if !ec.is_empty() {
            return Err(DecodeError::Invalid("trailing bytes after document elements"));
        }
        if slot.tags.contains(&(ABSENT as u8)) {
            return Err(DecodeError::Invalid("an array element is absent"));
        }
        elements = Some(Box::new(slot));
    }
    let mut names = Vec::new();
    let mut fields = Vec::new();
    let mut all_keys = Vec::new();
    if count(OBJECT) > 0 {
        let nkeys = c.len("document key count", c.remaining())?;
        let mut all: Vec<&[u8]> = Vec::with_capacity(nkeys);
        for _ in 0..nkeys {
            let key = c.chunk("document key")?;
            if all.last().is_some_and(|last| key_order(last, key).is_ge()) {
                return Err(DecodeError::Invalid("document keys out of order"));
            }
            all.push(key);
        }
        all_keys.clone_from(&all);
        for key in all {
            let chunk = c.chunk("document fields")?;
            if keys.is_some_and(|w| !w.iter().any(|k| k[..] == *key)) {
                continue;
            }
            let mut fc = Cursor::new(chunk);
            let slot = decode_slot(&mut fc, count(OBJECT), depth + 1, budget, None)?;
            if !fc.is_empty() {
                return Err(DecodeError::Invalid("trailing bytes after document fields"));
            }
            names.push(key);
            fields.push(slot);
        }
    }
    if !c.is_empty() {
        return Err(DecodeError::Invalid("trailing bytes in document slot"));
    }
    Ok(Slot { tags: small, rank, numbers, raw, strings, starts, elements, keys: names, fields, all_keys })
}

/// The numbers of a slot, and the bytes of those that are no decimal (`Number::Raw` indexes them).
fn decode_numbers(bytes: &[u8], n: usize) -> Result<(Vec<Number>, ByteValues)> {
    let mut c = Cursor::new(bytes);
    let (scales, common) = match c.u8("number form")? {
        SCALES_ONE => (vec![c.len("number scale", MAX_SCALE as usize)? as i64; n], None),
        form @ (SCALES_OWN | SCALES_COMMON) => {
            let common = if form == SCALES_COMMON { Some(c.len("common scale", MAX_SCALE as usize)? as i64) } else { None };
            (int::decode(&mut Cursor::new(c.chunk("number scales")?), n)?, common)
        }
        SCALES_TRIMMED => return decode_trimmed(&mut c, n),
        tag => return Err(DecodeError::UnknownTag { what: "number form", tag }),
    };
    if scales.len() != n || scales.iter().any(|&s| !(RAW_SCALE..=MAX_SCALE).contains(&s)) {
        return Err(DecodeError::Invalid("number scales"));
    }
    let decimals = scales.iter().filter(|&&s| s != RAW_SCALE).count();
    let mantissas = if decimals > 0 { int::decode(&mut Cursor::new(c.chunk("number mantissas")?), decimals)? } else { Vec::new() };
    let raw = if decimals < n {
        let mut rc = Cursor::new(c.chunk("raw numbers")?);
        let raw = bytes::decode(&mut rc, n - decimals)?;
        if !rc.is_empty() {
            return Err(DecodeError::Invalid("trailing bytes after raw numbers"));
        }
        raw
    } else {
        ByteValues::default()
    };
    if mantissas.len() != decimals || raw.len() != n - decimals || !c.is_empty() {
        return Err(DecodeError::Invalid("number counts"));
    }
    let (mut m, mut r) = (mantissas.into_iter(), 0u32);
    let mut out = Vec::with_capacity(n);
    for s in scales {
        if s == RAW_SCALE {
            out.push(Number::Raw(r));
            r += 1;
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
        out.push(Number::Decimal(mantissa, s as u16));
    }
    Ok((out, raw))
}

/// SCALES_TRIMMED's numbers: each mantissa at the common scale loses its
/// trailing zeros down to its own scale (0 is 0, scale 0).
fn decode_trimmed(c: &mut Cursor, n: usize) -> Result<(Vec<Number>, ByteValues)> {
    let common = c.len("common scale", MAX_SCALE as usize)? as u16;
    let mantissas = int::decode(&mut Cursor::new(c.chunk("number mantissas")?), n)?;
    if mantissas.len() != n || !c.is_empty() {
        return Err(DecodeError::Invalid("number counts"));
    }
    let mut numbers = Vec::with_capacity(n);
    for mut m in mantissas {
        if m == 0 {
            numbers.push(Number::Decimal(0, 0));
            continue;
        }
        // At most 18 rounds: a non-zero i64 has no more trailing zeros (0, whose
        // loop a corrupt common scale could make long, is taken above).
        let mut scale = common;
        while scale > 0 && m % 10 == 0 {
            m /= 10;
            scale -= 1;
        }
        numbers.push(Number::Decimal(m, scale));
    }
    Ok((numbers, ByteValues::default()))
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
    fn fields_pack_every_kind_and_scale() {
        let all = vec![
            Field::Missing,
            Field::Decimal(-5, 0),
            Field::Null,
            Field::Decimal(i64::MAX, 250),
            Field::Decimal(7, 251),
            Field::NoObject,
            Field::Decimal(i64::MIN, 16383),
            Field::Other,
            Field::Decimal(1, 3),
        ];
        let packed: Fields = all.iter().copied().collect();
        assert_eq!(packed.len(), all.len());
        assert_eq!(packed.iter().collect::<Vec<_>>(), all);
        assert_eq!(packed.heap_bytes(), 9 * all.len() + 3 * std::mem::size_of::<(u32, u16)>());
        let mut strings = Fields::default();
        strings.push_string(b"ok");
        strings.push(Field::Decimal(3, 1));
        strings.push_string(b"");
        strings.push_string("\u{e9}t\u{e9}".as_bytes());
        assert_eq!(strings.iter().collect::<Vec<_>>(), vec![Field::Other, Field::Decimal(3, 1), Field::Other, Field::Other]);
        assert_eq!((0..4).map(|i| strings.string(i)).collect::<Vec<_>>(), vec![Some(&b"ok"[..]), None, Some(&b""[..]), Some("\u{e9}t\u{e9}".as_bytes())]);
        let spread = strings.spread(&[false, true, true, false, true, true]);
        assert_eq!((0..6).map(|i| spread.string(i)).collect::<Vec<_>>(), vec![None, Some(&b"ok"[..]), None, None, Some(&b""[..]), Some("\u{e9}t\u{e9}".as_bytes())]);
        assert_eq!(spread.get(0), Field::NoObject);
        let mut more = all.clone();
        more.extend([Field::Decimal(0, 3), Field::Decimal(-7, 22), Field::Decimal(1 << 53, 2), Field::Decimal((1 << 53) + 1, 2), Field::Decimal(5, 23), Field::Decimal(3_000_000_000, 0)]);
        for cast in [NumberCast::Float8, NumberCast::Int4, NumberCast::Int8, NumberCast::AsIs] {
            for f in &more {
                let one: Fields = std::iter::once(*f).collect();
                assert_eq!(one.all_cast(cast), cast.of(*f) != CastValue::Evaluate, "{f:?} {cast:?}");
                let (mut fl, mut it, mut ok) = ([0.0], [0], [false]);
                let ev = one.cast_into(cast, &mut fl, &mut it, &mut ok);
                match cast.of(*f) {
                    CastValue::Null => assert!(!ok[0] && ev.is_empty()),
                    CastValue::Float(v) => assert!(ok[0] && fl[0].to_bits() == v.to_bits()),
                    CastValue::Int(v) => assert!(ok[0] && it[0] == v),
                    CastValue::Evaluate => assert_eq!(ev, vec![0]),
                }
            }
        }
        assert_eq!(spread.get(2), Field::Decimal(3, 1));
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

    /// Floats as Postgres writes them into jsonb (25 and 25.3, never 25.0)
    /// keep no scale per number; one 25.0 among them brings the scales back.
    #[test]
    fn shortest_decimals_store_no_scales() {
        let shortest = [numeric(25, 0), numeric(253, 1), numeric(-5, 1), numeric(0, 0), numeric(100, 0), numeric(12345, 3)];
        let numbers = |docs: &[Value]| {
            let raw: Vec<Vec<u8>> = docs.iter().map(|d| if let Value::Number(n) = d { n.clone() } else { unreachable!() }).collect();
            let mut out = Vec::new();
            encode_numbers(&raw.iter().map(Vec::as_slice).collect::<Vec<_>>(), &mut out);
            out
        };
        let body = numbers(&shortest);
        assert_eq!(body[0], SCALES_TRIMMED);
        let mut padded = shortest.to_vec();
        padded.push(numeric(250, 1));
        assert_eq!(numbers(&padded)[0], SCALES_COMMON);
        for docs in [&shortest[..], &padded[..]] {
            let wrapped: Vec<Value> = docs.iter().map(|n| object(vec![(b"v".to_vec(), n.clone())])).collect();
            round_trip(&datums(&wrapped));
        }
    }

    /// A corrupt common scale costs no more than a valid one: zeros read as 0.
    #[test]
    fn trimmed_zeros_at_any_scale_read_as_zero() {
        let mut body = vec![SCALES_TRIMMED];
        put_varint(&mut body, MAX_SCALE as u64);
        let mut chunk = Vec::new();
        int::encode(&[0, 0, 10, -7], &mut chunk);
        put_chunk(&mut body, &chunk);
        let (numbers, raw) = decode_numbers(&body, 4).unwrap();
        assert!(raw.is_empty());
        assert_eq!(numbers[0], Number::Decimal(0, 0));
        assert_eq!(numbers[2], Number::Decimal(1, MAX_SCALE as u16 - 1));
        assert_eq!(numbers[3], Number::Decimal(-7, MAX_SCALE as u16));
    }

    proptest! {
        #[test]
        fn shortest_decimals_round_trip(numbers in proptest::collection::vec((any::<i64>(), 0u16..20), 1..60)) {
            // Mantissas without a trailing zero unless the scale is 0: what SCALES_TRIMMED takes, overflow and all.
            let docs: Vec<Value> = numbers
                .iter()
                .map(|&(m, s)| object(vec![(b"v".to_vec(), if s == 0 || m % 10 != 0 { numeric(m, s) } else { numeric(m / 10 * 10 + 1, s) })]))
                .collect();
            round_trip(&datums(&docs));
        }

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

    proptest! {
        #[test]
        fn selected_documents_read_as_the_whole_decode(docs in proptest::collection::vec(value(), 0..30), pick in proptest::collection::vec(any::<bool>(), 30)) {
            let values = datums(&docs);
            let mut body = Vec::new();
            encode(&values, &mut body);
            let wanted = &pick[..values.len()];
            let all = decode(&mut Cursor::new(&body), values.len()).unwrap();
            let got = decode_selected(&mut Cursor::new(&body), values.len(), None, Some(wanted)).unwrap();
            prop_assert_eq!(got.len(), all.len());
            for i in 0..all.len() {
                // Kept as bytes, every document comes back; by path, the unwanted ones empty.
                if wanted[i] || body[0] == FORM_BYTES {
                    prop_assert_eq!(got.get(i), all.get(i));
                } else {
                    prop_assert_eq!(got.get(i), Some(&[][..]));
                }
            }
            prop_assert!(decode_selected(&mut Cursor::new(&body), values.len(), None, Some(&pick[..values.len().saturating_sub(1)])).is_err() || values.is_empty() || body[0] == FORM_BYTES);
        }
    }

    proptest! {
        #[test]
        fn fields_read_as_the_whole_documents_hold_them(docs in proptest::collection::vec(value(), 0..30), key in prop_oneof![Just(b"t".to_vec()), Just(b"hum".to_vec()), Just(b"zz".to_vec())]) {
            let values = datums(&docs);
            let mut body = Vec::new();
            encode(&values, &mut body);
            let got = decode_field(&mut Cursor::new(&body), values.len(), &key).unwrap();
            let Some(got) = got else {
                prop_assert_eq!(body[0], FORM_BYTES);
                return Ok(());
            };
            let expected: Vec<Field> = docs.iter().map(|d| match d {
                Value::Object(p) => match p.iter().find(|(k, _)| *k == key).map(|(_, v)| v) {
                    None => Field::Missing,
                    Some(Value::Null) => Field::Null,
                    Some(Value::Number(n)) => match jsonb::numeric_to_decimal(n) {
                        Some((m, s)) => Field::Decimal(m, s),
                        None => Field::Other,
                    },
                    Some(_) => Field::Other,
                },
                _ => Field::NoObject,
            }).collect();
            prop_assert_eq!(got.iter().collect::<Vec<_>>(), expected);
            let strings: Vec<Option<Vec<u8>>> = docs.iter().map(|d| match d {
                Value::Object(p) => match p.iter().find(|(k, _)| *k == key).map(|(_, v)| v) {
                    Some(Value::String(s)) => Some(s.clone()),
                    _ => None,
                },
                _ => None,
            }).collect();
            prop_assert_eq!((0..got.len()).map(|i| got.string(i).map(<[u8]>::to_vec)).collect::<Vec<_>>(), strings);
        }

        #[test]
        fn corrupt_bodies_read_by_field_are_errors(body in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = decode_field(&mut Cursor::new(&body), 1000, b"t");
        }
    }

    #[test]
    fn casts_leave_to_postgres_what_they_may_refuse() {
        use CastValue::*;
        assert_eq!(NumberCast::Int4.of(Field::Decimal(250, 2)), Evaluate);
        assert_eq!(NumberCast::Int4.of(Field::Decimal(3_000_000_000, 0)), Evaluate);
        assert_eq!(NumberCast::Int8.of(Field::Decimal(3_000_000_000, 0)), Int(3_000_000_000));
        assert_eq!(NumberCast::Float8.of(Field::Decimal(250, 2)), Float(2.5));
        assert_eq!(NumberCast::Float8.of(Field::Decimal(1, 400)), Evaluate);
        assert_eq!(NumberCast::Float8.of(Field::Missing), Null);
        assert_eq!(NumberCast::Int4.of(Field::Null), Null);
        assert_eq!(NumberCast::Int8.of(Field::NoObject), Null);
        assert_eq!(NumberCast::Int8.of(Field::Other), Evaluate);
        assert_eq!(NumberCast::AsIs.of(Field::Other), Null);
        assert_eq!(NumberCast::AsIs.of(Field::Decimal(1, 400)), Null);
    }

    #[test]
    fn keys_that_never_repeat_stay_bytes() {
        let docs: Vec<Value> = (0..500).map(|i: i32| object(vec![(format!("id{i}").into_bytes(), Value::Bool(true))])).collect();
        let values = datums(&docs);
        let body = round_trip(&values);
        assert_eq!(body[0], FORM_BYTES);
    }
}
