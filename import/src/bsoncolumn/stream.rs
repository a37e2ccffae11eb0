//! One value stream of a column: the last value, the running integer its
//! deltas add to (64 or 128 bits by type), and the slots of the current run.

use std::collections::VecDeque;

use bson::{Binary, Bson, DateTime, Decimal128, Document, Timestamp};

use super::simple8b::{self, Slot};

const SCALE: [f64; 5] = [1.0, 10.0, 100.0, 10_000.0, 100_000_000.0];
/// The scale index meaning "the double's bits as an integer".
const MEMORY: u8 = 5;

/// How a type's values follow each other.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    /// No value yet: every slot is missing.
    Nothing,
    /// Deltas of a 64-bit integer (int32, int64, bool, double).
    Delta64,
    /// Deltas of deltas (date, timestamp, ObjectId).
    DeltaOfDelta,
    /// Deltas of a 128-bit integer (string, code, binary, decimal128).
    Delta128,
    /// Only repeats (objects, arrays, null, regex, ...).
    ZeroOnly,
}

#[derive(Debug, Clone)]
pub struct Stream {
    last: Option<Bson>,
    kind: Kind,
    /// The running value (delta types) or running delta (delta-of-delta).
    enc: i128,
    /// The running value of delta-of-delta types.
    base: i64,
    prev: Slot,
    scale: u8,
    pending: VecDeque<Slot>,
}

impl Default for Stream {
    fn default() -> Stream {
        Stream { last: None, kind: Kind::Nothing, enc: 0, base: 0, prev: Some(0), scale: MEMORY, pending: VecDeque::new() }
    }
}

fn string_enc(b: &[u8]) -> Option<i128> {
    if b.len() > 16 || b.first() == Some(&0) {
        return None;
    }
    let mut arr = [0u8; 16];
    for (i, &c) in b.iter().rev().enumerate() {
        arr[i] = c;
    }
    Some(u128::from_le_bytes(arr) as i128)
}

fn string_dec(x: i128) -> Vec<u8> {
    let arr = (x as u128).to_le_bytes();
    let len = arr.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
    arr[..len].iter().rev().copied().collect()
}

fn oid_enc(o: &[u8; 12]) -> i64 {
    i64::from_le_bytes([o[11], o[3], o[10], o[2], o[9], o[1], o[0], 0])
}

fn oid_dec(x: i64, last: &[u8; 12]) -> [u8; 12] {
    let e = x.to_le_bytes();
    let mut o = *last;
    o[0] = e[6];
    o[1] = e[5];
    o[2] = e[3];
    o[3] = e[1];
    o[9] = e[4];
    o[10] = e[2];
    o[11] = e[0];
    o
}

/// A double as an integer at a scale: exact, or not at all.
pub fn encode_double(v: f64, scale: u8) -> Option<i64> {
    if scale == MEMORY {
        return Some(v.to_bits() as i64);
    }
    let m = SCALE[scale as usize];
    let t = v * m;
    const LIMIT: f64 = 9_007_199_254_740_992.0;
    if !(-LIMIT..=LIMIT).contains(&t) {
        return None;
    }
    let r = t.round() as i64;
    ((r as f64 / m).to_bits() == v.to_bits()).then_some(r)
}

fn decode_double(x: i64, scale: u8) -> f64 {
    if scale == MEMORY { f64::from_bits(x as u64) } else { x as f64 / SCALE[scale as usize] }
}

impl Stream {
    /// A stream whose last value is `v` (a literal, a reference object's
    /// leaf, or the last row of an interleaved section).
    pub fn load(&mut self, v: Option<Bson>) {
        self.prev = Some(0);
        self.pending.clear();
        self.enc = 0;
        self.base = 0;
        self.kind = match &v {
            None => Kind::Nothing,
            Some(Bson::Int32(i)) => {
                self.enc = *i as i128;
                Kind::Delta64
            }
            Some(Bson::Int64(i)) => {
                self.enc = *i as i128;
                Kind::Delta64
            }
            Some(Bson::Boolean(b)) => {
                self.enc = *b as i128;
                Kind::Delta64
            }
            Some(Bson::Double(_)) => Kind::Delta64,
            Some(Bson::DateTime(d)) => {
                self.base = d.timestamp_millis();
                Kind::DeltaOfDelta
            }
            Some(Bson::Timestamp(t)) => {
                self.base = (((t.time as u64) << 32) | t.increment as u64) as i64;
                Kind::DeltaOfDelta
            }
            Some(Bson::ObjectId(o)) => {
                self.base = oid_enc(&o.bytes());
                Kind::DeltaOfDelta
            }
            Some(Bson::String(s)) | Some(Bson::JavaScriptCode(s)) => {
                self.enc = string_enc(s.as_bytes()).unwrap_or(0);
                Kind::Delta128
            }
            Some(Bson::Binary(b)) => {
                if b.bytes.len() <= 16 {
                    let mut arr = [0u8; 16];
                    arr[..b.bytes.len()].copy_from_slice(&b.bytes);
                    self.enc = u128::from_le_bytes(arr) as i128;
                }
                Kind::Delta128
            }
            Some(Bson::Decimal128(d)) => {
                self.enc = u128::from_le_bytes(d.bytes()) as i128;
                Kind::Delta128
            }
            Some(_) => Kind::ZeroOnly,
        };
        self.last = v;
    }

    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Reads a Simple-8b control item (`c` and its blocks).
    pub fn load_control(&mut self, c: u8, blocks: &[u8]) -> Result<(), String> {
        let scale = match c >> 4 {
            0x8 => MEMORY,
            n @ 0x9..=0xD => n - 0x9,
            _ => return Err(format!("control byte 0x{c:02x} is not a Simple-8b control")),
        };
        match &self.last {
            Some(Bson::Double(d)) => {
                let e = encode_double(*d, scale)
                    .ok_or_else(|| format!("control byte 0x{c:02x}: the double {d} has no exact form at its scale"))?;
                self.enc = e as i128;
            }
            _ if scale != MEMORY => {
                return Err(format!("control byte 0x{c:02x} scales doubles, but the column's last value is not a double"));
            }
            _ => {}
        }
        self.scale = scale;
        let wide = self.kind == Kind::Delta128;
        let mut out = Vec::new();
        for b in blocks.chunks_exact(8) {
            let word = u64::from_le_bytes(b.try_into().unwrap_or([0; 8]));
            simple8b::decode_block(word, wide, &mut self.prev, &mut out)?;
        }
        self.pending.extend(out);
        Ok(())
    }

