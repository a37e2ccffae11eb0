//! Conditions on measurement and time columns evaluated on the decoded
//! arrays, before any row becomes a tuple: comparisons with a constant or
//! parameter, `= ANY (array)` / `IN`, `IS [NOT] NULL`, combined by AND, OR and
//! NOT, in SQL's three-valued logic (`tsbucket_kernels::predicate`). The
//! planner side (`plan`) recognises them in a scan's quals; at scan start the
//! constants are evaluated (`VectorPlan::bind`) and each bucket's rows get a
//! pass mask (`VectorFilter::mask`).

use crate::pg::nodes::{is_pseudo_constant, list_ptrs, strip};
use crate::scan::prune::{Bound, datum_bound, missing_bound};
use crate::store::bucket::LoadedBucket;
use pgrx::pg_sys;
use tsbucket_format::codec::document::{CastValue, NumberCast};
use tsbucket_format::{ColumnKind, Values};
use tsbucket_kernels::predicate::{Pred, Truth, float_order, satisfies};

/// A leaf, its constants still expressions (parameters are known only at scan start).
pub(super) enum PlanLeaf {
    Compare { attr: usize, strategy: i32, value: *mut pg_sys::ExprState, kind: ColumnKind, typlen: i16 },
    In { attr: usize, array: *mut pg_sys::ExprState, kind: ColumnKind, typlen: i16 },
    IsNull { attr: usize, negated: bool },
    /// `(doc->>'key')::float8 <op> value` (or `::int4`, `::int8`): `field`
    /// indexes the scan's document fields (`rows::DocFields`), read from
    /// their sub-columns.
    Field { field: usize, cast: NumberCast, strategy: i32, value: *mut pg_sys::ExprState, kind: ColumnKind, typlen: i16 },
    /// `doc ? 'key'`: whether the key is there, read from its sub-column.
    Exists { field: usize },
    /// `doc->>'key' = value` (`<>` when `negated`), of a deterministic
    /// collation: the field's strings compared byte for byte.
    Text { field: usize, value: *mut pg_sys::ExprState, negated: bool },
    /// `doc @> '{"key": "string"}'`: the field holds that string.
    Contains { field: usize, value: Vec<u8> },
}

/// A leaf with its constants.
pub(super) enum Leaf {
    /// `value` None: compared with NULL (NULL for every row).
    Compare { attr: usize, strategy: i32, value: Option<Bound> },
    In { attr: usize, values: Vec<Bound>, has_null: bool },
    IsNull { attr: usize, negated: bool },
    Field { field: usize, cast: NumberCast, strategy: i32, value: Option<Bound> },
    Exists { field: usize },
    /// `value` None: compared with NULL.
    Text { field: usize, value: Option<Vec<u8>>, negated: bool },
    Contains { field: usize, value: Vec<u8> },
}

pub(super) struct VectorPlan {
    pub pred: Pred<PlanLeaf>,
    /// Whether the mask decides the qual: false when a field leaf may meet
    /// rows only Postgres can cast (a string, a boolean...). The mask then
    /// passes every row the qual may pass (such rows as both true and false,
    /// which AND, OR and NOT carry soundly), and the qual still runs on them.
    pub exact: bool,
}

pub struct VectorFilter {
    /// One condition per qual, ANDed; with whether it is exact (`VectorPlan::exact`).
    preds: Vec<(Pred<Leaf>, bool)>,
    /// Per attribute (attnum - 1): the value in buckets written before the
    /// column was added (its default, for the by-value types comparisons read),
    /// and whether that default is NULL (for IS [NOT] NULL of any type).
    missing: Vec<Option<Bound>>,
    missing_null: Vec<bool>,
    /// The attributes the filter reads decoded (`VectorPlan::attrs`).
    attrs: Vec<usize>,
}

/// Types whose order is that of their stored signed integer or float (not
/// oid, "char" or pg_lsn, which compare unsigned).
const SIGNED_ORDER: [pg_sys::Oid; 9] = [
    pg_sys::INT2OID, pg_sys::INT4OID, pg_sys::INT8OID, pg_sys::DATEOID, pg_sys::TIMEOID,
    pg_sys::TIMESTAMPOID, pg_sys::TIMESTAMPTZOID, pg_sys::FLOAT4OID, pg_sys::FLOAT8OID,
];

const INTS: [pg_sys::Oid; 3] = [pg_sys::INT2OID, pg_sys::INT4OID, pg_sys::INT8OID];

const FLOATS: [pg_sys::Oid; 2] = [pg_sys::FLOAT4OID, pg_sys::FLOAT8OID];

