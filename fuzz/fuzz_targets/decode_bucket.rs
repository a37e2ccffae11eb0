//! Any byte string fed to the bucket decoder must yield Ok or Err, never a panic,
//! an abort or an unbounded allocation: a corrupt bucket must not crash the backend.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tsbucket_format::{prefix_len, stats::{decode_field_stats, decode_stats, field_stats}, BucketReader};

fuzz_target!(|data: &[u8]| {
    if let Ok(reader) = BucketReader::parse(data) {
        let _ = reader.decode_all();
        reader.columns().iter().for_each(|c| {
            let _ = field_stats(c);
        });
    }
    // The prefix a reader of the odd columns would fetch, read as such.
    if let Some(n) = prefix_len(data, |a| a % 2 == 1) {
        if let Ok(reader) = BucketReader::parse_prefix(&data[..n.min(data.len())], data.len()) {
            reader.columns().iter().for_each(|c| {
                let _ = c.decode();
            });
        }
    }
    let _ = decode_stats(data);
    let _ = decode_field_stats(data);
});
