//! Any byte string fed to the bucket decoder must yield Ok or Err, never a panic,
//! an abort or an unbounded allocation: a corrupt bucket must not crash the backend.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tsbucket_format::{stats::{decode_field_stats, decode_stats, field_stats}, BucketReader};

fuzz_target!(|data: &[u8]| {
    if let Ok(reader) = BucketReader::parse(data) {
        let _ = reader.decode_all();
        reader.columns().iter().for_each(|c| {
            let _ = field_stats(c);
        });
    }
    let _ = decode_stats(data);
    let _ = decode_field_stats(data);
});