/// The payload column (time or measurement, decoded) `n` is, if a plain Var of the scan.
unsafe fn payload_column(n: *mut pg_sys::Node, rel: pg_sys::Relation, scanrelid: u32, meta_attnums: &[i16]) -> Option<usize> {
    // SAFETY: `n` is an argument node of one of the scan's qual clauses (plan_node's callers), alive for the whole plan.
    let n = unsafe { strip(n) };
    // SAFETY: `n` (casts stripped) is still a node of that qual tree; its tag says which node struct it is.
    if unsafe { (*n).type_ } != pg_sys::NodeTag::T_Var {
        return None;
    }
    let v = n as *mut pg_sys::Var;
    // SAFETY: `n` is tagged T_Var (checked above), so `v` points to a whole Var.
    let (varno, varlevelsup, varattno) = unsafe { ((*v).varno, (*v).varlevelsup, (*v).varattno) };
    if varno as u32 != scanrelid || varlevelsup != 0 || varattno <= 0 || meta_attnums.contains(&varattno) {
        return None;
    }
    // SAFETY: `rel` is the scan's open relation and `varattno` a positive attnum of one of its Vars, so `varattno - 1` is
    // below the natts of its descriptor.
    let att = unsafe { &*crate::pg::relation::tuple_desc_attr((*rel).rd_att, varattno as usize - 1) };
    (!att.attisdropped).then_some(varattno as usize - 1)
}

/// For `column <op> value`: the btree strategy of `op` in the column type's
/// default family, when the value is of the column's type or another width
/// of integer or float (compared as the stored i64 / f64), and the value's
/// storage kind and length.
pub(crate) unsafe fn comparison(rel: pg_sys::Relation, attr: usize, op: pg_sys::Oid, value_type: pg_sys::Oid, column_first: bool) -> Option<(i32, ColumnKind, i16)> {
    // SAFETY: `rel` is the scan's open relation and `attr` (attnum - 1) one of its columns, found as a Var of the quals.
    let column_type = unsafe { (*crate::pg::relation::tuple_desc_attr((*rel).rd_att, attr)).atttypid };
    // SAFETY: catalog reads of the operator and the type's opclass (comparison_of_type).
    unsafe { comparison_of_type(column_type, op, value_type, column_first) }
}

/// `comparison` for a value of type `column_type` (a column's, or a cast's).
///
/// # Safety
/// In a transaction: reads the catalogs for `op` and the types.
pub(crate) unsafe fn comparison_of_type(column_type: pg_sys::Oid, op: pg_sys::Oid, value_type: pg_sys::Oid, column_first: bool) -> Option<(i32, ColumnKind, i16)> {
    if !SIGNED_ORDER.contains(&column_type) {
        return None;
    }
    let (mut left, mut right) = (pg_sys::InvalidOid, pg_sys::InvalidOid);
    // SAFETY: op_input_types reads the pg_operator entry of `op`, the qual's operator, into the locals `left` and `right`.
    unsafe { pg_sys::op_input_types(op, &mut left, &mut right) };
    let (column_side, value_side) = if column_first { (left, right) } else { (right, left) };
    let same_family = column_type == value_type || (INTS.contains(&column_type) && INTS.contains(&value_type)) || (FLOATS.contains(&column_type) && FLOATS.contains(&value_type));
    if column_side != column_type || value_side != value_type || !same_family {
        return None;
    }
    // SAFETY: catalog lookup of the default btree opclass of `column_type`, one of the built-in SIGNED_ORDER types.
    let opclass = unsafe { pg_sys::GetDefaultOpClass(column_type, pg_sys::BTREE_AM_OID) };
    if opclass == pg_sys::InvalidOid {
        return None;
    }
    // SAFETY: `opclass` is an existing btree opclass (checked above) and `op` an existing operator; both calls read the catalogs.
    let strategy = unsafe { pg_sys::get_op_opfamily_strategy(op, pg_sys::get_opclass_family(opclass)) };
    if !(1..=5).contains(&strategy) {
        return None;
    }
    let strategy = if column_first { strategy } else { 6 - strategy };
    let (mut len, mut byval) = (0i16, false);
    // SAFETY: get_typlenbyval reads the pg_type entry of `value_type`, the constant side's type, into the locals `len` and `byval`.
    unsafe { pg_sys::get_typlenbyval(value_type, &mut len, &mut byval) };
    Some((strategy, crate::pg::datum::kind_for_type(value_type, len, byval), len))
}

/// The vector form of `qual`, if every part of it has one. Document fields
/// it compares are added to `fields` (the leaves index them).
///
/// # Safety
/// `qual` is one of the scan node's quals; its constants are compiled for `ps`.
pub(super) unsafe fn plan(
    qual: *mut pg_sys::Node,
    rel: pg_sys::Relation,
    scanrelid: u32,
    meta_attnums: &[i16],
    ps: *mut pg_sys::PlanState,
    fields: &mut Vec<(usize, Vec<u8>, NumberCast)>,
) -> Option<VectorPlan> {
    let mut planned = fields.clone();
    // SAFETY: `qual` is one of the scan node's quals and `ps` its PlanState, as plan's contract requires of both.
    let pred = unsafe { plan_node(qual, rel, scanrelid, meta_attnums, ps, &mut planned) }?;
    // (Fields are added only when the whole qual plans: `planned` is a copy.)
    let exact = !has_field(&pred);
    *fields = planned;
    Some(VectorPlan { pred, exact })
}

fn has_field(p: &Pred<PlanLeaf>) -> bool {
    match p {
        Pred::And(ps) | Pred::Or(ps) => ps.iter().any(has_field),
        Pred::Not(x) => has_field(x),
        Pred::Leaf(l) => matches!(l, PlanLeaf::Field { .. } | PlanLeaf::Exists { .. } | PlanLeaf::Text { .. } | PlanLeaf::Contains { .. }),
    }
}

