#![no_main]
//! A corrupt tail row must decode to an error, never a panic.
use libfuzzer_sys::fuzz_target;
use tsbucket_format::row::{push_value, RowReader};
use tsbucket_format::{Column, ColumnKind};

fuzz_target!(|data: &[u8]| {
    if let Ok(mut reader) = RowReader::parse(data) {
        let mut col = Column::new(1, ColumnKind::Int);
        while let Ok(Some((_, kind, value))) = reader.next_value() {
            let _ = push_value(&mut col, kind, value);
        }
    }
});
