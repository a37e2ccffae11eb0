//! Property tests of the bucket format: any column set round-trips exactly
//! (NULLs, extremes, NaN, -0.0, empty strings), and no corruption of a valid
//! payload can make the decoder panic.

use proptest::prelude::*;
use tsbucket_format::jsonb::{self, Value};
use tsbucket_format::{encode_bucket, prefix_len, BucketReader, ByteValues, Column, ColumnKind, Values};

/// A sensor's reading as a jsonb datum: a decimal, a status, a count, gps now and then.
fn reading(level: i64, extra: bool) -> Vec<u8> {
    let num = |m: i64, s: u16| {
        let mut v = Vec::new();
        jsonb::decimal_to_numeric(m, s, &mut v);
        Value::Number(v)
    };
    let mut pairs = vec![
        (b"n".to_vec(), num(level, 0)),
        (b"st".to_vec(), Value::String(format!("s{}", level.rem_euclid(3)).into_bytes())),
        (b"temp".to_vec(), num(level * 7, 1 + (level & 1) as u16)),
    ];
    if extra {
        pairs.push((b"gps".to_vec(), Value::Array(vec![num(level, 5), Value::Null])));
        pairs.sort_by(|a, b| jsonb::key_order(&a.0, &b.0));
    }
    let mut out = Vec::new();
    jsonb::write(&Value::Object(pairs), &mut out).unwrap();
    out
}

#[derive(Clone, Debug)]
enum Cell {
    Null,
    Int(i64),
    Float(f64),
    Bool(bool),
    Bytes(Vec<u8>),
}

fn extreme_i64() -> impl Strategy<Value = i64> {
    prop_oneof![
        Just(i64::MIN), Just(i64::MAX), Just(0i64), Just(-1i64),
        -1000i64..1000, any::<i64>(),
    ]
}

fn extreme_f64() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(f64::NAN), Just(f64::INFINITY), Just(f64::NEG_INFINITY), Just(-0.0), Just(f64::MAX),
        Just(f64::MIN_POSITIVE), (-100_000i64..100_000).prop_map(|n| n as f64 / 10.0),
        (0i64..100).prop_map(|n| n as f64), any::<f64>(),
    ]
}

fn cell(kind: ColumnKind) -> BoxedStrategy<Cell> {
    let value: BoxedStrategy<Cell> = match kind {
        ColumnKind::Timestamp | ColumnKind::Int => extreme_i64().prop_map(Cell::Int).boxed(),
        ColumnKind::Float64 => extreme_f64().prop_map(Cell::Float).boxed(),
        ColumnKind::Float32 => prop_oneof![
            any::<f32>().prop_map(|f| Cell::Float(f as f64)),
            (-100_000i32..100_000).prop_map(|n| Cell::Float((n as f32 / 100.0) as f64)),
        ]
        .boxed(),
        ColumnKind::Bool => any::<bool>().prop_map(Cell::Bool).boxed(),
        ColumnKind::Bytes => prop_oneof![
            prop::collection::vec(any::<u8>(), 0..40),
            prop::sample::select(vec![b"alpha".to_vec(), b"beta".to_vec(), Vec::new()]),
        ]
        .prop_map(Cell::Bytes)
        .boxed(),
        ColumnKind::Document => prop_oneof![
            prop::collection::vec(any::<u8>(), 0..40),
            (-1_000_000_000i64..1_000_000_000, any::<bool>()).prop_map(|(l, e)| reading(l, e)),
        ]
        .prop_map(Cell::Bytes)
        .boxed(),
    };
    prop_oneof![1 => Just(Cell::Null), 4 => value].boxed()
}

fn kind() -> impl Strategy<Value = ColumnKind> {
    prop::sample::select(vec![
        ColumnKind::Timestamp, ColumnKind::Int, ColumnKind::Float64, ColumnKind::Float32,
        ColumnKind::Bool, ColumnKind::Bytes, ColumnKind::Document,
    ])
}

