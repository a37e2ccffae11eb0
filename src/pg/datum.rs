//! Conversion between Postgres datums and the format's column values. The
//! only place that knows how each storage kind looks as a Datum.

use pgrx::pg_sys;
use pgrx::varlena::{set_varsize_4b, vardata_any, varsize_any_exhdr};
use tsbucket_format::{Column, ColumnKind, Values};

/// How values of a type lie in a Datum: their length (-1 a varlena, -2 a
/// C string), whether they are passed by value, and the storage kind a
/// bucket keeps them as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub typlen: i16,
    pub typbyval: bool,
    pub kind: ColumnKind,
}

impl Layout {
    /// The layout of opaque bytes of a type this long (by value or not): how
    /// first/last keep any value.
    pub fn bytes(typlen: i16, typbyval: bool) -> Layout {
        Layout { typlen, typbyval, kind: ColumnKind::Bytes }
    }
}

/// The storage kind of a SQL type: floats, timestamps, booleans and other
/// fixed-width by-value types as integers have codecs of their own; jsonb is
/// kept as its datum's bytes and stored shredded by path; the rest (numeric,
/// text, arrays, ...) are kept as their datum's bytes.
pub fn kind_for_type(typid: pg_sys::Oid, typlen: i16, typbyval: bool) -> ColumnKind {
    match typid {
        pg_sys::FLOAT8OID => ColumnKind::Float64,
        pg_sys::FLOAT4OID => ColumnKind::Float32,
        pg_sys::TIMESTAMPTZOID | pg_sys::TIMESTAMPOID => ColumnKind::Timestamp,
        pg_sys::BOOLOID => ColumnKind::Bool,
        pg_sys::JSONBOID => ColumnKind::Document,
        _ if typbyval && matches!(typlen, 1 | 2 | 4 | 8) => ColumnKind::Int,
        _ => ColumnKind::Bytes,
    }
}

/// Appends a non-NULL datum of the layout's type to `col`; returns the bytes it adds.
///
/// # Safety
/// `value` must be a valid datum of the layout's type.
pub unsafe fn push_datum(col: &mut Column, layout: Layout, value: pg_sys::Datum) -> usize {
    match layout.kind {
        ColumnKind::Float64 => col.push_float(f64::from_bits(value.value() as u64)),
        ColumnKind::Float32 => col.push_float(f32::from_bits(value.value() as u32) as f64),
        ColumnKind::Bool => col.push_bool(value.value() & 0xff != 0),
        ColumnKind::Timestamp | ColumnKind::Int => col.push_int(int_of(value, layout.typlen)),
        ColumnKind::Bytes | ColumnKind::Document => {
            // SAFETY: `value` is a datum of the layout's type (push_datum's contract); push_bytes copies
            // the bytes before `value` goes out of scope.
            let bytes = unsafe { datum_bytes(&value, layout) };
            let n = bytes.len();
            col.push_bytes(bytes);
            return n + 4;
        }
    }
    8
}

/// The integer a by-value datum `typlen` bytes long holds (sign-extended).
pub fn int_of(value: pg_sys::Datum, typlen: i16) -> i64 {
    let v = value.value();
    match typlen {
        1 => v as u8 as i8 as i64,
        2 => v as u16 as i16 as i64,
        4 => v as u32 as i32 as i64,
        _ => v as i64,
    }
}

/// The bytes that identify a value: a varlena's data (detoasted), a cstring's
/// characters, a fixed-length type's bytes, a by-value type's low `typlen`
/// bytes (read in place from `value`, so nothing is allocated per row).
/// Valid while `value` and the current memory context are.
///
/// # Safety
/// `value` must be a valid datum of the layout's type.
pub unsafe fn datum_bytes<'a>(value: &'a pg_sys::Datum, layout: Layout) -> &'a [u8] {
    match layout.typlen {
        -1 => {
            let p = value.cast_mut_ptr::<pg_sys::varlena>();
            // SAFETY: with typlen -1 `value` points to a varlena (datum_bytes's contract); a detoasted copy is
            // palloc'd in the current memory context, which the doc above requires to outlive the slice.
            unsafe {
                let v = if is_plain_inline(p) { p } else { pg_sys::pg_detoast_datum_packed(p) };
                std::slice::from_raw_parts(vardata_any(v) as *const u8, varsize_any_exhdr(v))
            }
        }
        // SAFETY: with typlen -2 `value` points to the type's NUL-terminated C string, alive while `value` is.
        -2 => unsafe { std::ffi::CStr::from_ptr(value.cast_mut_ptr::<std::ffi::c_char>()).to_bytes() },
        n if layout.typbyval => {
            // Little-endian: the low bytes come first, as bytes_datum reads them back.
            // SAFETY: reads at most the 8 bytes of the Datum `value` itself, which is borrowed for 'a.
            unsafe { std::slice::from_raw_parts(value as *const pg_sys::Datum as *const u8, (n as usize).min(8)) }
        }
        // SAFETY: a fixed-length by-reference `value` points to `n` bytes of its type, alive while `value` is.
        n => unsafe { std::slice::from_raw_parts(value.cast_mut_ptr::<u8>(), n as usize) },
    }
}

