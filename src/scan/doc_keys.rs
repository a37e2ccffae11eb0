//! Which top-level keys of its jsonb columns a SELECT reads: where every use
//! of such a column in the whole query is a key accessor with a constant key
//! (`doc->'k'`, `doc->>'k'`, `doc #>> '{k,...}'`, `jsonb_extract_path(doc,
//! 'k', ...)`, `doc['k']`, `doc ? 'k'`, `doc ?| / ?& '{k,...}'`, `doc @>
//! '{"k": ...}'`, an array element, `doc IS [NOT] NULL`), the scan may
//! decode only those keys' sub-columns: each accessor's answer depends on
//! its key's value alone, so an object holding just those keys answers
//! every one of them as the whole document would. Any other use (the column
//! itself, a whole row, a key that is no constant) reads the documents whole.
//!
//! The whole query is walked, not the scan's expressions: an aggregate or a
//! join above the scan takes the column from it and applies the accessor
//! itself. Only plain SELECTs without row locks are narrowed.

use crate::pg::datum::{Layout, datum_bytes};
use crate::pg::nodes::list_ptrs;
use pgrx::pg_sys;
use std::collections::BTreeMap;
use std::collections::BTreeSet;
use tsbucket_format::ColumnKind;
use tsbucket_format::jsonb::{Value, parse};

// Built-in functions behind the accessors (pg_proc OIDs, fixed since 9.4).
const F_OBJECT_FIELD: u32 = 3478; // ->
const F_OBJECT_FIELD_TEXT: u32 = 3214; // ->>
const F_ARRAY_ELEMENT: u32 = 3215; // -> int
const F_ARRAY_ELEMENT_TEXT: u32 = 3216; // ->> int
const F_EXTRACT_PATH: u32 = 3217; // #>, jsonb_extract_path
const F_EXTRACT_PATH_TEXT: u32 = 3940; // #>>, jsonb_extract_path_text
const F_CONTAINS: u32 = 4046; // @>
const F_EXISTS: u32 = 4047; // ?
const F_EXISTS_ANY: u32 = 4048; // ?|
const F_EXISTS_ALL: u32 = 4049; // ?&

/// Per jsonb attnum read only through accessors: the top-level keys they name.
pub type Keys = Vec<(i16, Vec<Vec<u8>>)>;

struct Walk {
    relid: u32,
    depth: u32,
    /// attnum -> Some(keys) while only accessors use it, None once read whole.
    uses: BTreeMap<i16, Option<BTreeSet<Vec<u8>>>>,
    whole_row: bool,
}

impl Walk {
    fn whole(&mut self, attnum: i16) {
        self.uses.insert(attnum, None);
    }

    fn keys(&mut self, attnum: i16, keys: impl IntoIterator<Item = Vec<u8>>) {
        let entry = self.uses.entry(attnum).or_insert_with(|| Some(BTreeSet::new()));
        if let Some(set) = entry {
            set.extend(keys);
        }
    }
}