fn bucket() -> impl Strategy<Value = (usize, Vec<Column>)> {
    (0usize..300, prop::collection::vec(kind(), 0..6)).prop_flat_map(|(rows, kinds)| {
        let cols: Vec<_> = kinds
            .into_iter()
            .enumerate()
            .map(|(i, k)| prop::collection::vec(cell(k), rows).prop_map(move |cells| build(i as u16 + 1, k, cells)))
            .collect();
        (Just(rows), cols)
    })
}

fn build(attnum: u16, kind: ColumnKind, cells: Vec<Cell>) -> Column {
    let mut col = Column::new(attnum, kind);
    for c in cells {
        match c {
            Cell::Null => col.push_null(),
            Cell::Int(v) => col.push_int(v),
            Cell::Float(v) => col.push_float(v),
            Cell::Bool(v) => col.push_bool(v),
            Cell::Bytes(v) => col.push_bytes(&v),
        }
    }
    col
}

/// Columns shaped like time series, which take the codecs' compact forms
/// (mixed-radix blocks of random walks, NULL positions, boolean runs,
/// decimals with a few exceptions, full-precision walks held in order):
/// each step of a walk is drawn from a small alphabet, NULLs and flips are
/// rare, specials rarer.
fn shaped_column(attnum: u16, kind: ColumnKind, rows: usize) -> impl Strategy<Value = Column> {
    (
        1u64..12,
        prop::collection::vec((any::<u16>(), any::<u16>(), any::<u16>()), rows),
        prop::sample::select(vec![0u32, 1, 2, 5]),
        prop::sample::select(vec![0u16, 3, 40, 400]),
    )
        .prop_map(move |(steps, draws, digits, null_per_mille)| {
            let mut col = Column::new(attnum, kind);
            let mut level = 1000i64;
            let mut flag = false;
            let mut x = 100.0f64;
            for (a, b, c) in draws {
                if (a % 1000) < null_per_mille {
                    col.push_null();
                    continue;
                }
                level += (b as i64 % (2 * steps as i64 + 1)) - steps as i64;
                match kind {
                    ColumnKind::Timestamp => col.push_int(1_700_000_000_000_000 + level * 10_000_000),
                    ColumnKind::Int => col.push_int(level),
                    ColumnKind::Float64 | ColumnKind::Float32 => {
                        let special = [f64::NAN, -0.0, f64::INFINITY, 1.0 / 3.0];
                        let v = if c % 97 == 0 {
                            special[(c / 97) as usize % special.len()]
                        } else if digits == 5 {
                            x += (c as f64 / 65_536.0 - 0.5) * 1.000_001;
                            x
                        } else {
                            level as f64 / 10f64.powi(digits as i32)
                        };
                        col.push_float(if kind == ColumnKind::Float32 { v as f32 as f64 } else { v })
                    }
                    ColumnKind::Bool => {
                        if c % 29 == 0 {
                            flag = !flag;
                        }
                        col.push_bool(flag)
                    }
                    ColumnKind::Bytes => col.push_bytes(format!("status_{}", level.rem_euclid(4)).as_bytes()),
                    ColumnKind::Document => col.push_bytes(&reading(level, c % 13 == 0)),
                }
            }
            col
        })
}

fn shaped_bucket() -> impl Strategy<Value = (usize, Vec<Column>)> {
    (0usize..1000, prop::collection::vec(kind(), 1..6)).prop_flat_map(|(rows, kinds)| {
        let cols: Vec<_> = kinds.into_iter().enumerate().map(|(i, k)| shaped_column(i as u16 + 1, k, rows)).collect();
        (Just(rows), cols)
    })
}