// datum_bytes and bytes_datum read a by-value datum's bytes in place.
const _: () = assert!(cfg!(target_endian = "little"), "tsbucket assumes a little-endian machine");

/// A varlena stored inline and uncompressed (1- or 4-byte header): readable as
/// it is, without a call into the detoaster (the common case on the write path).
///
/// # Safety
/// `p` must point to a varlena.
#[inline]
pub(super) unsafe fn is_plain_inline(p: *const pg_sys::varlena) -> bool {
    // SAFETY: `p` points to a varlena (is_plain_inline's contract), whose first byte is always its header.
    let first = unsafe { *(p as *const u8) };
    // Little-endian headers: xxxxxxx1 = 1-byte header (0x01 alone = external
    // pointer), xxxxxx00 = 4-byte uncompressed, xxxxxx10 = 4-byte compressed.
    if first & 0x01 == 0x01 { first != 0x01 } else { first & 0x03 == 0x00 }
}

/// The data of a varlena datum stored inline and uncompressed, read in
/// place (None when reading it would need the detoaster).
///
/// # Safety
/// `value` must be a varlena datum.
pub unsafe fn inline_bytes<'a>(value: pg_sys::Datum) -> Option<&'a [u8]> {
    let p = value.cast_mut_ptr::<pg_sys::varlena>();
    // SAFETY: `value` is a varlena datum (the contract); an inline uncompressed one is read where it lies.
    unsafe { is_plain_inline(p).then(|| std::slice::from_raw_parts(vardata_any(p) as *const u8, varsize_any_exhdr(p))) }
}

/// Uncompressed size of a varlena datum, header included.
///
/// # Safety
/// `value` must be a varlena datum.
#[inline]
pub unsafe fn varlena_size(value: pg_sys::Datum) -> usize {
    let p = value.cast_mut_ptr::<pg_sys::varlena>();
    // SAFETY: `value` is a varlena datum (varlena_size's contract): an inline header is read in place, any
    // other form (compressed, TOAST pointer) is sized by toast_raw_datum_size.
    unsafe { if is_plain_inline(p) { pgrx::varlena::varsize_any(p) } else { pg_sys::toast_raw_datum_size(value) } }
}

/// A datum for `bytes` of the layout's type, palloc'd in the current memory context.
///
/// # Safety
/// `bytes` must come from `datum_bytes` for the same type.
pub unsafe fn bytes_datum(bytes: &[u8], layout: Layout) -> pg_sys::Datum {
    match layout.typlen {
        -1 => {
            let total = bytes.len() + pg_sys::VARHDRSZ;
            // SAFETY: palloc returns `total` writable bytes in CurrentMemoryContext (or raises ERROR): the
            // 4-byte header set_varsize_4b writes, then exactly `bytes`.
            let p = unsafe {
                let p = pg_sys::palloc(total) as *mut pg_sys::varlena;
                set_varsize_4b(p, total as i32);
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), (p as *mut u8).add(pg_sys::VARHDRSZ), bytes.len());
                p
            };
            pg_sys::Datum::from(p)
        }
        -2 => {
            // SAFETY: palloc returns bytes.len() + 1 writable bytes in CurrentMemoryContext: the C string's
            // characters and its terminating NUL.
            let p = unsafe {
                let p = pg_sys::palloc(bytes.len() + 1) as *mut u8;
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), p, bytes.len());
                *p.add(bytes.len()) = 0;
                p
            };
            pg_sys::Datum::from(p)
        }
        n if layout.typbyval => {
            let mut v = [0u8; 8];
            let n = (n as usize).min(8).min(bytes.len());
            v[..n].copy_from_slice(&bytes[..n]);
            pg_sys::Datum::from(u64::from_le_bytes(v) as usize)
        }
        n => {
            // SAFETY: palloc returns the type's `n` bytes in CurrentMemoryContext; at most min(n, bytes.len())
            // of them are copied from `bytes`.
            let p = unsafe { pg_sys::palloc(n as usize) as *mut u8 };
            let n = (n as usize).min(bytes.len());
            // SAFETY: `p` is the fresh n-byte allocation just made, and `n` no longer than either side.
            unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), p, n) };
            pg_sys::Datum::from(p)
        }
    }
}