/// `doc ? 'key'` on a document column of the scan (not a meta column's: those
/// run per bucket): the leaf, its field added to `fields` unless there. The
/// key's sub-column says which objects hold it; a row whose document is no
/// object (where `?` looks at an array's strings) or SQL NULL counts as both
/// true and false, and the operator, still run on the rows that pass, decides.
///
/// # Safety
/// `n` is a qual of the scan or a part of one.
unsafe fn exists_leaf(n: *mut pg_sys::Node, scanrelid: u32, meta: &[i16], fields: &mut Vec<(usize, Vec<u8>, NumberCast)>) -> Option<PlanLeaf> {
    // SAFETY: `n` is a valid expression of the qual (the contract).
    let (attnum, key) = unsafe { crate::scan::doc_keys::key_exists(n, scanrelid) }?;
    if meta.contains(&attnum) {
        return None;
    }
    // Any cast of the field reads its presence: the sub-column is decoded once.
    let field = crate::scan::doc_keys::field_index(fields, attnum as usize - 1, &key, NumberCast::AsIs);
    Some(PlanLeaf::Exists { field })
}

/// `doc->>'key' = value` (or `<>`, either way round) of a deterministic
/// collation, or `doc @> '{"key": "string"}'`, on a document column of the
/// scan: the leaf, its field added to `fields` unless there. A row whose
/// field holds a string is decided on it; one holding anything else (a
/// number's text, an object's), or whose document is no object, counts as
/// both true and false, and the operator decides.
///
/// # Safety
/// `n` is a qual of the scan or a part of one; `ps` the scan's PlanState.
unsafe fn text_leaf(n: *mut pg_sys::Node, scanrelid: u32, meta: &[i16], ps: *mut pg_sys::PlanState, fields: &mut Vec<(usize, Vec<u8>, NumberCast)>) -> Option<PlanLeaf> {
    // SAFETY: `n` is a valid expression of the qual (the contract).
    if let Some((attnum, key, value)) = unsafe { crate::scan::doc_keys::contains_string(n, scanrelid) } {
        if meta.contains(&attnum) {
            return None;
        }
        let field = crate::scan::doc_keys::field_index(fields, attnum as usize - 1, &key, NumberCast::AsIs);
        return Some(PlanLeaf::Contains { field, value });
    }
    // SAFETY: `n` is a valid expression (the contract), read as an OpExpr only when tagged so.
    let op = unsafe { ((*n).type_ == pg_sys::NodeTag::T_OpExpr).then(|| &*(n as *mut pg_sys::OpExpr))? };
    let negated = match op.opno.to_u32() {
        TEXT_EQ => false,
        TEXT_NE => true,
        _ => return None,
    };
    // SAFETY: `op.args` is the operator's argument List.
    let [a, b]: [*mut std::ffi::c_void; 2] = unsafe { list_ptrs(op.args) }.try_into().ok()?;
    let (a, b) = (a as *mut pg_sys::Node, b as *mut pg_sys::Node);
    // SAFETY: `a` and `b` are the operator's arguments, valid expressions that text_field and is_pseudo_constant only read.
    let ((attnum, key), other) = unsafe {
        match crate::scan::doc_keys::text_field(a, scanrelid) {
            Some(f) if is_pseudo_constant(b) => (f, b),
            _ => (crate::scan::doc_keys::text_field(b, scanrelid).filter(|_| is_pseudo_constant(a))?, a),
        }
    };
    // SAFETY: exprType reads the constant side's type.
    if meta.contains(&attnum) || unsafe { pg_sys::exprType(other) } != pg_sys::TEXTOID {
        return None;
    }
    // No collation (two that conflict): texteq raises its error when it runs, as on heap.
    // SAFETY: the lookup reads pg_collation for a valid OID.
    if op.inputcollid == pg_sys::InvalidOid || !unsafe { pg_sys::get_collation_isdeterministic(op.inputcollid) } {
        return None;
    }
    let field = crate::scan::doc_keys::field_index(fields, attnum as usize - 1, &key, NumberCast::AsIs);
    // SAFETY: ExecInitExpr compiles `other`, a pseudo-constant of the scan's quals, for `ps`, the scan node's PlanState.
    let value = unsafe { pg_sys::ExecInitExpr(other as *mut pg_sys::Expr, ps) };
    Some(PlanLeaf::Text { field, value, negated })
}

/// text = text and text <> text (pg_operator OIDs, fixed).
const TEXT_EQ: u32 = 98;
const TEXT_NE: u32 = 531;

