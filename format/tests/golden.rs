//! Every payload version ever written stays readable: each version's bucket,
//! as that release wrote it, is kept in tests/golden/ and must decode to the
//! same columns (those of its version: later ones exercise the forms they added). A new format version adds a file here; none is ever removed.
//! (Regenerate the current version's file only when adding it:
//! TSBUCKET_WRITE_GOLDEN=1 cargo test -p tsbucket-format --test golden.)

use tsbucket_format::jsonb::{self, Value};
use tsbucket_format::{encode_bucket, prefix_len, BucketReader, Column, ColumnKind, FORMAT_VERSION};

/// The columns every golden file holds: each kind, with NULLs and extremes.
fn expected_columns(version: u8) -> (usize, Vec<Column>) {
    let rows = 300;
    let mut time = Column::new(1, ColumnKind::Timestamp);
    let mut int = Column::new(3, ColumnKind::Int);
    let mut f64s = Column::new(4, ColumnKind::Float64);
    let mut f32s = Column::new(5, ColumnKind::Float32);
    let mut bools = Column::new(6, ColumnKind::Bool);
    let mut bytes = Column::new(9, ColumnKind::Bytes);
    for i in 0..rows as i64 {
        time.push_int(1_700_000_000_000_000 + i * 10_000_000 + (i % 7));
        match i % 11 {
            0 => int.push_null(),
            1 => int.push_int(i64::MIN),
            2 => int.push_int(i64::MAX),
            _ => int.push_int(i * i - 500),
        }
        match i % 13 {
            0 => f64s.push_null(),
            1 => f64s.push_float(f64::INFINITY),
            2 => f64s.push_float(f64::NEG_INFINITY),
            _ => f64s.push_float(i as f64 / 10.0),
        }
        f32s.push_float(f64::from((i as f32) * 0.25));
        if i % 5 == 0 { bools.push_null() } else { bools.push_bool(i % 3 == 0) }
        match i % 4 {
            0 => bytes.push_null(),
            1 => bytes.push_bytes(b""),
            _ => bytes.push_bytes(format!("host_{}", i % 17).as_bytes()),
        }
    }
    let mut columns = vec![time, int, f64s, f32s, bools, bytes];
    if version >= 2 {
        // The forms version 2 added: mixed-radix blocks (a walk of whole numbers),
        // NULL positions, boolean runs, decimals with exceptions, ordered floats,
        // a text constant, a small dictionary stored without lz4.
        let mut walk = Column::new(10, ColumnKind::Float64);
        let mut sparse = Column::new(11, ColumnKind::Int);
        let mut runs = Column::new(12, ColumnKind::Bool);
        let mut exceptions = Column::new(13, ColumnKind::Float64);
        let mut precise = Column::new(14, ColumnKind::Float64);
        let mut tag = Column::new(15, ColumnKind::Bytes);
        let mut states = Column::new(16, ColumnKind::Bytes);
        let (mut level, mut x) = (50i64, 100.0f64);
        for i in 0..rows as i64 {
            level = (level + [1, -1, 2, 0, -2, 1, 1][(i * 5 % 7) as usize]).clamp(0, 100);
            walk.push_float(level as f64);
            if i % 97 == 3 { sparse.push_null() } else { sparse.push_int(level * 3) }
            runs.push_bool((i / 70) % 2 == 0);
            exceptions.push_float(match i {
                17 => f64::INFINITY,
                201 => -0.0,
                _ => level as f64 / 100.0,
            });
            x += ((i * 7919 % 1000) as f64 - 499.5) * 1e-3 / 3.0;
            precise.push_float(x);
            tag.push_bytes(b"eu-central-1");
            states.push_bytes([b"ok".as_slice(), b"warn", b"fault"][(i / 40 % 3) as usize]);
        }
        columns.extend([walk, sparse, runs, exceptions, precise, tag, states]);
    }
    if version >= 3 {
        // Version 3's documents: jsonb shredded by path, with a path that changes
        // type, one present in some rows, a nested array, scales that vary, a
        // number beyond an i64, a scalar and SQL NULLs.
        let mut docs = Column::new(17, ColumnKind::Document);
        let num = |m: i64, s: u16| {
            let mut v = Vec::new();
            jsonb::decimal_to_numeric(m, s, &mut v);
            Value::Number(v)
        };
        for i in 0..rows as i64 {
            if i % 50 == 7 {
                docs.push_null();
                continue;
            }
            let mut pairs = vec![
                (b"n".to_vec(), num(i, 0)),
                (b"v".to_vec(), if i % 31 == 5 { Value::String(b"n/a".to_vec()) } else { num(2150 + i % 9, 1 + (i % 2) as u16) }),
                (b"ok".to_vec(), Value::Bool(i % 3 != 0)),
                (b"tags".to_vec(), Value::Array(vec![Value::String(b"a".to_vec()), Value::Null])),
            ];
            if i % 10 == 0 {
                pairs.push((b"gps".to_vec(), Value::Object(vec![(b"lat".to_vec(), num(4_812_345 + i, 5))])));
            }
            if i % 97 == 1 {
                // 2^70 + 1: the numeric's own bytes.
                pairs.push((b"big".to_vec(), Value::Number(vec![16 << 2, 0, 0, 0, 0x00, 0x85, 0x0B, 0, 0xF3, 0x16, 0x99, 0x21, 0x6D, 0x0F, 0x19, 0x1A])));
            }
            pairs.sort_by(|a, b| jsonb::key_order(&a.0, &b.0));
            let doc = if i == 3 { Value::String(b"scalar".to_vec()) } else { Value::Object(pairs) };
            let mut bytes = Vec::new();
            jsonb::write(&doc, &mut bytes).unwrap();
            docs.push_bytes(&bytes);
        }
        columns.push(docs);
        // Numbers as Postgres writes a float8 into jsonb, at their shortest
        // scale (21.1, 21, -0.25): no scale stored per number (SCALES_TRIMMED).
        let mut floats = Column::new(18, ColumnKind::Document);
        for i in 0..rows as i64 {
            let (m, s) = [(211 + i % 7, 1), (21 + i % 3, 0), (-(25 + i % 4 * 10), 2)][(i % 3) as usize];
            let doc = Value::Object(vec![(b"t".to_vec(), num(m, s))]);
            let mut bytes = Vec::new();
            jsonb::write(&doc, &mut bytes).unwrap();
            floats.push_bytes(&bytes);
        }
        columns.push(floats);
    }
    if version >= 4 {
        // Version 4's bodies without counts, each form of them: regular
        // timestamps (the linear transform), columns of NULLs only, random
        // doubles held for ten rows each (Gorilla XOR), a full-precision walk
        // (ordered keys from 1.0's).
        let mut regular = Column::new(19, ColumnKind::Timestamp);
        let mut nothing = Column::new(20, ColumnKind::Int);
        let mut scattered = Column::new(21, ColumnKind::Float64);
        let mut walk = Column::new(22, ColumnKind::Float64);
        let mut no_floats = Column::new(23, ColumnKind::Float64);
        let mut held = 0u64;
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut x = 100.0f64;
        for i in 0..rows as i64 {
            regular.push_int(1_700_000_000_000_000 + i * 10_000_000);
            nothing.push_null();
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            if i % 10 == 0 {
                held = seed >> 2;
            }
            scattered.push_float(f64::from_bits(held));
            x += (seed >> 11) as f64 / (1u64 << 53) as f64 - 0.5;
            walk.push_float(x);
            no_floats.push_null();
        }
        columns.extend([regular, nothing, scattered, walk, no_floats]);
    }
    (rows as usize, columns)
}