/// The datum of `row` in a decoded column (which must not be NULL there).
///
/// # Safety
/// `col` must have been built for the layout's type.
#[inline]
pub unsafe fn column_datum(col: &Column, row: usize, layout: Layout) -> pg_sys::Datum {
    match &col.values {
        Values::Float(v) => match layout.kind {
            ColumnKind::Float32 => pg_sys::Datum::from((v[row] as f32).to_bits() as usize),
            _ => pg_sys::Datum::from(v[row].to_bits() as usize),
        },
        Values::Bool(v) => pg_sys::Datum::from(v[row] as usize),
        Values::Int(v) => int_datum(v[row], layout.typlen),
        // SAFETY: `col` was built for the layout's type (column_datum's contract), so its bytes came from
        // datum_bytes of that type, as bytes_datum requires.
        Values::Bytes(v) => unsafe { bytes_datum(v.get(row).unwrap_or_default(), layout) },
    }
}

/// The datums of every row of a decoded by-value column (0 where NULL), as
/// `column_datum` gives them one at a time; None for a column of bytes.
pub fn column_datums(col: &Column, layout: Layout) -> Option<Vec<pg_sys::Datum>> {
    Some(match &col.values {
        Values::Float(v) if layout.kind == ColumnKind::Float32 => v.iter().map(|x| pg_sys::Datum::from((*x as f32).to_bits() as usize)).collect(),
        Values::Float(v) => v.iter().map(|x| pg_sys::Datum::from(x.to_bits() as usize)).collect(),
        Values::Bool(v) => v.iter().map(|&x| pg_sys::Datum::from(x as usize)).collect(),
        Values::Int(v) => v.iter().map(|&x| int_datum(x, layout.typlen)).collect(),
        Values::Bytes(_) => return None,
    })
}

#[inline]
fn int_datum(v: i64, typlen: i16) -> pg_sys::Datum {
    // Same bit patterns as Int16GetDatum / Int32GetDatum (sign-extended casts).
    match typlen {
        1 => pg_sys::Datum::from(v as i8 as isize as usize),
        2 => pg_sys::Datum::from(v as i16 as isize as usize),
        4 => pg_sys::Datum::from(v as i32 as isize as usize),
        _ => pg_sys::Datum::from(v as usize),
    }
}

/// Datums for every value of a by-reference column, in one allocation.
///
/// # Safety
/// `values` must hold bytes of the layout's type (from `datum_bytes`).
pub unsafe fn bytes_datums(values: &tsbucket_format::ByteValues, layout: Layout) -> Vec<pg_sys::Datum> {
    // Rows of a dictionary share their distinct value's datum.
    if let Some((entries, codes)) = values.dictionary() {
        // SAFETY: the entries are bytes of the layout's type, as the rows are.
        let distinct = unsafe { laid_out_datums(entries, layout) };
        return codes.iter().map(|&c| distinct[c as usize]).collect();
    }
    // SAFETY: every value is bytes of the layout's type, as bytes_datums's contract says of `values`.
    unsafe { laid_out_datums(values.iter(), layout) }
}