/// The keys of range-table entry `relid`'s jsonb columns the query of `root`
/// reads, for those read only through key accessors.
///
/// # Safety
/// `root` must be the PlannerInfo planning a query that scans `relid`.
pub unsafe fn of_query(root: *mut pg_sys::PlannerInfo, relid: u32) -> Keys {
    // SAFETY: `root.parse` is the Query being planned (of_query's contract).
    let parse = unsafe { (*root).parse };
    // SAFETY: `parse` is that Query; its command and row marks are plain fields.
    if unsafe { (*parse).commandType != pg_sys::CmdType::CMD_SELECT || !(*parse).rowMarks.is_null() } {
        return Vec::new();
    }
    let mut walk = Walk { relid, depth: 0, uses: BTreeMap::new(), whole_row: false };
    // SAFETY: `parse` is a valid Query; query_tree_walker visits its expressions (sub-queries, CTEs and range-table
    // functions included) and calls `walker` with `walk`, which outlives the call.
    unsafe { pg_sys::query_tree_walker(parse, Some(walker), &mut walk as *mut Walk as *mut std::ffi::c_void, 0) };
    if walk.whole_row {
        return Vec::new();
    }
    walk.uses.into_iter().filter_map(|(a, k)| k.map(|k| (a, k.into_iter().collect()))).collect()
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn walker(node: *mut pg_sys::Node, context: *mut std::ffi::c_void) -> bool {
    if node.is_null() {
        return false;
    }
    // SAFETY: `context` is the Walk of_query passed to query_tree_walker, alive for the whole walk.
    let walk = unsafe { &mut *(context as *mut Walk) };
    // SAFETY: `node` is a node of the Query tree being walked; its tag says which struct it is.
    match unsafe { (*node).type_ } {
        pg_sys::NodeTag::T_Query => {
            walk.depth += 1;
            // SAFETY: a T_Query node is a Query (a sub-query); its Vars of our relation have varlevelsup one higher.
            let stop = unsafe { pg_sys::query_tree_walker(node as *mut pg_sys::Query, Some(walker), context, 0) };
            walk.depth -= 1;
            return stop;
        }
        pg_sys::NodeTag::T_Var => {
            // SAFETY: a T_Var node is a Var.
            let v = unsafe { &*(node as *mut pg_sys::Var) };
            if v.varno as u32 == walk.relid && v.varlevelsup == walk.depth {
                if v.varattno == 0 {
                    walk.whole_row = true;
                } else if v.vartype == pg_sys::JSONBOID {
                    walk.whole(v.varattno);
                }
            }
            return false;
        }
        _ => {}
    }
    // SAFETY: `node` is a node of the tree; accessor only reads it.
    if let Some((attnum, keys, rest)) = unsafe { accessor(walk, node) } {
        walk.keys(attnum, keys);
        // The other arguments may read columns too (not our Var: it is accounted for).
        for arg in rest {
            // SAFETY: `arg` is an argument expression of `node`, part of the same tree.
            if unsafe { walker(arg, context) } {
                return true;
            }
        }
        return false;
    }
    // SAFETY: `node` is a valid expression node; expression_tree_walker calls `walker` on each child.
    unsafe { pg_sys::expression_tree_walker(node, Some(walker), context) }
}

/// The attnum of `n` when it is a jsonb Var of range-table entry `relid`, `depth` query levels up.
unsafe fn jsonb_var(relid: u32, depth: u32, n: *mut pg_sys::Node) -> Option<i16> {
    // SAFETY: `n` is NULL or a node of the tree (the caller's contract).
    if n.is_null() || unsafe { (*n).type_ } != pg_sys::NodeTag::T_Var {
        return None;
    }
    // SAFETY: tagged T_Var.
    let v = unsafe { &*(n as *mut pg_sys::Var) };
    (v.varno as u32 == relid && v.varlevelsup == depth && v.varattno > 0 && v.vartype == pg_sys::JSONBOID).then_some(v.varattno)
}

/// Our jsonb Var, when `n` is one (at the walk's query level).
unsafe fn our_var(walk: &Walk, n: *mut pg_sys::Node) -> Option<i16> {
    // SAFETY: `n` is NULL or a node of the tree (the caller's contract), as jsonb_var requires.
    unsafe { jsonb_var(walk.relid, walk.depth, n) }
}

/// When `node` applies a key accessor to our jsonb Var with constant keys:
/// (attnum, the top-level keys it reads, its other arguments).
unsafe fn accessor(walk: &Walk, node: *mut pg_sys::Node) -> Option<(i16, Vec<Vec<u8>>, Vec<*mut pg_sys::Node>)> {
    // SAFETY: `node` is a node of the tree (the caller's contract).
    let tag = unsafe { (*node).type_ };
    let args = |list: *mut pg_sys::List| -> Vec<*mut pg_sys::Node> {
        // SAFETY: `list` is an argument List of `node`, part of the same tree.
        unsafe { list_ptrs(list) }.into_iter().map(|p| p as *mut pg_sys::Node).collect()
    };
    match tag {
        pg_sys::NodeTag::T_OpExpr | pg_sys::NodeTag::T_FuncExpr => {
            let (func, args) = if tag == pg_sys::NodeTag::T_OpExpr {
                // SAFETY: tagged T_OpExpr, so `node` is an OpExpr.
                let e = unsafe { &*(node as *mut pg_sys::OpExpr) };
                (e.opfuncid.to_u32(), args(e.args))
            } else {
                // SAFETY: tagged T_FuncExpr, so `node` is a FuncExpr.
                let e = unsafe { &*(node as *mut pg_sys::FuncExpr) };
                (e.funcid.to_u32(), args(e.args))
            };
            let [first, second] = args.as_slice() else { return None };
            // SAFETY: both are argument expressions of `node`.
            let attnum = unsafe { our_var(walk, *first) }?;
            // SAFETY: as above; the readers check the node's tag and type before reading it.
            let keys = unsafe {
                match func {
                    F_OBJECT_FIELD | F_OBJECT_FIELD_TEXT | F_EXISTS => vec![const_text(*second)?],
                    F_ARRAY_ELEMENT | F_ARRAY_ELEMENT_TEXT => Vec::new(),
                    F_EXISTS_ANY | F_EXISTS_ALL => const_texts(*second)?,
                    // The first key of the path; an empty path is the document itself.
                    F_EXTRACT_PATH | F_EXTRACT_PATH_TEXT => vec![path_head(*second)?],
                    F_CONTAINS => const_object_keys(*second)?,
                    _ => return None,
                }
            };
            Some((attnum, keys, vec![*second]))
        }
        pg_sys::NodeTag::T_SubscriptingRef => {
            // SAFETY: tagged T_SubscriptingRef.
            let r = unsafe { &*(node as *mut pg_sys::SubscriptingRef) };
            if !r.refassgnexpr.is_null() || !r.reflowerindexpr.is_null() {
                return None;
            }
            // SAFETY: the subscripted expression is part of the tree.
            let attnum = unsafe { our_var(walk, r.refexpr as *mut pg_sys::Node) }?;
            let subscripts = args(r.refupperindexpr);
            let head = *subscripts.first()?;
            // A text subscript names a key; an integer one an array element, or on an object the key of its digits
            // (jsonb_get_element looks the subscript's text up).
            // SAFETY: `head` is the first subscript expression; constant() checks its tag before reading it as a Const.
            let key = match unsafe { constant(head, pg_sys::INT4OID) } {
                Some(d) => (d.value() as i32).to_string().into_bytes(),
                // SAFETY: `head` is the subscript expression, not an int4 Const: const_text checks its tag and type.
                None => unsafe { const_text(head) }?,
            };
            let keys = vec![key];
            Some((attnum, keys, subscripts))
        }
        pg_sys::NodeTag::T_NullTest => {
            // SAFETY: tagged T_NullTest.
            let t = unsafe { &*(node as *mut pg_sys::NullTest) };
            // SAFETY: its argument is part of the tree.
            let attnum = unsafe { our_var(walk, t.arg as *mut pg_sys::Node) }?;
            Some((attnum, Vec::new(), Vec::new()))
        }
        _ => None,
    }
}

pub use tsbucket_format::codec::document::NumberCast as FieldCast;

/// The SQL type a number cast of a field gives (`::float8`, `::int`,
/// `::bigint`) and the layout of its by-value datums; None for `AsIs` (no cast).
pub fn cast_type(cast: FieldCast) -> Option<(pg_sys::Oid, Layout)> {
    Some(match cast {
        FieldCast::Float8 => (pg_sys::FLOAT8OID, Layout { typlen: 8, typbyval: true, kind: ColumnKind::Float64 }),
        FieldCast::Int4 => (pg_sys::INT4OID, Layout { typlen: 4, typbyval: true, kind: ColumnKind::Int }),
        FieldCast::Int8 => (pg_sys::INT8OID, Layout { typlen: 8, typbyval: true, kind: ColumnKind::Int }),
        FieldCast::AsIs => return None,
    })
}

/// The index in `fields` (`rows::DocFields`) of field `key` of document
/// column `column` read with `cast`, added unless there. Each field's
/// sub-column is decoded once per cast: a field read as it is (`AsIs`) shares
/// any entry of the field, and an `AsIs` entry becomes the cast one needs.
pub fn field_index(fields: &mut Vec<(usize, Vec<u8>, FieldCast)>, column: usize, key: &[u8], cast: FieldCast) -> usize {
    let of_field = |(c, k, _): &(usize, Vec<u8>, FieldCast)| *c == column && k[..] == *key;
    if let Some(i) = fields.iter().position(|f| of_field(f) && (f.2 == cast || cast == FieldCast::AsIs)) {
        return i;
    }
    if let Some(i) = fields.iter().position(|f| of_field(f) && f.2 == FieldCast::AsIs) {
        fields[i].2 = cast;
        return i;
    }
    fields.push((column, key.to_vec(), cast));
    fields.len() - 1
}

/// `(doc->>'key')::type` compared with a pseudo-constant, on either side:
/// the field (`numeric_field`), the constant's expression, and whether the
/// field comes first.
///
/// # Safety
/// `a` and `b` must be valid expressions (an operator's two arguments).
pub unsafe fn field_and_constant(a: *mut pg_sys::Node, b: *mut pg_sys::Node, scanrelid: u32) -> Option<((i16, Vec<u8>, FieldCast), *mut pg_sys::Node, bool)> {
    // SAFETY: `a` and `b` are valid expressions (the contract), which numeric_field and is_pseudo_constant only read.
    unsafe {
        match numeric_field(a, scanrelid) {
            Some(f) if crate::pg::nodes::is_pseudo_constant(b) => Some((f, b, true)),
            _ => Some((numeric_field(b, scanrelid).filter(|_| crate::pg::nodes::is_pseudo_constant(a))?, a, false)),
        }
    }
}

/// When `e` applies built-in function `funcid` as an operator to a jsonb
/// column of range-table entry `scanrelid` and one other argument: (the
/// column's attnum, that argument).
///
/// # Safety
/// `e` must be a valid expression.
unsafe fn jsonb_operator(e: *mut pg_sys::Node, scanrelid: u32, funcid: u32) -> Option<(i16, *mut pg_sys::Node)> {
    // SAFETY: `e` is a valid expression (the contract), read as an OpExpr only when tagged so.
    let op = unsafe { ((*e).type_ == pg_sys::NodeTag::T_OpExpr).then(|| &*(e as *mut pg_sys::OpExpr))? };
    if op.opfuncid.to_u32() != funcid {
        return None;
    }
    // SAFETY: `op.args` is the operator's argument List.
    let [var, other] = unsafe { list_ptrs(op.args) }[..] else { return None };
    // SAFETY: `var` is the operator's first argument, a node of the same expression.
    let attnum = unsafe { jsonb_var(scanrelid, 0, var as *mut pg_sys::Node) }?;
    Some((attnum, other as *mut pg_sys::Node))
}

/// When `e` is `(doc->>'key')::float8` (or `::int4`, `::int8`) of a jsonb
/// column of range-table entry `scanrelid` and a constant key: (its attnum,
/// the key, the cast). The scan reads such a field from its sub-column.
///
/// # Safety
/// `e` must be a valid expression.
pub unsafe fn numeric_field(e: *mut pg_sys::Node, scanrelid: u32) -> Option<(i16, Vec<u8>, FieldCast)> {
    // SAFETY: `e` is a valid expression (the contract), read as a CoerceViaIO only when tagged so.
    let coerce = unsafe { ((*e).type_ == pg_sys::NodeTag::T_CoerceViaIO).then(|| &*(e as *mut pg_sys::CoerceViaIO))? };
    let cast = match coerce.resulttype {
        pg_sys::FLOAT8OID => FieldCast::Float8,
        pg_sys::INT4OID => FieldCast::Int4,
        pg_sys::INT8OID => FieldCast::Int8,
        _ => return None,
    };
    // SAFETY: the coercion's argument is a node of the same expression.
    let (attnum, key) = unsafe { text_field(coerce.arg as *mut pg_sys::Node, scanrelid) }?;
    Some((attnum, key, cast))
}

/// When `e` is `doc ? 'key'` on a jsonb column of range-table entry
/// `scanrelid` with a constant key: (its attnum, the key).
///
/// # Safety
/// `e` must be a valid expression.
pub unsafe fn key_exists(e: *mut pg_sys::Node, scanrelid: u32) -> Option<(i16, Vec<u8>)> {
    // SAFETY: `e` is a valid expression (the contract).
    let (attnum, key) = unsafe { jsonb_operator(e, scanrelid, F_EXISTS) }?;
    // SAFETY: `key` is the operator's second argument; const_text checks its tag and type before reading it.
    Some((attnum, unsafe { const_text(key) }?))
}

/// When `e` is `doc->>'key'` of a jsonb column of range-table entry
/// `scanrelid` and a constant key: (its attnum, the key).
///
/// # Safety
/// `e` must be a valid expression.
pub unsafe fn text_field(e: *mut pg_sys::Node, scanrelid: u32) -> Option<(i16, Vec<u8>)> {
    // SAFETY: `e` is a valid expression (the contract).
    let (attnum, key) = unsafe { jsonb_operator(e, scanrelid, F_OBJECT_FIELD_TEXT) }?;
    // SAFETY: `key` is the operator's second argument; const_text checks its tag and type before reading it.
    Some((attnum, unsafe { const_text(key) }?))
}

/// When `e` is `doc @> '{"key": "string"}'` (a constant object of one key
/// whose value is a string) on a jsonb column of range-table entry
/// `scanrelid`: (its attnum, the key, the string).
///
/// # Safety
/// `e` must be a valid expression.
pub unsafe fn contains_string(e: *mut pg_sys::Node, scanrelid: u32) -> Option<(i16, Vec<u8>, Vec<u8>)> {
    // SAFETY: `e` is a valid expression (the contract).
    let (attnum, object) = unsafe { jsonb_operator(e, scanrelid, F_CONTAINS) }?;
    // SAFETY: `object` is the operator's second argument; constant() checks its tag and type before reading it.
    let d = unsafe { constant(object, pg_sys::JSONBOID) }?;
    // SAFETY: `d` is a non-NULL jsonb datum: datum_bytes reads its data (detoasted if need be) while `d` lives.
    let bytes = unsafe { datum_bytes(&d, Layout { typlen: -1, typbyval: false, kind: ColumnKind::Document }) };
    match parse(bytes).ok()? {
        Value::Object(mut pairs) if pairs.len() == 1 => match pairs.pop()? {
            (key, Value::String(s)) => Some((attnum, key, s)),
            _ => None,
        },
        _ => None,
    }
}

/// A non-NULL constant of type `typid`.
unsafe fn constant(n: *mut pg_sys::Node, typid: pg_sys::Oid) -> Option<pg_sys::Datum> {
    // SAFETY: `n` is a node of the tree (the caller's contract); a T_Const is a Const.
    unsafe {
        if (*n).type_ != pg_sys::NodeTag::T_Const {
            return None;
        }
        let c = n as *mut pg_sys::Const;
        ((*c).consttype == typid && !(*c).constisnull).then_some((*c).constvalue)
    }
}

/// A text datum's bytes, as the server encoding has them (jsonb keeps keys so).
///
/// # Safety
/// `d` must be a non-NULL text datum.
unsafe fn text_bytes(d: pg_sys::Datum) -> Vec<u8> {
    // SAFETY: a text datum (the contract) is a varlena; datum_bytes detoasts it if need be.
    unsafe { datum_bytes(&d, Layout { typlen: -1, typbyval: false, kind: ColumnKind::Bytes }) }.to_vec()
}

unsafe fn const_text(n: *mut pg_sys::Node) -> Option<Vec<u8>> {
    // SAFETY: a non-NULL text constant's datum is a text varlena.
    let d = unsafe { constant(n, pg_sys::TEXTOID) }?;
    // SAFETY: `d` is that non-NULL text datum.
    Some(unsafe { text_bytes(d) })
}

/// The elements of a text[] datum (None for NULL ones).
///
/// # Safety
/// `d` must be a non-NULL text[] datum.
unsafe fn text_array(d: pg_sys::Datum) -> Vec<Option<Vec<u8>>> {
    // SAFETY: `d` is a text[] datum (the contract): detoasted, then split by array_elements; each element is a text
    // datum pointing into the detoasted array, read while this memory context lives.
    unsafe {
        let array = pg_sys::pg_detoast_datum(d.cast_mut_ptr()) as *mut pg_sys::ArrayType;
        crate::pg::datum::array_elements(array).into_iter().map(|e| e.map(|t| text_bytes(t))).collect()
    }
}

unsafe fn const_texts(n: *mut pg_sys::Node) -> Option<Vec<Vec<u8>>> {
    // SAFETY: a non-NULL text[] constant's datum is a text array.
    let d = unsafe { constant(n, pg_sys::TEXTARRAYOID) }?;
    // SAFETY: `d` is that non-NULL text[] datum; NULL elements name no key (?| and ?& skip them).
    Some(unsafe { text_array(d) }.into_iter().flatten().collect())
}

/// The first element of a path: a text[] constant, or an ARRAY[...] whose first element is a text constant.
unsafe fn path_head(n: *mut pg_sys::Node) -> Option<Vec<u8>> {
    // SAFETY: `n` is a node of the tree; an ArrayExpr's elements are its nodes.
    unsafe {
        if (*n).type_ == pg_sys::NodeTag::T_ArrayExpr {
            let first = *list_ptrs((*(n as *mut pg_sys::ArrayExpr)).elements).first()?;
            return const_text(first as *mut pg_sys::Node);
        }
        // A NULL first element (the path's answer is NULL then) is not taken as a key: the document is read whole.
        let d = constant(n, pg_sys::TEXTARRAYOID)?;
        text_array(d).into_iter().next()?
    }
}

/// The top-level keys of a constant jsonb object (`@>`'s right side).
unsafe fn const_object_keys(n: *mut pg_sys::Node) -> Option<Vec<Vec<u8>>> {
    // SAFETY: a non-NULL jsonb constant's datum is a jsonb varlena.
    let d = unsafe { constant(n, pg_sys::JSONBOID) }?;
    // SAFETY: `d` is a jsonb datum: datum_bytes reads its data (detoasted if need be) while `d` lives.
    let bytes = unsafe { datum_bytes(&d, Layout { typlen: -1, typbyval: false, kind: ColumnKind::Document }) };
    match parse(bytes).ok()? {
        Value::Object(pairs) => Some(pairs.into_iter().map(|(k, _)| k).collect()),
        _ => None,
    }
}
