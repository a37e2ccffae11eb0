use super::*;
use proptest::prelude::*;
use tsbucket_format::{Column, ColumnKind};

fn float_column(values: &[Option<f64>]) -> Column {
    let mut c = Column::new(1, ColumnKind::Float64);
    for v in values {
        match v {
            Some(x) => c.push_float(*x),
            None => c.push_null(),
        }
    }
    c
}

fn int_column(values: &[Option<i64>]) -> Column {
    let mut c = Column::new(1, ColumnKind::Int);
    for v in values {
        match v {
            Some(x) => c.push_int(*x),
            None => c.push_null(),
        }
    }
    c
}

fn all(n: usize) -> Vec<u32> {
    (0..n as u32).collect()
}

/// float8_accum applied value by value, as PostgreSQL's row-by-row path does.
fn reference_accum(values: &[f64]) -> Result<(f64, f64, f64), Overflow> {
    let (mut n, mut sx, mut sxx) = (0.0, 0.0, 0.0);
    for &x in values {
        accum_step(&mut n, &mut sx, &mut sxx, x)?;
    }
    Ok((n, sx, sxx))
}

#[test]
fn counts_skip_nulls_only_for_values() {
    let c = float_column(&[Some(1.0), None, Some(f64::NAN)]);
    let mut rows = initial(AggKind::CountRows, false, true);
    accumulate(AggKind::CountRows, &Input::Rows, &all(3), &mut rows).unwrap();
    assert_eq!(rows, State::Count(3));
    let mut values = initial(AggKind::CountValues, false, true);
    accumulate(AggKind::CountValues, &Input::Column(&c), &all(3), &mut values).unwrap();
    assert_eq!(values, State::Count(2));
    let mut meta = initial(AggKind::CountValues, false, false);
    accumulate(AggKind::CountValues, &Input::Constant { present: false }, &all(3), &mut meta).unwrap();
    assert_eq!(meta, State::Count(0));
}

#[test]
fn sum_of_nothing_is_null_and_starts_from_the_first_value() {
    let c = float_column(&[None, Some(-0.0)]);
    let mut s = initial(AggKind::SumFloat8, false, true);
    accumulate(AggKind::SumFloat8, &Input::Column(&c), &[0], &mut s).unwrap();
    assert_eq!(s, State::Float8(None));
    accumulate(AggKind::SumFloat8, &Input::Column(&c), &[1], &mut s).unwrap();
    // -0.0, not 0.0 + -0.0 = 0.0: float8pl's state starts as the first value.
    assert!(matches!(s, State::Float8(Some(x)) if x.to_bits() == (-0.0f64).to_bits()));
}

#[test]
fn float_sums_overflow_like_postgres() {
    let c = float_column(&[Some(f64::MAX), Some(f64::MAX)]);
    let mut s = initial(AggKind::SumFloat8, false, true);
    assert_eq!(accumulate(AggKind::SumFloat8, &Input::Column(&c), &all(2), &mut s), Err(Overflow));
    let inf = float_column(&[Some(f64::INFINITY), Some(1.0)]);
    let mut s = initial(AggKind::SumFloat8, false, true);
    accumulate(AggKind::SumFloat8, &Input::Column(&inf), &all(2), &mut s).unwrap();
    assert_eq!(s, State::Float8(Some(f64::INFINITY)));
    let mut a = initial(AggKind::AccumFloat, false, true);
    assert_eq!(accumulate(AggKind::AccumFloat, &Input::Column(&c), &all(2), &mut a), Err(Overflow));
}

#[test]
fn accum_marks_infinite_and_nan_inputs() {
    assert!(reference_accum(&[f64::INFINITY]).unwrap().2.is_nan());
    assert!(reference_accum(&[1.0, f64::NAN]).unwrap().2.is_nan());
    assert_eq!(reference_accum(&[1.0, 3.0]).unwrap(), (2.0, 4.0, 2.0));
}

#[test]
fn min_max_sort_nan_last_and_ignore_nulls() {
    let c = float_column(&[Some(2.0), Some(f64::NAN), None, Some(-1.0)]);
    let mut max = initial(AggKind::Max, false, true);
    accumulate(AggKind::Max, &Input::Column(&c), &all(4), &mut max).unwrap();
    assert!(matches!(max, State::Float8(Some(x)) if x.is_nan()));
    let mut min = initial(AggKind::Min, false, true);
    accumulate(AggKind::Min, &Input::Column(&c), &all(4), &mut min).unwrap();
    assert_eq!(min, State::Float8(Some(-1.0)));
    let i = int_column(&[None, Some(i64::MIN), Some(i64::MAX)]);
    let mut imax = initial(AggKind::Max, false, false);
    accumulate(AggKind::Max, &Input::Column(&i), &all(3), &mut imax).unwrap();
    assert_eq!(imax, State::Int(Some(i64::MAX)));
    let nulls = int_column(&[None, None]);
    let mut none = initial(AggKind::Min, false, false);
    accumulate(AggKind::Min, &Input::Column(&nulls), &all(2), &mut none).unwrap();
    assert_eq!(none, State::Int(None));
}