/// `(doc->>'key')::type <op> value` or the other way round: the field leaf,
/// its field added to `fields` unless there.
///
/// # Safety
/// `a` and `b` are the two arguments of the qual's operator `opno`; `ps` the scan's PlanState.
unsafe fn field_leaf(
    a: *mut pg_sys::Node,
    b: *mut pg_sys::Node,
    opno: pg_sys::Oid,
    scanrelid: u32,
    meta: &[i16],
    ps: *mut pg_sys::PlanState,
    fields: &mut Vec<(usize, Vec<u8>, NumberCast)>,
) -> Option<PlanLeaf> {
    // SAFETY: `a` and `b` are argument expressions of the qual (the contract).
    let ((attnum, key, cast), other, field_first) = unsafe { crate::scan::doc_keys::field_and_constant(a, b, scanrelid) }?;
    // A meta column's fields are the same in every row: meta_only_quals runs them per bucket.
    if attnum <= 0 || meta.contains(&attnum) {
        return None;
    }
    let (cast_type, _) = crate::scan::doc_keys::cast_type(cast)?;
    // SAFETY: exprType reads the constant side's type; comparison_of_type reads the operator's catalog entries.
    let (strategy, kind, typlen) = unsafe { comparison_of_type(cast_type, opno, pg_sys::exprType(other), field_first) }?;
    let field = crate::scan::doc_keys::field_index(fields, attnum as usize - 1, &key, cast);
    // SAFETY: ExecInitExpr compiles `other`, a pseudo-constant of the scan's quals, for `ps`, the scan node's PlanState.
    let value = unsafe { pg_sys::ExecInitExpr(other as *mut pg_sys::Expr, ps) };
    Some(PlanLeaf::Field { field, cast, strategy, value, kind, typlen })
}

unsafe fn plan_node(
    n: *mut pg_sys::Node,
    rel: pg_sys::Relation,
    scanrelid: u32,
    meta: &[i16],
    ps: *mut pg_sys::PlanState,
    fields: &mut Vec<(usize, Vec<u8>, NumberCast)>,
) -> Option<Pred<PlanLeaf>> {
    // SAFETY: `n` is a qual of the scan node or a part of one (plan's contract, passed down), alive for the whole plan.
    let tag = unsafe { (*n).type_ };
    match tag {
        pg_sys::NodeTag::T_BoolExpr => {
            let b = n as *mut pg_sys::BoolExpr;
            // SAFETY: `n` is tagged T_BoolExpr, so `b` points to one; its `args` is a List of its argument nodes.
            let arg_nodes = unsafe { list_ptrs((*b).args) };
            // SAFETY: each argument is a part of the same qual, its constants compiled for the same `ps`.
            let args: Option<Vec<_>> =
                arg_nodes.into_iter().map(|a| unsafe { plan_node(a as *mut pg_sys::Node, rel, scanrelid, meta, ps, fields) }).collect();
            let mut args = args?;
            // SAFETY: `b` is the BoolExpr read above, unchanged by planning its arguments.
            let boolop = unsafe { (*b).boolop };
            Some(match boolop {
                pg_sys::BoolExprType::AND_EXPR => Pred::And(args),
                pg_sys::BoolExprType::OR_EXPR => Pred::Or(args),
                _ => Pred::Not(Box::new(args.pop()?)),
            })
        }
        pg_sys::NodeTag::T_NullTest => {
            let t = n as *mut pg_sys::NullTest;
            // SAFETY: `n` is tagged T_NullTest, so `t` points to a whole NullTest of the qual.
            let (argisrow, arg, nulltesttype) = unsafe { ((*t).argisrow, (*t).arg, (*t).nulltesttype) };
            // Row-valued IS NULL (argisrow) means something else.
            if argisrow {
                return None;
            }
            // SAFETY: `arg` is the NullTest's argument expression, of the same qual; `rel` is the scan's open relation.
            let attr = unsafe { payload_column(arg as *mut pg_sys::Node, rel, scanrelid, meta) }?;
            Some(Pred::Leaf(PlanLeaf::IsNull { attr, negated: nulltesttype == pg_sys::NullTestType::IS_NOT_NULL }))
        }
        pg_sys::NodeTag::T_OpExpr => {
            // SAFETY: `n` is a qual node (the contract); exists_leaf reads it as an OpExpr only when tagged so.
            if let Some(leaf) = unsafe { exists_leaf(n, scanrelid, meta, fields) } {
                return Some(Pred::Leaf(leaf));
            }
            // SAFETY: as for exists_leaf; `ps` is the scan's PlanState, for the constant side.
            if let Some(leaf) = unsafe { text_leaf(n, scanrelid, meta, ps, fields) } {
                return Some(Pred::Leaf(leaf));
            }
            let o = n as *mut pg_sys::OpExpr;
            // SAFETY: `n` is tagged T_OpExpr, so `o` points to one; its `args` is a List of the operator's argument nodes.
            let (args, opno) = unsafe { (list_ptrs((*o).args), (*o).opno) };
            let [a, b] = args.as_slice() else { return None };
            let (a, b) = (*a as *mut pg_sys::Node, *b as *mut pg_sys::Node);
            // SAFETY: `a` and `b` are the OpExpr's two argument nodes, of the qual; `ps` the scan's PlanState.
            if let Some(leaf) = unsafe { field_leaf(a, b, opno, scanrelid, meta, ps, fields) } {
                return Some(Pred::Leaf(leaf));
            }
            // SAFETY: `a` and `b` are the OpExpr's two argument nodes, of the qual; `rel` is the scan's open relation, whose
            // descriptor payload_column reads.
            let (attr, other, column_first) = unsafe {
                match payload_column(a, rel, scanrelid, meta) {
                    Some(attr) if is_pseudo_constant(b) => (attr, b, true),
                    _ => (payload_column(b, rel, scanrelid, meta).filter(|_| is_pseudo_constant(a))?, a, false),
                }
            };
            // SAFETY: `other` is the OpExpr's constant side, whose type exprType reads; `attr` is a column of the open `rel`.
            let (strategy, kind, typlen) = unsafe { comparison(rel, attr, opno, pg_sys::exprType(other), column_first) }?;
            // SAFETY: ExecInitExpr compiles `other`, a pseudo-constant of the scan's quals, for `ps`, the scan node's PlanState.
            let value = unsafe { pg_sys::ExecInitExpr(other as *mut pg_sys::Expr, ps) };
            Some(Pred::Leaf(PlanLeaf::Compare { attr, strategy, value, kind, typlen }))
        }
        pg_sys::NodeTag::T_ScalarArrayOpExpr => {
            let o = n as *mut pg_sys::ScalarArrayOpExpr;
            // SAFETY: `n` is tagged T_ScalarArrayOpExpr, so `o` points to one; its `args` is a List of its two argument nodes.
            let (args, use_or, opno) = unsafe { (list_ptrs((*o).args), (*o).useOr, (*o).opno) };
            let [a, b] = args.as_slice() else { return None };
            let (a, b) = (*a as *mut pg_sys::Node, *b as *mut pg_sys::Node);
            // SAFETY: `b` is the array side of the ScalarArrayOpExpr, a node of the qual that is_pseudo_constant only walks.
            if !use_or || !unsafe { is_pseudo_constant(b) } {
                return None;
            }
            // SAFETY: `a` is the column side and `b` the array side of the qual; `rel` is the scan's open relation, whose
            // descriptor payload_column and comparison read, and exprType and get_element_type read `b`'s type.
            let (attr, (strategy, kind, typlen)) = unsafe {
                let attr = payload_column(a, rel, scanrelid, meta)?;
                let element = pg_sys::get_element_type(pg_sys::exprType(b));
                (attr, comparison(rel, attr, opno, element, true)?)
            };
            if strategy != 3 {
                return None;
            }
            // SAFETY: ExecInitExpr compiles the array expression `b`, a pseudo-constant of the quals, for the scan node's `ps`.
            let array = unsafe { pg_sys::ExecInitExpr(b as *mut pg_sys::Expr, ps) };
            Some(Pred::Leaf(PlanLeaf::In { attr, array, kind, typlen }))
        }
        _ => None,
    }
}

