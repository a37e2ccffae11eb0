//! Decimal128 text, both ways, for the common case: a finite value whose
//! coefficient has at most 34 digits (BID's first form: sign, 14 exponent
//! bits biased by 6176, a 113-bit coefficient). `bson` does the same through
//! a general bit-vector path that costs a tenth of an import's time; anything
//! else (NaN, infinities, the second form) is left to it.

use bson::Decimal128;

const BIAS: i32 = 6176;
const MAX_EXP: i32 = 6111;
const COEFF_BITS: u32 = 113;

/// Parses `[-+]digits[.digits][(e|E)[-+]digits]`; None for anything else.
pub fn parse(s: &str) -> Option<Decimal128> {
    let b = s.as_bytes();
    let (neg, mut i) = match b.first()? {
        b'-' => (true, 1),
        b'+' => (false, 1),
        _ => (false, 0),
    };
    let mut coeff: u128 = 0;
    let mut digits = 0u32;
    let mut frac = 0i32;
    let mut seen_point = false;
    let mut any = false;
    while i < b.len() {
        match b[i] {
            c @ b'0'..=b'9' => {
                any = true;
                if coeff != 0 || c != b'0' {
                    digits += 1;
                }
                if digits > 34 {
                    return None;
                }
                coeff = coeff * 10 + u128::from(c - b'0');
                if seen_point {
                    frac += 1;
                }
            }
            b'.' if !seen_point => seen_point = true,
            b'e' | b'E' => break,
            _ => return None,
        }
        i += 1;
    }
    if !any {
        return None;
    }
    let mut exp: i32 = 0;
    if i < b.len() {
        let e = &s[i + 1..];
        if e.is_empty() || e.len() > 6 {
            return None;
        }
        exp = e.parse().ok()?;
    }
    let exp = exp.checked_sub(frac)?;
    if !(-BIAS..=MAX_EXP).contains(&exp) {
        return None;
    }
    let bits = (u128::from(neg) << 127) | (((exp + BIAS) as u128) << COEFF_BITS) | coeff;
    Some(Decimal128::from_bytes(bits.to_le_bytes()))
}

/// The value as plain decimal text (scale kept: 1.50 stays 1.50), or None
/// for NaN, infinities and BID's second form.
pub fn text(d: &Decimal128) -> Option<String> {
    let bits = u128::from_le_bytes(d.bytes());
    if (bits >> 125) & 3 == 3 {
        return None;
    }
    let neg = bits >> 127 == 1;
    let exp = ((bits >> COEFF_BITS) & 0x3fff) as i32 - BIAS;
    let coeff = bits & ((1u128 << COEFF_BITS) - 1);
    if coeff >= 10u128.pow(34) {
        // Non-canonical: MongoDB reads it as zero; let bson say how.
        return None;
    }
    let digits = coeff.to_string();
    let mut out = String::with_capacity(digits.len() + 8);
    if neg {
        out.push('-');
    }
    if exp >= 0 {
        if digits.len() + exp as usize > 34 {
            out.push_str(&digits);
            out.push_str("E+");
            out.push_str(&exp.to_string());
        } else {
            out.push_str(&digits);
            if coeff != 0 {
                out.extend(std::iter::repeat_n('0', exp as usize));
            }
        }
    } else {
        let point = -exp as usize;
        if digits.len() > point {
            let (a, b) = digits.split_at(digits.len() - point);
            out.push_str(a);
            out.push('.');
            out.push_str(b);
        } else if point - digits.len() > 40 {
            out.push_str(&digits);
            out.push_str("E-");
            out.push_str(&point.to_string());
        } else {
            out.push_str("0.");
            out.extend(std::iter::repeat_n('0', point - digits.len()));
            out.push_str(&digits);
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::str::FromStr;

    #[test]
    fn common_values_read_and_print_as_bson_does() {
        for s in ["1.50", "0", "-0", "23528.75", "0.001", "-12", "1E+3", "1.5e-3", "9999999999999999999999999999999999", "1E+6111", "1E-6176"] {
            let ours = parse(s).unwrap_or_else(|| panic!("{s}"));
            assert_eq!(ours.bytes(), Decimal128::from_str(s).unwrap().bytes(), "{s}");
        }
        assert_eq!(text(&parse("1.50").unwrap()).unwrap(), "1.50");
        assert_eq!(text(&parse("-0.001").unwrap()).unwrap(), "-0.001");
        assert_eq!(text(&parse("1E+3").unwrap()).unwrap(), "1000");
        assert_eq!(text(&parse("123E-2").unwrap()).unwrap(), "1.23");
        for s in ["NaN", "Infinity", "", "1.2.3", "12345678901234567890123456789012345", "1E+6112", "--1", "1e"] {
            assert!(parse(s).is_none(), "{s}");
        }
        assert!(text(&Decimal128::from_str("NaN").unwrap()).is_none());
    }

    proptest! {
        #[test]
        fn parse_agrees_with_bson_and_text_reads_back(neg in any::<bool>(), int in 0u64..10_000_000_000, frac in 0u32..100_000, fd in 0usize..6, exp in -30i32..30) {
            let f = if fd == 0 { String::new() } else { format!(".{:0width$}", frac % 10u32.pow(fd as u32), width = fd) };
            let s = format!("{}{int}{f}E{exp}", if neg { "-" } else { "" });
            let ours = parse(&s).unwrap();
            prop_assert_eq!(ours.bytes(), Decimal128::from_str(&s).unwrap().bytes());
            let t = text(&ours).unwrap();
            // The text is a fixpoint, and where no zeros were appended it is the same decimal, scale and all.
            prop_assert_eq!(text(&parse(&t).unwrap()).unwrap(), t.clone());
            if fd as i32 >= exp {
                prop_assert_eq!(parse(&t).unwrap().bytes(), ours.bytes());
            }
        }
    }
}