    /// The next value of the current run (None: missing).
    pub fn take(&mut self) -> Result<Option<Bson>, String> {
        let Some(slot) = self.pending.pop_front() else { return Err("no value left in the run".into()) };
        let (Some(u), Some(last)) = (slot, self.last.as_ref()) else { return Ok(None) };
        if u == 0 && self.kind != Kind::DeltaOfDelta {
            return Ok(Some(last.clone()));
        }
        let v = match self.kind {
            Kind::Nothing => return Ok(None),
            Kind::ZeroOnly => return Err(format!("a non-zero delta after a {} value, which only repeats", type_name(last))),
            Kind::Delta64 => {
                self.enc = (self.enc as i64).wrapping_add(simple8b::unzigzag64(u)) as i128;
                let x = self.enc as i64;
                match last {
                    Bson::Int32(_) => Bson::Int32(x as i32),
                    Bson::Int64(_) => Bson::Int64(x),
                    Bson::Boolean(_) => Bson::Boolean(x != 0),
                    Bson::Double(_) => Bson::Double(decode_double(x, self.scale)),
                    _ => return Err("internal: a 64-bit delta on another type".into()),
                }
            }
            Kind::DeltaOfDelta => {
                let d = (self.enc as i64).wrapping_add(simple8b::unzigzag64(u));
                self.enc = d as i128;
                self.base = self.base.wrapping_add(d);
                match last {
                    Bson::DateTime(_) => Bson::DateTime(DateTime::from_millis(self.base)),
                    Bson::Timestamp(_) => {
                        let raw = self.base as u64;
                        Bson::Timestamp(Timestamp { time: (raw >> 32) as u32, increment: raw as u32 })
                    }
                    Bson::ObjectId(o) => Bson::ObjectId(bson::oid::ObjectId::from_bytes(oid_dec(self.base, &o.bytes()))),
                    _ => return Err("internal: a delta of delta on another type".into()),
                }
            }
            Kind::Delta128 => {
                self.enc = self.enc.wrapping_add(simple8b::unzigzag128(u));
                match last {
                    Bson::String(_) | Bson::JavaScriptCode(_) => {
                        let s = String::from_utf8(string_dec(self.enc)).map_err(|_| "a string delta gives bytes that are not UTF-8".to_string())?;
                        if matches!(last, Bson::String(_)) { Bson::String(s) } else { Bson::JavaScriptCode(s) }
                    }
                    Bson::Binary(b) => {
                        if b.bytes.len() > 16 {
                            return Err("a non-zero delta after binary data longer than 16 bytes".into());
                        }
                        let arr = (self.enc as u128).to_le_bytes();
                        Bson::Binary(Binary { subtype: b.subtype, bytes: arr[..b.bytes.len()].to_vec() })
                    }
                    Bson::Decimal128(_) => Bson::Decimal128(Decimal128::from_bytes((self.enc as u128).to_le_bytes())),
                    _ => return Err("internal: a 128-bit delta on another type".into()),
                }
            }
        };
        self.last = Some(v.clone());
        Ok(Some(v))
    }
}

fn type_name(v: &Bson) -> &'static str {
    match v {
        Bson::Document(_) => "object",
        Bson::Array(_) => "array",
        Bson::Null => "null",
        Bson::Undefined => "undefined",
        Bson::RegularExpression(_) => "regex",
        Bson::MinKey => "minKey",
        Bson::MaxKey => "maxKey",
        _ => "non-numeric",
    }
}

/// A reference object's leaves, depth first: objects are entered, and arrays
/// too unless `legacy` (0xF0, where an array is one value).
pub fn leaves(d: &Document, legacy: bool, out: &mut Vec<Bson>) {
    for (_, v) in d {
        leaf_or_descend(v, legacy, out);
    }
}

fn leaf_or_descend(v: &Bson, legacy: bool, out: &mut Vec<Bson>) {
    match v {
        Bson::Document(d) => leaves(d, legacy, out),
        Bson::Array(a) if !legacy => {
            for e in a {
                leaf_or_descend(e, legacy, out);
            }
        }
        other => out.push(other.clone()),
    }
}