impl VectorPlan {
    /// The filter with this scan's constants and parameters evaluated.
    ///
    /// # Safety
    /// `econtext` is the scan node's; `tupdesc` the table's.
    pub unsafe fn bind(&self, econtext: *mut pg_sys::ExprContext, tupdesc: pg_sys::TupleDesc) -> VectorFilter {
        // SAFETY: `econtext` is the scan node's expression context (bind's contract), the one the leaves were compiled for.
        let pred = unsafe { bind_node(&self.pred, econtext) };
        // SAFETY: `tupdesc` is the table's descriptor (bind's contract), alive while the scan runs.
        let natts = unsafe { (*tupdesc).natts } as usize;
        let mut missing = Vec::with_capacity(natts);
        let mut missing_null = Vec::with_capacity(natts);
        for i in 0..natts {
            // SAFETY: `i` is below the natts of `tupdesc`, the table's descriptor, which missing_bound needs.
            let (bound, isnull) = unsafe { missing_bound(tupdesc, i) };
            missing.push(bound);
            missing_null.push(isnull);
        }
        VectorFilter { preds: vec![(pred, self.exact)], missing, missing_null, attrs: self.attrs() }
    }
}

impl VectorPlan {
    /// The attributes the filter reads (they must be decoded).
    pub fn attrs(&self) -> Vec<usize> {
        fn walk(p: &Pred<PlanLeaf>, out: &mut Vec<usize>) {
            match p {
                Pred::And(ps) | Pred::Or(ps) => ps.iter().for_each(|x| walk(x, out)),
                Pred::Not(x) => walk(x, out),
                Pred::Leaf(PlanLeaf::Compare { attr, .. } | PlanLeaf::In { attr, .. } | PlanLeaf::IsNull { attr, .. }) => out.push(*attr),
                // Read from the field's sub-column (`LoadedBucket::fields`), not the decoded column.
                Pred::Leaf(PlanLeaf::Field { .. } | PlanLeaf::Exists { .. } | PlanLeaf::Text { .. } | PlanLeaf::Contains { .. }) => {}
            }
        }
        let mut out = Vec::new();
        walk(&self.pred, &mut out);
        out
    }
}

