//! Codec for variable-length values (text, bytea, jsonb, numeric, arrays... as
//! their raw bytes). Repeated values, the common case for tags and states, get a
//! dictionary; everything else is length-prefixed and lz4-compressed.
//!
//! Format version 2 adds forms for small data, where lz4's framing outweighs
//! what it saves: a column of one value (a bucket's tag) as `varint n |
//! varint length | bytes`, and the dictionary and plain forms with their
//! bytes stored as they are when lz4 would not make them smaller.

use super::int;
use crate::bits::{put_chunk, put_varint, Cursor};
use crate::column::ByteValues;
use crate::error::{DecodeError, Result};
use std::collections::HashMap;

const DICTIONARY: u8 = 0;
const PLAIN: u8 = 1;
const CONSTANT: u8 = 2;
const DICTIONARY_RAW: u8 = 3;
const PLAIN_RAW: u8 = 4;
/// lz4 cannot expand more than ~255x; a larger claim is corruption.
const LZ4_MAX_RATIO: usize = 255;

pub fn encode(values: &ByteValues, out: &mut Vec<u8>) {
    // A bucket's tags usually hold one value: a one-entry dictionary, no hashing.
    if let Some(first) = values.get(0)
        && values.iter().all(|v| v == first)
    {
        out.push(CONSTANT);
        put_varint(out, values.len() as u64);
        put_varint(out, first.len() as u64);
        out.extend_from_slice(first);
        return;
    }
    match encode_dictionary(values) {
        // One value in eight or fewer distinct: the dictionary wins; skip lz4 of it all.
        Some((dict, distinct)) if distinct * 8 <= values.len() => out.extend_from_slice(&dict),
        Some((dict, _)) => {
            let plain = encode_plain(values);
            out.extend_from_slice(if dict.len() < plain.len() { &dict } else { &plain });
        }
        None => out.extend_from_slice(&encode_plain(values)),
    }
}

/// `PLAIN | lengths | chunk of lz4`, or `PLAIN_RAW | lengths | chunk of the
/// bytes` when lz4 would not make them smaller.
fn encode_plain(values: &ByteValues) -> Vec<u8> {
    let data = values.concatenated();
    let compressed = compress(&data);
    let raw = compressed.len() >= data.len();
    let mut out = vec![if raw { PLAIN_RAW } else { PLAIN }];
    let lengths: Vec<i64> = values.iter().map(|v| v.len() as i64).collect();
    int::encode(&lengths, &mut out);
    put_chunk(&mut out, if raw { &data } else { &compressed });
    out
}

/// The dictionary encoding and its number of distinct values, when at most half are distinct.
fn encode_dictionary(values: &ByteValues) -> Option<(Vec<u8>, usize)> {
    let mut ids: HashMap<&[u8], i64> = HashMap::new();
    let mut dict = ByteValues::default();
    let mut codes = Vec::with_capacity(values.len());
    for v in values.iter() {
        let next = ids.len() as i64;
        let id = *ids.entry(v).or_insert_with(|| {
            dict.push(v);
            next
        });
        codes.push(id);
    }
    if dict.len() * 2 > values.len() {
        return None;
    }
    let entries = encode_plain(&dict);
    let mut out = vec![if entries[0] == PLAIN_RAW { DICTIONARY_RAW } else { DICTIONARY }];
    out.extend_from_slice(&entries[1..]);
    int::encode(&codes, &mut out);
    Some((out, dict.len()))
}

fn compress(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    put_varint(&mut out, data.len() as u64);
    out.extend_from_slice(&lz4_flex::block::compress(data));
    out
}

fn decompress(chunk: &[u8]) -> Result<Vec<u8>> {
    let mut c = Cursor::new(chunk);
    let limit = chunk.len().saturating_mul(LZ4_MAX_RATIO).saturating_add(64);
    let size = c.len("uncompressed size", limit)?;
    let rest = c.take(c.remaining(), "lz4 block")?;
    lz4_flex::block::decompress(rest, size).map_err(|_| DecodeError::Invalid("lz4 block is corrupt"))
}

