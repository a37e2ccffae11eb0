//! Aggregation kernels for tsbucket's in-scan (vectorised) aggregation: the
//! partial states of PostgreSQL's built-in aggregates, computed over the
//! decoded column arrays of one bucket, and the runs of rows that share a
//! time bucket. Pure Rust, so every rule is unit- and property-tested
//! without a server.
//!
//! Each state is bit for bit the transition state PostgreSQL's own
//! transition function would reach on the same rows in the same order, so a
//! Finalize Aggregate above combines and finalises them exactly as it
//! combines its own partial aggregates:
//! - `float8pl` (sum of float8): the first value, then `state + value`; an
//!   infinite result from finite inputs is an overflow error. (sum of float4
//!   adds in float4, whose rounding depends so much on the order of addition
//!   that per-bucket partial sums would visibly differ from a row-by-row sum:
//!   it is left to the row-by-row path);
//! - `float8_accum` / `float4_accum` (avg, variance, stddev of floats):
//!   the Youngs-Cramer triple {N, Sx, Sxx} with float.c's infinity and NaN rules;
//! - `int2_sum` / `int4_sum` (sum of int2 / int4): an int8 sum;
//! - `int2_avg_accum` / `int4_avg_accum`: {count, sum} as int8;
//! - `int8inc` / `int8inc_any` (count(*), count(x));
//! - the `larger` / `smaller` functions (max / min) of integer-like and
//!   float types, NaN sorting above every number as in btree order;
//! - tsbucket's own `first(value, time)` / `last(value, time)`: the row of
//!   the least / greatest time, the earliest such row on ties (their
//!   transition functions replace the state only on a strictly better time).

pub mod first_last;
pub mod predicate;
mod runs;

pub use runs::runs;
use tsbucket_format::stats::{float8pl, ColumnStats, Range, Sum};
use tsbucket_format::{Column, Values};

/// The aggregates the scan computes itself, by their transition function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AggKind {
    CountRows,
    CountValues,
    SumFloat8,
    SumInt,
    AccumFloat,
    AvgInt,
    Min,
    Max,
    /// tsbucket.first(value, time): the value at the least time.
    First,
    /// tsbucket.last(value, time): the value at the greatest time.
    Last,
}

impl AggKind {
    /// The kind for a built-in transition function, by its name.
    pub fn from_transition(name: &str) -> Option<AggKind> {
        Some(match name {
            "int8inc" => AggKind::CountRows,
            "int8inc_any" => AggKind::CountValues,
            "float8pl" => AggKind::SumFloat8,
            "int2_sum" | "int4_sum" => AggKind::SumInt,
            "float8_accum" | "float4_accum" => AggKind::AccumFloat,
            "int2_avg_accum" | "int4_avg_accum" => AggKind::AvgInt,
            "int2smaller" | "int4smaller" | "int8smaller" | "float4smaller" | "float8smaller" | "date_smaller"
            | "timestamp_smaller" | "timestamptz_smaller" => AggKind::Min,
            "int2larger" | "int4larger" | "int8larger" | "float4larger" | "float8larger" | "date_larger"
            | "timestamp_larger" | "timestamptz_larger" => AggKind::Max,
            _ => return None,
        })
    }

    /// Whether the aggregate reads its argument's values (not only whether they are NULL).
    pub fn reads_values(self) -> bool {
        !matches!(self, AggKind::CountRows | AggKind::CountValues)
    }
}

/// A partial aggregate state. `None` is SQL NULL (no input value yet).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum State {
    Count(i64),
    Float8(Option<f64>),
    Float4(Option<f32>),
    Int(Option<i64>),
    /// {N, Sx, Sxx} of float8_accum.
    Accum { n: f64, sx: f64, sxx: f64 },
    /// {count, sum} of int4_avg_accum.
    AvgInt { count: i64, sum: i64 },
    /// first / last: the chosen row's (time, row number in the bucket).
    Pick(Option<(i64, u32)>),
}