/// Same rows, same NULLs, same bits.
fn assert_same(a: &Column, b: &Column) {
    assert_eq!(a.attnum, b.attnum);
    assert_eq!(a.kind, b.kind);
    assert_eq!(a.len(), b.len());
    for row in 0..a.len() {
        assert_eq!(a.is_null(row), b.is_null(row), "null mismatch at row {row}");
        if a.is_null(row) {
            continue;
        }
        match (&a.values, &b.values) {
            (Values::Int(x), Values::Int(y)) => assert_eq!(x[row], y[row]),
            // Bit-exact, float4 columns included (they are stored widened).
            (Values::Float(x), Values::Float(y)) => assert_eq!(x[row].to_bits(), y[row].to_bits()),
            (Values::Bool(x), Values::Bool(y)) => assert_eq!(x[row], y[row]),
            (Values::Bytes(x), Values::Bytes(y)) => assert_eq!(x.get(row), y.get(row)),
            _ => panic!("representation mismatch"),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn buckets_round_trip((rows, columns) in bucket()) {
        let bytes = encode_bucket(rows, &columns);
        let reader = BucketReader::parse(&bytes).unwrap();
        prop_assert_eq!(reader.rows(), rows);
        let decoded = reader.decode_all().unwrap();
        prop_assert_eq!(decoded.len(), columns.len());
        for (a, b) in columns.iter().zip(&decoded) {
            assert_same(a, b);
        }
    }

    #[test]
    fn shaped_buckets_round_trip((rows, columns) in shaped_bucket()) {
        let bytes = encode_bucket(rows, &columns);
        let decoded = BucketReader::parse(&bytes).unwrap().decode_all().unwrap();
        for (a, b) in columns.iter().zip(&decoded) {
            assert_same(a, b);
        }
    }

    #[test]
    fn wanted_columns_decode_from_the_prefix_they_need(
        (rows, columns) in bucket(),
        wanted in prop::collection::vec(any::<bool>(), 8),
        head in any::<prop::sample::Index>(),
    ) {
        let bytes = encode_bucket(rows, &columns);
        let whole = BucketReader::parse(&bytes).unwrap().decode_all().unwrap();
        let wants = |attnum: u16| wanted[attnum as usize % wanted.len()];
        // The reader plans from a first piece of the payload; too short a piece leaves it to read all.
        let head = &bytes[..=head.index(bytes.len())];
        let Some(n) = prefix_len(head, wants) else { return Ok(()) };
        prop_assert!(n <= bytes.len());
        let reader = BucketReader::parse_prefix(&bytes[..n], bytes.len()).unwrap();
        prop_assert_eq!(reader.rows(), rows);
        for (col, back) in columns.iter().zip(&whole) {
            match reader.column(col.attnum) {
                Ok(Some(encoded)) => assert_same(back, &encoded.decode().unwrap()),
                Ok(None) => prop_assert!(false, "column {} missing", col.attnum),
                // Past the prefix: only columns not wanted, and never read as a missing column.
                Err(_) => prop_assert!(!wants(col.attnum)),
            }
        }
    }

    #[test]
    fn corrupt_prefixes_error_instead_of_panicking(
        (rows, columns) in bucket(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4),
        cut in any::<prop::sample::Index>(),
        total_extra in 0usize..3,
    ) {
        let mut bytes = encode_bucket(rows, &columns);
        for (at, value) in flips {
            let i = at.index(bytes.len());
            bytes[i] = value;
        }
        let total = bytes.len() + total_extra;
        let _ = prefix_len(&bytes, |a| a % 2 == 0);
        if let Ok(reader) = BucketReader::parse_prefix(&bytes[..cut.index(bytes.len() + 1)], total) {
            for c in reader.columns() {
                let _ = c.decode();
            }
        }
    }

    #[test]
    fn corrupt_shaped_payloads_error_instead_of_panicking(
        (rows, columns) in shaped_bucket(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
    ) {
        let mut bytes = encode_bucket(rows, &columns);
        for (at, value) in flips {
            let i = at.index(bytes.len());
            bytes[i] = value;
        }
        if let Ok(reader) = BucketReader::parse(&bytes) {
            let _ = reader.decode_all();
        }
    }

    #[test]
    fn corrupt_payloads_error_instead_of_panicking(
        (rows, columns) in bucket(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        cut in any::<prop::sample::Index>(),
        truncate in any::<bool>(),
    ) {
        let mut bytes = encode_bucket(rows, &columns);
        if bytes.is_empty() { return Ok(()); }
        for (at, value) in flips {
            let i = at.index(bytes.len());
            bytes[i] = value;
        }
        if truncate {
            bytes.truncate(cut.index(bytes.len()));
        }
        if let Ok(reader) = BucketReader::parse(&bytes) {
            let _ = reader.decode_all();
        }
    }

    #[test]
    fn filter_keeps_exactly_the_chosen_rows((rows, columns) in bucket(), seed in any::<u64>()) {
        let keep: Vec<bool> = (0..rows).map(|i| (seed >> (i % 64)) & 1 == 1).collect();
        for col in &columns {
            let kept = col.filter(&keep);
            let mut j = 0;
            for (i, k) in keep.iter().enumerate() {
                if *k {
                    prop_assert_eq!(kept.is_null(j), col.is_null(i));
                    j += 1;
                }
            }
            prop_assert_eq!(kept.len(), j);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn gather_reorders_rows((rows, columns) in bucket(), seed in any::<u64>()) {
        let mut order: Vec<usize> = (0..rows).collect();
        // A deterministic shuffle from the seed.
        let mut x = seed | 1;
        for i in (1..order.len()).rev() {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            order.swap(i, (x % (i as u64 + 1)) as usize);
        }
        for col in &columns {
            let g = col.gather(&order);
            prop_assert_eq!(g.len(), rows);
            for (new, &old) in order.iter().enumerate() {
                let mut expect = Column::new(col.attnum, col.kind);
                expect.push_row_of(col, old);
                let mut got = Column::new(col.attnum, col.kind);
                got.push_row_of(&g, new);
                assert_same(&expect, &got);
            }
        }
    }
}

#[test]
fn empty_bytes_values_survive_nulls() {
    let mut col = Column::new(3, ColumnKind::Bytes);
    col.push_bytes(b"");
    col.push_null();
    col.push_bytes(b"x");
    let bytes = encode_bucket(3, std::slice::from_ref(&col));
    let back = BucketReader::parse(&bytes).unwrap().decode_all().unwrap();
    assert_same(&col, &back[0]);
    assert_eq!(back[0].values, Values::Bytes({
        let mut b = ByteValues::default();
        b.push(b"");
        b.push(b"");
        b.push(b"x");
        b
    }));
}

fn row_value(cell: &Cell) -> tsbucket_format::row::Value<'_> {
    use tsbucket_format::row::Value;
    match cell {
        Cell::Null => Value::Null,
        Cell::Int(v) => Value::Int(*v),
        Cell::Float(v) => Value::Float(*v),
        Cell::Bool(v) => Value::Bool(*v),
        Cell::Bytes(v) => Value::Bytes(v),
    }
}

fn row() -> impl Strategy<Value = Vec<(u16, ColumnKind, Cell)>> {
    prop::collection::vec(kind(), 0..12).prop_flat_map(|kinds| {
        let cells: Vec<_> = kinds.iter().map(|&k| cell(k)).collect();
        (Just(kinds), cells).prop_map(|(kinds, cells)| {
            kinds.into_iter().zip(cells).enumerate().map(|(i, (k, c))| ((i * 3 + 1) as u16, k, c)).collect()
        })
    })
}

proptest! {
    #[test]
    fn rows_round_trip_into_columns(rows in prop::collection::vec(row(), 1..20)) {
        use tsbucket_format::row::{encode_row, push_value, RowReader};
        for r in &rows {
            let values: Vec<_> = r.iter().map(|(a, k, c)| (*a, *k, row_value(c))).collect();
            let mut bytes = Vec::new();
            encode_row(&values, &mut bytes);
            let mut reader = RowReader::parse(&bytes).unwrap();
            for (attnum, kind, cell) in r {
                let (a, k, v) = reader.next_value().unwrap().expect("a value");
                prop_assert_eq!((a, k), (*attnum, *kind));
                let mut got = Column::new(a, k);
                push_value(&mut got, k, v).unwrap();
                let mut want = Column::new(a, k);
                push_value(&mut want, k, row_value(cell)).unwrap();
                assert_same(&want, &got);
            }
            prop_assert!(reader.next_value().unwrap().is_none());
        }
    }

    #[test]
    fn corrupt_rows_never_panic(r in row(), flips in prop::collection::vec((any::<usize>(), any::<u8>()), 1..6), cut in any::<usize>()) {
        use tsbucket_format::row::{encode_row, push_value, RowReader};
        let values: Vec<_> = r.iter().map(|(a, k, c)| (*a, *k, row_value(c))).collect();
        let mut bytes = Vec::new();
        encode_row(&values, &mut bytes);
        for (at, x) in flips {
            let n = bytes.len();
            bytes[at % n] ^= x;
        }
        bytes.truncate(cut % (bytes.len() + 1));
        if let Ok(mut reader) = RowReader::parse(&bytes) {
            let mut col = Column::new(1, ColumnKind::Bytes);
            while let Ok(Some((_, k, v))) = reader.next_value() {
                let _ = push_value(&mut col, k, v);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Every column's statistics read back as computed (decimal bounds and
    /// sums in their compact form included), and corrupt ones never panic.
    #[test]
    fn stats_round_trip_and_never_panic(
        (_, columns) in prop_oneof![bucket(), shaped_bucket()],
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..6),
    ) {
        use tsbucket_format::stats::{column_stats, decode_stats, encode_stats};
        let stats: Vec<_> = columns.iter().filter_map(column_stats).collect();
        let mut bytes = encode_stats(&stats);
        let back = decode_stats(&bytes).unwrap();
        prop_assert_eq!(back.len(), stats.len());
        for (a, b) in stats.iter().zip(&back) {
            prop_assert!(a.matches(b), "{:?} read back as {:?}", a, b);
        }
        for (at, value) in flips {
            let i = at.index(bytes.len());
            bytes[i] = value;
        }
        let _ = decode_stats(&bytes);
        let _ = tsbucket_format::stats::decode_field_stats(&bytes);
    }

    #[test]
    fn field_stats_round_trip_and_never_panic(
        keys in prop::collection::btree_set(prop::collection::vec(prop_oneof![Just(b'u'), Just(b's'), any::<u8>()], 0..12), 0..20),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..6),
        tail in prop::collection::vec(any::<u8>(), 0..8),
    ) {
        use tsbucket_format::stats::{decode_field_stats, encode_stats_with_fields, ColumnStats, FieldStats, Range, Summary, Sum};
        let fields: Vec<FieldStats> = keys.into_iter().enumerate().map(|(i, key)| FieldStats {
            key,
            stats: ColumnStats { attnum: 3, range: Range::Float { min: -(i as f64), max: i as f64 * 0.5, has_nan: false }, summary: Some(Summary { nulls: i as u32, sum: Some(Sum::Float(i as f64)) }) },
        }).collect();
        let mut bytes = encode_stats_with_fields(&[], &fields);
        let back = decode_field_stats(&bytes).unwrap();
        prop_assert_eq!(back.len(), fields.len());
        for (a, b) in fields.iter().zip(&back) {
            prop_assert!(a.key == b.key && a.stats.matches(&b.stats), "{:?} read back as {:?}", a, b);
        }
        for (at, value) in flips {
            let i = at.index(bytes.len());
            bytes[i] = value;
        }
        bytes.extend_from_slice(&tail);
        let _ = decode_field_stats(&bytes);
    }
}