#[test]
fn every_written_version_decodes() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden");
    if std::env::var_os("TSBUCKET_WRITE_GOLDEN").is_some() {
        let (rows, expected) = expected_columns(FORMAT_VERSION);
        std::fs::write(format!("{dir}/v{FORMAT_VERSION}.bin"), encode_bucket(rows, &expected)).unwrap();
    }
    for version in 1..=FORMAT_VERSION {
        let (rows, expected) = expected_columns(version);
        let path = format!("{dir}/v{version}.bin");
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}: every format version needs its golden file"));
        let reader = BucketReader::parse(&bytes).unwrap_or_else(|e| panic!("{path}: {e}"));
        assert_eq!(reader.rows(), rows, "{path}");
        assert_eq!(reader.decode_all().unwrap(), expected, "{path}");
    }
}

/// Version 5 lays the columns out after its directory: each golden column
/// decodes from the prefix `prefix_len` asks for (planned from the first 256
/// bytes, as the store plans from the first TOAST chunk), the same as from
/// the whole payload; a column past that prefix is an error, never a column
/// the bucket lacks. Older versions are read whole.
#[test]
fn version_5_columns_decode_from_a_prefix() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden");
    let bytes = std::fs::read(format!("{dir}/v5.bin")).unwrap();
    let (rows, expected) = expected_columns(5);
    for col in &expected {
        let n = prefix_len(&bytes[..256], |a| a == col.attnum).expect("the directory fits in 256 bytes");
        let reader = BucketReader::parse_prefix(&bytes[..n], bytes.len()).unwrap();
        assert_eq!(reader.rows(), rows);
        assert_eq!(&reader.column(col.attnum).unwrap().expect("read").decode().unwrap(), col);
        for later in expected.iter().filter(|c| c.attnum > col.attnum) {
            assert!(reader.column(later.attnum).is_err(), "column {} read past the prefix", later.attnum);
        }
    }
    for version in 1..5 {
        let old = std::fs::read(format!("{dir}/v{version}.bin")).unwrap();
        assert_eq!(prefix_len(&old, |_| true), None, "version {version}");
        assert!(BucketReader::parse_prefix(&old[..old.len() - 1], old.len()).is_err(), "version {version}");
    }
}