/// # Safety
/// As `bytes_datums`.
unsafe fn laid_out_datums<'a>(values: impl Iterator<Item = &'a [u8]> + Clone, layout: Layout) -> Vec<pg_sys::Datum> {
    const ALIGN: usize = 8;
    let header = match layout.typlen {
        -1 => pg_sys::VARHDRSZ,
        _ => 0,
    };
    let slot_size = |len: usize| -> usize {
        let size = match layout.typlen {
            -1 => len + header,
            -2 => len + 1,
            n => n as usize,
        };
        size.div_ceil(ALIGN) * ALIGN
    };
    let total: usize = values.clone().map(|v| slot_size(v.len())).sum();
    // SAFETY: palloc returns max(total, 1) bytes in CurrentMemoryContext (or raises ERROR), MAXALIGNed.
    let base = unsafe { pg_sys::palloc(total.max(1)) as *mut u8 };
    let mut offset = 0;
    values
        .map(|v| {
            // SAFETY: `total` is the sum of slot_size over these same values, so this value's slot of
            // slot_size(v.len()) bytes at `base + offset` lies inside the allocation.
            let p = unsafe { base.add(offset) };
            match layout.typlen {
                // SAFETY: a varlena slot holds the 4-byte header and `v` (slot_size adds `header`).
                -1 => unsafe {
                    set_varsize_4b(p as *mut pg_sys::varlena, (v.len() + header) as i32);
                    std::ptr::copy_nonoverlapping(v.as_ptr(), p.add(header), v.len());
                },
                // SAFETY: a C string slot holds `v` and its NUL (slot_size adds 1).
                -2 => unsafe {
                    std::ptr::copy_nonoverlapping(v.as_ptr(), p, v.len());
                    *p.add(v.len()) = 0;
                },
                n => {
                    let n = (n as usize).min(v.len());
                    // SAFETY: a fixed-length slot is at least `n` bytes, the type's length, and `v` has `n`.
                    unsafe { std::ptr::copy_nonoverlapping(v.as_ptr(), p, n) };
                }
            }
            offset += slot_size(v.len());
            pg_sys::Datum::from(p)
        })
        .collect()
}

/// The elements of `array` (None for NULL elements), in the current memory
/// context (by-reference elements point into the array).
///
/// # Safety
/// `array` must be a valid, detoasted array.
pub unsafe fn array_elements(array: *mut pg_sys::ArrayType) -> Vec<Option<pg_sys::Datum>> {
    // SAFETY: `array` is a valid, detoasted array (array_elements's contract), so its header is readable.
    let elem = unsafe { (*array).elemtype };
    let (mut len, mut byval, mut align) = (0i16, false, 0 as std::ffi::c_char);
    let mut elems: *mut pg_sys::Datum = std::ptr::null_mut();
    let mut nulls: *mut bool = std::ptr::null_mut();
    let mut n = 0i32;
    // SAFETY: `elem` is the array's own element type, so the length, byval and alignment looked up for it
    // describe the elements deconstruct_array walks; its output arrays are palloc'd in CurrentMemoryContext.
    unsafe {
        pg_sys::get_typlenbyvalalign(elem, &mut len, &mut byval, &mut align);
        pg_sys::deconstruct_array(array, elem, len as i32, byval, align, &mut elems, &mut nulls, &mut n);
    }
    // SAFETY: deconstruct_array set `elems` and `nulls` to arrays of `n` entries each.
    (0..n as usize).map(|i| unsafe { (!*nulls.add(i)).then(|| *elems.add(i)) }).collect()
}

/// A copy of `value` in the current memory context (utils/datum.h is not bound).
///
/// # Safety
/// `value` must be a valid datum of a type with this `byval` and `len`.
pub unsafe fn copy_datum(value: pg_sys::Datum, byval: bool, len: i16) -> pg_sys::Datum {
    match len {
        _ if byval => value,
        // SAFETY: with len -1 `value` is a varlena (copy_datum's contract); the detoasted copy is palloc'd in CurrentMemoryContext.
        -1 => pg_sys::Datum::from(unsafe { pg_sys::pg_detoast_datum_copy(value.cast_mut_ptr()) }),
        // SAFETY: with len -2 `value` is a NUL-terminated C string, which pstrdup copies into CurrentMemoryContext.
        -2 => pg_sys::Datum::from(unsafe { pg_sys::pstrdup(value.cast_mut_ptr()) }),
        n => {
            // SAFETY: a fixed-length by-reference `value` points to `n` readable bytes, and palloc returns `n`
            // writable ones in CurrentMemoryContext.
            let p = unsafe {
                let p = pg_sys::palloc(n as usize);
                std::ptr::copy_nonoverlapping(value.cast_mut_ptr::<u8>(), p as *mut u8, n as usize);
                p
            };
            pg_sys::Datum::from(p)
        }
    }
}

/// A bytea holding `bytes`, palloc'd in the current memory context.
pub fn bytea(bytes: &[u8]) -> pg_sys::Datum {
    // SAFETY: a varlena's contents are any bytes; palloc raises ERROR rather than return NULL.
    unsafe { bytes_datum(bytes, Layout::bytes(-1, false)) }
}