fn decode_plain(c: &mut Cursor, limit: usize, raw: bool) -> Result<ByteValues> {
    let lengths = int::decode(c, limit)?;
    let data = if raw { c.chunk("value bytes")?.to_vec() } else { decompress(c.chunk("lz4 data")?)? };
    let mut offsets = Vec::with_capacity(lengths.len() + 1);
    offsets.push(0u32);
    let mut end: u64 = 0;
    for len in lengths {
        if len < 0 {
            return Err(DecodeError::Invalid("negative value length"));
        }
        end += len as u64;
        if end > data.len() as u64 {
            return Err(DecodeError::Invalid("value lengths exceed data"));
        }
        offsets.push(end as u32);
    }
    if end != data.len() as u64 {
        return Err(DecodeError::Invalid("value lengths do not cover data"));
    }
    Ok(ByteValues::from_parts(offsets, data))
}

pub fn decode(c: &mut Cursor, limit: usize) -> Result<ByteValues> {
    match c.u8("bytes codec")? {
        tag @ (PLAIN | PLAIN_RAW) => decode_plain(c, limit, tag == PLAIN_RAW),
        CONSTANT => {
            let n = c.len("value count", limit)?;
            let value = c.chunk("constant value")?;
            let mut dict = ByteValues::default();
            dict.push(value);
            ByteValues::from_dictionary(dict, vec![0; n]).ok_or(DecodeError::Invalid("constant column"))
        }
        tag @ (DICTIONARY | DICTIONARY_RAW) => {
            let dict = decode_plain(c, limit, tag == DICTIONARY_RAW)?;
            let codes = int::decode(c, limit)?
                .into_iter()
                .map(|code| u32::try_from(code).map_err(|_| DecodeError::Invalid("dictionary code out of range")))
                .collect::<Result<Vec<u32>>>()?;
            ByteValues::from_dictionary(dict, codes).ok_or(DecodeError::Invalid("dictionary code out of range"))
        }
        tag => Err(DecodeError::UnknownTag { what: "bytes codec", tag }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(values: &[&[u8]]) -> usize {
        let mut bv = ByteValues::default();
        values.iter().for_each(|v| bv.push(v));
        let mut out = Vec::new();
        encode(&bv, &mut out);
        let got = decode(&mut Cursor::new(&out), values.len()).unwrap();
        assert_eq!(got.iter().collect::<Vec<_>>(), values);
        out.len()
    }

    #[test]
    fn dictionaries_decode_without_expanding() {
        let mut bv = ByteValues::default();
        for i in 0..100 {
            bv.push(if i % 3 == 0 { b"a".as_slice() } else { b"bb".as_slice() });
        }
        let mut out = Vec::new();
        encode(&bv, &mut out);
        let got = decode(&mut Cursor::new(&out), 100).unwrap();
        let (entries, codes) = got.dictionary().expect("dictionary form");
        assert_eq!(entries.count(), 2);
        assert_eq!(codes.len(), 100);
        assert_eq!(got, bv);
        assert_eq!(got.concatenated(), bv.concatenated());
        // NULLs spread into a dictionary keep its form.
        let valid: Vec<bool> = (0..150).map(|i| i % 3 != 1).collect();
        let spread = got.clone().spread(&valid);
        assert!(spread.dictionary().is_some());
        assert_eq!(spread, bv.clone().spread(&valid));
        assert_eq!(spread.get(1), Some(b"".as_slice()));
        // A dictionary grows by pushing, and re-encodes like its plain twin.
        let mut grown = got;
        grown.push(b"ccc");
        let mut twin = bv.clone();
        twin.push(b"ccc");
        assert_eq!(grown, twin);
        let (mut a, mut b) = (Vec::new(), Vec::new());
        encode(&grown, &mut a);
        encode(&twin, &mut b);
        assert_eq!(a, b);
    }

    #[test]
    fn out_of_range_dictionary_codes_are_errors() {
        assert!(ByteValues::from_dictionary(ByteValues::default(), vec![0]).is_none());
    }

    #[test]
    fn repeated_tags_are_nearly_free() {
        let v: Vec<&[u8]> = (0..1000).map(|_| b"host_42".as_slice()).collect();
        assert!(round_trip(&v) < 30);
    }

    #[test]
    fn distinct_and_empty_values_round_trip() {
        let owned: Vec<String> = (0..300).map(|i| format!("note number {i}")).collect();
        let mut v: Vec<&[u8]> = owned.iter().map(|s| s.as_bytes()).collect();
        v.push(b"");
        round_trip(&v);
        round_trip(&[]);
        round_trip(&[b""]);
    }
}
