//! The document codec on any input: a body that decodes yields Ok or Err,
//! never a panic or an unbounded allocation; and any values, jsonb or not,
//! encode and read back as the same bytes (a value that is no jsonb as
//! Postgres writes it keeps its column as bytes).
#![no_main]

use libfuzzer_sys::fuzz_target;
use tsbucket_format::bits::Cursor;
use tsbucket_format::codec::document;
use tsbucket_format::ByteValues;

fuzz_target!(|data: &[u8]| {
    let _ = document::decode(&mut Cursor::new(data), 1 << 16);
    let _ = document::decode_field(&mut Cursor::new(data), 1 << 16, b"k");
    let _ = tsbucket_format::jsonb::parse(data);
    // The input cut into values at each 0xFF byte.
    let mut values = ByteValues::default();
    data.split(|&b| b == 0xFF).for_each(|v| values.push(v));
    let mut body = Vec::new();
    document::encode(&values, &mut body);
    let back = document::decode(&mut Cursor::new(&body), values.len()).expect("an encoded body decodes");
    assert_eq!(back, values);
    // A field read alone agrees with the document read whole.
    if let Some(fields) = document::decode_field(&mut Cursor::new(&body), values.len(), b"k").expect("an encoded body decodes") {
        assert_eq!(fields.len(), values.len());
    }
});
