//! Conditions evaluated on decoded columns, in SQL's three-valued logic: a
//! tree of AND, OR and NOT over leaves (comparisons, IN lists, IS [NOT]
//! NULL) whose truth per row the caller computes. A row passes a WHERE
//! clause only where the whole tree is true (not false, not NULL).

/// Per row: `t` where the condition is true, `f` where false; neither: NULL.
#[derive(Clone, Debug, PartialEq)]
pub struct Truth {
    pub t: Vec<bool>,
    pub f: Vec<bool>,
}

impl Truth {
    /// Every row `value` (None: NULL).
    pub fn constant(rows: usize, value: Option<bool>) -> Truth {
        Truth { t: vec![value == Some(true); rows], f: vec![value == Some(false); rows] }
    }
}

#[derive(Clone, Debug)]
pub enum Pred<L> {
    Leaf(L),
    And(Vec<Pred<L>>),
    Or(Vec<Pred<L>>),
    Not(Box<Pred<L>>),
}

impl<L> Pred<L> {
    /// The truth of the condition for `rows` rows, `leaf` giving each leaf's.
    pub fn eval(&self, rows: usize, leaf: &mut impl FnMut(&L) -> Truth) -> Truth {
        match self {
            Pred::Leaf(l) => leaf(l),
            Pred::Not(p) => {
                let Truth { t, f } = p.eval(rows, leaf);
                Truth { t: f, f: t }
            }
            // AND: true where all are true, false where any is false.
            Pred::And(ps) => ps.iter().fold(Truth::constant(rows, Some(true)), |acc, p| {
                let x = p.eval(rows, leaf);
                Truth {
                    t: acc.t.iter().zip(&x.t).map(|(a, b)| *a && *b).collect(),
                    f: acc.f.iter().zip(&x.f).map(|(a, b)| *a || *b).collect(),
                }
            }),
            // OR: true where any is true, false where all are false.
            Pred::Or(ps) => ps.iter().fold(Truth::constant(rows, Some(false)), |acc, p| {
                let x = p.eval(rows, leaf);
                Truth {
                    t: acc.t.iter().zip(&x.t).map(|(a, b)| *a || *b).collect(),
                    f: acc.f.iter().zip(&x.f).map(|(a, b)| *a && *b).collect(),
                }
            }),
        }
    }
}

/// PostgreSQL's order of two floats: NaN above every number, NaNs equal, -0 = 0.
pub fn float_order(a: f64, b: f64) -> std::cmp::Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => std::cmp::Ordering::Equal,
        (true, false) => std::cmp::Ordering::Greater,
        (false, true) => std::cmp::Ordering::Less,
        (false, false) => a.partial_cmp(&b).expect("not NaN"),
    }
}

/// Whether `ord` (value compared with the constant) satisfies btree strategy
/// `strategy` (1 <, 2 <=, 3 =, 4 >=, 5 >).
pub fn satisfies(ord: std::cmp::Ordering, strategy: i32) -> bool {
    use std::cmp::Ordering::{Equal, Greater, Less};
    match strategy {
        1 => ord == Less,
        2 => ord != Greater,
        3 => ord == Equal,
        4 => ord != Less,
        5 => ord == Greater,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn naive(p: &Pred<usize>, row: usize, leaves: &[Vec<Option<bool>>]) -> Option<bool> {
        match p {
            Pred::Leaf(i) => leaves[*i][row],
            Pred::Not(x) => naive(x, row, leaves).map(|v| !v),
            Pred::And(xs) => xs.iter().fold(Some(true), |acc, x| match (acc, naive(x, row, leaves)) {
                (Some(false), _) | (_, Some(false)) => Some(false),
                (Some(true), Some(true)) => Some(true),
                _ => None,
            }),
            Pred::Or(xs) => xs.iter().fold(Some(false), |acc, x| match (acc, naive(x, row, leaves)) {
                (Some(true), _) | (_, Some(true)) => Some(true),
                (Some(false), Some(false)) => Some(false),
                _ => None,
            }),
        }
    }

    fn tree(leaves: usize) -> impl Strategy<Value = Pred<usize>> {
        let leaf = (0..leaves).prop_map(Pred::Leaf);
        leaf.prop_recursive(4, 24, 3, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 1..4).prop_map(Pred::And),
                prop::collection::vec(inner.clone(), 1..4).prop_map(Pred::Or),
                inner.prop_map(|p| Pred::Not(Box::new(p))),
            ]
        })
    }

    proptest! {
        #[test]
        fn three_valued_logic_matches_sql(p in tree(3), values in prop::collection::vec(prop::collection::vec(prop::option::of(any::<bool>()), 20), 3)) {
            let got = p.eval(20, &mut |i: &usize| Truth {
                t: values[*i].iter().map(|v| *v == Some(true)).collect(),
                f: values[*i].iter().map(|v| *v == Some(false)).collect(),
            });
            for row in 0..20 {
                let want = naive(&p, row, &values);
                prop_assert_eq!((got.t[row], got.f[row]), (want == Some(true), want == Some(false)));
            }
        }
    }

    #[test]
    fn nan_sorts_last_and_zeros_are_equal() {
        assert!(satisfies(float_order(f64::NAN, 1e300), 5));
        assert!(satisfies(float_order(f64::NAN, f64::NAN), 3));
        assert!(satisfies(float_order(-0.0, 0.0), 3));
        assert!(!satisfies(float_order(1.0, f64::NAN), 4));
    }
}