unsafe fn bind_node(p: &Pred<PlanLeaf>, econtext: *mut pg_sys::ExprContext) -> Pred<Leaf> {
    match p {
        // SAFETY: the AND's operands were planned for the same scan node, whose expression context `econtext` is.
        Pred::And(ps) => Pred::And(ps.iter().map(|x| unsafe { bind_node(x, econtext) }).collect()),
        // SAFETY: the OR's operands were planned for the same scan node, whose expression context `econtext` is.
        Pred::Or(ps) => Pred::Or(ps.iter().map(|x| unsafe { bind_node(x, econtext) }).collect()),
        // SAFETY: the NOT's operand was planned for the scan node that `econtext` belongs to.
        Pred::Not(x) => Pred::Not(Box::new(unsafe { bind_node(x, econtext) })),
        Pred::Leaf(PlanLeaf::IsNull { attr, negated }) => Pred::Leaf(Leaf::IsNull { attr: *attr, negated: *negated }),
        Pred::Leaf(PlanLeaf::Exists { field }) => Pred::Leaf(Leaf::Exists { field: *field }),
        Pred::Leaf(PlanLeaf::Contains { field, value }) => Pred::Leaf(Leaf::Contains { field: *field, value: value.clone() }),
        Pred::Leaf(PlanLeaf::Text { field, value, negated }) => {
            let mut isnull = false;
            // SAFETY: `value` was compiled by ExecInitExpr for the scan node (text_leaf) and runs in its `econtext`; a
            // non-NULL result is a text datum, whose bytes datum_bytes copies out (detoasted if need be).
            let value = unsafe {
                let d = pg_sys::ExecEvalExprSwitchContext(*value, econtext, &mut isnull);
                (!isnull).then(|| crate::pg::datum::datum_bytes(&d, crate::pg::datum::Layout { typlen: -1, typbyval: false, kind: ColumnKind::Bytes }).to_vec())
            };
            Pred::Leaf(Leaf::Text { field: *field, value, negated: *negated })
        }
        Pred::Leaf(PlanLeaf::Compare { attr, strategy, value, kind, typlen }) => {
            let mut isnull = false;
            // SAFETY: `value` was compiled by ExecInitExpr for the scan node (plan_node) and runs in its `econtext`.
            let d = unsafe { pg_sys::ExecEvalExprSwitchContext(*value, econtext, &mut isnull) };
            Pred::Leaf(Leaf::Compare { attr: *attr, strategy: *strategy, value: (!isnull).then(|| datum_bound(d, *kind, *typlen)) })
        }
        Pred::Leaf(PlanLeaf::Field { field, cast, strategy, value, kind, typlen }) => {
            let mut isnull = false;
            // SAFETY: `value` was compiled by ExecInitExpr for the scan node (field_leaf) and runs in its `econtext`.
            let d = unsafe { pg_sys::ExecEvalExprSwitchContext(*value, econtext, &mut isnull) };
            Pred::Leaf(Leaf::Field { field: *field, cast: *cast, strategy: *strategy, value: (!isnull).then(|| datum_bound(d, *kind, *typlen)) })
        }
        Pred::Leaf(PlanLeaf::In { attr, array, kind, typlen }) => {
            let mut isnull = false;
            // SAFETY: `array` is the = ANY argument ExecInitExpr compiled for the scan node; it runs in that node's `econtext`.
            let d = unsafe { pg_sys::ExecEvalExprSwitchContext(*array, econtext, &mut isnull) };
            if isnull {
                // x = ANY (NULL) is NULL.
                return Pred::Leaf(Leaf::In { attr: *attr, values: Vec::new(), has_null: true });
            }
            // SAFETY: `d` is a non-NULL array datum (the = ANY argument's type), detoasted in the current memory context
            // before array_elements, which needs a detoasted array, reads it.
            let elements = unsafe {
                let array = pg_sys::pg_detoast_datum(d.cast_mut_ptr()) as *mut pg_sys::ArrayType;
                crate::pg::datum::array_elements(array)
            };
            let has_null = elements.iter().any(Option::is_none);
            let values = elements.into_iter().flatten().map(|e| datum_bound(e, *kind, *typlen)).collect();
            Pred::Leaf(Leaf::In { attr: *attr, values, has_null })
        }
    }
}

/// PostgreSQL's comparison of a stored value with a constant of the same family.
fn order(a: Bound, b: Bound) -> std::cmp::Ordering {
    match (a, b) {
        (Bound::Int(x), Bound::Int(y)) => x.cmp(&y),
        (Bound::Float(x), Bound::Float(y)) => float_order(x, y),
        // Not planned (same_family); compare as floats rather than panic.
        (Bound::Int(x), Bound::Float(y)) => float_order(x as f64, y),
        (Bound::Float(x), Bound::Int(y)) => float_order(x, y as f64),
    }
}

/// A leaf's truth for one value (None: NULL).
fn leaf_truth(leaf: &Leaf, v: Option<Bound>) -> Option<bool> {
    match leaf {
        Leaf::IsNull { negated, .. } => Some(v.is_none() != *negated),
        // Never asked: `?` and text are read per row from their sub-columns (exists_truth, text_truth); unknown is
        // the sound answer.
        Leaf::Exists { .. } | Leaf::Text { .. } | Leaf::Contains { .. } => None,
        Leaf::Compare { strategy, value, .. } | Leaf::Field { strategy, value, .. } => Some(satisfies(order(v?, (*value)?), *strategy)),
        // x = ANY ('{}') is false, even for a NULL x.
        Leaf::In { values, has_null: false, .. } if values.is_empty() => Some(false),
        Leaf::In { values, has_null, .. } => {
            let v = v?;
            if values.iter().any(|c| order(v, *c) == std::cmp::Ordering::Equal) {
                Some(true)
            } else if *has_null {
                None
            } else {
                Some(false)
            }
        }
    }
}

