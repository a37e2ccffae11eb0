//! A bucket's meta values as text (its type's output function; several meta
//! columns as a row literal, as `record_out` writes it) and in their type's
//! order. These call functions of the meta columns' types, which a user may
//! have written: callers run them as the invoking user, or as the table owner
//! in a security-restricted context (`privileges::as_owner_restricted`), never
//! with elevated rights.

use super::bucket::{COL_FIRST_META, StoredBucket};
use pgrx::pg_sys;
use std::cmp::Ordering;
use std::ffi::CStr;

pub struct MetaTypes {
    output: Vec<pg_sys::FmgrInfo>,
    compare: Vec<Option<(pg_sys::FmgrInfo, pg_sys::Oid)>>,
    byval: Vec<(bool, i16)>,
}

impl MetaTypes {
    /// # Safety
    /// `store` must be an open bucket store with `n` meta columns.
    pub unsafe fn of_store(store: pg_sys::Relation, n: usize) -> MetaTypes {
        // SAFETY: `store` is an open bucket store (of_store's contract); rd_att is its relcache descriptor.
        let tupdesc = unsafe { (*store).rd_att };
        let mut output = Vec::with_capacity(n);
        let mut compare = Vec::with_capacity(n);
        let mut byval = Vec::with_capacity(n);
        for i in 0..n {
            // SAFETY: the store has `n` meta columns from COL_FIRST_META on (the contract), so the index is below natts.
            let att = unsafe { &*crate::pg::relation::tuple_desc_attr(tupdesc, COL_FIRST_META + i) };
            let (mut func, mut varlena) = (pg_sys::InvalidOid, false);
            let mut finfo = pg_sys::FmgrInfo::default();
            // SAFETY: att.atttypid is the meta column's type; getTypeOutputInfo and fmgr_info fill the locals
            // (fmgr_info's extra data in the current memory context) or raise ERROR.
            unsafe {
                pg_sys::getTypeOutputInfo(att.atttypid, &mut func, &mut varlena);
                pg_sys::fmgr_info(func, &mut finfo);
            }
            output.push(finfo);
            // SAFETY: lookup_type_cache returns the backend's type cache entry for att.atttypid (or raises ERROR).
            let cache = unsafe { pg_sys::lookup_type_cache(att.atttypid, pg_sys::TYPECACHE_CMP_PROC_FINFO as i32) };
            // SAFETY: `cache` is read only when non-NULL; type cache entries live until the backend exits.
            let cmp_proc = (!cache.is_null()).then(|| unsafe { (*cache).cmp_proc }).filter(|&p| p != pg_sys::InvalidOid);
            compare.push(cmp_proc.map(|proc| {
                let mut f = pg_sys::FmgrInfo::default();
                // SAFETY: `proc` is the type's btree comparison function; fmgr_info fills the local `f`.
                unsafe { pg_sys::fmgr_info(proc, &mut f) };
                (f, att.attcollation)
            }));
            byval.push((att.attbyval, att.attlen));
        }
        MetaTypes { output, compare, byval }
    }

    /// Copies of the bucket's meta datums, valid after its tuple is gone.
    pub fn copy_datums(&self, b: &StoredBucket) -> Vec<Option<pg_sys::Datum>> {
        (0..self.output.len())
            .map(|i| {
                // SAFETY: meta datum `i` of `b` is of meta column i's type, whose byval/len of_store read, and is
                // valid while `b`'s tuple is; the copy is palloc'd in the current memory context.
                b.meta_datum(i).map(|d| unsafe { crate::pg::datum::copy_datum(d, self.byval[i].0, self.byval[i].1) })
            })
            .collect()
    }

    /// The meta values as text: None for a table without meta columns or a
    /// NULL single meta value.
    pub fn text(&mut self, values: &[Option<pg_sys::Datum>]) -> Option<String> {
        let mut parts: Vec<Option<String>> = Vec::with_capacity(values.len());
        for (i, v) in values.iter().enumerate() {
            // SAFETY: output[i] is meta column i's output function (of_store) applied to a value of that column;
            // it returns a palloc'd NUL-terminated string, copied into a String at once.
            parts.push(v.map(|d| unsafe { CStr::from_ptr(pg_sys::OutputFunctionCall(&mut self.output[i], d)) }.to_string_lossy().into_owned()));
        }
        match parts.len() {
            0 => None,
            1 => parts.pop().flatten(),
            _ => Some(row_literal(&parts)),
        }
    }

    /// The order of ORDER BY meta_1, meta_2, ... (ascending, NULLs last).
    pub fn compare(&mut self, a: &[Option<pg_sys::Datum>], b: &[Option<pg_sys::Datum>]) -> Ordering {
        for i in 0..a.len() {
            let o = match (a[i], b[i]) {
                (None, None) => Ordering::Equal,
                (None, Some(_)) => Ordering::Greater,
                (Some(_), None) => Ordering::Less,
                (Some(x), Some(y)) => match &mut self.compare[i] {
                    // SAFETY: `f` is meta column i's btree comparison (of_store), applied with the column's collation
                    // to two non-NULL values of that column.
                    Some((f, coll)) => (unsafe { pg_sys::FunctionCall2Coll(f, *coll, x, y) }.value() as i32).cmp(&0),
                    None => Ordering::Equal,
                },
            };
            if o != Ordering::Equal {
                return o;
            }
        }
        Ordering::Equal
    }
}

/// A row literal as `record_out` writes it: NULL as nothing, values quoted
/// where they are empty or hold quotes, backslashes, parentheses, commas or
/// white space, with quotes and backslashes doubled.
pub(super) fn row_literal(parts: &[Option<String>]) -> String {
    let mut out = String::from("(");
    for (i, p) in parts.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let Some(v) = p else { continue };
        let quote = v.is_empty() || v.chars().any(|c| matches!(c, '"' | '\\' | '(' | ')' | ',' | '\x0B') || c.is_ascii_whitespace());
        if quote {
            out.push('"');
        }
        for c in v.chars() {
            if c == '"' || c == '\\' {
                out.push(c);
            }
            out.push(c);
        }
        if quote {
            out.push('"');
        }
    }
    out.push(')');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_literals_quote_as_record_out() {
        let s = |v: &str| Some(v.to_string());
        assert_eq!(row_literal(&[s("a"), s("us")]), "(a,us)");
        assert_eq!(row_literal(&[s("a b"), None, s("")]), "(\"a b\",,\"\")");
        assert_eq!(row_literal(&[s("x\"y"), s("p\\q"), s("(1,2)")]), "(\"x\"\"y\",\"p\\\\q\",\"(1,2)\")");
    }
}
