//! The serialized partial state of `tsbucket.first(value, time)` and
//! `tsbucket.last(value, time)`: what their serial function writes and their
//! deserial function reads, and what the in-scan aggregation emits as the
//! partial state of one bucket and group. One flag byte (bit 0: the value is
//! not NULL), the time (i64), the value's typlen (i16) and typbyval (u8), then
//! the value's bytes as a datum of that type lays them out.

const HAS_VALUE: u8 = 1;
const HEADER: usize = 1 + 8 + 2 + 1;

/// The chosen row of a state: its time and its value's bytes (None: NULL).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chosen<'a> {
    pub time: i64,
    pub value: Option<&'a [u8]>,
    pub typlen: i16,
    pub typbyval: bool,
}

pub fn encode(c: &Chosen) -> Vec<u8> {
    let bytes = c.value.unwrap_or_default();
    let mut out = Vec::with_capacity(HEADER + bytes.len());
    out.push(if c.value.is_some() { HAS_VALUE } else { 0 });
    out.extend_from_slice(&c.time.to_le_bytes());
    out.extend_from_slice(&c.typlen.to_le_bytes());
    out.push(c.typbyval as u8);
    out.extend_from_slice(bytes);
    out
}

/// The state in `bytes`, or None when they cannot be one: a by-value type
/// longer than a Datum, a fixed-length value of another length, bytes after
/// a NULL (a damaged state must not make a pointer of an integer).
pub fn decode(bytes: &[u8]) -> Option<Chosen<'_>> {
    if bytes.len() < HEADER || bytes[0] & !HAS_VALUE != 0 {
        return None;
    }
    let has_value = bytes[0] & HAS_VALUE != 0;
    let time = i64::from_le_bytes(bytes[1..9].try_into().ok()?);
    let typlen = i16::from_le_bytes(bytes[9..11].try_into().ok()?);
    let typbyval = bytes[11] != 0;
    let payload = &bytes[HEADER..];
    let fits = match typlen {
        -1 | -2 => !typbyval,
        n if n > 0 && typbyval => n <= 8 && (!has_value || payload.len() == n as usize),
        n if n > 0 => !has_value || payload.len() == n as usize,
        _ => false,
    };
    if !fits || (!has_value && !payload.is_empty()) {
        return None;
    }
    Some(Chosen { time, value: has_value.then_some(payload), typlen, typbyval })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_damage() {
        let cases = [
            Chosen { time: -5, value: Some(&[1, 2, 3, 4, 5, 6, 7, 8][..]), typlen: 8, typbyval: true },
            Chosen { time: i64::MAX, value: None, typlen: 4, typbyval: true },
            Chosen { time: 0, value: Some(&b"varlena bytes"[..]), typlen: -1, typbyval: false },
            Chosen { time: 1, value: Some(&b"cstring"[..]), typlen: -2, typbyval: false },
            Chosen { time: 2, value: Some(&[0u8; 16][..]), typlen: 16, typbyval: false },
        ];
        for c in cases {
            assert_eq!(decode(&encode(&c)), Some(c));
        }
        let good = encode(&cases[0]);
        assert_eq!(decode(&good[..HEADER - 1]), None);
        let mut flags = good.clone();
        flags[0] = 3;
        assert_eq!(decode(&flags), None);
        let mut long_byval = good.clone();
        long_byval[9..11].copy_from_slice(&16i16.to_le_bytes());
        assert_eq!(decode(&long_byval), None);
        assert_eq!(decode(&good[..good.len() - 1]), None);
        let mut null_with_bytes = encode(&cases[2]);
        null_with_bytes[0] = 0;
        assert_eq!(decode(&null_with_bytes), None);
        let mut byval_varlena = encode(&cases[2]);
        byval_varlena[11] = 1;
        assert_eq!(decode(&byval_varlena), None);
    }
}