/// A field leaf's truth per row. Rows whose field only Postgres can cast
/// (and the rows of a bucket whose documents are read whole, `fields` None)
/// count as both true and false: the mask passes them when the qual may
/// pass, and the qual, still run on the row, decides.
fn field_truth(leaf: &Leaf, cast: NumberCast, fields: Option<&tsbucket_format::codec::document::Fields>, rows: usize) -> Truth {
    let Some(fields) = fields.filter(|f| f.len() == rows) else {
        return Truth { t: vec![true; rows], f: vec![true; rows] };
    };
    let mut t = Vec::with_capacity(rows);
    let mut f = Vec::with_capacity(rows);
    for x in fields.iter() {
        let truth = match cast.of(x) {
            CastValue::Null => leaf_truth(leaf, None),
            CastValue::Float(v) => leaf_truth(leaf, Some(Bound::Float(v))),
            CastValue::Int(v) => leaf_truth(leaf, Some(Bound::Int(v))),
            CastValue::Evaluate => {
                t.push(true);
                f.push(true);
                continue;
            }
        };
        t.push(truth == Some(true));
        f.push(truth == Some(false));
    }
    Truth { t, f }
}

/// `doc ? 'key'` per row: true where the object holds the key (JSON null
/// included), false where it lacks it; both where the document is no object
/// or SQL NULL, or the bucket's documents are read whole (`fields` None).
fn exists_truth(fields: Option<&tsbucket_format::codec::document::Fields>, rows: usize) -> Truth {
    use tsbucket_format::codec::document::Field;
    let Some(fields) = fields.filter(|f| f.len() == rows) else {
        return Truth { t: vec![true; rows], f: vec![true; rows] };
    };
    Truth {
        t: fields.iter().map(|f| !matches!(f, Field::Missing)).collect(),
        f: fields.iter().map(|f| matches!(f, Field::Missing | Field::NoObject)).collect(),
    }
}

/// A text leaf's truth per row: a string decides it; `->>` of a missing
/// key, JSON null or a document that is no object is NULL, and `@>` of a
/// missing key, JSON null or a number false; anything else (a number's or
/// an object's text, `@>` of an array or of a document that is no object,
/// every row of a bucket whose documents are read whole) is both.
fn text_truth(leaf: &Leaf, fields: Option<&tsbucket_format::codec::document::Fields>, rows: usize) -> Truth {
    use tsbucket_format::codec::document::Field;
    let Some(fields) = fields.filter(|f| f.len() == rows) else {
        return Truth { t: vec![true; rows], f: vec![true; rows] };
    };
    let mut t = Vec::with_capacity(rows);
    let mut f = Vec::with_capacity(rows);
    for r in 0..rows {
        let truth: Option<Option<bool>> = match (leaf, fields.string(r), fields.get(r)) {
            (Leaf::Text { value: None, .. }, ..) => Some(None),
            (Leaf::Text { value: Some(v), negated, .. }, Some(s), _) => Some(Some((s == &v[..]) != *negated)),
            (Leaf::Text { .. }, None, Field::Missing | Field::Null | Field::NoObject) => Some(None),
            (Leaf::Contains { value, .. }, Some(s), _) => Some(Some(s == &value[..])),
            (Leaf::Contains { .. }, None, Field::Missing | Field::Null | Field::Decimal(..)) => Some(Some(false)),
            _ => None,
        };
        match truth {
            Some(x) => {
                t.push(x == Some(true));
                f.push(x == Some(false));
            }
            None => {
                t.push(true);
                f.push(true);
            }
        }
    }
    Truth { t, f }
}

/// The rows where a field leaf of `pred` holds what only Postgres casts (all
/// rows where the bucket's documents are read whole); None if none.
fn evaluated_rows(pred: &Pred<Leaf>, bucket: &LoadedBucket) -> Option<Vec<bool>> {
    fn walk(p: &Pred<Leaf>, bucket: &LoadedBucket, out: &mut Option<Vec<bool>>) {
        match p {
            Pred::And(ps) | Pred::Or(ps) => ps.iter().for_each(|x| walk(x, bucket, out)),
            Pred::Not(x) => walk(x, bucket, out),
            Pred::Leaf(Leaf::Field { field, cast, .. }) => {
                let (field, cast) = (*field, *cast);
                let rows = out.get_or_insert_with(|| vec![false; bucket.rows]);
                match bucket.fields.get(field).and_then(Option::as_ref).filter(|f| f.len() == bucket.rows) {
                    Some(fields) => fields.iter().enumerate().filter(|(_, f)| cast.of(*f) == CastValue::Evaluate).for_each(|(r, _)| rows[r] = true),
                    None => rows.iter_mut().for_each(|r| *r = true),
                }
            }
            Pred::Leaf(_) => {}
        }
    }
    let mut out = None;
    walk(pred, bucket, &mut out);
    out.filter(|rows| rows.contains(&true))
}