/// Document fields' header statistics in both section forms a release wrote:
/// tag 1 (an attnum per field, 0.6.0 before 910ad59) and tag 2 (grouped by
/// column). Written by stats.rs's unit test under TSBUCKET_WRITE_GOLDEN=1
/// from its document column of 200 rows and a NULL: "a" a decimal (i + 1000)/10
/// absent in every tenth row, "b" holding a string once (no statistics), "c"
/// (i * 25)/100, JSON null in every third row.
#[test]
fn document_field_statistics_of_every_section_form_decode() {
    use tsbucket_format::stats::{decode_field_stats, decode_stats, float_sum, ColumnStats, Range, Sum, Summary};
    let field = |key: &str, values: Vec<f64>, nulls: u32| {
        let (min, max) = values.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| (lo.min(x), hi.max(x)));
        let summary = Summary { nulls, sum: float_sum(values.into_iter()).map(Sum::Float) };
        (key.as_bytes().to_vec(), ColumnStats { attnum: 3, range: Range::Float { min, max, has_nan: false }, summary: Some(summary) })
    };
    let expected = [
        field("a", (0..200i64).filter(|i| i % 10 != 0).map(|i| (1000 + i) as f64 / 10.0).collect(), 20 + 1),
        field("c", (0..200i64).filter(|i| i % 3 != 0).map(|i| (i * 25) as f64 / 100.0).collect(), 67 + 1),
    ];
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden");
    for tag in [1, 2] {
        let path = format!("{dir}/stats-fields-{tag}.bin");
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        assert!(decode_stats(&bytes).unwrap().is_empty(), "{path}");
        let back = decode_field_stats(&bytes).unwrap_or_else(|e| panic!("{path}: {e}"));
        assert_eq!(back.len(), expected.len(), "{path}");
        for (b, (key, stats)) in back.iter().zip(&expected) {
            assert_eq!(&b.key, key, "{path}");
            assert!(b.stats.matches(stats), "{path}: {b:?} != {stats:?}");
        }
    }
}