#[test]
fn transition_names_map_to_kinds() {
    assert_eq!(AggKind::from_transition("float8_accum"), Some(AggKind::AccumFloat));
    assert_eq!(AggKind::from_transition("timestamptz_larger"), Some(AggKind::Max));
    // sum(int8) and avg(int8) accumulate in numeric, sum(float4) in float4: not computed in the scan.
    assert_eq!(AggKind::from_transition("int8_avg_accum"), None);
    assert_eq!(AggKind::from_transition("float4pl"), None);
}

#[test]
fn runs_of_one_key() {
    let times: Vec<i64> = (0..1000).collect();
    let mut calls = 0;
    let r = runs(&times, |t| -> Result<i64, ()> { calls += 1; Ok(t / 100) }).unwrap();
    assert_eq!(r.len(), 10);
    assert!(r.iter().enumerate().all(|(i, &(s, e, k))| s == i * 100 && e == s + 100 && k == i as i64));
    // Once the run length is known, about two calls per run.
    assert!(calls < 60, "{calls} calls");
    assert_eq!(runs(&[] as &[i64], |t| -> Result<i64, ()> { Ok(t) }).unwrap(), vec![]);
    assert_eq!(runs(&[5, 5, 5], |t| -> Result<i64, ()> { Ok(t) }).unwrap(), vec![(0, 3, 5)]);
}

fn naive_runs(times: &[i64], key: impl Fn(i64) -> i64) -> Vec<(usize, usize, i64)> {
    let mut out: Vec<(usize, usize, i64)> = Vec::new();
    for (i, &t) in times.iter().enumerate() {
        let k = key(t);
        match out.last_mut() {
            Some(last) if last.2 == k => last.1 = i + 1,
            _ => out.push((i, i + 1, k)),
        }
    }
    out
}

fn nullable_floats() -> impl Strategy<Value = Vec<Option<f64>>> {
    let value = prop_oneof![
        4 => any::<f64>().prop_map(Some),
        1 => Just(None),
        1 => prop_oneof![Just(f64::NAN), Just(f64::INFINITY), Just(f64::NEG_INFINITY), Just(-0.0), Just(f64::MAX)].prop_map(Some),
        4 => (-1e6..1e6f64).prop_map(Some),
    ];
    prop::collection::vec(value, 0..300)
}

/// The row-by-row transition of first / last: replace on a strictly better time.
fn reference_pick(last: bool, times: &[i64]) -> Option<(i64, u32)> {
    let mut best: Option<(i64, u32)> = None;
    for (r, &t) in times.iter().enumerate() {
        if best.is_none_or(|(b, _)| if last { t > b } else { t < b }) {
            best = Some((t, r as u32));
        }
    }
    best
}

#[test]
fn first_and_last_take_the_earliest_row_of_a_tied_time() {
    let times = [5, 3, 9, 3, 9, 7];
    for (kind, want) in [(AggKind::First, Some((3, 1))), (AggKind::Last, Some((9, 2)))] {
        let mut state = initial(kind, false, false);
        accumulate(kind, &Input::Times(&times), &all(times.len()), &mut state).unwrap();
        assert_eq!(state, State::Pick(want));
    }
    let mut none = initial(AggKind::First, false, false);
    accumulate(AggKind::First, &Input::Times(&times), &[], &mut none).unwrap();
    assert_eq!(none, State::Pick(None));
}