impl VectorFilter {
    /// Every filter of `filters` (ANDed).
    pub fn all(filters: Vec<VectorFilter>) -> VectorFilter {
        let missing = filters.first().map(|f| f.missing.clone()).unwrap_or_default();
        let missing_null = filters.first().map(|f| f.missing_null.clone()).unwrap_or_default();
        let attrs = filters.iter().flat_map(|f| f.attrs.iter().copied()).collect();
        VectorFilter { preds: filters.into_iter().flat_map(|f| f.preds).collect(), missing, missing_null, attrs }
    }

    /// Whether the filter reads attribute `attr` (attnum - 1) decoded.
    pub fn reads(&self, attr: usize) -> bool {
        self.attrs.contains(&attr)
    }

    /// Which rows of `bucket` the conditions may pass: exact ones where they
    /// are true (not false or NULL); those with field leaves where they may
    /// be true, and wherever a field only Postgres can cast is met. Such a
    /// row goes on to the quals as on heap, which evaluates the cheaper
    /// conditions first (the exact ones, on columns and time) and meets the
    /// failing cast, with its error, on every row that passes them.
    ///
    /// With it, whether the mask decides every condition in this bucket: no
    /// field needs Postgres's cast on any row and every row's truth is known
    /// (`?` met no document that is no object). The conditions then need not
    /// run on its rows: a field holding only decimals the cast reads, or
    /// nothing, compares as the cast's value would, and can raise no error.
    pub fn mask(&self, bucket: &LoadedBucket) -> (Vec<bool>, bool) {
        let rows = bucket.rows;
        // Exact conditions must hold; the others may, unless a field of any of
        // them needs Postgres's cast on the row (quals of equal cost run in
        // the order written: another field's failing cast may come first).
        let mut exact_ok = vec![true; rows];
        let mut inexact_ok = vec![true; rows];
        let mut cast_any = vec![false; rows];
        let mut decided = true;
        for (pred, exact) in &self.preds {
            // A leaf both true and false on a row is one the vector form cannot
            // tell: the condition's truth there is unknown, whatever the
            // combination shows (unknown OR NULL reads as true).
            let mut unknown = false;
            let truth = self.truth(pred, bucket, &mut unknown);
            if !*exact {
                decided &= !unknown && !truth.t.iter().zip(&truth.f).any(|(t, f)| *t && *f);
            }
            let target = if *exact { &mut exact_ok } else { &mut inexact_ok };
            target.iter_mut().zip(&truth.t).for_each(|(o, t)| *o &= *t);
            if !*exact && let Some(e) = evaluated_rows(pred, bucket) {
                cast_any.iter_mut().zip(&e).for_each(|(c, e)| *c |= *e);
                decided = false;
            }
        }
        ((0..rows).map(|r| exact_ok[r] && (inexact_ok[r] || cast_any[r])).collect(), decided)
    }

    fn truth(&self, pred: &Pred<Leaf>, bucket: &LoadedBucket, unknown: &mut bool) -> Truth {
        let rows = bucket.rows;
        let truth = |leaf: &Leaf| -> Truth {
                let attr = match leaf {
                    Leaf::Compare { attr, .. } | Leaf::In { attr, .. } | Leaf::IsNull { attr, .. } => *attr,
                    &Leaf::Field { field, cast, .. } => return field_truth(leaf, cast, bucket.fields.get(field).and_then(Option::as_ref), rows),
                    &Leaf::Exists { field } => return exists_truth(bucket.fields.get(field).and_then(Option::as_ref), rows),
                    Leaf::Text { field, .. } | Leaf::Contains { field, .. } => return text_truth(leaf, bucket.fields.get(*field).and_then(Option::as_ref), rows),
                };
                let Some(col) = &bucket.columns[attr] else {
                    // A column added after the bucket was written: its default in every row.
                    let truth = match leaf {
                        Leaf::IsNull { negated, .. } => Some(self.missing_null[attr] != *negated),
                        _ => leaf_truth(leaf, self.missing[attr]),
                    };
                    return Truth::constant(rows, truth);
                };
                let value = |r: usize| -> Option<Bound> {
                    if col.is_null(r) {
                        return None;
                    }
                    match &col.values {
                        Values::Int(v) => Some(Bound::Int(v[r])),
                        Values::Float(v) => Some(Bound::Float(v[r])),
                        // IS [NOT] NULL of any other kind: only presence counts.
                        _ => Some(Bound::Int(0)),
                    }
                };
                let truths: Vec<Option<bool>> = (0..rows).map(|r| leaf_truth(leaf, value(r))).collect();
                Truth { t: truths.iter().map(|x| *x == Some(true)).collect(), f: truths.iter().map(|x| *x == Some(false)).collect() }
            };
        pred.eval(rows, &mut |leaf: &Leaf| {
            let t = truth(leaf);
            *unknown |= t.t.iter().zip(&t.f).any(|(t, f)| *t && *f);
            t
        })
    }

}