/// An infinite float result from finite inputs; PostgreSQL reports it as
/// "value out of range: overflow" (SQLSTATE 22003).
#[derive(Debug, PartialEq, Eq)]
pub struct Overflow;

/// The input of one aggregate in one bucket.
pub enum Input<'a> {
    /// count(*): no column.
    Rows,
    /// A decoded column.
    Column(&'a Column),
    /// A value the same for every row (a meta column): present or NULL.
    Constant { present: bool },
    /// first / last: the bucket's times (the value is read at the chosen row).
    Times(&'a [i64]),
}

/// The initial state of `kind` for an argument stored as `float4` or not.
pub fn initial(kind: AggKind, float4: bool, float: bool) -> State {
    match kind {
        AggKind::CountRows | AggKind::CountValues => State::Count(0),
        AggKind::SumFloat8 => State::Float8(None),
        AggKind::SumInt => State::Int(None),
        AggKind::AccumFloat => State::Accum { n: 0.0, sx: 0.0, sxx: 0.0 },
        AggKind::AvgInt => State::AvgInt { count: 0, sum: 0 },
        AggKind::Min | AggKind::Max if float4 => State::Float4(None),
        AggKind::Min | AggKind::Max if float => State::Float8(None),
        AggKind::Min | AggKind::Max => State::Int(None),
        AggKind::First | AggKind::Last => State::Pick(None),
    }
}

use predicate::float_order as float_cmp;

/// float8_accum's step for one value.
fn accum_step(n: &mut f64, sx: &mut f64, sxx: &mut f64, x: f64) -> Result<(), Overflow> {
    let old_n = *n;
    let old_sx = *sx;
    *n += 1.0;
    *sx += x;
    if old_n > 0.0 {
        let tmp = x * *n - *sx;
        *sxx += tmp * tmp / (*n * old_n);
        if sx.is_infinite() || sxx.is_infinite() {
            if !old_sx.is_infinite() && !x.is_infinite() {
                return Err(Overflow);
            }
            *sxx = f64::NAN;
        }
    } else if x.is_nan() || x.is_infinite() {
        *sxx = f64::NAN;
    }
    Ok(())
}

/// Adds rows `rows` (in that order) of `input` to `state`.
pub fn accumulate(kind: AggKind, input: &Input, rows: &[u32], state: &mut State) -> Result<(), Overflow> {
    let column = match input {
        Input::Rows => {
            if let State::Count(c) = state {
                *c += rows.len() as i64;
            }
            return Ok(());
        }
        Input::Constant { present } => {
            if let State::Count(c) = state {
                if *present {
                    *c += rows.len() as i64;
                }
            }
            return Ok(());
        }
        Input::Times(times) => {
            if let State::Pick(p) = state {
                *p = pick_by_time(kind == AggKind::Last, times, rows, *p);
            }
            return Ok(());
        }
        Input::Column(col) => *col,
    };
    let valid = |r: u32| !column.is_null(r as usize);
    match (kind, state, &column.values) {
        (AggKind::CountRows, State::Count(c), _) => *c += rows.len() as i64,
        (AggKind::CountValues, State::Count(c), _) => {
            *c += match &column.validity {
                None => rows.len() as i64,
                Some(v) => rows.iter().filter(|&&r| v[r as usize]).count() as i64,
            }
        }
        (AggKind::SumFloat8, State::Float8(s), Values::Float(v)) => {
            for &r in rows.iter().filter(|&&r| valid(r)) {
                let x = v[r as usize];
                *s = Some(match *s {
                    None => x,
                    Some(acc) => float8pl(acc, x).ok_or(Overflow)?,
                });
            }
        }
        (AggKind::SumInt, State::Int(s), Values::Int(v)) => {
            for &r in rows.iter().filter(|&&r| valid(r)) {
                // int2/int4 values: an int8 sum of at most a bucket's rows cannot overflow.
                *s = Some(s.unwrap_or(0) + v[r as usize]);
            }
        }
        (AggKind::AccumFloat, State::Accum { n, sx, sxx }, Values::Float(v)) => {
            for &r in rows.iter().filter(|&&r| valid(r)) {
                accum_step(n, sx, sxx, v[r as usize])?;
            }
        }
        (AggKind::AvgInt, State::AvgInt { count, sum }, Values::Int(v)) => {
            for &r in rows.iter().filter(|&&r| valid(r)) {
                *count += 1;
                *sum += v[r as usize];
            }
        }
        (AggKind::Min | AggKind::Max, State::Int(s), Values::Int(v)) => {
            for &r in rows.iter().filter(|&&r| valid(r)) {
                let x = v[r as usize];
                *s = Some(match *s {
                    None => x,
                    Some(m) if kind == AggKind::Min => m.min(x),
                    Some(m) => m.max(x),
                });
            }
        }
        (AggKind::Min | AggKind::Max, State::Float8(s), Values::Float(v)) => {
            for &r in rows.iter().filter(|&&r| valid(r)) {
                *s = Some(pick(kind, *s, v[r as usize]));
            }
        }
        (AggKind::Min | AggKind::Max, State::Float4(s), Values::Float(v)) => {
            for &r in rows.iter().filter(|&&r| valid(r)) {
                *s = Some(pick(kind, s.map(|x| x as f64), v[r as usize]) as f32);
            }
        }
        (kind, state, _) => panic!("aggregate {kind:?} with state {state:?} over a {:?} column", column.kind),
    }
    Ok(())
}

/// The partial state `kind` reaches over every row of a bucket, from the
/// bucket's header statistics of the argument column (`rows` rows), when the
/// header holds enough: the same state `accumulate` computes from the rows.
/// `AccumFloat` only for `avg` (its final function reads N and Sx, not Sxx,
/// which is left 0), and only when no value is so large that Sxx could
/// overflow (an error the rows must raise).
pub fn from_header(kind: AggKind, rows: u32, stats: &ColumnStats) -> Option<State> {
    // A column has statistics only where some row holds a value: a sum, when
    // kept, is of at least one value.
    let summary = stats.summary?;
    let present = rows.checked_sub(summary.nulls)?;
    Some(match (kind, summary.sum) {
        (AggKind::CountValues, _) => State::Count(i64::from(present)),
        (AggKind::SumFloat8, Some(Sum::Float(s))) => State::Float8(Some(s)),
        (AggKind::SumInt, Some(Sum::Int(s))) => State::Int(Some(s)),
        (AggKind::AvgInt, Some(Sum::Int(s))) => State::AvgInt { count: i64::from(present), sum: s },
        (AggKind::AccumFloat, Some(Sum::Float(s))) => {
            const SAFE: f64 = 1e100;
            match stats.range {
                Range::Float { min, max, .. } if min.abs() <= SAFE && max.abs() <= SAFE => {}
                _ => return None,
            }
            // float8_accum adds from 0.0, float8pl from the first value: the
            // sums differ only where every value was -0 (then 0.0 + -0 = 0).
            let sx = if s == 0.0 { 0.0 } else { s };
            State::Accum { n: f64::from(present), sx, sxx: 0.0 }
        }
        _ => return None,
    })
}

/// The row of least (greatest when `last`) time among `rows`, starting from
/// `current`: a later row replaces the choice only with a strictly better time.
fn pick_by_time(last: bool, times: &[i64], rows: &[u32], current: Option<(i64, u32)>) -> Option<(i64, u32)> {
    rows.iter().fold(current, |best, &r| {
        let t = times[r as usize];
        match best {
            Some((b, _)) if (last && t <= b) || (!last && t >= b) => best,
            _ => Some((t, r)),
        }
    })
}

/// float8larger / float8smaller: the later value wins ties, as `a > b ? a : b` keeps b on equality.
fn pick(kind: AggKind, current: Option<f64>, x: f64) -> f64 {
    use std::cmp::Ordering::{Greater, Less};
    match current {
        None => x,
        Some(m) if kind == AggKind::Max => if float_cmp(m, x) == Greater { m } else { x },
        Some(m) => if float_cmp(m, x) == Less { m } else { x },
    }
}

#[cfg(test)]
mod tests;