proptest! {
    #[test]
    fn runs_match_a_row_by_row_grouping(mut times in prop::collection::vec(-1_000_000i64..1_000_000, 0..400), width in 1i64..5000) {
        times.sort();
        let key = |t: i64| t.div_euclid(width);
        let got = runs(&times, |t| -> Result<i64, ()> { Ok(key(t)) }).unwrap();
        prop_assert_eq!(got, naive_runs(&times, key));
    }

    #[test]
    fn float_states_equal_row_by_row_transitions(values in nullable_floats()) {
        let c = float_column(&values);
        let present: Vec<f64> = values.iter().flatten().copied().collect();
        let rows = all(values.len());
        let mut accum = initial(AggKind::AccumFloat, false, true);
        match (accumulate(AggKind::AccumFloat, &Input::Column(&c), &rows, &mut accum), reference_accum(&present)) {
            (Ok(()), Ok((n, sx, sxx))) => {
                let State::Accum { n: a, sx: b, sxx: d } = accum else { panic!() };
                prop_assert!(a.to_bits() == n.to_bits() && (b.to_bits() == sx.to_bits() || b.is_nan() && sx.is_nan()));
                prop_assert!(d.to_bits() == sxx.to_bits() || d.is_nan() && sxx.is_nan());
            }
            (Err(Overflow), Err(Overflow)) => {}
            (got, want) => prop_assert!(false, "{:?} vs {:?}", got, want.map(|_| ())),
        }
        let mut max = initial(AggKind::Max, false, true);
        accumulate(AggKind::Max, &Input::Column(&c), &rows, &mut max).unwrap();
        let want = present.iter().copied().reduce(|m, x| if float_cmp(m, x) == std::cmp::Ordering::Greater { m } else { x });
        let State::Float8(got) = max else { panic!() };
        prop_assert_eq!(got.map(f64::to_bits), want.map(f64::to_bits));
        let mut count = initial(AggKind::CountValues, false, true);
        accumulate(AggKind::CountValues, &Input::Column(&c), &rows, &mut count).unwrap();
        prop_assert_eq!(count, State::Count(present.len() as i64));
    }

    #[test]
    fn int_states_equal_row_by_row_transitions(values in prop::collection::vec(prop::option::of(any::<i32>()), 0..300)) {
        let c = int_column(&values.iter().map(|v| v.map(i64::from)).collect::<Vec<_>>());
        let present: Vec<i64> = values.iter().flatten().map(|&x| x as i64).collect();
        let rows = all(values.len());
        let mut sum = initial(AggKind::SumInt, false, false);
        accumulate(AggKind::SumInt, &Input::Column(&c), &rows, &mut sum).unwrap();
        prop_assert_eq!(sum, State::Int((!present.is_empty()).then(|| present.iter().sum())));
        let mut avg = initial(AggKind::AvgInt, false, false);
        accumulate(AggKind::AvgInt, &Input::Column(&c), &rows, &mut avg).unwrap();
        prop_assert_eq!(avg, State::AvgInt { count: present.len() as i64, sum: present.iter().sum() });
        let mut min = initial(AggKind::Min, false, false);
        accumulate(AggKind::Min, &Input::Column(&c), &rows, &mut min).unwrap();
        prop_assert_eq!(min, State::Int(present.iter().copied().min()));
    }

    #[test]
    fn first_last_equal_row_by_row_transitions(times in prop::collection::vec(-20i64..20, 0..300), split in 0usize..300) {
        for kind in [AggKind::First, AggKind::Last] {
            let last = kind == AggKind::Last;
            // In one go, and in two parts carried over (a state continued).
            let mut whole = initial(kind, false, false);
            accumulate(kind, &Input::Times(&times), &all(times.len()), &mut whole).unwrap();
            let cut = split.min(times.len());
            let rows = all(times.len());
            let mut parts = initial(kind, false, false);
            accumulate(kind, &Input::Times(&times), &rows[..cut], &mut parts).unwrap();
            accumulate(kind, &Input::Times(&times), &rows[cut..], &mut parts).unwrap();
            prop_assert_eq!(whole, State::Pick(reference_pick(last, &times)));
            prop_assert_eq!(parts, whole);
        }
    }

    #[test]
    fn header_states_equal_the_rows_states(values in nullable_floats(), ints in prop::collection::vec(prop::option::of(any::<i32>()), 1..300)) {
        use tsbucket_format::stats::column_stats;
        let c = float_column(&values);
        let rows = all(values.len());
        if let Some(stats) = column_stats(&c) {
            for kind in [AggKind::CountValues, AggKind::SumFloat8, AggKind::AccumFloat] {
                let mut state = initial(kind, false, true);
                let got = accumulate(kind, &Input::Column(&c), &rows, &mut state);
                match (from_header(kind, values.len() as u32, &stats), got) {
                    (None, _) => prop_assert!(kind != AggKind::CountValues),
                    (Some(_), Err(Overflow)) => prop_assert!(false, "{:?}: the header answers where the rows overflow", kind),
                    (Some(State::Accum { n, sx, .. }), Ok(())) => {
                        let State::Accum { n: n2, sx: sx2, .. } = state else { panic!() };
                        prop_assert!(n.to_bits() == n2.to_bits() && (sx.to_bits() == sx2.to_bits() || sx.is_nan() && sx2.is_nan()));
                    }
                    (Some(State::Float8(Some(a))), Ok(())) => {
                        let State::Float8(Some(b)) = state else { panic!() };
                        prop_assert!(a.to_bits() == b.to_bits() || a.is_nan() && b.is_nan());
                    }
                    (Some(h), Ok(())) => prop_assert_eq!(h, state),
                }
            }
        }
        let c = int_column(&ints.iter().map(|v| v.map(i64::from)).collect::<Vec<_>>());
        let rows = all(ints.len());
        if let Some(stats) = column_stats(&c) {
            for kind in [AggKind::CountValues, AggKind::SumInt, AggKind::AvgInt] {
                let mut state = initial(kind, false, false);
                accumulate(kind, &Input::Column(&c), &rows, &mut state).unwrap();
                prop_assert_eq!(from_header(kind, ints.len() as u32, &stats), Some(state));
            }
        }
    }
}
